"""Hidden suite, lab 16 task 3: causal_mask and grouped-query attention over the KV cache.

The oracle computes each query head on its own, softmax in float64 (``lab16_support.attention64``). The
reference is within 1.3e-6 × max|values| of it on random configurations; the checks allow 1e-5 × max|values|.
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
    """The package's own causal_mask and attention (both numerics) raise while these checks run."""
    with S.fence(impl, [(OPS, "causal_mask"), (OPS, "attention"), (GGML, "attention")]):
        yield


def test_causal_mask_values_and_shape(impl):
    """causal_mask(n, start_pos) is float32 [n, start_pos + n]: 0 where key j <= start_pos + i, -inf after it."""
    for n in (2, 3, 7, 40, 130):
        for start in (0, 1, 5, 64, 200):
            got = impl.causal_mask(n, start)
            want = S.causal_mask_oracle(n, start)
            assert S.is_float32_array(got) and got.shape == want.shape, \
                f"causal_mask({n}, {start}) must be a float32 array of shape [n, start_pos + n]"
            assert np.array_equal(got, want), (f"causal_mask({n}, {start}): query i may read keys 0 .. start_pos + i "
                                               "(0) and no later ones (-inf)")


def test_one_new_token_needs_no_mask(impl):
    """causal_mask(1, start_pos) is None: a single new token may read every cached position."""
    for start in (0, 1, 9, 300):
        assert impl.causal_mask(1, start) is None, "one new token (a decode step) needs no mask: return None"


def case(seed, nkv, group, n, start, head_dim, *, spread=1.0):
    rng = np.random.default_rng(seed)
    cached = start + n
    q = (rng.standard_normal((nkv, group * n, head_dim)) * spread).astype(F32)
    k = (rng.standard_normal((nkv, cached, head_dim)) * spread).astype(F32)
    v = rng.standard_normal((nkv, cached, head_dim)).astype(F32)
    return q, k, v, (S.causal_mask_oracle(n, start) if n > 1 else None)


def assert_attention(got, q, k, v, mask, scale, what):
    assert S.is_float32_array(got) and got.shape == q.shape, \
        f"{what}: attention returns float32 of q's shape [n_kv_heads, group * n, head_dim]"
    want = S.attention64(q, k, v, mask, scale)
    err = np.abs(got.astype(np.float64) - want)
    limit = 1e-5 * float(np.abs(v).max())
    assert np.isfinite(got).all() and err.max() <= limit, \
        f"{what}: the output differs from softmax(q·kᵀ · scale + mask) · v computed head by head"


@settings(max_examples=EXAMPLES, **FAST)
@given(nkv=st.integers(1, 3), group=st.integers(1, 4), n=st.integers(1, 40), start=st.integers(0, 40),
       head_dim=st.sampled_from([1, 2, 8, 32, 64]), scale=st.floats(0.05, 2.0), seed=st.integers(0, 2**32 - 1))
def test_attention_matches_a_per_head_oracle(impl, nkv, group, n, start, head_dim, scale, seed):
    """Grouped-query attention on random shapes equals softmax(q·kᵀ · scale + mask) · v computed head by head.

    1-3 KV heads, groups of 1-4 query heads stacked in q[j], 1-40 new tokens after 0-40 cached ones, the
    given scale, the causal mask (None for a single query); float32 of q's shape."""
    q, k, v, mask = case(seed, nkv, group, n, start, head_dim)
    scale = F32(scale)
    got = impl.attention(q, k, v, mask, scale)
    assert_attention(got, q, k, v, mask, scale, f"{nkv} KV heads x group {group}, {n} queries after {start} cached")


def test_long_prompts(impl):
    """Prompts longer than 2 * _QUERY_BLOCK tokens get exactly causal attention, each query up to its position.

    129 to 300 new tokens after 0 to 64 cached ones, SmolLM2's 3 KV heads with groups of 3."""
    for n, start in [(129, 0), (200, 7), (257, 64), (300, 1)]:
        q, k, v, mask = case(n + start, 3, 3, n, start, 64)
        scale = F32(1 / 8)
        assert_attention(impl.attention(q, k, v, mask, scale), q, k, v, mask, scale,
                         f"{n} queries after {start} cached")


def test_decode_step_reads_the_whole_cache(impl):
    """One new token (mask None) attends to every cached position, with each of its query heads."""
    for cached in (1, 2, 31, 300):
        q, k, v, _ = case(cached, 2, 4, 1, cached - 1, 16)
        scale = F32(0.25)
        assert_attention(impl.attention(q, k, v, None, scale), q, k, v, None, scale,
                         f"a decode step over {cached} keys")


def test_masked_keys_get_zero_weight(impl):
    """A key behind a -inf mask entry gets weight exactly 0, however large its score and value.

    The causal mask with extra -inf holes (each query keeps its own position), keys nobody may read scaled
    up and their values set to 1e4; 6 to 150 new tokens."""
    for n, start in [(6, 3), (40, 0), (150, 20)]:
        rng = np.random.default_rng(n)
        q, k, v, mask = case(n, 2, 2, n, start, 16)
        mask = mask.copy()
        holes = rng.random(mask.shape) < 0.3
        holes[np.arange(n), start + np.arange(n)] = False
        mask[holes] = -np.inf
        blocked = np.isinf(mask).all(axis=0)
        k[:, blocked] *= 50
        v[:, blocked] = 1e4
        scale = F32(0.25)
        got = impl.attention(q, k, v, mask, scale)
        assert S.is_float32_array(got) and got.shape == q.shape, "attention returns float32 of q's shape"
        want = S.attention64(q, k, v, mask, scale)
        assert np.isfinite(got).all() and np.abs(got - want).max() <= 1e-4, \
            f"{n} queries: a key behind a -inf mask entry must get weight exactly 0 (add the mask to the scores)"


def test_large_scores_do_not_overflow(impl):
    """Scores in the hundreds still give the right softmax: subtract each row's maximum before exp.

    e^89 is already inf in float32."""
    q, k, v, mask = case(11, 2, 2, 9, 4, 32, spread=6.0)
    scale = F32(1.0)
    with S.numpy_errors_raise(impl, over="ignore", invalid="ignore"):
        got = impl.attention(q, k, v, mask, scale)
    assert_attention(got, q, k, v, mask, scale, "scores of several hundred")


def test_query_heads_read_their_own_kv_head(impl):
    """The query heads in q[j] read KV head j only, and row g*n + i (query i of head g) uses mask row i."""
    n, start, group = 5, 2, 3
    q, k, v, mask = case(3, 4, group, n, start, 8)
    v[:] = np.arange(1, 5, dtype=F32)[:, None, None]  # KV head j holds the value j + 1 everywhere
    got = impl.attention(q, k, v, mask, F32(0.5))
    assert S.is_float32_array(got) and got.shape == q.shape, "attention returns float32 of q's shape"
    assert np.allclose(got, v[:, :1].repeat(group * n, axis=1), atol=1e-5), \
        "the query heads in q[j] must read KV head j (its keys and values only)"
    q, k, v, mask = case(4, 2, group, n, start, 8)
    v[:] = np.arange(start + n, dtype=F32)[None, :, None]  # value = position: the mean shows how far a query reads
    got = impl.attention(np.zeros_like(q), k, v, mask, F32(1.0))  # equal scores: a plain mean over readable keys
    want = np.array([np.arange(start + i + 1).mean() for i in range(n)] * group, F32)
    assert np.allclose(got[..., 0], want, atol=1e-5), \
        "row g*n + i of q[j] is query i of head g: it reads keys 0 .. start_pos + i (mask row i)"
