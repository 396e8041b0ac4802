"""One submission's grading, as a task that any worker process can run: a local pool's or a Dask worker's.

``make grade`` (:mod:`bytes2logits.kit.classroom`) splits a class into one :class:`GradeTask` per
submission and hands the tasks to worker processes: ``--jobs N`` on this machine, or ``--dask ADDRESS`` on
a Dask cluster. :func:`grade_submission_task` is the whole of a worker's job. It runs nbgrader's own
autograde and feedback steps for one student (through ``NbGraderAPI``, in the worker's process, so that
nbgrader is imported once per worker, not once per submission), with the course's ``nbgrader_config.py``.
The scores still come from the trusted grader, which autograde starts in a process of its own
(:mod:`bytes2logits.kit.nbgrade`), and the learner's code still runs only in the sandbox.

A worker may live on another machine: it needs the package installed, and the course folder and the
gradebook at the same paths (shared storage and a PostgreSQL gradebook, see docs/instructor-guide.md).
The task is plain data, so it travels to any worker, and the result is plain data too.

One worker process grades one submission at a time, whatever its thread count: nbgrader's applications
and the process environment are not thread-safe, so a lock serialises tasks within a process (start Dask
workers with ``--nthreads 1`` so that none waits).
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["GradeTask", "course_config", "feedback_page", "grade_submission_task", "quiet_worker"]

_LOCK = threading.Lock()


@dataclass(frozen=True)
class GradeTask:
    """What one worker needs to grade one submission (plain data: it crosses process and machine lines)."""

    root: str
    lab: str
    student: str
    db_url: str
    hidden: str
    timeout: int | None = None
    course_id: str = ""  # nbgrader's course id in the gradebook ("" keeps the configured one)
    budget: float | None = None  # seconds for the whole submission (None keeps the configured budget)

    @property
    def key(self) -> str:
        """``lab/student``: the task's name in progress lines and in the stamps of graded work."""
        return f"{self.lab}/{self.student}"

    def to_dict(self) -> dict:
        return asdict(self)


def course_config(root: str):
    """The course's nbgrader configuration, as the ``nbgrader`` command would load it in the course root."""
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=root).load_config()


def _config(task: GradeTask):
    """The course's configuration with the task's gradebook, course id, notebook and time limit."""
    cfg = course_config(task.root)
    cfg.CourseDirectory.root = task.root
    cfg.CourseDirectory.db_url = task.db_url
    if task.course_id:
        cfg.CourseDirectory.course_id = task.course_id
    # Only the lab's own notebook: a stray lab01-Copy1.ipynb beside it is reported by make grade, not graded.
    cfg.CourseDirectory.notebook_id = task.lab
    if task.timeout:
        cfg.Execute.timeout = task.timeout
    if task.budget:
        cfg.StartTrustedGrading.submission_seconds = float(task.budget)
        cfg.SandboxedExecute.notebook_seconds = float(task.budget)
    return cfg


def _last_lines(text: str | None, n: int = 6) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return "\n".join(lines[-n:])


def grade_submission_task(task: GradeTask | dict) -> dict:
    """Autograde one submission and write its feedback page; return what happened as plain data.

    The result has ``key``, ``ok`` (autograde and feedback both succeeded), ``step`` (the step that failed,
    or ``None``), ``error`` (the last lines of nbgrader's log or traceback), ``seconds`` and ``pid`` (the
    worker process). A failure of nbgrader for this submission is a result, not an exception: only a worker
    that dies, or a course that cannot be loaded at all, raises.
    """
    if isinstance(task, dict):
        task = GradeTask(**task)
    with _LOCK:
        start = time.monotonic()
        os.environ["BYTES2LOGITS_COURSE_ROOT"] = task.root
        os.environ["BYTES2LOGITS_HIDDEN_TESTS"] = task.hidden
        from nbgrader.apps import NbGraderAPI

        api = NbGraderAPI(config=_config(task))
        out = {"key": task.key, "lab": task.lab, "student": task.student, "ok": False, "step": None,
               "error": "", "pid": os.getpid()}
        try:
            result = api.autograde(task.lab, task.student, force=True, create=True)
            if not result.get("success"):
                out.update(step="autograde", error=_last_lines(result.get("error") or result.get("log")))
            else:
                result = api.generate_feedback(task.lab, task.student, force=True)
                if not result.get("success"):
                    out.update(step="generate_feedback",
                               error=_last_lines(result.get("error") or result.get("log")))
                else:
                    out["ok"] = True
        except Exception:  # nbgrader raised instead of reporting: still this submission's result
            out.update(step=out["step"] or "autograde", error=_last_lines(traceback.format_exc()))
        out["seconds"] = round(time.monotonic() - start, 2)
        return out


def quiet_worker(log_path: str) -> None:
    """A local pool worker's start: its own output, and its kernels', go to ``log_path``, not the terminal
    (the progress bar and the status lines are the instructor's view; the log keeps the details)."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def feedback_page(root: Path, lab: str, student: str) -> Path:
    """Where nbgrader writes the feedback page of one submission."""
    return root / "feedback" / student / lab / f"{lab}.html"
