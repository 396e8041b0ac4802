"""The GGUF reader: agreement with gguf-py on real files, every value type, and hostile input.

Real files: SmolLM2's model and llama.cpp's vocab-only GGUFs (assets). Synthetic files are written here by
a small independent writer (struct.pack), so each corruption can be placed at a known byte offset.
"""

from __future__ import annotations

import signal
import struct
import tracemalloc
from pathlib import Path

import gguf as ggufpy
import numpy as np
import pytest

from bytes2logits import assets
from bytes2logits.engine.gguf import GGML_BLOCK_SIZES, GGMLType, GGUFReader, ValueType, format_summary
from bytes2logits.errors import GGUFError

MODELS = assets.path("llama-cpp-models")
REAL_FILES = sorted(MODELS.glob("ggml-vocab-*.gguf")) + [assets.path("smollm2")]
# gguf-py reads big vocabularies slowly (30 s for gemma-4): compare field by field on a set that covers
# v2 (aquila), both tokenizer families, a chat template and a real model; every file is parsed by ours below.
ORACLE_FILES = [MODELS / f"ggml-vocab-{n}.gguf" for n in ("aquila", "gpt-2", "llama-spm", "bert-bge", "phi-3")]
ORACLE_FILES.append(assets.path("smollm2"))


# -- a tiny independent writer -------------------------------------------------------------------------------
def _str(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


_FMT = {ValueType.UINT8: "B", ValueType.INT8: "b", ValueType.UINT16: "H", ValueType.INT16: "h",
        ValueType.UINT32: "I", ValueType.INT32: "i", ValueType.FLOAT32: "f", ValueType.BOOL: "?",
        ValueType.UINT64: "Q", ValueType.INT64: "q", ValueType.FLOAT64: "d"}


def _array_body(etype: ValueType, items) -> bytes:
    out = struct.pack("<IQ", etype, len(items))
    for it in items:
        if etype == ValueType.STRING:
            out += _str(it)
        elif etype == ValueType.ARRAY:
            out += _array_body(*it)
        else:
            out += struct.pack("<" + _FMT[etype], it)
    return out


def _kv(key: str, vtype: ValueType, value) -> bytes:
    head = _str(key) + struct.pack("<I", vtype)
    if vtype == ValueType.STRING:
        return head + _str(value)
    if vtype == ValueType.ARRAY:
        return head + _array_body(*value)
    return head + struct.pack("<" + _FMT[vtype], value)


def build(kvs=(), tensors=(), version=3, alignment=32, n_kv=None, n_tensors=None, data_pad=0) -> bytes:
    """A GGUF file: kvs = [(key, type, value)], tensors = [(name, dims, type, data bytes)]."""
    meta = b"".join(_kv(*kv) for kv in kvs)
    infos, blobs, offset = b"", [], 0
    for name, dims, ttype, data in tensors:
        infos += _str(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", ttype, offset)
        blobs.append((offset, data))
        offset += -(-len(data) // alignment) * alignment
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                                 len(kvs) if n_kv is None else n_kv)
    body = head + meta + infos
    body += b"\0" * (-len(body) % alignment)
    data = bytearray(offset + data_pad)
    for off, blob in blobs:
        data[off : off + len(blob)] = blob
    return body + bytes(data)


def every_type_file() -> bytes:
    """One value of every type, nested arrays, and F32 / F16 / Q8_0 tensors."""
    q8 = np.random.default_rng(0).integers(0, 256, size=34 * 4, dtype=np.uint8).tobytes()
    kvs = [
        ("general.architecture", ValueType.STRING, "llama"),
        ("u8", ValueType.UINT8, 255), ("i8", ValueType.INT8, -128), ("u16", ValueType.UINT16, 65535),
        ("i16", ValueType.INT16, -32768), ("u32", ValueType.UINT32, 2**32 - 1), ("i32", ValueType.INT32, -(2**31)),
        ("f32", ValueType.FLOAT32, 1.5), ("bool", ValueType.BOOL, True), ("u64", ValueType.UINT64, 2**64 - 1),
        ("i64", ValueType.INT64, -(2**63)), ("f64", ValueType.FLOAT64, -0.1), ("str", ValueType.STRING, "héllo ✓"),
        ("empty", ValueType.STRING, ""),
        ("arr.i32", ValueType.ARRAY, (ValueType.INT32, [1, -2, 3])),
        ("arr.str", ValueType.ARRAY, (ValueType.STRING, ["a", "", "中文"])),
        ("arr.nested", ValueType.ARRAY, (ValueType.ARRAY, [(ValueType.UINT8, [1, 2]), (ValueType.STRING, ["x"])])),
        ("arr.empty", ValueType.ARRAY, (ValueType.FLOAT32, [])),
    ]
    tensors = [
        ("a", (4, 3), GGMLType.F32, np.arange(12, dtype="<f4").tobytes()),
        ("b", (8,), GGMLType.F16, np.linspace(-1, 1, 8).astype("<f2").tobytes()),
        ("c", (32, 4), GGMLType.Q8_0, q8),
    ]
    return build(kvs, tensors)


@pytest.fixture
def write(tmp_path):
    def _write(data: bytes, name="x.gguf") -> Path:
        p = tmp_path / name
        p.write_bytes(data)
        return p

    return _write


# -- agreement with gguf-py on real files -----------------------------------------------------------------------
@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_every_real_file_parses(path):
    """Every real GGUF on disk parses, and its tokenizer arrays have one entry per token."""
    r = GGUFReader(path)
    assert r.version in (2, 3) and r.metadata["general.architecture"]
    tokens = r.metadata.get("tokenizer.ggml.tokens")
    if tokens is not None and "tokenizer.ggml.token_type" in r.metadata:
        assert len(r.metadata["tokenizer.ggml.token_type"]) == len(tokens)


@pytest.mark.parametrize("path", ORACLE_FILES, ids=lambda p: p.name)
def test_real_files_match_gguf_py(path):
    """Every key, value and tensor record of real files equals what gguf-py reads."""
    ours = GGUFReader(path)
    ref = ggufpy.GGUFReader(path)
    ref_fields = {k: f for k, f in ref.fields.items() if not k.startswith("GGUF.")}
    assert list(ours.metadata) == list(ref_fields)
    for key, field in ref_fields.items():
        expected = field.contents()
        got = ours.metadata[key]
        if isinstance(got, np.ndarray):
            np.testing.assert_array_equal(got, np.asarray(expected), err_msg=key)
        else:
            assert got == expected, key
    assert [t.name for t in ours] == [t.name for t in ref.tensors]
    for t, r in zip(ours, ref.tensors):
        assert t.dims == tuple(int(d) for d in r.shape), t.name
        assert int(t.ggml_type) == int(r.tensor_type), t.name
        assert t.offset == int(r.data_offset) and t.nbytes == int(r.n_bytes), t.name
        assert t.shape == tuple(reversed(t.dims))


def test_block_table_matches_gguf_py():
    """Our (block, bytes) table agrees with gguf-py's for every type both know (Q8_1 aside: see below)."""
    for t, size in GGML_BLOCK_SIZES.items():
        if t == GGMLType.Q8_1:
            # ggml's block_q8_1 is two fp16 (d, s) + 32 int8 = 36 bytes; gguf-py 0.19 still lists 40.
            assert size == (32, 36)
            continue
        assert ggufpy.GGML_QUANT_SIZES[ggufpy.GGMLQuantizationType(int(t))] == size, t.name


def test_tensor_views_are_zero_copy():
    """Tensor data comes back as views into the memory map: no copy of a 98 MB model at open."""
    r = GGUFReader(assets.path("smollm2"))
    raw = r.tensor_bytes("token_embd.weight")
    assert raw.nbytes == r.tensors["token_embd.weight"].nbytes and not raw.flags.owndata
    assert not raw.flags.writeable
    norm = r.tensor("output_norm.weight")
    assert norm.dtype == np.float32 and norm.shape == (576,) and not norm.flags.owndata
    ref = ggufpy.GGUFReader(assets.path("smollm2"))
    np.testing.assert_array_equal(norm, next(t.data for t in ref.tensors if t.name == "output_norm.weight"))
    q = r.tensor("blk.0.attn_q.weight")
    assert q.dtype == np.uint8 and q.shape == (576, 576 // 32 * 20)


def test_every_value_type(write):
    r = GGUFReader(write(every_type_file()))
    m = r.metadata
    assert m["u8"] == 255 and m["i8"] == -128 and m["u16"] == 65535 and m["i16"] == -32768
    assert m["u32"] == 2**32 - 1 and m["i32"] == -(2**31) and m["u64"] == 2**64 - 1 and m["i64"] == -(2**63)
    assert m["f32"] == 1.5 and m["bool"] is True and m["f64"] == -0.1
    assert m["str"] == "héllo ✓" and m["empty"] == ""
    assert m["arr.i32"].tolist() == [1, -2, 3] and m["arr.i32"].dtype == np.int32
    assert m["arr.str"] == ["a", "", "中文"]
    assert m["arr.nested"][0].tolist() == [1, 2] and m["arr.nested"][1] == ["x"]
    assert m["arr.empty"].size == 0
    assert r.value_types["arr.nested"] == ValueType.ARRAY and r.value_types["f64"] == ValueType.FLOAT64
    np.testing.assert_array_equal(r.tensor("a"), np.arange(12, dtype=np.float32).reshape(3, 4))
    assert r.tensor("b").dtype == np.float16
    assert r.tensors["c"].shape == (4, 32) and r.tensors["c"].nbytes == 4 * 34
    text = format_summary(r)
    assert "arr.str" in text and "Q8_0" in text and "[4, 32]" in text


def test_version_2_and_alignment(write):
    """Version 2 has the same little-endian layout; a custom general.alignment moves the data section."""
    data = build([("general.alignment", ValueType.UINT32, 64)],
                 [("t", (16,), GGMLType.F32, np.ones(16, "<f4").tobytes())], version=2, alignment=64)
    r = GGUFReader(write(data))
    assert r.version == 2 and r.alignment == 64 and r.data_offset % 64 == 0
    assert r.tensor("t").sum() == 16


def test_matches_gguf_py_writer(tmp_path):
    """A file written by gguf-py's GGUFWriter (nested arrays included) reads back the same."""
    p = tmp_path / "w.gguf"
    w = ggufpy.GGUFWriter(p, arch="llama")
    w.add_array("nested", [[1, 2], [3, 4, 5]])
    w.add_array("names", ["a", "bé"])
    w.add_float64("pi", 3.25)
    w.add_tensor("x", np.arange(64, dtype=np.float32).reshape(2, 32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = GGUFReader(p)
    assert [a.tolist() for a in r.metadata["nested"]] == [[1, 2], [3, 4, 5]]
    assert r.metadata["names"] == ["a", "bé"] and r.metadata["pi"] == 3.25
    np.testing.assert_array_equal(r.tensor("x"), np.arange(64, dtype=np.float32).reshape(2, 32))


# -- hostile and corrupt files ---------------------------------------------------------------------------------
F32_T = ("t", (8,), GGMLType.F32, np.zeros(8, "<f4").tobytes())


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"", "too short"),
        (b"GGML" + bytes(20), "bad magic"),
        (b"GGUF" + struct.pack("<IQQ", 1, 0, 0), "version 1"),
        (b"GGUF" + struct.pack("<IQQ", 7, 0, 0), "unsupported GGUF version 7"),
        (b"GGUF" + struct.pack(">IQQ", 3, 0, 0), "big-endian"),
        (build(n_kv=2**60), "metadata count"),
        (build(tensors=[F32_T], n_tensors=2**62), "tensor count"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _kv("k", ValueType.STRING, "value")[:-1], "string value of 'k'"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _kv("k", ValueType.ARRAY, (ValueType.UINT64, [1, 2, 3]))[:-4],
         "array 'k' claims 3"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _str("k") + struct.pack("<IIQ", 9, 4, 2**61),
         "claims 2305843009213693952 elements"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2**63) + bytes(16), "key of metadata entry 0"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _str("k") + struct.pack("<I", 13) + bytes(8),
         "unknown value type id 13"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _str("k") + struct.pack("<I", 8) + _str(b"\xff\xfe"),
         "not valid UTF-8"),
        (build([("k", ValueType.UINT8, 1), ("k", ValueType.UINT8, 2)]), "duplicate metadata key 'k'"),
        (build([("general.alignment", ValueType.UINT32, 3)]), "power of two"),
        (build([("general.alignment", ValueType.UINT8, 32)]), "general.alignment"),
        (build(tensors=[("t", (8,), 99, bytes(32))]), "unknown ggml type id 99"),
        (build(tensors=[("t", (1, 1, 1, 1, 1), GGMLType.F32, bytes(4))]), "5 dimensions"),
        (build(tensors=[("t", (8, 0), GGMLType.F32, b"")]), "zero dimension"),
        (build(tensors=[("t", (31,), GGMLType.Q8_0, bytes(34))]), "multiple of 32"),
        (build(tensors=[F32_T])[:-1], "lies outside"),
        (build(tensors=[("t", (2**40, 2**20), GGMLType.F32, b"")]), "lies outside"),
        (build(tensors=[F32_T, F32_T]), "duplicate tensor name 't'"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_corrupt_files_name_the_problem(write, data, expected):
    """Each corruption raises GGUFError whose message names the thing (and usually the byte offset)."""
    with pytest.raises(GGUFError, match=None) as e:
        GGUFReader(write(data))
    assert expected in str(e.value), str(e.value)


def test_overlapping_and_misaligned_tensors(write):
    data = bytearray(build(tensors=[("a", (8,), GGMLType.F32, bytes(32)), ("b", (8,), GGMLType.F32, bytes(32))]))
    # The second tensor's offset field is the last 8 bytes of the tensor infos; point it into the first.
    at = bytes(data).rindex(b"b") + 1 + 4 + 8 + 4
    data[at : at + 8] = struct.pack("<Q", 0)
    with pytest.raises(GGUFError, match="'b' data at byte offset .* overlaps tensor 'a'"):
        GGUFReader(write(bytes(data)))
    data[at : at + 8] = struct.pack("<Q", 4)
    with pytest.raises(GGUFError, match="not a multiple of the alignment 32"):
        GGUFReader(write(bytes(data)))


def test_deep_nesting_is_refused(write):
    body = struct.pack("<I", ValueType.ARRAY)
    for _ in range(100):
        body += struct.pack("<IQ", ValueType.ARRAY, 1)
    body += struct.pack("<IQ", ValueType.UINT8, 0)
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _str("deep") + body
    with pytest.raises(GGUFError, match="nest deeper than 16"):
        GGUFReader(write(data))


# -- fuzzing ---------------------------------------------------------------------------------------------------
class _Hang(Exception):
    pass


def _parse_bounded(path: Path, size: int) -> None:
    """Parse under an alarm (a hang detector, not a speed test) and check the allocation bound."""

    def on_alarm(*_):
        raise _Hang(f"parsing {path.name} did not finish in 20 s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(20)
    tracemalloc.start()
    try:
        try:
            GGUFReader(path).close()
        except GGUFError:
            pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    # Python objects cost more than their bytes (a 1-byte string is ~50 bytes): allow a constant factor.
    assert peak <= 64 * size + (1 << 20), f"{path.name}: {peak} bytes allocated for a {size}-byte file"


def test_fuzz_truncations_and_flips(tmp_path):
    """Random truncations and byte flips of real and synthetic files: only GGUFError, bounded time and memory."""
    rng = np.random.default_rng(20261130)
    seeds = [every_type_file(), (MODELS / "ggml-vocab-gpt-2.gguf").read_bytes()[:60_000]]
    # The head of the real model: metadata (with the 49k-token vocabulary) and the tensor table.
    with open(assets.path("smollm2"), "rb") as f:
        seeds.append(f.read(2_500_000))
    cases = 0
    for seed in seeds:
        n = 300 if len(seed) < 100_000 else 12
        for i in range(n):
            data = bytearray(seed)
            kind = i % 3
            if kind == 0:  # truncate
                data = data[: int(rng.integers(0, len(data)))]
            else:  # flip 1..8 bytes, preferring the header and metadata where lengths live
                for _ in range(int(rng.integers(1, 9))):
                    limit = len(data) if rng.random() < 0.3 else min(len(data), 4096)
                    data[int(rng.integers(0, limit))] = int(rng.integers(0, 256))
            p = tmp_path / f"fuzz{cases}.gguf"
            p.write_bytes(bytes(data))
            _parse_bounded(p, len(data))
            p.unlink()
            cases += 1
    assert cases == 2 * 300 + 12


def test_many_nested_arrays_are_refused(write):
    """12 bytes each in the file but an object each in memory: a cap keeps a small file from exploding."""
    n = (1 << 16) + 1
    body = struct.pack("<IIQ", ValueType.ARRAY, ValueType.ARRAY, n) + struct.pack("<IQ", ValueType.UINT8, 0) * n
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _str("many") + body
    with pytest.raises(GGUFError, match="more than 65536 nested arrays"):
        GGUFReader(write(data))


def test_summary_escapes_control_characters(write):
    data = build([("evil\x1b[2Jkey", ValueType.STRING, "v\x1b]0;x\x07")])
    text = format_summary(GGUFReader(write(data)))
    assert "\x1b" not in text and "\\x1b" in text


def test_section_functions_read_a_bytes_buffer(write):
    """The reader's sections are functions of a buffer: the same results on bytes as GGUFReader on a file."""
    from bytes2logits.engine import gguf as g

    data = every_type_file()
    c = g.Cursor(data, len(data))
    version, n_tensors, n_kv = g.read_header(c)
    metadata, types = g.read_metadata(c, n_kv)
    alignment = g.read_alignment(metadata, types)
    infos = g.read_tensor_infos(c, n_tensors, alignment)
    tensors = g.place_tensors(infos, -(-c.pos // alignment) * alignment, len(data))
    with GGUFReader(write(data)) as r:
        assert (version, list(metadata), types) == (r.version, list(r.metadata), r.value_types)
        assert tensors == r.tensors
        for name, info in tensors.items():
            view = g.tensor_array(data, info)
            assert np.array_equal(view, r.tensor(name)) and not view.flags.writeable
            assert g.tensor_array(data, info, raw=True).nbytes == info.nbytes
    assert [i.at for i in infos] == sorted(i.at for i in infos) and infos[0].name == "a"
