"""The nbgrader cycle on a synthetic class built from lab 01, with real nbgrader commands.

Each student exercises one way a submission can go wrong, honest or hostile; every score is asserted
exactly from the gradebook and from ``grades.csv``. The run goes through ``python -m bytes2logits grade``
(what ``make grade`` calls): generate_assignment, autograde (sandboxed kernel, trusted grader), feedback
and export.

The hostile students attack task 1 (``byte_tokenizer``) and leave tasks 2 and 3 honest, so each case shows
both halves of the rule: the cheated task earns nothing (or is flagged for manual grading), and the rest of
the submission, and every other submission, is graded as usual.
"""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import nbformat
import pytest

from bytes2logits.kit import sandbox
from bytes2logits.kit.build import BEGIN, END
from bytes2logits.kit.grading import run_suite
from bytes2logits.kit.labs import LABS, hidden_root, repo_root, tool_env
from bytes2logits.kit.sampleclass import hostile_byte_tokenizer

pytestmark = pytest.mark.slow

LAB = LABS["lab01_tokenizers"]
CELL_TIMEOUT = 4  # seconds per cell and per call into a submission's code, for this test
# Hypothesis examples per property in this test's grading (a class grades with 150): the scores asserted here
# count checks, not examples, and each failing check of the partial students fails on its first examples.
GRADING_EXAMPLES = "30"


