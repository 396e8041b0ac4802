"""Hidden suite, lab 15 task 1: _half, _nibbles and the Q8_0, Q4_0, Q4_1 kernels, bit for bit gguf-py's."""

import runpy
import zlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from bytes2logits.engine.gguf import GGMLType

B = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("blocks.py"))))
# No shrinking: a learner sees the check's name and message, never the example, so a smaller one only costs time.
FAST = {"phases": (Phase.explicit, Phase.reuse, Phase.generate), "report_multiple_bugs": False}
LEGACY = [GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_1]
by_name = pytest.mark.parametrize("ggml_type", LEGACY, ids=lambda t: t.name)


def test_half_widens_every_fp16_exactly(impl):
    """_half(blocks, start) widens the fp16 at byte start of every block to float32 (n, 1), every bit kept.

    Subnormals, infinities, -0 and NaN payloads included."""
    edges = np.array(list(B.EDGE_HALVES), dtype="<u2")
    for ggml_type, starts in [(GGMLType.Q4_1, (0, 2)), (GGMLType.Q8_0, (0,)), (GGMLType.Q6_K, (208,))]:
        raw = B.ordinary_blocks(ggml_type, 3 * edges.size, seed=1)
        for k, start in enumerate(starts):
            B._set_half(raw, slice(None), start, np.roll(np.tile(edges, 3), 7 * k))
        for start in starts:
            got = impl._half(raw, start)
            assert type(got) is np.ndarray and got.dtype == np.float32 and got.shape == (raw.shape[0], 1), \
                "_half returns a float32 column: shape (n_blocks, 1)"
            want = np.ascontiguousarray(raw[:, start : start + 2]).view("<f2").astype(np.float32)
            bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
            if bad.size:
                bits = int(raw[bad[0], start]) | int(raw[bad[0], start + 1]) << 8
                kind = B.EDGE_HALVES.get(bits, "an ordinary half")
                raise AssertionError(f"_half(blocks, {start}) widens {kind} to the wrong float32 bits: view the two "
                                     "bytes as fp16, then .astype(np.float32)")


def test_nibbles_low_halves_then_high_halves(impl):
    """_nibbles(qs) puts every byte's low 4 bits in columns 0..k-1 and its high 4 bits in columns k..2k-1 (uint8)."""
    rng = np.random.default_rng(2)
    for shape in [(5, 16), (300, 16), (1, 1), (7, 64)]:
        qs = rng.integers(0, 256, size=shape, dtype=np.uint8)
        got = impl._nibbles(qs)
        assert type(got) is np.ndarray and got.dtype == np.uint8 and got.shape == (shape[0], 2 * shape[1]), \
            "_nibbles of (n, k) bytes is a uint8 array of shape (n, 2k)"
        low, high = qs % 16, qs // 16
        assert np.array_equal(got[:, : shape[1]], low), "columns 0..k-1 hold the low nibbles (byte & 15), in order"
        assert np.array_equal(got[:, shape[1] :], high), "columns k..2k-1 hold the high nibbles (byte >> 4), in order"


@by_name
def test_random_blocks_match_gguf_py(impl, ggml_type):
    """Thousands of random blocks with ordinary scales (several of dequantize's chunks): gguf-py's float32 bits."""
    raw = B.ordinary_blocks(ggml_type, 2500, seed=10 + int(ggml_type))
    B.assert_same_bits(B.dequantize_with(impl, raw, ggml_type), B.oracle(raw, ggml_type), None, ggml_type.name)


@by_name
def test_edge_case_scales_match_gguf_py(impl, ggml_type):
    """Edge-case scales (±0, subnormal, ±65504, ±inf, NaNs with payloads) give gguf-py's bits, in operand order.

    For Q4_1 every d meets every m; the quants are random, all 0x00 or all 0xFF. NaN payloads and signs of
    zero are compared too."""
    raw, labels = B.edge_blocks(ggml_type, seed=20 + int(ggml_type))
    B.assert_same_bits(B.dequantize_with(impl, raw, ggml_type), B.oracle(raw, ggml_type), labels, ggml_type.name)


@by_name
@settings(max_examples=60, **FAST)
@given(data=st.binary(min_size=34, max_size=8 * 34))
def test_any_bytes_match_gguf_py(impl, ggml_type, data):
    """Any bytes at all, read as blocks (random scales are often NaN or inf): gguf-py's float32 bits."""
    raw = B.any_bytes(data, ggml_type)
    if raw.shape[0]:
        B.assert_same_bits(B.dequantize_with(impl, raw, ggml_type), B.oracle(raw, ggml_type), None, ggml_type.name,
                           loose=B.nan_meets_nan(raw, ggml_type))


# ------------------------------------------------------------------------------------------- SmolLM2

ROW_FRACTION = 8  # one row in 8 of every tensor (and its first and last), picked the same way every run


smollm2 = B.smollm2  # the model file, opened once per module (blocks.py)


def sampled_rows(reader, info):
    """(row indices, their bytes) of a tensor: rows 0 and -1, and one in ROW_FRACTION at random."""
    cols = info.shape[-1]
    rows = info.n_elements // cols
    table = np.asarray(reader.tensor_bytes(info.name)).reshape(rows, -1)
    rng = np.random.default_rng(zlib.crc32(info.name.encode()))
    pick = np.unique(np.concatenate([[0, rows - 1], rng.choice(rows, max(1, rows // ROW_FRACTION), replace=False)]))
    return pick, table[pick]


def check_tensors(impl, reader, infos):
    """Dequantize sampled rows of ``infos`` (one call per row width) and compare them with gguf-py's."""
    groups = {}
    for info in infos:
        pick, rows = sampled_rows(reader, info)
        groups.setdefault(info.shape[-1], []).append((info, pick, rows))
    for cols, items in groups.items():
        ggml_type = items[0][0].ggml_type
        raw = np.concatenate([rows for _, _, rows in items])
        got = B.worker_function(impl, "dequantize")(raw, ggml_type, (raw.shape[0], cols))
        want = B.oracle(raw, ggml_type).reshape(raw.shape[0], cols)
        found = B.mismatch(got, want)
        if found is not None:
            row = found[1] // cols
            for info, pick, _ in items:  # noqa: B007 - the tensor the row is in is what the loop finds
                if row < len(pick):
                    break
                row -= len(pick)
            raise AssertionError(f"{found[0]} values of SmolLM2's {ggml_type.name} weights do not have gguf-py's bits; "
                                 f"the first is in {info.name}, row {pick[row]}")
    return sum(len(pick) for items in groups.values() for _, pick, _ in items)


def test_smollm2_q4_1_weights(impl, smollm2):
    """Every Q4_1 tensor of SmolLM2 (rows sampled from each, about 8 MB of blocks): gguf-py's float32 bits."""
    infos = [info for info in smollm2 if info.ggml_type == GGMLType.Q4_1]
    assert len(infos) == 210
    assert check_tensors(impl, smollm2, infos) > 210 * 8


def test_smollm2_q8_0_token_embedding(impl, smollm2):
    """SmolLM2's Q8_0 token_embd.weight (one row in 8 of its 49152): gguf-py's float32 bits."""
    info = smollm2.tensors["token_embd.weight"]
    assert info.ggml_type == GGMLType.Q8_0
    assert check_tensors(impl, smollm2, [info]) > 49152 // ROW_FRACTION


@by_name
def test_speed(impl, reference, ggml_type):
    """The kernel does 1 MB of blocks in at most 2.5x the reference's time: no loop per block."""
    B.speed_check(impl, reference, ggml_type, megabytes=1.0, seed=30 + int(ggml_type))
