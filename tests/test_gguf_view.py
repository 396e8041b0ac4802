"""Chapter 13's GGUF views (bytes2logits.lessons.gguf_view), checked against offsets found independently.

The oracle is gguf-py: its GGUFReader records, for every metadata field and tensor info, the byte offset
where the record starts and each part it is made of (so each part's offset is a running sum of the part
sizes), and each tensor's absolute data offset. Files are written by gguf-py's GGUFWriter, so neither the
file nor the offsets come from the code under test.
"""

from __future__ import annotations

import random
import signal
import time

import gguf as ggufpy
import matplotlib
import numpy as np
import pytest

from bytes2logits import assets
from bytes2logits.engine.gguf import GGUFReader
from bytes2logits.lessons import gguf_view as gv

matplotlib.use("Agg")

Q = ggufpy.GGMLQuantizationType


def _words(n: int, rng: random.Random) -> list[str]:
    alphabet = "abcxyzé€🙂 "
    return [f"{i}" + "".join(rng.choice(alphabet) for _ in range(rng.randrange(6))) for i in range(n)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A small file with every value type, nested arrays, 4 kinds of tensor and a 64-byte alignment."""
    rng = random.Random(13)
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    w = ggufpy.GGUFWriter(path, arch="llama")
    w.add_custom_alignment(64)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -5)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -300)
    w.add_uint32("t.u32", 4_000_000_000)
    w.add_int32("t.i32", -7)
    w.add_float32("t.f32", 0.5)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo")
    w.add_uint64("t.u64", 2**40)
    w.add_int64("t.i64", -(2**40))
    w.add_float64("t.f64", 3.25)
    w.add_array("t.words", _words(300, rng))
    w.add_array("t.ints", list(range(50)))
    w.add_array("t.nested", [[1, 2], [3, 4, 5]])
    w.add_array("t.nested_str", [["a", "bé"], ["c"]])
    w.add_tensor("a", np.arange(6, dtype=np.float32).reshape(2, 3))
    w.add_tensor("h", np.arange(24, dtype=np.float16).reshape(2, 3, 4))
    w.add_tensor("q8", np.zeros((3, 68), dtype=np.uint8), raw_dtype=Q.Q8_0)
    w.add_tensor("q41", np.zeros((2, 40), dtype=np.uint8), raw_dtype=Q.Q4_1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return GGUFReader(path), ggufpy.GGUFReader(path)


@pytest.fixture(scope="module")
def smol():
    return GGUFReader(assets.path("smollm2"))


def _parts(field):
    """(offset, nbytes) of each part of a gguf-py ReaderField."""
    pos, out = field.offset, []
    for part in field.parts:
        out.append((pos, part.nbytes))
        pos += part.nbytes
    return out


def _check(reader, offset, section, name, part, detail=None):
    loc = gv.describe_offset(reader, offset)
    assert (loc.section, loc.name, loc.part) == (section, name, part), (offset, str(loc))
    if detail is not None:
        assert detail in loc.detail, (offset, str(loc))
    return loc


def test_layout_covers_every_byte_once(tiny, smol):
    """The spans start at 0, end at the file size, and each starts where the previous one ended."""
    for reader in (tiny[0], smol):
        spans = gv.file_layout(reader)
        assert spans[0].start == 0 and spans[-1].end == reader.size
        assert all(a.end == b.start and a.start < a.end for a, b in zip(spans, spans[1:]))


def test_header_fields(tiny):
    ours, theirs = tiny
    for key, part in (("GGUF.version", "version"), ("GGUF.tensor_count", "tensor count"),
                      ("GGUF.kv_count", "metadata count")):
        (offset, n), = _parts(theirs.fields[key])
        _check(ours, offset, "header", part, "", "byte 0 of")
        _check(ours, offset + n - 1, "header", part, "", f"byte {n - 1} of {n}")
    _check(ours, 0, "header", "magic", "")


def test_every_metadata_part_matches_gguf_py(tiny):
    """Key length, key, value type, value (or value length, or element type and count) at gguf-py's offsets."""
    ours, theirs = tiny
    for key, field in theirs.fields.items():
        if key.startswith("GGUF."):
            continue
        parts = _parts(field)
        names = ["key length", "key", "value type"]
        if field.types[0] == ggufpy.GGUFValueType.STRING:
            names += ["value length", "value"]
        elif field.types[0] == ggufpy.GGUFValueType.ARRAY:
            names += ["element type", "count"] + ["elements"] * (len(parts) - 5)
        else:
            names += ["value"]
        assert len(names) == len(parts), key
        for (offset, n), part in zip(parts, names):
            _check(ours, offset, "metadata", key, part)
            _check(ours, offset + n - 1, "metadata", key, part)


def test_array_elements_are_located(tiny):
    """Inside an array: which string element and whether in its length or its bytes; which number."""
    ours, theirs = tiny
    words = ours.metadata["t.words"]
    parts = _parts(theirs.fields["t.words"])[5:]          # length, bytes, length, bytes ...
    for i in range(len(words)):
        (len_at, _), (bytes_at, n) = parts[2 * i], parts[2 * i + 1]
        _check(ours, len_at, "metadata", "t.words", "elements", f"element {i:,} of {len(words):,}")
        assert "its length" in gv.describe_offset(ours, len_at + 7).detail
        if n:
            loc = _check(ours, bytes_at + n - 1, "metadata", "t.words", "elements", f"element {i:,} of")
            assert f"its byte {n - 1} of {n}" in loc.detail
    for i, (offset, n) in enumerate(_parts(theirs.fields["t.ints"])[5:]):
        loc = _check(ours, offset + n - 1, "metadata", "t.ints", "elements", f"element {i} of 50")
        assert f"value {i}" in loc.detail


def test_nested_arrays_are_located(tiny):
    """gguf-py lists a nested array's parts in order: inner type, inner count, elements, for each inner array."""
    ours, theirs = tiny
    parts = _parts(theirs.fields["t.nested"])[5:]
    expected = ["[0]: its element type", "[0]: its count (2)", "[0]: element 0 (int32, value 1)",
                "[0]: element 1 (int32, value 2)", "[1]: its element type", "[1]: its count (3)",
                "[1]: element 0 (int32, value 3)", "[1]: element 1 (int32, value 4)",
                "[1]: element 2 (int32, value 5)"]
    assert len(parts) == len(expected)
    for (offset, n), text in zip(parts, expected):
        _check(ours, offset + n - 1, "metadata", "t.nested", "elements", "inner array " + text)
    parts = _parts(theirs.fields["t.nested_str"])[5:]
    # [type, count, len 'a', 'a', len 'bé', 'bé', type, count, len 'c', 'c']
    assert "[0]: element 1 ('bé'), its byte 2 of 3" in gv.describe_offset(ours, parts[5][0] + 2).detail
    assert "[1]: element 0 ('c'), its length" in gv.describe_offset(ours, parts[8][0]).detail


def test_tensor_infos_match_gguf_py(tiny):
    ours, theirs = tiny
    names = ["name length", "name", "n_dims", "dims", "ggml type", "data offset"]
    for t in theirs.tensors:
        parts = _parts(t.field)
        # gguf-py keeps the dims as one part
        assert len(parts) == len(names), t.name
        for (offset, n), part in zip(parts, names):
            _check(ours, offset, "tensor info", t.name, part)
            _check(ours, offset + n - 1, "tensor info", t.name, part)


def test_tensor_rows_and_blocks(tiny):
    """First and last byte of each tensor's data, and bytes inside a block, at gguf-py's data offsets."""
    ours, theirs = tiny
    by_name = {t.name: t for t in theirs.tensors}
    q8 = by_name["q8"]
    block, size = ggufpy.GGML_QUANT_SIZES[Q.Q8_0]
    row_bytes = 64 // block * size
    _check(ours, int(q8.data_offset), "tensor data", "q8", "Q8_0", "row 0 of 3, block 0 of 2 (elements 0–31), byte 0")
    _check(ours, int(q8.data_offset) + 2 * row_bytes + size + 3, "tensor data", "q8", "Q8_0",
           f"row 2 of 3, block 1 of 2 (elements 32–63), byte 3 of {size}")
    q41 = by_name["q41"]
    _check(ours, int(q41.data_offset + q41.n_bytes) - 1, "tensor data", "q41", "Q4_1",
           f"row 1 of 2, block 1 of 2 (elements 32–63), byte {ggufpy.GGML_QUANT_SIZES[Q.Q4_1][1] - 1} of 20")
    h = by_name["h"]                                      # NumPy shape (2, 3, 4), F16
    flat = int(np.ravel_multi_index((1, 2, 3), (2, 3, 4)))
    _check(ours, int(h.data_offset) + 2 * flat + 1, "tensor data", "h", "F16",
           "row (1, 2) of (2, 3), element 3 of 4, byte 1 of 2")
    a = by_name["a"]
    _check(ours, int(a.data_offset) + 4 * 4, "tensor data", "a", "F32", "row 1 of 2, element 1 of 3, byte 0 of 4")


def test_padding_is_where_gguf_py_says(tiny):
    """Padding fills the gap to gguf-py's data offset and the gaps between tensors; all of it is zeros."""
    ours, theirs = tiny
    last = theirs.tensors[-1].field
    infos_end = sum(_parts(last)[-1])
    assert theirs.data_offset % 64 == 0 and theirs.data_offset > infos_end
    _check(ours, infos_end, "padding", "", "to the alignment before the data")
    _check(ours, int(theirs.data_offset) - 1, "padding", "", "to the alignment before the data")
    ends = sorted((int(t.data_offset), int(t.data_offset + t.n_bytes)) for t in theirs.tensors)
    raw = np.fromfile(ours.path, dtype=np.uint8)
    for (_, end), (start, _) in zip(ends, ends[1:]):
        if start > end:
            _check(ours, end, "padding", "", "between tensors")
            assert not raw[end:start].any()
    assert not raw[infos_end:int(theirs.data_offset)].any()


def test_sizes_add_up(tiny):
    """Per section and per key, the byte counts equal the distances between gguf-py's record offsets."""
    ours, theirs = tiny
    sizes = gv.section_sizes(ours)
    assert sum(sizes.values()) == ours.size
    fields = [f for k, f in theirs.fields.items() if not k.startswith("GGUF.")]
    first_info = theirs.tensors[0].field.offset
    infos_end = sum(_parts(theirs.tensors[-1].field)[-1])
    assert sizes["header"] == fields[0].offset == 24
    assert sizes["metadata"] == first_info - 24
    assert sizes["tensor infos"] == infos_end - first_info
    assert sizes["tensor data"] == sum(int(t.n_bytes) for t in theirs.tensors)
    per_key = gv.metadata_sizes(ours)
    bounds = [f.offset for f in fields] + [first_info]
    assert list(per_key) == [f.name for f in fields]
    assert list(per_key.values()) == [b - a for a, b in zip(bounds, bounds[1:])]


def test_offsets_outside_the_file_are_refused(tiny):
    ours, _ = tiny
    for bad in (-1, ours.size, ours.size + 10):
        with pytest.raises(ValueError):
            gv.describe_offset(ours, bad)
    assert gv.describe_offset(ours, ours.size - 1).offset == ours.size - 1


def test_smollm2_landmarks(smol):
    """On the real model: the first data byte is row 0 of token_embd; the kinds add up to the tensor data."""
    loc = gv.describe_offset(smol, smol.data_offset)
    assert (loc.section, loc.name) == ("tensor data", "token_embd.weight") and loc.detail.startswith("row 0 of 49,152")
    tokens = smol.metadata["tokenizer.ggml.tokens"]
    elements = next(s for s in gv.file_layout(smol) if s.name == "tokenizer.ggml.tokens" and s.part == "elements")
    offset = elements.start + sum(8 + len(t.encode()) for t in tokens[:1000])
    assert gv.describe_offset(smol, offset).detail.startswith(f"element 1,000 of 49,152 ({tokens[1000]!r})")
    kinds = gv.data_by_kind(smol)
    assert sum(k["bytes"] for k in kinds.values()) == gv.section_sizes(smol)["tensor data"]
    layers = smol.metadata["llama.block_count"]
    assert {k: v["tensors"] for k, v in kinds.items()} == {
        "token_embd": 1, "norms": 2 * layers + 1, **{k: layers for k in (
            "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")}}


def test_tensor_kind_names_follow_gguf_py():
    """tensor_kind strips the block prefix and suffix of the names gguf-py maps Hugging Face names to."""
    names = ggufpy.get_tensor_name_map(ggufpy.MODEL_ARCH.LLAMA, 2)
    cases = {"model.layers.1.self_attn.q_proj": "attn_q", "model.layers.0.mlp.down_proj": "ffn_down",
             "model.layers.1.input_layernorm": "norms", "model.norm": "norms", "model.embed_tokens": "token_embd",
             "lm_head": "output"}
    for hf, kind in cases.items():
        assert gv.tensor_kind(names.get_name(hf + ".weight", try_suffixes=(".weight",))) == kind


def test_offset_html_marks_the_byte_and_escapes(tmp_path):
    path = tmp_path / "x.gguf"
    w = ggufpy.GGUFWriter(path, arch="llama")
    w.add_string("a<b>", "<script>")
    w.add_tensor("<i>t</i>", np.ones(8, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = GGUFReader(path)
    value = next(s for s in gv.file_layout(r) if s.name == "a<b>" and s.part == "value")
    text = gv.offset_html(r, value.start + 1)
    assert "<b>" not in text.replace("<b>byte", "") and "a&lt;b&gt;" in text
    marked = text.split("font-weight:bold'>")[1][:2]
    assert marked == f"{ord('s'):02x}"
    assert "&lt;i&gt;t&lt;/i&gt;" in gv.offset_html(r, r.data_offset)


def test_explorer_widget_follows_the_slider(tiny):
    ours, _ = tiny
    box = gv.offset_explorer(ours)
    (number, jump), slider, out = box.children[0].children, box.children[1], box.children[2]
    slider.value = 100
    assert number.value == 100 and str(gv.describe_offset(ours, 100)) in out.value.replace("&#x27;", "'")
    target = gv.landmarks(ours)[next(k for k in gv.landmarks(ours) if k.startswith("tensor data: first"))]
    jump.value = target
    assert slider.value == target and "tensor data" in out.value


def test_layout_figure_draws_the_sizes(smol):
    fig = gv.layout_figure(smol)
    top, middle, bottom = fig.axes[:3]
    assert sum(p.get_width() for p in top.patches) == smol.size
    assert sum(p.get_width() for p in middle.patches) == smol.data_offset
    assert [t.get_text() for t in bottom.get_yticklabels()] == list(gv.data_by_kind(smol))
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_time_limit():
    start = time.perf_counter()
    with pytest.raises(gv.TimeLimit):
        with gv.time_limit(0.2):
            while True:
                pass
    assert time.perf_counter() - start < 2
    handler = signal.getsignal(signal.SIGALRM)
    with gv.time_limit(0.1):
        sum(range(1000))
    time.sleep(0.25)  # the timer was cancelled: nothing fires after the block
    assert signal.getsignal(signal.SIGALRM) is handler


def test_resident_memory_counts_touched_pages_of_a_map():
    """On Linux, summing a tensor of a freshly opened map adds about its size in file-backed pages."""
    before = gv.resident_memory()
    if before is None or "file-backed" not in before:
        pytest.skip("file-backed resident memory is not reported here")
    with GGUFReader(assets.path("smollm2")) as r:
        view = r.tensor_bytes("blk.5.ffn_up.weight")
        opened = gv.resident_memory()
        int(view.sum(dtype=np.uint64))
        touched = gv.resident_memory()
        nbytes = r.tensors["blk.5.ffn_up.weight"].nbytes
        del view
    assert all(isinstance(v, int) for v in touched.values())
    assert touched["file-backed"] - opened["file-backed"] >= 0.9 * nbytes
