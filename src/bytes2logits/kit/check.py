"""``python -m bytes2logits check NOTEBOOK.ipynb``: grade any copy of a lab notebook, as nbgrader would.

The autograder cells of the copy are replaced by the instructor's versions from ``solutions/`` (so a
tampered or deleted test cell changes nothing, as in nbgrader's autograde), the notebook runs in a fresh
kernel with the class's time limits and :class:`~bytes2logits.kit.nbexec.RobustExecute`, and each task is
scored with nbgrader's own rule. The learner's file is never modified.
"""

from __future__ import annotations

import copy
import logging
import os
import sys
from pathlib import Path

import nbformat

from .build import _nbgrader_meta as _meta
from .labs import Lab, find_lab, hidden_root, repo_root
from .settings import EXECUTE_TIMEOUT, IGNORE_STDERR_PATTERN, IOPUB_TIMEOUT

__all__ = ["TaskScore", "grade_notebook", "main"]


def _with_instructor_cells(nb, solution) -> None:
    """Put the instructor's locked cells (setup and autograder cells) into ``nb``, restoring deleted ones."""
    sol_cells = solution.cells
    locked = {_meta(c)["grade_id"]: c for c in sol_cells if _meta(c).get("locked") and _meta(c).get("grade_id")}
    present = set()
    for i, cell in enumerate(nb.cells):
        gid = _meta(cell).get("grade_id")
        if gid in locked:
            nb.cells[i] = copy.deepcopy(locked[gid])
            present.add(gid)
    # Restore missing locked cells right after the cell that precedes them in the solution.
    for k, cell in enumerate(sol_cells):
        gid = _meta(cell).get("grade_id")
        if gid not in locked or gid in present:
            continue
        position = len(nb.cells)
        for prev in reversed(sol_cells[:k]):
            pid = _meta(prev).get("grade_id")
            idx = next((j for j, c in enumerate(nb.cells) if pid and _meta(c).get("grade_id") == pid), None)
            if idx is not None:
                position = idx + 1
                break
        nb.cells.insert(position, copy.deepcopy(cell))
        present.add(gid)


class TaskScore:
    def __init__(self, task: str, score: float, points: float, lines: list[str]):
        self.task, self.score, self.points, self.lines = task, score, points, lines


def _cell_report(cell) -> list[str]:
    lines = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stdout":
            lines += [ln for ln in out.get("text", "").splitlines() if ln.strip()]
        elif out.get("output_type") == "error":
            ename, evalue = out.get("ename", ""), str(out.get("evalue", "")).strip().splitlines()
            lines.append(f"{ename}: {evalue[0] if evalue else ''}".rstrip(": "))
    return lines


def grade_notebook(path: str | os.PathLike, lab: Lab | None = None) -> list[TaskScore]:
    """Execute a copy of ``path`` with the instructor's test cells; return one score per task."""
    from nbgrader.preprocessors import IgnorePattern
    from nbgrader.utils import determine_grade

    from .nbexec import RobustExecute

    path = Path(path).resolve()
    lab = lab or find_lab(path)
    nb = nbformat.read(path, as_version=4)
    solution = nbformat.read(lab.source_notebook(), as_version=4)
    _with_instructor_cells(nb, solution)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    os.environ.setdefault("BYTES2LOGITS_HIDDEN_TESTS", str(hidden_root()))
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    old = os.environ.get("NBGRADER_EXECUTION")
    os.environ["NBGRADER_EXECUTION"] = "autograde"
    log = logging.getLogger("bytes2logits.check")
    try:
        ex = RobustExecute(timeout=EXECUTE_TIMEOUT, iopub_timeout=IOPUB_TIMEOUT, kernel_name="python3",
                           extra_arguments=["--IPKernelApp.log_level=ERROR"])
        ex.log = log
        ex.preprocess(nb, {"metadata": {"path": str(path.parent)}})
    finally:
        if old is None:
            os.environ.pop("NBGRADER_EXECUTION", None)
        else:
            os.environ["NBGRADER_EXECUTION"] = old
    IgnorePattern(pattern=IGNORE_STDERR_PATTERN).preprocess(nb, {})
    scores = []
    for cell in nb.cells:
        meta = _meta(cell)
        if meta.get("grade") and cell.cell_type == "code":
            score, points = determine_grade(cell, log)
            scores.append(TaskScore(meta["grade_id"], float(score or 0), float(points), _cell_report(cell)))
    return scores


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bytes2logits check",
                                     description="Grade a lab notebook with its hidden suite.")
    parser.add_argument("notebook", type=Path)
    args = parser.parse_args(argv)
    if not args.notebook.is_file():
        print(f"error: no notebook at {args.notebook}", file=sys.stderr)
        return 2
    try:
        lab = find_lab(args.notebook)
        repo_root()
    except (KeyError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"checking {args.notebook} against the hidden suite of {lab.name} ...", flush=True)
    scores = grade_notebook(args.notebook, lab)
    width = max([len(s.task) for s in scores] + [4])
    print(f"\n{'task':<{width}}  score")
    for s in scores:
        print(f"{s.task:<{width}}  {s.score:g}/{s.points:g}")
        for line in s.lines:
            if line.startswith(f"{s.task}:"):
                continue  # the bridge's own summary line repeats the score
            print(f"{'':<{width}}    {line.strip()}")
    got, total = sum(s.score for s in scores), sum(s.points for s in scores)
    print(f"\nscore: {got:g}/{total:g}")
    return 0 if scores and got == total else 1
