"""The grading bridge: run a lab task's hidden pytest suite against an implementation.

The same hidden suite (``tests/hidden/<lab>/test_<task>.py``) runs against three implementations, chosen
by the ``impl`` fixture of ``tests/hidden/conftest.py`` through :func:`implementation_for`:

* the package reference (plain ``pytest tests/hidden``: the suites must pass on it), in-process;
* a notebook, through the trusted path: its code runs in a sandboxed worker and the suite reaches it
  through proxies (``pytest tests/hidden/<lab> --impl PATH.ipynb``, ``python -m bytes2logits check`` and
  ``make grade``, see :mod:`bytes2logits.kit.trusted`). **Only this path produces a grade.**
* the live kernel namespace, in-process: the hidden block of an autograder cell calls
  :func:`run_hidden_tests` while a learner works in their own JupyterLab. It is feedback, not a grade: the
  learner's code shares that process and could rewrite anything in it.

The ``reference`` fixture is the package reference reached the same way as ``impl`` (in a worker of its
own when ``impl`` is in one), so speed and memory gates compare like with like.

A learner sees one line per failed check: the test's name and a teaching message that says in words what
was expected. Test code, tracebacks and expected values are never shown.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .implementation import Implementation
from .labs import LABS, find_lab, hidden_root

__all__ = ["TestOutcome", "explain_failed_checks", "failure_lines", "implementation_for", "reference_for",
           "run_hidden_tests", "run_suite", "run_with", "score"]

_ACTIVE = None  # the implementation under test while run_with / run_hidden_tests runs a suite
_ACTIVE_REFERENCE = None  # a callable giving the matching reference implementation


def implementation_for(config, lab_name: str, task: str | None = None):
    """The implementation a hidden test runs against (see the module docstring); ``task`` (the suite's) picks
    the redacted package a notebook's worker sees."""
    if _ACTIVE is not None:
        return _ACTIVE
    choice = getattr(config.option, "b2l_impl", None) or "reference"
    lab = LABS[lab_name]
    if choice == "reference":
        return _reference(lab)
    impl = _notebook_session(choice, lab)[0]
    if task is not None and any(t.id == task for t in lab.tasks):
        if (lab.name, task) not in _OVERLAYS:  # once per run: finding the copy reads the whole package
            from .redact import overlay_for

            _OVERLAYS[(lab.name, task)] = overlay_for(lab, task)
        impl._submission.set_overlays(_OVERLAYS[(lab.name, task)])  # as trusted grading does, task by task
    return impl


def reference_for(config, lab_name: str):
    """The reference, reached the way the implementation under test is (for speed and memory gates)."""
    if _ACTIVE_REFERENCE is not None:
        return _ACTIVE_REFERENCE()
    choice = getattr(config.option, "b2l_impl", None) or "reference"
    lab = LABS[lab_name]
    if choice == "reference":
        return _reference(lab)
    return _notebook_session(choice, lab)[1]()


def _reference(lab) -> Implementation:
    """The package reference, in-process (plain ``pytest tests/hidden``, and a learner's kernel)."""
    return Implementation(lab.reference_namespace(), f"the reference module {lab.module}")


def _notebook_session(path, lab):
    """A sandboxed worker holding the notebook at ``path`` (one per notebook and pytest run)."""
    import atexit

    from .notebook import instructor_cells, read_notebook, submission_cells
    from .remote import RemoteImplementation, Submission

    key = (str(Path(path).resolve()), Path(path).stat().st_mtime_ns)
    if key not in _NOTEBOOK_CACHE:
        nb = read_notebook(path)
        instructor_cells(nb, read_notebook(lab.source_notebook()))
        given = {name: lab.reference_object(name) for name in lab.given}
        sub = Submission(submission_cells(nb, lab)[0], given=given, label=Path(path).name)
        atexit.register(sub.close)
        impl = RemoteImplementation(sub, f"notebook {Path(path).name}", given)
        box = {}

        def reference():
            if "impl" not in box:
                ref = Submission(module=lab.modules, names=tuple(lab.exported_names()), given=given)
                atexit.register(ref.close)
                box["impl"] = RemoteImplementation(ref, f"the reference {lab.module}", given)
            return box["impl"]

        _NOTEBOOK_CACHE[key] = (impl, reference)
    return _NOTEBOOK_CACHE[key]


_NOTEBOOK_CACHE: dict = {}
_OVERLAYS: dict = {}  # (lab, task) -> the redacted package's overlay, for notebook sessions


@dataclass
class TestOutcome:
    """One check's result. ``weight`` is its share of the task (``@pytest.mark.weight(n)``, default 1)."""

    name: str
    passed: bool
    message: str
    weight: float = 1.0


def score(points: float, outcomes: list[TestOutcome]) -> float:
    """The points ``outcomes`` earn: ``points`` times the passed share of the weights, to two decimals.

    A check marked ``@pytest.mark.weight(3)`` counts three times as much as an unmarked one; every case of a
    parametrised check carries the check's weight. Weights let a task's points measure its concept (an
    incremental trainer's speed, a codec's own encode) rather than the number of checks written for each part.
    """
    total = sum(o.weight for o in outcomes)
    if not total:
        return 0.0
    return round(points * sum(o.weight for o in outcomes if o.passed) / total, 2)


def _weight(item) -> float:
    marker = item.get_closest_marker("weight")
    if marker is None:
        return 1.0
    return float(marker.args[0])  # tests/hidden/conftest.py refuses a weight that is not a positive number


class _Collector:
    """A pytest plugin that records one outcome per test with a teaching message."""

    def __init__(self, on_test=None):
        self.outcomes: list[TestOutcome] = []
        self.collect_errors: list[str] = []
        self.on_test = on_test

    def pytest_collectreport(self, report):
        if report.failed:
            self.collect_errors.append(str(report.longrepr).strip().splitlines()[-1])

    def _hooks(self):
        import pytest

        collector = self

        class Hooks:
            @pytest.hookimpl(tryfirst=True)
            def pytest_runtest_setup(self, item):
                if collector.on_test is not None:
                    collector.on_test(item.nodeid)

            @pytest.hookimpl(wrapper=True)
            def pytest_runtest_makereport(self, item, call):
                report = yield
                # One outcome per test: its call phase, or a setup phase that failed (e.g. a missing name).
                if report.when == "call" or (report.when == "setup" and report.failed):
                    name = item.name.split("[")[0]
                    weight = _weight(item)
                    if report.passed:
                        collector.outcomes.append(TestOutcome(name, True, "", weight))
                    elif report.failed:
                        doc = (getattr(item, "function", None).__doc__ or "").strip()
                        collector.outcomes.append(TestOutcome(name, False, _teaching_message(doc, call), weight))
                return report

        return Hooks()


def _teaching_message(doc: str, call) -> str:
    """One line that says what was expected, in words; never test code or the expected value.

    The check's rule (its docstring's first line) comes first; the detail follows it: the assertion's
    message (which the suite writes so that it names the failing case without giving the answer away), the
    exception the learner's code raised, or, for ``pytest.raises``, the error it did not raise.
    """
    rule = doc.splitlines()[0].strip() if doc else "this check failed"
    exc = call.excinfo.value if call.excinfo is not None else None
    if exc is None:
        return rule
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:  # several failures at once: say the first
        exc = exc.exceptions[0]
    text = str(exc).strip()
    first = text.splitlines()[0].strip() if text else ""
    if isinstance(exc, AssertionError):
        if first.startswith("Regex pattern did not match"):  # pytest.raises(match=...): say it in words
            return f"{rule} (your error message does not say what this check asks it to say)"
        # No message of the suite's own (pytest's rewritten "assert ..." is code, never shown): the rule alone.
        if not first or first == rule or first.startswith("assert "):
            return rule
        return f"{rule.rstrip('.')}: {first}"
    if type(exc).__name__ == "Failed" and first.startswith("DID NOT RAISE"):
        raised = first[len("DID NOT RAISE"):].strip()
        if raised.startswith("<class '") and raised.endswith("'>"):
            raised = raised[len("<class '"):-2].rsplit(".", 1)[-1]
        return f"{rule} (your code did not raise {raised or 'the error'})"
    if type(exc).__name__ == "Failed":  # pytest.fail("...") in a suite: the message is the detail
        return f"{rule.rstrip('.')}: {first}" if first else rule
    kind = type(exc).__name__
    if isinstance(exc, NotImplementedError) or kind == "NotImplementedError":
        if "yours to write" in first:  # the course's own code, reached from the grading sandbox: a stub
            return f"{rule} ({first[:300]})"
        return f"{rule} (not written yet: your code still raises NotImplementedError)"
    detail = first[:120]
    return f"{rule} (your code raised {kind}{': ' + detail if detail else ''})"


def run_suite(suite: Path, *, quiet: bool = True, basetemp: Path | None = None,
              on_test=None) -> tuple[list[TestOutcome], list[str], int]:
    """Run one hidden suite file with pytest in this process; return (outcomes, collection errors, exit code)."""
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    # Hypothesis keeps a cache folder; it belongs in a temporary place, not in the learner's folder.
    store = os.path.join(tempfile.gettempdir(), "bytes2logits-hypothesis")
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = store
    with contextlib.suppress(ImportError):
        from hypothesis.configuration import set_hypothesis_home_dir

        set_hypothesis_home_dir(store)
    root = hidden_root()
    # A submission's folder is the kernel's working directory: never import test machinery from it.
    cwd = os.getcwd()
    saved_path = list(sys.path)
    sys.path[:] = [p for p in sys.path if p not in ("", ".", cwd)]
    try:
        return _run_pytest(suite, root, basetemp, on_test)
    finally:
        sys.path[:] = saved_path


def run_with(impl, reference, suite: Path, *, basetemp: Path | None = None,
             on_test=None) -> tuple[list[TestOutcome], list[str], int]:
    """Run one suite with ``impl`` as the implementation under test and ``reference()`` as its reference."""
    global _ACTIVE, _ACTIVE_REFERENCE
    _ACTIVE, _ACTIVE_REFERENCE = impl, reference
    try:
        return run_suite(suite, basetemp=basetemp, on_test=on_test)
    finally:
        _ACTIVE = _ACTIVE_REFERENCE = None


def failure_lines(outcomes: list[TestOutcome]) -> list[str]:
    """One teaching line per failed check (a parametrised check that fails several times counts once)."""
    failures: dict[tuple[str, str], int] = {}
    for o in outcomes:
        if not o.passed:
            failures[(o.name, o.message)] = failures.get((o.name, o.message), 0) + 1
    lines = []
    for (name, message), count in failures.items():
        cases = f" ({count} cases)" if count > 1 else ""
        lines.append(f"x {name}{cases}: {message}")
    return lines


def _run_pytest(suite: Path, root: Path, basetemp: Path | None = None,
                on_test=None) -> tuple[list[TestOutcome], list[str], int]:
    import pytest

    collector = _Collector(on_test)
    args = [str(suite), "-q", "--capture=sys", "--assert=plain", "-p", "no:cacheprovider",
            "-p", "no:stepwise", "-c", os.devnull, "--rootdir", str(root), "--confcutdir", str(root),
            "--import-mode=importlib", "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    if basetemp is not None:
        args += ["--basetemp", str(basetemp)]
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = pytest.main(args, plugins=[collector, collector._hooks()])
    return collector.outcomes, collector.collect_errors, int(code)


def run_hidden_tests(lab: str, task: str, namespace: dict, points: float):
    """A learner's own feedback in their kernel: run the task's hidden suite on ``namespace``.

    Prints a summary line and one teaching line per failed check, and returns the points the checks
    would earn. This runs in the learner's own process, so it is feedback only: the grade comes from the
    trusted grader (``make check``, ``make grade``), which runs the learner's code in a sandbox. In the
    autograde sandbox the hidden suites are not there at all; then this prints one line and returns None.
    """
    global _ACTIVE
    lab_obj = find_lab(lab)
    try:
        suite = None if os.environ.get("BYTES2LOGITS_SANDBOXED") else hidden_root() / lab_obj.name / f"test_{task}.py"
    except RuntimeError:  # no course repository in sight
        suite = None
    if suite is None or not suite.is_file():
        print(f"{task}: hidden checks are run by the trusted grader, outside this kernel")
        return None
    _ACTIVE = Implementation(namespace, "your notebook")
    try:
        outcomes, errors, code = run_suite(suite)
    finally:
        _ACTIVE = None
    if code == 2:  # pytest.ExitCode.INTERRUPTED: the cell's time limit struck mid-suite
        raise KeyboardInterrupt("grading was interrupted (time limit?)")
    if errors or not outcomes:
        raise RuntimeError(f"hidden suite for {task!r} could not run: {'; '.join(errors) or 'no tests collected'}")
    passed = sum(o.passed for o in outcomes)
    total = len(outcomes)
    earned = score(points, outcomes)
    print(f"{task}: {passed}/{total} hidden checks passed -> {earned:g}/{points:g} points "
          "(feedback in your kernel; make check gives the grade)")
    for line in failure_lines(outcomes):
        print("  " + line)
    return earned


VISIBLE_MARK = "visible checks passed"  # every autograder cell's visible part ends by printing this
FAILED_VISIBLE = ("A visible check of this task failed, so this cell stopped there: the task's other checks "
                  "give you no feedback in this kernel until it passes. Fix it first. Your grade does not come "
                  "from this cell: make check LAB={lab} runs the task's hidden checks on your code either way.")
# What a learner reads for a stub's bare NotImplementedError: in a grader cell in JupyterLab (below) and in the
# feedback of make check and nbgrader (kit/nbexec.py).
NOT_WRITTEN = ("not written yet: a function this cell uses still raises NotImplementedError (replace the "
               "`raise NotImplementedError()` line of its answer cell with your code)")


def explain_failed_checks(lab: str) -> None:
    """In a learner's IPython kernel, follow a failed visible check's traceback with what it means.

    The set-up cell of every lab calls this. Outside IPython (the grader's worker, a script) it does
    nothing. Only an autograder cell (one whose source prints ``"visible checks passed"``) gets words: after
    an ``AssertionError`` the note on what a failed visible check means, after a ``NotImplementedError`` (an
    answer cell not written yet) :data:`NOT_WRITTEN`. Every other error, and every error of a learner's own
    cell, is shown as IPython always shows it.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return

    def handler(shell, etype, value, tb, tb_offset=None):
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        history = shell.user_ns.get("In") or [""]
        if VISIBLE_MARK in str(history[-1]):
            if issubclass(etype, NotImplementedError):
                print(f"{NOT_WRITTEN}; run that cell, then this one again.")
            else:
                print(FAILED_VISIBLE.format(lab=lab[:5]))
        return None

    shell.set_custom_exc((AssertionError, NotImplementedError), handler)


def hidden_needles(hidden: Path, pattern: str = "test_*.py") -> set[str]:
    """What a page shown to a learner must never hold: the hidden block's markers, and every line of 30 or
    more characters of the suites matching ``pattern`` under ``hidden`` (comments and docstring lines aside,
    which may be quoted as teaching lines), except text the release notebooks show themselves: that is
    the lab's own text, not hidden code, and a page quoting it (every feedback page does) is not a leak.
    Feedback pages and the check service's replies use this rule."""
    needles = {"BEGIN HIDDEN TESTS", "run_hidden_tests("}
    for suite in Path(hidden).rglob(pattern):
        for line in suite.read_text(encoding="utf-8", errors="replace").splitlines():
            s = line.strip()
            if len(s) >= 30 and not s.startswith(("#", '"""')) and '"""' not in s:
                needles.add(s)
    shown = "\n".join(release_lines())
    return {n for n in needles if n not in shown}


def release_lines() -> set[str]:
    """Every stripped line of every lab's release notebook (what any learner is handed anyway)."""
    import json

    shown: set[str] = set()
    for lab in LABS.values():
        try:
            nb = json.loads(lab.release_notebook().read_text(encoding="utf-8"))
        except (OSError, ValueError, RuntimeError):
            continue
        for cell in nb.get("cells", []):
            src = cell.get("source", "")
            shown.update(line.strip() for line in ("".join(src) if isinstance(src, list) else str(src)).splitlines())
    return shown
