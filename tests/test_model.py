"""The NumPy model: dtypes, KV-cache bookkeeping, errors, and the building blocks against plain formulas.

Parity with llama.cpp lives in tests/test_parity.py; these tests pin the model's own contract.
"""

from __future__ import annotations

import numpy as np
import pytest

from bytes2logits import assets
from bytes2logits.engine.model import Model
from bytes2logits.engine.ops import Linear, apply_rope, attention, rms_norm, rope_angles
from bytes2logits.errors import ContextFullError, GGUFError

PROMPT = [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407, 19712,
          8182, 2, 198, 1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198]


@pytest.fixture(scope="module")
def model():
    return Model.from_gguf(assets.path("smollm2"), n_ctx=128)


def test_logits_are_float32_and_answer(model):
    """The SmolLM2 prompt 'What is the capital of France?' continues with 'The' (id 504), in float32."""
    model.reset()
    logits = model.forward(PROMPT)
    assert logits.dtype == np.float32 and logits.shape == (len(PROMPT), 49152)
    assert np.isfinite(logits).all()
    assert int(logits[-1].argmax()) == 504
    assert model.n_past == len(PROMPT)


def test_incremental_equals_full(model):
    """Prefix, then one token at a time through the cache, gives the logits of one full pass."""
    model.reset()
    full = model.forward(PROMPT)
    model.reset()
    parts = [model.forward(PROMPT[:20])]
    parts.append(model.forward(PROMPT[20:30], start_pos=20))
    for i in range(30, len(PROMPT)):
        parts.append(model.forward([PROMPT[i]], start_pos=i))
    np.testing.assert_allclose(np.concatenate(parts), full, atol=2e-4, rtol=0)
    model.reset()
    last = model.forward(PROMPT, last_only=True)
    assert last.shape == (1, 49152)
    np.testing.assert_allclose(last[0], full[-1], atol=2e-4, rtol=0)


def test_rewinding_overwrites_the_cache(model):
    """Going back to an earlier position replaces what was cached there."""
    model.reset()
    model.forward(PROMPT[:10])
    model.forward([42, 43, 44], start_pos=10)
    model.forward(PROMPT[10:20], start_pos=10)  # rewind: forget 42, 43, 44
    a = model.forward(PROMPT[20:25], start_pos=20)
    model.reset()
    b = model.forward(PROMPT[:25])[20:]
    np.testing.assert_allclose(a, b, atol=2e-4, rtol=0)


def test_errors_name_the_problem(model):
    model.reset()
    with pytest.raises(ValueError, match="token id 49152 at position 2"):
        model.forward([1, 2, 49152])
    with pytest.raises(ValueError, match="non-empty"):
        model.forward([])
    with pytest.raises(TypeError, match="integers"):
        model.forward(np.array([1.0, 2.0]))
    model.forward([1, 2, 3])
    with pytest.raises(ValueError, match="start_pos 5 must be between 0 and the 3 positions"):
        model.forward([1], start_pos=5)
    with pytest.raises(ContextFullError, match="exceed the context window of 128"):
        model.forward([1] * 126, start_pos=3)
    # A failed call leaves the cache as it was.
    assert model.n_past == 3
    with pytest.raises(ValueError, match="numerics"):
        Model.from_gguf(assets.path("smollm2"), numerics="fast")


def test_unsupported_architecture(tmp_path):
    gguf = pytest.importorskip("gguf")
    p = tmp_path / "gpt2.gguf"
    w = gguf.GGUFWriter(p, arch="gpt2")
    w.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(GGUFError, match="architecture 'gpt2' is not supported"):
        Model.from_gguf(p)


