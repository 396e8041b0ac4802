"""The wire between the trusted grader and a sandboxed worker: framed messages of plain data.

A message is a 4-byte big-endian length and a payload. The payload is a small tagged encoding of exactly
these types: ``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes``, ``list``, ``tuple``,
``dict``, ``set``, ``frozenset``, ``Counter``, ``range``, ``pathlib.Path``, NumPy arrays and scalars of a
numeric or bool dtype, and *handles*: references to an object that stays in the process that owns it.

The decoder is the security boundary. It never calls ``pickle`` or any class named by the peer: it builds
exact builtin types (never a subclass), checks every length against the bytes that are really there, caps
nesting depth and message size, and raises :class:`WireError` naming the offset of anything malformed.
Whatever a hostile worker writes, the grader gets plain values or an error.

The encoder is only a convenience for honest peers: objects that are not exactly one of the types above
(a ``str`` subclass, a NamedTuple, a learner's class) are passed to ``export`` and sent as handles.
"""

from __future__ import annotations

import os
import pathlib
import select
import struct
import time
from collections import Counter

__all__ = ["MAX_MESSAGE", "MAX_VALUES", "Channel", "Handle", "OwnHandle", "WireError", "decode", "encode"]

MAX_MESSAGE = 256 * 1024 * 1024  # bytes in one message; more is a protocol error, not an allocation
MAX_DEPTH = 64
# Values (each int, str, list, dict entry...) one message may decode into. Five bytes on the wire can make a
# Python object of 56 or more, so the byte cap alone let a 100 MB reply of empty lists cost the grader
# 1.5 GB; with this cap a message costs the grader at most a few hundred MB and about a second to decode.
# NumPy arrays count as one value (their bytes are bounded by MAX_MESSAGE).
MAX_VALUES = 2_000_000
_NUMPY_KINDS = "biufc"  # bool, signed, unsigned, float, complex

_PATH_TYPE = type(pathlib.Path())
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")


class WireError(Exception):
    """A message that is not valid on the wire (the text names the offset and what was wrong)."""


class Handle:
    """A reference, as it arrives, to an object owned by the peer: its id, its class's id and name."""

    __slots__ = ("class_id", "id", "type_name")

    def __init__(self, id: int, class_id: int, type_name: str):
        self.id, self.class_id, self.type_name = id, class_id, type_name

    def __repr__(self) -> str:
        return f"Handle({self.id}, {self.type_name!r})"


class OwnHandle:
    """A reference, as it arrives, to an object this side owns (a handle the peer is sending back)."""

    __slots__ = ("id",)

    def __init__(self, id: int):
        self.id = id


def _numpy():
    import numpy

    return numpy


# --------------------------------------------------------------------------------------------- encoding

def _downcast(obj):
    """The plain value inside a subclass of a plain type (read without calling any overridden method)."""
    if isinstance(obj, str):
        return "".join([obj])
    if isinstance(obj, bool):
        return bool(int.__int__(obj))
    if isinstance(obj, int):
        return int.__int__(obj)
    if isinstance(obj, float):
        return float.__float__(obj)
    if isinstance(obj, bytes):
        return bytes.__getitem__(obj, slice(None))
    if isinstance(obj, list):
        return list.copy(obj)
    if isinstance(obj, tuple):
        return tuple.__getitem__(obj, slice(None))
    if isinstance(obj, dict):
        return dict.copy(obj)
    if isinstance(obj, (set, frozenset)):
        return set.copy(obj) if isinstance(obj, set) else frozenset.copy(obj)
    return None


_DOWNCASTABLE = (str, int, float, bytes, list, tuple, dict, set, frozenset)


def encode(obj, export=None, own=None, named=None, downcast=False) -> bytes:
    """Encode ``obj``. ``export(obj) -> (id, class_id, type_name)`` is called for what is not plain data;
    ``own(obj) -> id or None`` recognises a proxy of the peer's object, which is sent back as its id;
    ``named(obj) -> bool`` picks the NamedTuples sent by value (class name, field names, values);
    ``downcast`` sends a subclass of a plain type (a ``str`` subclass, say) as its plain value."""
    out: list[bytes] = []
    _enc(obj, out, (export, own, named, downcast), 0)
    return b"".join(out)


