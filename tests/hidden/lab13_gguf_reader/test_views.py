"""Hidden suite, lab 13 task 4: tensor_array, tensor data as read-only views into the file, never copies.

SmolLM2's tensors are viewed *in the worker*, from a memory map opened there, and stay there: the checks
ask for each view's shape, dtype and address range (NumPy's byte_bounds) rather than its 97 MB of bytes,
and measure the worker's memory while it makes them. A handful of tensors cross whole, to be compared
with gguf-py's bytes.
"""

import hashlib
import runpy
from pathlib import Path
from types import SimpleNamespace

from bytes2logits.kit.remote import peak_memory

files = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("gguf_files.py"))))
gguf = files.gguf

# NumPy dtype of each unquantized type, as the task specifies: gguf-py's own dtype, except BF16 (gguf-py
# gives its raw bytes; the lab gives uint16 bit patterns).
UNQUANTIZED = {int(gguf.GGMLQuantizationType[n]): d for n, d in (
    ("F32", "<f4"), ("F16", "<f2"), ("BF16", "<u2"), ("F64", "<f8"), ("I8", "|i1"), ("I16", "<i2"),
    ("I32", "<i4"), ("I64", "<i8"))}


def expected_view(t: dict) -> tuple[str, tuple]:
    """(dtype, shape) of a tensor's view, from gguf-py's record: NumPy order for unquantized types, and
    (rows, bytes per row) of blocks for quantized ones (gguf-py keeps every leading dimension)."""
    if t["type"] in UNQUANTIZED:
        return UNQUANTIZED[t["type"]], tuple(reversed(t["dims"]))
    rows = 1
    for d in t["shape"][:-1]:
        rows *= d
    return "|u1", (rows, t["shape"][-1])


def worker_infos(impl, view: dict) -> list:
    """TensorInfo objects for gguf-py's records, built where the code under test runs (its own classes)."""
    tensor_info, ggml_type = files.where(impl, "TensorInfo"), files.where(impl, "GGMLType")
    members = {t: ggml_type(t) for t in {t["type"] for t in view["tensors"]}}
    return [tensor_info(t["name"], tuple(t["dims"]), members[t["type"]], t["offset"], t["nbytes"])
            for t in view["tensors"]]


class SmolLM2:
    """SmolLM2 mapped where the code under test runs, with a TensorInfo there for each of its tensors."""

    def __init__(self, impl):
        self.impl = impl
        self.view = files.ggufpy_view(files.SMOLLM2)
        self.np = files.where(impl, "np")
        self.map = files.open_map(impl, files.SMOLLM2)
        self.infos = worker_infos(impl, self.view)
        self.info_array = self.np.array(self.infos, dtype="O")
        self.maps = files.object_array(impl, [self.map])

    def views(self, raw: bool = False):
        """Every tensor's view, made by the learner's tensor_array and left in the worker (an object array)."""
        if raw:
            return files.boxed(self.impl, self.impl.tensor_array, 3)(self.maps, self.info_array, True)
        return files.boxed(self.impl, self.impl.tensor_array, 2)(self.maps, self.info_array)

    def bounds(self, views) -> list[tuple[int, int]]:
        """Each view's [first, last + 1) byte address, relative to the start of the map."""
        byte_bounds = self.np.lib.array_utils.byte_bounds
        whole = files.boxed(self.impl, self.np.frombuffer, 1)(self.maps)
        base = files.boxed(self.impl, byte_bounds, 1)(whole).tolist()[0][0]
        return [(lo - base, hi - base) for lo, hi in files.boxed(self.impl, byte_bounds, 1)(views).tolist()]

    def shapes_and_dtypes(self, views, dtypes: list[str]) -> tuple[list, list]:
        shapes = files.boxed(self.impl, self.np.shape, 1)(views).tolist()
        same = files.boxed(self.impl, self.np.can_cast, 3)(views, self.np.array(dtypes, dtype="O"), "no").tolist()
        return [tuple(s) for s in shapes], same


def test_smollm2_tensors_equal_gguf_py(impl):
    """A handful of SmolLM2's tensors (F32 norms, Q4_1 weights) come back with gguf-py's bytes, the dtype and
    NumPy shape the task gives (quantized: rows of blocks), and raw=True gives their bytes flat."""
    view = files.ggufpy_view(files.SMOLLM2)
    chosen = {"output_norm.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.weight", "blk.15.ffn_gate.weight",
              "blk.29.attn_v.weight"}
    records = [t for t in view["tensors"] if t["name"] in chosen]
    assert len(records) == len(chosen)
    mm = files.open_map(impl, files.SMOLLM2)
    for t, info in zip(records, worker_infos(impl, {"tensors": records})):
        got = impl.tensor_array(mm, info)
        dtype, shape = expected_view(t)
        assert type(got) is files.np.ndarray, "tensor_array must return a NumPy array"
        assert got.dtype.str == dtype and got.shape == shape, f"{t['name']}: wrong dtype or shape"
        assert hashlib.sha256(got.tobytes()).hexdigest() == t["sha256"], f"{t['name']}: not gguf-py's bytes"
        raw = impl.tensor_array(mm, info, raw=True)
        assert raw.dtype.str == "|u1" and raw.shape == (t["nbytes"],), "raw=True gives the bytes as flat uint8"
        assert hashlib.sha256(raw.tobytes()).hexdigest() == t["sha256"], f"{t['name']}: raw bytes differ from gguf-py's"


