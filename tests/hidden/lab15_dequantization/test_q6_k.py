"""Hidden suite, lab 15 task 3: 2-bit crumbs and the Q6_K kernel, bit for bit gguf-py's."""

import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from bytes2logits.engine.gguf import GGMLType

B = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("blocks.py"))))
# No shrinking: a learner sees the check's name and message, never the example, so a smaller one only costs time.
FAST = {"phases": (Phase.explicit, Phase.reuse, Phase.generate), "report_multiple_bugs": False}
Q6_K = GGMLType.Q6_K


def test_crumbs_four_per_byte(impl):
    """_crumbs(qs, g) gives uint8 (n, g, 4, 32) with [b, g, p, l] = bits 2p..2p+1 of byte 32g + l."""
    rng = np.random.default_rng(5)
    for n, groups in [(1, 1), (9, 2), (4, 3), (200, 2)]:
        qs = rng.integers(0, 256, size=(n, 32 * groups), dtype=np.uint8)
        got = impl._crumbs(qs, groups)
        assert type(got) is np.ndarray and got.dtype == np.uint8 and got.shape == (n, groups, 4, 32), \
            "_crumbs returns uint8 of shape (n_blocks, n_groups, 4, 32)"
        grouped = qs.reshape(n, groups, 32)
        for p in range(4):
            assert np.array_equal(got[:, :, p, :], grouped // 4**p % 4), \
                f"crumb p = {p} is bits {2 * p}-{2 * p + 1} of each of a group's 32 bytes, in byte order"


def test_random_blocks_match_gguf_py(impl):
    """Hundreds of random Q6_K blocks with an ordinary d (several of dequantize's chunks): gguf-py's bits."""
    raw = B.ordinary_blocks(Q6_K, 700, seed=60)
    B.assert_same_bits(B.dequantize_with(impl, raw, Q6_K), B.oracle(raw, Q6_K), None, "Q6_K")


def test_edge_case_scales_match_gguf_py(impl):
    """Edge-case d (±0, subnormal, ±65504, ±inf, NaNs with payloads) and int8 scales -128/127 give gguf-py's bits.

    The other bytes are random, all 0x00 or all 0xFF."""
    raw, labels = B.edge_blocks(Q6_K, seed=61)
    B.assert_same_bits(B.dequantize_with(impl, raw, Q6_K), B.oracle(raw, Q6_K), labels, "Q6_K")


@settings(max_examples=80, **FAST)
@given(data=st.binary(min_size=210, max_size=6 * 210))
def test_any_bytes_match_gguf_py(impl, data):
    """Any bytes at all, read as Q6_K blocks: gguf-py's float32 bits."""
    raw = B.any_bytes(data, Q6_K)
    if raw.shape[0]:
        B.assert_same_bits(B.dequantize_with(impl, raw, Q6_K), B.oracle(raw, Q6_K), None, "Q6_K")


def test_speed(impl, reference):
    """dequant_q6_k does 1 MB of blocks in at most 2.5x the reference's time: no loop per block."""
    B.speed_check(impl, reference, Q6_K, megabytes=1.0, seed=62)
