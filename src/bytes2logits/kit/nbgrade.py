"""nbgrader autograde with scores from the trusted grader, never from a kernel's output.

``nbgrader_config.py`` puts these into ``Autograde.autograde_preprocessors``:

* :class:`SandboxedExecute` — nbgrader's execution (with :class:`~bytes2logits.kit.nbexec.RobustExecute`'s
  recovery from dead kernels), but the kernel runs in the sandbox of :mod:`bytes2logits.kit.sandbox`: no
  network, no view of the hidden suites, ``solutions/``, the gradebook or other students, and no way to
  signal the grader (it talks to nbgrader over Unix sockets in a folder of its own). Its outputs are only
  the learner's feedback.
* :class:`StartTrustedGrading` (first) and :class:`TrustedGrading` (after execution) — grade the
  notebook's sources in a fresh grader process (``python -m bytes2logits.kit.trusted``, which runs the
  code in a worker sandbox of its own) while the kernel runs, then write each autograder cell's feedback:
  the summary line and one line per failed check, never test code.
* :class:`SaveTrustedGrades` — nbgrader's ``SaveAutoGrades``, but each autograder cell's score is the
  trusted grader's, and a task flagged for using the reference needs manual grading.

If the grader process itself fails or runs out of time, every task of that notebook scores 0 and is
flagged for manual grading, and the next submission is graded as usual.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor, SaveAutoGrades
from traitlets import Float

from .build import _nbgrader_meta as _meta
from .labs import find_lab, tool_env
from .nbexec import RobustExecute

__all__ = [
    "SandboxedExecute",
    "SubmittedCellMetadata",
    "SandboxedKernelManager",
    "SaveTrustedGrades",
    "StartTrustedGrading",
    "TrustedGrading",
]

RESOURCE_KEY = "bytes2logits_trusted"


def _socket_home() -> Path:
    """Where a kernel's sockets go: a host tmpfs (``/dev/shm``) when there is one, so that whatever a kernel
    writes there is memory its sandbox's memory cap counts, never disk; else the temporary folder."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


