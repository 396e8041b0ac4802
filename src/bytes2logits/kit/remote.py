"""The grader's side of a sandboxed worker: start it, load a submission, reach its names through proxies.

:class:`Submission` owns one worker process (sandboxed by :mod:`bytes2logits.kit.sandbox`) that has run
a notebook's code cells. :class:`RemoteImplementation` is what the hidden suites' ``impl`` fixture yields
in a trusted grading run: ``impl.train_bpe(text, 10)`` sends the call to the worker and gets plain data
back (see :mod:`bytes2logits.kit.rpc`). Nothing of the submission ever runs in the grader's process.

When the worker dies (``os._exit``, a signal, out of memory), stops answering (an endless loop, a sleep),
or sends something that is not valid on the wire, the call fails with :class:`WorkerLost`, a failed check
with a message in words, and the next name lookup starts a fresh worker. A cell that killed or hung the
worker while the notebook loaded is skipped in the next one, so it costs that cell's names, not the
notebook.

Gates on speed and memory measure the worker from outside: :func:`timed` is wall-clock time of the call
in the grader, and :func:`peak_memory` reads the worker's resident-set high-water mark from ``/proc``,
which its code cannot rewrite. Both are meant to be compared with the reference run the same way (the
``reference`` fixture of the hidden suites).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
import weakref
from pathlib import Path

from . import sandbox
from .implementation import MissingName
from .rpc import Endpoint, GuardedPolicy, Remote, is_namedtuple
from .wire import Channel, PeerGone, Timeout, WireError

__all__ = [
    "CALL_SECONDS",
    "RemoteImplementation",
    "Submission",
    "WorkerLost",
    "is_instance",
    "peak_memory",
    "race",
    "timed",
]

CALL_SECONDS = 60.0  # one call into the learner's code (a hidden test's whole call, callbacks included)
CELL_SECONDS = 60.0  # one notebook cell while the worker loads the submission
START_SECONDS = 60.0  # starting the interpreter and importing what the cells import


class WorkerLost(AssertionError):
    """The learner's code stopped answering, or the worker running it died (the message says which)."""


class _Process:
    """One sandboxed worker and the grader's endpoint to it."""

    def __init__(self, mounts: sandbox.Mounts, on_lost, limits: sandbox.Limits):
        c_r, p_w = os.pipe()
        p_r, c_w = os.pipe()
        argv = [sys.executable, "-I", "-m", "bytes2logits.kit.worker", str(c_r), str(c_w)]
        try:
            self.box = sandbox.launch(argv, mounts=mounts, pass_fds=(c_r, c_w), limits=limits)
        finally:
            os.close(c_r)
            os.close(c_w)
        self.channel = Channel(p_r, p_w)
        self.ep = Endpoint(self.channel, GuardedPolicy())
        self.ep.on_lost = on_lost
        # The grader's own str subclasses (a test's "sneaky" inputs) reach the learner as plain values:
        # the learner's answers come back as exact types whatever they were given.
        self.ep.downcast = True
        # While a timing gate holds the worker stopped, the first request to it lets it run again.
        self.ep.before_request = self.box.resume
        self.alive = True

    def pid(self) -> int | None:
        return self.box.inner_pid()

    def kill(self) -> None:
        if not self.alive:
            return
        self.alive = False
        self.ep.closed = True
        self.box.kill()
        self.channel.close()


_DEFAULT_LIMITS = sandbox.Limits()


