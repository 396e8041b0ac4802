"""What a learner reads when a check fails, how checks are weighted, and how a notebook finds its lab."""

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from bytes2logits.kit import grading
from bytes2logits.kit.grading import run_suite, score
from bytes2logits.kit.labs import LABS, find_lab, hidden_root, lab_of_notebook, repo_root, tool_env

ROOT = repo_root()

SUITE = '''
import pytest


def test_weighted_pass():
    """a heavy check that passes."""


@pytest.mark.weight(3)
def test_weighted_fail():
    """encode must give the ids in order."""
    assert False, "on 'abc' your ids came out reversed"


def test_rule_only():
    """the rule alone, when the assert says nothing more."""
    assert False


def test_did_not_raise():
    """a negative id is refused with ValueError."""
    with pytest.raises(ValueError):
        pass


def test_stub():
    """decode is written."""
    raise NotImplementedError()


def test_other_error():
    """encode accepts a str."""
    {}["missing"]
'''


@pytest.fixture
def suite_outcomes(tmp_path, monkeypatch):
    root = tmp_path / "hidden"
    (root / "lab01_tokenizers").mkdir(parents=True)
    shutil.copy(hidden_root() / "conftest.py", root / "conftest.py")
    suite = root / "lab01_tokenizers" / "test_feedback.py"
    suite.write_text(SUITE, encoding="utf-8")
    monkeypatch.setenv("BYTES2LOGITS_HIDDEN_TESTS", str(root))
    grading._ACTIVE = object()  # the suite never asks for impl; this keeps the reference out of it
    try:
        outcomes, errors, _ = run_suite(suite)
    finally:
        grading._ACTIVE = None
    assert not errors
    return {o.name: o for o in outcomes}


def test_a_failed_check_prints_its_rule_and_the_detail(suite_outcomes):
    o = suite_outcomes["test_weighted_fail"]
    assert o.message == "encode must give the ids in order: on 'abc' your ids came out reversed"
    assert suite_outcomes["test_rule_only"].message == "the rule alone, when the assert says nothing more."


def test_did_not_raise_is_said_in_words(suite_outcomes):
    message = suite_outcomes["test_did_not_raise"].message
    assert message == "a negative id is refused with ValueError. (your code did not raise ValueError)"
    assert "DID NOT RAISE" not in message and "Failed" not in message


def test_a_stub_is_not_written_yet(suite_outcomes):
    message = suite_outcomes["test_stub"].message
    assert message.startswith("decode is written. (not written yet")
    assert "your code raised KeyError: 'missing'" in suite_outcomes["test_other_error"].message


def test_weights_decide_the_score(suite_outcomes):
    assert suite_outcomes["test_weighted_fail"].weight == 3
    assert suite_outcomes["test_weighted_pass"].weight == 1
    # 1 of 8 weight units passed (3 + five unmarked checks), not 1 of 6 checks.
    assert score(10, list(suite_outcomes.values())) == 1.25


def test_score_weighs_each_outcome():
    Outcome = grading.TestOutcome
    outcomes = [Outcome("a", True, "", 3), Outcome("b", False, "x", 1), Outcome("b", False, "x", 1)]
    assert score(5, outcomes) == 3.0
    assert score(5, []) == 0.0


def test_a_bad_weight_is_refused(tmp_path, monkeypatch):
    root = tmp_path / "hidden"
    (root / "lab01_tokenizers").mkdir(parents=True)
    shutil.copy(hidden_root() / "conftest.py", root / "conftest.py")
    suite = root / "lab01_tokenizers" / "test_bad.py"
    suite.write_text("import pytest\n\n@pytest.mark.weight(0)\ndef test_zero():\n    pass\n", encoding="utf-8")
    monkeypatch.setenv("BYTES2LOGITS_HIDDEN_TESTS", str(root))
    grading._ACTIVE = object()
    try:
        outcomes, _, code = run_suite(suite)
    finally:
        grading._ACTIVE = None
    assert code == pytest.ExitCode.USAGE_ERROR and not outcomes


# ------------------------------------------------------------------ which lab a notebook is


