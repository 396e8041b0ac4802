"""Read GGUF files: the single-file format llama.cpp uses for a model's weights, tokenizer and settings.

A GGUF file is laid out in four parts, all little-endian::

    header      b"GGUF", version (u32), tensor count (u64), metadata count (u64)
    metadata    key/value pairs: key = string, then a value-type id (u32) and the value
    tensor info for each tensor: name, number of dims, dims (u64 each, fastest-varying first),
                ggml type id (u32), offset of its data (u64, relative to the data section)
    data        padded to `general.alignment` (default 32); each tensor's bytes start at its offset

A *string* is a u64 byte length followed by UTF-8 bytes; an *array* is an element type (u32), a count (u64)
and the elements (arrays may nest). Every length in the file is checked against the bytes that remain before
anything is allocated, so a corrupt or hostile file raises :class:`GGUFError` naming the key or tensor and the
byte offset, never hangs and never allocates more than the file itself could justify.

Tensor data is never copied: :meth:`GGUFReader.tensor_bytes` returns a read-only NumPy view into a
memory map of the file. Shapes are given both in GGUF order (``dims``, fastest-varying first, as llama.cpp
prints them) and in NumPy order (``shape``, the reverse).

Example::

    >>> r = GGUFReader("model.gguf")                                   # doctest: +SKIP
    >>> r.metadata["general.architecture"]                             # doctest: +SKIP
    'llama'
    >>> r.tensors["token_embd.weight"].shape                           # doctest: +SKIP
    (49152, 576)
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NamedTuple

import numpy as np

from ..errors import GGUFError

__all__ = [
    "Cursor",
    "GGUFError",
    "GGUFReader",
    "GGMLType",
    "GGML_BLOCK_SIZES",
    "TensorInfo",
    "ValueType",
    "RawTensorInfo",
    "format_summary",
    "place_tensors",
    "read_alignment",
    "read_array",
    "read_header",
    "read_metadata",
    "read_string_array",
    "read_tensor_infos",
    "read_value",
    "read_value_type",
    "tensor_array",
    "tensor_nbytes",
]

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_ARRAY_NESTING = 16
# Nested arrays cost 12 bytes in the file but a Python object each in memory: cap how many a file may hold
# (real models have none), so that a small hostile file cannot make the reader build millions of objects.
MAX_NESTED_ARRAYS = 1 << 16


class ValueType(IntEnum):
    """Type ids of metadata values (``gguf_type`` in ggml)."""

    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# struct format and NumPy dtype of each fixed-size value type (little-endian).
_SCALAR = {
    ValueType.UINT8: ("<B", np.dtype("<u1")),
    ValueType.INT8: ("<b", np.dtype("<i1")),
    ValueType.UINT16: ("<H", np.dtype("<u2")),
    ValueType.INT16: ("<h", np.dtype("<i2")),
    ValueType.UINT32: ("<I", np.dtype("<u4")),
    ValueType.INT32: ("<i", np.dtype("<i4")),
    ValueType.FLOAT32: ("<f", np.dtype("<f4")),
    ValueType.BOOL: ("<?", np.dtype("?")),
    ValueType.UINT64: ("<Q", np.dtype("<u8")),
    ValueType.INT64: ("<q", np.dtype("<i8")),
    ValueType.FLOAT64: ("<d", np.dtype("<f8")),
}


class GGMLType(IntEnum):
    """ggml tensor type ids (``enum ggml_type``). Gaps are ids that ggml retired."""

    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q8_1 = 9
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    Q8_K = 15
    IQ2_XXS = 16
    IQ2_XS = 17
    IQ3_XXS = 18
    IQ1_S = 19
    IQ4_NL = 20
    IQ3_S = 21
    IQ2_S = 22
    IQ4_XS = 23
    I8 = 24
    I16 = 25
    I32 = 26
    I64 = 27
    F64 = 28
    IQ1_M = 29
    BF16 = 30
    TQ1_0 = 34
    TQ2_0 = 35
    MXFP4 = 39


# (elements per block, bytes per block) for every type: a row of n elements takes n / block * bytes.
GGML_BLOCK_SIZES: dict[GGMLType, tuple[int, int]] = {
    GGMLType.F32: (1, 4),
    GGMLType.F16: (1, 2),
    GGMLType.Q4_0: (32, 18),
    GGMLType.Q4_1: (32, 20),
    GGMLType.Q5_0: (32, 22),
    GGMLType.Q5_1: (32, 24),
    GGMLType.Q8_0: (32, 34),
    GGMLType.Q8_1: (32, 36),
    GGMLType.Q2_K: (256, 84),
    GGMLType.Q3_K: (256, 110),
    GGMLType.Q4_K: (256, 144),
    GGMLType.Q5_K: (256, 176),
    GGMLType.Q6_K: (256, 210),
    GGMLType.Q8_K: (256, 292),
    GGMLType.IQ2_XXS: (256, 66),
    GGMLType.IQ2_XS: (256, 74),
    GGMLType.IQ3_XXS: (256, 98),
    GGMLType.IQ1_S: (256, 50),
    GGMLType.IQ4_NL: (32, 18),
    GGMLType.IQ3_S: (256, 110),
    GGMLType.IQ2_S: (256, 82),
    GGMLType.IQ4_XS: (256, 136),
    GGMLType.I8: (1, 1),
    GGMLType.I16: (1, 2),
    GGMLType.I32: (1, 4),
    GGMLType.I64: (1, 8),
    GGMLType.F64: (1, 8),
    GGMLType.IQ1_M: (256, 56),
    GGMLType.BF16: (1, 2),
    GGMLType.TQ1_0: (256, 54),
    GGMLType.TQ2_0: (256, 66),
    GGMLType.MXFP4: (32, 17),
}


def tensor_nbytes(ggml_type: int, dims: tuple[int, ...]) -> int:
    """Bytes taken by a tensor of ``ggml_type`` with GGUF-order ``dims`` (fastest-varying first).

    Raises :class:`GGUFError` when the first dimension is not a whole number of the type's blocks.
    """
    block, size = GGML_BLOCK_SIZES[GGMLType(ggml_type)]
    if not dims:
        return size
    if dims[0] % block:
        raise GGUFError(
            f"a {GGMLType(ggml_type).name} tensor needs its first dimension to be a multiple of {block}, "
            f"got dims {list(dims)}"
        )
    n = 1
    for d in dims:
        n *= d
    return n // block * size


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor lives in the file and how to read it.

    ``dims`` is in GGUF order (fastest-varying first: ``[576, 49152]`` for an embedding of 49152 rows of
    576); ``shape`` is the NumPy order (``(49152, 576)``). ``offset`` is the absolute byte offset of the data.
    """

    name: str
    dims: tuple[int, ...]
    ggml_type: GGMLType
    offset: int
    nbytes: int

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape in NumPy (row-major) order: the reverse of ``dims``."""
        return tuple(reversed(self.dims))

    @property
    def n_elements(self) -> int:
        """Number of values in the tensor."""
        n = 1
        for d in self.dims:
            n *= d
        return n


class Cursor:
    """A position in a buffer that reads little-endian values, checking every length first.

    ``buf`` is anything ``struct.unpack_from`` and slicing accept (``bytes``, a ``memoryview``, an
    ``mmap``); ``size`` is its length. ``pos`` is the byte offset of the next read. ``nested`` counts the
    nested arrays read so far (see :data:`MAX_NESTED_ARRAYS`). Every read that would run past the end
    raises :class:`GGUFError` naming *what* was being read and the byte offset, before anything is read
    or allocated::

        >>> c = Cursor(b"\\x03\\x00\\x00\\x00", 4)
        >>> c.u32("version"), c.pos
        (3, 4)
        >>> c.u64("tensor count")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        bytes2logits.errors.GGUFError: tensor count at byte offset 4 needs 8 bytes but only 0 remain ...
    """

    def __init__(self, buf, size: int):
        """Start at byte 0 of ``buf``, which holds ``size`` bytes."""
        self.buf = buf
        self.size = size
        self.pos = 0
        self.nested = 0

    def need(self, n: int, what: str) -> None:
        """Raise :class:`GGUFError` unless ``n`` more bytes remain after :attr:`pos`."""
        if n < 0 or self.pos + n > self.size:
            raise GGUFError(
                f"{what} at byte offset {self.pos} needs {n} bytes but only {self.size - self.pos} remain "
                f"(file is {self.size} bytes: truncated or corrupt)"
            )

    def scalar(self, vtype: ValueType, what: str):
        """Read one fixed-size value of ``vtype`` (an int, float or bool) and move past it."""
        fmt, dt = _SCALAR[vtype]
        self.need(dt.itemsize, what)
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += dt.itemsize
        return v

    def u32(self, what: str) -> int:
        """Read a uint32."""
        return self.scalar(ValueType.UINT32, what)

    def u64(self, what: str) -> int:
        """Read a uint64."""
        return self.scalar(ValueType.UINT64, what)

    def string(self, what: str) -> str:
        """Read a GGUF string: a uint64 byte length, then that many bytes of UTF-8."""
        start = self.pos
        n = self.u64(f"length of {what}")
        self.need(n, f"{what} ({n} bytes)")
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise GGUFError(f"{what} at byte offset {start} is not valid UTF-8 "
                            f"({e.reason} at byte {e.start})") from None


# ----------------------------------------------------------------------------------------------------------
# The four sections, one function each (GGUFReader runs them in order)


def read_header(c: Cursor) -> tuple[int, int, int]:
    """Read the 24-byte header at the start of ``c``: magic, version, tensor count, metadata count.

    Returns ``(version, n_tensors, n_kv)`` and leaves ``c.pos`` at 24. Refuses a wrong magic, a version
    other than 2 or 3 (with a hint for v1 and for big-endian files) and counts that could not fit in the
    file even if every record had its smallest possible size::

        offset 0   b"GGUF"
        offset 4   version        uint32
        offset 8   n_tensors      uint64
        offset 16  n_kv           uint64
    """
    c.need(4, "magic")
    magic = bytes(c.buf[c.pos : c.pos + 4])
    if magic != MAGIC:
        raise GGUFError(f"bad magic {magic!r} at byte offset 0: expected {MAGIC!r} (is this a GGUF file?)")
    c.pos += 4
    version = c.u32("version")
    if version not in SUPPORTED_VERSIONS:
        hint = ""
        if version == 1:
            hint = " (GGUF v1 used 32-bit counts; convert it with a newer llama.cpp)"
        elif version & 0xFFFF == 0 and (version >> 24) in SUPPORTED_VERSIONS:
            hint = " (this looks like a big-endian GGUF; only little-endian files are supported)"
        raise GGUFError(f"unsupported GGUF version {version} at byte offset 4{hint}")
    n_tensors = c.u64("tensor count")
    n_kv = c.u64("metadata count")
    # Smallest possible records: a key/value pair is 8 (key length) + 4 (type) + 1 bytes; a tensor
    # info is 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset). Counts that cannot fit are lies.
    if n_kv * 13 > c.size - c.pos:
        raise GGUFError(f"metadata count {n_kv} at byte offset 16 cannot fit in a {c.size}-byte file")
    if n_tensors * 24 > c.size - c.pos:
        raise GGUFError(f"tensor count {n_tensors} at byte offset 8 cannot fit in a {c.size}-byte file")
    return version, n_tensors, n_kv


def read_value_type(c: Cursor, what: str) -> ValueType:
    """Read a uint32 value-type id; an id that is not a :class:`ValueType` is an error naming its offset."""
    at = c.pos
    t = c.u32(what)
    try:
        return ValueType(t)
    except ValueError:
        raise GGUFError(f"{what}: unknown value type id {t} at byte offset {at}") from None


def read_value(c: Cursor, vtype: ValueType, key: str, depth: int = 0):
    """Read one metadata value of type ``vtype`` for ``key``: a scalar, a string or an array."""
    if vtype == ValueType.STRING:
        return c.string(f"string value of {key!r}")
    if vtype != ValueType.ARRAY:
        return c.scalar(vtype, f"value of {key!r}")
    return read_array(c, key, depth)


def read_array(c: Cursor, key: str, depth: int = 0):
    """Read an array body: element type (uint32), count (uint64), then the elements.

    Arrays of numbers come back as read-only NumPy arrays (one copy out of the file), arrays of strings as
    lists of ``str`` and arrays of arrays as lists (each inner array is again a body: type, count,
    elements). Before anything is allocated, the count is checked against the bytes that remain: every
    element takes at least its fixed size, 8 bytes for a string (its length) or 12 for an array (type and
    count). Nesting deeper than :data:`MAX_ARRAY_NESTING` levels, or more than :data:`MAX_NESTED_ARRAYS`
    nested arrays in one file, is refused too, so a small file cannot make the reader build millions of
    Python objects.
    """
    if depth:
        c.nested += 1
        if c.nested > MAX_NESTED_ARRAYS:
            raise GGUFError(f"more than {MAX_NESTED_ARRAYS} nested arrays (in {key!r} at byte offset {c.pos})")
    if depth >= MAX_ARRAY_NESTING:
        raise GGUFError(f"arrays in {key!r} nest deeper than {MAX_ARRAY_NESTING} levels at byte offset {c.pos}")
    etype = read_value_type(c, f"array element type of {key!r}")
    count_at = c.pos
    n = c.u64(f"array length of {key!r}")
    least = {ValueType.STRING: 8, ValueType.ARRAY: 12}.get(etype) or _SCALAR[etype][1].itemsize
    if n * least > c.size - c.pos:
        raise GGUFError(
            f"array {key!r} claims {n} elements of {etype.name} at byte offset {count_at}, "
            f"more than the {c.size - c.pos} bytes that remain"
        )
    if etype in _SCALAR:
        dt = _SCALAR[etype][1]
        arr = np.frombuffer(c.buf, dtype=dt, count=n, offset=c.pos).copy()
        arr.flags.writeable = False
        c.pos += n * dt.itemsize
        return arr
    if etype == ValueType.STRING:
        return read_string_array(c, key, n)
    return [read_array(c, key, depth + 1) for _ in range(n)]


def read_string_array(c: Cursor, key: str, n: int) -> list[str]:
    """Read ``n`` strings in a row: the hot loop of loading a vocabulary (150k tokens), so kept tight.

    The same checks as :meth:`Cursor.string`, with the cursor's attributes held in local variables.
    """
    buf, size, pos = c.buf, c.size, c.pos
    unpack = struct.Struct("<Q").unpack_from
    out = [""] * n
    for i in range(n):
        if pos + 8 > size:
            c.pos = pos
            c.need(8, f"length of element {i} of {key!r}")
        (length,) = unpack(buf, pos)
        pos += 8
        if pos + length > size:
            c.pos = pos
            c.need(length, f"element {i} of {key!r} ({length} bytes)")
        try:
            out[i] = str(buf[pos : pos + length], "utf-8")  # bytes, mmap and memoryview slices alike
        except UnicodeDecodeError as e:
            raise GGUFError(
                f"element {i} of {key!r} at byte offset {pos - 8} is not valid UTF-8 ({e.reason} at byte {e.start})"
            ) from None
        pos += length
    c.pos = pos
    return out


def read_metadata(c: Cursor, n_kv: int) -> tuple[dict[str, Any], dict[str, ValueType]]:
    """Read ``n_kv`` key/value pairs: ``(metadata, value_types)``, both in file order.

    Each pair is a string key, a uint32 value type and the value (:func:`read_value`). A key that appears
    twice is an error naming its offset.
    """
    metadata: dict[str, Any] = {}
    value_types: dict[str, ValueType] = {}
    for i in range(n_kv):
        key_offset = c.pos
        key = c.string(f"key of metadata entry {i}")
        if key in metadata:
            raise GGUFError(f"duplicate metadata key {key!r} at byte offset {key_offset}")
        vtype = read_value_type(c, f"value type of {key!r}")
        value_types[key] = vtype
        metadata[key] = read_value(c, vtype, key)
    return metadata, value_types


def read_alignment(metadata: Mapping[str, Any], value_types: Mapping[str, ValueType]) -> int:
    """``general.alignment`` (a power of two stored as uint32), or the default of 32 when it is absent."""
    if "general.alignment" not in metadata:
        return DEFAULT_ALIGNMENT
    a = metadata["general.alignment"]
    if value_types["general.alignment"] != ValueType.UINT32 or a <= 0 or a & (a - 1):
        raise GGUFError(f"general.alignment must be a power of two stored as uint32, got {a!r}")
    return a


class RawTensorInfo(NamedTuple):
    """One tensor info record as stored: ``offset`` is relative to the data section; ``at`` is where the
    record itself starts in the file (for error messages)."""

    name: str
    dims: tuple[int, ...]
    ggml_type: GGMLType
    offset: int
    nbytes: int
    at: int


def read_tensor_infos(c: Cursor, n_tensors: int, alignment: int) -> list[RawTensorInfo]:
    """Read ``n_tensors`` tensor info records::

        name        string
        n_dims      uint32              1 .. MAX_DIMS
        dims        uint64 x n_dims     fastest-varying first, none zero
        type        uint32              a GGMLType
        offset      uint64              relative to the data section, a multiple of the alignment

    and compute each tensor's byte size from its type and dims (:func:`tensor_nbytes`, which also checks
    that a row is a whole number of blocks). Every error names the tensor and a byte offset.
    """
    infos = []
    for i in range(n_tensors):
        at = c.pos
        name = c.string(f"name of tensor {i}")
        n_dims = c.u32(f"dimension count of tensor {name!r}")
        if not 1 <= n_dims <= MAX_DIMS:
            raise GGUFError(
                f"tensor {name!r} (info at byte offset {at}) has {n_dims} dimensions; ggml supports 1 to {MAX_DIMS}"
            )
        dims = tuple(c.u64(f"dimension {d} of tensor {name!r}") for d in range(n_dims))
        if any(d == 0 for d in dims):
            raise GGUFError(f"tensor {name!r} (info at byte offset {at}) has a zero dimension: {list(dims)}")
        type_at = c.pos
        type_id = c.u32(f"type of tensor {name!r}")
        try:
            ggml_type = GGMLType(type_id)
        except ValueError:
            raise GGUFError(f"tensor {name!r} has unknown ggml type id {type_id} "
                            f"at byte offset {type_at}") from None
        rel_at = c.pos
        rel = c.u64(f"data offset of tensor {name!r}")
        if rel % alignment:
            raise GGUFError(f"tensor {name!r} data offset {rel} at byte offset {rel_at} is not a multiple of "
                            f"the alignment {alignment}")
        try:
            nbytes = tensor_nbytes(ggml_type, dims)
        except GGUFError as e:
            raise GGUFError(f"tensor {name!r}: {e}") from None
        infos.append(RawTensorInfo(name, dims, ggml_type, rel, nbytes, at))
    return infos


def place_tensors(infos: list[RawTensorInfo], data_offset: int, size: int) -> dict[str, TensorInfo]:
    """Turn relative offsets into absolute ones and check the data: ``{name: TensorInfo}`` in file order.

    Names must be unique, every tensor's bytes must lie inside the ``size``-byte file, and no two
    tensors may overlap (checked on the tensors sorted by offset, so it takes n log n, not n²).
    """
    tensors: dict[str, TensorInfo] = {}
    for name, dims, ggml_type, rel, nbytes, at in infos:
        if name in tensors:
            raise GGUFError(f"duplicate tensor name {name!r} (info at byte offset {at})")
        start = data_offset + rel
        if start + nbytes > size:
            raise GGUFError(
                f"tensor {name!r} data [{start}, {start + nbytes}) lies outside the {size}-byte file "
                f"(info at byte offset {at})"
            )
        tensors[name] = TensorInfo(name, dims, ggml_type, start, nbytes)
    spans = sorted(tensors.values(), key=lambda t: t.offset)
    for a, b in zip(spans, spans[1:]):
        if b.offset < a.offset + a.nbytes:
            raise GGUFError(
                f"tensor {b.name!r} data at byte offset {b.offset} overlaps tensor {a.name!r} "
                f"[{a.offset}, {a.offset + a.nbytes})"
            )
    return tensors


# NumPy dtype of each unquantized tensor type; every other type is read as rows of raw blocks.
_TENSOR_DTYPES = {
    GGMLType.F32: np.dtype("<f4"), GGMLType.F16: np.dtype("<f2"), GGMLType.BF16: np.dtype("<u2"),
    GGMLType.F64: np.dtype("<f8"), GGMLType.I8: np.dtype("<i1"), GGMLType.I16: np.dtype("<i2"),
    GGMLType.I32: np.dtype("<i4"), GGMLType.I64: np.dtype("<i8"),
}


def tensor_array(buf, info: TensorInfo, raw: bool = False) -> np.ndarray:
    """A read-only view of one tensor's data inside ``buf`` (the file's bytes), never a copy.

    With ``raw=True``: the ``info.nbytes`` bytes as a flat uint8 array. Otherwise unquantized types
    (F32, F16, I8 ...) come back with their dtype and NumPy shape (``info.shape``); BF16 as uint16 bit
    patterns; quantized types as uint8 rows of blocks, shape ``(rows, bytes_per_row)``, ready for
    :func:`bytes2logits.engine.quants.dequantize`. The view keeps ``buf`` alive, and because ``buf`` is
    a read-only memory map, the operating system reads a tensor's pages only when they are touched.
    """
    if raw:
        return np.frombuffer(buf, dtype=np.uint8, count=info.nbytes, offset=info.offset)
    dt = _TENSOR_DTYPES.get(info.ggml_type)
    if dt is None:
        rows = info.n_elements // info.dims[0]
        view = np.frombuffer(buf, dtype=np.uint8, count=info.nbytes, offset=info.offset)
        return view.reshape(rows, info.nbytes // rows)
    return np.frombuffer(buf, dtype=dt, count=info.n_elements, offset=info.offset).reshape(info.shape)


class GGUFReader:
    """Parse a GGUF file (versions 2 and 3) and give access to its metadata and tensors.

    Attributes:
        path: the file that was read.
        version: the GGUF version (2 or 3).
        metadata: ``{key: value}`` in file order. Strings are ``str``, integers ``int``, floats ``float``,
            booleans ``bool``; arrays of numbers are read-only NumPy arrays, arrays of strings are lists of
            ``str``, and arrays of arrays are lists.
        value_types: ``{key: ValueType}`` of each metadata value (``ARRAY`` for arrays).
        tensors: ``{name: TensorInfo}`` in file order.
        alignment: the data alignment (``general.alignment``, default 32).
        data_offset: absolute byte offset where the tensor data section starts.

    Use it as a context manager, or call :meth:`close`, to release the memory map.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 24:
                raise GGUFError(f"{self.path}: file is {size} bytes, too short for a GGUF header (24 bytes)")
            self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.size = size
        try:
            self._parse()
        except GGUFError as e:
            self.close()
            raise GGUFError(f"{self.path}: {e}") from None
        except BaseException:
            self.close()
            raise

    # -- parsing -------------------------------------------------------------------------------------------
    def _parse(self) -> None:
        """Read the file's four sections in order, checking each against the file size as it goes.

        A GGUF file is: a header (magic, version, tensor and metadata counts), the metadata key/value
        pairs, one info record per tensor (name, shape, type, offset), then, after padding to the
        alignment, the tensor data. Every error names the byte offset where the bad field starts.
        """
        c = Cursor(self._mm, self.size)
        self.version, n_tensors, n_kv = read_header(c)
        self.metadata, self.value_types = read_metadata(c, n_kv)
        self.alignment = read_alignment(self.metadata, self.value_types)
        infos = read_tensor_infos(c, n_tensors, self.alignment)
        self.data_offset = -(-c.pos // self.alignment) * self.alignment
        self.tensors = place_tensors(infos, self.data_offset, self.size)

    # -- access --------------------------------------------------------------------------------------------
    def get(self, key: str, default: Any = None) -> Any:
        """The metadata value for ``key``, or ``default`` when the file does not have it."""
        return self.metadata.get(key, default)

    def require(self, key: str, *types: type) -> Any:
        """The metadata value for ``key``; a :class:`GGUFError` naming the key if it is missing or mistyped."""
        if key not in self.metadata:
            raise GGUFError(f"{self.path}: required metadata key {key!r} is missing")
        value = self.metadata[key]
        if types and not isinstance(value, types):
            raise GGUFError(
                f"{self.path}: metadata key {key!r} should be {' or '.join(t.__name__ for t in types)}, "
                f"got {type(value).__name__}"
            )
        return value

    def tensor_bytes(self, name: str) -> np.ndarray:
        """The raw bytes of tensor ``name`` as a read-only uint8 view into the file (no copy)."""
        return tensor_array(self._mm, self._info(name), raw=True)

    def tensor(self, name: str) -> np.ndarray:
        """Tensor ``name`` as a read-only view with its NumPy shape, for unquantized types (F32, F16, I8 …).

        BF16 comes back as uint16 bit patterns; quantized types come back as uint8 rows of blocks of shape
        ``(rows, bytes_per_row)``. Use :func:`bytes2logits.engine.quants.dequantize` to get float32 values.
        """
        return tensor_array(self._mm, self._info(name))

    def _info(self, name: str) -> TensorInfo:
        try:
            return self.tensors[name]
        except KeyError:
            raise KeyError(f"{self.path} has no tensor {name!r} ({len(self.tensors)} tensors)") from None

    def __iter__(self) -> Iterator[TensorInfo]:
        return iter(self.tensors.values())

    def close(self) -> None:
        """Release the memory map. Views returned earlier keep it alive until they are gone."""
        mm = getattr(self, "_mm", None)
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                pass  # NumPy views still point into it; the map closes when they are collected.

    def __enter__(self) -> "GGUFReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GGUFReader({self.path!r}: v{self.version}, {len(self.metadata)} keys, {len(self.tensors)} tensors)"


def _printable(text: str) -> str:
    """``text`` with control characters escaped, so a hostile key or name cannot drive the terminal."""
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def _short(value: Any, width: int = 70) -> str:
    """A one-line rendering of a metadata value: long arrays and strings are summarised."""
    if isinstance(value, np.ndarray):
        head = ", ".join(repr(v) for v in value[:5].tolist())
        more = f", … ({len(value)} {value.dtype.name})" if len(value) > 5 else ""
        return f"[{head}{more}]"
    if isinstance(value, list):
        head = ", ".join(_short(v, 20) for v in value[:5])
        more = f", … ({len(value)} items)" if len(value) > 5 else ""
        return f"[{head}{more}]"
    text = repr(value)
    if len(text) > width:
        text = text[: width - 1] + f"… ({len(value)} chars)" if isinstance(value, str) else text[:width] + "…"
    return text


def format_summary(reader: GGUFReader) -> str:
    """The text ``python -m bytes2logits inspect`` prints: metadata, then a table of tensors."""
    lines = [f"{reader.path}", f"GGUF v{reader.version}, {reader.size:,} bytes, alignment {reader.alignment}", ""]
    lines.append(f"metadata ({len(reader.metadata)} keys)")
    keys = {k: _printable(k) for k in reader.metadata}
    width = max((len(k) for k in keys.values()), default=0)
    for key, value in reader.metadata.items():
        lines.append(f"  {keys[key]:<{width}}  {_short(value)}")
    lines.append("")
    lines.append(f"tensors ({len(reader.tensors)})")
    names = {t.name: _printable(t.name) for t in reader}
    nw = max((len(n) for n in names.values()), default=4)
    lines.append(f"  {'name':<{nw}}  {'type':<7}  {'shape':<16}  {'bytes':>12}")
    total = 0
    for t in reader:
        total += t.nbytes
        lines.append(f"  {names[t.name]:<{nw}}  {t.ggml_type.name:<7}  {str(list(t.shape)):<16}  {t.nbytes:>12,}")
    lines.append(f"  {'total':<{nw}}  {'':<7}  {'':<16}  {total:>12,}")
    return "\n".join(lines)
