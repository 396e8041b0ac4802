"""The forward pass's numerical operations in exact float32 NumPy, and the interface they share.

Two implementations of the same small set of operations drive :class:`bytes2logits.engine.model.Model`:

* :data:`EXACT` (this module): each op as plain float32 math, a few lines of NumPy;
* :data:`bytes2logits.engine.ggml_numerics.GGML`: the same ops rounded the way llama.cpp's CPU kernels
  round them, to reproduce its logits bit for bit on a quantized file.

:class:`Numerics` is that interface: the operations whose rounding differs between the two, plus how a
matrix layer is built from its weights and which dtype the KV cache holds. Everything else in the forward
pass (embedding lookup, reshapes, residual additions, the causal mask) is shared and lives in the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .gguf import GGUFReader

__all__ = ["Numerics", "EXACT", "Linear", "F32", "attention", "causal_mask", "exact_numerics", "rms_norm",
           "rope_angles", "rope_theta", "rope_pairs", "apply_rope", "swiglu"]

F32 = np.float32


# -- the building blocks, each a few lines of NumPy ------------------------------------------------------------
def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """Scale each row of ``x`` to unit root-mean-square, then multiply by ``weight`` (float32 throughout)."""
    ms = np.add.reduce(np.square(x), axis=-1, keepdims=True)  # ufunc directly: np.mean's wrapper costs µs
    ms *= F32(1.0 / x.shape[-1])
    ms += F32(eps)
    return x * (F32(1.0) / np.sqrt(ms)) * weight


def swiglu(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """``silu(gate) * up``, the gated feed-forward activation; ``silu(g) = g * sigmoid(g) = g / (1 + e^-g)``.

    Computed in one float32 buffer (no temporaries per step). For ``g < -88``, ``e^-g`` overflows to inf
    and the result is ``-0.0``, which is the right limit.
    """
    act = np.negative(gate)
    with np.errstate(over="ignore"):
        np.exp(act, out=act)
    act += F32(1.0)
    np.divide(gate, act, out=act)
    act *= up
    return act


def rope_angles(n_pos: int, rope_dim: int, base: float, freq_scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Cosine and sine tables of shape ``[n_pos, rope_dim // 2]`` for rotary position embeddings.

    Pair ``i`` of a head at position ``p`` is rotated by the angle ``p * base ** (-2 i / rope_dim)``:
    low pairs spin fast, high pairs slowly, so relative offsets show up at every scale. The angles are
    built as ggml builds them (``theta`` multiplied step by step by ``base ** (-2 / rope_dim)`` in float32),
    so the tables agree with llama.cpp's to the last bit of the angle.
    """
    theta = rope_theta(n_pos, rope_dim, base, freq_scale)
    return np.cos(theta), np.sin(theta)


def rope_theta(n_pos: int, rope_dim: int, base: float, freq_scale: float = 1.0) -> np.ndarray:
    """The rotation angles ``[n_pos, rope_dim // 2]``: ``theta[p, i] = p * base ** (-2 i / rope_dim)``.

    Built as ggml builds them: start from the position, multiply step by step by ``base ** (-2 / rope_dim)``
    in float32 (``cumprod``), and only then scale by ``freq_scale`` (linear position interpolation; 1 for
    most models), so the angles match llama.cpp's bit for bit.
    """
    half = rope_dim // 2
    theta_scale = F32(base) ** F32(-2.0 / rope_dim)
    steps = np.empty((n_pos, half), dtype=F32)
    steps[:, 0] = np.arange(n_pos, dtype=F32)
    steps[:, 1:] = theta_scale
    theta = np.cumprod(steps, axis=1, dtype=F32)
    theta *= F32(freq_scale)
    return theta


def rope_pairs(x: np.ndarray, half: int, style: str) -> tuple[np.ndarray, np.ndarray]:
    """Views of the two halves of every rotated pair along the last axis of ``x``.

    ``"norm"`` (llama in GGUF): pair ``i`` is ``(x[2i], x[2i+1])``; ``"neox"`` (Qwen, GPT-NeoX): pair ``i`` is
    ``(x[i], x[i + half])``. ``half`` is ``rope_dim // 2``.
    """
    if style == "norm":
        return x[..., 0 : 2 * half : 2], x[..., 1 : 2 * half : 2]
    return x[..., :half], x[..., half : 2 * half]


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, style: str) -> np.ndarray:
    """Rotate ``x`` of shape ``[heads, n, head_dim]`` in place by the angles for its ``n`` positions.

    ``cos``/``sin`` have shape ``[n, rope_dim // 2]``. ``style="norm"`` rotates adjacent pairs
    ``(x[2i], x[2i+1])`` (llama in GGUF), ``"neox"`` rotates ``(x[i], x[i + rope_dim/2])`` (Qwen, GPT-NeoX).
    Dimensions beyond ``rope_dim`` are left alone.
    """
    a, b = rope_pairs(x, cos.shape[-1], style)
    a0 = a.copy()
    a *= cos
    a -= b * sin
    b *= cos
    b += a0 * sin
    return x


def causal_mask(n: int, start_pos: int) -> np.ndarray | None:
    """The additive causal mask ``[n, start_pos + n]`` for ``n`` new tokens after ``start_pos`` cached ones.

    Query ``i`` sits at position ``start_pos + i`` and may read keys ``0 .. start_pos + i``: those entries are
    ``0``, the later ones ``-inf`` (``softmax`` turns them into weights of exactly 0). One new token (a
    decode step) may read everything cached, so it needs no mask: the result is ``None``.
    """
    if n <= 1:
        return None
    return np.triu(np.full((n, start_pos + n), -np.inf, dtype=F32), k=start_pos + 1)


