"""Hidden suite, lab 13 task 3: read_alignment, read_tensor_infos and place_tensors, against gguf-py on
SmolLM2 and on files its writer wrote, and on records that lie.

The suite puts the cursor where the tensor records start itself (gguf-py says where), so these checks
use your Cursor from task 1 but not your metadata reader from task 2.
"""

import random
import runpy
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest

from bytes2logits.kit.remote import quiet_submissions, timed

files = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("gguf_files.py"))))
GGUFError = files.GGUFError
gguf = files.gguf
F32, F16, Q8_0, Q4_K = 0, 1, 8, 12
U32, I32, STR, U64 = 4, 5, 8, 10


def align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def records_of(impl, buf, size: int, start: int, n_tensors: int, alignment: int = 32):
    """The learner's read_tensor_infos from byte ``start``: (records as plain tuples, position after them)."""
    c = impl.Cursor(buf, size)
    c.pos = start
    infos = impl.read_tensor_infos(c, n_tensors, alignment)
    return infos, plain_records(infos, n_tensors), c.pos


def plain_records(infos, n_tensors: int) -> list[tuple]:
    """The learner's tensor records as plain tuples, the ggml type as its value; each checked on the way."""
    assert type(infos) is list and len(infos) == n_tensors, \
        "read_tensor_infos must return a list, one record per tensor"
    out = []
    for info in infos:
        assert isinstance(info, tuple) and len(info) == 6, \
            "each record must be a RawTensorInfo(name, dims, ggml_type, offset, nbytes, at)"
        parts = files.enum_parts(info[2])
        assert parts is not None and parts[0] == "GGMLType", "a record's ggml_type must be a GGMLType member"
        assert type(info[1]) is tuple and all(type(d) is int for d in info[1]), "dims must be a tuple of ints"
        out.append((info[0], info[1], parts[2], info[3], info[4], info[5]))
    return out


def tensors_of(impl, data: bytes, n_tensors: int, start: int = 24, alignment: int = 32):
    """Records read from ``start``, then placed: the learner's read_tensor_infos and place_tensors."""
    infos, _, end = records_of(impl, data, len(data), start, n_tensors, alignment)
    return files.tensor_records(impl.place_tensors(files.raw_infos(infos), align(end, alignment), len(data)))


def view_records(view: dict) -> list[tuple]:
    """gguf-py's records in the form of :func:`records_of`: offsets relative to the data section."""
    d = view["data_offset"]
    return [(t["name"], tuple(t["dims"]), t["type"], t["offset"] - d, t["nbytes"], t["at"]) for t in view["tensors"]]


def view_tensors(view: dict) -> list[tuple]:
    return [(t["name"], t["name"], tuple(t["dims"]), t["type"], t["offset"], t["nbytes"]) for t in view["tensors"]]


def test_smollm2_records_match_gguf_py(impl):
    """All 272 records of SmolLM2, in file order: name, dims (GGUF order), ggml type, relative offset, byte
    size and where each record starts, as gguf-py reads them; the cursor ends where the records end."""
    view = files.ggufpy_view(files.SMOLLM2)
    mm = files.open_map(impl, files.SMOLLM2)
    _, got, end = records_of(impl, mm, files.SMOLLM2.stat().st_size, view["kv_end"], view["n_tensors"])
    want = view_records(view)
    assert [r[0] for r in got] == [r[0] for r in want], "not gguf-py's tensor names in file order"
    for g, w in zip(got, want):
        assert g[1:3] == w[1:3], f"{w[0]}: dims or ggml type differ from gguf-py's"
        assert g[3:5] == w[3:5], f"{w[0]}: relative offset or byte size differ from gguf-py's"
        assert g[5] == w[5], f"{w[0]}: `at` must be the byte offset where the record starts"
    assert end == view["infos_end"], "after the records the cursor must stand just past the last one"
    assert align(end, 32) == view["data_offset"], "the data section must start where gguf-py says"


def gguf_py_records(impl, view: dict) -> list:
    """gguf-py's records as RawTensorInfo, their ggml_type the worker's own GGMLType member."""
    from bytes2logits.engine.gguf import RawTensorInfo

    ggml_type = files.where(impl, "GGMLType")
    members = {t: ggml_type(t) for t in {t["type"] for t in view["tensors"]}}
    return [RawTensorInfo(n, d, members[t], o, b, a) for n, d, t, o, b, a in view_records(view)]


def test_smollm2_tensors_are_placed_as_gguf_py_places_them(impl):
    """place_tensors turns SmolLM2's records into {name: TensorInfo} in file order, each at gguf-py's absolute
    offset with its byte size."""
    view = files.ggufpy_view(files.SMOLLM2)
    placed = impl.place_tensors(gguf_py_records(impl, view), view["data_offset"], files.SMOLLM2.stat().st_size)
    got = files.tensor_records(placed)
    want = view_tensors(view)
    assert [g[0] for g in got] == [w[0] for w in want], "the dict must hold every tensor, keyed by name, in file order"
    for g, w in zip(got, want):
        assert g == w, f"{w[0]}: not gguf-py's name, dims, type, absolute offset and size"


