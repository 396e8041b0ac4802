"""Hidden suite, lab 16 task 1: rms_norm and swiglu, float32 in and float32 out, within a few roundings.

Tolerance: each result is compared with the exact value (float64 math on the same float32 inputs), not with
the reference's bits. The reference is within 3.3 float32 ulps of it on every input here; other honest
formulas (``np.mean``, dividing instead of multiplying by the inverse, ``g * sigmoid(g)``) within 4. RMSNorm
gets 8 ulps. SwiGLU gets 4 ulps plus 2^-22 |gate·up|: where the sigmoid is close to 0 or 1, a float32
formula cannot resolve more than that (``0.5 * (1 + tanh(g / 2))`` loses everything below it, and is still a
right answer for a forward pass).
"""

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
EXAMPLES = min(60, settings().max_examples)
OPS = "bytes2logits.engine.ops"
GGML = "bytes2logits.engine.ggml_numerics"


@pytest.fixture(autouse=True)
def fenced(impl):
    """The package's own rms_norm and swiglu (both numerics) raise while these checks run."""
    with S.fence(impl, [(OPS, "rms_norm"), (OPS, "swiglu"), (GGML, "rms_norm"), (GGML, "swiglu")]):
        yield


def rms_case(seed: int, shape, scale: float):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * scale).astype(F32)
    w = (rng.standard_normal(shape[-1]) * 2.0).astype(F32)
    return x, w


def assert_rms_close(got, x, w, eps, what):
    assert S.is_float32_array(got) and got.shape == x.shape, \
        f"{what}: rms_norm must return a float32 array of x's shape"
    want = S.rms_norm64(x, w, eps)
    err = np.abs(got.astype(np.float64) - want)
    bad = ~(err <= 8 * S.ulps(want))
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {want.size} values are more than 8 float32 roundings away "
                           "from x / sqrt(mean(x²) + eps) * weight (mean over the last axis)")


@settings(max_examples=EXAMPLES, **FAST)
@given(lead=st.lists(st.integers(1, 4), min_size=0, max_size=2), d=st.integers(1, 700),
       log_scale=st.floats(-3, 4), eps=st.sampled_from([1e-6, 1e-5, 1e-2, 0.0]), seed=st.integers(0, 2**32 - 1))
def test_rms_norm_matches_exact_math(impl, lead, d, log_scale, eps, seed):
    """rms_norm(x, weight, eps) is x / sqrt(mean(x²) + eps) * weight along the last axis, within 8 float32 roundings.

    Any number of leading axes ([n, d] rows, [heads, n, head_dim] for per-head norms), widths 1..700, values
    from 1e-3 to 1e4."""
    x, w = rms_case(seed, (*lead, d), 10.0**log_scale)
    assert_rms_close(impl.rms_norm(x, w, eps), x, w, eps, f"shape {x.shape}, eps {eps}")


def test_rms_norm_stays_float32(impl):
    """rms_norm returns float32 for float32 inputs, even when eps arrives as a NumPy float64 scalar.

    NumPy 2 promotes float32 arrays combined with a float64 *scalar* to float64: cast eps with F32(eps)."""
    x, w = rms_case(1, (3, 5, 64), 1.0)
    for eps in (1e-5, np.float64(1e-5), F32(1e-5), 1e-6):
        got = impl.rms_norm(x, w, eps)
        assert S.is_float32_array(got), (f"rms_norm returned {getattr(got, 'dtype', type(got).__name__)} with eps "
                                         f"of type {type(eps).__name__}: keep every step float32")
        assert_rms_close(got, x, w, eps, f"eps of type {type(eps).__name__}")


def test_rms_norm_eps_goes_inside_the_square_root(impl):
    """eps is added to the mean square under the root: a row of zeros stays zero, and tiny rows are not blown up.

    A row far smaller than sqrt(eps) is scaled by about 1/sqrt(eps), not to unit size."""
    w = np.ones(16, F32)
    zero = impl.rms_norm(np.zeros((2, 16), F32), w, 1e-5)
    assert S.is_float32_array(zero) and np.array_equal(zero, np.zeros((2, 16), F32)), \
        "a row of zeros with eps > 0 must come out as zeros (no NaN): add eps before the square root"
    for eps in (1e-5, 1e-2):
        tiny, _ = rms_case(2, (4, 16), 1e-4)
        assert_rms_close(impl.rms_norm(tiny, w, eps), tiny, w, eps, f"rows of size 1e-4 with eps {eps}")


