"""The trust boundary piece by piece: the wire, the proxies, the worker's sandbox, the reference scan.

The whole class is graded end to end in ``test_nbgrader_cycle.py``; these tests pin each guarantee down
where it is made, so that a regression names the piece that broke.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bytes2logits.kit import sandbox
from bytes2logits.kit.labs import LABS, hidden_root, repo_root
from bytes2logits.kit.remote import RemoteImplementation, Submission, WorkerLost, is_instance
from bytes2logits.kit.rpc import Remote, RemoteError
from bytes2logits.kit.wire import WireError, decode, encode

# ------------------------------------------------------------------------------------------------ wire

PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=4)
    | st.frozensets(st.integers(), max_size=4),
    max_leaves=20)


def _exact_types(value):
    yield type(value)
    if type(value) in (list, tuple, frozenset, set):
        for v in value:
            yield from _exact_types(v)
    elif type(value) is dict:
        for k, v in value.items():
            yield from _exact_types(k)
            yield from _exact_types(v)


@given(PLAIN)
def test_plain_data_round_trips_exactly(value):
    back = decode(encode(value))
    assert back == value
    assert list(_exact_types(back)) == list(_exact_types(value))


def test_numpy_counter_range_path_round_trip():
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    for value in (arr, np.array([True, False]), np.int64(7), Counter("abca"), range(2, 9, 3), Path("/x/y")):
        back = decode(encode(value))
        assert type(back) is type(value)
        if isinstance(value, np.ndarray):
            assert back.dtype == value.dtype and np.array_equal(back, value) and back.flags.writeable
        else:
            assert back == value


def test_subclasses_are_not_plain_unless_downcast():
    class Sneaky(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    with pytest.raises(WireError):
        encode(Sneaky("a"))  # no export hook: a subclass is not data
    back = decode(encode([Sneaky("abc")], downcast=True))
    assert type(back[0]) is str and back == ["abc"]
    with pytest.raises(WireError):
        encode(np.array([object()]))  # an object array is not numeric data


@settings(max_examples=300)
@given(st.binary(max_size=64))
def test_garbage_never_escapes_as_anything_but_wire_error(raw):
    try:
        decode(raw)
    except WireError:
        pass


def test_truncated_and_lying_messages_are_refused_without_allocating():
    good = encode({"ids": list(range(50)), "text": "héllo", "arr": np.zeros((4, 4))})
    for cut in range(len(good)):
        with pytest.raises(WireError):
            decode(good[:cut])
    start = time.perf_counter()
    for lie in (b"l\xff\xff\xff\xff", b"s\xff\xff\xff\xff", b"d\x7f\xff\xff\xff",
                b"a\x03<f8\x01" + (10 ** 12).to_bytes(8, "big") + (8 * 10 ** 12).to_bytes(8, "big")):
        with pytest.raises(WireError):
            decode(lie)
    assert time.perf_counter() - start < 1.0
    nested = b"l\x00\x00\x00\x01" * 500 + b"N"
    with pytest.raises(WireError, match="nested"):
        decode(nested)
    with pytest.raises(WireError, match="handle"):
        decode(b"h" + bytes(17) + b"\x00")  # a handle where only plain data is allowed


# ------------------------------------------------------------------------------------------ the worker

LEARNER = '''
import os, socket, time

class Always:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__

def always():
    return Always()

def double(x):
    return 2 * x

def call_back(f, x):
    return f(x) + 1

def peek(f):
    return f._secret

def raise_key():
    raise KeyError("missing")

class Mine(Exception):
    pass

def raise_mine():
    raise Mine("my own")

def hang():
    while True:
        pass

def die():
    os._exit(3)

def probe():
    out = {"pid": os.getpid(), "ppid": os.getppid(), "hidden": os.path.exists(HIDDEN),
           "solutions": os.path.exists(SOLUTIONS), "home": os.path.exists(os.path.expanduser("~"))}
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=2)
        out["net"] = "connected"
    except OSError as e:
        out["net"] = type(e).__name__
    try:
        os.kill(1, 9)
        out["kill1"] = "sent"
    except OSError as e:
        out["kill1"] = type(e).__name__
    out["write"] = {}
    for path in ("/etc/escaped", "/tmp/escaped", os.path.join(os.path.dirname(os.__file__), "escaped"),
                 os.path.join(FILES, "escaped")):
        try:
            open(path, "w").close()
            out["write"][path] = "written"
        except OSError as e:
            out["write"][path] = type(e).__name__
    return out

class Cache(dict):
    pass
'''


@pytest.fixture(scope="module")
def server():
    sock = socket.create_server(("127.0.0.1", 0))
    yield sock
    sock.close()


@pytest.fixture(scope="module")
def learner(server):
    files = tempfile.mkdtemp(prefix="b2l-test-files-")
    prelude = (f"HIDDEN = {str(hidden_root())!r}\nSOLUTIONS = {str(repo_root() / 'solutions')!r}\n"
               f"PORT = {server.getsockname()[1]}\nFILES = {files!r}\n")
    sub = Submission([(0, prelude + LEARNER), (1, "import os\nos._exit(9)"), (2, "def after(): return 'ran'")],
                     call_seconds=3, files=Path(files))
    yield RemoteImplementation(sub, "test code"), sub
    sub.close()


def test_calls_callbacks_and_errors(learner):
    impl, _ = learner
    assert impl.double(21) == 42 and impl.double("ab") == "abab"
    assert impl.call_back(lambda v: v * 10, 4) == 41
    with pytest.raises(KeyError) as info:
        impl.raise_key()
    assert info.value.args == ("missing",)
    with pytest.raises(RemoteError, match="Mine: my own"):
        impl.raise_mine()  # a learner's own class never crosses: a generic error with its message


def test_a_cell_that_kills_the_worker_is_skipped_not_fatal(learner):
    impl, sub = learner
    assert impl.after() == "ran"
    assert 1 in sub.skip


def test_lying_objects_stay_behind_a_proxy(learner):
    impl, _ = learner
    value = impl.always()
    assert type(value) is Remote
    assert value != 1 and not (value == "anything") and value == value
    cache = impl.Cache()
    assert type(cache) is Remote and is_instance(cache, dict) and not is_instance(cache, list)


def test_the_worker_cannot_reach_into_the_graders_objects(learner):
    impl, _ = learner

    class Secret:
        _secret = "hidden"

        def __call__(self, x):
            return x

    with pytest.raises(AttributeError):
        impl.peek(Secret())


def test_a_hang_is_cut_and_the_next_call_gets_a_fresh_worker(learner):
    impl, sub = learner
    sub.begin_task(60)
    start = time.monotonic()
    with pytest.raises(WorkerLost, match="did not answer within 3 s"):
        impl.hang()
    assert time.monotonic() - start < 10
    sub.test = "next"
    with pytest.raises(WorkerLost, match="earlier check"):
        impl.double(2)  # a task whose code hung scores 0: its other checks fail at once
    sub.begin_task(60)  # the next task gets a fresh worker
    assert impl.double(2) == 4
    with pytest.raises(WorkerLost, match="died"):
        impl.die()
    sub.begin_task(60)
    assert impl.double(3) == 6


def test_the_sandbox(learner, server):
    if sandbox.mode() != "bwrap":
        pytest.skip("bubblewrap is not available here (install it: apt-get install bubblewrap)")
    impl, _ = learner
    seen = impl.probe()
    assert seen["hidden"] is False and seen["solutions"] is False, "the hidden suites must not be visible"
    assert seen["net"] == "ConnectionRefusedError", "only the sandbox's own empty loopback exists"
    assert seen["pid"] < 10 and seen["ppid"] == 1, "the worker lives in a pid namespace of its own"
    # Its one writable place is its own tmpfs at /tmp: the host's /tmp never sees what it writes there, and
    # the folder the grader hands files through is read-only to it.
    written = {p for p, how in seen["write"].items() if how == "written"}
    assert written == {"/tmp/escaped"}, f"only the sandbox's private /tmp is writable: {seen['write']}"
    assert not os.path.exists("/tmp/escaped") or os.stat("/tmp/escaped").st_mtime < time.time() - 3600


def test_ci_never_takes_the_fallback():
    if os.environ.get("CI"):
        assert sandbox.mode() == "bwrap", "CI must run submissions in bwrap"
    else:
        assert sandbox.mode() in ("bwrap", "fallback")


def test_reference_runs_through_the_same_path_for_gates():
    from bytes2logits.kit.remote import peak_memory, timed

    ref = Submission(module="bytes2logits.lessons.bpe", names=("train_bpe",))
    try:
        impl = RemoteImplementation(ref, "reference")
        (_, merges), seconds = timed(impl.train_bpe, "low lower lowest " * 200, 5)
        assert len(merges) == 5 and seconds > 0
        with peak_memory(impl) as peak:
            impl.train_bpe("abc " * 200_000, 2)
        assert peak.peak > 0 and peak.how in ("sandbox cgroup peak", "worker VmHWM", "tracemalloc")
    finally:
        ref.close()


# ------------------------------------------------------------------------------- the reference is absent

LAB03 = LABS["lab03_bpe_training"]

# Routes to lab 03's reference from a learner's cell: each of them worked against the old source scan or the
# package itself. In the grading sandbox, every one ends at a stub.
REACHES = {
    "import": "from bytes2logits.lessons.bpe import train_bpe as f",
    "module": "import bytes2logits.lessons.bpe as b\nf = b.train_bpe",
    "package": "from bytes2logits.lessons import bpe\nf = bpe.train_bpe",
    "importlib": "import importlib\nf = importlib.import_module('bytes2logits.lessons.bpe').train_bpe",
    "sys_modules": "import sys\nimport bytes2logits.lessons.bpe\n"
                   "f = vars(sys)['mod' + 'ules']['bytes2logits.lessons.bpe'].train_bpe",
    "globals": "from bytes2logits.lessons.bpe import build_vocab\nf = build_vocab.__globals__['train_bpe']",
    "pickle": "import bytes2logits.lessons.bpe\nimport pickle\n"
              "f = pickle.loads(b'cbytes2logits.lessons.bpe\\ntrain_bpe\\n.')",
    "source": "import bytes2logits.lessons.bpe as b\nimport types\nns = {'__name__': 'bytes2logits.lessons.bpe', "
              "'__package__': 'bytes2logits.lessons'}\nexec(open(b.__file__).read(), ns)\nf = ns['train_bpe']",
    "also_answers": "from bytes2logits.lessons.merge_stepper import bpe_trace\n\n\ndef f(text, n):\n"
                    "    steps = bpe_trace(text, n)\n    return {}, [s.winner for s in steps if s.winner]",
}


def _reaches():
    return [(i, src.replace("f = ", f"f_{name} = ").replace("import train_bpe as f", f"import train_bpe as f_{name}")
             .replace("def f(", f"def f_{name}("))
            for i, (name, src) in enumerate(REACHES.items())]


@pytest.fixture(scope="module")
def redacted_worker():
    from bytes2logits.kit.redact import package_dir, redacted_package

    sub = Submission(_reaches(), call_seconds=10, overlays=((redacted_package(LAB03), package_dir()),))
    yield RemoteImplementation(sub, "reaches"), sub
    sub.close()


def test_every_route_reaches_the_reference_in_the_plain_package():
    """The control: without the redacted copy each route does find a working trainer (so the test below shows
    the copy stopping them, not a route that never worked)."""
    sub = Submission(_reaches(), call_seconds=20)
    try:
        impl = RemoteImplementation(sub, "reaches")
        for route in REACHES:
            vocab, merges = getattr(impl, f"f_{route}")("low lower lowest", 3)
            assert len(merges) == 3, route
    finally:
        sub.close()


@pytest.mark.parametrize("route", sorted(REACHES))
def test_every_route_to_the_reference_ends_at_a_stub(redacted_worker, route):
    """The grading sandbox holds a copy of the package whose graded names only say "this is your task"."""
    from bytes2logits.kit.implementation import MissingName

    impl, sub = redacted_worker
    with pytest.raises((NotImplementedError, MissingName)) as info:
        getattr(impl, f"f_{route}")("low lower lowest", 3)
    if info.type is NotImplementedError:
        assert "yours to write" in str(info.value) or "your task" in str(info.value)


def test_earlier_labs_references_stay_usable_in_the_sandbox(redacted_worker):
    """Lab 03's sandbox hides lab 03's tasks, not lab 01's (set-up cells of later labs import earlier ones)."""
    impl, sub = redacted_worker
    sub.cells.append((99, "from bytes2logits.lessons.basic import ByteTokenizer\nbt = ByteTokenizer()"))
    sub.proc.kill()
    assert impl.bt.encode("hé") == [104, 195, 169]