_QUERY_BLOCK = 64  # queries per block when a long prompt's attention is computed block by block


def attention(q: np.ndarray, keys: np.ndarray, values: np.ndarray, mask: np.ndarray | None, scale) -> np.ndarray:
    """Scaled dot-product attention for one layer, all heads at once.

    ``q`` is ``[n_kv_heads, group * n, head_dim]``: the ``group`` query heads that share one KV head are
    stacked as rows (grouped-query attention), so one batched product serves them all. ``keys``/``values``
    are ``[n_kv_heads, n_cached, head_dim]``; ``mask`` is ``[n, n_cached]`` (0 or -inf) or None.
    """
    nkv, rows, hd = q.shape
    if mask is not None and mask.shape[0] > 2 * _QUERY_BLOCK:
        # A long prompt: query block b only sees keys up to its last position, so work block by block and
        # skip the products the causal mask would zero anyway (about a third of them for 256 tokens).
        n = mask.shape[0]
        first = mask.shape[1] - n  # tokens cached before this call
        qb = q.reshape(nkv, rows // n, n, hd)
        out = np.empty_like(qb)
        for b0 in range(0, n, _QUERY_BLOCK):
            b1 = min(n, b0 + _QUERY_BLOCK)
            seen = first + b1
            block = qb[:, :, b0:b1].reshape(nkv, -1, hd)
            out[:, :, b0:b1] = attention(block, keys[:, :seen], values[:, :seen], mask[b0:b1, :seen], scale).reshape(
                nkv, rows // n, b1 - b0, hd)
        return out.reshape(nkv, rows, hd)
    scores = (q * scale) @ keys.transpose(0, 2, 1)  # [nkv, group*n, n_cached]; scaling q is the cheaper side
    if mask is not None:
        n = mask.shape[0]
        scores = scores.reshape(nkv, rows // n, n, -1)
        scores += mask
        scores = scores.reshape(nkv, rows, -1)
    # softmax(scores) @ values, normalised after the product: dividing [rows, head_dim] by the row sums
    # is cheaper than dividing [rows, n_cached] first, and it is the same sum of weighted values.
    scores -= np.max(scores, axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    out = scores @ values
    out *= F32(1.0) / np.add.reduce(scores, axis=-1, keepdims=True)
    return out


class Linear:
    """One weight matrix ``[out, in]`` (float32) applied as ``x @ W.T`` (+ bias).

    One row (a decode step) is a matrix-vector product (sgemv) that streams the weights once at memory
    speed; more rows are one sgemm. BLAS could also be handed the same product turned around,
    ``(W @ x.T).T``; ``benchmarks/bench_engine.py`` times both on the model's own matrices in each run
    (``ratio few_rows_k*``). On a quiet machine the plain orientation is as fast or faster from 9 rows on
    (0.82-0.97 for the turned one), so the engine keeps the one that reads as the math does.
    """

    __slots__ = ("weight", "bias")

    def __init__(self, weight: np.ndarray, bias: np.ndarray | None = None):
        self.weight = weight
        self.bias = bias

    def __call__(self, x: np.ndarray) -> np.ndarray:
        y = x @ self.weight.T
        if self.bias is not None:
            y += self.bias
        return y


@dataclass(frozen=True)
class Numerics:
    """One implementation of the operations whose rounding differs between numerics.

    Attributes:
        name: how ``Model.from_gguf(..., numerics=name)`` asks for it.
        rms_norm: ``(x, weight, eps) -> array``.
        swiglu: ``(gate, up) -> array``.
        rope_angles: ``(n_pos, rope_dim, base, freq_scale) -> (cos, sin)`` tables.
        apply_rope: ``(x, cos, sin, style) -> x``, rotating in place.
        attention: ``(q, keys, values, mask, scale) -> array``; see :func:`attention` for the shapes.
        linear: ``(weight, bias, reader, names) -> layer``: a callable ``x -> x @ weight.T (+ bias)`` for
            the (stacked) tensors ``names`` of ``reader``, already dequantized to ``weight``.
        cache_dtype: the dtype of the KV cache.
    """

    name: str
    rms_norm: Callable[[np.ndarray, np.ndarray, float], np.ndarray]
    swiglu: Callable[[np.ndarray, np.ndarray], np.ndarray]
    rope_angles: Callable[..., tuple[np.ndarray, np.ndarray]]
    apply_rope: Callable[[np.ndarray, np.ndarray, np.ndarray, str], np.ndarray]
    attention: Callable[..., np.ndarray]
    linear: Callable[[np.ndarray, np.ndarray | None, GGUFReader, Sequence[str]], Callable[[np.ndarray], np.ndarray]]
    cache_dtype: type


def _exact_linear(weight: np.ndarray, bias: np.ndarray | None, reader: GGUFReader, names: Sequence[str]) -> Linear:
    """A float32 matrix layer: the weights' storage type no longer matters once they are dequantized."""
    return Linear(weight, bias)


def exact_numerics(name: str = "exact") -> Numerics:
    """The exact float32 numerics: this namespace's ``rms_norm``, ``swiglu``, ``rope_angles``,
    ``apply_rope`` and ``attention`` as they are when this is called, a float32 KV cache and plain
    float32 matrix products.

    The functions are found by name where this function is defined, so a notebook that defines its own
    building blocks and then calls ``exact_numerics()`` gets a :class:`Numerics` made of them (lab 16). They
    are captured now: after redefining a building block, call ``exact_numerics()`` again and rebuild the model.
    """
    return Numerics(name, rms_norm, swiglu, rope_angles, apply_rope, attention, _exact_linear, F32)


#: exact float32 math, the engine's default
EXACT = exact_numerics()
