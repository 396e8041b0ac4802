"""Calls across the wire, in both directions, with proxies for what is not plain data.

Each side of a grading run has one :class:`Endpoint`: the trusted grader, and the sandboxed worker that
holds the learner's code. A call is a request message; while a side waits for its answer it also serves
the peer's requests, so a learner's function can call back a function the hidden test passed in (a
tokenizer's ``decode_bytes``, an ``encode`` callback) and that callback can call the learner's code again.

Objects that are not plain data stay where they are. The peer gets a :class:`Remote` for them: attribute
access, calls, indexing, ``len``, iteration and ``in`` travel as requests. A ``Remote`` compares equal
only to a proxy of the same object (never by asking the owner), so an object whose ``__eq__`` always says
yes proves nothing on the other side.

What a side lets its peer do with its objects is its :class:`Policy`. The worker lets the grader do
anything to the learner's objects; the grader lets the worker only call what the test handed over, read
public attributes, iterate and index (never ``_private`` names, never a module).
"""

from __future__ import annotations

import builtins
import itertools
import time
import types
import weakref

from .wire import Channel, Handle, OwnHandle, Timeout, WireError, decode, encode

__all__ = ["Endpoint", "Policy", "Remote", "RemoteError", "exception_record", "rebuild_exception"]

REPR_LIMIT = 2000


class RemoteError(Exception):
    """The other side raised an exception of a type that is not rebuilt here (the message says which)."""


class Policy:
    """What the peer may do with this side's objects (the worker's default: anything on the list)."""

    ops = frozenset({"getattr", "setattr", "delattr", "call", "callmethod", "getitem", "setitem", "delitem",
                     "len", "iter", "next", "contains", "bool", "repr", "str", "isinstance", "release",
                     "typename"})

    def check_name(self, obj, name: str) -> None:
        if type(name) is not str:
            raise TypeError("attribute names are str")

    def check_result(self, value) -> None:
        pass


class GuardedPolicy(Policy):
    """The grader's rule for its own objects: call, iterate, index and public attributes only."""

    ops = frozenset({"getattr", "call", "callmethod", "getitem", "len", "iter", "next", "contains", "bool",
                     "repr", "str", "release", "typename"})

    def check_name(self, obj, name: str) -> None:
        super().check_name(obj, name)
        if name.startswith("_"):
            raise AttributeError(f"{name!r}: private attributes of the grader's objects are not shared")

    def check_result(self, value) -> None:
        if isinstance(value, types.ModuleType) or isinstance(value, type):
            raise AttributeError("modules and classes of the grader are not shared")


# ----------------------------------------------------------------------------------------- exceptions

_NOT_REBUILT = {"SystemExit", "KeyboardInterrupt", "GeneratorExit"}


def _allowed_exceptions() -> dict[str, type]:
    table = {}
    for name in dir(builtins):
        value = getattr(builtins, name)
        if isinstance(value, type) and issubclass(value, BaseException) and name not in _NOT_REBUILT:
            table[f"builtins.{name}"] = value
    from .. import errors

    for name in dir(errors):
        value = getattr(errors, name)
        if isinstance(value, type) and issubclass(value, Exception):
            table[f"bytes2logits.errors.{name}"] = value
    try:
        import jinja2.exceptions as jx

        for name in dir(jx):
            value = getattr(jx, name)
            if isinstance(value, type) and issubclass(value, Exception):
                table[f"{value.__module__}.{value.__qualname__}"] = value
    except ImportError:  # pragma: no cover - jinja2 is a dependency of the package
        pass
    import json

    table["json.decoder.JSONDecodeError"] = json.JSONDecodeError
    from .implementation import MissingName

    table[f"{MissingName.__module__}.{MissingName.__qualname__}"] = MissingName
    return table


_ALLOWED: dict[str, type] | None = None


def _plain_args(args) -> tuple:
    out = []
    for a in args[:8]:
        if type(a) in (str, int, float, bool, bytes) or a is None:
            out.append(a[:REPR_LIMIT] if type(a) in (str, bytes) else a)
        else:
            out.append(_safe_repr(a))
    return tuple(out)


def _safe_repr(obj) -> str:
    try:
        text = repr(obj)
    except Exception:  # noqa: BLE001 - a learner's __repr__ may raise anything
        text = f"<{type(obj).__name__} object>"
    return text if type(text) is str else f"<{type(obj).__name__} object>"


