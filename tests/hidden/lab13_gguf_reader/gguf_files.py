"""Shared pieces of the lab 13 suites (not a test file; the suites load it by path).

* The real files: SmolLM2's model and llama.cpp's vocab-only GGUFs, and what gguf-py (``gguf.GGUFReader``,
  the reference nobody here wrote) reads from each. gguf-py builds a small NumPy array for every value, which
  takes tens of seconds on a 262k-token vocabulary, so its reading of each real file is computed once and
  kept in the asset cache (``computed/lab13-gguf-py-*.json``): the header, every key with its offset, value
  types and a digest of its value, every tensor record, and a sha256 of each tensor's bytes.
* A small file made from SmolLM2 (its metadata with the arrays cut short, five of its tensors cut to a few
  rows), written by gguf-py's ``GGUFWriter``, for the mutation loops.
* ``struct`` builders of hostile bytes, placed field by field.
* Calls that run where the implementation under test runs. In a trusted grading run that is a sandboxed
  worker, and only plain data crosses back (see ``bytes2logits.kit.remote``). So a real file is
  memory-mapped *in the worker* (:func:`open_map`), the classes the set-up cell gives are the worker's own
  (:func:`where`), and :func:`boxed` makes a call whose result stays in the worker, so that time and memory
  gates measure the reader rather than the pipe.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import signal
import struct
import tempfile
import threading
from importlib.metadata import version as _dist_version
from pathlib import Path
from unittest import mock

import gguf
import numpy as np

from bytes2logits import assets
from bytes2logits.errors import GGUFError
from bytes2logits.kit.probes import module_fallback, worker_name
from bytes2logits.kit.rpc import Remote

REFERENCE = importlib.import_module("bytes2logits.engine.gguf")  # the package reference, in this process
MODELS = assets.path("llama-cpp-models").resolve()
SMOLLM2 = assets.path("smollm2").resolve()
VOCAB_FILES = sorted(MODELS.glob("ggml-vocab-*.gguf"))
REAL_FILES = [SMOLLM2, *VOCAB_FILES]
# The biggest vocabulary on disk (gemma-4's 262 144 tokens; Qwen's 151 936 come next).
BIGGEST_VOCAB = max(VOCAB_FILES, key=lambda p: p.stat().st_size)


def file_version(path: Path) -> int:
    """The version field of a file (bytes 4..8), read directly."""
    with open(path, "rb") as f:
        head = f.read(8)
    return struct.unpack_from("<I", head, 4)[0]


V2_FILES = [p for p in REAL_FILES if file_version(p) == 2]  # llama.cpp still ships one GGUF v2 vocabulary

STRING, ARRAY = int(gguf.GGUFValueType.STRING), int(gguf.GGUFValueType.ARRAY)
SCALAR_DTYPES = {int(t): np.dtype(d) for t, d in gguf.GGUFReader.gguf_scalar_to_np.items()}  # gguf-py's table


# -------------------------------------------------------------------------------- where the code runs

_FALLBACK = module_fallback({"np": "numpy", "os": "os", "mmap": "mmap"}, "bytes2logits.engine.gguf")


def where(impl, name: str):
    """``name`` as the code under test sees it: the worker's own object in a trusted run (the set-up cell's
    classes and modules, not the grader's copies), else the namespace's object, else what the set-up cell
    imports (the reference namespace holds only the lab's names)."""
    return worker_name(impl, name, _FALLBACK)


def open_map(impl, path: Path):
    """A read-only memory map of ``path``, opened where the code under test runs (no byte crosses the pipe)."""
    os_, mmap_ = where(impl, "os"), where(impl, "mmap")
    fd = os_.open(str(path), os_.O_RDONLY)
    try:
        return mmap_.mmap(fd, 0, access=mmap_.ACCESS_READ)
    finally:
        os_.close(fd)


def object_array(impl, items):
    """A 1-D NumPy object array of ``items``, built where the code under test runs."""
    np_ = where(impl, "np")
    out = np_.empty(len(items), dtype="O")
    for i, item in enumerate(items):
        out[i] = item
    return out


def boxed(impl, fn, n_args: int):
    """``fn`` as a NumPy ufunc over object arrays, made where the code under test runs: its results stay
    there, in an object array, instead of crossing the pipe."""
    return where(impl, "np").frompyfunc(fn, n_args, 1)


# The expression of a read-only memory map of the file ``path``, for the suite's own lambdas below.
_MAP = ("(lambda os, mmap: (lambda fd: (mmap.mmap(fd, 0, access=mmap.ACCESS_READ), os.close(fd))[0])"
        "(os.open(path, os.O_RDONLY)))(__import__('os'), __import__('mmap'))")
# Speed gates' timed calls, evaluated where the code under test runs (the suite's source, not the learner's):
# everything from opening the file on happens inside the one timed call, so the code under test learns of
# the file only once its time runs, and the results stay there, in a one-item object array, so that the
# pipe's time is not counted. Afterwards (untimed) the suite fetches them and checks them.
TIMED_METADATA = ("lambda Cursor, read_header, read_metadata, path, size: (lambda c: (lambda out: "
                  "(out.__setitem__(0, (read_metadata(c, read_header(c)[2]), c.pos)), out)[1])"
                  f"(np.empty(1, dtype=object)))(Cursor({_MAP}, size))")
TIMED_PLACEMENT = ("lambda Cursor, read_tensor_infos, place_tensors, path, n, size: (lambda c: (setattr(c, 'pos', 24), "
                   "(lambda infos: (lambda end: (lambda out: (out.__setitem__(0, (infos, place_tensors(infos, "
                   "-(-end // 32) * 32, size), end)), out)[1])(np.empty(1, dtype=object)))(c.pos))"
                   f"(read_tensor_infos(c, n, 32)))[1])(Cursor({_MAP}, size))")


def timed_call(impl, source: str):
    """One of the timed calls above, made where ``impl``'s code runs."""
    from bytes2logits.kit.probes import worker_eval

    return worker_eval(impl, source)


def file_for(x, data: bytes, name: str, fallback: Path) -> Path:
    """``data`` written where ``x``'s code can read it: in its worker's scratch folder (each worker sees only
    its own), or in-process in ``fallback``."""
    scratch = getattr(x, "scratch", None)
    folder = Path(tempfile.mkdtemp(prefix="lab13-", dir=scratch or fallback))
    path = folder / name
    path.write_bytes(data)
    return path


def reference_seconds(reference, path: Path) -> float:
    """Seconds the reference's ``GGUFReader(path)`` takes where the reference runs (its own worker in a
    trusted run, which holds only the lab's names: the reader's handle is all that crosses back)."""
    from bytes2logits.kit.remote import timed

    reader, seconds = timed(where(reference, "GGUFReader"), str(path))
    reader.close()
    return seconds


def enum_parts(value) -> tuple[str, str, int] | None:
    """(class name, member name, value) of an enum member on either side, or None for anything else."""
    tname = object.__getattribute__(value, "_type") if type(value) is Remote else type(value).__name__
    if tname not in ("ValueType", "GGMLType"):
        return None
    return tname, value.name, value.value


class Hang(AssertionError):
    """The code under test ran past the time a tiny file could need."""


@contextlib.contextmanager
def bounded(impl, seconds: float, what: str):
    """Every call into the code under test inside the block must answer within ``seconds``.

    In a trusted run each call into the worker already has a deadline (``Submission.call_seconds``, 60 s by
    default; a call past it kills the worker and fails the check, and the task then scores 0): the block
    lowers it. In-process (a learner's own kernel) an interval timer interrupts the call instead.
    """
    sub = getattr(impl, "_submission", None)
    if sub is not None:
        old = sub.call_seconds
        sub.call_seconds = min(old, seconds)
        try:
            yield
        finally:
            sub.call_seconds = old
        return
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(*_):
        raise Hang(f"{what}: your code did not finish within {seconds:g} s (a loop that never ends?)")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ----------------------------------------------------------------------------- the learner's sections

def sections(impl, buf, size: int) -> dict:
    """Run the learner's Cursor, read_header and read_metadata on a buffer, as ``GGUFReader`` does; return
    what each gave and where the cursor stood after it."""
    c = impl.Cursor(buf, size)
    out = {"header": impl.read_header(c), "after_header": c.pos}
    out["metadata"], out["value_types"] = impl.read_metadata(c, out["header"][2])
    out["after_metadata"] = c.pos
    return out


def raw_infos(infos) -> list:
    """Tensor info records as RawTensorInfo again (they cross the pipe as plain tuples), so that the learner's
    place_tensors gets the lab's NamedTuple whichever way it reads them."""
    from bytes2logits.engine.gguf import RawTensorInfo

    return [RawTensorInfo(*info) for info in infos]


def tensor_records(tensors) -> list[tuple]:
    """``{name: TensorInfo}`` from the learner as plain ``(key, name, dims, type id, offset, nbytes)`` tuples."""
    assert type(tensors) is dict, "place_tensors must return a dict {name: TensorInfo}"
    out = []
    for key, t in tensors.items():
        parts = enum_parts(t.ggml_type)
        assert parts is not None and parts[0] == "GGMLType", "a TensorInfo's ggml_type must be a GGMLType member"
        out.append((key, t.name, tuple(t.dims), parts[2], t.offset, t.nbytes))
    return out


def reference_sections(data: bytes) -> dict | None:
    """The package reference's reading of ``data`` in this process, in the shape of :func:`sections`; None
    when it refuses the file."""
    try:
        return sections(REFERENCE, data, len(data))
    except GGUFError:
        return None


def mutations(data: bytes, lo: int, hi: int, n: int, seed: int):
    """``n`` seeded mutations of ``data`` inside ``[lo, hi)``: ``(description, bytes)``. Bit flips, bytes set
    to 0x00 / 0xFF / anything, a u64 overwritten with a power of two (a length or count that lies), a byte
    cut out or doubled (every later field shifts), and truncations."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        out = bytearray(data)
        at = int(rng.integers(lo, hi))
        kind = i % 6
        if kind == 0:
            bit = int(rng.integers(0, 8))
            out[at] ^= 1 << bit
            what = f"bit {bit} of byte {at} flipped"
        elif kind == 1:
            out[at] = int(rng.choice([0x00, 0xFF, int(rng.integers(0, 256))]))
            what = f"byte {at} set to {out[at]:#04x}"
        elif kind == 2:
            value = min((1 << int(rng.integers(8, 65))) - int(rng.integers(0, 2)), 2**64 - 1)
            out[at : at + 8] = struct.pack("<Q", value)[: len(out) - at]
            what = f"the 8 bytes at {at} set to {value}"
        elif kind == 3:
            del out[at]
            what = f"byte {at} cut out"
        elif kind == 4:
            out.insert(at, out[at])
            what = f"byte {at} doubled"
        else:
            del out[at:]
            what = f"cut to {at} bytes"
        yield what, bytes(out)


# --------------------------------------------------------------------------------- values, compared

def digest(types: list[int], value) -> str:
    """A digest of a metadata value in the form the lab specifies for its gguf-py value types: ``str``;
    ``int`` / ``float`` / ``bool``; a 1-D NumPy array of the element dtype; a list of ``str``. A value of
    another form gets a digest that names its type (and so never matches)."""
    main = types[0]
    if main == ARRAY:
        if not isinstance(value, (list, np.ndarray)):
            return f"not an array: {type(value).__name__}"
        if len(types) == 1:  # gguf-py cannot tell an empty array's element type
            return "empty array" if len(value) == 0 else f"{len(value)} elements"
        sub = types[1]
        if sub == STRING:
            if type(value) is not list or not all(type(s) is str for s in value):
                return f"not a list of str: {type(value).__name__}"
            h = hashlib.sha256()
            for s in value:
                raw = s.encode("utf-8", "surrogatepass")
                h.update(len(raw).to_bytes(8, "little") + raw)
            return f"strings {len(value)} {h.hexdigest()}"
        if sub == ARRAY:
            raise ValueError("nested arrays are compared structurally, not by digest")
        want = SCALAR_DTYPES[sub]
        if type(value) is not np.ndarray or value.dtype != want or value.ndim != 1:
            return f"not a 1-D {want} array: {type(value).__name__} {getattr(value, 'dtype', '')}"
        return f"array {want.str} {len(value)} {hashlib.sha256(value.tobytes()).hexdigest()}"
    if main == STRING:
        if type(value) is not str:
            return f"not a str: {type(value).__name__}"
        return f"str {hashlib.sha256(value.encode('utf-8', 'surrogatepass')).hexdigest()}"
    kind = SCALAR_DTYPES[main].kind
    want = {"b": bool, "f": float}.get(kind, int)
    if type(value) is not want:
        return f"not a {want.__name__}: {type(value).__name__}"
    return f"{want.__name__} {value!r}"


def canonical(value):
    """A comparable form of a metadata value read by either side (exact types, dtypes and bytes; NaN == NaN)."""
    if type(value) is np.ndarray:
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if type(value) is list:
        return ("list", tuple(canonical(v) for v in value))
    if type(value) is float:
        return ("float", "nan" if value != value else repr(value))
    return (type(value).__name__, value)


# ------------------------------------------------------------------------------ gguf-py, and its cache

VIEW_FORMAT = 1
GGUF_PY = _dist_version("gguf")


class _PlainNumpy:
    """gguf-py's ``np`` while it reads, except that ``memmap`` loads the file into an ordinary array: the same
    bytes and the same parsing code, without NumPy's Python-level memmap bookkeeping on each of its millions
    of small slices (four times faster on a big vocabulary)."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def memmap(path, mode="r"):
        return np.fromfile(path, dtype=np.uint8)


def ggufpy_reader(path: Path) -> gguf.GGUFReader:
    """``gguf.GGUFReader(path)``, reading from an in-memory copy of the file (see :class:`_PlainNumpy`)."""
    with mock.patch.object(gguf.gguf_reader, "np", _PlainNumpy()):
        return gguf.GGUFReader(path)


def _field_value(field):
    """A gguf-py field's value in the lab's form: numbers of an array as a NumPy array of their own bytes."""
    types = [int(t) for t in field.types]
    if types[0] == ARRAY and len(types) > 1 and types[1] not in (STRING, ARRAY):
        parts = [field.parts[i] for i in field.data]
        return np.concatenate(parts).astype(SCALAR_DTYPES[types[1]], copy=False)
    return field.contents()


def compute_view(path: Path, hash_data: bool = True) -> dict:
    """What gguf-py reads from ``path``: header counts, keys, value types, digests, tensor records."""
    r = ggufpy_reader(path)
    head = r.fields
    kv = [f for name, f in r.fields.items() if not name.startswith("GGUF.")]
    kv_end = kv[-1].offset + sum(int(p.nbytes) for p in kv[-1].parts) if kv else 24
    last = r.tensors[-1].field if r.tensors else None
    infos_end = last.offset + sum(int(p.nbytes) for p in last.parts) if last is not None else kv_end
    fields = []
    for f in kv:
        types = [int(t) for t in f.types]
        if ARRAY in types[1:]:
            raise ValueError(f"{path.name}: nested arrays in {f.name!r}; gguf-py flattens them")
        value = digest(types, _field_value(f))
        fields.append({"key": f.name, "offset": int(f.offset), "types": types, "digest": value})
    tensors = []
    for t in r.tensors:
        tensors.append({
            "name": t.name, "dims": [int(d) for d in t.shape], "type": int(t.tensor_type),
            "offset": int(t.data_offset), "nbytes": int(t.n_bytes), "at": int(t.field.offset),
            "dtype": t.data.dtype.str, "shape": list(t.data.shape),
            "sha256": hashlib.sha256(t.data.tobytes()).hexdigest() if hash_data else "",
        })
    return {
        "format": VIEW_FORMAT, "gguf_py": GGUF_PY,
        "version": int(head["GGUF.version"].parts[0][0]), "n_tensors": int(head["GGUF.tensor_count"].parts[0][0]),
        "n_kv": int(head["GGUF.kv_count"].parts[0][0]), "kv_end": int(kv_end), "infos_end": int(infos_end),
        "alignment": int(r.alignment), "data_offset": int(r.data_offset), "fields": fields, "tensors": tensors,
    }


def _pin(path: Path) -> str:
    """The pinned sha256 of the asset ``path`` belongs to (its content, checked when it was fetched)."""
    if path == SMOLLM2:
        return assets.ASSETS["smollm2"].files[SMOLLM2.name]
    return assets.ASSETS["llama-cpp-models"].tree_sha256


def ggufpy_view(path: Path) -> dict:
    """gguf-py's reading of a real file (see :func:`compute_view`), computed once and cached."""
    key = hashlib.sha256(f"{_pin(path)}:{path.name}:{path.stat().st_size}:{GGUF_PY}:{VIEW_FORMAT}".encode())
    cache = assets.cache_dir() / "computed" / f"lab13-gguf-py-{path.stem}-{key.hexdigest()[:16]}.json"
    try:
        view = json.loads(cache.read_text(encoding="utf-8"))
        if view.get("format") == VIEW_FORMAT:
            return view
    except (OSError, ValueError):
        pass
    view = compute_view(path)
    with contextlib.suppress(OSError):
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(view), encoding="utf-8")
        os.replace(tmp, cache)
    return view


