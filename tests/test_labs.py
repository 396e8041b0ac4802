"""Labs: generated from one source, released without answers, graded the same way everywhere."""

import json
import subprocess
import sys

import nbformat
import pytest

from bytes2logits.kit.build import BEGIN_HIDDEN, solution_lines, stale
from bytes2logits.kit.grading import Implementation, run_suite
from bytes2logits.kit.labs import LABS, hidden_root, repo_root, tool_env

ROOT = repo_root()
NOTEBOOKS = sorted(p for d in ("course", "solutions", "labs") for p in (ROOT / d).rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts)


@pytest.mark.slow
def test_solutions_and_labs_are_up_to_date():
    reasons = stale()
    assert reasons == [], "run `make labs`:\n" + "\n".join(reasons)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_notebooks_have_no_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None, f"cell {i} has outputs"
    assert "jupytext" not in nb["metadata"]


@pytest.mark.parametrize("lab", LABS.values(), ids=lambda lab: lab.name)
def test_release_holds_no_solution_or_hidden_code(lab):
    nb = nbformat.read(lab.release_notebook(), as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    assert BEGIN_HIDDEN not in text and "run_hidden_tests" not in text
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
    leaked = [line for line in solution_lines(lab) if line in text]
    assert leaked == [], f"solution code in the release: {leaked[:3]}"
    assert len(solution_lines(lab)) > 10  # the check above has something to look for
    assert list((lab.release_notebook().parent).iterdir()) == [lab.release_notebook()]
    for suite in (hidden_root() / lab.name).glob("test_*.py"):
        for line in suite.read_text().splitlines():
            if len(line.strip()) > 40:
                assert line.strip() not in text, f"hidden-test code in the release: {line.strip()!r}"


@pytest.mark.parametrize("lab", LABS.values(), ids=lambda lab: lab.name)
def test_every_task_has_a_hidden_suite_and_cells(lab):
    nb = nbformat.read(lab.source_notebook(), as_version=4)
    ids = {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells}
    for task in lab.tasks:
        assert (hidden_root() / lab.name / f"test_{task.id}.py").is_file()
        assert {task.id, f"answer_{task.id}"} <= ids


def test_hidden_suites_run_on_a_notebook_through_the_worker():
    """``pytest tests/hidden/<lab> --impl NOTEBOOK`` grades the notebook through the sandboxed worker."""
    lab = LABS["lab01_tokenizers"]
    for notebook, want_pass in ((lab.source_notebook(), True), (lab.release_notebook(), False)):
        cmd = [sys.executable, "-m", "pytest", str(hidden_root() / lab.name), "-q", "-p", "no:cacheprovider",
               "--impl", str(notebook), "-o", "addopts=", "--import-mode=importlib", "-rN"]
        r = subprocess.run(cmd, cwd=ROOT, env=tool_env(), capture_output=True, text=True, timeout=600)
        last = r.stdout.strip().splitlines()[-1]
        if want_pass:
            assert r.returncode == 0 and " passed" in last and "failed" not in last, last
        else:
            assert "passed" not in last and " failed" in last, \
                f"{notebook.name}: some hidden tests pass on the stub: {last}"


def test_missing_name_is_a_teaching_failure():
    impl = Implementation({}, "your notebook")
    with pytest.raises(AttributeError) as info:
        _ = impl.ByteTokenizer
    assert "does not define `ByteTokenizer`" in str(info.value)
    assert isinstance(info.value, AssertionError), "a missing name must count as a failed check, not an error"


def test_feedback_lines_are_words_not_code(tmp_path, monkeypatch):
    """The bridge reports a failed check by name and docstring, without test code or values."""
    from bytes2logits.kit import grading

    ns = dict(LABS["lab01_tokenizers"].reference_namespace())

    class Wrong(ns["ByteTokenizer"]):
        def decode(self, ids):
            return bytes(i % 256 for i in ids).decode("utf-8", "replace")

    ns["ByteTokenizer"] = Wrong
    grading._ACTIVE = Implementation(ns, "test")
    try:
        outcomes, errors, _ = run_suite(hidden_root() / "lab01_tokenizers" / "test_byte_tokenizer.py")
    finally:
        grading._ACTIVE = None
    failed = [o for o in outcomes if not o.passed]
    assert not errors and failed and len(failed) < len(outcomes)
    for o in failed:
        assert o.name.startswith("test_") and o.message
        assert "assert " not in o.message and "==" not in o.message


def _check(notebook, cwd=ROOT) -> subprocess.CompletedProcess:
    """``python -m bytes2logits check NOTEBOOK``, as a learner runs it."""
    return subprocess.run([sys.executable, "-m", "bytes2logits", "check", str(notebook)], cwd=cwd, env=tool_env(),
                          capture_output=True, text=True, timeout=600)


def _checks(stdout: str, task: str) -> tuple[int, int]:
    """(passed, total) hidden checks of ``task`` from check's table."""
    import re

    m = re.search(rf"^{re.escape(task)}\s+\S+\s+(\d+)/(\d+)\s*$", stdout, re.M)
    assert m, f"no table row for {task} in:\n{stdout}"
    return int(m.group(1)), int(m.group(2))


@pytest.mark.slow
@pytest.mark.parametrize("lab", LABS.values(), ids=lambda lab: lab.name)
def test_check_command_full_marks_on_solution_zero_on_release(lab):
    good = _check(lab.source_notebook())
    assert good.returncode == 0, good.stdout + good.stderr
    assert f"score: {lab.total_points}/{lab.total_points}" in good.stdout
    blank = _check(lab.release_notebook())
    assert blank.returncode == 1
    assert f"score: 0/{lab.total_points}" in blank.stdout
    # Every hidden check passes on the solution and every one fails on the blank release (CI proves both).
    for task in lab.tasks:
        n = _checks(good.stdout, task.id)
        assert n[1] > 0 and n[0] == n[1], f"{task.id}: {n[0]}/{n[1]} hidden checks pass on the solution"
        assert _checks(blank.stdout, task.id) == (0, n[1]), f"{task.id}: some hidden checks pass on the stub"


def _lab01_copy_with_task1(tmp_path, make_answer):
    """Lab 01's release with task 1's answer cell set to ``make_answer(reference answer)``; (path, check)."""
    lab = LABS["lab01_tokenizers"]
    sol = nbformat.read(lab.source_notebook(), as_version=4)
    reference = next(c.source for c in sol.cells
                     if c.metadata.get("nbgrader", {}).get("grade_id") == "answer_byte_tokenizer")
    nb = nbformat.read(lab.release_notebook(), as_version=4)
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("grade_id") == "answer_byte_tokenizer":
            c.source = make_answer(reference)
    copy = tmp_path / "lab01_tokenizers.ipynb"
    nbformat.write(nb, copy)

    return copy, lambda: _check(copy, tmp_path)


@pytest.mark.slow
def test_check_grades_a_learners_partial_copy(tmp_path):
    """A copy with one task done scores exactly that task; the learner's file is not modified."""
    # "In their own words": not a verbatim copy of the reference, which would be flagged.
    copy, check = _lab01_copy_with_task1(tmp_path, lambda ref: "# my own version\nchecked = True\n\n" + ref)
    before = copy.read_bytes()
    r = check()
    assert r.returncode == 1
    assert "score: 3/10" in r.stdout
    assert "flagged" not in r.stdout
    assert copy.read_bytes() == before


@pytest.mark.slow
def test_check_gives_nothing_for_the_reference_and_flags_a_copy(tmp_path):
    """Importing the task's reference earns 0 (the grading sandbox holds a stub that says the task is the
    learner's); pasting the reference's code is flagged for an instructor's review, with the reason."""
    _, check = _lab01_copy_with_task1(tmp_path, lambda ref: "from bytes2logits.lessons.basic import ByteTokenizer")
    r = check()
    assert r.returncode == 1
    assert "score: 0/10" in r.stdout and "yours to write" in r.stdout, r.stdout
    lab = LABS["lab01_tokenizers"]
    sol = nbformat.read(lab.source_notebook(), as_version=4)
    nb = nbformat.read(lab.release_notebook(), as_version=4)
    pasted = {c.metadata["nbgrader"]["grade_id"]: c.source for c in sol.cells
              if c.metadata.get("nbgrader", {}).get("grade_id") == "answer_char_tokenizer"}
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("grade_id") in pasted:
            c.source = pasted[c.metadata["nbgrader"]["grade_id"]]
    copy = tmp_path / "pasted" / f"{lab.name}.ipynb"
    copy.parent.mkdir()
    nbformat.write(nb, copy)
    r = _check(copy, tmp_path)
    assert "score: 4/10" in r.stdout, r.stdout  # the pasted code runs and keeps its points until reviewed
    assert "flagged for an instructor's review" in r.stdout and "of the reference's own code" in r.stdout


@pytest.mark.slow
def test_the_package_reached_by_a_route_the_scan_cannot_read_fails_the_task(tmp_path):
    """Lab 16's norms answered by calling the course package's own functions, found through a module name
    built at run time: in the norms task's grading sandbox they are stubs, so that task gets none of its
    checks and says why; the other tasks keep full marks."""
    lab = LABS["lab16_forward_pass"]
    nb = nbformat.read(lab.source_notebook(), as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "answer_norms")
    cell.source = ('_where = __import__("importlib").import_module(".".join(["bytes2logits", "engine", "ops"]))\n\n\n'
                   "def rms_norm(x, weight, eps):\n    return _where.rms_norm(x, weight, eps)\n\n\n"
                   "def swiglu(gate, up):\n    return _where.swiglu(gate, up)\n")
    copy = tmp_path / f"{lab.name}.ipynb"
    nbformat.write(nb, copy)
    r = _check(copy, tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    norms = next(t for t in lab.tasks if t.id == "norms")
    assert _checks(r.stdout, "norms")[0] == 0, r.stdout
    # the suite's fence speaks first where it runs ("the course package's own"); else the stub does
    assert "yours to write" in r.stdout or "course package's own" in r.stdout, r.stdout
    for task in lab.tasks:
        if task is not norms:
            passed, total = _checks(r.stdout, task.id)
            assert passed == total, f"{task.id}: {passed}/{total}\n{r.stdout}"


@pytest.mark.slow
def test_lab16_forward_is_graded_apart_from_the_mask(tmp_path):
    """A wrong causal_mask (task 3) costs task 3, not task 4: the forward checks give the learner's forward
    the package's mask, except the one that runs the learner's whole stack."""
    lab = LABS["lab16_forward_pass"]
    nb = nbformat.read(lab.source_notebook(), as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "answer_attention")
    assert "def causal_mask(" in cell.source
    # No mask at all: every query reads every key, later ones included.
    cell.source += "\n\n\ndef causal_mask(n, start_pos):\n    return None\n"
    copy = tmp_path / f"{lab.name}.ipynb"
    nbformat.write(nb, copy)
    r = _check(copy, tmp_path)
    passed, total = _checks(r.stdout, "attention")
    assert passed < total, r.stdout
    passed, total = _checks(r.stdout, "forward")
    assert passed == total - 1, r.stdout  # all but test_your_whole_stack_matches_llama_cpp
    assert "whole_stack" in r.stdout or "whole stack" in r.stdout, r.stdout
