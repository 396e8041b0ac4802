"""The lab build: one source of truth for solutions, and the student release made by nbgrader.

``solutions/<lab>/<lab>.ipynb`` is authored by hand (prose, hints, visible asserts) except for three kinds
of cell that this module writes from the registry in :mod:`bytes2logits.kit.labs`:

* the locked ``setup`` cell: the lab's imports and the helpers it is given;
* each ``answer_<task>`` cell: the reference objects' source from ``src/bytes2logits``, with signatures and
  docstrings visible and every body between ``### BEGIN SOLUTION`` / ``### END SOLUTION``;
* the hidden block of each ``<task>`` autograder cell, which calls the grading bridge.

``labs/`` is then written by ``nbgrader generate_assignment`` from ``solutions/``. ``make labs`` runs both;
:func:`stale` tells the test suite whether the committed notebooks still match their sources.

An instructor may edit a generated cell by hand. So that the next build does not silently throw that edit
away, ``solutions/generated-cells.json`` records a hash of what the last build wrote into each generated cell
(the set-up and answer cells). A cell whose text is neither what the build would write now nor what the
last build wrote (nor blank, as in a new lab) was edited by hand: the build refuses, naming the lab, the
cell and the difference, and ``--force`` overwrites it after keeping a copy of the notebook under
``build/solutions-backup/``. A change of the reference in ``src/`` is not an edit: the record still holds
the cell's old text.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import inspect
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .labs import LABS, Lab, command_root, course_root, find_lab, tool_env

__all__ = ["RECORD", "EditedCells", "answer_source", "build_solutions", "build_release", "generated_cells",
           "hand_edits", "hidden_block", "main", "read_record", "setup_source", "stale", "object_source",
           "solution_lines"]

#: In ``solutions/``: a hash of the text the last build wrote into each generated cell, per lab.
RECORD = "generated-cells.json"

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


class BuildError(RuntimeError):
    """A lab's notebook or registry entry is inconsistent (the message names the lab and cell)."""


class EditedCells(BuildError):
    """Generated cells were edited by hand; the build would overwrite them (the message names each)."""


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
    where = _where(lab)
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


def _where(lab: Lab) -> str:
    return f"solutions/{lab.name}/{lab.name}.ipynb"


def generated_cells(lab: Lab) -> dict[str, str]:
    """The text the build writes into each whole generated cell of ``lab``, by ``grade_id``."""
    return {"setup": setup_source(lab), **{f"answer_{t.id}": answer_source(lab, t.id) for t in lab.tasks}}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_record(root: Path) -> dict[str, dict[str, str]]:
    """``solutions/generated-cells.json``: lab -> grade_id -> sha256 of what the last build wrote (may be empty)."""
    path = root / "solutions" / RECORD
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError as e:
        raise BuildError(f"solutions/{RECORD} is not valid JSON ({e}); restore it from git, or delete it and "
                         "build with --force (a copy of every notebook the build changes is kept)") from None
    return {lab: cells for lab, cells in data.items() if isinstance(cells, dict)}


def _record_text(record: dict) -> str:
    about = ("sha256 of the text `make labs` last wrote into each generated cell (kit/build.py): a cell that "
             "matches neither this nor the new build was edited by hand, and the build refuses to overwrite it")
    return json.dumps({"about": about, **{k: record[k] for k in sorted(record)}}, indent=1, sort_keys=False) + "\n"


def _diff_summary(yours: str, built: str) -> str:
    """How the build's text differs from the cell's: lines each side would lose, and the first difference."""
    a, b = yours.splitlines(), built.splitlines()
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    removed = sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag in ("replace", "delete"))
    added = sum(j2 - j1 for tag, _, _, j1, j2 in ops if tag in ("replace", "insert"))
    first = next((op for op in ops if op[0] != "equal"), None)
    if first is None:
        return "it differs from the build's text only in line endings or a final newline"
    _, i1, i2, j1, j2 = first
    mine = repr(a[i1][:80]) if i1 < i2 else "(nothing)"
    theirs = repr(b[j1][:80]) if j1 < j2 else "(nothing)"
    return (f"{removed} line(s) of yours would be replaced by {added} from the build; first difference at "
            f"line {i1 + 1}: yours {mine}, the build's {theirs}")


def hand_edits(lab: Lab, nb, record: dict) -> list[str]:
    """The generated cells of ``nb`` (a solutions notebook of ``lab``) that the build would overwrite
    although no build wrote their text: one sentence each, naming the notebook, cell and difference."""
    cells = _cells_by_id(nb)
    written = record.get(lab.name, {})
    found = []
    for cell_id, built in generated_cells(lab).items():
        cell = cells.get(cell_id)
        if cell is None:
            continue  # render_solution says what is missing
        yours = cell.source
        if yours == built or not yours.strip() or _digest(yours) == written.get(cell_id):
            continue
        found.append(f"{_where(lab)}, cell {cell_id!r} ({lab.name}): {_diff_summary(yours, built)}")
    return found


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


