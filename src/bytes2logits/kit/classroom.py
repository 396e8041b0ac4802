"""``make grade``: the whole nbgrader cycle for a class, in one command, on one core, N cores or a cluster.

With the learners' work collected under ``submitted/<student>/<lab>/`` (``nbgrader collect`` on JupyterHub,
``nbgrader zip_collect`` for uploaded files, or copied by hand), this runs, in the course root:

1. a scan of ``submitted/``: what is not a lab notebook in a lab's folder (a ``lab02_words-Copy1.ipynb``,
   a folder called ``lab02``) is skipped and listed at the end, with the reason; everything else is graded;
2. ``nbgrader generate_assignment`` — records each lab's test cells in the gradebook (into a scratch
   release folder, so the committed ``labs/`` is never rewritten);
3. one task per submission that is new or stale (its files, the lab's source notebook, its hidden suites or
   the grading configuration changed since it was last graded; ``--force`` regrades all): nbgrader's
   autograde and feedback for that student (:mod:`bytes2logits.kit.gradetask`). The kernel runs in a
   sandbox for the feedback outputs, and the score comes from the trusted grader (see
   :mod:`bytes2logits.kit.nbgrade`). The tasks run in ``--jobs N`` worker processes here, or on the Dask
   cluster at ``--dask ADDRESS``, all into one gradebook (``--db URL``: SQLite by default, PostgreSQL for
   several graders at once). A progress bar counts them. A worker that dies mid-task costs nothing: its
   task is retried on a fresh worker, and reported after the third loss, never dropped;
4. ``nbgrader export`` — ``grades.csv``;

then checks that no feedback file contains hidden-test code (a page that does is withheld), and prints
one status line per submission. One broken or hostile submission never stops the others: the run goes
on and exits 0, and the status line says what happened to it.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import html as html_mod
import json
import multiprocessing
import os
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from .gradetask import GradeTask, course_config, feedback_page, grade_submission_task, quiet_worker
from .grading import hidden_needles
from .labs import LABS, CourseRootError, command_root, find_lab, hidden_root, tool_env

__all__ = ["Skipped", "grade_class", "leaked_hidden_code", "main", "scan_submissions"]

# A task whose worker died this many times is reported as not graded (a grading machinery crash, never a
# submission's doing: its code runs in a sandbox that cannot reach the worker).
MAX_ATTEMPTS = 3
STAMPS = Path("build") / "grading" / "stamps.json"
# A lab notebook larger than this is not graded (a notebook of the course is well under 1 MB; one that holds
# gigabytes of output or cells would cost the grader its memory before any limit applies).
MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024
WORKER_LOG = Path("build") / "grading" / "workers.log"


@dataclass(frozen=True)
class Skipped:
    """Something in ``submitted/`` that is not graded, and why."""

    path: str
    reason: str


def _nbgrader(root: Path, *args: str, extra: list[str] | None = None, quiet: bool = False
              ) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "nbgrader", *args, *(extra or [])]
    if not quiet:
        print("$ nbgrader " + " ".join(args), flush=True)
    env = tool_env(BYTES2LOGITS_COURSE_ROOT=str(root), BYTES2LOGITS_HIDDEN_TESTS=str(hidden_root()))
    result = subprocess.run(cmd, cwd=root, env=env, text=True, capture_output=True)
    if result.returncode != 0:
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
    return result


def leaked_hidden_code(feedback_dir: Path) -> list[str]:
    """Feedback files that contain hidden-suite code or the hidden block (empty list when clean)."""
    needles = hidden_needles(hidden_root())
    leaks = []
    for page in sorted(feedback_dir.rglob("*.html")):
        text = page.read_text(encoding="utf-8", errors="replace")
        plain = html_mod.unescape(text)
        found = [n for n in needles if n in plain or n in text]
        if found:
            leaks.append(f"{page}: {found[0]!r}")
    return leaks


def scan_submissions(root: Path, labs: list[str] | None = None) -> tuple[list[tuple[str, str]], list[Skipped]]:
    """The ``(lab, student)`` pairs under ``root/submitted`` that can be graded, and what is skipped.

    A gradable submission is ``submitted/<student>/<lab>/<lab>.ipynb`` for a lab of this course. Anything
    else is skipped with a reason: a folder that is not named after a lab (with the lab it probably
    means), a lab folder without the lab's notebook, another notebook beside it (only ``<lab>.ipynb`` is
    graded; its other files are kept as nbgrader keeps them), or a file out of place. ``labs`` limits the
    scan to those labs (other labs' folders are left alone, not reported).
    """
    submitted = root / "submitted"
    found: list[tuple[str, str]] = []
    skipped: list[Skipped] = []

    def rel(p: Path) -> str:
        return str(p.relative_to(root))

    for student_dir in sorted(submitted.iterdir()):
        if student_dir.name.startswith("."):
            continue
        if student_dir.is_symlink():
            skipped.append(Skipped(rel(student_dir), "a link, not a student's folder (links in submitted/ are "
                                   "never followed: one could point at another student's work)"))
            continue
        if not student_dir.is_dir():
            skipped.append(Skipped(rel(student_dir), "a file where a student's folder belongs "
                                   "(expected submitted/<student>/<lab>/<lab>.ipynb)"))
            continue
        for lab_dir in sorted(student_dir.iterdir()):
            if lab_dir.name.startswith("."):
                continue
            if lab_dir.is_symlink():
                skipped.append(Skipped(rel(lab_dir), "a link, not a lab's folder (links in submitted/ are never "
                                       "followed)"))
                continue
            if not lab_dir.is_dir():
                skipped.append(Skipped(rel(lab_dir), "a file directly in the student's folder "
                                       f"(expected submitted/{student_dir.name}/<lab>/<lab>.ipynb)"))
                continue
            if lab_dir.name not in LABS:
                try:
                    hint = f": did you mean {find_lab(lab_dir.name).name}?"
                except KeyError:
                    hint = f" (the labs are {', '.join(sorted(LABS))[:200]}…)"
                if labs is None or any(h in hint for h in labs):
                    skipped.append(Skipped(rel(lab_dir), f"not a lab's folder name{hint}"))
                continue
            lab = lab_dir.name
            if labs is not None and lab not in labs:
                continue
            notebooks = sorted(p.name for p in lab_dir.glob("*.ipynb"))
            too_much = _too_much_code(lab_dir / f"{lab}.ipynb")
            if too_much:
                skipped.append(Skipped(rel(lab_dir / f"{lab}.ipynb"), too_much))
                continue
            odd = _odd_entry(lab_dir)
            if odd is not None:
                skipped.append(Skipped(rel(odd[0]), f"{odd[1]}: this submission is not graded (nbgrader would "
                                       "follow it, and it could point at any file the grader can read); "
                                       "links in submitted/ are never followed"))
                continue
            if (lab_dir / f"{lab}.ipynb").is_file() and \
                    (lab_dir / f"{lab}.ipynb").stat().st_size > MAX_NOTEBOOK_BYTES:
                skipped.append(Skipped(rel(lab_dir / f"{lab}.ipynb"), f"larger than {MAX_NOTEBOOK_BYTES >> 20} MB: "
                                       "not graded (clear its outputs and collect it again)"))
                continue
            if f"{lab}.ipynb" not in notebooks:
                others = f" (found: {', '.join(notebooks)})" if notebooks else ""
                skipped.append(Skipped(rel(lab_dir), f"no {lab}.ipynb in this folder{others}"))
                continue
            found.append((lab, student_dir.name))
            for extra in notebooks:
                if extra != f"{lab}.ipynb":
                    skipped.append(Skipped(rel(lab_dir / extra), f"not graded: only {lab}.ipynb is "
                                           f"({student_dir.name}'s {lab}.ipynb is graded)"))
    return found, skipped


def _too_much_code(notebook: Path) -> str | None:
    """Why a notebook is not graded for its size (None when it is fine): only files over the code limit are
    read to count (a notebook's outputs are dropped before grading and do not count)."""
    from .settings import MAX_CODE_CHARS

    try:
        if notebook.is_symlink() or not notebook.is_file() or notebook.stat().st_size <= MAX_CODE_CHARS:
            return None
        cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
        code = sum(len("".join(c.get("source", ""))) for c in cells
                   if isinstance(c, dict) and c.get("cell_type") == "code")
    except (OSError, ValueError, AttributeError, TypeError):
        return None  # nbgrader reports a notebook it cannot read
    if code > MAX_CODE_CHARS:
        return f"{code:,} characters of code, more than the {MAX_CODE_CHARS:,} the grader reads: not graded"
    return None


def _odd_entry(folder: Path) -> tuple[Path, str] | None:
    """The first entry under ``folder`` that is not a plain folder or a regular file of one link, with what it
    is; None when there is none. (Looked at with ``lstat``: a link is never followed.)"""
    import stat

    for base, dirs, files in os.walk(folder, followlinks=False):
        for name in sorted(dirs + files):
            path = Path(base) / name
            try:
                st = os.lstat(path)
            except OSError:
                return path, "an entry that cannot be read"
            if stat.S_ISLNK(st.st_mode):
                return path, "a symbolic link"
            if stat.S_ISDIR(st.st_mode):
                continue
            if not stat.S_ISREG(st.st_mode):
                return path, "not a regular file (a pipe, socket or device)"
            if st.st_nlink > 1:
                return path, "a file with another name elsewhere (a hard link)"
    return None


def _digest(paths: list[Path], base: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p.relative_to(base)).encode() + b"\0")
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _stamp_inputs(root: Path, lab: str) -> str:
    """What a lab's grades depend on besides the submission: the lab's source notebook, its hidden suites,
    the course's grading configuration and the grading code itself. A change to any regrades the lab."""
    hidden = hidden_root()
    paths = [root / "nbgrader_config.py", root / "solutions" / lab / f"{lab}.ipynb", *hidden.glob("*.py"),
             *(p for p in (hidden / lab).rglob("*") if p.is_file() and "__pycache__" not in p.parts),
             *Path(__file__).parent.glob("*.py")]
    return hashlib.sha256("".join(_digest([p], p.parent) for p in paths if p.is_file()).encode()).hexdigest()


def _submission_digest(root: Path, lab: str, student: str, inputs: str) -> str:
    folder = root / "submitted" / student / lab
    files = [p for p in folder.rglob("*") if p.is_file()]
    return hashlib.sha256((inputs + _digest(files, folder)).encode()).hexdigest()


def _read_stamps(root: Path) -> dict:
    try:
        return json.loads((root / STAMPS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _write_stamps(root: Path, stamps: dict) -> None:
    path = root / STAMPS
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(stamps, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def _gradebook(db_url: str, course_id: str):
    from nbgrader.api import Gradebook

    return Gradebook(db_url, course_id) if course_id else Gradebook(db_url)


def _in_gradebook(db_url: str, course_id: str) -> set[tuple[str, str]]:
    with _gradebook(db_url, course_id) as gb:
        return {(s.assignment.name, s.student.id) for a in gb.assignments for s in a.submissions}


class _Progress:
    """A progress bar of submissions done, failed and remaining (tqdm, on stderr)."""

    def __init__(self, total: int, where: str):
        from tqdm.auto import tqdm

        self.failed = 0
        # No bar for nothing to do: the line before it has said so.
        self.bar = tqdm(total=total, desc=f"grading ({where})", unit="submission", file=sys.stderr,
                        dynamic_ncols=True, mininterval=0.5, disable=not total)
        self._post()

    def _post(self, finished: int = 0) -> None:
        remaining = self.bar.total - self.bar.n - finished
        self.bar.set_postfix_str(f"failed {self.failed}, remaining {remaining}", refresh=False)

    def done(self, ok: bool) -> None:
        self.failed += not ok
        self._post(finished=1)
        self.bar.update(1)

    def say(self, text: str) -> None:
        self.bar.write(text, file=sys.stderr)

    def close(self) -> None:
        self.bar.close()


class _Book:
    """The bookkeeping both runners share: results, attempts, and the retry-or-report rule."""

    def __init__(self, progress: _Progress):
        self.results: dict[str, dict] = {}
        self.attempts: dict[str, int] = {}
        self.progress = progress

    def finished(self, task: GradeTask, result: dict) -> None:
        self.results[task.key] = result
        self.progress.done(bool(result.get("ok")))
        if not result.get("ok"):
            self.progress.say(f"{task.key}: nbgrader {result.get('step')} failed: "
                              f"{(result.get('error') or '').splitlines()[-1:] or ['no message']}")

    def lost(self, task: GradeTask, why: str) -> bool:
        """A worker died or vanished while it held ``task``: True when it should be retried."""
        n = self.attempts[task.key] = self.attempts.get(task.key, 0) + 1
        if n < MAX_ATTEMPTS:
            self.progress.say(f"{task.key}: the worker was lost ({why}); retrying (attempt {n + 1} of "
                              f"{MAX_ATTEMPTS})")
            return True
        self.results[task.key] = {"key": task.key, "ok": False, "step": "worker",
                                  "error": f"the worker was lost {n} times while grading it (last: {why})"}
        self.progress.done(False)
        self.progress.say(f"{task.key}: NOT GRADED: the worker was lost {n} times (last: {why})")
        return False


def _run_local(tasks: list[GradeTask], jobs: int, book: _Book, log: Path) -> None:
    """Grade in ``jobs`` worker processes of this machine; a pool broken by a dead worker is replaced.

    The workers' own output (nbgrader's log, the kernels' banners) goes to ``log``."""
    from concurrent.futures.process import BrokenProcessPool

    ctx = multiprocessing.get_context("spawn")
    pending = deque(tasks)
    log.parent.mkdir(parents=True, exist_ok=True)

    def new_pool():
        return cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=quiet_worker,
                                      initargs=(str(log),))

    pool = new_pool()
    running: dict[cf.Future, GradeTask] = {}
    try:
        while pending or running:
            # At most one task per worker in flight, so that a broken pool has lost only running tasks.
            while pending and len(running) < jobs:
                task = pending.popleft()
                running[pool.submit(grade_submission_task, task.to_dict())] = task
            done, _ = cf.wait(running, return_when=cf.FIRST_COMPLETED)
            broken = False
            for fut in done:
                task = running.pop(fut)
                try:
                    book.finished(task, fut.result())
                except BrokenProcessPool:
                    broken = True
                    if book.lost(task, "a worker process died"):
                        pending.appendleft(task)
            if broken:
                cf.wait(running)  # the pool's other futures fail at once with the same error
                for fut, task in list(running.items()):
                    try:
                        book.finished(task, fut.result())
                    except BrokenProcessPool:
                        if book.lost(task, "its pool was broken by another worker's death"):
                            pending.appendleft(task)
                running.clear()
                pool.shutdown(wait=False, cancel_futures=True)
                pool = new_pool()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _run_dask(tasks: list[GradeTask], address: str, book: _Book) -> None:
    """Grade on the Dask cluster at ``address``; the scheduler reschedules a dead worker's task, and a task
    it gives up on (``KilledWorker``) is resubmitted here until :data:`MAX_ATTEMPTS`."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise SystemExit("error: --dask needs the distributed package: pip install -e '.[classroom]'") from None
    try:
        client = Client(address, timeout="20s")
    except (OSError, TimeoutError) as e:
        raise SystemExit(f"error: cannot reach the Dask scheduler at {address}: {e}") from None
    try:
        futures = {}

        def submit(task: GradeTask):
            fut = client.submit(grade_submission_task, task.to_dict(), pure=False,
                                key=f"b2l-grade-{task.lab}-{task.student}-{os.urandom(4).hex()}")
            futures[fut] = task
            return fut

        queue = as_completed([submit(t) for t in tasks])
        for fut in queue:
            task = futures.pop(fut)
            try:
                book.finished(task, fut.result())
            except Exception as e:  # KilledWorker, a lost connection: the worker, not the submission
                if book.lost(task, f"{type(e).__name__}: {str(e)[:200]}"):
                    queue.add(submit(task))
    finally:
        client.close()


def grade_class(root: Path, labs: list[str] | None = None, timeout: int | None = None, *, jobs: int = 1,
                dask: str | None = None, db: str | None = None, force: bool = False,
                budget: float | None = None) -> int:
    """Run the cycle on the course in ``root``; return 0 once every submission has a status line.

    Only a course that cannot be graded at all (no submissions, a lab that cannot be generated, a database
    or cluster that cannot be reached) is an error; a submission that breaks its own grading is reported
    in its status line, and so is whatever in ``submitted/`` is not a submission.
    """
    from . import sandbox
    from .gradebook import course_id_for, resolve_db_url

    try:
        print(f"submissions run in a {sandbox.describe()}", flush=True)
    except sandbox.SandboxError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    sandbox.warn_if_reduced()
    root = root.resolve()
    submitted = root / "submitted"
    if not submitted.is_dir():
        print(f"error: no submissions: {submitted} does not exist. Collect them first "
              "(nbgrader collect LAB, or nbgrader zip_collect LAB).", file=sys.stderr)
        return 2
    try:
        db_url = resolve_db_url(root, db)
    except ValueError as e:
        print(f"error: --db: {e}", file=sys.stderr)
        return 2
    found, skipped = scan_submissions(root, labs)
    wanted = sorted({lab for lab, _ in found})
    if not wanted:
        print(f"error: no lab notebooks under {submitted}/<student>/<lab>/<lab>.ipynb", file=sys.stderr)
        _print_skipped(skipped)
        return 2
    course_id = course_id_for(db_url, str(course_config(str(root)).CourseDirectory.get("course_id", "")))
    db_arg = [f"--CourseDirectory.db_url={db_url}"]
    if course_id:
        db_arg.append(f"--CourseDirectory.course_id={course_id}")
    scratch = ["--CourseDirectory.release_directory=build/release"]
    for lab in wanted:
        if _nbgrader(root, "generate_assignment", lab, "--force", *scratch, *db_arg).returncode:
            return 1

    # What needs grading: new or stale submissions, unless --force.
    stamps = _read_stamps(root)
    inputs = {lab: _stamp_inputs(root, lab) for lab in wanted}
    digests = {(lab, sid): _submission_digest(root, lab, sid, inputs[lab]) for lab, sid in found}
    known = set() if force else _in_gradebook(db_url, course_id)
    todo = [(lab, sid) for lab, sid in found
            if force or stamps.get(f"{lab}/{sid}") != digests[(lab, sid)] or (lab, sid) not in known
            or not feedback_page(root, lab, sid).is_file()]
    up_to_date = len(found) - len(todo)
    hidden = str(hidden_root().resolve())
    tasks = [GradeTask(str(root), lab, sid, db_url, hidden, timeout, course_id, budget) for lab, sid in todo]
    where = f"Dask at {dask}" if dask else f"{jobs} worker process{'es' if jobs > 1 else ''}"
    print(f"{len(tasks)} submission(s) to grade in {where}"
          + (f"; {up_to_date} already graded and unchanged (--force regrades them)" if up_to_date else ""),
          flush=True)
    book = _Book(_Progress(len(tasks), where))
    start = time.monotonic()
    try:
        if tasks:
            if dask:
                _run_dask(tasks, dask, book)
            else:
                _run_local(tasks, max(1, jobs), book, root / WORKER_LOG)
    finally:
        book.progress.close()
    seconds = time.monotonic() - start
    if tasks:
        print(f"graded {len(tasks)} submission(s) in {seconds:.0f} s "
              f"({60 * len(tasks) / max(seconds, 1e-9):.1f} per minute)", flush=True)
        slowest = sorted(((r.get("seconds") or 0.0, k) for k, r in book.results.items()), reverse=True)[:3]
        print("slowest: " + ", ".join(f"{k} {s:.0f} s" for s, k in slowest), flush=True)
    for task in tasks:
        if book.results.get(task.key, {}).get("ok"):
            stamps[task.key] = digests[(task.lab, task.student)]
        else:
            stamps.pop(task.key, None)
    _write_stamps(root, stamps)

    if _nbgrader(root, "export", "--to", str(root / "grades.csv"), *db_arg).returncode:
        print("note: nbgrader export failed; grades.csv may be missing or stale", file=sys.stderr)
    problems: dict[tuple[str, str], str] = {}
    for key, result in book.results.items():
        if not result.get("ok"):
            lab, sid = key.split("/", 1)
            last = (result.get("error") or "").strip().splitlines()[-1:] or ["no message"]
            problems[(lab, sid)] = f"nbgrader {result.get('step')} failed: {last[0][:200]}"
    for leak in leaked_hidden_code(root / "feedback"):
        page = Path(leak.split(": ", 1)[0])
        page.write_text("<html><body><p>This feedback page was withheld: it quoted a hidden test suite. "
                        "Ask your instructor.</p></body></html>", encoding="utf-8")
        rel = page.relative_to(root / "feedback").parts
        problems[(rel[1], rel[0])] = "feedback withheld (it quoted a hidden suite)"
        print(f"warning: {leak}: feedback withheld", file=sys.stderr)
    took = {tuple(k.split("/", 1)): r.get("seconds") for k, r in book.results.items() if r.get("seconds")}
    _print_scores(root, db_url, course_id, found, problems, took)
    _print_skipped(skipped)
    return 0


def _print_skipped(skipped: list[Skipped]) -> None:
    if skipped:
        print(f"\nskipped ({len(skipped)}; fix and run make grade again: only what changed is graded)")
        for s in skipped:
            print(f"  {s.path}: {s.reason}")


def _print_scores(root: Path, db_url: str, course_id: str, found: list[tuple[str, str]],
                  problems: dict | None = None, took: dict | None = None) -> None:
    """One status line per submission: graded (score, flags, and the seconds it took when graded in this
    run) or not graded."""
    from nbgrader.api import MissingEntry

    problems = problems or {}
    with _gradebook(db_url, course_id) as gb:
        for lab in sorted({lab for lab, _ in found}):
            print(f"\n{lab}")
            for sid in sorted(s for la, s in found if la == lab):
                try:
                    sub = gb.find_submission(lab, sid)
                except MissingEntry:
                    why = problems.get((lab, sid), "nbgrader could not process this submission")
                    print(f"  {sid:<24} NOT GRADED ({why})")
                    continue
                notes = []
                if sub.needs_manual_grade:
                    notes.append("needs manual grading")
                if (lab, sid) in problems:
                    notes.append(problems[(lab, sid)])
                if took and (lab, sid) in took:
                    notes.append(f"{took[(lab, sid)]:.0f} s")
                status = "graded" + (f" ({'; '.join(notes)})" if notes else "")
                print(f"  {sid:<24} {sub.score:g}/{sub.max_score:g}  {status}")
    print(f"\ngrades: {root / 'grades.csv'}   feedback: {root / 'feedback'}   log: {root / WORKER_LOG}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bytes2logits grade", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=None,
                        help="course root (default: the course folder around the current directory)")
    parser.add_argument("--lab", action="append", dest="labs",
                        help="only this lab, lab01 or lab01_tokenizers (repeatable)")
    parser.add_argument("--timeout", type=int, default=None, help="seconds per cell (default: nbgrader_config.py)")
    parser.add_argument("--jobs", "-j", type=int, default=1,
                        help="grade in N worker processes on this machine (default 1)")
    parser.add_argument("--dask", metavar="ADDRESS", default=None,
                        help="grade on the Dask cluster whose scheduler is at ADDRESS (tcp://host:8786)")
    parser.add_argument("--db", metavar="URL", default=None,
                        help="gradebook URL (default sqlite:///<root>/gradebook.db; postgresql://… for "
                             "several graders)")
    parser.add_argument("--force", action="store_true",
                        help="regrade every submission, also those graded before and unchanged since")
    parser.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                        help="wall-clock seconds for one whole submission, its grading and its feedback run "
                             "together (default: nbgrader_config.py, else 900)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, not {args.jobs}")
    if args.dask and args.jobs != 1:
        parser.error("--jobs and --dask exclude each other: a Dask cluster has its own workers")
    try:
        labs = [find_lab(name).name for name in args.labs] if args.labs else None
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    try:
        root = command_root(args.root)
    except CourseRootError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.budget is not None and args.budget <= 0:
        parser.error(f"--budget must be positive, not {args.budget:g}")
    return grade_class(root, labs, args.timeout, jobs=args.jobs, dask=args.dask,
                       db=args.db, force=args.force, budget=args.budget)
