"""``python -m bytes2logits check [NOTEBOOK.ipynb] [--lab LAB]``: grade any copy of a lab, as the class would.

The lab is the one the notebook's graded cells belong to, whatever the file is called (then its folder,
then its name; ``--lab`` says it outright and is checked against the cells). Given only ``--lab``, the
learner's own copy is graded: ``work/<lab>/<lab>.ipynb`` (made by ``make start``) when it exists, else the
release in ``labs/``.

This is the class's own grading path (:func:`bytes2logits.kit.trusted.grade_submission`), so a learner's
local marks equal the marks ``make grade`` gives: the autograder cells of the copy are replaced by the
instructor's versions from ``solutions/`` (a tampered or deleted test cell changes nothing), the copy's
code runs in a sandboxed worker, and the hidden suites run here and reach it through proxies. The
learner's file is never modified.

With ``--service URL`` (or ``$BYTES2LOGITS_CHECK_SERVICE``), a class's learner, who has neither
``solutions/`` nor the hidden suites, sends the notebook to the instructor's check service instead
(:mod:`bytes2logits.kit.checkservice`), which grades it the same way and prints the same table.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .labs import Lab, command_root, course_root, find_lab

if TYPE_CHECKING:
    from .trusted import TaskResult

__all__ = ["grade_notebook", "learner_copy", "main", "resolve"]


def _is_instructor_source(path: Path, lab: Lab) -> bool:
    try:
        return path.resolve() == lab.source_notebook().resolve()
    except (OSError, RuntimeError):
        return False


def grade_notebook(path, lab: Lab | None = None, *, call_seconds: float | None = None) -> list[TaskResult]:
    """Grade a copy of ``path``; return the trusted grader's :class:`~bytes2logits.kit.trusted.TaskResult`
    per task."""
    from .trusted import grade_submission

    path = Path(path).resolve()
    lab = lab or find_lab(path)
    # The instructor's source notebook holds the reference as its answers: checking it is a test of the
    # suites, so the reference-use scan (which would rightly flag every answer there) is skipped.
    return grade_submission(path, lab, call_seconds=call_seconds,
                            check_reference_use=not _is_instructor_source(path, lab))


def learner_copy(lab: Lab, root: Path | None = None) -> Path:
    """The copy of ``lab`` a learner works on: ``work/<lab>/<lab>.ipynb`` if ``make start`` made it, else the
    release ``labs/<lab>/<lab>.ipynb``."""
    root = root or course_root()
    mine = root / "work" / lab.name / f"{lab.name}.ipynb"
    return mine if mine.is_file() else lab.release_notebook(root)


def resolve(notebook: Path | None, lab_name: str | None, root: Path | None = None) -> tuple[Path, Lab]:
    """The notebook to grade and its lab, or ``KeyError``/``FileNotFoundError`` with a sentence saying why
    (with ``--lab`` alone, the learner's copy in the course ``root``, default :func:`course_root`)."""
    from .labs import lab_of_notebook

    lab = find_lab(lab_name) if lab_name else None
    if notebook is None:
        if lab is None:
            raise KeyError("say which notebook to grade, or which lab (--lab lab01)")
        notebook = learner_copy(lab, root)
    if not notebook.is_file():
        raise FileNotFoundError(f"no notebook at {notebook}")
    if lab is None:
        return notebook, find_lab(notebook)
    found = lab_of_notebook(notebook)
    if found is not None and found is not lab:
        raise KeyError(f"{notebook} holds the graded cells of {found.name}, not of {lab.name}: grade it with "
                       f"--lab {found.name[:5]}, or pick the {lab.name[:5]} notebook")
    return notebook, lab


def main(argv: list[str]) -> int:
    import argparse

    from . import sandbox

    parser = argparse.ArgumentParser(prog="python -m bytes2logits check",
                                     description="Grade a lab notebook with its hidden suite.")
    parser.add_argument("notebook", type=Path, nargs="?", default=None,
                        help="the notebook (default with --lab: work/<lab>/ if make start made it, else labs/<lab>/)")
    parser.add_argument("--lab", default=None, help="the lab: lab01 or lab01_tokenizers (default: from the notebook)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds one call into your code may take")
    parser.add_argument("--root", default=None,
                        help="the course folder (default: the course folder around the current directory)")
    parser.add_argument("--service", default=None, help="grade on your class's check service at this URL "
                        "(default: $BYTES2LOGITS_CHECK_SERVICE; neither: grade here, with the repository's suites)")
    parser.add_argument("--token", default=None, help="your token for the check service (default: "
                        "$BYTES2LOGITS_CHECK_TOKEN, else $JUPYTERHUB_API_TOKEN)")
    args = parser.parse_args(argv)
    from .checkservice import ServiceError, service_url

    try:
        url = service_url(args.service)
    except ServiceError as e:
        print(f"error: {e.message}", file=sys.stderr)
        return 2
    if url:
        return _check_on_service(args, url)
    try:
        root = command_root(args.root)
        args.notebook, lab = resolve(args.notebook, args.lab, root)
        how = sandbox.describe()
    except (KeyError, RuntimeError, FileNotFoundError) as e:
        print(f"error: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    from .trusted import limit_memory

    limit_memory()
    print(f"checking {args.notebook} against the hidden suite of {lab.name} ...", flush=True)
    print(f"(your code runs in a {how})", flush=True)
    scores = grade_notebook(args.notebook, lab, call_seconds=args.timeout)
    return _print_scores(scores)


def _print_scores(scores) -> int:
    """The score table (task, score, checks passed, teaching lines); 0 on full marks, else 1."""
    width = max([len(s.task) for s in scores] + [4])
    print(f"\n{'task':<{width}}  score  hidden checks passed")
    for s in scores:
        print(f"{s.task:<{width}}  {f'{s.score:g}/{s.points:g}':<5}  {s.passed}/{s.total}")
        for line in s.lines:
            print(f"{'':<{width}}    {line.strip()}")
    got, total = sum(s.score for s in scores), sum(s.points for s in scores)
    print(f"\nscore: {got:g}/{total:g}")
    return 0 if scores and got == total else 1


def _fetched_copy(lab: Lab) -> Path:
    """A class learner's copy of ``lab`` in the current folder: ``work/<lab>/``, then where ``nbgrader fetch``
    puts it (``<lab>/``), then ``labs/<lab>/``; else the repository's :func:`learner_copy`."""
    for candidate in (Path("work") / lab.name, Path(lab.name), Path("labs") / lab.name):
        if (candidate / f"{lab.name}.ipynb").is_file():
            return candidate / f"{lab.name}.ipynb"
    return learner_copy(lab)


def _check_on_service(args, url: str) -> int:
    """``check --service URL``: send the notebook to the class's check service and print its reply."""
    from types import SimpleNamespace

    from .checkservice import ServiceError, check_remote

    try:
        if args.notebook is None and args.lab:
            args.notebook = _fetched_copy(find_lab(args.lab))
        args.notebook, lab = resolve(args.notebook, args.lab)
        print(f"checking {args.notebook} against the hidden suite of {lab.name} on the check service "
              f"{url} ...", flush=True)
        reply = check_remote(args.notebook, lab, url, args.token)
    except (KeyError, RuntimeError, FileNotFoundError) as e:
        print(f"error: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    except ServiceError as e:
        retry = f"; try again in {e.retry_after:g} s" if e.retry_after else ""
        said = f"the check service answered HTTP {e.status}: " if e.status else ""
        print(f"error: {said}{e.message}{retry}", file=sys.stderr)
        return 2
    print(f"(graded by the check service as {reply.get('student')}; your code ran in its sandbox)", flush=True)
    return _print_scores([SimpleNamespace(**t) for t in reply.get("tasks", [])])
