"""The nbgrader cycle on a synthetic class built from lab 01, with real nbgrader commands.

Each student exercises one way a submission can go wrong; every score is asserted exactly from the
gradebook. The run goes through ``python -m bytes2logits grade`` (what ``make grade`` calls), which runs
generate_assignment, autograde, generate_feedback and export.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from bytes2logits.kit.build import BEGIN, END
from bytes2logits.kit.grading import run_suite
from bytes2logits.kit.labs import LABS, hidden_root, repo_root, tool_env

pytestmark = pytest.mark.slow

LAB = LABS["lab01_tokenizers"]
CELL_TIMEOUT = 8  # seconds per cell for this test (the class default is longer)


def _meta(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def _answers_from_solution() -> dict[str, str]:
    sol = nbformat.read(LAB.source_notebook(), as_version=4)
    return {_meta(c)["grade_id"]: c.source for c in sol.cells if _meta(c).get("solution")}


def _replace_in(src: str, old: str, new: str) -> str:
    assert old in src, f"fixture text {old!r} not found in the reference answer"
    return src.replace(old, new, 1)


def _submission(answers: dict[str, str]):
    nb = nbformat.read(LAB.release_notebook(), as_version=4)
    for cell in nb.cells:
        gid = _meta(cell).get("grade_id")
        if gid in answers:
            cell.source = answers[gid]
    return nb


BYTE_DECODE_BYTES = "return bytes(_as_id(i, pos, 256) for pos, i in enumerate(ids))"


def _class(correct: dict[str, str]) -> dict[str, tuple]:
    """student id -> (notebook, extra files, expected {task: score})."""
    full = {t.id: float(t.points) for t in LAB.tasks}
    blank = {t.id: 0.0 for t in LAB.tasks}
    students = {}

    students["correct"] = (_submission(correct), {}, dict(full))
    students["blank"] = (_submission({}), {}, dict(blank))

    # Partial: range check without the position in the message, so three hidden checks of task 1 fail.
    partial = dict(correct)
    partial["answer_byte_tokenizer"] = _replace_in(
        correct["answer_byte_tokenizer"], BYTE_DECODE_BYTES,
        'ids = list(ids)\n        for i in ids:\n            if not 0 <= i <= 255:\n'
        '                raise ValueError(f"bad id {i}")\n        return bytes(ids)')
    n_byte = _count_tests("byte_tokenizer")
    students["partial"] = (_submission(partial), {}, {**full, "byte_tokenizer": round(3 * (n_byte - 3) / n_byte, 2)})

    loop = dict(correct)
    loop["answer_char_tokenizer"] = _replace_in(
        correct["answer_char_tokenizer"], "unk = self.unk_id", "while True:\n            pass")
    students["loop"] = (_submission(loop), {}, {**full, "char_tokenizer": 0.0})

    swallow = dict(correct)
    swallow["answer_byte_tokenizer"] = _replace_in(
        correct["answer_byte_tokenizer"], 'return list(text.encode("utf-8"))',
        "import time\n        while True:\n            try:\n                time.sleep(0.05)\n"
        "            except KeyboardInterrupt:\n                pass")
    students["swallow"] = (_submission(swallow), {}, {**full, "byte_tokenizer": 0.0})

    crash = dict(correct)
    crash["answer_char_tokenizer"] = _replace_in(
        correct["answer_char_tokenizer"], "unk = self.unk_id", "import os\n        os._exit(1)")
    students["crash"] = (_submission(crash), {}, {**full, "char_tokenizer": 0.0})

    # Tampered: blank task 3 whose test cell now just evaluates to full marks, and task 1 worth 50 points.
    tamper_answers = {k: v for k, v in correct.items() if k != "answer_stream_decoder"}
    tampered = _submission(tamper_answers)
    for cell in tampered.cells:
        if _meta(cell).get("grade_id") == "stream_decoder":
            cell.source = "3"
        if _meta(cell).get("grade_id") == "byte_tokenizer":
            cell.metadata["nbgrader"]["points"] = 50
            cell.source = "50"
    students["tamper"] = (tampered, {}, {**full, "stream_decoder": 0.0})

    deleted = _submission(correct)
    deleted.cells = [c for c in deleted.cells if _meta(c).get("grade_id") != "char_tokenizer"]
    students["deleted"] = (deleted, {}, dict(full))

    warn = dict(correct)
    warn["answer_byte_tokenizer"] = _replace_in(
        correct["answer_byte_tokenizer"], 'return list(text.encode("utf-8"))',
        'import warnings\n        warnings.warn("encode() was called", UserWarning)\n'
        '        return list(text.encode("utf-8"))')
    students["warn"] = (_submission(warn), {}, dict(full))

    # Shadowing: the partial answers, plus files that would fake a pass if the grader imported them.
    shadow_files = {
        "pytest.py": "raise SystemExit('a submitted pytest.py was imported')\n",
        "conftest.py": ("import pytest\n\n@pytest.hookimpl(wrapper=True)\n"
                        "def pytest_runtest_makereport(item, call):\n    rep = yield\n"
                        "    rep.outcome = 'passed'\n    return rep\n"),
        "sitecustomize.py": "raise SystemExit('a submitted sitecustomize.py was imported')\n",
    }
    students["shadow"] = (_submission(partial), shadow_files, dict(students["partial"][2]))
    return students


def _count_tests(task: str) -> int:
    outcomes, errors, _ = run_suite(hidden_root() / LAB.name / f"test_{task}.py")
    assert not errors
    return len(outcomes)


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    repo = repo_root()
    shutil.copy(repo / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(repo / "solutions" / LAB.name, root / "solutions" / LAB.name)
    students = _class(_answers_from_solution())
    for sid, (nb, files, _) in students.items():
        folder = root / "submitted" / sid / LAB.name
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{LAB.name}.ipynb")
        for name, text in files.items():
            (folder / name).write_text(text)
    cmd = [sys.executable, "-m", "bytes2logits", "grade", "--root", str(root), "--timeout", str(CELL_TIMEOUT)]
    result = subprocess.run(cmd, cwd=root, env=tool_env(), capture_output=True, text=True, timeout=900)
    return root, students, result


def test_grade_run_exits_zero(graded_class):
    root, _, result = graded_class
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (root / "grades.csv").is_file()


@pytest.mark.parametrize("student", ["correct", "blank", "partial", "loop", "swallow", "crash", "tamper",
                                     "deleted", "warn", "shadow"])
def test_scores_from_gradebook(graded_class, student):
    from nbgrader.api import Gradebook

    root, students, result = graded_class
    assert result.returncode == 0, result.stderr[-2000:]
    expected = students[student][2]
    with Gradebook("sqlite:///" + str(root / "gradebook.db")) as gb:
        sub = gb.find_submission_notebook(LAB.name, LAB.name, student)
        got = {g.name: g.score for g in sub.grades if g.cell_type == "code" and g.max_score > 0}
        assert got == pytest.approx(expected, abs=1e-9), f"{student}: {got} != {expected}"
        assert sub.max_score == LAB.total_points
        assert not sub.needs_manual_grade, f"{student} was flagged for manual grading"


def test_partial_is_strictly_between(graded_class):
    _, students, _ = graded_class
    total = sum(students["partial"][2].values())
    assert 0 < total < LAB.total_points


def test_feedback_has_no_hidden_code(graded_class):
    from bytes2logits.kit.classroom import leaked_hidden_code

    root, students, _ = graded_class
    pages = list((root / "feedback").rglob("*.html"))
    assert len(pages) == len(students)
    assert leaked_hidden_code(root / "feedback") == []
    # ... while the feedback does teach: the failing check's name and message are there.
    partial = (root / "feedback" / "partial" / LAB.name / f"{LAB.name}.html").read_text()
    assert "test_decode_rejects_ids_outside_0_255" in partial


def test_export_lists_every_student(graded_class):
    import csv

    root, students, _ = graded_class
    rows = list(csv.DictReader((root / "grades.csv").open()))
    assert {r["student_id"] for r in rows} == set(students)
    by_id = {r["student_id"]: float(r["raw_score"]) for r in rows}
    for sid, (_, _, expected) in students.items():
        assert by_id[sid] == pytest.approx(sum(expected.values()), abs=1e-9)


def test_solution_markers_present_in_fixture_answers():
    """The fixture edits the real reference answers (guards against editing text that moved)."""
    answers = _answers_from_solution()
    assert all(BEGIN in src and END in src for src in answers.values())