def _copy(lab, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(lab.release_notebook(), path)
    return path


@pytest.mark.parametrize("name", ["my_attempt.ipynb", "alice_lab02_words.ipynb", "Lab02.ipynb"])
def test_a_copy_is_found_by_its_cells_whatever_its_name(tmp_path, name):
    assert find_lab(_copy(LABS["lab02_words"], tmp_path / name)) is LABS["lab02_words"]


def test_a_renamed_notebook_is_still_its_own_lab(tmp_path):
    path = _copy(LABS["lab01_tokenizers"], tmp_path / "lab02_words" / "lab02_mixup.ipynb")
    assert find_lab(path) is LABS["lab01_tokenizers"]


def test_names_in_every_spelling():
    for name in ("lab01", "lab01_tokenizers", "Lab1", "01"):
        assert find_lab(name) is LABS["lab01_tokenizers"]
    with pytest.raises(KeyError, match="no lab matches"):
        find_lab("lab99")


def test_a_notebook_with_two_labs_cells_is_refused(tmp_path):
    a = nbformat.read(LABS["lab01_tokenizers"].release_notebook(), as_version=4)
    b = nbformat.read(LABS["lab02_words"].release_notebook(), as_version=4)
    a.cells += b.cells
    path = tmp_path / "both.ipynb"
    nbformat.write(a, path)
    with pytest.raises(KeyError, match="several labs"):
        lab_of_notebook(path)


def test_a_plain_notebook_is_found_by_its_folder_or_refused(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    nbformat.write(nb, tmp_path / "scratch.ipynb")
    with pytest.raises(KeyError, match="--lab"):
        find_lab(tmp_path / "scratch.ipynb")
    (tmp_path / "lab03_bpe_training").mkdir()
    nbformat.write(nb, tmp_path / "lab03_bpe_training" / "notes.ipynb")
    assert find_lab(tmp_path / "lab03_bpe_training" / "notes.ipynb") is LABS["lab03_bpe_training"]


def _cli(*args, cwd=ROOT, env=None):
    return subprocess.run([sys.executable, "-m", "bytes2logits", *args], cwd=cwd, env=env or tool_env(),
                          capture_output=True, text=True, timeout=600)


def test_check_refuses_a_lab_that_the_notebook_is_not(tmp_path):
    path = _copy(LABS["lab01_tokenizers"], tmp_path / "lab02_words.ipynb")
    out = _cli("check", str(path), "--lab", "lab02")
    assert out.returncode == 2
    assert "holds the graded cells of lab01_tokenizers, not of lab02_words" in out.stderr


@pytest.mark.slow
def test_start_makes_a_private_copy_that_check_grades(tmp_path):
    """make start copies the release to work/ once; make check LAB=... grades that copy, not labs/."""
    course = tmp_path / "course"
    for part in ("labs/lab01_tokenizers", "solutions/lab01_tokenizers"):
        shutil.copytree(ROOT / part, course / part)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    env = tool_env(BYTES2LOGITS_ROOT=str(course), BYTES2LOGITS_HIDDEN_TESTS=str(hidden_root()))
    first = _cli("start", "lab01", cwd=course, env=env)
    assert first.returncode == 0, first.stderr
    mine = course / "work" / "lab01_tokenizers" / "lab01_tokenizers.ipynb"
    assert mine.is_file() and "work/lab01_tokenizers/lab01_tokenizers.ipynb" in first.stdout
    # The learner writes an answer; starting again keeps it.
    solved = nbformat.read(ROOT / "solutions/lab01_tokenizers/lab01_tokenizers.ipynb", as_version=4)
    nb = nbformat.read(mine, as_version=4)
    for cell, source in zip(nb.cells, solved.cells):
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "answer_byte_tokenizer":
            cell.source = source.source
    nbformat.write(nb, mine)
    before = mine.read_bytes()
    again = _cli("start", "lab01_tokenizers", cwd=course, env=env)
    assert again.returncode == 0 and "started already" in again.stdout and mine.read_bytes() == before
    graded = _cli("check", "--lab", "lab01", cwd=course, env=env)
    assert f"checking {mine}" in graded.stdout, graded.stdout + graded.stderr
    # (The answer is the reference's own code, which the integrity scan rightly flags: count checks, not points.)
    rows = {line.split()[0]: line.split()[2].split("/") for line in graded.stdout.splitlines()
            if line.split() and line.split()[0] in {t.id for t in LABS["lab01_tokenizers"].tasks}}
    passed, total = rows["byte_tokenizer"]
    assert passed == total and rows["char_tokenizer"][0] == "0", graded.stdout


def test_the_work_folder_is_ignored_by_git():
    out = subprocess.run(["git", "check-ignore", "-q", "work/lab01_tokenizers/lab01_tokenizers.ipynb"], cwd=ROOT)
    assert out.returncode == 0, "work/ must be git-ignored: it holds learners' own copies"


# ------------------------------------------------------------------ errors in an executed notebook


@pytest.mark.slow
def test_a_time_limit_and_a_stub_are_said_in_words(tmp_path):
    """nbgrader's feedback for a cell stopped at its limit, or a stub, is one sentence, not tracebacks."""
    from bytes2logits.kit.nbexec import RobustExecute

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("while True:\n    pass"),
        nbformat.v4.new_code_cell("def f():\n    raise NotImplementedError()\n\nf()"),
        nbformat.v4.new_code_cell("print('still runs')"),
    ])
    RobustExecute(timeout=3, kernel_name="python3").preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    loop, stub, after = (c.outputs for c in nb.cells)
    assert [o.ename for o in loop if o.output_type == "error"] == ["TimeLimit"]
    assert "time limit of 3 s" in loop[-1].evalue and "endless loop" in loop[-1].evalue
    assert not any("KeyboardInterrupt" in "".join(o.get("traceback", [])) for o in loop)
    assert [o.evalue for o in stub if o.output_type == "error"][0].startswith("not written yet")
    assert len(stub[-1].traceback) == 1
    assert after[0].text == "still runs\n"