def _enc(obj, out, hooks, depth):
    if depth > MAX_DEPTH:
        raise WireError(f"data nested deeper than {MAX_DEPTH} levels")
    t = type(obj)
    if obj is None:
        out.append(b"N")
    elif t is bool:
        out.append(b"T" if obj else b"F")
    elif t is int:
        if -(1 << 63) <= obj < (1 << 63):
            out.append(b"i" + _I64.pack(obj))
        else:
            raw = str(obj).encode("ascii")
            out.append(b"I" + _U32.pack(len(raw)) + raw)
    elif t is float:
        out.append(b"f" + _F64.pack(obj))
    elif t is str:
        raw = obj.encode("utf-8", "surrogatepass")
        out.append(b"s" + _U32.pack(len(raw)) + raw)
    elif t is bytes:
        out.append(b"b" + _U32.pack(len(obj)) + obj)
    elif t is list or t is tuple or t is set or t is frozenset:
        out.append({list: b"l", tuple: b"t", set: b"S", frozenset: b"Z"}[t] + _U32.pack(len(obj)))
        for item in obj:
            _enc(item, out, hooks, depth + 1)
    elif t is dict or t is Counter:
        out.append((b"d" if t is dict else b"C") + _U32.pack(len(obj)))
        for k, v in obj.items():
            _enc(k, out, hooks, depth + 1)
            _enc(v, out, hooks, depth + 1)
    elif t is complex:
        out.append(b"c" + _F64.pack(obj.real) + _F64.pack(obj.imag))
    elif t is _PATH_TYPE:
        raw = str(obj).encode("utf-8", "surrogateescape")
        out.append(b"p" + _U32.pack(len(raw)) + raw)
    elif t is range:
        out.append(b"r")
        for v in (obj.start, obj.stop, obj.step):
            _enc(v, out, hooks, depth + 1)
    else:
        export, own, named, downcast = hooks
        handle = own(obj) if own is not None else None
        if handle is not None:
            out.append(b"H" + _I64.pack(handle))
            return
        np = _numpy() if "numpy" in t.__module__ else None
        if np is not None and t is np.ndarray and obj.dtype.kind in _NUMPY_KINDS and not obj.dtype.fields:
            arr = np.ascontiguousarray(obj)
            dt = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
            arr = arr.astype(dt, copy=False)
            code = dt.str.encode("ascii")
            data = arr.tobytes()
            out.append(b"a" + bytes([len(code)]) + code + bytes([arr.ndim])
                       + b"".join(_I64.pack(n) for n in arr.shape) + _I64.pack(len(data)) + data)
            return
        if np is not None and isinstance(obj, np.generic) and t.__module__ == "numpy" \
                and obj.dtype.kind in _NUMPY_KINDS:
            dt = obj.dtype.newbyteorder("<") if obj.dtype.byteorder == ">" else obj.dtype
            code = dt.str.encode("ascii")
            data = np.asarray(obj, dtype=dt).tobytes()
            out.append(b"g" + bytes([len(code)]) + code + bytes([len(data)]) + data)
            return
        if named is not None and isinstance(obj, tuple) and named(obj):
            fields = tuple(t._fields)
            raw = t.__name__.encode("utf-8")[:200]
            out.append(b"n" + bytes([len(raw)]) + raw + _U32.pack(len(fields)))
            for f in fields:
                _enc(f, out, hooks, depth + 1)
            values = tuple.__getitem__(obj, slice(None))
            _enc(values, out, hooks, depth + 1)
            return
        if downcast and isinstance(obj, _DOWNCASTABLE):
            _enc(_downcast(obj), out, hooks, depth + 1)
            return
        if export is None:
            raise WireError(f"{t.__name__} is not plain data")
        hid, cid, name = export(obj)
        raw = name.encode("utf-8", "replace")[:200]
        out.append(b"h" + _I64.pack(hid) + _I64.pack(cid) + bytes([len(raw)]) + raw)


# --------------------------------------------------------------------------------------------- decoding

class _Reader:
    __slots__ = ("buf", "named", "pos", "values")

    def __init__(self, buf: bytes):
        self.buf, self.pos, self.named, self.values = buf, 0, None, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise WireError(f"offset {self.pos}: {n} bytes announced, {len(self.buf) - self.pos} left")
        start = self.pos
        self.pos += n
        return self.buf[start:self.pos]

    def u32(self) -> int:
        return _U32.unpack(self.take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self.take(8))[0]

    def count(self, min_item_bytes: int = 1) -> int:
        n = self.u32()
        if n * min_item_bytes > len(self.buf) - self.pos:
            raise WireError(f"offset {self.pos}: {n} items announced, only {len(self.buf) - self.pos} bytes left")
        return n

    def spend(self, n: int) -> None:
        self.values += n
        if self.values > MAX_VALUES:
            raise WireError(f"offset {self.pos}: more than {MAX_VALUES} values in one message")


