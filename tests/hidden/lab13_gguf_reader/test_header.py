"""Hidden suite, lab 13 task 1: Cursor (reads that check every length first) and read_header."""

import math
import runpy
import struct
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

files = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("gguf_files.py"))))
GGUFError = files.GGUFError

SCALARS = sorted(files.SCALAR_DTYPES)  # value type ids with a fixed size, as gguf-py lists them
# A failing example is not shown to the learner, so shrinking it would only cost time (20 s on a stub).
FAST = {"phases": (Phase.explicit, Phase.reuse, Phase.generate), "report_multiple_bugs": False}


def read_header_of(impl, data: bytes):
    c = impl.Cursor(data, len(data))
    return impl.read_header(c), c


def check_header(got, want, where):
    assert type(got) is tuple and len(got) == 3 and all(type(v) is int for v in got), \
        "read_header must return a tuple of three ints: (version, n_tensors, n_kv)"
    assert got == want, f"{where}: not the version and counts gguf-py reads"


def test_headers_of_real_files_match_gguf_py(impl):
    """read_header gives the version, tensor count and metadata count gguf-py reads, for SmolLM2 and every
    llama.cpp vocab file, and leaves the cursor at byte 24."""
    for path in files.REAL_FILES:
        view = files.ggufpy_view(path)
        mm = files.open_map(impl, path)
        c = impl.Cursor(mm, path.stat().st_size)
        check_header(impl.read_header(c), (view["version"], view["n_tensors"], view["n_kv"]), path.name)
        assert c.pos == 24, f"{path.name}: after the header the cursor must be at byte 24"


def test_the_version_2_file(impl):
    """llama.cpp still ships a GGUF v2 vocabulary (same little-endian layout as v3): it is read as version 2."""
    assert files.V2_FILES, "the asset folder should hold a version 2 file"
    for path in files.V2_FILES:
        view = files.ggufpy_view(path)
        assert view["version"] == 2
        mm = files.open_map(impl, path)
        got = impl.read_header(impl.Cursor(mm, path.stat().st_size))
        check_header(got, (2, view["n_tensors"], view["n_kv"]), path.name)


def scalar_values():
    """(value type id, value) pairs of every fixed-size type, across each type's whole range."""
    def of(t):
        dt = files.SCALAR_DTYPES[t]
        if dt.kind == "b":
            return st.booleans()
        if dt.kind == "f":
            return st.floats(width=dt.itemsize * 8)
        info = np.iinfo(dt)
        return st.integers(int(info.min), int(info.max))

    return st.lists(st.sampled_from(SCALARS).flatmap(lambda t: st.tuples(st.just(t), of(t))), min_size=1, max_size=12)


@settings(max_examples=60, **FAST)
@given(scalar_values())
def test_cursor_reads_little_endian_scalars(impl, pairs):
    """Cursor.scalar reads every fixed-size type little-endian (ints as int, floats as float, bool as bool),
    u32 and u64 read their types, and each read moves pos past its bytes."""
    raw = b"".join(np.array([v], dtype=files.SCALAR_DTYPES[t].newbyteorder("<")).tobytes() for t, v in pairs)
    c = impl.Cursor(raw, len(raw))
    value_type = files.where(impl, "ValueType")
    members = {t: value_type(t) for t in {t for t, _ in pairs}}
    pos = 0
    for i, (t, v) in enumerate(pairs):
        if t == 4 and i % 2:
            got = c.u32("a u32")
        elif t == 10 and i % 2:
            got = c.u64("a u64")
        else:
            got = c.scalar(members[t], "a value")
        want = {"b": bool, "f": float}.get(files.SCALAR_DTYPES[t].kind, int)
        assert type(got) is want, f"a {files.SCALAR_DTYPES[t]} value must come back as a Python {want.__name__}"
        assert got == v or (want is float and math.isnan(got) and math.isnan(v)), \
            f"a {files.SCALAR_DTYPES[t]} value was read wrong (little-endian, at pos)"
        pos += files.SCALAR_DTYPES[t].itemsize
        assert c.pos == pos, "after a read, pos must point just past the value's bytes"