class Submission:
    """A notebook's code loaded in a sandboxed worker, restarted on demand.

    ``cells`` are ``(index, source)`` pairs: the instructor's locked cells and the submission's own code
    cells, in notebook order, without autograder cells. Alternatively ``module``/``names`` load a module's
    objects (how the reference runs through the same path for calibration).

    ``files`` is a folder of the grader's, shown read-only in the worker at the same path: hidden tests
    write the files they hand over there (:attr:`RemoteImplementation.scratch`), and since the worker cannot
    write it, nothing the worker does can redirect those writes. ``overlays`` hide parts of the package (the
    tasks being graded, :mod:`bytes2logits.kit.redact`). ``deadline`` (monotonic) ends the whole
    submission's time: loading, every task and every restart, however many cells it has.
    """

    def __init__(self, cells=None, *, module: str | tuple[str, ...] | None = None, names: tuple[str, ...] = (),
                 files: Path | None = None, limits: sandbox.Limits = _DEFAULT_LIMITS,
                 call_seconds: float = CALL_SECONDS, cell_seconds: float = CELL_SECONDS, label: str = "submission",
                 given: dict | None = None, overlays: tuple[tuple[Path, Path], ...] = (),
                 deadline: float | None = None):
        self.cells = list(cells or [])
        self.module, self.names = module, tuple(names)
        self._own_files = files is None
        self.files = Path(files or tempfile.mkdtemp(prefix="b2l-files-")).resolve()
        self.files.mkdir(parents=True, exist_ok=True)
        self.mounts = sandbox.Mounts(readonly=(self.files,), overlays=tuple(overlays))
        self.limits = limits
        self.call_seconds, self.cell_seconds = call_seconds, cell_seconds
        self.label = label
        self.deadline = deadline  # the whole submission's end (None: no overall budget)
        self.skip: dict[int, str] = {}  # cells that killed or hung a worker, with why
        self.statuses: list[tuple] = []
        self.proc: _Process | None = None
        self.starts = 0
        self.task_deadline: float | None = None  # set by the grader for the task being graded
        self._running_cell: int | None = None
        self._load_deadline: float | None = None
        self._lost_reason = ""
        self.given = dict(given or {})  # the lab's given objects, as the package defines them
        self.test: str | None = None  # the hidden test now running (set by the grader's pytest hook)
        self._lost_test: str | None = None
        self.timeouts = self.crashes = 0
        # A task in which the code hangs or kills the worker scores 0, so its other checks need not run.
        self.max_timeouts, self.max_crashes = 1, 1
        self.guarded = module is None  # a learner's code: stopped while the grader times anything else
        if self.guarded:
            _GUARDED.add(self)

    @property
    def scratch(self) -> Path:
        """The folder hidden tests write files into for the worker to read (read-only in the worker)."""
        return self.files

    def set_overlays(self, overlays: tuple[tuple[Path, Path], ...]) -> None:
        """Grade what follows with ``overlays`` (the task's redacted package): the worker restarts with them."""
        mounts = sandbox.Mounts(readonly=self.mounts.readonly, overlays=tuple(overlays))
        if mounts != self.mounts:
            self.mounts = mounts
            if self.proc is not None:
                self.proc.kill()
                self.proc = None

    # ------------------------------------------------------------------------------------ the process
    def _cap(self, t: float) -> float:
        return t if self.deadline is None else min(t, self.deadline)

    def _deadline(self) -> float:
        d = time.monotonic() + self.call_seconds
        return self._cap(d if self.task_deadline is None else min(d, self.task_deadline))

    def out_of_time(self) -> bool:
        """Whether the whole submission's time budget has run out."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    def _on_lost(self, exc: WireError) -> WorkerLost:
        proc = self.proc
        now = time.monotonic()
        if isinstance(exc, Timeout):
            if self.deadline is not None and now >= self.deadline - 0.05:
                why = ("the submission's time budget ran out while your code was running (an endless loop, or far "
                       "too slow?)")
            elif self.task_deadline is not None and now >= self.task_deadline - 0.05:
                why = "the task's time budget ran out while your code was running (an endless loop, or far too slow?)"
            else:
                why = f"your code did not answer within {self.call_seconds:g} s (an endless loop, or far too slow?)"
        elif isinstance(exc, PeerGone):
            why = ("the worker running your code died (os._exit, a kill, a crash, or more memory than the "
                   "limit allows)")
        else:
            why = f"your code sent something that is not plain data ({exc})"
        self._lost_reason = why
        self._lost_test = self.test
        if isinstance(exc, Timeout):
            self.timeouts += 1
        else:
            self.crashes += 1
        if proc is not None:
            proc.kill()
        return WorkerLost(why)

    def begin_task(self, seconds: float | None) -> None:
        """Start a task's budget: its checks may use ``seconds`` in all, and few hangs or crashes."""
        self.task_deadline = None if seconds is None else self._cap(time.monotonic() + seconds)
        self.timeouts = self.crashes = 0
        self._lost_test = None

    def ensure(self) -> Endpoint:
        """The endpoint of a live, loaded worker (starting one if there is none)."""
        if self.proc is not None and self.proc.alive and not self.proc.ep.closed:
            return self.proc.ep
        if self.proc is not None:
            self.proc.kill()
        if self._lost_test is not None and self._lost_test == self.test:
            raise WorkerLost(self._lost_reason)  # the same check again (a hypothesis retry): no new worker
        if self.timeouts >= self.max_timeouts:
            raise WorkerLost("your code hung in an earlier check of this task; its remaining checks were not run")
        if self.crashes >= self.max_crashes:
            raise WorkerLost("your code killed the worker in an earlier check of this task; its remaining checks "
                             "were not run")
        if self.out_of_time():
            raise WorkerLost("the submission's time budget ran out; the remaining checks were not run")
        if self.task_deadline is not None and time.monotonic() >= self.task_deadline:
            raise WorkerLost("the task's time budget ran out; the remaining checks were not run")
        self.starts += 1
        if self.starts > 20:
            raise WorkerLost("the worker was restarted 20 times; the remaining checks were not run")
        for _ in range(len(self.cells) + 1):
            if self.out_of_time():
                raise WorkerLost("the submission's time budget ran out while its notebook was loading")
            proc = _Process(self.mounts, self._on_lost, self.limits)
            self.proc = proc
            ep = proc.ep
            ep.on_note = self._note
            ep.send_named = is_namedtuple
            ep.rebuild_named = lambda name, fields, values: _rebuild_named(self.given, name, fields, values)
            ep.deadline_fn = lambda: self._cap(time.monotonic() + START_SECONDS)
            counters = (self.timeouts, self.crashes, self._lost_test)
            try:
                try:
                    pong = ep.request("ping")
                except WorkerLost:
                    pong = None
                if pong != "pong":
                    if self.out_of_time():
                        raise WorkerLost("the submission's time budget ran out while its worker started")
                    # Nothing of the submission has run yet: the machinery is broken, not the submission.
                    sandbox.selftest(self.mounts)
                    raise sandbox.SandboxError(f"a sandboxed worker did not start ({self._lost_reason})")
                if self.module:
                    ep.request("load_module", self.module, self.names)
                else:
                    todo = [(i, src) for i, src in self.cells if i not in self.skip]
                    self._load_deadline = self._cap(time.monotonic() + START_SECONDS
                                                    + self.cell_seconds * (len(todo) + 1))
                    ep.deadline_fn = lambda: self._load_deadline
                    self._running_cell = None
                    statuses = ep.request("load_cells", todo, self.cell_seconds)
                    self.statuses = [s for s in statuses if type(s) is tuple]
            except WorkerLost:
                # A cell that breaks the load costs that cell, not the task's budget of hangs and crashes.
                self.timeouts, self.crashes, self._lost_test = counters
                if self.module or self._running_cell is None:
                    raise WorkerLost(f"the worker could not start: {self._lost_reason}") from None
                self.skip[self._running_cell] = self._lost_reason
                continue
            finally:
                self._load_deadline = None
            ep.deadline_fn = self._deadline
            return ep
        raise WorkerLost("the notebook could not be loaded")  # pragma: no cover - every cell skipped

    def _note(self, kind, data):
        if kind == "cell" and type(data) is int:
            self._running_cell = data
            # Each cell gets its own time, counted here: a cell that ignores the worker's own alarm is cut
            # when its time is up, not when the whole load's is.
            if self._load_deadline is not None and self.proc is not None:
                self.proc.ep.deadline = min(self._load_deadline, self._cap(time.monotonic() + self.cell_seconds + 2))

    def lookup(self, name: str):
        ep = self.ensure()
        result = ep.request("get", name)
        if type(result) is not tuple or len(result) != 2:
            raise WorkerLost("the worker answered a name lookup with something else")
        return result

    def pid(self) -> int | None:
        return self.proc.pid() if self.proc is not None and self.proc.alive else None

    def quiesce(self) -> None:
        """Before a timing: kill every process of the worker's sandbox but the worker, and stop the worker
        (it runs again at the grader's next request to it)."""
        if self.proc is not None and self.proc.alive:
            self.proc.box.quiesce()
            self.proc.box.pause()

    def resume(self) -> None:
        if self.proc is not None and self.proc.alive:
            self.proc.box.resume()

    def close(self) -> None:
        _GUARDED.discard(self)
        if self.proc is not None:
            self.proc.kill()
            self.proc = None
        if self._own_files:
            shutil.rmtree(self.files, ignore_errors=True)

    def cell_report(self) -> list[str]:
        """Lines about cells that did not run cleanly (for the learner's feedback)."""
        lines = [f"cell {i} was skipped: {why}" for i, why in sorted(self.skip.items())]
        lines += [f"cell {i}: {detail}" for i, status, detail in self.statuses if status == "timeout"]
        return lines


