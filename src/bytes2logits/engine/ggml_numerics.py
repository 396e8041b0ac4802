"""What llama.cpp's CPU backend does to the numbers, for ``Model.from_gguf(path, numerics="ggml")``.

Exact float32 math and llama.cpp on a quantized file disagree by up to about 2 logits. The weights are not
the reason (both sides dequantize them identically); the *activations* are:

* before a product with quantized weights, ggml quantizes the activation row to the weight type's
  "vec-dot" type (Q8_0, Q8_1 or Q8_K: blocks of int8 with one scale) and multiplies integers;
* for Q4_1/Q5_1 weights the block minimum meets the activation block's ``s = d * sum(q)``, which ggml
  stores in fp16;
* the KV cache is float16, and ggml's f16 matrix product rounds its float32 operand to f16 first (the
  queries for ``q·k``, the softmax probabilities for ``p·v``).

Emulating those roundings is not enough to *reproduce* llama.cpp, though, and the reason is worth knowing.
Rounding to 8 bits is discontinuous: when two computations of the same activation differ in the last bit
(float additions done in another order, a fused multiply-add instead of a multiply and an add, a ``cos``
from another library), now and then one of them lands on the other side of a rounding boundary and its
int8 differs by one step. That error is about 1/254 of the block's largest value, a million times larger
than the one-bit difference that caused it, and in the next layer it moves thousands of other values,
some of which cross boundaries too. Measured on SmolLM2-135M Q4_1: with every op right "up to float
rounding", the first flipped int8 appears in layer 0 or 1, by layer 3 every row differs by ~1e-3 and the
logits by ~0.2 on average, exactly as far from llama.cpp as plain float32 math is.

So this module reproduces ggml *bit for bit*, op by op, for the paths SmolLM2 Q4_1 takes through an
x86-64 AVX-512 build (checked against tensors captured from llama.cpp with its ``cb_eval`` hook):

==========================  ============================================================================
op                          what ggml computes (and this module reproduces)
==========================  ============================================================================
RMSNorm                     squares rounded to float32, summed in double, mean and scale in float32
Q4_1 x activation           ``ggml_vec_dot_q4_1_q8_1`` (AVX2): 8 int32 lanes per block, accumulated over
                            blocks with a fused multiply-add, folded in a fixed tree, plus ``sum(m*s)``
RoPE                        glibc ``cosf``/``sinf`` of float32 angles; the rotation with one fused
                            multiply-add per output (the compiler contracts ``x0*c - x1*s``)
q·k, p·v  (f16 cache)       f16 x f16 products (exact in float32) summed in 16 lanes (``llamafile_sgemm``
                            tinyBLAS, prompts) or 4x16 lanes (``ggml_vec_dot_f16``, one token), then a
                            fixed reduction tree
softmax                     ggml's vectorized ``expf`` (a degree-5 polynomial, not libm), sums of 16 in a
                            tree, accumulated in double, and a multiplication by ``(float)(1/sum)``
SwiGLU                      ``x / (1 + expf(-x)) * g`` with the same vectorized ``expf``
==========================  ============================================================================

Other weight types (Q8_0, the K-quants ...) still get the activation rounding but float32 accumulation:
the tied output matrix (Q8_0) is one of them, which is harmless because its result only feeds the argmax.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache

import numpy as np

from .gguf import GGMLType, GGUFReader
from .ops import F32, Numerics, rope_pairs, rope_theta
from .quants import VEC_DOT_TYPE, fake_quantize, quantize_activation

__all__ = ["GGML", "GGMLLinear", "attention", "rms_norm", "swiglu", "rope_angles", "apply_rope", "expf"]

F64 = np.float64


def _fma(a, b, c) -> np.ndarray:
    """float32 ``a*b + c`` with one rounding, as the FMA instruction computes it.

    The product of two float32 numbers is exact in float64 (24 + 24 significant bits < 53), so only the
    addition rounds twice (to float64, then to float32); that differs from a true FMA only when the float64
    sum lands exactly half-way between two float32 numbers, about once in 2**29 operations.
    """
    return (np.asarray(a, F64) * b + c).astype(F32)


# -- RMSNorm ---------------------------------------------------------------------------------------------
def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm as ggml computes it (``ggml_compute_forward_rms_norm_f32`` then ``ggml_mul``).

    Each square ``x*x`` is rounded to float32 *before* it is added to a double-precision sum; the mean is
    rounded to float32, ``scale = 1/sqrt(mean + eps)`` is float32 arithmetic, then ``x*scale`` and
    ``*weight`` are two float32 products.
    """
    sq = np.square(x).astype(F64)  # float32 squares, widened: the C code is `sum += (double)(x*x)`
    ms = (np.sum(sq, axis=-1, keepdims=True) / x.shape[-1]).astype(F32)
    scale = F32(1.0) / np.sqrt(ms + F32(eps))
    return (x * scale) * weight