def _reap_kernel_folders(home: Path) -> None:
    """Remove the socket folders of kernels whose grader process has gone (killed before its clean-up)."""
    from .sandbox import _owner_alive

    for d in home.glob("b2l-kernel-*"):
        owner = d.name[len("b2l-kernel-"):]
        if d.is_dir() and not d.is_symlink() and "-" in owner and not _owner_alive(owner):
            shutil.rmtree(d, ignore_errors=True)


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel started inside the sandbox, connected to nbgrader through Unix sockets in its own folder.

    The kernel never runs in ``autograded/<student>/<lab>/``, nor in any folder nbgrader reads or writes
    afterwards: its home and working folder are its sandbox's private tmpfs, empty as the trusted worker's
    is (a lab notebook is self-contained; a file beside it might be anything nbgrader's collect copied,
    links followed). Its results come back as messages on its sockets. The one host folder it can write
    holds only those sockets; the connection file is read-only to it. Its environment is the sandbox's
    allow-list (no secret of nbgrader's reaches it).
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        _reap_kernel_folders(_socket_home())
        # The owner's pid leads the name, so that a folder left by a killed grader is removed later.
        self._box = Path(tempfile.mkdtemp(prefix=f"b2l-kernel-{os.getpid()}-", dir=_socket_home()))
        (self._box / "conn").mkdir()
        (self._box / "sock").mkdir()
        self.transport = "ipc"
        self.ip = str(self._box / "sock" / "kernel")
        self.connection_file = str(self._box / "conn" / "kernel.json")

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        kw.pop("cwd", None)  # autograded/<student>/<lab>/: never the kernel's, nor anything in it
        # The interrupt at a cell's time limit goes as a message: a signal would reach bwrap, not the kernel.
        self.kernel_spec.interrupt_mode = "message"
        prefix = [sys.executable, "-m", "bytes2logits.kit.sandbox", "--ro", str(self._box / "conn"),
                  "--rw", str(self._box / "sock"), "--parent-pid", str(os.getpid()),
                  "--env", "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1"]
        kw["cwd"] = str(self._box)  # the launcher's own folder, on the host; the kernel's is in its sandbox
        return await super()._async_launch_kernel(prefix + ["--", *kernel_cmd], **kw)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            shutil.rmtree(self._box, ignore_errors=True)


DEADLINE_KEY = "bytes2logits_deadline"


class SubmittedCellMetadata(NbGraderPreprocessor):
    """First of autograde's sanitising steps: a learner's cell keeps nbgrader metadata only when it names a
    cell of the instructor's notebook, once.

    A submission can write any metadata into its own cells. A ``grade_id`` the instructor's notebook does not
    have, one that a second cell repeats, or flags that disagree with the instructor's (``"grade": true,
    "points": 999`` on an answer cell) made nbgrader's ``OverwriteCells`` stop the whole submission; such a
    cell is the learner's own, so it becomes a plain cell, and a cell that names an instructor cell gets that
    cell's nbgrader metadata back. ``OverwriteCells`` then restores the instructor cells' source as usual.
    """

    def preprocess(self, nb, resources):
        lab = find_lab(resources["nbgrader"]["assignment"])
        source = nbformat.read(lab.source_notebook(), as_version=4)
        known = {_meta(c)["grade_id"]: c for c in source.cells if _meta(c).get("grade_id")}
        seen: set[str] = set()
        for cell in nb.cells:
            meta = cell.get("metadata", {})
            nbg = meta.get("nbgrader")
            if nbg is None:
                continue
            gid = nbg.get("grade_id") if isinstance(nbg, dict) else None
            if not isinstance(gid, str) or gid not in known or gid in seen \
                    or known[gid].cell_type != cell.get("cell_type"):
                del meta["nbgrader"]
                continue
            seen.add(gid)
            # The instructor's flags, not the learner's: points, grade, solution and locked as the lab set them.
            meta["nbgrader"] = copy.deepcopy(dict(known[gid].metadata["nbgrader"]))
        return nb, resources

    def preprocess_cell(self, cell, resources, index):  # pragma: no cover - preprocess does the work
        return cell, resources



class SandboxedExecute(RobustExecute):
    """Execute the notebook for its feedback outputs, in a sandboxed kernel, within the submission's budget.

    The submission's whole time (:class:`StartTrustedGrading` sets its end) bounds this run too: a cell gets
    at most the time that is left, and once it is gone the remaining cells are not run (each says so)."""

    notebook_seconds = Float(900.0, help="Seconds the whole notebook may take when no trusted grading "
                             "set the submission's end").tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs["kernel_manager_class"] = SandboxedKernelManager
        super().__init__(*args, **kwargs)

    def preprocess(self, nb, resources=None, km=None):
        self._end = (resources or {}).get(DEADLINE_KEY) or time.monotonic() + self.notebook_seconds
        self._cell_timeout = self.timeout
        try:
            return super().preprocess(nb, resources, km)
        finally:
            self.timeout = self._cell_timeout

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            left = self._end - time.monotonic()
            if left <= 1:
                cell.outputs = [NotebookNode(output_type="error", ename="TimeBudget", evalue=(
                    "not run: the submission's time budget ran out before this cell"),
                    traceback=["TimeBudget: not run: the submission's time budget ran out before this cell"])]
                return cell, self.resources
            self.timeout = max(1, int(min(self._cell_timeout or left, left)))
        return super().preprocess_cell(cell, resources, index)


def _failed_results(lab, why: str) -> dict:
    return {t.id: {"task": t.id, "points": float(t.points), "score": 0.0, "passed": 0, "total": 0,
                   "lines": [f"the grader could not grade this notebook: {why}"],
                   "flags": [f"the grader failed: {why}"]} for t in lab.tasks}


class StartTrustedGrading(NbGraderPreprocessor):
    """Start the trusted grader on the notebook's sources at once, so that it runs while the kernel does."""

    call_seconds = Float(None, allow_none=True, help="Seconds one call into the learner's code may take "
                         "(default: the Execute timeout)").tag(config=True)
    submission_seconds = Float(900.0, help="Seconds for the whole submission: the trusted grader's work and "
                               "the feedback kernel's run, which go on side by side").tag(config=True)

    def preprocess(self, nb, resources):
        lab = find_lab(resources["nbgrader"]["assignment"])
        resources[DEADLINE_KEY] = time.monotonic() + self.submission_seconds
        call_seconds = self.call_seconds or float(self.config.Execute.get("timeout", 60) or 60)
        tmp = Path(tempfile.mkdtemp(prefix="b2l-trusted-"))
        src = tmp / f"{lab.name}.ipynb"
        clean = nbformat.from_dict(copy.deepcopy(nb))
        for cell in clean.cells:
            if cell.cell_type == "code":
                cell.outputs = []
        nbformat.write(clean, src)
        out = tmp / "result.json"
        cmd = [sys.executable, "-m", "bytes2logits.kit.trusted", str(src), "--lab", lab.name, "--json", str(out),
               "--call-seconds", str(call_seconds), "--seconds", str(self.submission_seconds)]
        log = open(tmp / "grader.log", "w")
        proc = subprocess.Popen(cmd, env=tool_env(), stdout=log, stderr=subprocess.STDOUT, cwd=tmp,
                                stdin=subprocess.DEVNULL)
        log.close()
        resources[RESOURCE_KEY + "_job"] = (proc, tmp, lab.name)
        return nb, resources

    def preprocess_cell(self, cell, resources, index):  # pragma: no cover - preprocess does the work
        return cell, resources


class TrustedGrading(NbGraderPreprocessor):
    """Collect the trusted grader's result; put its feedback into the autograder cells."""

    grader_seconds = Float(1800.0, help="Seconds the grader process may take for one notebook").tag(config=True)

    def preprocess(self, nb, resources):
        lab = find_lab(resources["nbgrader"]["assignment"])
        job = resources.pop(RESOURCE_KEY + "_job", None)
        if job is None:  # not started (StartTrustedGrading missing from the list): start it now
            nb, resources = StartTrustedGrading(config=self.config).preprocess(nb, resources)
            job = resources.pop(RESOURCE_KEY + "_job")
        proc, tmp, _ = job
        end = resources.get(DEADLINE_KEY)
        wait = self.grader_seconds if end is None else max(0.0, end - time.monotonic()) + 60.0
        try:
            try:
                code = proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise RuntimeError("the grader took longer than the submission's time budget") from None
            if code != 0:
                tail = (tmp / "grader.log").read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
                raise RuntimeError(f"exit {code}: {tail[0][:300]}")
            results = {r["task"]: r for r in json.loads((tmp / "result.json").read_text(encoding="utf-8"))}
        except (RuntimeError, OSError, ValueError, KeyError) as e:
            self.log.error("trusted grading of %s failed: %s", resources["nbgrader"].get("student"), e)
            results = _failed_results(lab, str(e)[:300])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        resources[RESOURCE_KEY] = results
        for cell in nb.cells:
            gid = _meta(cell).get("grade_id")
            if cell.cell_type != "code" or not _meta(cell).get("grade") or gid not in results:
                continue
            r = results[gid]
            text = (f"{gid}: {r['passed']}/{r['total']} hidden checks passed -> {r['score']:g}/{r['points']:g} "
                    "points (scored by the trusted grader)\n" + "".join(f"  {line}\n" for line in r["lines"]))
            kept = []
            for o in cell.get("outputs", []):
                if o.get("output_type") == "error":
                    # The exception line only: a traceback would quote the cell's hidden block around the line.
                    o["traceback"] = [f"{o.get('ename', 'Error')}: {o.get('evalue', '')}"]
                if o.get("output_type") in ("stream", "display_data", "error"):
                    kept.append(o)
            cell.outputs = kept + [NotebookNode(output_type="stream", name="stdout", text=text)]
        return nb, resources

    def preprocess_cell(self, cell, resources, index):  # pragma: no cover - preprocess does the work
        return cell, resources


class SaveTrustedGrades(SaveAutoGrades):
    """``SaveAutoGrades`` whose autograder scores come from :class:`TrustedGrading`, not cell outputs."""

    def _add_score(self, cell, resources) -> None:
        grade = self.gradebook.find_grade(cell.metadata["nbgrader"]["grade_id"], self.notebook_id,
                                          self.assignment_id, self.student_id)
        result = resources.get(RESOURCE_KEY, {}).get(cell.metadata["nbgrader"]["grade_id"])
        if result is None:
            grade.auto_score = 0.0
            grade.needs_manual_grade = True
        else:
            grade.auto_score = float(result["score"])
            grade.needs_manual_grade = bool(result["flags"]) or grade.manual_score is not None
        self.gradebook.db.commit()
