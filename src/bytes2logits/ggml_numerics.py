"""What llama.cpp's CPU backend does to the numbers, for ``Model.from_gguf(path, numerics="ggml")``.

Exact float32 math and llama.cpp on a quantized file disagree by up to about 2 logits, and the reason is not
the weights (both dequantize them identically) but the *activations*:

* before a product with quantized weights, ggml quantizes the activation row to the weight type's
  "vec-dot" type (Q8_0, Q8_1 or Q8_K: blocks of int8 with one scale), and multiplies integers;
* for Q4_1/Q5_1 weights the block minimum meets the activation block's ``s = d * sum(q)``, which ggml
  stores in fp16;
* the KV cache is float16, and ggml's f16 matrix product rounds its float32 operand to f16 first (the
  queries for ``q·k``, the softmax probabilities for ``p·v``).

The functions here reproduce those steps so the difference can be measured and explained; they are the
only place the model's ``ggml`` numerics differ from ``exact``.
"""

from __future__ import annotations

import numpy as np

from .gguf import GGMLType, GGUFReader
from .model import F32, softmax
from .quants import VEC_DOT_TYPE, fake_quantize, quantize_activation

__all__ = ["GGMLLinear", "attention", "rms_norm"]


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm as ggml computes it: the sum of squares accumulated in float64, the scale in float32."""
    ms = (np.sum(np.square(x, dtype=np.float64), axis=-1, keepdims=True) / x.shape[-1]).astype(F32)
    return x * (F32(1.0) / np.sqrt(ms + F32(eps))) * weight


def attention(q: np.ndarray, keys: np.ndarray, values: np.ndarray, mask, scale) -> np.ndarray:
    """Attention with an f16 KV cache, as ggml's non-flash path computes it.

    ``keys``/``values`` are float16 (the cache); ggml's ``mul_mat(k, q)`` converts q to f16 first, and
    ``mul_mat(v, softmax(...))`` converts the probabilities to f16; products accumulate in float32.
    """
    nkv, rows, hd = q.shape
    q16 = q.astype(np.float16).astype(F32)
    scores = q16 @ keys.astype(F32).transpose(0, 2, 1)
    scores *= scale
    if mask is not None:
        n = mask.shape[0]
        scores = scores.reshape(nkv, rows // n, n, -1)
        scores += mask
        scores = scores.reshape(nkv, rows, -1)
    probs = softmax(scores).astype(np.float16).astype(F32)
    return probs @ values.astype(F32)


def _block_mins(reader: GGUFReader, names: list[str]) -> np.ndarray | None:
    """Each Q4_1/Q5_1 weight block's ``m`` (bytes 2..3, fp16) as float32 ``[rows, in/32]``, stacked by rows."""
    infos = [reader.tensors[n] for n in names]
    if any(i.ggml_type not in (GGMLType.Q4_1, GGMLType.Q5_1) for i in infos):
        return None
    parts = []
    for i in infos:
        size = 20 if i.ggml_type == GGMLType.Q4_1 else 24
        rows = i.n_elements // i.dims[0]
        blocks = reader.tensor_bytes(i.name).reshape(rows, i.dims[0] // 32, size)
        parts.append(np.ascontiguousarray(blocks[:, :, 2:4]).view(np.float16)[..., 0].astype(F32))
    return np.concatenate(parts)


class GGMLLinear:
    """``x @ W.T`` (+ bias) with the activation rounding ggml applies for the weights' type.

    For Q4_1/Q5_1 weights ggml's dot product is ``d_w*d_a*sum(q_w*q_a) + m_w*s_a`` where ``s_a`` is the
    activation block's ``d*sum(q)`` *stored in fp16*; the dequantized product has ``m_w*d_a*sum(q_a)``
    instead, so ``mins`` (the weight blocks' ``m``) lets us add the difference.
    """

    __slots__ = ("weight", "bias", "act_type", "mins")

    def __init__(self, weight: np.ndarray, bias: np.ndarray | None, act_type: GGMLType, mins: np.ndarray | None):
        self.weight, self.bias, self.act_type, self.mins = weight, bias, act_type, mins

    @classmethod
    def from_gguf(cls, weight: np.ndarray, bias, reader: GGUFReader, names: list[str]) -> "GGMLLinear":
        """The layer for the (stacked) tensors ``names``: they must share one ggml type."""
        types = {reader.tensors[n].ggml_type for n in names}
        if len(types) != 1:
            raise ValueError(f"cannot stack {names} with different types {sorted(t.name for t in types)} in ggml numerics")
        return cls(weight, bias, VEC_DOT_TYPE[types.pop()], _block_mins(reader, names))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.mins is not None:
            q, d, s = quantize_activation(x, self.act_type)
            qb = q.reshape(*d.shape, -1)
            xq = (d[..., None] * qb).reshape(x.shape)
            y = xq @ self.weight.T
            y += (s - d * qb.sum(axis=-1, dtype=np.int32).astype(F32)) @ self.mins.T
        else:
            y = fake_quantize(x, self.act_type) @ self.weight.T
        if self.bias is not None:
            y += self.bias
        return y