def test_rms_norm_gives_each_row_unit_rms(impl):
    """With eps = 0 and weight 1 every row comes out with RMS 1, independently of the other rows; x is unchanged.

    Rows are along the last axis, and of very different sizes here."""
    x, _ = rms_case(3, (6, 96), 1.0)
    x *= (10.0 ** np.arange(-2, 4)).astype(F32)[:, None]  # rows of very different sizes
    before = x.copy()
    out = impl.rms_norm(x, np.ones(96, F32), 0.0)
    assert S.is_float32_array(out) and out.shape == x.shape, "rms_norm must return a float32 array of x's shape"
    rms = np.sqrt(np.mean(out.astype(np.float64) ** 2, axis=-1))
    assert np.allclose(rms, 1.0, rtol=1e-5, atol=0), "every row must come out with RMS 1 (normalize over the last axis)"
    alone = impl.rms_norm(x[2:3], np.ones(96, F32), 0.0)
    assert np.allclose(alone, out[2:3], rtol=1e-6, atol=0), "a row's result must not depend on the other rows"
    assert np.array_equal(x, before), "rms_norm must not change its input (return a new array)"


def assert_swiglu_close(got, g, u, what):
    assert S.is_float32_array(got) and got.shape == g.shape, \
        f"{what}: swiglu must return a float32 array of the inputs' shape"
    want = S.swiglu64(g, u)
    tol = 4 * S.ulps(want) + 2.0**-22 * np.abs(g.astype(np.float64) * u)
    bad = ~(np.abs(got.astype(np.float64) - want) <= tol)
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {want.size} values are not silu(gate) * up = "
                           "gate / (1 + exp(-gate)) * up to float32 precision")


@settings(max_examples=EXAMPLES, **FAST)
@given(lead=st.integers(1, 5), d=st.integers(1, 600), log_gate=st.floats(-3, 1.5), log_up=st.floats(-3, 3),
       seed=st.integers(0, 2**32 - 1))
def test_swiglu_matches_exact_math(impl, lead, d, log_gate, log_up, seed):
    """swiglu(gate, up) is silu(gate) * up with silu(g) = g / (1 + e^-g), float32, to a few float32 roundings."""
    rng = np.random.default_rng(seed)
    g = (rng.standard_normal((lead, d)) * 10.0**log_gate).astype(F32)
    u = (rng.standard_normal((lead, d)) * 10.0**log_up).astype(F32)
    with S.numpy_errors_raise(impl, over="ignore", under="ignore"):
        got = impl.swiglu(g, u)
    assert_swiglu_close(got, g, u, f"shape {g.shape}")


def test_swiglu_extreme_gates(impl):
    """Extreme gates: 0 far below -88, gate·up far above, never NaN or inf, and no overflow error escapes.

    Below -88, e^-g overflows float32: the checks switch NumPy's overflow errors on (silence them with
    np.errstate(over="ignore") around the exponential)."""
    gates = np.array([-3e38, -1e4, -200, -104, -89, -88.7, -88, -50, -20, -1, -0.0, 0, 1, 20, 50, 88, 89, 200,
                      1e4, 3e37], F32)
    ups = np.array([1.0, -2.0, 0.5, 3.0], F32)
    g = np.repeat(gates, ups.size).reshape(gates.size, ups.size)
    u = np.tile(ups, (gates.size, 1))
    u[-1] = [1.0, -1.0, 0.25, 2.0]  # |3e37 * up| stays finite
    try:
        with S.numpy_errors_raise(impl, over="raise", invalid="raise", divide="raise"):
            got = impl.swiglu(g, u)
    except FloatingPointError as e:
        raise AssertionError(f"swiglu let a NumPy floating-point error escape ({e}): exp(-gate) overflows for gate "
                             "< -88, which is fine (the result is 0); wrap it in np.errstate(over='ignore')") from None
    assert S.is_float32_array(got) and got.shape == g.shape, "swiglu must return a float32 array of the inputs' shape"
    assert np.isfinite(got).all(), "swiglu gave NaN or inf for a very large or very negative gate"
    assert (got[gates <= -89] == 0).all(), "for gate < -88, silu(gate) * up is 0 (e^-gate is inf: gate / inf = -0.0)"
    assert_swiglu_close(got, g, u, "extreme gates")
