"""Trusted grading: score a submission with its hidden suites, the submission's code in a sandboxed worker.

This is the one grading path. ``python -m bytes2logits check`` calls :func:`grade_submission` in its own
process; ``make grade`` (nbgrader autograde) calls it once per notebook in a fresh grader process through
``python -m bytes2logits.kit.trusted`` (see :mod:`bytes2logits.kit.nbgrade`), so that local marks equal
class marks.

The grader process runs pytest and the hidden suites; it never executes a line of the submission. The
notebook's code cells (the instructor's locked cells, restored over whatever the submission holds, and the
submission's own cells) run in a worker behind :mod:`bytes2logits.kit.sandbox`; the suites reach its names
through :class:`~bytes2logits.kit.remote.RemoteImplementation`.

The course's reference for the lab's tasks is not in that worker: it sees a copy of the package in which
those tasks are stubs that say "this is your task" (:mod:`bytes2logits.kit.redact`), so importing,
unpickling, reading or exec'ing the reference earns nothing, however it is reached. What a learner pastes is
a matter of similarity: an answer whose code is near the reference's (:mod:`bytes2logits.kit.similarity`)
is flagged for an instructor's review, with the reason in its feedback; its score stands until then.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .labs import Lab, find_lab, hidden_root
from .notebook import instructor_cells, read_notebook, submission_cells
from .settings import MAX_CODE_CHARS

__all__ = ["TaskResult", "grade_submission", "main"]

TASK_SECONDS = 300.0  # all the calls of one task's hidden checks, in the worker
# The whole submission: loading its notebook, every task, every restart. The same whatever its number of
# cells or tasks; what it cuts off scores 0, with a line saying so.
SUBMISSION_SECONDS = 900.0
GRADER_MEMORY = 8 * 1024 ** 3  # bytes of address space a grader process may use (limit_memory)


def limit_memory(limit: int = GRADER_MEMORY) -> None:
    """Cap this grader process's address space. Whatever a reply costs to decode (the wire caps it too), the
    grader then fails with MemoryError at the cap, which costs that submission a flag, never the machine."""
    import resource

    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (OSError, ValueError):  # pragma: no cover - a platform without RLIMIT_AS
        pass




@dataclass
class TaskResult:
    """The trusted grade of one task: points earned, checks passed, feedback lines, and any flag."""

    task: str
    points: float
    score: float = 0.0
    passed: int = 0
    total: int = 0
    lines: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def needs_manual_grade(self) -> bool:
        return bool(self.flags)

    def summary(self) -> str:
        return f"{self.task}: {self.passed}/{self.total} hidden checks passed -> {self.score:g}/{self.points:g} points"


def grade_submission(notebook, lab: Lab | None = None, *, call_seconds: float | None = None,
                     task_seconds: float = TASK_SECONDS, check_reference_use: bool = True,
                     progress=None, seconds: float | None = SUBMISSION_SECONDS) -> list[TaskResult]:
    """Grade ``notebook`` (a path or a notebook node) task by task; return one :class:`TaskResult` each.

    ``check_reference_use=False`` skips the similarity check (for the instructor's own source notebook,
    whose answers *are* the reference). ``seconds`` is the whole submission's time budget.
    """
    from . import grading, sandbox, similarity
    from .redact import overlay_for
    from .remote import CALL_SECONDS, RemoteImplementation, Submission

    deadline = None if seconds is None else time.monotonic() + seconds

    if isinstance(notebook, (str, os.PathLike)):
        path = Path(notebook).resolve()
        lab = lab or find_lab(path)
        nb = read_notebook(path)
    else:
        nb = copy.deepcopy(notebook)
        if lab is None:
            raise ValueError("grade_submission needs the lab when given a notebook object")
    solution = read_notebook(lab.source_notebook())
    instructor_cells(nb, solution)
    run, written = submission_cells(nb, lab, solution)
    code = sum(len(src) for _, src, _ in written)
    if code > MAX_CODE_CHARS:
        why = (f"not graded: your cells hold {code:,} characters of code, more than the {MAX_CODE_CHARS:,} the "
               "grader reads (a lab needs a few thousand); remove what you pasted or generated, and check again")
        return [TaskResult(t.id, float(t.points), lines=[why]) for t in lab.tasks]
    findings = similarity.findings(lab, written) + similarity.opaque_findings(lab, written) \
        if check_reference_use else []
    given = {name: lab.reference_object(name) for name in lab.given}
    results: list[TaskResult] = []
    # Each task is graded in a worker that sees a copy of the package in which that task is a stub: its
    # reference is not there to be imported, unpickled, read or exec'd (kit/redact.py). The lab's other tasks
    # and earlier labs stay, as the lab's design builds on them. The reference worker sees the package.
    overlays = {t.id: overlay_for(lab, t.id) for t in lab.tasks}
    sandbox.selftest(sandbox.Mounts(overlays=overlays[lab.tasks[0].id]))
    with tempfile.TemporaryDirectory(prefix="b2l-grade-") as tmp:
        # The grader's own folders: files it hands to the workers (read-only in their sandboxes) and
        # pytest's temporary folders (not in any sandbox). Nothing a worker can write is ever read or
        # written here.
        files = Path(tmp) / "files"
        files.mkdir()
        os.chmod(tmp, 0o755)
        sub = Submission(run, files=files, call_seconds=call_seconds or CALL_SECONDS, given=given,
                         label="your notebook", deadline=deadline, overlays=overlays[lab.tasks[0].id])
        ref_box = {}

        def reference():
            if "sub" not in ref_box:
                names = tuple(lab.exported_names())
                ref_files = Path(tmp) / "reference-files"
                ref_files.mkdir(exist_ok=True)
                ref_box["sub"] = Submission(module=lab.modules, names=names, files=ref_files,
                                            call_seconds=call_seconds or CALL_SECONDS, given=given,
                                            label="the reference")
                ref_box["impl"] = RemoteImplementation(ref_box["sub"], f"the reference {lab.module}", given)
            ref_box["sub"].task_deadline = sub.task_deadline
            return ref_box["impl"]

        impl = RemoteImplementation(sub, "your notebook", given)
        try:
            for task in lab.tasks:
                if progress:
                    progress(task.id)
                start = time.monotonic()
                result = TaskResult(task.id, float(task.points))
                sub.set_overlays(overlays[task.id])
                sub.begin_task(task_seconds)
                suite = hidden_root() / lab.name / f"test_{task.id}.py"

                def on_test(name, sub=sub):
                    sub.test = name
                    if "sub" in ref_box:
                        ref_box["sub"].test = name

                if sub.out_of_time():
                    result.lines.append(f"not graded: the submission's time budget of {seconds:g} s ran out "
                                        "before this task (score 0)")
                    result.seconds = 0.0
                    results.append(result)
                    continue
                outcomes, errors, _ = grading.run_with(
                    impl, reference, suite, basetemp=Path(tmp) / f"pytest-{task.id}", on_test=on_test)
                if errors or not outcomes:
                    result.lines.append(f"the hidden suite could not run: {'; '.join(errors) or 'no tests'}")
                result.passed = sum(o.passed for o in outcomes)
                result.total = len(outcomes)
                result.score = grading.score(task.points, outcomes)
                result.lines += grading.failure_lines(outcomes)
                if sub.timeouts or sub.crashes:
                    # As when a cell hangs or kills its kernel: the task's checks cannot be trusted to have run.
                    result.score = 0.0
                    result.lines.append("your code " + ("hung" if sub.timeouts else "killed the worker running it")
                                        + " during this task's checks, so the task scores 0")
                mine = [f for f in findings if f.task == task.id]
                if mine:
                    # A suspicion for a person to weigh, not proof: the score stands, and the gradebook marks
                    # the task for manual grading (nbgrader's formgrader lists it; make grade's status says so).
                    result.flags = [f.line() for f in mine]
                    result.lines.append("flagged for an instructor's review (your score stands until then): "
                                        + "; ".join(result.flags))
                result.seconds = round(time.monotonic() - start, 2)
                results.append(result)
            report = sub.cell_report()
            if report and results:
                results[0].lines += report
        finally:
            sub.close()
            if "sub" in ref_box:
                ref_box["sub"].close()
    return results


def main(argv: list[str] | None = None) -> int:
    """``python -m bytes2logits.kit.trusted NOTEBOOK --json OUT``: the grader process nbgrader starts."""
    parser = argparse.ArgumentParser(prog="python -m bytes2logits.kit.trusted")
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--lab", default=None)
    parser.add_argument("--json", type=Path, required=True, help="where to write the results")
    parser.add_argument("--call-seconds", type=float, default=None)
    parser.add_argument("--seconds", type=float, default=SUBMISSION_SECONDS,
                        help="the whole submission's time budget")
    args = parser.parse_args(argv)
    limit_memory()
    lab = find_lab(args.lab or args.notebook)
    results = grade_submission(args.notebook, lab, call_seconds=args.call_seconds, seconds=args.seconds)
    args.json.write_text(json.dumps([asdict(r) for r in results]), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
