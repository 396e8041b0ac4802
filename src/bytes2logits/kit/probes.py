"""Probes the hidden suites run where the code under test runs: names, small expressions, fences, swaps.

In a trusted grading run ``impl`` is a :class:`~bytes2logits.kit.remote.RemoteImplementation`: the
learner's code runs in a sandboxed worker and the suite holds handles. Some checks must act *there*, not
on the grader's copies: build a test object out of the notebook's own classes, look at what a function
returned before it crosses the pipe, make the package's own version of a task raise while a check runs.
Each helper here does one of those things, and in-process (the reference mode of the suites, or a
learner's own ``pytest``) it does the same thing to the package or the namespace under test.

* :func:`worker_name`: a name as the code under test sees it.
* :func:`worker_eval`: the value of a small expression of the suite's own source (a lambda), evaluated in
  the worker with the builtins the worker copied before any notebook code ran (a notebook can rebind its
  namespace's ``__builtins__`` or the builtins module, not that copy). A function it makes stays in the
  worker; only what calling it returns crosses back.
* :func:`fence`: while a block runs, the package's versions of a task's functions raise in the worker. In a
  grading sandbox they are stubs already (:mod:`bytes2logits.kit.redact`); the fence keeps the same rule
  where a suite runs a worker on the plain package (``pytest tests/hidden --impl``, the suites' own tests).
* :func:`global_replaced`: while a block runs, one global that a notebook function sees is another value.

Nothing here trusts what the worker answers beyond plain data: a probe's result is checked like any other.
"""

from __future__ import annotations

import contextlib
import importlib
import weakref
from collections.abc import Callable, Iterable

import numpy as np

from .implementation import MissingName
from .remote import RemoteImplementation

__all__ = ["fence", "global_replaced", "is_remote", "module_fallback", "worker_eval", "worker_name", "worker_numpy"]


def is_remote(impl) -> bool:
    """Whether ``impl``'s code runs in a sandboxed worker (a trusted grading run)."""
    return isinstance(impl, RemoteImplementation)


def worker_name(impl, name: str, fallback: Callable[[str], object] | None = None):
    """``name`` as the code under test sees it.

    In a worker: the notebook's own object (a handle), so ``np`` or a set-up cell's class is the worker's,
    not the grader's copy; a name the notebook lacks raises :class:`MissingName`. In-process: the attribute
    of ``impl``, else ``fallback(name)`` (the reference namespace holds only the lab's names, not what its
    set-up cell imports).
    """
    sub = getattr(impl, "_submission", None)
    if sub is not None:
        kind, value = sub.lookup(name)
        if kind == "missing":
            raise MissingName(f"your notebook does not define `{name}`: run the set-up cell and keep its names")
        return value
    try:
        return getattr(impl, name)
    except AttributeError:
        if fallback is None:
            raise
    return fallback(name)


def module_fallback(modules: dict[str, str], default_module: str | None = None) -> Callable[[str], object]:
    """A ``fallback`` for :func:`worker_name`: ``modules`` maps a name to the module it stands for (``np`` ->
    ``numpy``); any other name is an attribute of ``default_module``."""
    def find(name: str):
        if name in modules:
            return importlib.import_module(modules[name])
        if default_module is None:
            raise AttributeError(name)
        return getattr(importlib.import_module(default_module), name)

    return find


def worker_numpy(impl, anchor: str | None = None):
    """The worker's ``numpy``: the notebook's ``np``, else the module a function ``anchor`` of the notebook
    sees as ``np`` (its ``__globals__``). In-process: this process's ``numpy``."""
    sub = getattr(impl, "_submission", None)
    if sub is None:
        return np
    kind, value = sub.lookup("np")
    if kind != "missing":
        return value
    if anchor is None:
        raise MissingName("your notebook does not define `np`: run the set-up cell and keep its names")
    kind, glob = sub.ensure().request("getattr", worker_name(impl, anchor), "__globals__")
    return glob["np"]


# one entry per live worker endpoint: (source, anchor) -> the value in that worker
_EVALS: "weakref.WeakKeyDictionary[object, dict]" = weakref.WeakKeyDictionary()


