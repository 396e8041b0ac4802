"""``make grade``: the whole nbgrader cycle for a class, in one command.

With the learners' work collected under ``submitted/<student>/<lab>/`` (``nbgrader collect`` on JupyterHub,
``nbgrader zip_collect`` for uploaded files, or copied by hand), this runs, in the course root:

1. ``nbgrader generate_assignment`` — records each lab's test cells in the gradebook (into a scratch
   release folder, so the committed ``labs/`` is never rewritten);
2. ``nbgrader autograde`` — runs every submission (one process for all): the kernel in a sandbox for the
   feedback outputs, and the score from the trusted grader (see :mod:`bytes2logits.kit.nbgrade`);
3. ``nbgrader generate_feedback`` — HTML feedback per submission, without hidden blocks;
4. ``nbgrader export`` — ``grades.csv``;

then checks that no feedback file contains hidden-test code (a page that does is withheld), and prints
one status line per submission. One broken or hostile submission never stops the others: the run goes
on and exits 0, and the status line says what happened to it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from .labs import LABS, find_lab, hidden_root, repo_root, tool_env

__all__ = ["grade_class", "leaked_hidden_code", "main"]


def _nbgrader(root: Path, *args: str, extra: list[str] | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "nbgrader", *args, *(extra or [])]
    print("$ nbgrader " + " ".join(args), flush=True)
    env = tool_env(BYTES2LOGITS_COURSE_ROOT=str(root), BYTES2LOGITS_HIDDEN_TESTS=str(hidden_root()))
    result = subprocess.run(cmd, cwd=root, env=env, text=True, capture_output=True)
    if result.returncode != 0:
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
    return result


def leaked_hidden_code(feedback_dir: Path) -> list[str]:
    """Feedback files that contain hidden-suite code or the hidden block (empty list when clean)."""
    needles = {"BEGIN HIDDEN TESTS", "run_hidden_tests("}
    for suite in hidden_root().rglob("test_*.py"):
        for line in suite.read_text(encoding="utf-8").splitlines():
            s = line.strip()
            if len(s) >= 30 and not s.startswith(("#", '"""')) and '"""' not in s:
                needles.add(s)
    leaks = []
    for html in sorted(feedback_dir.rglob("*.html")):
        text = html.read_text(encoding="utf-8", errors="replace")
        import html as html_mod

        plain = html_mod.unescape(text)
        found = [n for n in needles if n in plain or n in text]
        if found:
            leaks.append(f"{html}: {found[0]!r}")
    return leaks


def grade_class(root: Path, labs: list[str] | None = None, timeout: int | None = None) -> int:
    """Run the cycle on the course in ``root``; return 0 once every submission has a status line.

    Only a course that cannot be graded at all (no submissions, a lab that cannot be generated) is an
    error; a submission that breaks its own grading is reported in its status line.
    """
    from . import sandbox

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
    wanted = labs or sorted({p.parent.name for p in submitted.glob("*/*/*.ipynb") if p.parent.name in LABS})
    if not wanted:
        print(f"error: no lab notebooks under {submitted}/<student>/<lab>/", file=sys.stderr)
        return 2
    extra = [f"--Execute.timeout={timeout}"] if timeout else []
    scratch = ["--CourseDirectory.release_directory=build/release"]
    for lab in wanted:
        if _nbgrader(root, "generate_assignment", lab, "--force", *scratch).returncode:
            return 1
    problems: dict[tuple[str, str], str] = {}
    for lab in wanted:
        # autograde exits 1 when one submission could not be graded; the others are graded all the same.
        if _nbgrader(root, "autograde", lab, "--force", extra=extra).returncode:
            print(f"note: nbgrader autograde reported a failed submission in {lab} (see the status lines)")
        if _nbgrader(root, "generate_feedback", lab, "--force").returncode:
            print(f"note: nbgrader generate_feedback reported a failure in {lab}")
    if _nbgrader(root, "export", "--to", str(root / "grades.csv")).returncode:
        print("note: nbgrader export failed; grades.csv may be missing or stale", file=sys.stderr)
    for leak in leaked_hidden_code(root / "feedback"):
        page = Path(leak.split(": ", 1)[0])
        page.write_text("<html><body><p>This feedback page was withheld: it quoted a hidden test suite. "
                        "Ask your instructor.</p></body></html>", encoding="utf-8")
        rel = page.relative_to(root / "feedback").parts
        problems[(rel[1], rel[0])] = "feedback withheld (it quoted a hidden suite)"
        print(f"warning: {leak}: feedback withheld", file=sys.stderr)
    _print_scores(root, wanted, problems)
    return 0


def _print_scores(root: Path, labs: list[str], problems: dict | None = None) -> None:
    """One status line per submission folder: graded (score, flags) or not graded."""
    from nbgrader.api import Gradebook, MissingEntry

    problems = problems or {}
    db = "sqlite:///" + str(root / "gradebook.db")
    with Gradebook(db) as gb:
        for lab in labs:
            print(f"\n{lab}")
            students = sorted(p.parent.parent.name for p in (root / "submitted").glob(f"*/{lab}/*.ipynb"))
            for sid in students:
                try:
                    sub = gb.find_submission(lab, sid)
                except MissingEntry:
                    print(f"  {sid:<24} NOT GRADED (nbgrader could not process this submission)")
                    continue
                notes = []
                if sub.needs_manual_grade:
                    notes.append("needs manual grading")
                if (lab, sid) in problems:
                    notes.append(problems[(lab, sid)])
                status = "graded" + (f" ({'; '.join(notes)})" if notes else "")
                print(f"  {sid:<24} {sub.score:g}/{sub.max_score:g}  {status}")
    print(f"\ngrades: {root / 'grades.csv'}   feedback: {root / 'feedback'}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bytes2logits grade", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=None, help="course root (default: this repository)")
    parser.add_argument("--lab", action="append", dest="labs",
                        help="only this lab, lab01 or lab01_tokenizers (repeatable)")
    parser.add_argument("--timeout", type=int, default=None, help="seconds per cell (default: nbgrader_config.py)")
    args = parser.parse_args(argv)
    try:
        labs = [find_lab(name).name for name in args.labs] if args.labs else None
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    return grade_class(args.root or repo_root(), labs, args.timeout)