def ggufpy_view_of_bytes(data: bytes) -> dict:
    """gguf-py's reading of a small file given as bytes (not cached)."""
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "x.gguf"
        p.write_bytes(data)
        return compute_view(p)


# ------------------------------------------------------------------------------- writing with gguf-py

def written(build, alignment: int | None = None) -> bytes:
    """The bytes of a file that gguf-py's GGUFWriter writes; ``build(writer)`` adds its keys and tensors."""
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "w.gguf"
        w = gguf.GGUFWriter(p, arch="llama")
        if alignment is not None:
            w.add_custom_alignment(alignment)
        build(w)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return p.read_bytes()


# (ggml type, NumPy-order shape) of the tensors of many_types_file: every unquantized type, 1 to 4
# dimensions, and legacy, K- and i-quant types whose rows are 1, 2 or 3 blocks, one of them 3-D.
MANY_TYPES = [
    ("F32", (7,)), ("F16", (3, 5)), ("BF16", (4, 2)), ("F64", (2, 2, 2)), ("I8", (1, 1, 1, 3)), ("I16", (5,)),
    ("I32", (2, 3)), ("I64", (3,)), ("Q8_0", (2, 3, 64)), ("Q4_0", (3, 32)), ("Q4_1", (1, 96)), ("Q5_0", (2, 32)),
    ("Q5_1", (2, 64)), ("Q2_K", (1, 256)), ("Q3_K", (2, 256)), ("Q4_K", (2, 512)), ("Q5_K", (1, 256)),
    ("Q6_K", (3, 256)), ("IQ4_NL", (2, 32)), ("IQ4_XS", (1, 256)), ("TQ2_0", (1, 256)), ("MXFP4", (2, 64)),
]