def worker_eval(impl, source: str, anchor: str | None = None):
    """The value of the expression ``source`` (``np`` in scope), evaluated where ``impl``'s code runs.

    ``source`` is the suite's own text, never the learner's. In a worker the value is computed once per
    worker and kept (a lambda stays there; the grader holds a handle). ``np`` is the worker's ``numpy`` (see
    :func:`worker_numpy`; ``anchor`` names a notebook function whose ``np`` to use when the notebook has no
    ``np`` of its own), or None in a lab that uses no NumPy.
    """
    sub = getattr(impl, "_submission", None)
    if sub is None:
        return eval(source, {"np": np})  # noqa: S307 - the suite's own source, never the learner's
    ep = sub.ensure()
    seen = _EVALS.setdefault(ep, {})
    if (source, anchor) not in seen:
        try:
            np_ = worker_numpy(impl, anchor)
        except MissingName:
            np_ = None
        seen[(source, anchor)] = ep.request("suite_eval", source, np_)
    return seen[(source, anchor)]


# -- fences ----------------------------------------------------------------------------------------------------
_TRAP = ("lambda *args, **kwargs: (_ for _ in ()).throw(RuntimeError('this is the course package\\'s own "
         "implementation of the task, not yours: write the function yourself'))")
# (module, dotted name) -> the function object (a method's underlying function for a classmethod/bound one)
_RESOLVE = ("lambda m, path: (lambda f: getattr(f, '__func__', f))(__import__('functools').reduce(getattr, "
            "path.split('.'), __import__(m, fromlist=['_'])))")
_FENCE = ("lambda targets, trap, resolve: [(f, f.__code__, setattr(f, '__code__', trap.__code__))[:2] "
          "for f in [resolve(m, n) for m, n in targets] if hasattr(f, '__code__')]")
_UNFENCE = "lambda saved: [setattr(f, '__code__', c) for f, c in saved] and None"
# Functions of the notebook's namespace that run one of the fenced functions' own code objects (a copy made
# with types.FunctionType keeps the original code, which the fence no longer holds).
_COPIES = ("lambda g, saved: [k for k, v in list(g.__globals__.items()) if type(v) is type(g) and "
           "any(v.__code__ is c or v.__code__ == c for _, c in saved)]")


@contextlib.contextmanager
def fence(impl, targets: Iterable[tuple[str, str]], anchor: str):
    """While the block runs, the package's functions ``targets`` ((module, dotted name) pairs) raise in the
    worker, and a function of the notebook's namespace that carries one of their code objects fails the check.

    ``anchor`` is a function the notebook defines; its ``__globals__`` is the namespace searched for copies.
    Only for a notebook in a worker: in-process the implementation under test *is* the package (reference
    mode) or shares the process with the suite's own oracles (a learner's kernel).
    """
    if not is_remote(impl):
        yield
        return
    ev = lambda source: worker_eval(impl, source, anchor)  # noqa: E731
    saved = ev(_FENCE)(list(targets), ev(_TRAP), ev(_RESOLVE))
    try:
        copies = ev(_COPIES)(getattr(impl, anchor), saved)
        assert not copies, (f"{', '.join(copies)} runs the course package's own code (a copy of its function): "
                            "write the function yourself")
        yield
    finally:
        with contextlib.suppress(Exception):  # a worker that died took its fence with it
            ev(_UNFENCE)(saved)


@contextlib.contextmanager
def global_replaced(impl, function: str, name: str, value):
    """While the block runs, the global ``name`` that ``impl.<function>`` sees is ``value``: in a worker, in
    the notebook's namespace (``value`` may be a handle from :func:`worker_eval`); in-process, in the
    function's module."""
    fn = getattr(impl, function)
    if not is_remote(impl):
        namespace = fn.__globals__
        saved = namespace[name]
        namespace[name] = value
        try:
            yield
        finally:
            namespace[name] = saved
        return
    get = worker_eval(impl, "lambda f, name: f.__globals__[name]", function)
    put = worker_eval(impl, "lambda f, name, value: f.__globals__.__setitem__(name, value)", function)
    saved = get(fn, name)
    put(fn, name, value)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            put(fn, name, saved)
