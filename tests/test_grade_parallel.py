"""``make grade`` on a small class: stray files skipped with a summary, reruns that grade only what changed,
``--jobs 2`` and a Dask cluster of two workers that give the same scores as one worker, even when a worker is
killed in the middle of a submission, and feedback that ``nbgrader release_feedback`` can release when the
work was copied in by hand.

The class (lab 01): alice is correct, bob is partly right, frank hands in the blank release, dave is correct
but also left ``lab01_tokenizers-Copy1.ipynb`` beside his notebook, and erin put hers in ``submitted/erin/
lab01/`` (not a lab's folder). Every score is read from the gradebook; the expected ones come from the
trusted grader's own rule (full marks, the partial's points from its suite, 0), never from this run.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from bytes2logits.kit.labs import LABS, tool_env
from bytes2logits.kit.sampleclass import answer_cells, course_copy, submission, write_submission

pytestmark = pytest.mark.slow

LAB = LABS["lab01_tokenizers"]
CELL_TIMEOUT = 4
STUDENTS = ("alice", "bob", "dave", "frank")


def _grade(root: Path, *args: str, killer: threading.Thread | None = None) -> subprocess.CompletedProcess:
    """Run ``grade`` on ``root``, with ``killer`` (a thread) started beside it."""
    cmd = [sys.executable, "-m", "bytes2logits", "grade", "--root", str(root), "--timeout", str(CELL_TIMEOUT),
           *args]
    env = tool_env(BYTES2LOGITS_GRADING_EXAMPLES="20")
    proc = subprocess.Popen(cmd, cwd=root, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if killer is not None:
        killer.start()
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        proc.kill()
    if killer is not None:
        killer.join(timeout=5)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _scores(root: Path) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(root / "gradebook.db")) as gb:
        return {s.student.id: s.score for s in gb.find_assignment(LAB.name).submissions}


def _kill_a_worker_mid_task(found: list) -> threading.Thread:
    """A thread that kills, once, a worker process that is grading a submission for *this* test (the parent of
    a trusted grader process descended from this pytest process) and records its pid in ``found``.

    Only this test's graders are candidates: the suite runs in parallel, and another test's trusted grader
    may be a child of another pytest worker itself (killing that parent once took a whole xdist worker down
    with it, and CI with it)."""
    me = os.getpid()

    def ours(p: psutil.Process) -> bool:
        try:
            return any(a.pid == me for a in p.parents()) and p.ppid() != me
        except psutil.Error:
            return False

    def run():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not found:
            for p in psutil.process_iter(["cmdline"]):
                if "bytes2logits.kit.trusted" not in " ".join(p.info["cmdline"] or []) or not ours(p):
                    continue
                try:
                    worker = p.parent()
                    found.append(worker.pid)
                    worker.kill()
                except psutil.Error:
                    continue
                return
            time.sleep(0.1)

    return threading.Thread(target=run, daemon=True)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = course_copy(tmp_path_factory.mktemp("class"), LAB)
    good = answer_cells(LAB)
    partial = dict(good)
    # bob's decode drops invalid bytes instead of replacing them: the byte_tokenizer task is partly wrong.
    old = 'decode("utf-8", errors="replace")'
    assert old in good["answer_byte_tokenizer"], "fixture text not found in the reference answer"
    partial["answer_byte_tokenizer"] = good["answer_byte_tokenizer"].replace(old, 'decode("utf-8", errors="ignore")')
    alice = write_submission(root, "alice", LAB, submission(LAB, good))
    # alice's work came through the exchange: nbgrader collect leaves these two files beside it.
    (alice.parent / "timestamp.txt").write_text("2026-12-01 10:00:00.000000 UTC")
    (alice.parent / "submission_secret.txt").write_text("a" * 128)
    write_submission(root, "bob", LAB, submission(LAB, partial))
    write_submission(root, "dave", LAB, submission(LAB, good))
    write_submission(root, "dave", LAB, submission(LAB, {}), name=f"{LAB.name}-Copy1.ipynb")
    write_submission(root, "frank", LAB, submission(LAB, {}))
    write_submission(root, "erin", LAB, submission(LAB, good), folder="lab01")
    first = _grade(root)
    return root, first


def test_strays_are_skipped_with_a_summary_and_the_rest_is_graded(course):
    root, first = course
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    scores = _scores(root)
    assert set(scores) == set(STUDENTS), scores
    assert scores["alice"] == scores["dave"] == LAB.total_points, scores
    assert 0 < scores["bob"] < LAB.total_points and scores["frank"] == 0, scores
    summary = first.stdout.split("\nskipped (", 1)[1]
    assert f"submitted/dave/{LAB.name}/{LAB.name}-Copy1.ipynb: not graded" in summary
    assert "submitted/erin/lab01: not a lab's folder name: did you mean lab01_tokenizers?" in summary
    # Progress is shown while the class is graded, not only when a step fails: the bar on stderr counts
    # submissions, and ends at 4 of 4 with none failed.
    assert "grading (1 worker process)" in first.stderr, first.stderr[-2000:]
    assert "4/4" in first.stderr and "failed 0, remaining 0" in first.stderr, first.stderr[-2000:]
    with open(root / "grades.csv", newline="") as fh:
        exported = {r["student_id"]: float(r["score"]) for r in csv.DictReader(fh)}
    assert exported == scores


def test_a_rerun_grades_only_what_changed(course):
    root, first = course
    again = _grade(root)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "0 submission(s) to grade" in again.stdout and "4 already graded and unchanged" in again.stdout
    assert "grading (" not in again.stderr, "a progress bar for nothing to grade"
    (root / "submitted" / "frank" / LAB.name / f"{LAB.name}.ipynb").touch()  # a new time, the same bytes
    write_submission(root, "frank", LAB, submission(LAB, answer_cells(LAB)))  # frank hands in a correct version
    third = _grade(root)
    assert "1 submission(s) to grade" in third.stdout, third.stdout[-2000:]
    assert _scores(root)["frank"] == LAB.total_points


def test_two_jobs_survive_a_killed_worker(course):
    root, _ = course
    before = _scores(root)
    killed: list[int] = []
    result = _grade(root, "--jobs", "2", "--force", killer=_kill_a_worker_mid_task(killed))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert killed, "no worker was ever seen grading"
    assert "the worker was lost" in result.stderr and "retrying (attempt 2 of 3)" in result.stderr
    assert "4 submission(s) to grade in 2 worker processes" in result.stdout
    assert _scores(root) == before
    assert "NOT GRADED" not in result.stdout


def test_dask_cluster_of_two_workers_survives_a_killed_worker(course):
    distributed = pytest.importorskip("distributed")
    root, _ = course
    before = _scores(root)
    killed: list[int] = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, scheduler_port=0, silence_logs=40) as cluster:
        result = _grade(root, "--dask", cluster.scheduler_address, "--force",
                        killer=_kill_a_worker_mid_task(killed))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert killed, "no worker was ever seen grading"
    assert f"4 submission(s) to grade in Dask at {cluster.scheduler_address}" in result.stdout
    assert _scores(root) == before
    assert "NOT GRADED" not in result.stdout


def test_release_feedback_releases_the_exchange_work_and_names_the_rest(course, tmp_path):
    """Stock nbgrader stops the whole release at the first hand-copied submission (no submission_secret.txt)."""
    root, _ = course
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    cmd = [sys.executable, "-m", "nbgrader", "release_feedback", LAB.name, f"--Exchange.root={exchange}",
           "--CourseDirectory.course_id=b2l"]
    result = subprocess.run(cmd, cwd=root, env=tool_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    released = list((exchange / "b2l" / "feedback").glob("*.html"))
    assert len(released) == 1, (released, result.stderr[-2000:])  # alice's
    for sid in ("bob", "dave", "frank"):
        assert f"Not releasing feedback for '{sid}'" in result.stderr, result.stderr[-2000:]
    assert "Not releasing feedback for 'alice'" not in result.stderr


def test_no_process_left_in_the_course(course):
    root, _ = course
    left = []
    for p in psutil.process_iter(["cwd", "cmdline"]):
        if p.info["cwd"] and Path(p.info["cwd"]).is_relative_to(root):
            left.append(p.info["cmdline"])
    assert not left, left
