"""A made-up class for the grading path's tests and benchmarks: a course copy and learners' notebooks.

A test of ``make grade``, of JupyterHub's exchange or of the grading throughput needs a course folder that is
not the repository (grading writes ``submitted/``, ``autograded/``, a gradebook) and notebooks that look like
a learner's: the release, with answers written into its answer cells. The correct answers are a learner's
own: ``tests/fixtures/honest/<lab>.json`` holds answers to every lab written independently of the reference
(from the release notebooks and chapters only; each scores full marks), so an honest student of a test is
not a copy of the reference, which the similarity check would rightly flag. A test derives a wrong answer
from them by one edit.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from .labs import Lab, repo_root

__all__ = ["answer_cells", "course_copy", "hostile_byte_tokenizer", "submission", "write_submission"]

# What the fallback answer starts with when a lab has no independent answers: a comment of the learner's.
OWN_WORDS = "# my answer\n_mine = True\n\n"


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def course_copy(root: Path, lab: Lab, *, hidden: bool = True) -> Path:
    """Make ``root`` a course folder with ``lab``'s source notebook, the repository's ``nbgrader_config.py``
    and (``hidden``) the lab's hidden suite with the suites' shared helpers. Returns ``root``."""
    repo = repo_root()
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(repo / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(repo / "solutions" / lab.name, root / "solutions" / lab.name)
    if hidden:
        suites = root / "tests" / "hidden"
        shutil.copytree(repo / "tests" / "hidden" / lab.name, suites / lab.name)
        for helper in (repo / "tests" / "hidden").glob("*.py"):
            shutil.copy(helper, suites / helper.name)
    return root


def answer_cells(lab: Lab, *, own_words: bool = True) -> dict[str, str]:
    """``grade_id -> source`` of an honest, correct learner's answer cells: the independent answers of
    ``tests/fixtures/honest/<lab>.json``, else the lab's solution cells (with ``own_words``, each starting
    with a comment of the learner's; those are the reference, and the similarity check flags them)."""
    import json

    import nbformat

    honest = repo_root() / "tests" / "fixtures" / "honest" / f"{lab.name}.json"
    if honest.is_file():
        return json.loads(honest.read_text(encoding="utf-8"))

    sol = nbformat.read(lab.source_notebook(), as_version=4)
    prefix = OWN_WORDS if own_words else ""
    return {_meta(c)["grade_id"]: prefix + c.source for c in sol.cells if _meta(c).get("solution")}


def submission(lab: Lab, answers: dict[str, str]):
    """``lab``'s release notebook with ``answers`` (``grade_id -> source``) in its answer cells; the other
    answer cells stay blank, as the learner received them."""
    import nbformat

    nb = nbformat.read(lab.release_notebook(), as_version=4)
    unknown = set(answers) - {_meta(c).get("grade_id") for c in nb.cells}
    if unknown:
        raise KeyError(f"{lab.name}'s release has no cell with grade_id {sorted(unknown)}")
    for cell in nb.cells:
        gid = _meta(cell).get("grade_id")
        if gid in answers:
            cell.source = answers[gid]
    return nb


def write_submission(root: Path, student: str, lab: Lab, nb, *, folder: str | None = None,
                     name: str | None = None) -> Path:
    """Write ``nb`` where ``nbgrader collect`` would put it: ``submitted/<student>/<lab>/<lab>.ipynb`` (or into
    another ``folder`` or under another ``name``, to make the strays a real class has). Returns the path."""
    import nbformat

    path = Path(root) / "submitted" / student / (folder or lab.name) / (name or f"{lab.name}.ipynb")
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def hostile_byte_tokenizer(body: str) -> str:
    """Lab 01's ``answer_byte_tokenizer`` cell as an attacker writes it: a ``ByteTokenizer`` whose every method
    and attribute runs ``body`` (so every check of that task meets it)."""
    return ("class ByteTokenizer:\n    def _attack(self, *args, **kwargs):\n" + textwrap.indent(body, " " * 8)
            + "\n\n    encode = decode = decode_bytes = _attack\n\n    @property\n    def vocab_size(self):\n"
            "        return self._attack()\n")
