"""Project-wide test options.

``--impl`` chooses what the hidden lab suites run against: ``reference`` (the package, the default) or
the path of a lab notebook (a solution, a release stub, or a learner's copy).
"""


def pytest_addoption(parser):
    parser.addoption("--impl", dest="b2l_impl", default=None, metavar="reference|NOTEBOOK.ipynb",
                     help="implementation the hidden suites under tests/hidden/ run against")


# Test files that take minutes, longest first. `make test` hands whole files to pytest-xdist workers in
# collection order (--dist loadfile); collecting these first starts each worker on one of them at once,
# instead of leaving one worker alone with the longest file at the end. Measured with --durations.
# (Serial run on 2 cores: parity 440 s, the nbgrader cycle 350 s, labs 200 s, chapters 150 s, make grade's
# workers 140 s, the JupyterHub class 100 s, PostgreSQL 110 s, model 70 s.)
LONG_FILES = ("test_parity.py", "test_nbgrader_cycle.py", "test_labs.py", "test_course_notebooks.py",
              "test_grade_parallel.py", "test_gradebook_postgres.py", "test_classroom_hub.py", "test_model.py",
              "test_gguf.py")


# Hidden tests that prove nothing more when the suites run against the package reference (no --impl), so
# `make test` skips them there; `check`, `make grade` and tests/test_labs.py (every solution and release)
# run them all. Speed gates race the implementation against the reference: here that is the reference
# against itself. The two model-sized parity checks repeat tests/test_parity.py for the engine.
REFERENCE_MODE_SKIPS = {
    "lab16_forward_pass": {"test_smollm2_logits_match_llama_cpp"},
    "lab17_generation": {"test_greedy_ids_match_llama_cpp"},
}


def _reference_mode_skip(item) -> str | None:
    from bytes2logits.kit import grading

    if "hidden" not in item.path.parts or item.config.getoption("b2l_impl") not in (None, "reference"):
        return None
    if grading._ACTIVE is not None:  # a suite run by check / grade (which stops at tests/hidden anyway)
        return None
    name = getattr(item, "originalname", item.name)
    if name.startswith("test_speed"):
        return "a speed gate against the reference, run here on the reference itself (checked on every solution)"
    if name in REFERENCE_MODE_SKIPS.get(item.path.parent.name, ()):
        return "the engine's parity with llama.cpp is tests/test_parity.py; this check runs on every solution"
    return None


def pytest_collection_modifyitems(session, config, items):
    import pytest

    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: file order kept otherwise
    for item in items:
        reason = _reference_mode_skip(item)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


def _browser_fixture():
    import sys
    from pathlib import Path

    import pytest

    @pytest.fixture(scope="module")
    def browser():
        """One headless Chromium per test module (tests/browser.py: skipped without one, a failure under CI)."""
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from browser import running_chromium

        with running_chromium() as b:
            yield b

    return browser


browser = _browser_fixture()


def _machine_state() -> str:
    """What the kernel says about memory and processes now: the usual suspects when a worker vanishes."""
    import os
    from pathlib import Path

    facts = []
    try:
        vmstat = dict(line.split() for line in Path("/proc/vmstat").read_text().splitlines())
        facts.append(f"oom_kill={vmstat.get('oom_kill', '?')}")
        mem = {line.split(":")[0]: line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()}
        facts.append(f"MemAvailable={int(mem['MemAvailable']) // 1024} MiB")
        facts.append(f"processes={sum(1 for p in os.listdir('/proc') if p.isdigit())}"
                     f" of pid_max={Path('/proc/sys/kernel/pid_max').read_text().strip()}")
    except (OSError, KeyError, ValueError) as e:
        facts.append(f"(could not read /proc: {e})")
    return ", ".join(facts)


def pytest_testnodedown(node, error):
    """When a pytest-xdist worker dies, say how: its exit status or the signal that killed it, and the state
    of the machine. (xdist itself names the test it was running and reports that test failed; `make test`
    passes --max-worker-restart 0, so the run stops there rather than retrying.)"""
    if not error:
        return
    import signal
    import sys
    import time

    popen = getattr(getattr(getattr(node, "gateway", None), "_io", None), "popen", None)
    status = None
    if popen is not None:
        deadline = time.monotonic() + 5
        while (status := popen.poll()) is None and time.monotonic() < deadline:
            time.sleep(0.05)
    if status is None:
        how = "its exit status is unknown (still running, or not a local process)"
    elif status < 0:
        how = f"it was killed by {signal.Signals(-status).name}"
    else:
        how = f"it exited with status {status}"
    gw = getattr(getattr(node, "gateway", None), "id", "?")
    print(f"\n[{gw}] worker down ({error}): {how}; {_machine_state()}", file=sys.stderr, flush=True)


def _sigpipe_guard():
    import signal

    import pytest

    @pytest.fixture(autouse=True)
    def sigpipe_left_alone(request):
        """Fail the test that changes this process's SIGPIPE action (and put it back). With the default
        action, the next write to any closed pipe or socket kills the whole xdist worker without a word: a
        chat command run in-process once did that, and a later test's HTTP server died of it in CI."""
        if not hasattr(signal, "SIGPIPE"):
            yield
            return
        before = signal.getsignal(signal.SIGPIPE)
        yield
        after = signal.getsignal(signal.SIGPIPE)
        if after != before:
            signal.signal(signal.SIGPIPE, before)
            pytest.fail(f"{request.node.nodeid} changed SIGPIPE's action from {before!r} to {after!r}",
                        pytrace=False)

    return sigpipe_left_alone


sigpipe_left_alone = _sigpipe_guard()
