"""Hidden suite, lab 13 task 2: typed metadata (read_value_type, read_value, read_array, read_string_array,
read_metadata) against gguf-py on real files, on every value type, and on files that lie."""

import random
import runpy
import struct
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bytes2logits.kit.remote import peak_memory, quiet_submissions, timed

files = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("gguf_files.py"))))
GGUFError = files.GGUFError

# gguf-py's value type ids (the same numbers as the lab's ValueType).
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)


def metadata_of(impl, data: bytes) -> dict:
    return files.sections(impl, data, len(data))


def check_against_view(out: dict, view: dict, where: str) -> None:
    """The learner's metadata, value types and final position against gguf-py's reading (a view)."""
    metadata, value_types = out["metadata"], out["value_types"]
    assert type(metadata) is dict and type(value_types) is dict, \
        "read_metadata must return two dicts: (metadata, value_types)"
    keys = [f["key"] for f in view["fields"]]
    assert list(metadata) == keys, f"{where}: the keys are not gguf-py's keys in file order"
    assert list(value_types) == keys, f"{where}: value_types must have one entry per key, in file order"
    for field in view["fields"]:
        key = field["key"]
        parts = files.enum_parts(value_types[key])
        assert parts is not None and parts[0] == "ValueType", "value_types must map each key to a ValueType member"
        assert parts[2] == field["types"][0], f"{where}: the value type of {key!r} is not the one gguf-py reads"
        got = files.digest(field["types"], metadata[key])
        if got != field["digest"]:
            shown = f" ({got})" if got.startswith("not ") else ""
            raise AssertionError(f"{where}: the value of {key!r} is not the one gguf-py reads{shown}")
    assert out["after_metadata"] == view["kv_end"], \
        f"{where}: after read_metadata the cursor must stand just past the last value"


@pytest.mark.parametrize("path", files.REAL_FILES, ids=lambda p: p.name)
def test_real_file_metadata_matches_gguf_py(impl, path):
    """Every key of the file, in order, with gguf-py's value type and value: strings as str, numbers as int,
    float or bool, arrays of numbers as NumPy arrays of the element's dtype, token lists as lists of str."""
    view = files.ggufpy_view(path)
    out = files.sections(impl, files.open_map(impl, path), path.stat().st_size)
    check_against_view(out, view, path.name)


EXTREMES = [
    (U8, 0), (U8, 255), (I8, -128), (U16, 65535), (I16, -32768), (U32, 2**32 - 1), (I32, -(2**31)),
    (F32, 3.4028234663852886e38), (F32, -0.0), (F32, 1.401298464324817e-45), (F32, float("inf")),
    (F32, float("nan")), (BOOL, True), (BOOL, False), (STR, "héllo ✓ 中文 😀"), (STR, ""), (STR, "a\x00b\n"),
    (U64, 2**64 - 1), (I64, -(2**63)), (F64, -0.1), (F64, float("-nan")), (F64, 5e-324),
]
ARRAYS = [
    (U8, [0, 1, 255]), (I8, [-128, 0, 127]), (U16, [0, 65535]), (I16, [-32768, 32767]), (U32, [2**32 - 1, 7]),
    (I32, [-(2**31), 2**31 - 1]), (F32, [float("inf"), -0.0, 0.1, float("nan")]), (BOOL, [True, False, True]),
    (STR, ["", "a", "▁é", "😀", "\x00"]), (U64, [2**64 - 1]), (I64, [-(2**63), 2**63 - 1]), (F64, [1e308, -5e-324]),
]


def every_type_file() -> bytes:
    def build(w):
        for i, (t, v) in enumerate(EXTREMES):
            w.add_key_value(f"scalar.{i}", v, files.gguf.GGUFValueType(t))
        for i, (t, v) in enumerate(ARRAYS):
            w.add_key_value(f"array.{i}", v, files.gguf.GGUFValueType.ARRAY, sub_type=files.gguf.GGUFValueType(t))

    return files.written(build)


def test_every_value_type_gguf_py_writes(impl):
    """A file gguf-py's GGUFWriter wrote with every scalar type at its extremes (NaN, -0.0, subnormals, 2**64
    - 1, empty and NUL-holding strings) and an array of each type reads back as gguf-py reads it."""
    data = every_type_file()
    check_against_view(metadata_of(impl, data), files.ggufpy_view_of_bytes(data), "a file of every value type")


def expected_nested(value):
    """What an array written by GGUFWriter from a Python list reads back as: GGUFWriter types Python ints as
    INT32, floats as FLOAT32, str as STRING and lists as ARRAY; numbers come back as NumPy arrays."""
    if value and isinstance(value[0], list):
        return [expected_nested(v) for v in value]
    if value and isinstance(value[0], str):
        return list(value)
    return np.array(value, dtype=np.float32 if value and isinstance(value[0], float) else np.int32)


