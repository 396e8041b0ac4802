"""The sandboxed worker: holds a learner's code and answers the grader's requests about it.

Started by :mod:`bytes2logits.kit.remote` inside the sandbox of :mod:`bytes2logits.kit.sandbox` as
``python -I -m bytes2logits.kit.worker RFD WFD``. It runs the notebook's code cells (the instructor's
locked cells and the submission's own cells, never the autograder cells) in one namespace, then serves
requests on the pipe until the grader closes it: look up a name, call it, read an attribute, iterate.

Nothing here is trusted. The grader treats every answer as data from a stranger; this module only makes
honest code convenient to grade. Output the learner's code prints is kept to a small cap and dropped.
"""

from __future__ import annotations

import builtins
import io
import os
import signal
import sys

from .rpc import Endpoint, Policy, is_namedtuple
from .wire import Channel

OUTPUT_CAP = 64 * 1024

# The builtins as they are before any notebook code runs: a notebook can rebind names in the builtins module
# (``builtins.eval = ...``), but not in this copy, which only the grader's own probe expressions use.
_SUITE_BUILTINS = dict(vars(builtins))
_EVAL = builtins.eval


def suite_eval(source, np_module=None):
    """The value of the grader's own expression ``source`` (``np`` bound to ``np_module``), evaluated here.

    Used by :func:`bytes2logits.kit.probes.worker_eval`: a lambda made here stays here, so a check can look
    at what a learner's function returned before it is copied across the pipe. The builtins it sees are
    :data:`_SUITE_BUILTINS`.
    """
    if type(source) is not str:
        raise TypeError("suite_eval takes the source of an expression")
    return _EVAL(source, {"__builtins__": _SUITE_BUILTINS, "np": np_module})


class _CappedSink(io.TextIOBase):
    """A text stream that keeps the first ``OUTPUT_CAP`` characters and drops the rest."""

    def __init__(self):
        self.kept = []
        self.size = 0

    def writable(self):
        return True

    def write(self, s):
        if type(s) is not str:
            s = str(s)
        if self.size < OUTPUT_CAP:
            self.kept.append(s[: OUTPUT_CAP - self.size])
        self.size += len(s)
        return len(s)

    def flush(self):
        pass


class CellTimeout(BaseException):
    """A cell ran past its time limit while the notebook was loaded."""


def _on_alarm(signum, frame):
    raise CellTimeout()


class Worker:
    def __init__(self, ep: Endpoint):
        self.ep = ep
        # The learner's code gets its own copy of the builtins: rebinding one there (``__builtins__.len =``)
        # changes that copy, not the functions this worker runs on.
        self.ns: dict = {"__name__": "__main__", "__builtins__": dict(builtins.__dict__)}

    # ------------------------------------------------------------------------------------------ loading
    def load_cells(self, cells, cell_seconds):
        """Run ``cells`` (a list of ``(index, source)``) in order; return one status per cell.

        A cell that raises is recorded and the rest go on, as when a learner runs them one by one. A cell
        that runs past ``cell_seconds`` is interrupted. Before each cell a note tells the grader which one
        runs, so that a cell that kills the worker can be skipped when the grader starts a new one.
        """
        try:
            from IPython.core.inputtransformer2 import TransformerManager

            transform = TransformerManager().transform_cell
        except ImportError:  # pragma: no cover - IPython ships with the course extras
            def transform(src):
                return src
        signal.signal(signal.SIGALRM, _on_alarm)
        statuses = []
        for index, source in cells:
            self.ep.note("cell", index)
            sink = _CappedSink()
            old = sys.stdout, sys.stderr
            sys.stdout = sys.stderr = sink
            try:
                code = compile(transform(source), f"<cell {index}>", "exec")
                signal.setitimer(signal.ITIMER_REAL, float(cell_seconds))
                try:
                    exec(code, self.ns)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                statuses.append((index, "ok", ""))
            except CellTimeout:
                statuses.append((index, "timeout", f"the cell ran longer than {cell_seconds} s"))
            except BaseException as e:  # noqa: BLE001 - a broken cell must not stop the others
                statuses.append((index, "error", f"{type(e).__name__}: {str(e)[:200]}"))
            finally:
                sys.stdout, sys.stderr = old
        return statuses

    def load_module(self, module, names):
        """The reference as the implementation (the calibration worker): ``names`` of ``module``, or of the
        first of several modules (a list) that defines each."""
        import importlib

        mods = [importlib.import_module(m) for m in ([module] if isinstance(module, str) else module)]
        for name in names:
            self.ns[name] = next(getattr(m, name) for m in mods if hasattr(m, name))
        return len(names)

    # ---------------------------------------------------------------------------------------- namespace
    def get(self, name):
        """``("v", value)`` for a name the namespace defines, ``("missing", None)`` otherwise."""
        if type(name) is not str:
            raise TypeError("names are str")
        if name not in self.ns:
            return ("missing", None)
        return ("v", self.ns[name])

    def rebuild_named(self, name, fields, values):
        """A NamedTuple from the grader: the namespace's class of that name when its fields match."""
        cls = self.ns.get(name)
        if isinstance(cls, type) and issubclass(cls, tuple) and tuple(getattr(cls, "_fields", ())) == fields:
            return cls(*values)
        return tuple(values)

    def names(self):
        return sorted(k for k in self.ns if type(k) is str and not k.startswith("__"))


def main(argv: list[str]) -> int:
    rfd, wfd = int(argv[0]), int(argv[1])
    # The learner's code gets no grader file descriptor other than its own pipe, and no stdin.
    os.environ.pop("BYTES2LOGITS_HIDDEN_TESTS", None)
    sys.stdin = io.StringIO("")
    sys.stdout = sys.stderr = _CappedSink()
    ep = Endpoint(Channel(rfd, wfd), Policy())
    worker = Worker(ep)
    ep.send_named = is_namedtuple
    ep.rebuild_named = worker.rebuild_named
    ep.extra_ops.update({
        "load_cells": worker.load_cells,
        "load_module": worker.load_module,
        "get": worker.get,
        "names": worker.names,
        "ping": lambda: "pong",
        "suite_eval": suite_eval,
    })
    try:
        ep.serve_forever()
    except Exception:  # noqa: BLE001 - the grader went away or sent garbage: nothing left to do
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