@settings(max_examples=60, **FAST)
@given(st.lists(st.text(max_size=30), min_size=1, max_size=8))
def test_cursor_reads_strings(impl, texts):
    """Cursor.string reads a u64 byte length and that many bytes of UTF-8, any text (empty, accents, emoji)."""
    raw = b"".join(files.gstr(t) for t in texts)
    c = impl.Cursor(raw, len(raw))
    for t in texts:
        got = c.string("a string")
        assert type(got) is str and got == t, "Cursor.string gave another text than the bytes hold"
    assert c.pos == len(raw), "after the last string, pos must be at the end of the buffer"


reads = st.lists(st.tuples(st.sampled_from(["u32", "u64", "string"]), st.integers(0, 40)), min_size=1, max_size=6)


@settings(max_examples=80, **FAST)
@given(st.binary(max_size=40), reads)
def test_cursor_never_reads_past_the_end(impl, buf, plan):
    """A read needing more bytes than remain raises GGUFError (never struct.error or IndexError), and any read
    that fits gives the bytes' value; a string's length is checked against what remains."""
    buf = bytearray(buf)
    # Plant string lengths the plan chooses, so that some fit and some run past the end.
    pos = 0
    for kind, n in plan:
        if kind == "string" and pos + 8 <= len(buf):
            buf[pos : pos + 8] = struct.pack("<Q", n)
        pos += {"u32": 4, "u64": 8}.get(kind, 8 + n)
    data = bytes(buf)
    c = impl.Cursor(data, len(data))
    pos = 0
    for kind, _ in plan:
        read = getattr(c, kind)
        size = {"u32": 4, "u64": 8}.get(kind, 8)
        if pos + size <= len(data) and kind == "string":
            size += struct.unpack_from("<Q", data, pos)[0]
        if pos + size > len(data):
            files.refusal(read, f"a {kind}")
            return
        if kind == "string":
            text = _utf8(data[pos + 8 : pos + size])
            if text is None:  # the random bytes are not UTF-8: a refusal is right, and ends the plan
                files.refusal(read, "a string")
                return
            assert read("a string") == text, "Cursor.string read the wrong bytes"
        else:
            want = struct.unpack_from("<I" if kind == "u32" else "<Q", data, pos)[0]
            assert read(f"a {kind}") == want, f"Cursor.{kind} read the wrong value"
        pos += size
        assert c.pos == pos, "after a read, pos must point just past what was read"


