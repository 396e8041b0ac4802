"""The lab build: one source of truth for solutions, and the student release made by nbgrader.

``solutions/<lab>/<lab>.ipynb`` is authored by hand (prose, hints, visible asserts) except for three kinds
of cell that this module writes from the registry in :mod:`bytes2logits.kit.labs`:

* the locked ``setup`` cell: the lab's imports and the helpers it is given;
* each ``answer_<task>`` cell: the reference objects' source from ``src/bytes2logits``, with signatures and
  docstrings visible and every body between ``### BEGIN SOLUTION`` / ``### END SOLUTION``;
* the hidden block of each ``<task>`` autograder cell, which calls the grading bridge.

``labs/`` is then written by ``nbgrader generate_assignment`` from ``solutions/``. ``make labs`` runs both;
:func:`stale` tells the test suite whether the committed notebooks still match their sources.
"""

from __future__ import annotations

import ast
import inspect
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .labs import LABS, Lab, repo_root, tool_env

__all__ = ["answer_source", "build_solutions", "build_release", "hidden_block", "setup_source", "stale",
           "object_source", "solution_lines"]

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


class BuildError(RuntimeError):
    """A lab's notebook or registry entry is inconsistent (the message names the lab and cell)."""


def _mark_bodies(src: str, where: str) -> str:
    """Wrap the body of every function (and method) in ``src`` in solution markers, after its docstring."""
    tree = ast.parse(src)
    lines = src.splitlines()
    targets = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            targets.append(node)
        elif isinstance(node, ast.ClassDef):
            targets.extend(n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    for node in sorted(targets, key=lambda n: n.lineno, reverse=True):
        if ast.get_docstring(node) is None or len(node.body) < 2:
            raise BuildError(f"{where}: {node.name}() needs a docstring and a body to become a lab task")
        first = node.body[1]
        indent = lines[first.lineno - 1][: first.col_offset]
        start = node.body[0].end_lineno  # 0-based index of the line after the docstring
        end = node.end_lineno
        lines[end:end] = [indent + END]
        lines[start:start] = [indent + BEGIN]
    return "\n".join(lines)


def object_source(lab: Lab, name: str, *, solution: bool) -> str:
    """Source of one object of the lab's reference module, with solution markers when ``solution``."""
    value = lab.reference_object(name)
    if not (inspect.isclass(value) or inspect.isfunction(value)):
        return f"{name} = {ascii(value) if isinstance(value, str) else repr(value)}"
    src = inspect.getsource(value).rstrip()
    return _mark_bodies(src, f"{lab.name}: {name}") if solution else src


def setup_source(lab: Lab) -> str:
    """The locked set-up cell: the lab's imports and given code, then the note on failed visible checks."""
    parts = ["\n".join(lab.imports)] if lab.imports else []
    parts += [object_source(lab, n, solution=False) for n in lab.given]
    parts.append("# In JupyterLab, a failed visible check is followed by a note on what it means for your grade.\n"
                 "from bytes2logits.kit.grading import explain_failed_checks\n"
                 f"explain_failed_checks({lab.name!r})")
    return "\n\n\n".join(parts)


def answer_source(lab: Lab, task_id: str) -> str:
    task = lab.task(task_id)
    return "\n\n\n".join(object_source(lab, n, solution=True) for n in task.objects)


def hidden_block(lab: Lab, task_id: str) -> str:
    task = lab.task(task_id)
    return "\n".join([
        BEGIN_HIDDEN,
        "from bytes2logits.kit.grading import run_hidden_tests",
        f"run_hidden_tests({lab.name!r}, {task.id!r}, globals(), points={task.points})",
        END_HIDDEN,
    ])


def solution_lines(lab: Lab) -> set[str]:
    """Distinctive lines of the reference bodies (for checking that a release holds none of them).

    Lines that also occur in the set-up cell (as text anywhere in it) are left out: the release shows it.
    """
    shown = setup_source(lab)
    found = set()
    for task in lab.tasks:
        src = answer_source(lab, task.id)
        inside = False
        for line in src.splitlines():
            s = line.strip()
            if s == BEGIN:
                inside = True
            elif s == END:
                inside = False
            elif inside and len(s) >= 16 and not s.startswith(("#", '"', "'", "return None")) and s not in shown:
                found.add(s)
    return found


def _nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _cells_by_id(nb) -> dict:
    return {_nbgrader_meta(c).get("grade_id"): c for c in nb.cells if _nbgrader_meta(c).get("grade_id")}


def _clean(nb) -> None:
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)
    nb.metadata.pop("jupytext", None)
    nb.metadata.pop("widgets", None)


def render_solution(lab: Lab, nb) -> None:
    """Rewrite the generated parts of a solutions notebook in place."""
    cells = _cells_by_id(nb)
    where = lab.source_notebook().relative_to(repo_root())
    if "setup" not in cells:
        raise BuildError(f"{where}: no cell with grade_id 'setup'")
    cells["setup"].source = setup_source(lab)
    for task in lab.tasks:
        answer, grade = cells.get(f"answer_{task.id}"), cells.get(task.id)
        if answer is None or grade is None:
            raise BuildError(f"{where}: task {task.id!r} needs cells with grade_id 'answer_{task.id}' and "
                             f"'{task.id}'")
        answer.source = answer_source(lab, task.id)
        meta = _nbgrader_meta(grade)
        if not (meta.get("grade") and meta.get("locked")):
            raise BuildError(f"{where}: cell {task.id!r} must be a locked autograder cell")
        meta["points"] = task.points
        visible = grade.source.split(BEGIN_HIDDEN)[0].rstrip()
        grade.source = (visible + "\n\n" if visible else "") + hidden_block(lab, task.id)
    _clean(nb)