def decode(buf: bytes, handle=None, own=None, named=None):
    """Decode one value. ``handle(Handle)`` and ``own(OwnHandle)`` turn references into objects;
    ``named(name, fields, values)`` rebuilds a NamedTuple sent by value (else it is an error)."""
    r = _Reader(bytes(buf))
    r.named = named
    value = _dec(r, handle, own, 0)
    if r.pos != len(r.buf):
        raise WireError(f"offset {r.pos}: {len(r.buf) - r.pos} bytes after the value")
    return value


def _hashable(value, r, what):
    try:
        hash(value)
    except TypeError:
        raise WireError(f"offset {r.pos}: unhashable {type(value).__name__} as a {what}") from None
    return value


def _dec(r: _Reader, handle, own, depth):
    if depth > MAX_DEPTH:
        raise WireError(f"offset {r.pos}: data nested deeper than {MAX_DEPTH} levels")
    r.spend(1)
    tag = r.take(1)
    if tag == b"N":
        return None
    if tag == b"T":
        return True
    if tag == b"F":
        return False
    if tag == b"i":
        return r.i64()
    if tag == b"I":
        raw = r.take(r.u32())
        if len(raw) > 4000 or not raw.lstrip(b"-").isdigit():
            raise WireError(f"offset {r.pos}: a big int must be at most 4000 decimal digits")
        return int(raw)
    if tag == b"f":
        return _F64.unpack(r.take(8))[0]
    if tag == b"c":
        return complex(_F64.unpack(r.take(8))[0], _F64.unpack(r.take(8))[0])
    if tag == b"s":
        raw = r.take(r.u32())
        try:
            return raw.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as e:
            raise WireError(f"offset {r.pos}: a str that is not UTF-8 ({e.reason})") from None
    if tag == b"b":
        return r.take(r.u32())
    if tag in (b"l", b"t", b"S", b"Z"):
        n = r.count()
        items = [_dec(r, handle, own, depth + 1) for _ in range(n)]
        if tag == b"l":
            return items
        if tag == b"t":
            return tuple(items)
        for item in items:
            _hashable(item, r, "set item")
        return set(items) if tag == b"S" else frozenset(items)
    if tag in (b"d", b"C"):
        n = r.count(2)
        out = {} if tag == b"d" else Counter()
        for _ in range(n):
            k = _hashable(_dec(r, handle, own, depth + 1), r, "dict key")
            out[k] = _dec(r, handle, own, depth + 1)
        return out
    if tag == b"p":
        raw = r.take(r.u32())
        return pathlib.Path(raw.decode("utf-8", "surrogateescape"))
    if tag == b"r":
        parts = [_dec(r, handle, own, depth + 1) for _ in range(3)]
        if not all(type(p) is int for p in parts) or parts[2] == 0:
            raise WireError(f"offset {r.pos}: a range needs three ints and a non-zero step")
        return range(*parts)
    if tag == b"a":
        np = _numpy()
        dt = _dtype(r)
        ndim = r.take(1)[0]
        shape = tuple(r.i64() for _ in range(ndim))
        nbytes = r.i64()
        if any(n < 0 for n in shape):
            raise WireError(f"offset {r.pos}: negative array dimension in {shape}")
        size = 1
        for n in shape:
            size *= n
        if size * dt.itemsize != nbytes:
            raise WireError(f"offset {r.pos}: an array of shape {shape} and dtype {dt} needs "
                            f"{size * dt.itemsize} bytes, {nbytes} announced")
        data = r.take(nbytes)
        return np.frombuffer(data, dtype=dt).reshape(shape).copy()
    if tag == b"g":
        np = _numpy()
        dt = _dtype(r)
        data = r.take(r.take(1)[0])
        if len(data) != dt.itemsize:
            raise WireError(f"offset {r.pos}: a {dt} scalar needs {dt.itemsize} bytes")
        return np.frombuffer(data, dtype=dt)[0]
    if tag == b"h":
        hid, cid = r.i64(), r.i64()
        name = r.take(r.take(1)[0]).decode("utf-8", "replace")
        if handle is None:
            raise WireError(f"offset {r.pos}: a handle where only plain data is allowed")
        return handle(Handle(hid, cid, name))
    if tag == b"H":
        hid = r.i64()
        if own is None:
            raise WireError(f"offset {r.pos}: a handle where only plain data is allowed")
        return own(OwnHandle(hid))
    if tag == b"n":
        name = r.take(r.take(1)[0]).decode("utf-8", "replace")
        n = r.count()
        fields = tuple(_dec(r, handle, own, depth + 1) for _ in range(n))
        values = _dec(r, handle, own, depth + 1)
        if not all(type(f) is str for f in fields) or type(values) is not tuple or len(values) != n:
            raise WireError(f"offset {r.pos}: a named tuple needs str field names and one value each")
        if r.named is None:
            raise WireError(f"offset {r.pos}: a named tuple {name!r} where none is expected")
        return r.named(name, fields, values)
    raise WireError(f"offset {r.pos - 1}: unknown tag {tag!r}")