def test_alignment(impl):
    """read_alignment gives general.alignment (gguf-py's value on files written with 1, 8, 64 and 4096) or 32
    when absent, and refuses one that is not a power of two stored as UINT32 (3, 0, 96, a UINT64, a string)."""
    value_type = files.where(impl, "ValueType")
    assert impl.read_alignment({}, {}) == 32, "a file without general.alignment is aligned to 32"
    assert impl.read_alignment({"general.name": "x"}, {"general.name": value_type(STR)}) == 32
    for a in (1, 8, 64, 4096):
        view = files.ggufpy_view_of_bytes(files.written(lambda w: w.add_uint32("x", 1), alignment=a))
        got = impl.read_alignment({"general.alignment": a}, {"general.alignment": value_type(U32)})
        assert type(got) is int and got == view["alignment"] == a, "read_alignment must give general.alignment"
    for value, vtype in ((3, U32), (0, U32), (96, U32), (2**31 + 1, U32), (32, U64), (32, I32), ("32", STR)):
        files.refusal(impl.read_alignment, {"general.alignment": value}, {"general.alignment": value_type(vtype)})


@pytest.mark.parametrize("alignment", [None, 1, 64, 4096], ids=lambda a: f"alignment {a or 32}")
def test_written_files_match_gguf_py(impl, alignment):
    """A file gguf-py's writer wrote with 22 tensor types (every unquantized one, legacy, K- and i-quants),
    one to four dimensions and the given alignment: records, data section and placement as gguf-py reads them."""
    data = files.many_types_file(alignment)
    view = files.ggufpy_view_of_bytes(data)
    a = view["alignment"]
    infos, got, end = records_of(impl, data, len(data), view["kv_end"], view["n_tensors"], a)
    assert got == view_records(view), "the records differ from gguf-py's (name, dims, type, offset, size, at)"
    assert align(end, a) == view["data_offset"], "the data section must start where gguf-py says"
    placed = impl.place_tensors(files.raw_infos(infos), view["data_offset"], len(data))
    assert files.tensor_records(placed) == view_tensors(view), "the placed tensors differ from gguf-py's"


NAME = "blk.7.ffn_up.weight"


def info(name=NAME, dims=(8,), ttype=F32, offset=0, n_dims=None):
    return files.tensor_info(name, dims, ttype, offset, n_dims)


def one(record: bytes, data: bytes = bytes(64)) -> tuple[bytes, int]:
    return files.gguf_file(infos=[record], data=data), 1


def many(*records: bytes, data: bytes = bytes(256)) -> tuple[bytes, int]:
    return files.gguf_file(infos=list(records), data=data), len(records)


HOSTILE = {
    "5 dimensions": one(info(dims=(8, 1, 1, 1, 1))),
    "no dimension": one(info(dims=())),
    "2**32-1 dimensions": one(info(dims=(8, 1), n_dims=2**32 - 1)),
    "a zero dimension": one(info(dims=(8, 0))),
    "retired type 4": one(info(ttype=4)),
    "unknown type 99": one(info(ttype=99)),
    "type 2**32-1": one(info(ttype=2**32 - 1)),
    "offset not aligned": one(info(offset=16)),
    "row not whole blocks": one(info(dims=(31, 2), ttype=Q8_0)),
    "K-quant row not whole blocks": one(info(dims=(255,), ttype=Q4_K)),
    "one byte past the end": one(info(dims=(16,)), data=bytes(63)),
    "offset far past the end": one(info(offset=2**63)),
    "dims whose product wraps 64 bits": one(info(dims=(2**32, 2**32))),
    "four huge dims": one(info(dims=(2**63, 2**63, 2**63, 2**63))),
    "the same bytes twice": many(info("a"), info("b")),
    "a partial overlap": many(info("a", dims=(16,)), info("b", offset=32)),
    "an overlap two records apart": many(info("a", dims=(16,)), info("b", offset=64), info("c", offset=32)),
    "duplicate names": many(info("a"), info("a", offset=32)),
    "name not UTF-8": one(info(b"blk.\xff.weight")),
    "name of 2**63 bytes": (files.header(1, 0) + struct.pack("<Q", 2**63) + bytes(40), 1),
    "a record cut short": (files.header(2, 0) + info("a") + info("b", offset=32)[:-3], 2),
}


@pytest.mark.parametrize("case", HOSTILE, ids=str)
def test_records_that_lie_are_refused(impl, case):
    """Too many or no dimensions, a zero one, unknown types, misaligned offsets, rows that are not whole blocks,
    bytes past the end (sizes computed without overflow), overlaps, duplicate names, bad names, cut records:
    each is a GGUFError (never IndexError, OverflowError, struct.error or a hang)."""
    data, n = HOSTILE[case]
    with files.bounded(impl, 20, case):
        files.refusal(tensors_of, impl, data, n)