def _meta(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def _answers_from_solution() -> dict[str, str]:
    sol = nbformat.read(LAB.source_notebook(), as_version=4)
    return {_meta(c)["grade_id"]: c.source for c in sol.cells if _meta(c).get("solution")}


def _own_words(src: str) -> str:
    """An honest learner's answer: the reference's logic, but not a copy of its source."""
    return "# my answer\n_checked_by_me = True\n\n" + src


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


def _score_without(task: str, failing: str) -> float:
    """The points of ``task`` when every case of its check ``failing`` fails and the rest pass (weighted)."""
    from bytes2logits.kit.grading import score

    outcomes, errors, _ = run_suite(hidden_root() / LAB.name / f"test_{task}.py")
    assert not errors and any(o.name == failing for o in outcomes)
    for o in outcomes:
        o.passed = o.name != failing
    return score(LAB.task(task).points, outcomes)


BYTE_DECODE_BYTES = "return bytes(_as_id(i, pos, 256) for pos, i in enumerate(ids))"


class _Listener:
    """A TCP server on 127.0.0.1 that counts connections (a hostile worker must never reach it)."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self._stop = True
        self.thread.join(2)
        self.sock.close()


def _class(correct: dict[str, str], root, listener) -> dict[str, tuple]:
    """student id -> (notebook, extra files, expected {task: score}, expected flagged)."""
    full = {t.id: float(t.points) for t in LAB.tasks}
    blank = {t.id: 0.0 for t in LAB.tasks}
    honest = {k: _own_words(v) for k, v in correct.items()}
    cheated = {**full, "byte_tokenizer": 0.0}
    students = {}

    def add(sid, answers, expected, flagged=False, files=None, nb=None):
        students[sid] = (nb or _submission(answers), files or {}, expected, flagged)

    add("correct", honest, dict(full))
    add("blank", {}, dict(blank))

    # Partial: range check without the position in the message, so three hidden checks of task 1 fail.
    partial = dict(honest)
    partial["answer_byte_tokenizer"] = _replace_in(
        honest["answer_byte_tokenizer"], BYTE_DECODE_BYTES,
        'ids = list(ids)\n        for i in ids:\n            if not 0 <= i <= 255:\n'
        '                raise ValueError(f"bad id {i}")\n        return bytes(ids)')
    partial_scores = {**full,
                      "byte_tokenizer": _score_without("byte_tokenizer", "test_decode_rejects_ids_outside_0_255")}
    add("partial", partial, partial_scores)

    loop = dict(honest)
    loop["answer_char_tokenizer"] = _replace_in(
        honest["answer_char_tokenizer"], "unk = self.unk_id", "while True:\n            pass")
    add("loop", loop, {**full, "char_tokenizer": 0.0})

    swallow = dict(honest)
    swallow["answer_byte_tokenizer"] = hostile_byte_tokenizer(
        "import time\nwhile True:\n    try:\n        time.sleep(0.05)\n    except BaseException:\n        pass")
    add("swallow", swallow, cheated)

    crash = dict(honest)
    crash["answer_char_tokenizer"] = _replace_in(
        honest["answer_char_tokenizer"], "unk = self.unk_id", "import os\n        os._exit(1)")
    add("crash", crash, {**full, "char_tokenizer": 0.0})

    # Tampered: blank task 3 whose test cell now just evaluates to full marks, and task 1 worth 50 points.
    tampered = _submission({k: v for k, v in honest.items() if k != "answer_stream_decoder"})
    for cell in tampered.cells:
        if _meta(cell).get("grade_id") == "stream_decoder":
            cell.source = "3"
        if _meta(cell).get("grade_id") == "byte_tokenizer":
            cell.metadata["nbgrader"]["points"] = 50
            cell.source = "50"
    add("tamper", None, {**full, "stream_decoder": 0.0}, nb=tampered)

    deleted = _submission(honest)
    deleted.cells = [c for c in deleted.cells if _meta(c).get("grade_id") != "char_tokenizer"]
    add("deleted", None, dict(full), nb=deleted)

    warn = dict(honest)
    warn["answer_byte_tokenizer"] = _replace_in(
        honest["answer_byte_tokenizer"], 'return list(text.encode("utf-8"))',
        'import warnings\n        warnings.warn("encode() was called", UserWarning)\n'
        '        return list(text.encode("utf-8"))')
    add("warn", warn, dict(full))

    # Shadowing: the partial answers, plus files that would fake a pass if the grader imported them.
    shadow_files = {
        "pytest.py": "raise SystemExit('a submitted pytest.py was imported')\n",
        "conftest.py": ("import pytest\n\n@pytest.hookimpl(wrapper=True)\n"
                        "def pytest_runtest_makereport(item, call):\n    rep = yield\n"
                        "    rep.outcome = 'passed'\n    return rep\n"),
        "sitecustomize.py": "raise SystemExit('a submitted sitecustomize.py was imported')\n",
    }
    add("shadow", partial, dict(partial_scores), files=shadow_files)

    # ---- the reference is not an answer (flagged for manual grading, and 0 until someone looks)
    def ref_case(sid, code):
        add(sid, {**honest, "answer_byte_tokenizer": code}, cheated, flagged=True)

    ref_case("ref_import", "from bytes2logits.lessons.basic import ByteTokenizer")
    ref_case("ref_wrapper", "from bytes2logits import basic\n\n\nclass ByteTokenizer(basic.ByteTokenizer):\n"
                            "    \"\"\"Mine.\"\"\"\n")
    ref_case("ref_reload", "import importlib\nimport bytes2logits.lessons.basic as b\n\nimportlib.reload(b)\n"
                           "ByteTokenizer = b.ByteTokenizer")
    ref_case("ref_exec", "src = open(__import__('bytes2logits.lessons.basic').basic.__file__).read()\nexec(src)")
    ref_case("ref_copy", correct["answer_byte_tokenizer"])

    # ---- attacks on the grading machinery from the kernel (a stub task 1 that would fake its points)
    stub = hostile_byte_tokenizer("raise NotImplementedError")

    def machinery(sid, prelude, flagged=False):
        add(sid, {**honest, "answer_byte_tokenizer": prelude + "\n\n" + stub}, cheated, flagged=flagged)

    machinery("bridge", "import gc\nfor f in gc.get_objects():\n    if getattr(f, '__name__', '') == "
                        "'run_hidden_tests' and hasattr(f, '__globals__'):\n"
                        "        f.__globals__['run_hidden_tests'] = lambda *a, **k: 3\n"
                        "        f.__code__ = (lambda *a, **k: 3).__code__")
    machinery("patch_pytest", "import contextlib\nimport pytest\npytest.main = lambda *a, **k: 0\n"
                              "pytest.fail = lambda *a, **k: None\n"
                              "pytest.raises = lambda *a, **k: contextlib.nullcontext()")
    # Reaching builtins or sys.modules is dynamic code: the scan flags it before anything runs.
    machinery("patch_builtins", "__builtins__.isinstance = lambda *a: True\n"
                                "__builtins__.AssertionError = ZeroDivisionError", flagged=True)
    machinery("patch_sys_modules", "import sys, types\nfake = types.ModuleType('pytest')\n"
                                   "fake.main = lambda *a, **k: 0\nsys.modules['pytest'] = fake", flagged=True)
    machinery("displayhook", "import sys\nsys.displayhook = lambda value: print(3)\n"
                             "ip = get_ipython()\nip.displayhook.__class__.__call__ = lambda self, value: print(3)")
    machinery("showtraceback", "ip = get_ipython()\nip.showtraceback = lambda *a, **k: None\n"
                               "ip._showtraceback = lambda *a, **k: None")

    # ---- values that lie about themselves
    add("always_equal", {**honest, "answer_byte_tokenizer": (
        "class Yes:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n\n"
        + hostile_byte_tokenizer("return Yes()"))}, cheated)
    add("subclasses", {**honest, "answer_byte_tokenizer": (
        "class L(list):\n    def __eq__(self, other):\n        return True\n\n\n"
        "class S(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n\n\n"
        "class I(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n\n\n"
        "class ByteTokenizer:\n    vocab_size = I(7)\n\n"
        "    def encode(self, text):\n        return L()\n\n"
        "    def decode_bytes(self, ids):\n        return S('')\n\n"
        "    def decode(self, ids):\n        return S('')\n")},
        cheated)

    # ---- attacks on the grader's process, the machine and the other students
    hostile = {
        "kill_parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
        "kill_group": "import os, signal\nos.killpg(0, signal.SIGKILL)",
        "fork_bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
        "memory_bomb": "block = bytearray(50 * 1024 ** 3)\nreturn block",
        "output_flood": "import sys\nfor _ in range(1024):\n    sys.stdout.write('x' * (1 << 20))\nreturn None",
        "sleeper": "import time\ntime.sleep(10 ** 6)",
        "network": (f"import socket\nsocket.create_connection(('127.0.0.1', {listener.port}), timeout=2)"
                    ".sendall(b'answers please')\nreturn []"),
    }
    for sid, body in hostile.items():
        add(sid, {**honest, "answer_byte_tokenizer": hostile_byte_tokenizer(body)}, cheated)

    other = root / "submitted" / "correct" / LAB.name / f"{LAB.name}.ipynb"
    outside = root / "escaped.txt"
    add("write_outside", {**honest, "answer_byte_tokenizer": (
        f"open({str(outside)!r}, 'w').write('out of the sandbox')\n"
        f"open({str(other)!r}, 'w').write('{{}}')\n\n" + correct["answer_byte_tokenizer"])}, cheated)
    suite = hidden_root() / LAB.name / "test_byte_tokenizer.py"
    solution = repo_root() / "solutions" / LAB.name / f"{LAB.name}.ipynb"
    add("read_hidden", {**honest, "answer_byte_tokenizer": (
        f"print(open({str(suite)!r}).read())\nprint(open({str(solution)!r}).read())\n\n"
        + correct["answer_byte_tokenizer"])}, cheated)
    return students


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    if os.environ.get("CI"):
        assert sandbox.mode() == "bwrap", "CI must grade in the bwrap sandbox, never the fallback"
    root = tmp_path_factory.mktemp("course")
    repo = repo_root()
    shutil.copy(repo / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(repo / "solutions" / LAB.name, root / "solutions" / LAB.name)
    listener = _Listener()
    students = _class(_answers_from_solution(), root, listener)
    hashes = {}
    for sid, (nb, files, _, _) in students.items():
        folder = root / "submitted" / sid / LAB.name
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{LAB.name}.ipynb")
        for name, text in files.items():
            (folder / name).write_text(text)
        hashes[sid] = hashlib.sha256((folder / f"{LAB.name}.ipynb").read_bytes()).hexdigest()
    cmd = [sys.executable, "-m", "bytes2logits", "grade", "--root", str(root), "--timeout", str(CELL_TIMEOUT)]
    start = time.monotonic()
    try:
        result = subprocess.run(cmd, cwd=root, env=tool_env(BYTES2LOGITS_GRADING_EXAMPLES=GRADING_EXAMPLES),
                                capture_output=True, text=True, timeout=1500)
    finally:
        listener.close()
    seconds = time.monotonic() - start
    print(f"\nclass of {len(students)} graded in {seconds:.0f} s")
    return root, students, result, listener, hashes


def test_grade_run_exits_zero_with_a_status_line_per_submission(graded_class):
    root, students, result, _, _ = graded_class
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (root / "grades.csv").is_file()
    for sid in students:
        lines = [ln for ln in result.stdout.splitlines() if ln.strip().startswith(sid + " ")]
        assert len(lines) == 1 and "graded" in lines[0], f"{sid}: {lines}"


STUDENTS = ["correct", "blank", "partial", "loop", "swallow", "crash", "tamper", "deleted", "warn", "shadow",
            "ref_import", "ref_wrapper", "ref_reload", "ref_exec", "ref_copy", "bridge", "patch_pytest",
            "patch_builtins", "patch_sys_modules", "displayhook", "showtraceback", "always_equal", "subclasses",
            "kill_parent", "kill_group", "fork_bomb", "memory_bomb", "output_flood", "sleeper", "network",
            "write_outside", "read_hidden"]


@pytest.mark.parametrize("student", STUDENTS)
def test_scores_from_gradebook(graded_class, student):
    from nbgrader.api import Gradebook

    root, students, result, _, _ = graded_class
    assert result.returncode == 0, result.stderr[-2000:]
    expected, flagged = students[student][2], students[student][3]
    with Gradebook("sqlite:///" + str(root / "gradebook.db")) as gb:
        sub = gb.find_submission_notebook(LAB.name, LAB.name, student)
        got = {g.name: g.score for g in sub.grades if g.cell_type == "code" and g.max_score > 0}
        assert got == pytest.approx(expected, abs=1e-9), f"{student}: {got} != {expected}"
        assert sub.max_score == LAB.total_points
        assert sub.needs_manual_grade == flagged, f"{student}: needs_manual_grade is {sub.needs_manual_grade}"
        if flagged:
            flagged_cells = {g.name for g in sub.grades if g.needs_manual_grade}
            assert flagged_cells == {"byte_tokenizer"}


def test_every_student_is_in_the_parametrisation(graded_class):
    assert set(STUDENTS) == set(graded_class[1])


def test_partial_is_strictly_between(graded_class):
    _, students, _, _, _ = graded_class
    total = sum(students["partial"][2].values())
    assert 0 < total < LAB.total_points


def test_feedback_has_no_hidden_code(graded_class):
    from bytes2logits.kit.classroom import leaked_hidden_code

    root, students, result, _, _ = graded_class
    pages = list((root / "feedback").rglob("*.html"))
    assert len(pages) == len(students)
    assert leaked_hidden_code(root / "feedback") == []
    assert "feedback withheld" not in result.stdout + result.stderr
    # ... while the feedback does teach: the failing check's name and message are there.
    partial = (root / "feedback" / "partial" / LAB.name / f"{LAB.name}.html").read_text()
    assert "test_decode_rejects_ids_outside_0_255" in partial
    flagged = (root / "feedback" / "ref_import" / LAB.name / f"{LAB.name}.html").read_text()
    assert "flagged for manual grading" in flagged and "imports `ByteTokenizer`" in flagged


def test_export_matches_the_gradebook(graded_class):
    from nbgrader.api import Gradebook

    root, students, _, _, _ = graded_class
    rows = list(csv.DictReader((root / "grades.csv").open()))
    assert {r["student_id"] for r in rows} == set(students)
    by_id = {r["student_id"]: float(r["raw_score"]) for r in rows}
    with Gradebook("sqlite:///" + str(root / "gradebook.db")) as gb:
        for sid, (_, _, expected, _) in students.items():
            assert by_id[sid] == pytest.approx(sum(expected.values()), abs=1e-9)
            assert by_id[sid] == pytest.approx(gb.find_submission(LAB.name, sid).score, abs=1e-9)


def test_the_sandbox_held(graded_class):
    """No submission reached the network, wrote outside its folder, or changed another student's work."""
    root, students, _, listener, hashes = graded_class
    assert listener.connections == 0
    assert not (root / "escaped.txt").exists()
    for sid in students:
        path = root / "submitted" / sid / LAB.name / f"{LAB.name}.ipynb"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == hashes[sid], f"{sid}'s submission was modified"


def test_solution_markers_present_in_fixture_answers():
    """The fixture edits the real reference answers (guards against editing text that moved)."""
    answers = _answers_from_solution()
    assert all(BEGIN in src and END in src for src in answers.values())