# -- the vectorized exp ggml uses in softmax and SiLU ------------------------------------------------------
_EXP_SHIFT = F32(float.fromhex("0x1.8p23"))  # adding 1.5 * 2**23 rounds a float32 to an integer
_LOG2E = F32(float.fromhex("0x1.715476p+0"))
_LN2_HI = F32(float.fromhex("0x1.62e4p-1"))  # ln 2 split in two so that n*ln2 is subtracted exactly
_LN2_LO = F32(float.fromhex("0x1.7f7d1cp-20"))
_EXP_C = [F32(float.fromhex(h))
          for h in ("0x1.ffffecp-1", "0x1.fffdb6p-2", "0x1.555e66p-3", "0x1.573e2ep-5", "0x1.0e4020p-7")]


def expf(x: np.ndarray) -> np.ndarray:
    """``exp(x)`` for float32 ``x`` exactly as ggml's AVX-512 ``ggml_v_expf`` computes it.

    ggml does not call the C library's ``expf`` in softmax and SiLU: it uses a vectorized approximation
    (from Arm's optimized-routines, max error about 1.5 ulp). The recipe: ``n = round(x / ln 2)``,
    ``b = x - n ln 2`` (in two pieces, with FMAs), ``exp(b)`` by a degree-5 polynomial evaluated in an
    Estrin-like order with FMAs, then multiply by ``2**n``. Results that would overflow give ``inf``, ones
    that underflow give 0 (also for ``x = -inf``, the masked attention scores).
    """
    x = np.asarray(x, F32)
    with np.errstate(invalid="ignore", over="ignore"):
        z = _fma(x, _LOG2E, _EXP_SHIFT)
        n = z - _EXP_SHIFT  # x / ln2 rounded to an integer, as a float
        b = _fma(-n, _LN2_LO, _fma(-n, _LN2_HI, x))
        u = b * b
        c1, c2, c3, c4, c5 = _EXP_C
        j = _fma(_fma(_fma(c5, b, c4), u, _fma(c3, b, c2)), u, _fma(c1, b, F32(1.0)))
        big = ~(np.abs(n) <= F32(192))  # also true for NaN/inf n
        ni = np.where(big, 0, n).astype(np.int32)
        res = np.ldexp(j, ni).astype(F32)  # _mm512_scalef_ps: j * 2**n, rounded once
        if big.any():
            res = np.where(big, np.where(n > 0, F32(np.inf), F32(0.0)), res)
    return res


