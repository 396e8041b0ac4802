"""The instructor's path through a second copy of the course (issue 17, point 6).

A new instructor copies the course, runs the kit's commands in the copy, edits a lab, and collects uploaded
work. Each test here failed on the code before the fix:

- one course-root rule for every command: ``--root``, else the course folder around the current directory,
  else the installed repository (said on stderr); a command run in a copy writes only that copy;
- ``make labs`` refuses to overwrite answer cells edited by hand (``--force`` keeps a backup);
- ``nbgrader zip_collect`` is configured for this course's layout, and ``downloaded/`` is git-ignored;
- every command takes a lab as ``lab01``, ``1`` or ``lab01_tokenizers``, and says the same for an unknown one.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from bytes2logits.kit import build, labs
from bytes2logits.kit.labs import LABS, find_lab, repo_root, tool_env

ROOT = repo_root()  # the installed course: nothing done in a copy may touch it
LAB = LABS["lab01_tokenizers"]
ANSWER = "answer_byte_tokenizer"
COMMANDS_TIMEOUT = 300


def _env(**extra: str) -> dict:
    """The environment of a fresh shell: no course root or suite folder chosen by the test run itself."""
    env = tool_env(**extra)
    for name in ("BYTES2LOGITS_ROOT", "BYTES2LOGITS_COURSE_ROOT", "BYTES2LOGITS_HIDDEN_TESTS"):
        if name not in extra:
            env.pop(name, None)
    return env


def _cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bytes2logits", *args], cwd=cwd, env=env or _env(),
                          capture_output=True, text=True, timeout=COMMANDS_TIMEOUT)


def _snapshot(root: Path) -> dict[str, tuple[int, str]]:
    """Every file the kit's commands write in a course (solutions/, labs/, work/): its mtime and content hash."""
    files = {}
    for part in ("solutions", "labs", "work"):
        for p in sorted((root / part).rglob("*")) if (root / part).is_dir() else ():
            if p.is_file():
                files[str(p.relative_to(root))] = (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
    return files


@pytest.fixture
def course(tmp_path, monkeypatch) -> Path:
    """A second copy of the course with lab 01: config, source, release and hidden suites."""
    copy = tmp_path / "my-course"
    copy.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", copy / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions" / LAB.name, copy / "solutions" / LAB.name)
    if (ROOT / "solutions" / "generated-cells.json").is_file():
        shutil.copy(ROOT / "solutions" / "generated-cells.json", copy / "solutions" / "generated-cells.json")
    shutil.copytree(ROOT / "labs" / LAB.name, copy / "labs" / LAB.name)
    shutil.copytree(ROOT / "tests" / "hidden" / LAB.name, copy / "tests" / "hidden" / LAB.name)
    shutil.copy(ROOT / "tests" / "hidden" / "conftest.py", copy / "tests" / "hidden" / "conftest.py")
    # In-process calls below must not see (or leave behind) a course root chosen through the environment.
    for name in ("BYTES2LOGITS_ROOT", "BYTES2LOGITS_COURSE_ROOT", "BYTES2LOGITS_HIDDEN_TESTS"):
        monkeypatch.setenv(name, "unset-by-the-fixture")
        monkeypatch.delenv(name)
    return copy


def _cell(nb, grade_id: str):
    return next(c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)


def _edit_answer(course: Path, line: str) -> Path:
    path = course / "solutions" / LAB.name / f"{LAB.name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    _cell(nb, ANSWER).source += "\n" + line
    nbformat.write(nb, path)
    return path


# ------------------------------------------------------------------ 1. one course-root rule


def test_course_root_is_the_course_folder_around_the_current_directory(course, monkeypatch):
    inner = course / "labs" / LAB.name
    assert labs.course_root(cwd=inner) == course.resolve()
    assert labs.course_root(cwd=course) == course.resolve()
    # --root wins over the current folder, and so does BYTES2LOGITS_ROOT (the same for a process tree).
    assert labs.course_root(ROOT, cwd=inner) == ROOT
    monkeypatch.setenv("BYTES2LOGITS_ROOT", str(course))
    assert labs.course_root(cwd=ROOT) == course.resolve()