def test_ggml_numerics_is_close_but_not_identical(model):
    """The ggml mode rounds activations to 8 bits: logits move, the top choice mostly does not."""
    q = Model.from_gguf(model.reader, n_ctx=64, numerics="ggml")
    model.reset()
    exact = model.forward(PROMPT)
    approx = q.forward(PROMPT)
    assert approx.dtype == np.float32
    diff = np.abs(exact - approx).max()
    assert 1e-3 < diff < 10, diff
    agree = (exact.argmax(-1) == approx.argmax(-1)).mean()
    assert agree > 0.8, agree
    assert q.k_cache.dtype == np.float16


# -- building blocks against textbook formulas -----------------------------------------------------------------
def test_rms_norm_and_attention():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 16)).astype(np.float32)
    w = rng.standard_normal(16).astype(np.float32)
    x64 = x.astype(np.float64)
    expected = x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-5) * w
    got = rms_norm(x, w, 1e-5)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    # attention = softmax(q k^T * scale + mask) v, with the softmax written out in float64
    nkv, group, n, hd = 2, 3, 5, 8
    q = rng.standard_normal((nkv, group * n, hd)).astype(np.float32)
    kv = rng.standard_normal((2, nkv, n, hd)).astype(np.float32)
    mask = np.triu(np.full((n, n), -np.inf, np.float32), 1)
    for m in (None, mask):
        scores = q.astype(np.float64) @ kv[0].transpose(0, 2, 1) * 0.25
        if m is not None:
            scores = (scores.reshape(nkv, group, n, n) + m).reshape(nkv, group * n, n)
        p = np.exp(scores - scores.max(-1, keepdims=True))
        expected = p / p.sum(-1, keepdims=True) @ kv[1]
        got = attention(q, kv[0], kv[1], m, np.float32(0.25))
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("style", ["norm", "neox"])
def test_rope_rotates_the_right_pairs(style):
    """Each rotated pair keeps its length, position 0 is the identity, and the pairing follows the style."""
    d, n = 8, 5
    cos, sin = rope_angles(n, d, 10000.0)
    assert cos.dtype == np.float32 and cos.shape == (n, d // 2)
    x = np.random.default_rng(1).standard_normal((2, n, d)).astype(np.float32)
    y = apply_rope(x.copy(), cos, sin, style)
    np.testing.assert_allclose(y[:, 0], x[:, 0], rtol=0, atol=0)
    pairs = [(2 * i, 2 * i + 1) for i in range(d // 2)] if style == "norm" else [(i, i + d // 2) for i in range(d // 2)]
    for i, (a, b) in enumerate(pairs):
        theta = np.arange(n) * 10000.0 ** (-2 * i / d)
        ea = x[..., a] * np.cos(theta) - x[..., b] * np.sin(theta)
        eb = x[..., a] * np.sin(theta) + x[..., b] * np.cos(theta)
        np.testing.assert_allclose(y[..., a], ea, atol=1e-5)
        np.testing.assert_allclose(y[..., b], eb, atol=1e-5)


def _tiny_llama(path, *, extra=(), **keys):
    """A 1-layer random llama GGUF (no tokenizer: the model does not need one), with overrides."""
    gguf = pytest.importorskip("gguf")
    rng = np.random.default_rng(0)
    d, ff, vocab = 32, 64, 40
    w = gguf.GGUFWriter(path, arch="llama")
    meta = {"llama.context_length": 64, "llama.embedding_length": d, "llama.block_count": 1,
            "llama.feed_forward_length": ff, "llama.attention.head_count": 4, "llama.attention.head_count_kv": 2,
            "llama.rope.freq_base": 10000.0, "llama.attention.layer_norm_rms_epsilon": 1e-5, **keys}
    for k, v in meta.items():
        add = w.add_uint32 if isinstance(v, int) and v >= 0 else w.add_float32 if isinstance(v, float) else w.add_int32
        add(k, v)
    shapes = {"token_embd.weight": (vocab, d), "output_norm.weight": (d,), "blk.0.attn_norm.weight": (d,),
              "blk.0.ffn_norm.weight": (d,), "blk.0.attn_q.weight": (d, d), "blk.0.attn_k.weight": (d // 2, d),
              "blk.0.attn_v.weight": (d // 2, d), "blk.0.attn_output.weight": (d, d),
              "blk.0.ffn_gate.weight": (ff, d), "blk.0.ffn_up.weight": (ff, d), "blk.0.ffn_down.weight": (d, ff)}
    for name in extra:
        shapes[name] = (d,)
    for name, shape in shapes.items():
        w.add_tensor(name, (rng.standard_normal(shape) * 0.2).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_hostile_models_are_refused_by_name(tmp_path):
    """Files that parse but would compute something wrong or crash deep in NumPy are refused up front."""
    ok = Model.from_gguf(_tiny_llama(tmp_path / "ok.gguf"))
    assert ok.forward([1, 2, 3]).shape == (3, 40)
    cases = {
        "rope_freqs": ({"extra": ["rope_freqs.weight"]}, "rope_freqs.weight"),
        "unknown tensor": ({"extra": ["blk.0.mystery.weight"]}, "does not use: blk.0.mystery.weight"),
        "zero layers": ({"llama.block_count": 0}, "'llama.block_count' = 0"),
        "zero rope base": ({"llama.rope.freq_base": 0.0}, "'llama.rope.freq_base' = 0.0"),
        "negative eps": ({"llama.attention.layer_norm_rms_epsilon": -1.0}, "layer_norm_rms_epsilon"),
        "zero rope dims": ({"llama.rope.dimension_count": 0}, "'llama.rope.dimension_count' = 0"),
    }
    for label, (kw, message) in cases.items():
        extra = kw.pop("extra", ())
        with pytest.raises(GGUFError, match=None) as e:
            Model.from_gguf(_tiny_llama(tmp_path / f"{label}.gguf", extra=extra, **kw))
        assert message in str(e.value), (label, str(e.value))


def test_start_pos_must_be_an_int(model):
    model.reset()
    model.forward([1, 2])
    for bad in (1.0, True, "1"):
        with pytest.raises(TypeError, match="start_pos must be an int"):
            model.forward([3], start_pos=bad)
    assert model.n_past == 2


def test_long_prompt_blocked_attention_equals_short_calls(model):
    """A 300-token prompt goes through block-by-block causal attention; 100-token calls do not."""
    long = Model.from_gguf(model.reader, n_ctx=512)
    ids = np.random.default_rng(3).integers(256, 49152, 300)
    whole = long.forward(ids)
    long.reset()
    parts = np.concatenate([long.forward(ids[i : i + 100], start_pos=i) for i in range(0, 300, 100)])
    np.testing.assert_allclose(whole, parts, atol=2e-4, rtol=0)
    long.reset()
    long.forward(ids[:50])
    tail = long.forward(ids[50:], start_pos=50)  # blocks that start after cached tokens
    np.testing.assert_allclose(tail, whole[50:], atol=2e-4, rtol=0)


@pytest.mark.parametrize("bias", [False, True])
def test_linear_is_the_product_for_every_row_count(bias):
    """One row (sgemv) and many (sgemm): x @ W.T (+ b), float32, C-contiguous, within float32 rounding
    of a float64 product, and a row computes the same whichever batch it is in."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((70, 48), dtype=np.float32)
    b = rng.standard_normal(70, dtype=np.float32) if bias else None
    layer = Linear(w, b)
    x = rng.standard_normal((40, 48), dtype=np.float32)
    for n in (1, 2, 3, 9, 32, 40):
        y = layer(x[:n])
        want = x[:n].astype(np.float64) @ w.T.astype(np.float64) + (0 if b is None else b)
        assert y.dtype == np.float32 and y.shape == (n, 70) and y.flags.c_contiguous, n
        np.testing.assert_allclose(y, want, rtol=0, atol=2e-5 * np.abs(want).max())
        np.testing.assert_allclose(y[0], layer(x[:1])[0], rtol=0, atol=2e-5 * np.abs(want).max())