_GUARDED: weakref.WeakSet = weakref.WeakSet()  # live submissions running a learner's code


class RemoteImplementation:
    """``impl`` for a trusted grading run: the learner's names, reached in the worker.

    Of the names the lab *gives* (the instructor's set-up cell defines them, identically to the package),
    the NamedTuple classes and plain constants are the package's own objects here, so that a test can build
    the lab's records in the grader. Everything else, given functions and classes included, is looked up in
    the worker: a given function may call the learner's code by name (lab 15's ``dequantize`` finds the
    learner's kernels, lab 13's ``GGUFReader`` their section readers), so it must run where that code is.
    """

    def __init__(self, submission: Submission, origin: str, given: dict | None = None):
        self._submission = submission
        self._origin = origin
        self._given = {name: value for name, value in (given or {}).items() if _served_here(value)}
        self._cache: dict[str, tuple[int, object]] = {}

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("_submission", "_origin", "_given", "_cache"):
            raise AttributeError(name)
        if name in self._given:
            return self._given[name]
        sub = self._submission
        ep = sub.ensure()
        hit = self._cache.get(name)
        if hit is not None and hit[0] == id(ep):
            return hit[1]
        kind, value = sub.lookup(name)
        if kind == "missing":
            raise MissingName(f"{self._origin} does not define `{name}`: run the cell that defines it "
                              "and keep the name the task gives")
        self._cache[name] = (id(ep), value)
        return value

    @property
    def scratch(self) -> Path:
        """A folder for the files a test hands over: the grader writes there, the worker reads them at the same
        path (it cannot write there, so it cannot swap a file or plant a link the grader would follow)."""
        return self._submission.files

    def __repr__(self) -> str:
        return f"<implementation from {self._origin}, in a sandboxed worker>"