def test_outside_any_course_the_installed_repository_is_used_and_said_once(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("BYTES2LOGITS_ROOT", raising=False)
    monkeypatch.delenv("BYTES2LOGITS_COURSE_ROOT", raising=False)
    monkeypatch.setattr(labs, "_ANNOUNCED", set())
    assert labs.course_root(cwd=tmp_path) == ROOT
    assert labs.course_root(cwd=tmp_path) == ROOT
    err = capsys.readouterr().err
    assert err.count(str(ROOT)) == 1 and "not inside a course folder" in err and "--root" in err


def test_a_root_that_is_not_a_course_folder_is_refused_by_name(tmp_path):
    (tmp_path / "solutions").mkdir()
    with pytest.raises(labs.CourseRootError, match=r"--root .*not a course folder .*has no nbgrader_config\.py"):
        labs.course_root(tmp_path)
    with pytest.raises(labs.CourseRootError, match="does not exist"):
        labs.course_root(tmp_path / "nowhere")


def test_hidden_suites_follow_the_course_root(course):
    out = subprocess.run([sys.executable, "-c", "from bytes2logits.kit.labs import hidden_root; print(hidden_root())"],
                         cwd=course / "labs", env=_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()) == (course / "tests" / "hidden").resolve()


def test_start_in_a_copy_writes_the_copy_only(course):
    before = _snapshot(ROOT)
    out = _cli("start", "lab01", cwd=course / "labs")
    assert out.returncode == 0, out.stdout + out.stderr
    mine = course / "work" / LAB.name / f"{LAB.name}.ipynb"
    assert mine.read_bytes() == (course / "labs" / LAB.name / f"{LAB.name}.ipynb").read_bytes()
    assert f"work/{LAB.name}/{LAB.name}.ipynb" in out.stdout
    assert _snapshot(ROOT) == before, "start in a copy of the course wrote into the installed repository"


@pytest.mark.slow
def test_build_labs_in_a_copy_writes_the_copy_only(course):
    """make labs run in a second copy rebuilds that copy's lab 01 (source and release) and nothing else."""
    source = course / "solutions" / LAB.name / f"{LAB.name}.ipynb"
    nb = nbformat.read(source, as_version=4)
    _cell(nb, "byte_tokenizer").metadata["nbgrader"]["points"] = 99  # the build writes the registry's points
    nbformat.write(nb, source)
    shutil.rmtree(course / "labs" / LAB.name)
    before = _snapshot(ROOT)
    out = _cli("build-labs", "--lab", "lab01", cwd=course / "labs")
    assert out.returncode == 0, out.stdout + out.stderr
    assert _snapshot(ROOT) == before, "build-labs in a copy of the course wrote into the installed repository"
    rebuilt = nbformat.read(source, as_version=4)
    assert _cell(rebuilt, "byte_tokenizer").metadata["nbgrader"]["points"] == LAB.task("byte_tokenizer").points
    release = course / "labs" / LAB.name / f"{LAB.name}.ipynb"
    assert release.is_file(), out.stdout + out.stderr
    assert "### BEGIN SOLUTION" not in release.read_text(encoding="utf-8")
    assert sorted(p.name for p in (course / "labs").iterdir()) == [LAB.name]


@pytest.mark.parametrize("command", [
    ["start", "lab01"],
    ["check", "--lab", "lab01"],
    ["build-labs", "--lab", "lab01"],
    ["site", "--chapters", "01", "--no-execute"],
    ["grade", "--lab", "lab01"],
])
def test_every_command_takes_root_and_refuses_a_folder_that_is_not_a_course(command, tmp_path):
    not_a_course = tmp_path / "not-a-course"
    not_a_course.mkdir()
    out = _cli(*command, "--root", str(not_a_course), cwd=ROOT)
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"--root {not_a_course}: not a course folder" in out.stderr
    assert "nbgrader_config.py" in out.stderr and "Traceback" not in out.stderr


# ------------------------------------------------------------------ 2. make labs keeps hand edits


def test_build_labs_refuses_to_discard_an_edited_answer_cell(course):
    path = _edit_answer(course, "    # my own way of doing it")
    before = path.read_bytes()
    out = _cli("build-labs", "--lab", "lab01", cwd=course)
    assert out.returncode == 1, out.stdout + out.stderr
    assert LAB.name in out.stderr and repr(ANSWER) in out.stderr, out.stderr
    assert "line(s) of yours would be replaced" in out.stderr and "# my own way of doing it" in out.stderr
    assert "--force" in out.stderr and "Traceback" not in out.stderr
    assert path.read_bytes() == before
    assert not (course / "build").exists()


def test_force_overwrites_an_edited_answer_cell_and_keeps_a_backup(course):
    path = _edit_answer(course, "    # my own way of doing it")
    edited = path.read_bytes()
    said = []
    build.build_solutions(course, [LAB], force=True, log=said.append)
    backups = list((course / "build" / "solutions-backup").rglob(f"{LAB.name}.ipynb"))
    assert len(backups) == 1 and backups[0].read_bytes() == edited
    assert str(backups[0]) in said[0]
    assert _cell(nbformat.read(path, as_version=4), ANSWER).source == build.answer_source(LAB, ANSWER.removeprefix(
        "answer_"))


def test_a_changed_reference_is_rebuilt_without_complaint(course):
    """What the previous build wrote is not an edit: a reference changed in src/ is written over it."""
    old_text = "class ByteTokenizer:\n    '''what an older reference looked like'''\n"
    path = course / "solutions" / LAB.name / f"{LAB.name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    _cell(nb, ANSWER).source = old_text
    nbformat.write(nb, path)
    record_path = course / "solutions" / build.RECORD
    record = json.loads(record_path.read_text(encoding="utf-8"))
    record[LAB.name][ANSWER] = hashlib.sha256(old_text.encode()).hexdigest()
    record_path.write_text(json.dumps(record), encoding="utf-8")
    assert build.build_solutions(course, [LAB]) == [path]
    assert _cell(nbformat.read(path, as_version=4), ANSWER).source == build.answer_source(LAB, "byte_tokenizer")
    assert not (course / "build").exists()
    assert json.loads(record_path.read_text(encoding="utf-8"))[LAB.name][ANSWER] != record[LAB.name][ANSWER]


def test_a_first_build_fills_blank_answer_cells(course):
    path = course / "solutions" / LAB.name / f"{LAB.name}.ipynb"
    (course / "solutions" / build.RECORD).unlink()
    nb = nbformat.read(path, as_version=4)
    for task in LAB.tasks:
        _cell(nb, f"answer_{task.id}").source = ""
    nbformat.write(nb, path)
    assert build.build_solutions(course, [LAB]) == [path]
    for task in LAB.tasks:
        assert _cell(nbformat.read(path, as_version=4), f"answer_{task.id}").source == build.answer_source(LAB, task.id)
    assert set(json.loads((course / "solutions" / build.RECORD).read_text(encoding="utf-8"))[LAB.name]) == {
        "setup", *(f"answer_{t.id}" for t in LAB.tasks)}


# ------------------------------------------------------------------ 3. zip_collect


def _collector_regexp(monkeypatch) -> str:
    from traitlets.config.loader import PyFileConfigLoader

    monkeypatch.setenv("BYTES2LOGITS_COURSE_ROOT", str(ROOT))  # the config exports it; keep it to this test
    monkeypatch.setenv("BYTES2LOGITS_HIDDEN_TESTS", str(ROOT / "tests" / "hidden"))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    return config.FileNameCollectorPlugin.named_regexp


@pytest.mark.parametrize(("path", "student", "notebook"), [
    ("class/alice/lab01_tokenizers.ipynb", "alice", "lab01_tokenizers"),
    ("class/smithj_12345_67890_lab01_tokenizers.ipynb", "smithj", "lab01_tokenizers"),
    ("class/smithj_12345_67890_lab01_tokenizers-1.ipynb", "smithj", "lab01_tokenizers"),
    ("class/bob.k_lab02_words.ipynb", "bob.k", "lab02_words"),
    ("class_2026/carol-7/lab01_tokenizers.ipynb", "carol-7", "lab01_tokenizers"),
    ("class/dave_12_lab01_tokenizers-Copy1.ipynb", None, None),
    ("class/erin/notes.ipynb", None, None),
    ("lab01_tokenizers.ipynb", None, None),  # copied into archive/ as it is: no student named
])
def test_the_collector_names_student_and_notebook(monkeypatch, path, student, notebook):
    regexp = _collector_regexp(monkeypatch)
    assert regexp, "nbgrader_config.py sets no FileNameCollectorPlugin.named_regexp"
    m = re.match(regexp, f"/course/downloaded/lab01_tokenizers/extracted/{path}")
    if student is None:
        assert m is None, m and m.groupdict()
    else:
        assert m is not None and (m["student_id"], m["file_id"]) == (student, notebook)


def test_downloaded_uploads_are_ignored_by_git():
    out = subprocess.run(["git", "check-ignore", "-q", "downloaded/lab01_tokenizers/archive/class.zip"], cwd=ROOT,
                         timeout=30)
    assert out.returncode == 0, "downloaded/ holds students' uploaded work: it must be git-ignored"


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["folders", "flat"])
def test_zip_collect_puts_each_students_notebook_in_submitted(course, layout):
    """A zip of two students' notebooks in downloaded/<lab>/archive/ -> submitted/<student>/<lab>/<lab>.ipynb."""
    release = (course / "labs" / LAB.name / f"{LAB.name}.ipynb").read_text(encoding="utf-8")
    work = {sid: release.replace('"source": [],', f'"source": ["# {sid} was here"],', 1)
            for sid in ("alice", "bob")}
    names = {"folders": {"alice": f"alice/{LAB.name}.ipynb", "bob": f"bob/{LAB.name}.ipynb"},
             "flat": {"alice": f"alice_1001_2001_{LAB.name}.ipynb", "bob": f"bob_1002_2002_{LAB.name}-1.ipynb"}}
    archive = course / "downloaded" / LAB.name / "archive"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "class.zip", "w") as z:
        for sid, name in names[layout].items():
            z.writestr(f"submissions/{name}", work[sid])
        z.writestr("submissions/dave_1003_2003_lab01_tokenizers-Copy1.ipynb", release)  # no known name: skipped
    out = subprocess.run([sys.executable, "-m", "nbgrader", "zip_collect", LAB.name], cwd=course, env=_env(),
                         capture_output=True, text=True, timeout=COMMANDS_TIMEOUT)
    assert out.returncode == 0, out.stdout + out.stderr
    got = sorted(str(p.relative_to(course / "submitted")) for p in (course / "submitted").rglob("*") if p.is_file())
    assert got == [f"{sid}/{LAB.name}/{LAB.name}.ipynb" for sid in ("alice", "bob")], out.stderr
    for sid in ("alice", "bob"):
        assert (course / "submitted" / sid / LAB.name / f"{LAB.name}.ipynb").read_text(encoding="utf-8") == work[sid]


