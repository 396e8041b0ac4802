"""Hidden suite, lab 16 task 2: rope_theta, rope_angles, rope_pairs and apply_rope.

rope_theta is compared bit for bit: it is ggml's recipe (float32 throughout, a cumulative product), and the
task text spells out every operation. cos/sin are compared with the exact cosine and sine of those float32
angles to 4e-7 (NumPy's float32 cos and a float64 cos rounded to float32 both pass; a wrong angle at a
large position misses by far more). The rotation is compared with float64 math on the same float32 tables.
"""

import ctypes
import ctypes.util
import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

S = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("lab16_support.py"))))
F32 = np.float32
FAST = {"phases": (Phase.explicit, Phase.reuse, Phase.generate), "report_multiple_bugs": False}
EXAMPLES = min(50, settings().max_examples)
OPS = "bytes2logits.engine.ops"
GGML = "bytes2logits.engine.ggml_numerics"
STYLES = ("norm", "neox")


@pytest.fixture(autouse=True)
def fenced(impl):
    """The package's own RoPE functions (both numerics) raise while these checks run."""
    with S.fence(impl, [(OPS, "rope_theta"), (OPS, "rope_angles"), (OPS, "rope_pairs"), (OPS, "apply_rope"),
                        (GGML, "rope_angles"), (GGML, "apply_rope")]):
        yield


def _powf():
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    libm.powf.restype = ctypes.c_float
    libm.powf.argtypes = [ctypes.c_float, ctypes.c_float]
    return libm.powf


POWF = _powf()  # C's powf from the system's maths library, which ggml calls