def _utf8(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_strings_that_lie_are_refused(impl):
    """A string whose length runs past the end (by one byte, or 2**63, or 2**64 - 1 bytes) or whose bytes are
    not UTF-8 (a stray continuation byte, a cut sequence, an overlong form, an encoded surrogate) is a
    GGUFError, never MemoryError, OverflowError or a garbled str."""
    cases = [struct.pack("<Q", 6) + b"hello", struct.pack("<Q", 2**63) + b"x" * 16,
             struct.pack("<Q", 2**64 - 1) + b"x" * 16, struct.pack("<Q", 2**40)]
    bad = (b"\xff", b"ab\x80", b"caf\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80")
    cases += [files.gstr(raw) for raw in bad]
    for raw in cases:
        c = impl.Cursor(raw, len(raw))
        files.refusal(c.string, "a string")


def test_bad_magic_is_refused(impl):
    """A file that does not start with the four bytes GGUF (another format, lower case, reversed, a text
    file, zeros) is refused with GGUFError."""
    rest = struct.pack("<IQQ", 3, 0, 0)
    text = (files.MODELS / "ggml-vocab-gpt-2.gguf.inp").read_bytes()[:24]
    for data in (b"GGML" + rest, b"gguf" + rest, b"FUGG" + rest, bytes(24), b"GGU\0" + rest, text):
        files.refusal(read_header_of, impl, data)


def test_versions_other_than_2_and_3_are_refused(impl):
    """Versions 2 and 3 are read; 0, 1 (32-bit counts), 4, huge ones and big-endian files (whose version reads
    as 3 << 24) are refused with GGUFError."""
    for version in (2, 3):
        got, _ = read_header_of(impl, files.header(0, 0, version))
        check_header(got, (version, 0, 0), f"a version {version} header with no tensors and no keys")
    for version in (0, 1, 4, 7, 2**31, 2**32 - 1, 3 << 24, 2 << 24):
        files.refusal(read_header_of, impl, files.header(0, 0, version))


def test_truncated_headers_are_refused(impl):
    """Every cut of a real header shorter than its 24 bytes is a GGUFError (not struct.error)."""
    with open(files.SMOLLM2, "rb") as f:
        head = f.read(24)
    for n in range(24):
        files.refusal(read_header_of, impl, head[:n])


def test_counts_that_cannot_fit_are_refused(impl):
    """A metadata count that needs more bytes than the file has (13 per key/value pair at the least) or a
    tensor count that does (24 per tensor info) is refused at once; the largest counts that could fit pass."""
    body = files.small_real_file()[24:]
    room = len(body)
    for n_tensors, n_kv in ((0, 2**60), (0, 2**64 - 1), (0, room // 13 + 1), (2**62, 0), (2**64 - 1, 0),
                            (room // 24 + 1, 0), (2**64 - 1, 2**64 - 1)):
        with files.bounded(impl, 20, "a header with a lying count"):
            files.refusal(read_header_of, impl, files.header(n_tensors, n_kv) + body)
    for n_tensors, n_kv in ((0, room // 13), (room // 24, 0)):
        got, _ = read_header_of(impl, files.header(n_tensors, n_kv) + body)
        check_header(got, (3, n_tensors, n_kv), "counts that could just fit in the file")


headers = st.tuples(
    st.sampled_from([b"GGUF", b"GGUF", b"GGML"]) | st.binary(min_size=4, max_size=4),
    st.sampled_from([2, 3, 3]) | st.integers(0, 2**32 - 1),
    st.integers(0, 3) | st.integers(0, 2**64 - 1),
    st.integers(0, 6) | st.integers(0, 2**64 - 1),
    st.binary(max_size=120),
)


@settings(max_examples=100, **FAST)
@given(headers)
def test_random_headers_are_read_or_refused(impl, parts):
    """On random headers read_header returns exactly what the header says when the reference accepts it, and
    raises GGUFError when the reference refuses it: nothing else ever comes out."""
    ref = files.REFERENCE
    magic, version, n_tensors, n_kv, tail = parts
    data = magic + struct.pack("<IQQ", version, n_tensors, n_kv) + tail
    try:
        want = ref.read_header(ref.Cursor(data, len(data)))
    except GGUFError:
        files.refusal(read_header_of, impl, data)
        return
    got, _ = read_header_of(impl, data)
    check_header(got, want, "a random header")


def test_header_errors_name_what_and_where(impl):
    """Errors name what was being read and its byte offset: the magic, the version, a count that cannot fit,
    and any Cursor read (its `what` argument) past the end."""
    cases = [
        (lambda: read_header_of(impl, b"GGML" + struct.pack("<IQQ", 3, 0, 0)), "magic"),
        (lambda: read_header_of(impl, files.header(0, 0, version=7)), "version"),
        (lambda: read_header_of(impl, files.header(0, 2**60)), "metadata count"),
        (lambda: read_header_of(impl, files.header(2**60, 0)), "tensor count"),
        (lambda: impl.Cursor(b"\x01\x02", 2).u64("the tensor count"), "the tensor count"),
        (lambda: impl.Cursor(files.gstr(b"\xff"), 9).string("key of metadata entry 0"), "key of metadata entry 0"),
    ]
    for call, name in cases:
        message = str(files.refusal(call))
        assert name in message and "offset" in message, \
            f"a GGUFError about the {name} must name it and say at which byte offset"