def _served_here(value) -> bool:
    """Whether a given name is taken from the package in the grader: NamedTuple classes and plain data."""
    if isinstance(value, type):
        return issubclass(value, tuple) and hasattr(value, "_fields")
    return not callable(value)


def _rebuild_named(given: dict, name: str, fields: tuple, values: tuple):
    """A NamedTuple from the worker: the package's class when the lab gives one of that name, else a tuple."""
    cls = given.get(name)
    if isinstance(cls, type) and issubclass(cls, tuple) and tuple(getattr(cls, "_fields", ())) == fields:
        return cls(*values)
    return tuple(values)


# -------------------------------------------------------------------------------------------- helpers

def is_instance(obj, cls: type) -> bool:
    """``isinstance(obj, cls)`` for a builtin ``cls``, asked of the worker when ``obj`` lives there."""
    if type(obj) is Remote:
        return obj._ep.request("isinstance", obj, cls.__name__) is True
    return isinstance(obj, cls)


@contextlib.contextmanager
def quiet_submissions():
    """While a timing runs: no process of any learner's sandbox but its worker exists, and each worker is
    stopped until the grader calls into it. A submission cannot then slow the reference's timing (CPU
    burners paused only during its own calls) nor be timed while helpers it started work for it."""
    subs = list(_GUARDED)
    for sub in subs:
        sub.quiesce()
    try:
        yield
    finally:
        for sub in subs:
            sub.resume()


def timed(fn, *args, **kwargs):
    """``(result, seconds)`` of one call, timed in this process (so a worker cannot report its own time),
    with the submissions' sandboxes quiet (:func:`quiet_submissions`)."""
    with quiet_submissions():
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        return result, time.perf_counter() - start