def many_types_file(alignment: int | None = None, seed: int = 3) -> bytes:
    """A file gguf-py's GGUFWriter writes with one tensor of each of :data:`MANY_TYPES` (random bytes)."""
    rng = np.random.default_rng(seed)

    def build(w):
        for i, (name, shape) in enumerate(MANY_TYPES):
            qtype = gguf.GGMLQuantizationType[name]
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            raw = rng.integers(0, 256, (*shape[:-1], shape[-1] // block * size), dtype=np.uint8)
            w.add_tensor(f"t.{i}.{name.lower()}", raw, raw_dtype=qtype)

    return written(build, alignment=alignment)


_NP_TO_VALUE_TYPE = {d: t for t, d in SCALAR_DTYPES.items()}
# Five of SmolLM2's tensors, each cut to its first rows: one of each type the model uses.
_SMALL_TENSORS = {"token_embd.weight": 3, "blk.0.attn_norm.weight": None, "blk.0.attn_v.weight": 2,
                  "blk.0.ffn_down.weight": 1, "output_norm.weight": None}


def small_real_file(n_items: int = 40) -> bytes:
    """SmolLM2's metadata (every key, in its order and types; each array cut to ``n_items``) and five of its
    tensors cut to a few rows, written by gguf-py's GGUFWriter: a real file's structure in about 12 KB."""
    from bytes2logits.engine.gguf import GGUFReader, ValueType

    with GGUFReader(SMOLLM2) as r:
        meta, types = dict(r.metadata), dict(r.value_types)
        tensors = []
        for name, rows in _SMALL_TENSORS.items():
            info = r.tensors[name]
            raw = np.array(r.tensor_bytes(name))
            if rows is None:
                tensors.append((name, raw.view(np.float32), None))
            else:
                per_row = info.nbytes // info.shape[0]
                tensors.append((name, raw[: rows * per_row].reshape(rows, per_row), info.ggml_type))

    def build(w):
        for key, value in meta.items():
            if key == "general.architecture":
                continue
            vtype = gguf.GGUFValueType(int(types[key]))
            if types[key] == ValueType.ARRAY:
                if isinstance(value, np.ndarray):
                    sub, items = gguf.GGUFValueType(_NP_TO_VALUE_TYPE[value.dtype]), value[:n_items].tolist()
                else:
                    sub, items = gguf.GGUFValueType.STRING, value[:n_items]
                w.add_key_value(key, items, vtype, sub_type=sub)
            else:
                w.add_key_value(key, value, vtype)
        for name, array, qtype in tensors:
            raw_dtype = None if qtype is None else gguf.GGMLQuantizationType(int(qtype))
            w.add_tensor(name, array, raw_dtype=raw_dtype)

    return written(build)


# ------------------------------------------------------------------------------ hostile bytes, by hand

def gstr(s: str | bytes) -> bytes:
    """A GGUF string: u64 byte length, then the bytes."""
    raw = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(raw)) + raw


def header(n_tensors: int, n_kv: int, version: int = 3, magic: bytes = b"GGUF") -> bytes:
    return magic + struct.pack("<IQQ", version, n_tensors, n_kv)


def kv(key: str | bytes, vtype: int, payload: bytes) -> bytes:
    """One key/value pair: the key, the u32 value type, then ``payload`` (the value's bytes, as given)."""
    return gstr(key) + struct.pack("<I", vtype) + payload


def array(etype: int, count: int, body: bytes = b"") -> bytes:
    """An array body: element type, count (which may lie), then ``body``."""
    return struct.pack("<IQ", etype, count) + body


def nested(levels: int, leaf: bytes = None) -> bytes:
    """``levels`` arrays, each holding the next, the innermost an empty u8 array (as an array body)."""
    out = b"".join(struct.pack("<IQ", ARRAY, 1) for _ in range(levels - 1))
    return out + (leaf if leaf is not None else struct.pack("<IQ", 0, 0))


def tensor_info(name: str | bytes, dims, ttype: int, offset: int, n_dims: int | None = None) -> bytes:
    out = gstr(name) + struct.pack("<I", len(dims) if n_dims is None else n_dims)
    return out + b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ttype, offset)


