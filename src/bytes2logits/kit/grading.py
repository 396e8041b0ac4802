"""The grading bridge: run a lab task's hidden pytest suite against a learner's code.

The same hidden suite (``tests/hidden/<lab>/test_<task>.py``) runs against three implementations, chosen
by the ``impl`` fixture of ``tests/hidden/conftest.py`` through :func:`implementation_for`:

* the package reference (plain ``pytest tests/hidden``: the suites must pass on it);
* a notebook file (``pytest tests/hidden/<lab> --impl PATH.ipynb``: its code cells are executed in-process);
* the live kernel namespace (the hidden block of an autograder cell calls :func:`run_hidden_tests`).

In a kernel the learner sees one line per failed check: the test's name and a teaching message that says
in words what was expected. Test code, tracebacks and expected values are never shown. The cell's value
is ``points × passed / total`` (nbgrader reads it as partial credit).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .labs import LABS, find_lab, hidden_root

__all__ = ["Implementation", "MissingName", "TestOutcome", "implementation_for", "load_notebook_namespace",
           "run_hidden_tests", "run_suite"]

_ACTIVE: "Implementation | None" = None  # set while run_hidden_tests runs inside a kernel


class MissingName(AssertionError, AttributeError):
    """The implementation under test does not define a name the task needs."""


class Implementation:
    """Attribute access to the names under test, with a teaching error for a missing one."""

    def __init__(self, names: dict, origin: str):
        self._names = names
        self._origin = origin

    def __getattr__(self, name: str):
        if name.startswith("_") and name not in self._names:
            raise AttributeError(name)
        try:
            return self._names[name]
        except KeyError:
            raise MissingName(f"{self._origin} does not define `{name}`: run the cell that defines it "
                              "and keep the name the task gives") from None

    def __repr__(self) -> str:
        return f"<implementation from {self._origin}>"


def load_notebook_namespace(path: str | os.PathLike) -> dict:
    """Execute a lab notebook's code cells (not its autograder cells) in a fresh namespace.

    Each cell runs with the notebook's folder as working directory and its output swallowed; a cell that
    raises (a stub's ``NotImplementedError``, a demo of unfinished code) is skipped and the rest go on,
    as in a notebook whose cells are run one by one.
    """
    import nbformat

    path = Path(path).resolve()
    nb = nbformat.read(path, as_version=4)
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        transform = TransformerManager().transform_cell
    except ImportError:  # pragma: no cover - IPython ships with the course extras
        def transform(src):
            return src
    ns: dict = {"__name__": "__main__"}
    old_cwd = os.getcwd()
    os.chdir(path.parent)
    try:
        for index, cell in enumerate(nb.cells):
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.cell_type != "code" or meta.get("grade"):
                continue
            try:
                code = compile(transform(cell.source), f"{path.name}[cell {index}]", "exec")
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    exec(code, ns)
            except Exception:  # noqa: BLE001 - a learner's broken cell must not stop the others
                continue
    finally:
        os.chdir(old_cwd)
    return ns


def implementation_for(config, lab_name: str) -> Implementation:
    """The implementation a hidden test runs against (see the module docstring)."""
    if _ACTIVE is not None:
        return _ACTIVE
    choice = getattr(config.option, "b2l_impl", None) or "reference"
    lab = LABS[lab_name]
    if choice == "reference":
        return Implementation(lab.reference_namespace(), f"the reference module {lab.module}")
    key = (str(Path(choice).resolve()), Path(choice).stat().st_mtime_ns)
    if key not in _NOTEBOOK_CACHE:
        _NOTEBOOK_CACHE[key] = Implementation(load_notebook_namespace(choice), f"notebook {Path(choice).name}")
    return _NOTEBOOK_CACHE[key]


_NOTEBOOK_CACHE: dict = {}


@dataclass
class TestOutcome:
    name: str
    passed: bool
    message: str


class _Collector:
    """A pytest plugin that records one outcome per test with a teaching message."""

    def __init__(self):
        self.outcomes: list[TestOutcome] = []
        self.collect_errors: list[str] = []

    def pytest_collectreport(self, report):
        if report.failed:
            self.collect_errors.append(str(report.longrepr).strip().splitlines()[-1])

    def _hooks(self):
        import pytest

        collector = self

        class Hooks:
            @pytest.hookimpl(wrapper=True)
            def pytest_runtest_makereport(self, item, call):
                report = yield
                # One outcome per test: its call phase, or a setup phase that failed (e.g. a missing name).
                if report.when == "call" or (report.when == "setup" and report.failed):
                    name = item.name.split("[")[0]
                    if report.passed:
                        collector.outcomes.append(TestOutcome(name, True, ""))
                    elif report.failed:
                        doc = (getattr(item, "function", None).__doc__ or "").strip()
                        collector.outcomes.append(TestOutcome(name, False, _teaching_message(doc, call)))
                return report

        return Hooks()


def _teaching_message(doc: str, call) -> str:
    """One line that says what was expected, in words; never test code or the expected value."""
    first = doc.splitlines()[0] if doc else "this check failed"
    exc = call.excinfo.value if call.excinfo is not None else None
    if exc is None:
        return first
    if isinstance(exc, AssertionError):
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return text or first
    kind = type(exc).__name__
    detail = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else ""
    return f"{first} (your code raised {kind}{': ' + detail if detail else ''})"


def run_suite(suite: Path, *, quiet: bool = True) -> tuple[list[TestOutcome], list[str], int]:
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
        return _run_pytest(suite, root)
    finally:
        sys.path[:] = saved_path


def _run_pytest(suite: Path, root: Path) -> tuple[list[TestOutcome], list[str], int]:
    import pytest

    collector = _Collector()
    args = [str(suite), "-q", "--capture=sys", "--assert=plain", "-p", "no:cacheprovider",
            "-p", "no:stepwise", "-c", os.devnull, "--rootdir", str(root), "--confcutdir", str(root),
            "--import-mode=importlib", "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = pytest.main(args, plugins=[collector, collector._hooks()])
    return collector.outcomes, collector.collect_errors, int(code)


def run_hidden_tests(lab: str, task: str, namespace: dict, points: float) -> float:
    """Grade one task in a kernel: run its hidden suite on ``namespace``; return the points earned.

    Prints a summary line and one teaching line per failed check. Raises if the suite cannot run at all
    (the cell then scores 0, as nbgrader scores any error), or if grading was interrupted by the time limit.
    """
    global _ACTIVE
    lab_obj = find_lab(lab)
    suite = hidden_root() / lab_obj.name / f"test_{task}.py"
    if not suite.is_file():
        raise RuntimeError(f"hidden suite {suite} is missing: set BYTES2LOGITS_HIDDEN_TESTS to the course's "
                           "tests/hidden folder (nbgrader_config.py does this)")
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
    earned = round(points * passed / total, 2)
    print(f"{task}: {passed}/{total} hidden checks passed -> {earned:g}/{points:g} points")
    failures: dict[tuple[str, str], int] = {}
    for o in outcomes:
        if not o.passed:
            failures[(o.name, o.message)] = failures.get((o.name, o.message), 0) + 1
    for (name, message), count in failures.items():
        cases = f" ({count} cases)" if count > 1 else ""
        print(f"  x {name}{cases}: {message}")
    return earned