def test_nested_arrays_round_trip(impl):
    """Arrays of arrays, as GGUFWriter writes them from nested lists: a list whose items are the inner
    arrays, each read as a body of its own (numbers as NumPy arrays, strings as lists, arrays as lists)."""
    values = [[[1, 2], [3, 4, 5]], [[1, 2], ["a", "bé"], [[0.5], [1.5, 2.5]]], [[[[[7]]]]], [["x"]] * 40]

    def build(w):
        for i, v in enumerate(values):
            w.add_key_value(f"nested.{i}", v, files.gguf.GGUFValueType.ARRAY)

    out = metadata_of(impl, files.written(build))
    for i, v in enumerate(values):
        got = out["metadata"][f"nested.{i}"]
        assert files.canonical(got) == files.canonical(expected_nested(v)), \
            "an array of arrays must come back as a list of the inner arrays, each read by its element type"
        assert files.enum_parts(out["value_types"][f"nested.{i}"])[1] == "ARRAY"


def test_sixteen_levels_of_nesting_are_read(impl):
    """Arrays nested 16 levels deep (the top-level array and 15 inside it) are within MAX_ARRAY_NESTING."""
    data = files.header(0, 1) + files.kv("deep", ARR, files.nested(16))
    got = metadata_of(impl, data)["metadata"]["deep"]
    for _ in range(15):
        assert type(got) is list and len(got) == 1, "16 levels of arrays must be read, each a list of one array"
        got = got[0]
    assert type(got) is np.ndarray and got.size == 0 and got.dtype == np.uint8


def lying(key: str, vtype: int, payload: bytes, n_kv: int = 1) -> bytes:
    return files.header(0, n_kv) + files.kv(key, vtype, payload)


_TOKENS = b"".join(files.gstr(t) for t in ("<s>", "a", "b", "▁c", "dé", "e", "f")) + files.gstr(b"\xc3(")
HOSTILE = {
    "unknown value type 13": lying("general.name", 13, b"\0" * 8),
    "unknown value type 2**32-1": lying("general.name", 2**32 - 1, b"\0" * 8),
    "unknown element type": lying("tokenizer.ggml.scores", ARR, files.array(13, 1, b"\0" * 8)),
    "2**60 bytes claimed": lying("tokenizer.ggml.token_type", ARR, files.array(U8, 2**60, b"\0" * 8)),
    "2**64-1 doubles claimed": lying("tokenizer.ggml.scores", ARR, files.array(F64, 2**64 - 1, b"\0" * 8)),
    "2**61 strings claimed": lying("tokenizer.ggml.tokens", ARR, files.array(STR, 2**61, b"\0" * 8)),
    "2**59 arrays claimed": lying("tokenizer.ggml.merges", ARR, files.array(ARR, 2**59, b"\0" * 12)),
    "numbers past the end": lying("tokenizer.ggml.scores", ARR, files.array(U64, 3, b"\0" * 16)),
    "string past the end": lying("general.name", STR, files.gstr("SmolLM2")[:-1]),
    "string of 2**64-1 bytes": lying("general.name", STR, struct.pack("<Q", 2**64 - 1) + b"abc"),
    "key of 2**63 bytes": files.header(0, 1) + struct.pack("<Q", 2**63) + b"\0" * 16,
    "key not UTF-8": lying(b"general.\xffname", U8, b"\1"),
    "value not UTF-8": lying("general.name", STR, files.gstr(b"\xed\xa0\x80")),
    "token not UTF-8": lying("tokenizer.ggml.tokens", ARR, files.array(STR, 8, _TOKENS)),
    "duplicate key": files.header(0, 2) + 2 * files.kv("llama.block_count", U32, b"\1\0\0\0"),
    "more pairs than the file holds": files.header(0, 3) + files.kv("a", U8, b"\1") + files.kv("b", U8, b"\1"),
    "17 levels of arrays": lying("deep", ARR, files.nested(17)),
    "100000 levels of arrays": lying("deep", ARR, files.nested(100_000)),
    "65537 nested arrays": lying("wide", ARR, files.array(ARR, 65537, files.array(U8, 0) * 65537)),
}


@pytest.mark.parametrize("case", HOSTILE, ids=str)
def test_files_that_lie_are_refused(impl, case):
    """Unknown types, counts and lengths past the end, bad UTF-8, duplicate keys, and arrays nested too deep or
    too many: each is a GGUFError (never IndexError, MemoryError, OverflowError, RecursionError or a hang)."""
    data = HOSTILE[case]
    with files.bounded(impl, 20, case):
        files.refusal(metadata_of, impl, data)


