"""The fixtures every hidden suite uses: ``impl``, the implementation under test, and ``reference``.

``impl`` is the package reference, a notebook (``--impl PATH``, ``check``, ``make grade``: its code runs
in a sandboxed worker and ``impl.X`` is a proxy) or, in a learner's own kernel, their live namespace (see
``bytes2logits.kit.grading``). Tests reach the learner's names as ``impl.ByteTokenizer`` and write a
docstring that says in words what is expected: that line is the feedback a learner sees when it fails.

``reference`` is the package reference reached the same way as ``impl``; speed and memory gates time
both with ``bytes2logits.kit.remote.timed`` and ``peak_memory`` and compare the two.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

# Grades must not depend on luck: the same submission always meets the same examples. A test of the grading
# machinery itself (tests/test_nbgrader_cycle.py) may ask for fewer with BYTES2LOGITS_GRADING_EXAMPLES; the
# variable is read in the grader's process, which no submission can reach.
settings.register_profile(
    "grading", derandomize=True, deadline=None, database=None,
    max_examples=int(os.environ.get("BYTES2LOGITS_GRADING_EXAMPLES", "150")), print_blob=False,
    # One failure per check, shrunk: several distinct ones would reach the learner as an ExceptionGroup.
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
)
settings.load_profile("grading")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "weight(n): this check's share of its task's points (default 1; each case carries it)")


def pytest_collection_modifyitems(config, items):
    """A weight must be one positive number: a suite that says otherwise does not run at all."""
    for item in items:
        marker = item.get_closest_marker("weight")
        if marker is None:
            continue
        value = marker.args[0] if len(marker.args) == 1 and not marker.kwargs else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.weight takes one positive number, "
                                    f"not {marker.args!r} {marker.kwargs!r}")


def _task(request) -> str:
    """The task a suite file grades: ``test_<task>.py``."""
    return request.path.stem[len("test_"):]


@pytest.fixture
def impl(request):
    from bytes2logits.kit.grading import implementation_for

    return implementation_for(request.config, request.path.parent.name, _task(request))


@pytest.fixture
def reference(request):
    from bytes2logits.kit.grading import reference_for

    return reference_for(request.config, request.path.parent.name)


@pytest.fixture
def tmp_path(request, tmp_path_factory):
    """A fresh folder the implementation under test can read and write (in a worker: inside its scratch)."""
    import tempfile
    from pathlib import Path

    from bytes2logits.kit.grading import implementation_for

    scratch = getattr(implementation_for(request.config, request.path.parent.name, _task(request)), "scratch", None)
    if scratch is not None:
        return Path(tempfile.mkdtemp(prefix="t-", dir=scratch))
    return tmp_path_factory.mktemp(request.node.name[:30])