def race(mine, ref, factor: float, slack: float = 0.01, pairs: int = 5, check=None) -> tuple[float, float, bool]:
    """A speed gate: time ``ref()`` and ``mine()`` alternately, so a busy machine slows both alike.

    Returns ``(best ref, best mine, passed)``: passed when the best of ``mine`` is within
    ``max(factor * best ref, best ref + slack)`` seconds. It stops early (after at least two pairs) once
    that holds; both callables should be warm (their first call not paying set-up costs).

    ``mine`` and ``ref`` may take the pair's number (``mine(i)``) when they accept one argument: a gate that
    hands each pair fresh input leaves a memo of earlier answers nothing to answer from. ``check(i, got,
    expected)`` is called on every pair's two results, so that no timed call of ``mine`` goes unchecked
    (a memo that answers one call instantly and wrongly must not set the best time): it raises
    ``AssertionError`` or returns False for a wrong result, which fails the gate with its own message.
    """
    import inspect

    def takes_index(f) -> bool:
        try:
            return len(inspect.signature(f).parameters) == 1
        except (TypeError, ValueError):
            return False

    indexed = takes_index(mine) and takes_index(ref)
    ref_times, my_times = [], []
    limit = 0.0
    for i in range(pairs):
        expected, seconds = timed(ref, i) if indexed else timed(ref)
        ref_times.append(seconds)
        got, seconds = timed(mine, i) if indexed else timed(mine)
        my_times.append(seconds)
        if check is not None and check(i, got, expected) is False:
            raise AssertionError(f"a timed call (pair {i + 1}) returned a wrong result")
        limit = max(factor * min(ref_times), min(ref_times) + slack)
        if i >= 1 and min(my_times) <= limit:
            break
    return min(ref_times), min(my_times), min(my_times) <= limit


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise OSError(f"no {key} in /proc/{pid}/status")


class _Peak:
    peak: int = 0
    how: str = ""


class _LowWater:
    """The lowest memory usage of a sandbox while a block runs, sampled every millisecond or two."""

    def __init__(self, box):
        import threading

        self.value = 1 << 62
        self._box, self._done = box, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._done.is_set():
            now = self._box._cgroups.memory()
            if now is not None:
                self.value = min(self.value, now[0])
            self._done.wait(0.001)

    def stop(self):
        self._done.set()
        self._thread.join(1)


@contextlib.contextmanager
def peak_memory(impl):
    """Measure the peak memory of what runs inside the block, where ``impl``'s code runs.

    For a worker: the rise of its sandbox's memory cgroup peak above its usage when the block starts (every
    process of the sandbox counts, so work handed to a child is not hidden; where grading runs as root, as
    on CI), else of the worker's resident-set high-water mark (``VmHWM``, reset through ``clear_refs``), read
    by this process from ``/proc``. Other processes of the sandbox are killed first. In-process (the
    reference mode of the suites): ``tracemalloc``'s peak. ``.peak`` is in bytes; ``.how`` names the method.
    """
    result = _Peak()
    sub = getattr(impl, "_submission", None) if isinstance(impl, RemoteImplementation) else None
    if sub is not None:
        sub.ensure()
        pid = sub.pid()
        box = sub.proc.box if sub.proc is not None else None
        if box is not None:
            # Nothing but the worker may hold or make memory when the block starts.
            box.quiesce()
            base = box.memory_mark()
            if base is not None:
                # The sandbox's whole memory (the cgroup's peak): work handed to a child process, which then
                # exits, counts as it does in the worker itself. The rise is taken from the lowest usage seen
                # during the block, not from its start: memory a notebook holds beforehand and frees inside
                # the call (ballast) would otherwise hide as much again.
                low = _LowWater(box)
                try:
                    yield result
                finally:
                    low.stop()
                peak = box.memory_peak()
                result.peak = max(0, (peak or 0) - min(base, low.value))
                result.how = "sandbox cgroup peak"
                return
        if pid is not None and Path(f"/proc/{pid}/clear_refs").exists():
            Path(f"/proc/{pid}/clear_refs").write_text("5")
            base = _status_kib(pid, "VmRSS")
            yield result
            result.peak = max(0, _status_kib(pid, "VmHWM") - base)
            result.how = "worker VmHWM"
            return
    import tracemalloc

    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        yield result
        result.peak = max(0, tracemalloc.get_traced_memory()[1] - base)
        result.how = "tracemalloc"
    finally:
        if started:
            tracemalloc.stop()