def exception_record(exc: BaseException, depth: int = 0) -> tuple:
    """What crosses the wire for an exception: class names (its MRO), plain args, message, cause."""
    names = tuple(f"{c.__module__}.{c.__qualname__}" for c in type(exc).__mro__)
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001
        message = ""
    if type(message) is not str:
        message = ""
    cause = exc.__cause__
    cause_rec = exception_record(cause, depth + 1) if cause is not None and depth < 4 else None
    return (names[:32], _plain_args(tuple(exc.args) if type(exc.args) is tuple else ()),
            message[:REPR_LIMIT], cause_rec)


def rebuild_exception(record) -> BaseException:
    """An exception of a type this side knows (builtins, the course's errors, jinja2's), or RemoteError.

    The class is looked up by name in a fixed table; nothing the peer sends can name another class.
    """
    global _ALLOWED
    if _ALLOWED is None:
        _ALLOWED = _allowed_exceptions()
    try:
        names, args, message, cause = record
        names = [n for n in names if type(n) is str]
        args = tuple(args)
        message = message if type(message) is str else ""
    except (TypeError, ValueError):
        return RemoteError("the other side raised an exception that could not be read")
    exc = None
    for name in names[:1]:  # the exception's own class, never a base it claims: anything else is generic
        cls = _ALLOWED.get(name)
        if cls is None:
            continue
        for attempt in (args, (message,)):
            try:
                exc = cls(*attempt)
                break
            except Exception:  # noqa: BLE001 - some exceptions need other arguments; try the next form
                continue
        if exc is not None:
            break
    if exc is None:
        shown = names[0].rsplit(".", 1)[-1] if names else "an exception"
        exc = RemoteError(f"{shown}: {message}" if message else shown)
    if cause is not None:
        exc.__cause__ = rebuild_exception(cause)
    return exc


def is_namedtuple(obj) -> bool:
    """A NamedTuple instance (sent by value, as class name, field names and values)."""
    return isinstance(obj, tuple) and isinstance(getattr(type(obj), "_fields", None), tuple)


# --------------------------------------------------------------------------------------------- proxies

class Remote:
    """A proxy for an object the peer owns."""

    __slots__ = ("__weakref__", "_cid", "_count", "_ep", "_id", "_type")

    def __init__(self, ep: Endpoint, handle: Handle):
        object.__setattr__(self, "_ep", ep)
        object.__setattr__(self, "_id", handle.id)
        object.__setattr__(self, "_cid", handle.class_id)
        object.__setattr__(self, "_type", handle.type_name)
        object.__setattr__(self, "_count", 1)  # how many times the owner sent this handle

    # attribute access
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        ep = self._ep
        if (self._cid, name) in ep.method_names:
            return _Method(self, name)
        kind, value = ep.request("getattr", self, name)
        if kind == "m":
            ep.method_names.add((self._cid, name))
            return _Method(self, name)
        return value

    def __setattr__(self, name, value):
        self._ep.request("setattr", self, name, value)

    def __delattr__(self, name):
        self._ep.request("delattr", self, name)

    def __call__(self, *args, **kwargs):
        return self._ep.request("call", self, args, kwargs)

    # containers
    def __getitem__(self, key):
        return self._ep.request("getitem", self, key)

    def __setitem__(self, key, value):
        self._ep.request("setitem", self, key, value)

    def __delitem__(self, key):
        self._ep.request("delitem", self, key)

    def __len__(self):
        n = self._ep.request("len", self)
        if type(n) is not int or n < 0:
            raise TypeError("__len__ of the remote object did not give a non-negative int")
        return n

    def __contains__(self, item):
        return self._ep.request("contains", self, item) is True

    def __bool__(self):
        return self._ep.request("bool", self) is True

    def __iter__(self):
        it = self._ep.request("iter", self)
        if type(it) is not Remote:
            return iter(it)
        return _RemoteIterator(it)

    def __next__(self):
        return self._ep.request("next", self)

    # identity, never the owner's opinion
    def __eq__(self, other):
        return type(other) is Remote and other._ep is self._ep and other._id == self._id

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash((id(self._ep), self._id))

    def __repr__(self):
        try:
            text = self._ep.request("repr", self)
        except Exception:  # noqa: BLE001 - a repr must not fail a test on its own
            text = None
        return text if type(text) is str else f"<remote {self._type} object>"

    def __str__(self):
        text = self._ep.request("str", self)
        return text if type(text) is str else f"<remote {self._type} object>"

    def __del__(self):
        ep = getattr(self, "_ep", None)
        if ep is not None and not ep.closed:
            ep.pending_release.append((self._id, self._count))