def test_every_smollm2_view_lies_at_its_tensor(impl):
    """Each of SmolLM2's 272 views is memory of the map itself, starting exactly at its tensor's offset and
    spanning exactly its bytes, with the dtype and shape the task gives: a view, not a copy."""
    smol = SmolLM2(impl)
    views = smol.views()
    want = [expected_view(t) for t in smol.view["tensors"]]
    shapes, same_dtype = smol.shapes_and_dtypes(views, [w[0] for w in want])
    for t, (dtype, shape), got_shape, ok in zip(smol.view["tensors"], want, shapes, same_dtype):
        assert ok, f"{t['name']}: the view must have dtype {dtype}"
        assert got_shape == shape, f"{t['name']}: the view has the wrong shape"
    for t, (lo, hi) in zip(smol.view["tensors"], smol.bounds(views)):
        assert 0 <= lo < hi <= files.SMOLLM2.stat().st_size, \
            f"{t['name']}: the array is not memory of the file's map (a copy?)"
        assert (lo, hi) == (t["offset"], t["offset"] + t["nbytes"]), \
            f"{t['name']}: the view must start at the tensor's offset in the map and span its bytes"


def test_every_smollm2_raw_view_lies_at_its_tensor(impl):
    """With raw=True each of the 272 views is flat uint8 memory of the map, exactly the tensor's bytes."""
    smol = SmolLM2(impl)
    views = smol.views(raw=True)
    shapes, same_dtype = smol.shapes_and_dtypes(views, ["|u1"] * len(smol.infos))
    for t, shape, ok, (lo, hi) in zip(smol.view["tensors"], shapes, same_dtype, smol.bounds(views)):
        assert ok and shape == (t["nbytes"],), f"{t['name']}: raw=True must give flat uint8, one per byte"
        assert (lo, hi) == (t["offset"], t["offset"] + t["nbytes"]), \
            f"{t['name']}: the raw view must be the map's memory at the tensor's offset"


def test_viewing_every_tensor_copies_nothing(impl):
    """Viewing all 272 tensors of SmolLM2 (97 MB) and keeping the views costs the worker almost no memory
    (under 5% of the bytes): nothing is copied and no page of the file is read."""
    smol = SmolLM2(impl)
    total = sum(t["nbytes"] for t in smol.view["tensors"])
    with peak_memory(impl) as peak:
        views = smol.views()
    assert len(views) == len(smol.infos)
    assert peak.peak < total // 20, (f"viewing every tensor took {peak.peak / 2**20:.0f} MB for "
                                     f"{total / 2**20:.0f} MB of tensors: something copies or reads the data")


def test_views_are_read_only(impl):
    """Views of a read-only map are read-only: NumPy must copy any of SmolLM2's F32 tensors to get a writeable
    array (np.require(view, None, "W") gives a new array rather than the view itself)."""
    smol = SmolLM2(impl)
    f32 = [i for i, t in enumerate(smol.view["tensors"]) if t["type"] == 0]
    views = smol.np.take(smol.views(), f32)
    writeable = files.boxed(impl, smol.np.require, 3)(views, None, "W")
    for i, before, now in zip(f32, smol.bounds(views), smol.bounds(writeable)):
        assert now != before, f"{smol.view['tensors'][i]['name']}: the view is writeable; a view of a read-only " \
            "map cannot be"


def test_every_type_written_by_gguf_py(impl):
    """On a file gguf-py's writer wrote with 22 tensor types (every unquantized one, BF16 as uint16 bit
    patterns, 1 to 4 dimensions; legacy, K- and i-quants as rows of blocks, one 3-D), each view has the
    task's dtype and shape and gguf-py's bytes, read from a bytes buffer."""
    data = files.many_types_file()
    view = files.ggufpy_view_of_bytes(data)
    for t, info in zip(view["tensors"], worker_infos(impl, view)):
        got = impl.tensor_array(data, info)
        dtype, shape = expected_view(t)
        assert got.dtype.str == dtype and got.shape == shape, f"a {t['name'].split('.')[-1].upper()} tensor: " \
            "wrong dtype or shape"
        assert hashlib.sha256(got.tobytes()).hexdigest() == t["sha256"], \
            f"a {t['name'].split('.')[-1].upper()} tensor: not gguf-py's bytes"