def test_a_failed_visible_check_says_what_it_means():
    """In a learner's kernel, a failed visible check is followed by a note; other errors are left alone."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    try:
        shell.run_cell("from bytes2logits.kit.grading import explain_failed_checks\n"
                       "explain_failed_checks('lab04_bpe_encode')", store_history=True)
        with capture_output() as grader_cell:
            shell.run_cell("assert 1 + 1 == 3, 'two ones make two'\nprint('visible checks passed')",
                           store_history=True)
        with capture_output() as own_cell:
            shell.run_cell("assert False, 'my own check'", store_history=True)
        shell.run_cell("def stub():\n    raise NotImplementedError()", store_history=True)
        with capture_output() as blank_grader_cell:
            shell.run_cell("stub()\nprint('visible checks passed')", store_history=True)
        with capture_output() as blank_own_cell:
            shell.run_cell("stub()", store_history=True)
    finally:
        InteractiveShell.clear_instance()
    assert "two ones make two" in grader_cell.stdout
    assert "make check LAB=lab04 runs the task's hidden checks" in grader_cell.stdout
    assert "my own check" in own_cell.stdout and "make check" not in own_cell.stdout
    assert "NotImplementedError" in blank_grader_cell.stdout and "not written yet" in blank_grader_cell.stdout
    assert "make check" not in blank_grader_cell.stdout  # the stub's words, not the failed-check note
    assert "NotImplementedError" in blank_own_cell.stdout and "not written yet" not in blank_own_cell.stdout


def test_grade_takes_a_lab_in_either_spelling(monkeypatch, capsys):
    from bytes2logits.kit import classroom

    seen = {}
    monkeypatch.setattr(classroom, "grade_class",
                        lambda root, labs, timeout, **options: seen.setdefault("labs", labs) and 0)
    assert classroom.main(["--root", str(ROOT), "--lab", "lab01", "--lab", "lab02_words"]) == 0
    assert seen["labs"] == ["lab01_tokenizers", "lab02_words"]
    assert classroom.main(["--lab", "lab99"]) == 2
    assert "no lab matches 'lab99'" in capsys.readouterr().err


@pytest.mark.slow
def test_worker_eval_uses_builtins_no_notebook_can_rebind():
    """A probe expression runs with the worker's builtins as they were before the notebook, numpy or not."""
    from bytes2logits.kit.probes import worker_eval
    from bytes2logits.kit.remote import RemoteImplementation, Submission

    cells = [(0, "import builtins\nbuiltins.eval = lambda *a, **k: (lambda g: 0)\nbuiltins.sorted = None\n"
                 "__builtins__ = {}\n\ndef shared():\n    return TABLE\n\nTABLE = {0: 'a'}")]
    sub = Submission(cells, label="hostile")
    try:
        impl = RemoteImplementation(sub, "hostile", {})
        probe = worker_eval(impl, "lambda f: (f().__setitem__(0, 'X'), sorted(f()), f()[0])")
        assert probe(impl.shared) == (None, [0], "X")  # the real eval and sorted, the shared dict seen as shared
    finally:
        sub.close()


def _in_sandbox_of(lab, source: str, expr: str):
    """The value of ``expr`` in a worker of ``lab``'s grading sandbox that ran ``source`` (or the error)."""
    from bytes2logits.kit.probes import worker_eval
    from bytes2logits.kit.redact import package_dir, redacted_package
    from bytes2logits.kit.remote import RemoteImplementation, Submission

    sub = Submission([(0, source)], label="reach", overlays=((redacted_package(lab), package_dir()),))
    try:
        impl = RemoteImplementation(sub, "reach", {})
        return worker_eval(impl, expr)(impl.target)
    finally:
        sub.close()


@pytest.mark.parametrize("lab, source, call", [
    ("lab03_bpe_training", "from bytes2logits.lessons.merge_stepper import bpe_trace as target",
     "lambda f: f('low lower', 2)"),
    ("lab04_bpe_encode", "from bytes2logits.lessons.bpe import FastBPETokenizer, build_vocab\n\n\n"
                         "def target(merges):\n    return FastBPETokenizer(build_vocab(merges), merges)",
     "lambda f: f([(b'a', b'b')]).encode('ab')"),
])
def test_another_package_function_that_does_the_task_is_a_stub_there(lab, source, call):
    """``Lab.also_answers`` (and subclasses of a graded class) do a task's work: in that lab's grading
    sandbox they only say that the task is the learner's."""
    with pytest.raises(NotImplementedError, match="yours to write"):
        _in_sandbox_of(LABS[lab], source, call)


def test_what_the_set_up_cell_imports_stays_usable():
    """Lab 05's sandbox hides lab 05's tasks, not lab 04's BPETokenizer, which its set-up cell may import."""
    got = _in_sandbox_of(LABS["lab05_byte_codec"], "from bytes2logits.lessons.bpe import BPETokenizer, build_vocab"
                         "\n\n\ndef target(merges):\n    return BPETokenizer(build_vocab(merges), merges)",
                         "lambda f: f([(b'a', b'b')]).encode('abab')")
    assert got == [256, 256]
