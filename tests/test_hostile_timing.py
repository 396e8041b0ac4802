"""A class whose hostile students go for the speed gates, graded by ``make grade``'s own command.

Lab 03's gate asks ``train_bpe`` to be incremental: a trainer that recounts every pair after each merge is
right but slow, and loses the speed checks' points. The attacks of the audit on that gate:

* CPU burners started by the notebook, paused only while its own code is called, slow the reference's timing
  so that a slow trainer looks fast beside it: a timing now kills every process of the learner's sandbox but
  its worker, and stops the worker while the reference runs;
* a memo that answers a timed call instantly (with a wrong result, or with a right one remembered from an
  earlier call of the same input) sets the best time: every timed result is checked, each timing pair gets
  its own input.

Each of them must score exactly what the same slow trainer scores without the attack (``slow``, graded in the
same run), and less than full marks. The class also holds an honest lab 15 submission: its feedback page
quotes the lab's own text, and must not be withheld as if it quoted a hidden suite (every lab 15 and lab 17
page of the audit's class was).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bytes2logits.kit.labs import LABS, repo_root, tool_env
from bytes2logits.kit.sampleclass import course_copy, submission, write_submission

pytestmark = pytest.mark.slow

LAB03 = LABS["lab03_bpe_training"]
LAB15 = LABS["lab15_dequantization"]
FIXTURES = repo_root() / "tests" / "fixtures"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_lab03_grading import NAIVE_TRAINER  # noqa: E402

# Started by a cell of the notebook: four processes that burn CPU for good, in the worker and in the kernel.
BURNERS = ("import os\n\nfor _ in range(4):\n    if os.fork() == 0:\n        os.setsid()\n"
           "        while True:\n            pass\n")


def _honest(lab) -> dict[str, str]:
    return json.loads((FIXTURES / "honest" / f"{lab.name}.json").read_text(encoding="utf-8"))


def _hostile(name: str) -> str | None:
    path = FIXTURES / "hostile" / name
    return path.read_text(encoding="utf-8") if path.is_file() else None


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    import nbformat

    root = course_copy(tmp_path_factory.mktemp("timing"), LAB03)
    course_copy(root, LAB15)
    honest = _honest(LAB03)
    slow = {**honest, "answer_train_bpe": NAIVE_TRAINER}
    students = {"honest": (LAB03, honest, None), "slow": (LAB03, slow, None)}
    burner = submission(LAB03, slow)
    at = next(i for i, c in enumerate(burner.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
    burner.cells.insert(at + 1, nbformat.v4.new_code_cell(BURNERS))
    students["burner"] = (LAB03, None, burner)
    for name in ("lab03_memo_wrong.py", "lab03_memo_right.py"):
        answer = _hostile(name)
        if answer is not None:
            students[name[len("lab03_"):-len(".py")]] = (LAB03, {**honest, "answer_train_bpe": answer}, None)
    students["honest15"] = (LAB15, _honest(LAB15), None)
    for sid, (lab, answers, nb) in students.items():
        write_submission(root, sid, lab, nb if nb is not None else submission(lab, answers))
    cmd = [sys.executable, "-m", "bytes2logits", "grade", "--root", str(root), "--jobs", "2"]
    result = subprocess.run(cmd, cwd=root, env=tool_env(BYTES2LOGITS_GRADING_EXAMPLES="30"), capture_output=True,
                            text=True, timeout=2400)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(root / "gradebook.db")) as gb:
        scores = {sid: {g.name: g.score for g in gb.find_submission_notebook(lab.name, lab.name, sid).grades
                        if g.max_score > 0}
                  for sid, (lab, _, _) in students.items()}
    return root, students, scores, result


def test_the_honest_trainer_has_full_marks(graded):
    _, _, scores, result = graded
    assert sum(scores["honest"].values()) == LAB03.total_points, (scores["honest"], result.stdout[-2000:])


def test_a_slow_trainer_loses_the_speed_points(graded):
    _, _, scores, _ = graded
    assert scores["slow"]["count_pieces"] == LAB03.task("count_pieces").points
    assert scores["slow"]["train_bpe"] < LAB03.task("train_bpe").points


@pytest.mark.parametrize("attack", ["burner", "memo_wrong", "memo_right"])
def test_an_attack_on_the_gate_earns_nothing_more_than_the_slow_trainer(graded, attack):
    _, students, scores, _ = graded
    if attack not in students:
        pytest.fail(f"tests/fixtures/hostile/lab03_{attack}.py is missing")
    assert scores[attack] == scores["slow"], (attack, scores[attack], scores["slow"])
    assert scores[attack]["train_bpe"] < LAB03.task("train_bpe").points


def test_honest_feedback_of_lab15_is_not_withheld(graded):
    root, _, scores, result = graded
    assert sum(scores["honest15"].values()) == LAB15.total_points, scores["honest15"]
    page = (root / "feedback" / "honest15" / LAB15.name / f"{LAB15.name}.html").read_text()
    assert "withheld" not in page and "withheld" not in result.stdout + result.stderr