def gguf_file(kvs=(), infos=(), data: bytes = b"", *, n_kv=None, n_tensors=None, alignment: int = 32,
              version: int = 3) -> bytes:
    """A whole file from raw pieces: header (counts from the pieces unless given), pairs, tensor infos,
    padding to ``alignment``, then ``data``."""
    body = header(len(infos) if n_tensors is None else n_tensors, len(kvs) if n_kv is None else n_kv, version)
    body += b"".join(kvs) + b"".join(infos)
    return body + b"\0" * (-len(body) % alignment) + data


def outcome(what: str, fn, *args):
    """``fn(*args)``, or None when it raises GGUFError; any other exception fails the check, naming ``what``
    (the file's mutation) and the exception's kind."""
    try:
        return fn(*args)
    except GGUFError:
        return None
    except AssertionError:  # a failed check inside fn, or a worker that stopped answering
        raise
    except Exception as e:  # noqa: BLE001 - the kind of exception is the feedback
        detail = str(e).strip().splitlines()[0][:100] if str(e).strip() else ""
        raise AssertionError(f"{what}: your code raised {type(e).__name__}{f' ({detail})' if detail else ''}; "
                             "a reader may only raise GGUFError") from None


def refusal(fn, *args) -> GGUFError:
    """The GGUFError ``fn(*args)`` raises; an AssertionError if it returns. Any other exception propagates
    (and fails the check with its kind, which is the point: only GGUFError may come out of a reader)."""
    try:
        fn(*args)
    except GGUFError as e:
        return e
    raise AssertionError("this file must be refused with GGUFError, but your code read it without complaint")
