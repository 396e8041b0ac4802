"""Hidden suite, lab 15 task 4: C's roundf and a Q8_0 quantizer, bit for bit ggml's (through gguf-py)."""

import ctypes
import ctypes.util
import runpy
import warnings
import zlib
from pathlib import Path
from types import SimpleNamespace

import gguf
import numpy as np
from hypothesis import Phase, assume, given, settings
from hypothesis import strategies as st

from bytes2logits.engine.gguf import GGMLType

B = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("blocks.py"))))
# No shrinking: a learner sees the check's name and message, never the example, so a smaller one only costs time.
FAST = {"phases": (Phase.explicit, Phase.reuse, Phase.generate), "report_multiple_bugs": False}

# C's own roundf, from the system's maths library: the rounding ggml's quantize_row_q8_0_ref calls.
_libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
_libm.roundf.restype, _libm.roundf.argtypes = ctypes.c_float, [ctypes.c_float]


def c_roundf(v: np.ndarray) -> np.ndarray:
    return np.array([_libm.roundf(float(x)) for x in v.reshape(-1)], dtype=np.float32).reshape(v.shape)


def check_roundf(impl, v: np.ndarray) -> None:
    got = impl._round_half_away(v)
    assert type(got) is np.ndarray and got.dtype == np.float32 and got.shape == v.shape, \
        "_round_half_away returns float32 of the input's shape"
    want = c_roundf(v)
    bad = np.flatnonzero(got.view(np.uint32).reshape(-1) != want.view(np.uint32).reshape(-1))
    if bad.size:
        x, yours = v.reshape(-1)[bad[0]], got.reshape(-1)[bad[0]]
        raise AssertionError(f"_round_half_away({x!r}) is not what C's roundf gives (yours: {yours!r}): halves go "
                             "away from zero, the sign is kept, and 0.49999997 is below a half")


def test_round_half_away_is_c_roundf(impl):
    """_round_half_away agrees with C's roundf: halves away from zero, the sign of zero kept, no 0.49999997 trap."""
    halves = np.arange(-40, 41, dtype=np.float32) + np.float32(0.5)
    near = np.concatenate([np.nextafter(halves, np.float32(0)), np.nextafter(halves, np.float32(np.inf)),
                           np.nextafter(halves, np.float32(-np.inf))])
    special = np.array([0.0, -0.0, 0.25, -0.25, 0.49999997, -0.49999997, 0.5, -0.5, 4194304.5, -4194303.5,
                        8388607.5, -8388607.5, 8388608.0, 16777218.0, 1e-45, -1e-45, 1.1754944e-38, 1e30,
                        -3.4028235e38, 126.5, -127.5], dtype=np.float32)
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, size=4000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    bits = bits[np.isfinite(bits)]
    grid = (rng.integers(-600, 600, size=2000) / np.float32(4)).astype(np.float32)
    check_roundf(impl, np.concatenate([special, halves, near, bits, grid]))
    check_roundf(impl, grid.reshape(40, 50))


@settings(**FAST)
@given(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=1, max_size=64))
def test_round_half_away_any_float(impl, values):
    """_round_half_away agrees with C's roundf on any finite float32."""
    check_roundf(impl, np.array(values, dtype=np.float32))


# --------------------------------------------------------------------------------------------- quantizer

def gguf_q8_0(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0)).reshape(-1, 34)


def quantized(impl, x: np.ndarray) -> np.ndarray:
    got = impl.quantize_q8_0(np.ascontiguousarray(x, dtype=np.float32))
    assert type(got) is np.ndarray and got.dtype == np.uint8 and got.shape == (x.shape[0], 34), \
        "quantize_q8_0 of (n, 32) floats returns a uint8 array of shape (n, 34)"
    return got


def assert_bytes(got: np.ndarray, want: np.ndarray, what: str) -> None:
    bad = np.argwhere(got != want)
    if bad.size:
        block, byte = (int(i) for i in bad[0])
        field = "the scale d (bytes 0-1)" if byte < 2 else f"quant {byte - 2}"
        rows = np.unique(bad[:, 0]).size
        raise AssertionError(f"{what}: {rows} of {got.shape[0]} blocks are not the bytes gguf-py writes; the first is "
                             f"block {block}, at {field}")


