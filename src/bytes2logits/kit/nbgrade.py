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
    "SandboxedKernelManager",
    "SaveTrustedGrades",
    "StartTrustedGrading",
    "TrustedGrading",
]

RESOURCE_KEY = "bytes2logits_trusted"


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel started inside the sandbox, connected to nbgrader through Unix sockets in its own folder."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._box = Path(tempfile.mkdtemp(prefix="b2l-kernel-"))
        self.transport = "ipc"
        self.ip = str(self._box / "kernel")
        self.connection_file = str(self._box / "kernel.json")

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        cwd = Path(kw.get("cwd") or os.getcwd()).resolve()
        env = dict(kw.get("env") or os.environ)
        for key in ("BYTES2LOGITS_HIDDEN_TESTS", "JPY_PARENT_PID"):
            env.pop(key, None)
        env.update(BYTES2LOGITS_SANDBOXED="1", HOME=str(self._box), OPENBLAS_NUM_THREADS="1",
                   OMP_NUM_THREADS="1", MPLBACKEND="Agg", TMPDIR=str(self._box))
        kw["env"] = env
        # The interrupt at a cell's time limit goes as a message: a signal would reach bwrap, not the kernel.
        self.kernel_spec.interrupt_mode = "message"
        prefix = [sys.executable, "-m", "bytes2logits.kit.sandbox", "--scratch", str(cwd), "--rw", str(self._box),
                  "--parent-pid", str(os.getpid()), "--"]
        return await super()._async_launch_kernel(prefix + list(kernel_cmd), **kw)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            import shutil

            shutil.rmtree(self._box, ignore_errors=True)


class SandboxedExecute(RobustExecute):
    """Execute the notebook for its feedback outputs, in a sandboxed kernel."""

    def __init__(self, *args, **kwargs):
        kwargs["kernel_manager_class"] = SandboxedKernelManager
        super().__init__(*args, **kwargs)


def _failed_results(lab, why: str) -> dict:
    return {t.id: {"task": t.id, "points": float(t.points), "score": 0.0, "passed": 0, "total": 0,
                   "lines": [f"the grader could not grade this notebook: {why}"],
                   "flags": [f"the grader failed: {why}"]} for t in lab.tasks}


class StartTrustedGrading(NbGraderPreprocessor):
    """Start the trusted grader on the notebook's sources at once, so that it runs while the kernel does."""

    call_seconds = Float(None, allow_none=True, help="Seconds one call into the learner's code may take "
                         "(default: the Execute timeout)").tag(config=True)

    def preprocess(self, nb, resources):
        lab = find_lab(resources["nbgrader"]["assignment"])
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
               "--call-seconds", str(call_seconds)]
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
        try:
            try:
                code = proc.wait(timeout=self.grader_seconds)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise RuntimeError(f"the grader took longer than {self.grader_seconds:g} s") from None
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