# ------------------------------------------------------------------ 4. one way to name a lab


NAMES = ["lab01", "1", "lab01_tokenizers"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("command", ["start", "check", "build-labs", "site"])
def test_every_command_takes_a_lab_by_any_of_its_names(command, name, tmp_path):
    """Each command resolves the name to lab01_tokenizers: in an empty course it then says what is missing."""
    empty = tmp_path / "empty-course"
    (empty / "solutions").mkdir(parents=True)
    (empty / "nbgrader_config.py").write_text("c = get_config()\n")
    args = {"start": ["start", name], "check": ["check", "--lab", name], "build-labs": ["build-labs", "--lab", name],
            "site": ["site", "--chapters", name, "--no-execute", "--out", str(tmp_path / "site")]}[command]
    out = _cli(*args, "--root", str(ROOT if command == "site" else empty), cwd=tmp_path)
    assert out.returncode in (1, 2) and "Traceback" not in out.stderr, out.stdout + out.stderr
    wanted = {"start": f"the release of {LAB.name} is missing",
              "check": f"no notebook at {empty / 'labs' / LAB.name / LAB.name}.ipynb",
              "build-labs": f"{LAB.name}: no solutions notebook at {empty / 'solutions' / LAB.name}",
              "site": f"no executed copy of {Path(LAB.chapter).name}"}[command]
    assert wanted in out.stderr, out.stderr


@pytest.mark.parametrize("command", [["start", "lab99"], ["check", "--lab", "lab99"], ["build-labs", "--lab", "lab99"],
                                     ["site", "--chapters", "lab99"], ["grade", "--lab", "lab99"]])
def test_an_unknown_lab_gets_the_same_error_from_every_command(command):
    out = _cli(*command, cwd=ROOT)
    assert out.returncode == 2, out.stdout + out.stderr
    with pytest.raises(KeyError) as expected:
        find_lab("lab99")
    assert f"error: {expected.value.args[0]}" in out.stderr
    assert all(name in out.stderr for name in LABS)


@pytest.mark.parametrize("name", NAMES)
def test_grade_parses_a_lab_by_any_of_its_names(name, monkeypatch):
    """grade's own argument parsing (kit/classroom.py), with the grading run replaced by a recorder."""
    from bytes2logits.kit import classroom

    seen = []
    monkeypatch.setattr(classroom, "grade_class", lambda root, wanted, *a, **k: seen.append(wanted) or 0)
    monkeypatch.setenv("BYTES2LOGITS_ROOT", str(ROOT))  # the command may export its root; keep it to this test
    assert classroom.main(["--lab", name]) == 0
    assert seen == [[LAB.name]]
