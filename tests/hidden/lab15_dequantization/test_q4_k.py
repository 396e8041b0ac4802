"""Hidden suite, lab 15 task 2: Q4_K's 6-bit scales and mins, its quant order, and the kernel, bit for bit."""

import runpy
from pathlib import Path
from types import SimpleNamespace

import gguf
import numpy as np
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from bytes2logits.engine.gguf import GGMLType

B = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("blocks.py"))))
# No shrinking: a learner sees the check's name and message, never the example, so a smaller one only costs time.
FAST = {"phases": (Phase.explicit, Phase.reuse, Phase.generate), "report_multiple_bugs": False}
Q4_K = GGMLType.Q4_K


def test_scale_min_k4_matches_gguf_py(impl):
    """_scale_min_k4 unpacks the 12 bytes into 8 scales and 8 mins (uint8, (n, 8) each), exactly as gguf-py does."""
    rng = np.random.default_rng(3)
    scales = rng.integers(0, 256, size=(500, 12), dtype=np.uint8)
    scales[0], scales[1] = 0x00, 0xFF
    scales[2:14] = np.eye(12, dtype=np.uint8) * 0xFF  # one byte set at a time: which outputs does each feed?
    for rows in (scales, scales[:1], scales[2:14]):
        got = impl._scale_min_k4(rows)
        assert type(got) is tuple and len(got) == 2, "_scale_min_k4 returns a tuple (scales, mins)"
        want = gguf.quants.Q4_K.get_scale_min(np.ascontiguousarray(rows))
        for part, mine, theirs in zip(("scales", "mins"), got, want):
            assert type(mine) is np.ndarray and mine.dtype == np.uint8 and mine.shape == (rows.shape[0], 8), \
                f"the {part} are a uint8 array of shape (n_blocks, 8)"
            bad = np.argwhere(mine != theirs)
            if bad.size:
                j = int(bad[0][1])
                raise AssertionError(f"the {part} of sub-block {j} are unpacked from the wrong bits"
                                     + (" (sub-blocks 4..7: low 4 bits from bytes 8..11, top 2 bits from the top "
                                        "of bytes 0..7)" if j >= 4 else " (the low 6 bits of a byte)"))


def test_four_bit_k_quant_order(impl):
    """_four_bit_k gives uint8 (n, 8, 32): chunk c's low nibbles are sub-block 2c, its high nibbles sub-block 2c+1."""
    rng = np.random.default_rng(4)
    for n in (1, 37):
        qs = rng.integers(0, 256, size=(n, 128), dtype=np.uint8)
        got = impl._four_bit_k(qs)
        assert type(got) is np.ndarray and got.dtype == np.uint8 and got.shape == (n, 8, 32), \
            "_four_bit_k returns uint8 of shape (n_blocks, 8, 32): [block, sub-block, position]"
        chunks = qs.reshape(n, 4, 32)
        for sub in range(8):
            want = chunks[:, sub // 2, :] // (16 if sub % 2 else 1) % 16
            assert np.array_equal(got[:, sub, :], want), (
                f"sub-block {sub} should be the {'high' if sub % 2 else 'low'} nibbles of bytes "
                f"{32 * (sub // 2)}..{32 * (sub // 2) + 31}, in order")


def test_random_blocks_match_gguf_py(impl):
    """Hundreds of random Q4_K blocks with ordinary d and dmin (several of dequantize's chunks): gguf-py's bits."""
    raw = B.ordinary_blocks(Q4_K, 700, seed=40)
    B.assert_same_bits(B.dequantize_with(impl, raw, Q4_K), B.oracle(raw, Q4_K), None, "Q4_K")


def test_edge_case_scales_match_gguf_py(impl):
    """Edge-case d and dmin (±0, subnormal, ±65504, ±inf, NaNs with payloads) give gguf-py's bits: d1 * q - m1.

    Every edge-case d meets every edge-case dmin, under random, all-0x00 and all-0xFF bytes."""
    raw, labels = B.edge_blocks(Q4_K, seed=41)
    B.assert_same_bits(B.dequantize_with(impl, raw, Q4_K), B.oracle(raw, Q4_K), labels, "Q4_K")


def equal_scale_and_min_blocks(n: int, seed: int) -> np.ndarray:
    """Blocks with d == dmin and s == m in every sub-block, and quants 0, 1 or 2: where q is 1, d1 * q == m1."""
    rng = np.random.default_rng(seed)
    raw = np.zeros((n, 144), dtype=np.uint8)
    d = (rng.normal(0, 0.05, n) * rng.choice([1, -1], n)).astype(np.float16)
    d[:4] = [0.0, -0.0, 1.0, -1.0]
    for offset in (0, 2):
        B._set_half(raw, slice(None), offset, d.view(np.uint16))
    low = rng.integers(0, 256, size=(n, 4), dtype=np.uint8)
    raw[:, 4:8] = raw[:, 8:12] = low  # scale j == min j for j < 4, and the same top bits for 4..7
    nib = rng.integers(0, 16, size=(n, 4), dtype=np.uint8)
    raw[:, 12:16] = nib | (nib << 4)  # equal low nibbles for scales and mins 4..7
    q = rng.integers(0, 3, size=(n, 256), dtype=np.uint8)
    raw[:, 16:] = (q[:, 0::2] | (q[:, 1::2] << 4))
    return raw


def test_sign_of_zero(impl):
    """Where d1 * q equals m1 the value is +0.0, never -0.0: compute d1 * q - m1, not -(m1 - d1 * q)."""
    raw = equal_scale_and_min_blocks(300, seed=42)
    want = B.oracle(raw, Q4_K)
    assert (want.view(np.uint32) == 0).sum() > 10_000  # many exact zeros
    B.assert_same_bits(B.dequantize_with(impl, raw, Q4_K), want, None, "Q4_K (blocks where d*s*q equals dmin*m)")


@settings(max_examples=80, **FAST)
@given(data=st.binary(min_size=144, max_size=6 * 144))
def test_any_bytes_match_gguf_py(impl, data):
    """Any bytes at all, read as Q4_K blocks (random d and dmin are often NaN or inf): gguf-py's float32 bits."""
    raw = B.any_bytes(data, Q4_K)
    if raw.shape[0]:
        B.assert_same_bits(B.dequantize_with(impl, raw, Q4_K), B.oracle(raw, Q4_K), None, "Q4_K")


def test_speed(impl, reference):
    """dequant_q4_k does 1 MB of blocks in at most 2.5x the reference's time: no loop per block."""
    B.speed_check(impl, reference, Q4_K, megabytes=1.0, seed=43)