def test_mutations_of_a_small_real_files_records(impl):
    """300 seeded mutations of a small real file's tensor records and data (bit flips, bytes set, sizes and
    offsets overwritten, bytes cut out or doubled, truncations): each is placed exactly as the reference
    places it, or refused with GGUFError exactly when the reference refuses it."""
    data = files.small_real_file()
    view = files.ggufpy_view_of_bytes(data)
    start, n = view["kv_end"], view["n_tensors"]
    cases = list(files.mutations(data, start, view["infos_end"], 250, seed=31))
    cases += list(files.mutations(data, view["infos_end"], len(data), 50, seed=32))
    with files.bounded(impl, 60, "mutated files"):
        for what, mutated in cases:
            try:
                want = tensors_of(files.REFERENCE, mutated, n, start)
            except GGUFError:
                want = None
            got = files.outcome(what, tensors_of, impl, mutated, n, start)
            if want is None:
                assert got is None, f"{what}: the records must be refused with GGUFError, but your code read them"
            else:
                assert got is not None, f"{what}: the reference reads these records, but your code refused them"
                assert got == want, f"{what}: your code reads these records differently from the reference"


def many_tensors_file(n: int, seed: int = 0) -> bytes:
    """A file of ``n`` F32 tensors of 32 bytes each, no metadata, their data in shuffled order (``seed`` picks
    the order, and so every tensor's offset)."""
    slots = list(range(n))
    random.Random(n if seed == 0 else f"{n}/{seed}").shuffle(slots)
    records = [info(f"t.{i}", offset=32 * s) for i, s in enumerate(slots)]
    return files.gguf_file(infos=records, data=bytes(32 * n))


def place_timed(impl, data: bytes, n: int, folder: Path) -> tuple[float, list, list, int]:
    """Seconds your read_tensor_infos and place_tensors take on the ``n`` records of the file ``data`` (the
    file opened and your Cursor made in the same timed call), where your code runs, their results left there
    (so the pipe's time is not counted); then, untimed, what each returned: the records as plain tuples, the
    placed tensors as :func:`files.tensor_records`, and where the cursor stood after the records. Your worker
    stays stopped from the moment the file is written until its timed call."""
    place = files.timed_call(impl, files.TIMED_PLACEMENT)
    names = (impl.Cursor, impl.read_tensor_infos, impl.place_tensors)
    with quiet_submissions():
        path = files.file_for(impl, data, "many.gguf", folder)
        out, seconds = timed(place, *names, str(path), n, len(data))
    records, placed, end = out[0]
    return seconds, plain_records(records, n), files.tensor_records(placed), end


def test_tensor_records_are_read_and_placed_in_n_log_n(impl, reference, tmp_path):
    """Reading and placing 1000, then 5000 tensors whose data lie in shuffled order takes at most 5 times the
    reference reader's time on the same file, measured in the same run: sort by offset and compare
    neighbours, never every pair. Both results stay where the code ran, so the pipe's time is not counted.

    Each attempt is a file of its own (another order of the data, the reference reader timed on the same file),
    and what each timed call returned must be what the reference reads there."""
    for n in (1000, 5000):
        ref_times, best = [], float("inf")
        for attempt in range(2):
            data = many_tensors_file(n, seed=attempt + 1)
            theirs = files.file_for(reference, data, "many.gguf", tmp_path)
            for _ in range(3 if attempt == 0 else 1):
                ref_times.append(files.reference_seconds(reference, theirs))
            limit = 5 * min(ref_times)
            with files.bounded(impl, max(30.0, 3 * limit), f"{n} tensors"):
                seconds, records, tensors, end = place_timed(impl, data, n, tmp_path)
            want_infos, want_records, want_end = records_of(files.REFERENCE, data, len(data), 24, n)
            assert records == want_records and end == want_end, \
                f"{n} tensors: your read_tensor_infos read the records differently from the reference"
            want = files.tensor_records(files.REFERENCE.place_tensors(want_infos, align(want_end, 32), len(data)))
            assert tensors == want, f"{n} tensors: your place_tensors placed them differently from the reference"
            best = min(best, seconds)
            if best <= limit:
                break
        assert best <= limit, (f"reading and placing {n} tensors took {5 * best / limit:.0f} times the reference's "
                               "time (at most 5): does the overlap check compare every pair?")


def test_errors_name_the_tensor_and_offset(impl):
    """Errors about a record name its tensor and a byte offset: dimensions, types, alignment, bytes past the
    end, overlaps and duplicates."""
    cases = [one(info(dims=(8, 1, 1, 1, 1))), one(info(dims=(8, 0))), one(info(ttype=99)), one(info(offset=16)),
             one(info(dims=(16,)), data=bytes(63)), many(info("a", dims=(16,)), info(NAME, offset=32)),
             many(info(), info(offset=32))]
    for data, n in cases:
        message = str(files.refusal(tensors_of, impl, data, n))
        assert NAME in message and "offset" in message, \
            "a GGUFError about a tensor must name the tensor and say at which byte offset"