def ggml_theta(n_pos, rope_dim, base, freq_scale=1.0) -> np.ndarray:
    """ggml's angles, written from its C loop (ggml_rope_cache_init, rope_yarn): theta starts at pos and is
    multiplied by theta_scale = powf(base, -2.0f / rope_dim) once per pair; each pair's angle is then
    freq_scale * theta. All in float32."""
    theta_scale = F32(POWF(F32(base), F32(-2.0) / F32(rope_dim)))
    out = np.empty((n_pos, rope_dim // 2), F32)
    theta = np.arange(n_pos, dtype=F32)
    for i in range(rope_dim // 2):
        out[:, i] = F32(freq_scale) * theta
        theta = theta * theta_scale
    return out


def assert_theta(got, n_pos, rope_dim, base, freq_scale):
    what = f"rope_theta({n_pos}, {rope_dim}, {base:g}, {freq_scale:g})"
    want = ggml_theta(n_pos, rope_dim, base, freq_scale)
    assert S.is_float32_array(got) and got.shape == want.shape, \
        f"{what}: the angles are a float32 array of shape [n_pos, rope_dim // 2]"
    bad = got.view(np.uint32) != want.view(np.uint32)
    if bad.any():
        p, i = np.argwhere(bad)[0]
        raise AssertionError(f"{what}: {int(bad.sum())} angles differ from ggml's float32 bits, the first at position "
                             f"{p}, pair {i}: start from arange(n_pos) in float32, multiply by "
                             "theta_scale = F32(base) ** F32(-2 / rope_dim) one pair at a time (np.cumprod, dtype "
                             "F32), then multiply by freq_scale; that scalar power is C's powf, as in ggml, and "
                             "np.power on float32 rounds differently")


REAL_CONFIGS = [  # (n_pos, rope_dim, base, freq_scale): SmolLM2, the tiny models, common models, odd ones
    (256, 64, 100000.0, 1.0), (24, 16, 10000.0, 1.0), (24, 32, 1000000.0, 1.0), (4096, 128, 10000.0, 1.0),
    (4096, 128, 500000.0, 1.0), (2048, 128, 1000000.0, 1.0), (300, 100, 10000.0, 1.0), (64, 6, 10000.0, 1.0),
    (40, 2, 10000.0, 1.0), (1, 64, 10000.0, 1.0), (512, 64, 10000.0, 0.25), (512, 96, 10000.0, 1 / 3),
]


def test_rope_theta_is_ggml_bit_for_bit(impl):
    """rope_theta gives ggml's float32 angles bit for bit on real models' configurations (SmolLM2's first).

    position multiplied by theta_scale once per pair, then by freq_scale, in float32: SmolLM2, the tiny test models,
    common llama and Qwen settings, an odd rope_dim, one pair, one position, linear scaling."""
    for cfg in REAL_CONFIGS:
        assert_theta(impl.rope_theta(*cfg), *cfg)


@settings(max_examples=EXAMPLES, **FAST)
@given(n_pos=st.integers(1, 700), half=st.integers(1, 128),
       base=st.sampled_from([10000.0, 100000.0, 500000.0, 1e6]) | st.floats(10.0, 1e7),
       freq_scale=st.sampled_from([1.0, 0.5, 0.25, 0.125, 1 / 3, 0.1]))
def test_rope_theta_any_config(impl, n_pos, half, base, freq_scale):
    """rope_theta on random sizes, bases and linear scaling factors gives ggml's float32 angles bit for bit."""
    assert_theta(impl.rope_theta(n_pos, 2 * half, base, freq_scale), n_pos, 2 * half, base, freq_scale)


def test_rope_angles_are_cos_and_sin_of_theta(impl):
    """rope_angles returns (cos, sin) of exactly rope_theta's angles, each float32 [n_pos, rope_dim // 2].

    To float32 precision (4e-7), positions up to 8191 included."""
    for cfg in [(8192, 64, 100000.0, 1.0), (100, 32, 10000.0, 0.5), (3, 2, 10000.0, 1.0)]:
        got = impl.rope_angles(*cfg)
        theta = ggml_theta(*cfg).astype(np.float64)
        assert type(got) in (tuple, list) and len(got) == 2, "rope_angles returns a pair (cos, sin)"
        for table, fn, name in ((got[0], np.cos, "cos"), (got[1], np.sin, "sin")):
            assert S.is_float32_array(table) and table.shape == theta.shape, \
                f"the {name} table is float32 of shape [n_pos, rope_dim // 2]"
            err = np.abs(table.astype(np.float64) - fn(theta))
            assert err.max() <= 4e-7, (f"the {name} table is not the {name} of rope_theta's angles (max error "
                                       f"{err.max():.1e}): cos first, sin second, of the float32 angles")


def probe_pairs(impl, x, half, style):
    probe = S.worker_eval(impl, "lambda f, x, h, s: (lambda r: (len(r), "
                                "[bool(np.shares_memory(p, x)) for p in r], [np.array(p) for p in r]))(f(x, h, s))")
    return probe(impl.rope_pairs, x, half, style)


def test_rope_pairs_are_views_of_x(impl):
    """rope_pairs(x, half, style) returns two views into x, not copies: the first and second member of every pair.

    "norm": x[..., 2i] and x[..., 2i+1]; "neox": x[..., i] and x[..., i + half]; for i < half, on 3-D arrays
    of several sizes, half = head_dim/2 or less."""
    for style in STYLES:
        for shape, half in [((3, 5, 16), 8), ((2, 4, 64), 16), ((1, 1, 6), 3), ((12, 7, 32), 1)]:
            x = np.arange(np.prod(shape), dtype=F32).reshape(shape)
            n, shares, parts = probe_pairs(impl, x, half, style)
            assert n == 2, "rope_pairs returns two arrays: the first and the second half of every pair"
            a, b = S.pair_index(shape[-1], 2 * half, style)
            for part, idx, which in ((parts[0], a, "first"), (parts[1], b, "second")):
                assert part.shape == (*shape[:-1], half) and np.array_equal(part, x[..., idx]), \
                    f"{style}, half {half} of {shape[-1]}: the {which} members of the pairs are the wrong dimensions"
            assert all(shares), f"{style}: rope_pairs must return views of x (basic slicing with a step), not copies"


def probe_rope(impl, x, cos, sin, style):
    probe = S.worker_eval(impl, "lambda f, x, c, s, st: (lambda r: (r is x, np.array(x)))(f(x, c, s, st))")
    return probe(impl.apply_rope, x, cos, sin, style)


def tables(n, half, start=0, base=10000.0):
    theta = ggml_theta(start + n, 2 * half, base)[start:]
    return np.cos(theta), np.sin(theta)


def test_apply_rope_rotates_in_place_and_returns_x(impl):
    """apply_rope(x, cos, sin, style) rotates x itself, in place, and returns that same array (both styles)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 6, 32)).astype(F32)
    cos, sin = tables(6, 16, start=3)
    for style in STYLES:
        same, after = probe_rope(impl, x.copy(), cos, sin, style)
        assert same, "apply_rope must return x itself (the array it was given), rotated in place"
        assert np.allclose(after, S.rotate64(x, cos, sin, style), atol=1e-6, rtol=0), \
            f"{style}: x was not rotated in place by the given angles"


@settings(max_examples=EXAMPLES, **FAST)
@given(heads=st.integers(1, 6), n=st.integers(1, 40), half=st.integers(1, 32), extra=st.integers(0, 3),
       style=st.sampled_from(STYLES), start=st.integers(0, 500), seed=st.integers(0, 2**32 - 1))
def test_apply_rope_matches_the_rotation(impl, heads, n, half, extra, style, start, seed):
    """Every pair (a, b) becomes (a cos - b sin, a sin + b cos) with its own position's angle, in both styles.

    Random heads, positions and head sizes, rope_dim < head_dim included; float32, to 1e-6."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((heads, n, 2 * half + 2 * extra)).astype(F32)
    cos, sin = tables(n, half, start)
    got = impl.apply_rope(x.copy(), cos, sin, style)
    assert S.is_float32_array(got) and got.shape == x.shape, "apply_rope returns x: float32, its shape unchanged"
    want = S.rotate64(x, cos, sin, style)
    err = np.abs(got - want).max()
    assert err <= 1e-6 * max(1.0, np.abs(x).max()), \
        f"{style}: the rotated values are wrong (max error {err:.1e}; head_dim {x.shape[-1]}, rope_dim {2 * half})"


def test_rope_dim_below_head_dim_leaves_the_tail_alone(impl):
    """With rope_dim < head_dim only the first rope_dim dimensions rotate; the others keep their exact bits.

    In "neox" the pairs are (i, i + rope_dim/2), not (i, i + head_dim/2)."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 5, 64)).astype(F32)
    cos, sin = tables(5, 12, start=2)
    for style in STYLES:
        got = impl.apply_rope(x.copy(), cos, sin, style)
        assert S.is_float32_array(got) and got.shape == x.shape, "apply_rope returns x: float32, its shape unchanged"
        assert np.array_equal(got[..., 24:].view(np.uint32), x[..., 24:].view(np.uint32)), \
            f"{style}: dimensions from rope_dim on must be left exactly as they were"
        assert np.allclose(got, S.rotate64(x, cos, sin, style), atol=1e-6, rtol=0), \
            f"{style}: with rope_dim 24 of head_dim 64 the wrong dimensions were paired"


def test_norm_and_neox_pair_different_dimensions(impl):
    """One nonzero dimension moves to its pair partner: dimension 1 to 0 in "norm", to 1 + rope_dim/2 in "neox".

    A quarter turn moves a pair's value entirely to its partner."""
    x = np.zeros((1, 1, 16), F32)
    x[0, 0, 1] = 1.0
    theta = np.full((1, 8), np.pi / 2, F32)
    cos, sin = np.cos(theta), np.sin(theta)
    norm = impl.apply_rope(x.copy(), cos, sin, "norm")[0, 0]
    neox = impl.apply_rope(x.copy(), cos, sin, "neox")[0, 0]
    assert int(np.argmax(np.abs(norm))) == 0 and abs(norm[0] + 1) < 1e-6, \
        "norm: the partner of dimension 1 is dimension 0 (a -> a cos - b sin, b -> a sin + b cos)"
    assert int(np.argmax(np.abs(neox))) == 9 and abs(neox[9] - 1) < 1e-6 and abs(neox[1]) < 1e-6, \
        "neox: the partner of dimension 1 is dimension 1 + rope_dim/2 = 9"


def test_rotation_preserves_pair_norms(impl):
    """With your own rope_angles tables, apply_rope only rotates: every pair keeps its length a² + b²."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 50, 64)).astype(F32)
    cos, sin = impl.rope_angles(50, 64, 10000.0)
    for style in STYLES:
        got = impl.apply_rope(x.copy(), cos, sin, style)
        a, b = S.pair_index(64, 64, style)
        before = x[..., a].astype(np.float64) ** 2 + x[..., b].astype(np.float64) ** 2
        after = got[..., a].astype(np.float64) ** 2 + got[..., b].astype(np.float64) ** 2
        assert np.allclose(after, before, rtol=1e-5, atol=1e-6), f"{style}: a pair's length changed: not a rotation"


def test_scores_depend_only_on_the_offset(impl):
    """Rotated query·key products depend only on the offset m - n: moving both positions by t changes nothing.

    Your rope_angles and apply_rope, both styles, offsets 3, 0 and -37, shifts up to 190."""
    rng = np.random.default_rng(8)
    q = rng.standard_normal((1, 1, 64)).astype(F32)
    k = rng.standard_normal((1, 1, 64)).astype(F32)
    cos, sin = impl.rope_angles(256, 64, 10000.0)
    cos, sin = np.asarray(cos), np.asarray(sin)
    size = np.linalg.norm(q) * np.linalg.norm(k)
    for style in STYLES:
        def at(v, p, style=style):
            return impl.apply_rope(v.copy(), cos[p : p + 1], sin[p : p + 1], style)[0, 0].astype(np.float64)

        for m, n in ((5, 2), (17, 17), (3, 40)):
            dots = [float(at(q, m + t) @ at(k, n + t)) for t in (0, 1, 50, 190)]
            assert max(dots) - min(dots) <= 1e-4 * size, \
                f"{style}: q·k changed when both positions moved by the same amount (offset {m - n})"
            if (m, n) == (5, 2):
                assert abs(dots[0] - float(q[0, 0] @ k[0, 0])) > 1e-3 * size, \
                    f"{style}: q·k did not change with the offset at all: are the vectors rotated?"