def weight_like_blocks(seed: int) -> np.ndarray:
    """A mix: normal and heavy-tailed weights, scales from 2**-100 to 2**18, exact ties (a block whose largest
    value is 127 has d = 1), values one float step either side of a tie, constant and one-hot blocks."""
    rng = np.random.default_rng(seed)
    parts = [rng.normal(0, 0.05, (400, 32)), rng.standard_t(2, (200, 32)),
             rng.normal(0, 1, (300, 32)) * 2.0 ** rng.integers(-100, 19, (300, 1))]
    ties = rng.integers(-254, 255, (200, 32)) / 2
    ties[:, 0] = rng.choice([127.0, -127.0], 200)
    parts.append(ties * 2.0 ** rng.integers(-20, 10, (200, 1)))
    near = rng.integers(-254, 255, (200, 32)) / 2
    near[:, 5] = 127.0
    side = np.where(rng.random((200, 32)) < 0.5, -np.inf, np.inf).astype(np.float32)
    near = np.nextafter(near.astype(np.float32), side)
    parts.append(near)
    parts.append(np.full((20, 32), 1.0) * rng.normal(0, 3, (20, 1)))
    one_hot = np.zeros((32, 32))
    one_hot[np.arange(32), np.arange(32)] = rng.normal(0, 1, 32)
    parts.append(one_hot)
    x = np.concatenate([p.astype(np.float32) for p in parts])
    return x[rng.permutation(x.shape[0])]


def test_matches_gguf_py_on_weight_like_blocks(impl):
    """On a mix of weight-like blocks (ties, near-ties, tiny and large scales): the bytes gguf-py's quantize writes."""
    x = weight_like_blocks(70)
    assert_bytes(quantized(impl, x), gguf_q8_0(x), "Q8_0")


@st.composite
def float_blocks(draw, max_blocks=6):
    """1..max_blocks blocks of 32 float32 values, each block scaled by its own power of two."""
    n = draw(st.integers(1, max_blocks))
    pick = st.one_of(st.floats(-1, 1, width=32, allow_subnormal=False),
                     st.sampled_from([0.5, -0.5, 0.0, -0.0, 1.0, -1.0, 0.49999997, -0.49999997, 0.25, 127.0]))
    values = draw(st.lists(pick, min_size=32 * n, max_size=32 * n))
    exps = draw(st.lists(st.integers(-90, 15), min_size=n, max_size=n))
    x = (np.array(values, np.float32).reshape(n, 32) * (2.0 ** np.array(exps))[:, None]).astype(np.float32)
    amax = np.abs(x).max(axis=1)
    # below 1e-30, 1/d overflows (ggml's output is garbage there too); above ~8e6, d overflows fp16 (quantize refuses)
    assume(((amax == 0) | (amax >= 1e-30)).all() and (amax < 8e6).all())
    return x


@settings(max_examples=100, **FAST)
@given(x=float_blocks())
def test_any_blocks_match_gguf_py(impl, x):
    """On any blocks of finite float32 values (ties and zeros likely): the bytes gguf-py's quantize writes."""
    assert_bytes(quantized(impl, x), gguf_q8_0(x), "Q8_0")


def check_round_trip(x: np.ndarray, b: np.ndarray) -> None:
    d = (np.abs(x).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float64)  # the quantizer's float32 d
    d16 = np.ascontiguousarray(b[:, :2]).view("<f2").astype(np.float64)  # what the block stores
    q = b[:, 2:].view(np.int8).astype(np.float64)
    assert q.min() >= -127, "quants stay in -127..127 (-128 never appears)"
    err = np.abs(x.astype(np.float64) - d16 * q)
    # half a step, a hair for the float32 rounding of x * (1/d), and the fp16 rounding of d times |q| <= 127
    bound = d * (0.5 + 1e-4) + 127 * np.abs(d - d16)
    worst = np.argwhere(err > bound)
    if worst.size:
        raise AssertionError(f"block {worst[0][0]}: dequantized, value {worst[0][1]} is off by more than half a step "
                             "d = max|x| / 127 (plus d's fp16 rounding)")
    rows = np.arange(x.shape[0])
    top = np.argmax(np.abs(x), axis=1)
    live = d[:, 0] > 0
    want = 127 * np.sign(x[rows, top])
    assert np.array_equal(q[rows, top][live], want[live]), "the value of largest magnitude must become +127 or -127"


