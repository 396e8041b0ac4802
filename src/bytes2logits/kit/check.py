"""``python -m bytes2logits check NOTEBOOK.ipynb``: grade any copy of a lab notebook, as the class would.

This is the class's own grading path (:func:`bytes2logits.kit.trusted.grade_submission`), so a learner's
local marks equal the marks ``make grade`` gives: the autograder cells of the copy are replaced by the
instructor's versions from ``solutions/`` (a tampered or deleted test cell changes nothing), the copy's
code runs in a sandboxed worker, and the hidden suites run here and reach it through proxies. The
learner's file is never modified.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .labs import Lab, find_lab, repo_root

if TYPE_CHECKING:
    from .trusted import TaskResult

__all__ = ["grade_notebook", "main"]


def _is_instructor_source(path: Path, lab: Lab) -> bool:
    try:
        return path.resolve() == lab.source_notebook().resolve()
    except (OSError, RuntimeError):
        return False


def grade_notebook(path, lab: Lab | None = None, *, call_seconds: float | None = None) -> list[TaskResult]:
    """Grade a copy of ``path``; return the trusted grader's :class:`~bytes2logits.kit.trusted.TaskResult`
    per task."""
    from .trusted import grade_submission

    path = Path(path).resolve()
    lab = lab or find_lab(path)
    # The instructor's source notebook holds the reference as its answers: checking it is a test of the
    # suites, so the reference-use scan (which would rightly flag every answer there) is skipped.
    return grade_submission(path, lab, call_seconds=call_seconds,
                            check_reference_use=not _is_instructor_source(path, lab))


def main(argv: list[str]) -> int:
    import argparse

    from . import sandbox

    parser = argparse.ArgumentParser(prog="python -m bytes2logits check",
                                     description="Grade a lab notebook with its hidden suite.")
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--timeout", type=float, default=None, help="seconds one call into your code may take")
    args = parser.parse_args(argv)
    if not args.notebook.is_file():
        print(f"error: no notebook at {args.notebook}", file=sys.stderr)
        return 2
    try:
        lab = find_lab(args.notebook)
        repo_root()
        how = sandbox.describe()
    except (KeyError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"checking {args.notebook} against the hidden suite of {lab.name} ...", flush=True)
    print(f"(your code runs in a {how})", flush=True)
    scores = grade_notebook(args.notebook, lab, call_seconds=args.timeout)
    width = max([len(s.task) for s in scores] + [4])
    print(f"\n{'task':<{width}}  score  hidden checks passed")
    for s in scores:
        print(f"{s.task:<{width}}  {f'{s.score:g}/{s.points:g}':<5}  {s.passed}/{s.total}")
        for line in s.lines:
            print(f"{'':<{width}}    {line.strip()}")
    got, total = sum(s.score for s in scores), sum(s.points for s in scores)
    print(f"\nscore: {got:g}/{total:g}")
    return 0 if scores and got == total else 1