def test_given_functions_run_in_the_worker_with_the_learners_code():
    """A given function that calls a learner's function by name must run where that function is (lab 15's
    dequantize finds the learner's kernels): only NamedTuples and constants of the lab come from the package."""
    from typing import NamedTuple

    class Pair(NamedTuple):
        a: int
        b: int

    def twice(x):  # "given": calls the learner's `step` by name
        return step(x) * 2  # noqa: F821

    source = "def twice(x):\n    return step(x) * 2\n\ndef step(x):\n    return x + 1000\n"
    sub = Submission([(0, source)], call_seconds=3)
    try:
        impl = RemoteImplementation(sub, "test code", given={"twice": twice, "Pair": Pair, "LIMIT": 7})
        assert impl.twice(1) == 2002, "the learner's step ran, in the worker"
        assert impl.Pair is Pair and impl.LIMIT == 7
    finally:
        sub.close()


def test_a_kernel_launcher_whose_parent_is_gone_exits_at_once(tmp_path):
    """nbgrader's kernel goes through ``python -m bytes2logits.kit.sandbox --parent-pid PID``. A launcher whose
    parent died while it started (a worker killed mid-submission) must not go on to start a kernel that
    nothing will ever stop: it exits before the command runs (the command here would leave a file)."""
    import subprocess
    import sys

    marker = tmp_path / "ran"
    cmd = [sys.executable, "-m", "bytes2logits.kit.sandbox", "--parent-pid", "1",
           "--", "touch", str(marker)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr[-2000:]
    assert not marker.exists()


def test_a_sandbox_still_starting_keeps_its_cgroups(tmp_path):
    """A cgroup is empty from its creation until the sandbox's first process joins it. Another grader's clean-up
    of stale cgroups, running at that instant, once removed it, and the sandbox then ran with no cap on its
    processes (a fork bomb could take every pid of the machine). Only cgroups whose owner has exited go."""
    import subprocess

    if sandbox._cgroup_root("pids") is None:
        pytest.skip("needs root and a cgroup-v1 pids hierarchy (as on CI)")
    starting = sandbox._Cgroups(sandbox.Limits())
    dead = subprocess.Popen(["true"])  # a pid that has exited: the owner of an orphaned cgroup
    dead.wait()
    orphan = sandbox._Cgroups(sandbox.Limits(), owner=dead.pid)
    try:
        assert starting.dirs and orphan.dirs
        sandbox._reap_stale_cgroups()
        assert all(d.is_dir() for d in starting.dirs), "the clean-up removed a cgroup its owner is still setting up"
        assert not any(d.exists() for d in orphan.dirs), "an empty cgroup whose owner exited was left behind"
    finally:
        starting.remove()
        orphan.remove()


def test_a_closed_channel_never_writes_to_a_reused_descriptor(tmp_path):
    """Killing a worker closes the grader's ends of its pipes. A later send (an error reply on the way out)
    must fail as PeerGone, not write into whatever file the kernel has since given the same number."""
    from bytes2logits.kit.wire import Channel, PeerGone

    r, w = os.pipe()
    channel = Channel(r, w)
    channel.close()
    innocent = os.open(tmp_path / "innocent", os.O_RDWR | os.O_CREAT)
    os.dup2(innocent, w)  # the file now holds both numbers the channel had
    os.dup2(innocent, r)
    try:
        with pytest.raises(PeerGone):
            channel.send(b"stale")
        with pytest.raises(PeerGone):
            channel.recv()
    finally:
        for fd in {innocent, r, w}:
            os.close(fd)
    assert (tmp_path / "innocent").read_bytes() == b""