@pytest.mark.parametrize("etype", [U8, U64, STR, ARR], ids=["u8", "u64", "strings", "arrays"])
def test_lying_counts_allocate_nothing(impl, etype):
    """A 60-byte file whose array claims 33 million elements is refused before anything is allocated: memory
    stays bounded by what the file could hold, however big the count."""
    data = lying("tokenizer.ggml.tokens", ARR, files.array(etype, 2**25, b"\0" * 12))
    impl.Cursor(b"", 0)  # start the worker before measuring it
    with files.bounded(impl, 20, "an array count that lies"), peak_memory(impl) as peak:
        error = None
        try:
            metadata_of(impl, data)
        except GGUFError as e:
            error = e
    assert peak.peak < 16 * 2**20, (f"reading a {len(data)}-byte file that claims 2**25 elements took "
                                    f"{peak.peak / 2**20:.0f} MB: check the count against the bytes that remain "
                                    "before allocating")
    assert error is not None, "a file whose array claims more elements than it holds must raise GGUFError"


def small_file():
    data = files.small_real_file()
    return data, files.ggufpy_view_of_bytes(data)


def test_every_truncation_of_a_small_real_file_is_refused(impl):
    """A file made from SmolLM2 (its 33 keys, arrays cut to 40 items), cut at each of its first 512 bytes and
    at every third byte after, up to the end of its metadata: every cut is a GGUFError."""
    data, view = small_file()
    with files.bounded(impl, 60, "truncated files"):
        for n in [*range(512), *range(512, view["kv_end"], 3)]:
            if files.outcome(f"cut to {n} bytes", read_cut, impl, data[:n]) is not None:
                raise AssertionError(f"cut to {n} bytes (inside its metadata), the file must be refused with GGUFError")


def read_cut(impl, data: bytes):
    c = impl.Cursor(data, len(data))
    return impl.read_metadata(c, impl.read_header(c)[2])


def same_metadata(got: dict, want: dict) -> bool:
    if list(got["metadata"]) != list(want["metadata"]) or got["after_metadata"] != want["after_metadata"]:
        return False
    if any(files.canonical(got["metadata"][k]) != files.canonical(v) for k, v in want["metadata"].items()):
        return False
    names = [(files.enum_parts(t) or ("", "?"))[1] for t in got["value_types"].values()]
    return names == [t.name for t in want["value_types"].values()] and got["header"] == want["header"]


def test_mutations_of_a_small_real_file(impl):
    """300 seeded mutations of a small real file's header and metadata (bit flips, bytes set, counts and
    lengths overwritten, bytes cut out or doubled, truncations): each is read exactly as the reference reads
    it, or refused with GGUFError exactly when the reference refuses it."""
    data, view = small_file()
    with files.bounded(impl, 60, "mutated files"):
        for what, mutated in files.mutations(data, 0, view["kv_end"], 300, seed=13):
            want = files.reference_sections(mutated)
            got = files.outcome(what, metadata_of, impl, mutated)
            if want is None:
                assert got is None, f"{what}: the file must be refused with GGUFError, but your code read it"
            else:
                assert got is not None, f"{what}: the reference reads this file, but your code refused it"
                assert same_metadata(got, want), f"{what}: your code reads this file differently from the reference"


def renamed_tokens(path: Path, seed: int, n: int = 2000) -> bytes:
    """The bytes of a real vocabulary file with ``n`` of its tokens changed (seeded): in each, one ASCII
    letter becomes another, so that every length and offset stays and the file is as valid as before, but
    no earlier reading of any file answers for this one."""
    data = bytearray(path.read_bytes())
    at = next(f["offset"] for f in files.ggufpy_view(path)["fields"] if f["key"] == "tokenizer.ggml.tokens")
    pos = at + 8 + struct.unpack_from("<Q", data, at)[0]  # past the key
    vtype, etype, count = struct.unpack_from("<IIQ", data, pos)
    assert (vtype, etype) == (ARR, STR), "the speed files' tokens are an array of strings"
    pos += 16
    spans = []
    for _ in range(count):
        size = struct.unpack_from("<Q", data, pos)[0]
        spans.append((pos + 8, size))
        pos += 8 + size
    rng = random.Random(seed)
    changed = 0
    for i in rng.sample(range(count), count):
        start, size = spans[i]
        letters = [j for j in range(start, start + size) if 0x61 <= data[j] <= 0x7A]
        if letters:
            j = rng.choice(letters)
            data[j] = 0x61 + (data[j] - 0x61 + rng.randint(1, 25)) % 26
            changed += 1
            if changed == n:
                break
    return bytes(data)