def build_solutions(root: Path | None = None, labs: list[Lab] | None = None, *, force: bool = False,
                    log=print) -> list[Path]:
    """Regenerate the generated cells of the solutions notebooks (default: every lab); return the files
    that changed.

    Raises :class:`EditedCells`, before writing anything, when a generated cell was edited by hand (see the
    module docstring). With ``force``, each such notebook is first copied to
    ``build/solutions-backup/<UTC time>/<lab>/`` (``log`` says where), then overwritten.
    """
    import nbformat

    root = root or course_root()
    labs = list(labs or LABS.values())
    record = read_record(root)
    notebooks, edited = {}, {}
    for lab in labs:
        path = lab.source_notebook(root)
        if not path.is_file():
            raise BuildError(f"{lab.name}: no solutions notebook at {path}")
        notebooks[lab.name] = nbformat.read(path, as_version=4)
        edits = hand_edits(lab, notebooks[lab.name], record)
        if edits:
            edited[lab.name] = edits
    if edited and not force:
        lines = [e for edits in edited.values() for e in edits]
        raise EditedCells(f"{len(lines)} generated cell(s) of solutions/ were edited by hand, and the build would "
                          "overwrite them:\n  " + "\n  ".join(lines) + "\nThe build writes these cells from the "
                          "reference code in src/bytes2logits (see docs/instructor-guide.md, \"Customising a "
                          "lab\"). To overwrite them anyway, keeping a copy of each notebook under "
                          "build/solutions-backup/, run again with --force (make labs BUILD_ARGS=--force).")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    changed = []
    for lab in labs:
        path, nb = lab.source_notebook(root), notebooks[lab.name]
        if lab.name in edited:
            backup = root / "build" / "solutions-backup" / stamp / lab.name / path.name
            backup.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, backup)
            log(f"{_where(lab)}: {len(edited[lab.name])} hand-edited cell(s) overwritten; your version is kept "
                f"in {backup}")
        render_solution(lab, nb)
        if _write(nb, path):
            changed.append(path)
        record[lab.name] = {cell_id: _digest(text) for cell_id, text in generated_cells(lab).items()}
    record_path = root / "solutions" / RECORD
    text = _record_text(record)
    if not record_path.is_file() or record_path.read_text(encoding="utf-8") != text:
        record_path.write_text(text, encoding="utf-8")
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

    root = root or course_root()
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

    root = root or course_root()
    reasons = []
    for lab in LABS.values():
        path = lab.source_notebook(root)
        nb = nbformat.read(path, as_version=4)
        render_solution(lab, nb)
        if _serialize(nb) != path.read_text(encoding="utf-8"):
            reasons.append(f"{path.relative_to(root)} does not match its generated cells")
    record = {lab.name: {cell_id: _digest(text) for cell_id, text in generated_cells(lab).items()}
              for lab in LABS.values()}
    if read_record(root) != record:
        reasons.append(f"solutions/{RECORD} does not record what the build writes")
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


def main(argv: list[str] | None = None) -> int:
    """``python -m bytes2logits build-labs [--lab LAB]... [--root DIR] [--force]`` (``make labs``)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bytes2logits build-labs",
                                     description="Regenerate the generated cells of solutions/ from the reference "
                                                 "code, then the labs/ release with nbgrader generate_assignment.")
    parser.add_argument("--lab", action="append", dest="labs", default=None,
                        help="only this lab: lab01, 1 or lab01_tokenizers (repeatable; default: every lab)")
    parser.add_argument("--root", default=None,
                        help="the course folder (default: the course folder around the current directory)")
    parser.add_argument("--force", action="store_true",
                        help="overwrite generated cells edited by hand, keeping a copy under build/solutions-backup/")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        root = command_root(args.root)
        labs = [find_lab(name) for name in args.labs] if args.labs else list(LABS.values())
    except (KeyError, RuntimeError) as e:
        print(f"error: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    labs = list(dict.fromkeys(labs))
    try:
        changed = build_solutions(root, labs, force=args.force)
        for p in changed:
            print(f"regenerated {p.relative_to(root)}")
        build_release(root, labs=labs)
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"released {len(labs)} lab(s) to {root / 'labs'} with nbgrader generate_assignment")
    return 0


if __name__ == "__main__":
    sys.exit(main())