def _serialize(nb) -> str:
    import nbformat

    return nbformat.writes(nb, version=4).rstrip("\n") + "\n"


def _write(nb, path: Path) -> bool:
    text = _serialize(nb)
    old = path.read_text(encoding="utf-8") if path.exists() else None
    if old == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True


def build_solutions(root: Path | None = None, labs: list[Lab] | None = None) -> list[Path]:
    """Regenerate the generated cells of every solutions notebook; return the files that changed."""
    import nbformat

    root = root or repo_root()
    changed = []
    for lab in labs or LABS.values():
        path = lab.source_notebook(root)
        nb = nbformat.read(path, as_version=4)
        render_solution(lab, nb)
        if _write(nb, path):
            changed.append(path)
    return changed


_GENERATE_ALL = """
import sys
from nbgrader.apps.api import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from traitlets.config.loader import PyFileConfigLoader

config = PyFileConfigLoader("nbgrader_config.py", path=".").load_config()
api = NbGraderAPI(CourseDirectory(config=config), config=config)
for name in sys.argv[1:]:
    result = api.generate_assignment(name, force=True)
    if not result["success"]:
        print(f"{name}:", result.get("error", ""), result.get("log", ""), sep="\\n")
        sys.exit(1)
"""


def build_release(root: Path | None = None, out: Path | None = None, labs: list[Lab] | None = None) -> None:
    """Run ``nbgrader generate_assignment`` on ``solutions/`` in a scratch course; write ``labs/``.

    The scratch course keeps the repository's gradebook untouched. Release notebooks are normalised
    (no outputs, no execution counts) so that rebuilding is byte-for-byte reproducible.
    """
    import nbformat

    root = root or repo_root()
    out = out or root / "labs"
    labs = labs or list(LABS.values())
    with tempfile.TemporaryDirectory(prefix="b2l-release-") as tmp:
        tmp = Path(tmp)
        for lab in labs:
            shutil.copytree(root / "solutions" / lab.name, tmp / "solutions" / lab.name,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", ".hypothesis"))
        (tmp / "nbgrader_config.py").write_text(
            "c = get_config()\n"
            f"c.CourseDirectory.root = {str(tmp)!r}\n"
            "c.CourseDirectory.source_directory = 'solutions'\n"
            "c.CourseDirectory.release_directory = 'labs'\n"
            f"c.CourseDirectory.db_url = 'sqlite:///{tmp / 'gradebook.db'}'\n"
            "c.ClearSolutions.enforce_metadata = True\n")
        # One nbgrader process for every lab (its API runs the same GenerateAssignment app as the command
        # `nbgrader generate_assignment LAB --force`): importing nbgrader costs seconds, per process.
        cmd = [sys.executable, "-c", _GENERATE_ALL, *(lab.name for lab in labs)]
        result = subprocess.run(cmd, cwd=tmp, env=tool_env(), capture_output=True, text=True)
        if result.returncode != 0:
            raise BuildError(f"nbgrader generate_assignment failed:\n{result.stdout}{result.stderr}")
        for lab in labs:
            made = tmp / "labs" / lab.name
            dest = out / lab.name
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(made, dest)
            for nb_path in dest.glob("*.ipynb"):
                nb = nbformat.read(nb_path, as_version=4)
                _clean(nb)
                nb_path.unlink()
                _write(nb, nb_path)


def stale(root: Path | None = None) -> list[str]:
    """What would ``make labs`` change? Returns human-readable reasons (empty when up to date)."""
    import nbformat

    root = root or repo_root()
    reasons = []
    for lab in LABS.values():
        path = lab.source_notebook(root)
        nb = nbformat.read(path, as_version=4)
        render_solution(lab, nb)
        if _serialize(nb) != path.read_text(encoding="utf-8"):
            reasons.append(f"{path.relative_to(root)} does not match its generated cells")
    with tempfile.TemporaryDirectory(prefix="b2l-stale-") as tmp:
        build_release(root, Path(tmp))
        for lab in LABS.values():
            fresh = Path(tmp) / lab.name
            committed = root / "labs" / lab.name
            for f in sorted(fresh.rglob("*")):
                if f.is_file():
                    rel = f.relative_to(fresh)
                    if not (committed / rel).is_file():
                        reasons.append(f"labs/{lab.name}/{rel} is missing")
                    elif (committed / rel).read_bytes() != f.read_bytes():
                        reasons.append(f"labs/{lab.name}/{rel} is not what nbgrader generates from solutions/")
            for f in sorted(committed.rglob("*")):
                if f.is_file() and not (fresh / f.relative_to(committed)).exists():
                    reasons.append(f"labs/{lab.name}/{f.relative_to(committed)} is not part of the release")
    return reasons


def main() -> int:
    changed = build_solutions()
    for p in changed:
        print(f"regenerated {p.relative_to(repo_root())}")
    build_release()
    print(f"released {len(LABS)} lab(s) to labs/ with nbgrader generate_assignment")
    return 0


if __name__ == "__main__":
    sys.exit(main())