@settings(max_examples=60, **FAST)
@given(x=float_blocks(max_blocks=4))
def test_round_trip_error_and_largest_value(impl, x):
    """Each value comes back within |d|/2 (plus the fp16 rounding of d); the largest magnitude becomes ±127."""
    check_round_trip(x, quantized(impl, x))


def test_round_trip_on_weight_like_blocks(impl):
    """On weight-like blocks too: every value within |d|/2 (plus d's fp16 rounding), ±127 at the largest."""
    x = weight_like_blocks(71)
    check_round_trip(x, quantized(impl, x))


def test_all_zero_blocks(impl):
    """An all-zero block (+0 or -0) is 34 zero bytes (d = 0, 1/d taken as 0), and its neighbours are unaffected."""
    rng = np.random.default_rng(8)
    x = rng.normal(0, 1, (12, 32)).astype(np.float32)
    x[[1, 4, 5, 11]] = 0.0
    x[4] = -0.0
    x[5, ::2] = -0.0
    got = quantized(impl, x)
    for i in (1, 4, 5, 11):
        assert not got[i].any(), f"block {i} is all zeros: its 34 bytes must all be 0 (no NaN from 0 * inf)"
    assert_bytes(got, gguf_q8_0(x), "Q8_0 with zero blocks between")


smollm2 = B.smollm2  # the model file, opened once per module (blocks.py)


def test_smollm2_weights(impl, smollm2):
    """Re-quantized, SmolLM2's Q8_0 embedding rows give the file's own bytes; its layer-0 weights give gguf-py's.

    The layer-0 weights are Q4_1 in the file: dequantized to floats first, then quantized to Q8_0."""
    table = np.asarray(smollm2.tensor_bytes("token_embd.weight")).reshape(-1, 34)
    rng = np.random.default_rng(zlib.crc32(b"token_embd.weight"))
    stored = table[np.sort(rng.choice(table.shape[0], 20_000, replace=False))]
    x = B.oracle(stored, GGMLType.Q8_0).reshape(-1, 32)
    assert_bytes(quantized(impl, x), stored, "SmolLM2's token_embd.weight, re-quantized")
    for name in ("blk.0.attn_q.weight", "blk.0.ffn_down.weight"):
        info = smollm2.tensors[name]
        x = B.oracle(np.asarray(smollm2.tensor_bytes(name)).reshape(-1, 20), info.ggml_type).reshape(-1, 32)
        assert_bytes(quantized(impl, x), gguf_q8_0(x), f"{name} as floats, quantized to Q8_0")


# 4 MB of float32 in, 1 MB out: the reference quantizes them in ~15 ms of the 18-22 ms (best of the pairs) a
# call through the worker cost here; a loop over the 32 768 blocks took ~0.6 s, 26-39x. The limit and the
# alternating timing are blocks.py's; each pair gets weights of its own, and every timed result is checked.
def test_speed(impl, reference):
    """quantize_q8_0 does 32 768 blocks in at most 2.5x the reference's time: no loop per block."""
    inputs = [np.random.default_rng([9, i]).normal(0, 0.05, (32768, 32)).astype(np.float32)
              for i in range(B.PAIRS + 1)]

    def same_bytes(got, expected):
        assert type(got) is np.ndarray and np.array_equal(got, expected), "the bytes must also be right"

    best_ref, best, ok = B.race(impl.quantize_q8_0, reference.quantize_q8_0, lambda i: (inputs[i],), same_bytes)
    assert ok, (f"quantize_q8_0 took {best * 1e3:.0f} ms, {best / best_ref:.1f}x the reference's "
                f"{best_ref * 1e3:.0f} ms (limit {B.SPEED_FACTOR:g}x): work on all blocks at once")
