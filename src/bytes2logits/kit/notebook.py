"""Reading a submitted notebook for grading: its cells, with the instructor's locked cells put back.

The grader reads notebooks as plain JSON (:func:`read_notebook`), restores the instructor's locked cells
over whatever the submission holds (:func:`instructor_cells`, nbgrader's own rule), and picks the cells a
worker runs and the similarity check reads (:func:`submission_cells`).
"""

from __future__ import annotations

import copy
import json

from .build import _nbgrader_meta as _meta
from .labs import Lab

__all__ = ["read_notebook", "instructor_cells", "submission_cells"]


class _Node(dict):
    """A notebook read as plain JSON: dict items as attributes, like nbformat's NotebookNode.

    The grader reads notebooks this way instead of with nbformat, whose schema validator costs about two
    seconds to import, per submission.
    """

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self[name] = value


def read_notebook(path) -> _Node:
    """A v4 notebook's cells with ``source`` as one string (what the grader needs: sources and metadata)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict) or data.get("nbformat") != 4 or not isinstance(data.get("cells"), list):
        raise ValueError(f"{path}: not a version 4 notebook")
    cells = []
    for i, raw in enumerate(data["cells"]):
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: cell {i} is not an object")
        cell = _Node(raw)
        src = raw.get("source", "")
        cell["source"] = "".join(src) if isinstance(src, list) else str(src)
        cell["metadata"] = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        cells.append(cell)
    return _Node(cells=cells, metadata=data.get("metadata", {}))


def instructor_cells(nb, solution) -> None:
    """Put the instructor's locked cells (set-up and autograder cells) into ``nb``, restoring deleted ones.

    The same rule as nbgrader's autograde: a tampered or deleted locked cell changes nothing.
    """
    sol_cells = solution.cells
    locked = {_meta(c)["grade_id"]: c for c in sol_cells if _meta(c).get("locked") and _meta(c).get("grade_id")}
    present = set()
    for i, cell in enumerate(nb.cells):
        gid = _meta(cell).get("grade_id")
        if gid in locked:
            nb.cells[i] = copy.deepcopy(locked[gid])
            present.add(gid)
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


def submission_cells(nb, lab: Lab, solution=None):
    """(cells the worker runs, cells the learner wrote): autograder cells are in neither.

    Which cells are the instructor's is decided by the instructor's source notebook (``solution``, default
    the lab's), never by the submission's own metadata: a learner can mark any cell ``locked`` or give it
    any ``grade_id``. Run :func:`instructor_cells` first, so that every instructor cell holds its own source.
    """
    solution = solution if solution is not None else read_notebook(lab.source_notebook())
    theirs = {_meta(c)["grade_id"] for c in solution.cells
              if _meta(c).get("locked") and _meta(c).get("grade_id")}
    graded = {_meta(c)["grade_id"] for c in solution.cells if _meta(c).get("grade") and _meta(c).get("grade_id")}
    tasks = {t.id for t in lab.tasks}
    run, written = [], []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        gid = _meta(cell).get("grade_id", "")
        if gid in graded:
            continue
        run.append((i, cell.source))
        if gid not in theirs:
            task = gid[len("answer_"):] if gid.startswith("answer_") and gid[len("answer_"):] in tasks else None
            written.append((i, cell.source, task))
    return run, written