class _Method:
    """``remote.name`` where ``name`` is a method: calling it is one request."""

    __slots__ = ("_name", "_obj")

    def __init__(self, obj: Remote, name: str):
        self._obj, self._name = obj, name

    def __call__(self, *args, **kwargs):
        return self._obj._ep.request("callmethod", self._obj, self._name, args, kwargs)

    def __repr__(self):
        return f"<remote method {self._obj._type}.{self._name}>"


class _RemoteIterator:
    __slots__ = ("_it",)

    def __init__(self, it: Remote):
        self._it = it

    def __iter__(self):
        return self

    def __next__(self):
        return self._it._ep.request("next", self._it)


# -------------------------------------------------------------------------------------------- endpoint

class Endpoint:
    """One side of the wire: its exported objects, its pending calls, the peer's requests it serves."""

    def __init__(self, channel: Channel, policy: Policy | None = None, extra_ops: dict | None = None):
        self.channel = channel
        self.policy = policy or Policy()
        self.extra_ops = dict(extra_ops or {})
        self.exports: dict[int, object] = {}
        self._sent: dict[int, int] = {}  # handle id -> times sent and not yet released by the peer
        self._remotes: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # the peer's handles
        self._export_ids: dict[int, int] = {}  # id(obj) -> handle id, while exported
        self._class_ids: dict[int, int] = {}
        self._types: list[type] = []
        self._next = itertools.count(1)
        self._rids = itertools.count(1)
        self.method_names: set[tuple[int, str]] = set()
        self.pending_release: list[int] = []
        self.closed = False
        self.deadline: float | None = None  # monotonic time after which waiting for the peer fails
        self.deadline_fn = None  # called at each outermost request to set ``deadline``
        self.on_lost = None  # callable(WireError) -> exception to raise, when the peer is lost
        self.lost_error: BaseException | None = None
        self.depth = 0
        # NamedTuples: which ones this side sends as (name, fields, values), and how it rebuilds them.
        self.send_named = None  # callable(obj) -> bool
        self.downcast = False  # send subclasses of plain types as their plain value (the grader's side)
        self.rebuild_named = None  # callable(name, fields, values) -> object
        self.on_note = None  # callable(kind, data) for one-way notes from the peer
        self.before_request = None  # callable() run before each request is sent (lets a paused peer run)
        self.calls = 0

    # encoding with handles
    def _export(self, obj):
        key = id(obj)
        hid = self._export_ids.get(key)
        if hid is None or self.exports.get(hid) is not obj:
            hid = next(self._next)
            self.exports[hid] = obj
            self._export_ids[key] = hid
        self._sent[hid] = self._sent.get(hid, 0) + 1
        t = type(obj)
        cid = self._class_ids.get(id(t))
        if cid is None:
            cid = len(self._types) + 1
            self._class_ids[id(t)] = cid
            self._types.append(t)  # keeps the class alive so its id is never reused
        return hid, cid, getattr(t, "__qualname__", t.__name__)

    def _own(self, obj):
        if type(obj) is Remote and obj._ep is self:
            return obj._id
        return None

    def _handle(self, h: Handle):
        # One proxy per handle, counting how often it arrived, so that a release is never premature.
        r = self._remotes.get(h.id)
        if r is not None:
            object.__setattr__(r, "_count", r._count + 1)
            return r
        r = Remote(self, h)
        self._remotes[h.id] = r
        return r

    def _lookup(self, h: OwnHandle):
        try:
            return self.exports[h.id]
        except KeyError:
            raise WireError(f"handle {h.id} is not (or no longer) an object of this side") from None

    def pack(self, value) -> bytes:
        return encode(value, self._export, self._own, self.send_named, self.downcast)

    def unpack(self, payload: bytes):
        return decode(payload, self._handle, self._lookup, self.rebuild_named)

    # requests
    def request(self, op: str, *args):
        """Send one request and wait for its answer, serving the peer's requests meanwhile.

        At the outermost level, the wait ends at ``deadline_fn()`` (when set); a timeout, a peer that went
        away or a malformed message is passed to ``on_lost``, which returns the exception to raise.
        """
        if self.closed:
            raise self.lost_error or ConnectionError("the other side is gone")
        if self.before_request is not None:
            self.before_request()
        outer = self.depth == 0
        if outer and self.deadline_fn is not None:
            self.deadline = self.deadline_fn()
        self.depth += 1
        try:
            return self._request(op, args)
        except WireError as exc:
            if self.on_lost is None:
                raise
            if self.lost_error is None:
                self.closed = True
                self.lost_error = self.on_lost(exc)
            raise self.lost_error from None
        finally:
            self.depth -= 1

    def _request(self, op, args):
        rid = next(self._rids)
        release, self.pending_release = self.pending_release, []
        self.calls += 1
        self.channel.send(self.pack(("q", rid, op, args, tuple(release))), self.deadline)
        while True:
            msg = self.unpack(self.channel.recv(self.deadline))
            # Decoding is the grader's work on the peer's behalf: it counts against the same deadline.
            if self.deadline is not None and time.monotonic() > self.deadline:
                raise Timeout("the answer arrived, but decoding it ran past the deadline")
            if type(msg) is not tuple or not msg:
                raise WireError("a message must be a tuple")
            kind = msg[0]
            if kind == "r" and len(msg) == 3 and msg[1] == rid:
                return msg[2]
            if kind == "x" and len(msg) == 3 and msg[1] == rid:
                raise rebuild_exception(msg[2])
            if kind == "q" and len(msg) == 5:
                self._serve(msg)
            elif kind == "n" and len(msg) == 3:
                if self.on_note is not None:
                    self.on_note(msg[1], msg[2])
            else:
                raise WireError(f"unexpected message {kind!r} while waiting for answer {rid}")

    def note(self, kind: str, data) -> None:
        self.channel.send(self.pack(("n", kind, data)))

    def serve_forever(self) -> None:
        """Answer the peer's requests until it closes the pipe (the worker's main loop)."""
        while True:
            msg = self.unpack(self.channel.recv(None))
            if type(msg) is tuple and len(msg) == 5 and msg[0] == "q":
                self._serve(msg)
            else:
                raise WireError("the worker expects requests only")

    def _serve(self, msg) -> None:
        _, rid, op, args, release = msg
        for item in release if type(release) is tuple else ():
            if type(item) is not tuple or len(item) != 2:
                continue
            hid, count = item
            left = self._sent.get(hid, 0) - (count if type(count) is int else 0)
            if left > 0:
                self._sent[hid] = left
                continue
            self._sent.pop(hid, None)
            obj = self.exports.pop(hid, None)
            if obj is not None and self._export_ids.get(id(obj)) == hid:
                del self._export_ids[id(obj)]
        try:
            result = self._dispatch(op, args)
            reply = ("r", rid, result)
            payload = self.pack(reply)
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller
            if isinstance(exc, (KeyboardInterrupt, SystemExit)) and not isinstance(exc, StopIteration):
                exc = RuntimeError(f"the code raised {type(exc).__name__}")
            payload = self.pack(("x", rid, exception_record(exc)))
        self.channel.send(payload, self.deadline)

    def _dispatch(self, op, args):
        if type(op) is not str or type(args) is not tuple:
            raise TypeError("malformed request")
        if op in self.extra_ops:
            return self.extra_ops[op](*args)
        if op not in self.policy.ops:
            raise PermissionError(f"operation {op!r} is not allowed on this side's objects")
        p = self.policy
        if op == "release":
            return None
        obj = args[0] if args else None
        if op == "getattr":
            p.check_name(obj, args[1])
            value = getattr(obj, args[1])
            p.check_result(value)
            if isinstance(value, (types.MethodType, types.BuiltinMethodType)) and \
                    getattr(value, "__self__", None) is obj:
                return ("m", None)
            return ("v", value)
        if op == "setattr":
            p.check_name(obj, args[1])
            setattr(obj, args[1], args[2])
            return None
        if op == "delattr":
            p.check_name(obj, args[1])
            delattr(obj, args[1])
            return None
        if op == "call":
            return obj(*args[1], **args[2])
        if op == "callmethod":
            p.check_name(obj, args[1])
            method = getattr(obj, args[1])
            p.check_result(method)
            return method(*args[2], **args[3])
        if op == "getitem":
            return obj[args[1]]
        if op == "setitem":
            obj[args[1]] = args[2]
            return None
        if op == "delitem":
            del obj[args[1]]
            return None
        if op == "len":
            return len(obj)
        if op == "iter":
            return iter(obj)
        if op == "next":
            return next(obj)
        if op == "contains":
            return args[1] in obj
        if op == "bool":
            return bool(obj)
        if op == "repr":
            return _safe_repr(obj)[:REPR_LIMIT]
        if op == "str":
            text = str(obj)
            return text[:REPR_LIMIT] if type(text) is str else _safe_repr(obj)
        if op == "typename":
            return type(obj).__name__
        if op == "isinstance":
            cls = getattr(builtins, args[1], None) if type(args[1]) is str else None
            if not isinstance(cls, type):
                raise TypeError(f"isinstance checks name a builtin type, not {args[1]!r}")
            return isinstance(obj, cls)
        raise PermissionError(f"unknown operation {op!r}")  # pragma: no cover