def swiglu(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """``silu(gate) * up`` as ``ggml_vec_swiglu_f32``: ``gate / (1 + expf(0 - gate)) * up`` in float32,
    with ggml's own :func:`expf`."""
    return (gate / (F32(1.0) + expf(F32(0.0) - gate))) * up


# -- RoPE ------------------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _libm():
    """The C library's ``cosf``/``sinf`` (glibc's, like the llama.cpp build), or None if not loadable."""
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        for fn in (lib.cosf, lib.sinf):
            fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
        return lib
    except (OSError, AttributeError):
        return None


def rope_angles(n_pos: int, rope_dim: int, base: float, freq_scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """RoPE cos/sin tables ``[n_pos, rope_dim // 2]`` as ggml's ``ggml_rope_cache_init`` builds them.

    The angles are the same as :func:`bytes2logits.engine.ops.rope_angles` (float32, ``theta`` multiplied step
    by step by ``base ** (-2 / rope_dim)``), but ggml takes their cosine and sine with the C library's
    ``cosf``/``sinf``, which are not correctly rounded: on about 1% of the angles glibc's result differs by
    one ulp from the float32 nearest to the true value (what ``np.cos`` of a float64 gives). One ulp in
    ``cos`` is enough to flip an int8 rounding later, so the C functions are called here through ctypes
    (falling back to the correctly rounded value where no C library can be loaded).
    """
    theta = rope_theta(n_pos, rope_dim, base, freq_scale)
    lib = _libm()
    if lib is None:
        return np.cos(theta.astype(F64)).astype(F32), np.sin(theta.astype(F64)).astype(F32)
    flat = theta.ravel().tolist()
    cos = np.fromiter(map(lib.cosf, flat), dtype=F32, count=len(flat)).reshape(theta.shape)
    sin = np.fromiter(map(lib.sinf, flat), dtype=F32, count=len(flat)).reshape(theta.shape)
    return cos, sin


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, style: str) -> np.ndarray:
    """Rotate ``x`` ``[heads, n, head_dim]`` in place as ggml's ``rotate_pairs`` does.

    The C source says ``x0*cos - x1*sin`` and ``x0*sin + x1*cos``, but the compiler (GCC with
    ``-ffp-contract=fast``, its default outside strict ISO mode) fuses each into one FMA:
    ``fma(x0, cos, -(x1*sin))`` and ``fma(x0, sin, x1*cos)``: the first product is never rounded.
    """
    a, b = rope_pairs(x, cos.shape[-1], style)
    x0, x1 = a.copy(), b.copy()
    a[...] = _fma(x0, cos, -(x1 * sin))
    b[...] = _fma(x0, sin, x1 * cos)
    return x


# -- attention with the f16 KV cache ----------------------------------------------------------------------
def _reduce16(v: np.ndarray) -> np.ndarray:
    """Sum the 16 lanes on the last axis in the order of GCC's ``_mm512_reduce_add_ps``: halves, then
    quarters, then ``(l0 + l2) + (l1 + l3)``."""
    t = v[..., 8:16] + v[..., 0:8]
    t = t[..., 4:8] + t[..., 0:4]
    return (t[..., 0] + t[..., 2]) + (t[..., 1] + t[..., 3])


def _f16_dot(a16: np.ndarray, b16: np.ndarray, single: bool) -> np.ndarray:
    """``a @ b.T`` for f16 values (given as float32) with ggml's summation order, over the last axis.

    ``a16`` is ``[..., m, k]``, ``b16`` ``[..., p, k]``; returns ``[..., m, p]``. A product of two f16
    numbers is exact in float32, so each fused multiply-add is just an addition. ``single=False`` is
    llamafile's tinyBLAS (used when the batch has >= 2 rows): element ``i`` goes to lane ``i % 16``, each
    lane adds its products in order, the 16 lanes are folded by :func:`_reduce16`. ``single=True`` is
    ``ggml_vec_dot_f16`` (one-token decode): 4 accumulators of 16 lanes take 64 elements per step, then
    ``(acc0 + acc2) + (acc1 + acc3)`` and the same 16-lane fold. A tail beyond a multiple of 64 would be
    added in double; the callers pad ``k`` with zeros instead (adding 0 changes nothing).
    """
    k = a16.shape[-1]
    width = 64 if single else 16
    steps = k // width
    acc = None
    for s in range(steps):
        sl = slice(s * width, (s + 1) * width)
        prod = a16[..., :, None, sl] * b16[..., None, :, sl]  # [..., m, p, width]
        acc = prod if acc is None else acc + prod
    if single:
        acc = (acc[..., 0:16] + acc[..., 32:48]) + (acc[..., 16:32] + acc[..., 48:64])
    return _reduce16(acc)


def _pad_last(x: np.ndarray, mult: int) -> np.ndarray:
    extra = -x.shape[-1] % mult
    if extra == 0:
        return x
    return np.concatenate([x, np.zeros(x.shape[:-1] + (extra,), x.dtype)], axis=-1)


def _softmax(scores: np.ndarray) -> np.ndarray:
    """ggml's ``soft_max`` on rows already scaled and masked: ``expf(x - max)`` with ggml's :func:`expf`,
    each group of 16 summed by the ``_mm512_reduce_add_ps`` tree and accumulated in double, then every value
    multiplied by ``(float)(1.0 / sum)`` (not divided by the sum: the two differ in the last bit)."""
    w = _pad_last(scores, 16)
    w[..., scores.shape[-1]:] = -np.inf
    e = expf(w - np.max(w, axis=-1, keepdims=True))
    parts = _reduce16(e.reshape(e.shape[:-1] + (-1, 16))).astype(F64)
    total = np.zeros(parts.shape[:-1], F64)
    for c in range(parts.shape[-1]):  # serial double accumulation, as in ggml_vec_soft_max_f32
        total += parts[..., c]
    inv = (1.0 / total).astype(F32)
    return e[..., : scores.shape[-1]] * inv[..., None]


def attention(q: np.ndarray, keys: np.ndarray, values: np.ndarray, mask, scale) -> np.ndarray:
    """Attention with an f16 KV cache, as ggml's non-flash path computes it (``kq``, ``soft_max_ext``,
    ``kqv``), to the bit.

    ``q`` is ``[n_kv_heads, group * n, head_dim]`` float32, ``keys``/``values`` ``[n_kv_heads, n_cached,
    head_dim]`` float16 (the cache), ``mask`` ``[n, n_cached]`` or None (one-token decode). ggml's
    ``mul_mat(k, q)`` rounds q to f16, ``soft_max`` works in float32 with its own ``expf``, and
    ``mul_mat(v, p)`` rounds the probabilities to f16. Which dot-product kernel runs depends on the batch:
    ``llamafile_sgemm`` for >= 2 tokens, ``ggml_vec_dot_f16`` for one (``mask is None``); they add in a
    different order, so the one-token path must be emulated separately.
    """
    single = mask is None
    q16 = q.astype(np.float16).astype(F32)
    k16 = keys.astype(F32)
    scores = _f16_dot(q16, k16, single)  # [nkv, rows, n_cached]
    scores *= F32(scale)
    if mask is not None:
        nkv, rows, _ = q.shape
        n = mask.shape[0]
        scores = scores.reshape(nkv, rows // n, n, -1)
        scores += mask
        scores = scores.reshape(nkv, rows, -1)
    probs = _softmax(scores)
    p16 = _pad_last(probs.astype(np.float16).astype(F32), 64)
    vt = _pad_last(np.ascontiguousarray(values.astype(F32).transpose(0, 2, 1)), 64)  # [nkv, hd, n_cached]
    return _f16_dot(p16, vt, single)


# -- matrix products with quantized weights ---------------------------------------------------------------
class _Q4_1:
    """Q4_1 weights kept as ggml stores them: 4-bit quants (0..15), per-block scale ``d`` and minimum ``m``."""

    __slots__ = ("q", "d", "m")

    def __init__(self, reader: GGUFReader, names: list[str]):
        qs, ds, ms = [], [], []
        for name in names:
            info = reader.tensors[name]
            rows = info.n_elements // info.dims[0]
            blocks = reader.tensor_bytes(name).reshape(rows, info.dims[0] // 32, 20)
            ds.append(np.ascontiguousarray(blocks[:, :, 0:2]).view(np.float16)[..., 0].astype(F32))
            ms.append(np.ascontiguousarray(blocks[:, :, 2:4]).view(np.float16)[..., 0].astype(F32))
            nib = blocks[:, :, 4:]
            # value i of a block is the low nibble of byte i, value i + 16 the high nibble
            qs.append(np.concatenate([nib & 15, nib >> 4], axis=-1).reshape(rows, -1))
        q = np.concatenate(qs).astype(F32)
        out, k = q.shape
        # [lane group, 4, out]: lane group g of block b holds the 4 consecutive values 4g .. 4g+3
        self.q = np.ascontiguousarray(q.reshape(out, k // 4, 4).transpose(1, 2, 0))
        self.d, self.m = np.concatenate(ds), np.concatenate(ms)

    def matmul(self, x: np.ndarray) -> np.ndarray:
        """``x @ W.T`` as ``ggml_vec_dot_q4_1_q8_1`` (AVX2 code, also what an AVX-512 build runs).

        Per 32-value block the activation is quantized to Q8_1 (:func:`quantize_activation`); the integer
        products are summed in 8 int32 lanes of 4 consecutive values each (exact); each lane, converted to
        float, is accumulated over the blocks with ``acc = fma(d_w*d_a, lane, acc)``; the 8 lanes are
        folded as ``hsum_float_8`` does (``l_i + l_{i+4}``, then ``(0+2) + (1+3)``) and the minimum term
        ``sum_b m_w[b] * s_a[b]``, accumulated separately in float32, is added last.
        """
        lead = x.shape[:-1]
        x = x.reshape(-1, x.shape[-1])
        qa, da, sa = quantize_activation(x, GGMLType.Q8_1)
        n, k = qa.shape
        nb = k // 32
        out = self.q.shape[-1]
        a = np.ascontiguousarray(qa.reshape(n, k // 4, 4).transpose(1, 0, 2), dtype=F32)  # [k/4, n, 4]
        # fma(d_w*d_a, lane, acc), block after block: the product of two float32 numbers is exact in
        # float64, so a float64 product, a float64 addition and one rounding to float32 give the FMA's
        # result (see _fma). Per block: its 8 lanes (integers < 2**13, exact in float32; computed block by
        # block so they stay in cache), the product into tmp, the sum rounded into acc.
        dd = np.multiply(da.T[:, :, None], self.d.T[:, None, :], dtype=F32)  # [nb, n, out]
        acc = np.zeros((8, n, out), F32)
        rows = max(1, (1 << 20) // (64 * out))  # rows per chunk: the float64 scratch stays about 1 MiB
        tmp = np.empty((8, rows, out), F64)
        lanes = np.empty((8, rows, out), F32)
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            t, ln, ac = tmp[:, : r1 - r0], lanes[:, : r1 - r0], acc[:, r0:r1]
            for b in range(nb):
                np.matmul(a[8 * b : 8 * b + 8, r0:r1], self.q[8 * b : 8 * b + 8], out=ln)
                np.multiply(ln, dd[b, r0:r1], out=t, dtype=F64)
                np.add(t, ac, out=ac, dtype=F64, casting="unsafe")
        mins = np.zeros((n, out), F32)
        for b in range(nb):
            mins = _fma(sa[:, b, None], self.m[None, :, b], mins)
        r = acc[4:] + acc[:4]
        y = ((r[0] + r[2]) + (r[1] + r[3])) + mins
        return y.reshape(*lead, out)


class GGMLLinear:
    """``x @ W.T`` (+ bias) with the arithmetic ggml uses for the weights' type.

    Q4_1 weights get the bit-exact emulation of ggml's kernel (:class:`_Q4_1`). Other types get the
    activation rounding of their vec-dot type (:func:`fake_quantize`) and a float32 product: right up to
    float rounding, which is enough for a layer whose output is only compared, like the logits.
    """

    __slots__ = ("weight", "bias", "act_type", "q4_1")

    def __init__(self, weight: np.ndarray, bias: np.ndarray | None, act_type: GGMLType, q4_1: _Q4_1 | None = None):
        self.weight, self.bias, self.act_type, self.q4_1 = weight, bias, act_type, q4_1

    @classmethod
    def from_gguf(cls, weight: np.ndarray, bias, reader: GGUFReader, names: list[str]) -> "GGMLLinear":
        """The layer for the (stacked) tensors ``names``: they must share one ggml type."""
        types = {reader.tensors[n].ggml_type for n in names}
        if len(types) != 1:
            raise ValueError(f"cannot stack {names} with different types {sorted(t.name for t in types)} "
                             "in ggml numerics")
        t = types.pop()
        return cls(weight, bias, VEC_DOT_TYPE[t], _Q4_1(reader, names) if t == GGMLType.Q4_1 else None)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.q4_1 is not None:
            y = self.q4_1.matmul(x)
        else:
            y = fake_quantize(x, self.act_type) @ self.weight.T
        if self.bias is not None:
            y += self.bias
        return y


#: llama.cpp's CPU numerics (``Model.from_gguf(path, numerics="ggml")``): an f16 KV cache, activations
#: rounded to the weights' vec-dot type, ggml's own expf and summation orders
GGML = Numerics("ggml", rms_norm, swiglu, rope_angles, apply_rope, attention, GGMLLinear.from_gguf, np.float16)