def read_timed(impl, data: bytes, name: str, folder: Path) -> tuple[float, dict]:
    """Seconds your Cursor, read_header and read_metadata take on the file ``data`` (opened in the same timed
    call), where your code runs, the result left there (so the pipe's time is not counted); then, untimed, what
    read_metadata returned and where the cursor stood after it. Your worker stays stopped from the moment the
    file is written until its timed call: nothing of the submission can start on the file before its time runs."""
    read = files.timed_call(impl, files.TIMED_METADATA)
    names = (impl.Cursor, impl.read_header, impl.read_metadata)
    with quiet_submissions():
        path = files.file_for(impl, data, name, folder)
        out, seconds = timed(read, *names, str(path), len(data))
    path.unlink()
    result, end = out[0]
    assert type(result) is tuple and len(result) == 2, "read_metadata must return two dicts: (metadata, value_types)"
    return seconds, {"metadata": result[0], "value_types": result[1], "after_metadata": end}


def read_as_the_reference_reads(got: dict, want: dict) -> bool:
    """The keys in order, each value (exact types, dtypes and bytes) and value type, and the final position."""
    if type(got["metadata"]) is not dict or type(got["value_types"]) is not dict:
        return False
    return same_metadata({**got, "header": None}, {**want, "header": None})


SPEED_FILES = [files.MODELS / "ggml-vocab-bert-bge.gguf", files.MODELS / "ggml-vocab-qwen2.gguf",
               files.BIGGEST_VOCAB]
SLOWER = 10  # a loop calling Cursor.string per token takes 3 to 5 times the reference; quadratic, 15 to 100+


def test_speed_on_big_vocabularies(impl, reference, tmp_path):
    """Reading a vocabulary's metadata takes at most 10 times the reference reader's time, measured in the same
    run on BERT's 30k tokens, Qwen's 152k and gemma-4's 262k: fine for a loop over the strings, too slow for
    work that grows with the square of their number (slicing off the rest of the buffer, out = out + [s],
    insert(0, s)). Both results stay where the code ran, so the pipe's time is not counted.

    Each attempt reads a copy of the file of its own, with 2000 of its tokens changed (the reference reader is
    timed on the same copy), so an earlier reading of the file cannot answer; what each timed call read must be
    what the reference reads there."""
    for k, path in enumerate(SPEED_FILES):
        ref_times, best = [], float("inf")
        for attempt in range(3):
            data = renamed_tokens(path, seed=10 * k + attempt)
            theirs = files.file_for(reference, data, path.name, tmp_path)
            for _ in range(3 if attempt == 0 else 1):
                ref_times.append(files.reference_seconds(reference, theirs))
            theirs.unlink()
            limit = SLOWER * min(ref_times)
            with files.bounded(impl, max(30.0, 3 * limit), f"reading {path.name}"):
                seconds, got = read_timed(impl, data, path.name, tmp_path)
            want = files.sections(files.REFERENCE, data, len(data))
            assert read_as_the_reference_reads(got, want), (
                f"reading a copy of {path.name} with some of its tokens changed: your read_metadata read it "
                "differently from the reference (see the checks on the real files)")
            best = min(best, seconds)
            if best <= limit:
                break
        assert best <= limit, (f"reading {path.name} took {best / limit * SLOWER:.0f} times the reference's time "
                               f"(at most {SLOWER} allowed): does some step copy more and more as it goes?")


def test_errors_name_the_key_and_offset(impl):
    """Errors about a value name its key and a byte offset: unknown types, lying counts, truncated and
    non-UTF-8 strings, duplicate keys, and nesting too deep or too wide."""
    key = "tokenizer.ggml.merges"
    cases = [
        lying(key, 13, b"\0" * 8),
        lying(key, ARR, files.array(13, 1, b"\0" * 8)),
        lying(key, ARR, files.array(STR, 2**60)),
        lying(key, STR, files.gstr("Ġ t")[:-1]),
        lying(key, ARR, files.array(STR, 8, _TOKENS)),
        files.header(0, 2) + 2 * files.kv(key, U8, b"\1"),
        lying(key, ARR, files.nested(40)),
        lying(key, ARR, files.array(ARR, 65537, files.array(U8, 0) * 65537)),
    ]
    for data in cases:
        message = str(files.refusal(metadata_of, impl, data))
        assert key in message and "offset" in message, \
            "a GGUFError about a metadata value must name its key and say at which byte offset"