def _dtype(r: _Reader):
    np = _numpy()
    code = r.take(r.take(1)[0]).decode("ascii", "replace")
    if len(code) < 3 or code[0] not in "<|" or code[1] not in _NUMPY_KINDS or not code[2:].isdigit():
        raise WireError(f"offset {r.pos}: dtype {code!r} is not a little-endian numeric or bool dtype")
    try:
        dt = np.dtype(code)
    except TypeError:
        raise WireError(f"offset {r.pos}: unknown dtype {code!r}") from None
    if dt.kind not in _NUMPY_KINDS or dt.fields:
        raise WireError(f"offset {r.pos}: dtype {code!r} is not numeric")
    return dt


# --------------------------------------------------------------------------------------------- framing

class PeerGone(WireError):
    """The other end closed the pipe (it exited or was killed)."""


class Timeout(WireError):
    """No complete message arrived before the deadline."""


class Channel:
    """Length-prefixed messages over a pair of pipe file descriptors."""

    def __init__(self, rfd: int, wfd: int, max_message: int = MAX_MESSAGE):
        self.rfd, self.wfd, self.max_message = rfd, wfd, max_message
        os.set_blocking(self.rfd, True)
        os.set_blocking(self.wfd, False)  # writes wait in select, up to the caller's deadline

    def close(self) -> None:
        """Close both descriptors; later sends and reads raise PeerGone instead of reaching a file that has
        since been given the same number."""
        fds, self.rfd, self.wfd = (self.rfd, self.wfd), -1, -1
        for fd in fds:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def send(self, payload: bytes, deadline: float | None = None) -> None:
        """Send one message; with a ``deadline`` (monotonic), a peer that stops reading raises Timeout then.

        Without one, a worker that fills its inbound pipe and stops (it can: the pipe is its) would block
        the grader in ``write`` for good, past every budget."""
        if self.wfd < 0:
            raise PeerGone("the channel is closed")
        data = _U32.pack(len(payload)) + payload
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.wfd, view)
            except BlockingIOError:
                n = 0
            except (BrokenPipeError, OSError) as e:
                raise PeerGone(f"the peer closed the pipe ({e.__class__.__name__})") from None
            view = view[n:]
            if view:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise Timeout("the peer stopped reading before the deadline")
                select.select([], [self.wfd], [], left)

    def _read(self, n: int, deadline: float | None) -> bytes:
        chunks, got = [], 0
        while got < n:
            if self.rfd < 0:
                raise PeerGone("the channel is closed")
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Timeout("no answer before the deadline")
                ready, _, _ = select.select([self.rfd], [], [], left)
                if not ready:
                    raise Timeout("no answer before the deadline")
            try:
                chunk = os.read(self.rfd, min(n - got, 1 << 20))
            except OSError as e:
                raise PeerGone(f"reading failed ({e.__class__.__name__})") from None
            if not chunk:
                raise PeerGone("the peer closed the pipe")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def recv(self, deadline: float | None = None) -> bytes:
        (n,) = _U32.unpack(self._read(4, deadline))
        if n > self.max_message:
            raise WireError(f"a message of {n} bytes announced; the limit is {self.max_message}")
        return self._read(n, deadline)
