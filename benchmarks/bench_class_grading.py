"""Benchmark: how many submissions a minute a class is graded at, serial nbgrader against ``make grade``'s workers.

Run it as ``python benchmarks/bench_class_grading.py`` (``--students 60 --lab lab01``). It builds a made-up
class of lab 01 in a temporary course (a third correct, a third with one task left blank, a third handing in
the blank release) and grades the same submissions, each in a fresh copy of the course, four ways:

* ``serial nbgrader``: the stock commands one after another, as ``make grade`` ran before it had workers:
  ``nbgrader generate_assignment``, ``autograde``, ``generate_feedback``, ``export`` (the course's own
  configuration, so the trusted grader and the sandbox are in it, as in every row);
* ``grade --jobs 1``: ``python -m bytes2logits grade`` with one worker process;
* ``grade --jobs N``: with N worker processes on this machine (``--jobs``, default 2);
* ``grade --dask``: on a local Dask cluster of N worker processes of one thread each, on 127.0.0.1.

Each row is the wall time of the whole cycle an instructor waits for, from the first command to
``grades.csv``. Every run must give every student the same score as the serial run (it stops otherwise),
so a faster row cannot be a row that graded less. It ends with ``ratio <name>: <rate / serial rate>`` lines;
the target on 2 cores is ``grade_jobs2_vs_serial_nbgrader >= 1.7``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import bytes2logits  # noqa: F401
except ImportError:  # running from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bytes2logits.kit.labs import find_lab, tool_env
from bytes2logits.kit.sampleclass import answer_cells, course_copy, submission, write_submission


def make_class(root: Path, lab, students: int) -> dict[str, str]:
    """Write ``students`` submissions of ``lab`` into ``root/submitted``; return student -> kind."""
    good = answer_cells(lab)
    first = sorted(good)[0]
    kinds = {"correct": good, "one task blank": {k: v for k, v in good.items() if k != first}, "blank": {}}
    names = list(kinds)
    made = {}
    for i in range(students):
        kind = names[i % len(names)]
        student = f"s{i + 1:03d}"
        write_submission(root, student, lab, submission(lab, kinds[kind]))
        made[student] = kind
    return made


def _run(cmd: list[str], root: Path) -> None:
    env = tool_env(BYTES2LOGITS_COURSE_ROOT=str(root))
    result = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=7200)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[1:4])} failed ({result.returncode}):\n{result.stdout[-2000:]}\n"
                         f"{result.stderr[-2000:]}")


def serial_nbgrader(root: Path, lab) -> None:
    nbg = [sys.executable, "-m", "nbgrader"]
    _run([*nbg, "generate_assignment", lab.name, "--force"], root)
    _run([*nbg, "autograde", lab.name, "--force"], root)
    _run([*nbg, "generate_feedback", lab.name, "--force"], root)
    _run([*nbg, "export", "--to", str(root / "grades.csv")], root)


def kit_grade(root: Path, lab, *args: str) -> None:
    _run([sys.executable, "-m", "bytes2logits", "grade", "--root", str(root), "--lab", lab.name, "--force", *args],
         root)


def scores(root: Path, lab) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(root / "gradebook.db")) as gb:
        return {s.student.id: s.score for s in gb.find_assignment(lab.name).submissions}


def main(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="bench_class_grading", description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=60)
    parser.add_argument("--lab", default="lab01")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes for --jobs and for Dask (default 2)")
    parser.add_argument("--skip", action="append", default=[], choices=["serial", "jobs1", "jobsN", "dask"],
                        help="leave a row out (repeatable)")
    args = parser.parse_args(argv)
    lab = find_lab(args.lab)
    n = args.jobs
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="b2l-bench-class-") as tmp:
        base = course_copy(Path(tmp) / "class", lab)
        kinds = make_class(base, lab, args.students)
        counts = {k: list(kinds.values()).count(k) for k in dict.fromkeys(kinds.values())}
        mix = ", ".join(f"{v} {k}" for k, v in counts.items())
        print(f"a class of {args.students} submissions of {lab.name} ({mix}) on {os.cpu_count()} cores", flush=True)

        rows = [("serial", "serial nbgrader", lambda r: serial_nbgrader(r, lab)),
                ("jobs1", "grade --jobs 1", lambda r: kit_grade(r, lab)),
                ("jobsN", f"grade --jobs {n}", lambda r: kit_grade(r, lab, "--jobs", str(n)))]
        cluster = None
        if "dask" not in args.skip:
            from distributed import LocalCluster

            # The workers' output (the feedback kernels' banners, Dask's own log) goes to a file, as a
            # real cluster's goes to its workers' terminals, not into this table.
            log = Path(tmp) / "dask-workers.log"
            saved = [os.dup(1), os.dup(2)]
            sys.stdout.flush()
            sys.stderr.flush()
            with open(log, "ab") as fh:
                os.dup2(fh.fileno(), 1)
                os.dup2(fh.fileno(), 2)
            try:
                cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=None, scheduler_port=0, silence_logs=40)
            finally:
                for fd, old in zip((1, 2), saved, strict=True):
                    os.dup2(old, fd)
                    os.close(old)
            address = cluster.scheduler_address
            rows.append(("dask", f"grade --dask ({n} workers)", lambda r: kit_grade(r, lab, "--dask", address)))
        reference = None
        rates = {}
        try:
            print(f"{'how':<26}{'seconds':>9}{'per minute':>12}{'vs serial':>11}", flush=True)
            for key, label, grade in rows:
                if key in args.skip:
                    continue
                root = Path(tmp) / key
                shutil.copytree(base, root)
                start = time.perf_counter()
                grade(root)
                seconds = time.perf_counter() - start
                got = scores(root, lab)
                if len(got) != args.students:
                    raise SystemExit(f"{label}: {len(got)} of {args.students} submissions in the gradebook")
                if reference is None:
                    reference = got
                elif got != reference:
                    differ = sorted(s for s in got if got[s] != reference.get(s))[:5]
                    raise SystemExit(f"{label} scored {differ} differently from the first row")
                rates[key] = args.students / seconds * 60
                vs = rates[key] / rates["serial"] if "serial" in rates else float("nan")
                print(f"{label:<26}{seconds:>9.1f}{rates[key]:>12.1f}{vs:>10.2f}x", flush=True)
                out[f"per_minute_{key}"] = rates[key]
        finally:
            if cluster is not None:
                cluster.close()
    if "serial" in rates:
        for key, name in (("jobs1", "grade_jobs1"), ("jobsN", f"grade_jobs{n}"), ("dask", f"grade_dask{n}")):
            if key in rates:
                out[f"ratio_{name}_vs_serial_nbgrader"] = rates[key] / rates["serial"]
                print(f"ratio {name}_vs_serial_nbgrader: {rates[key] / rates['serial']:.2f}")
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
