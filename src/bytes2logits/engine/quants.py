"""Quantization and dequantization of ggml tensor types, in plain NumPy.

A GGUF file rarely stores weights as 32-bit floats. Most tensors are *quantized*: cut into **blocks** of
consecutive values along each row, and every block is stored as a few small integers ("quants", 2 to 8
bits each) plus one or two **scales** that say what the integers are worth. To get floats back
(*dequantize*) you unpack the integers and multiply them by their block's scale::

    row of 64 floats   [ x0 x1 ... x31 | x32 ... x63 ]
    Q8_0 blocks        [ d | q0 ... q31 ][ d | q0 ... q31 ]      x_i  ~=  d * q_i
                         ^fp16 scale  ^ 32 signed bytes

The types this module reads, from biggest to smallest per value:

=======  ======  =====  =====================================================================
type     block   bytes  value of element i
=======  ======  =====  =====================================================================
F32      1       4      the float itself
F16      1       2      IEEE half precision, widened to float32
BF16     1       2      "brain float": the top 16 bits of a float32
Q8_0     32      34     d * q          q: int8                      d: fp16
Q5_1     32      24     d * q + m      q: 0..31 (4 bits + 1 bit)   d, m: fp16
Q5_0     32      22     d * (q - 16)   q: 0..31                     d: fp16
Q4_1     32      20     d * q + m      q: 0..15                     d, m: fp16
Q4_0     32      18     d * (q - 8)    q: 0..15                     d: fp16
Q6_K     256     210    (d*s) * (q - 32)            q: 6 bits, s: int8 per 16 values
Q5_K     256     176    (d*s) * q - (dmin*m)        q: 5 bits, s, m: 6 bits per 32 values
Q4_K     256     144    (d*s) * q - (dmin*m)        q: 4 bits, s, m: 6 bits per 32 values
Q3_K     256     110    (d*(s-32)) * (q - 4*(1-h))  q: 2 bits + 1 "h" bit, s: 6 bits per 16 values
Q2_K     256     84     (d*s) * q - (dmin*m)        q: 2 bits, s, m: 4 bits per 16 values
=======  ======  =====  =====================================================================

The "K" types group 256 values into a *super-block* with one fp16 scale ``d`` (and ``dmin``), and give
each sub-block of 16 or 32 values its own small integer scale ``s`` (and min ``m``), so the scale itself is
quantized too. Each kernel below documents its exact byte layout with a diagram.

**Bit-exactness.** :func:`dequantize` gives the same float32 bits as ggml's ``dequantize_row_*`` and as
gguf-py's ``gguf.quants.dequantize``. Float arithmetic is not associative, so the order of operations is
part of the format: for Q4_K it is ``d1 = d * s``, ``m1 = dmin * m``, then ``d1 * q - m1``, each step a
separate float32 operation. In fact every *product* here is exact in float32 (an 11-bit fp16 significand
times integers of at most 13 bits in total fits in 24 bits), so the one rounding step is the final
``- m1`` (or ``+ m`` for Q4_1/Q5_1). What must not change is therefore: no fused multiply-add (NumPy never
fuses), the operand order (when both sides are NaN, the CPU returns the first operand's NaN, so
``m + d*q`` gives different NaN bits from ``d*q + m``; NumPy keeps that in its loops over whole arrays,
though a broadcast over a single block can return the other one, so gguf-py agrees only because it uses
the same layout), and the sign of zeros (``-(m1 - d1*q)`` turns +0 into -0).

**Speed and memory.** Every kernel works on all blocks at once (a Python loop runs only over the few
positions inside a block); big tensors are processed a chunk of blocks at a time so that the uint8/int8
scratch arrays stay small and in cache, and no int64 temporaries are created.

**Activations.** When llama.cpp multiplies a quantized weight matrix by a float32 activation vector on the
CPU, it first quantizes the activations to the weight type's ``vec_dot_type`` (:data:`VEC_DOT_TYPE`) and
then takes an integer dot product. :func:`fake_quantize` reproduces that rounding, so a NumPy model can
see exactly the numbers ggml sees.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import GGUFError
from .gguf import GGML_BLOCK_SIZES, GGMLType, GGUFReader

__all__ = [
    "DEQUANTIZE_TYPES",
    "ACTIVATION_TYPES",
    "VEC_DOT_TYPE",
    "QUANTIZE_TYPES",
    "QuantizedActivation",
    "dequantize",
    "dequantize_tensor",
    "fake_quantize",
    "quantize",
    "quantize_activation",
]

# Blocks processed per step: about 128K values, i.e. a 512 KB float32 output and ~128 KB of uint8 scratch,
# small enough to stay in the L2 cache (2 MB per core here), big enough that NumPy's per-call overhead
# (a K-quant kernel makes about twenty calls) does not matter. 32K values was measured 10-40% slower.
_CHUNK_VALUES = 1 << 17

_F16 = np.dtype("<f2")
_F32 = np.dtype("<f4")
_U16 = np.dtype("<u2")
_U32 = np.dtype("<u4")


# --------------------------------------------------------------------------------------------------------
# helpers shared by the kernels


def _half(blocks: np.ndarray, start: int) -> np.ndarray:
    """The fp16 number stored at byte ``start`` of every block, widened to float32, shape (n_blocks, 1)."""
    return np.ascontiguousarray(blocks[:, start : start + 2]).view(_F16).astype(np.float32)


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """Split bytes into 4-bit values: all low nibbles first, then all high nibbles.

    ``qs`` has shape (n, k); the result (n, 2k) holds ``qs & 15`` in columns 0..k-1 and ``qs >> 4`` in
    columns k..2k-1. This is how Q4_0/Q4_1/Q5_* pack 32 values into 16 bytes::

        byte j  =  [ hi: value j+16 | lo: value j ]
    """
    n, k = qs.shape
    out = np.empty((n, 2 * k), dtype=np.uint8)
    np.bitwise_and(qs, np.uint8(0x0F), out=out[:, :k])
    np.right_shift(qs, np.uint8(4), out=out[:, k:])
    return out


def _crumbs(qs: np.ndarray, n_groups: int) -> np.ndarray:
    """Split bytes into 2-bit values, four per byte, as the K-quants pack them.

    ``qs`` has shape (n, n_groups * 32). Each group of 32 bytes holds 128 values: bits 0-1 of the 32
    bytes are values 0..31, bits 2-3 are values 32..63, bits 4-5 values 64..95, bits 6-7 values 96..127::

        byte l of a group  =  [ v96+l | v64+l | v32+l | v0+l ]   (2 bits each, high to low)

    Returns uint8 of shape (n, n_groups, 4, 32) = (block, group, bit pair, byte).
    """
    n = qs.shape[0]
    groups = qs.reshape(n, n_groups, 32)
    out = np.empty((n, n_groups, 4, 32), dtype=np.uint8)
    for pair in range(4):
        np.right_shift(groups, np.uint8(2 * pair), out=out[:, :, pair, :])
    out &= np.uint8(3)
    return out


def _bit_planes(mask: np.ndarray) -> np.ndarray:
    """Bit ``b`` of each of the 32 bytes of ``mask`` as 0/1, shape (n, 8, 32): [block, bit, byte].

    One ``np.unpackbits`` call (bits of each byte, lowest first) and a transposed view of its result.
    """
    n = mask.shape[0]
    return np.unpackbits(mask, axis=1, bitorder="little").reshape(n, 32, 8).transpose(0, 2, 1)


def _scale_min_k4(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unpack the eight 6-bit scales and eight 6-bit mins that Q4_K and Q5_K keep in 12 bytes.

    Sub-blocks 0-3 use the low 6 bits of bytes 0-3 (scales) and 4-7 (mins). Sub-blocks 4-7 take their low
    4 bits from bytes 8-11 and their top 2 bits from the spare top bits of bytes 0-7::

        byte  0..3 :  [ s4..s7 hi2 | s0..s3 (6 bits) ]
        byte  4..7 :  [ m4..m7 hi2 | m0..m3 (6 bits) ]
        byte  8..11:  [ m4..m7 lo4 | s4..s7 lo4 ]

    Returns (scales, mins), each uint8 of shape (n_blocks, 8).
    """
    n = scales.shape[0]
    sc = np.empty((n, 8), dtype=np.uint8)
    mn = np.empty((n, 8), dtype=np.uint8)
    a, b, c = scales[:, 0:4], scales[:, 4:8], scales[:, 8:12]
    np.bitwise_and(a, np.uint8(0x3F), out=sc[:, :4])
    np.bitwise_and(b, np.uint8(0x3F), out=mn[:, :4])
    sc[:, 4:] = (c & np.uint8(0x0F)) | ((a >> np.uint8(6)) << np.uint8(4))
    mn[:, 4:] = (c >> np.uint8(4)) | ((b >> np.uint8(6)) << np.uint8(4))
    return sc, mn


# --------------------------------------------------------------------------------------------------------
# block kernels: each takes `blocks` (n_blocks, bytes_per_block) uint8 and writes `out`
# (n_blocks, values_per_block) float32.


def dequant_q8_0(blocks: np.ndarray, out: np.ndarray) -> None:
    """Q8_0, 34 bytes for 32 values: one fp16 scale and 32 signed bytes. ``x = q * d``::

        | d (fp16) | q0 q1 ... q31 (int8) |
          2 bytes    32 bytes
    """
    d = _half(blocks, 0)
    np.copyto(out, blocks[:, 2:].view(np.int8))  # int8 -> float32 (exact)
    np.multiply(out, d, out=out)


def dequant_q4_0(blocks: np.ndarray, out: np.ndarray) -> None:
    """Q4_0, 18 bytes for 32 values: fp16 scale, 32 unsigned 4-bit quants. ``x = d * (q - 8)``::

        | d (fp16) | byte 0 .. byte 15 |      byte j = [ q(j+16) | q(j) ]  (high nibble | low nibble)
    """
    d = _half(blocks, 0)
    q = _nibbles(blocks[:, 2:18])
    q -= np.uint8(8)  # wraps around in uint8; read as int8 it is q - 8 in -8..7
    np.copyto(out, q.view(np.int8))
    np.multiply(d, out, out=out)


def dequant_q4_1(blocks: np.ndarray, out: np.ndarray) -> None:
    """Q4_1, 20 bytes for 32 values: fp16 scale and fp16 min, 32 4-bit quants. ``x = (d * q) + m``::

        | d (fp16) | m (fp16) | byte 0 .. byte 15 |      byte j = [ q(j+16) | q(j) ]
    """
    d, m = _half(blocks, 0), _half(blocks, 2)
    np.copyto(out, _nibbles(blocks[:, 4:20]))
    np.multiply(d, out, out=out)
    np.add(out, m, out=out)


def _five_bit(qh: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """The 32 5-bit quants of a Q5_0/Q5_1 block: 4 low bits from ``qs`` nibbles, bit 4 from ``qh``.

    ``qh`` is a little-endian uint32 whose bit j is the fifth bit of value j.
    """
    q = _nibbles(qs)
    high = np.unpackbits(qh, axis=1, bitorder="little")  # (n, 32): bit j of the uint32 -> column j
    high <<= np.uint8(4)
    q |= high
    return q


def dequant_q5_0(blocks: np.ndarray, out: np.ndarray) -> None:
    """Q5_0, 22 bytes for 32 values: fp16 scale, 32 5-bit quants. ``x = d * (q - 16)``::

        | d (fp16) | qh (4 bytes: bit j = bit 4 of q(j)) | byte 0 .. byte 15: [ q(j+16) lo4 | q(j) lo4 ] |
    """
    d = _half(blocks, 0)
    q = _five_bit(blocks[:, 2:6], blocks[:, 6:22])
    q -= np.uint8(16)  # as int8: q - 16 in -16..15
    np.copyto(out, q.view(np.int8))
    np.multiply(d, out, out=out)


def dequant_q5_1(blocks: np.ndarray, out: np.ndarray) -> None:
    """Q5_1, 24 bytes for 32 values: fp16 scale and min, 32 5-bit quants. ``x = (d * q) + m``::

        | d (fp16) | m (fp16) | qh (4 bytes) | byte 0 .. byte 15 |
    """
    d, m = _half(blocks, 0), _half(blocks, 2)
    np.copyto(out, _five_bit(blocks[:, 4:8], blocks[:, 8:24]))
    np.multiply(d, out, out=out)
    np.add(out, m, out=out)


def dequant_q2_k(blocks: np.ndarray, out: np.ndarray) -> None:
    """Q2_K, 84 bytes for 256 values: 16 sub-blocks of 16, 2-bit quants. ``x = (d*s) * q - (dmin*m)``::

        | scales (16 bytes: [ m lo-hi 4 bits | s 4 bits ] per sub-block) | qs (64 bytes) | d | dmin |

    The 64 ``qs`` bytes are two groups of 32; each byte holds four 2-bit values (see ``_crumbs``), so value
    ``128*g + 32*p + l`` sits in bits ``2p..2p+1`` of byte ``32*g + l``. Sub-block i = values 16i..16i+15.
    """
    n = blocks.shape[0]
    scales = blocks[:, :16]
    d, dmin = _half(blocks, 80), _half(blocks, 82)
    dl = np.multiply(d, scales & np.uint8(0x0F), dtype=np.float32)[:, :, None]  # (n, 16, 1)
    ml = np.multiply(dmin, scales >> np.uint8(4), dtype=np.float32)[:, :, None]
    o = out.reshape(n, 16, 16)
    np.copyto(o, _crumbs(blocks[:, 16:80], 2).reshape(n, 16, 16))
    np.multiply(dl, o, out=o)
    np.subtract(o, ml, out=o)


def dequant_q3_k(blocks: np.ndarray, out: np.ndarray) -> None:
    """Q3_K, 110 bytes for 256 values: 16 sub-blocks of 16, 3-bit quants, no min.

    ``x = (d * (s - 32)) * (lo - 4 * (1 - h))`` where ``lo`` is 2 bits and ``h`` the "high mask" bit::

        | hmask (32 bytes) | qs (64 bytes, 2 bits each) | scales (12 bytes, 16 x 6 bits) | d (fp16) |

    ``lo`` is packed like Q2_K. The h bit of value ``32*k + l`` is bit k of ``hmask[l]``; h = 1 means
    "no offset" (q in 0..3), h = 0 means subtract 4 (q in -4..-1). The 6-bit scales: low 4 bits of
    scale i are nibble ``i // 8`` of byte ``i % 8``; its top 2 bits are bits ``2*(i//4)`` of byte
    ``8 + i % 4``. The scale is stored with an offset of 32 (so -32..31).
    """
    n = blocks.shape[0]
    hmask, scales, d = blocks[:, :32], blocks[:, 96:108], _half(blocks, 108)

    sc = np.empty((n, 16), dtype=np.uint8)
    np.bitwise_and(scales[:, :8], np.uint8(0x0F), out=sc[:, :8])
    np.right_shift(scales[:, :8], np.uint8(4), out=sc[:, 8:])
    # bits (n, byte j, pair k, 2): the top two bits of scale 4k + j are bits 2k, 2k+1 of byte 8 + j
    top = np.unpackbits(scales[:, 8:12], axis=1, bitorder="little").reshape(n, 4, 4, 2)
    top2 = top[..., 0] | (top[..., 1] << np.uint8(1))  # (n, j, k)
    sc.reshape(n, 4, 4)[:] |= top2.transpose(0, 2, 1) << np.uint8(4)
    sc -= np.uint8(32)  # as int8: s - 32
    dl = np.multiply(d, sc.view(np.int8), dtype=np.float32)[:, :, None]  # (n, 16, 1)

    q = _crumbs(blocks[:, 32:96], 2).reshape(n, 8, 32)
    q += _bit_planes(hmask) << np.uint8(2)
    q -= np.uint8(4)  # lo + 4h - 4 = lo - 4(1-h), as int8 in -4..3
    o = out.reshape(n, 16, 16)
    np.multiply(dl, q.view(np.int8).reshape(n, 16, 16), out=o, dtype=np.float32)


def _four_bit_k(qs: np.ndarray) -> np.ndarray:
    """Q4_K/Q5_K quants: 4 chunks of 32 bytes; chunk c's low nibbles are sub-block 2c, high ones 2c+1.

    Returns uint8 (n, 8, 32) = (block, sub-block, position).
    """
    n = qs.shape[0]
    chunks = qs.reshape(n, 4, 32)
    q = np.empty((n, 4, 2, 32), dtype=np.uint8)
    np.bitwise_and(chunks, np.uint8(0x0F), out=q[:, :, 0, :])
    np.right_shift(chunks, np.uint8(4), out=q[:, :, 1, :])
    return q.reshape(n, 8, 32)


def dequant_q4_k(blocks: np.ndarray, out: np.ndarray) -> None:
    """Q4_K, 144 bytes for 256 values: 8 sub-blocks of 32, 4-bit quants. ``x = (d*s) * q - (dmin*m)``::

        | d (fp16) | dmin (fp16) | scales+mins (12 bytes, 6 bits each) | qs (128 bytes) |

    ``qs`` is 4 chunks of 32 bytes; in chunk c, the low nibbles are sub-block 2c and the high nibbles
    sub-block 2c+1. The 6-bit scales and mins are unpacked by ``_scale_min_k4``.
    """
    n = blocks.shape[0]
    d, dmin = _half(blocks, 0), _half(blocks, 2)
    sc, mn = _scale_min_k4(blocks[:, 4:16])
    dl = np.multiply(d, sc, dtype=np.float32)[:, :, None]  # (n, 8, 1)
    ml = np.multiply(dmin, mn, dtype=np.float32)[:, :, None]
    o = out.reshape(n, 8, 32)
    np.copyto(o, _four_bit_k(blocks[:, 16:144]))
    np.multiply(dl, o, out=o)
    np.subtract(o, ml, out=o)


def dequant_q5_k(blocks: np.ndarray, out: np.ndarray) -> None:
    """Q5_K, 176 bytes for 256 values: like Q4_K plus a fifth bit per value. ``x = (d*s) * q - (dmin*m)``::

        | d | dmin | scales+mins (12 bytes) | qh (32 bytes) | qs (128 bytes, packed like Q4_K) |

    The fifth bit of value ``32*i + l`` (sub-block i) is bit i of ``qh[l]``.
    """
    n = blocks.shape[0]
    d, dmin = _half(blocks, 0), _half(blocks, 2)
    sc, mn = _scale_min_k4(blocks[:, 4:16])
    dl = np.multiply(d, sc, dtype=np.float32)[:, :, None]
    ml = np.multiply(dmin, mn, dtype=np.float32)[:, :, None]
    q = _four_bit_k(blocks[:, 48:176])
    q |= _bit_planes(blocks[:, 16:48]) << np.uint8(4)
    o = out.reshape(n, 8, 32)
    np.copyto(o, q)
    np.multiply(dl, o, out=o)
    np.subtract(o, ml, out=o)


def dequant_q6_k(blocks: np.ndarray, out: np.ndarray) -> None:
    """Q6_K, 210 bytes for 256 values: 16 sub-blocks of 16, 6-bit quants. ``x = (d*s) * (q - 32)``::

        | ql (128 bytes, low 4 bits) | qh (64 bytes, high 2 bits) | scales (16 x int8) | d (fp16) |

    Two halves of 128 values; half g uses ``ql[64g : 64g+64]`` and ``qh[32g : 32g+32]``. Inside a half,
    value ``32*p + l`` (p = 0..3, l = 0..31) takes its low 4 bits from nibble ``p // 2`` of
    ``ql[l + 32*(p % 2)]`` and its high 2 bits from bits ``2p..2p+1`` of ``qh[l]``.
    """
    n = blocks.shape[0]
    ql, qh = blocks[:, :128], blocks[:, 128:192]
    scales, d = blocks[:, 192:208].view(np.int8), _half(blocks, 208)
    dl = np.multiply(d, scales, dtype=np.float32)[:, :, None]  # (n, 16, 1)

    q = np.empty((n, 2, 2, 64), dtype=np.uint8)  # (block, half, nibble, byte) == (block, half, p, l)
    halves = ql.reshape(n, 2, 64)
    np.bitwise_and(halves, np.uint8(0x0F), out=q[:, :, 0, :])
    np.right_shift(halves, np.uint8(4), out=q[:, :, 1, :])
    high = _crumbs(qh, 2)  # (n, 2, 4, 32): bits 2p..2p+1 of qh[l]
    high <<= np.uint8(4)
    q = q.reshape(n, 2, 4, 32)
    q |= high
    q -= np.uint8(32)  # as int8: q - 32 in -32..31
    o = out.reshape(n, 16, 16)
    np.copyto(o, q.view(np.int8).reshape(n, 16, 16))
    np.multiply(dl, o, out=o)


#: The block types that have a kernel: the kernel for type T is the function named ``dequant_<t>``.
_KERNEL_TYPES = (GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1,
                 GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K)


def _kernel(t: GGMLType):
    """The block kernel of type ``t``: the function ``dequant_<name>`` (``dequant_q4_k`` for Q4_K).

    Looked up by name when it is needed, so that a kernel can be replaced (or written later, as in
    lab 15) without a table to keep in step.
    """
    kernel = globals().get(f"dequant_{t.name.lower()}")
    if kernel is None:
        raise GGUFError(f"dequantize: no kernel for {t.name}: define dequant_{t.name.lower()}(blocks, out)")
    return kernel


#: Every type :func:`dequantize` accepts.
DEQUANTIZE_TYPES: frozenset[GGMLType] = frozenset({GGMLType.F32, GGMLType.F16, GGMLType.BF16, *_KERNEL_TYPES})


# --------------------------------------------------------------------------------------------------------
# public API: dequantization


def _ggml_type(ggml_type, supported, what: str) -> GGMLType:
    """``ggml_type`` (a GGMLType, gguf-py enum or int) as a GGMLType, or a GGUFError naming it."""
    try:
        t = GGMLType(int(ggml_type))
    except (ValueError, TypeError):
        raise GGUFError(f"{what}: unknown ggml type {ggml_type!r}") from None
    if t not in supported:
        names = ", ".join(sorted(x.name for x in supported))
        raise GGUFError(f"{what} does not support ggml type {t.name} (id {int(t)}); supported: {names}")
    return t


def _as_uint8(raw) -> np.ndarray:
    """``raw`` (bytes, bytearray, memoryview or ndarray) as a flat uint8 array, copied only if needed."""
    if isinstance(raw, np.ndarray):
        arr = raw if raw.flags.c_contiguous else np.ascontiguousarray(raw)
        return arr.reshape(-1).view(np.uint8)
    return np.frombuffer(raw, dtype=np.uint8)


def dequantize(raw, ggml_type, shape) -> np.ndarray:
    """Turn the stored bytes of a tensor into float32 values.

    Args:
        raw: exactly the tensor's bytes: a uint8 array (e.g. ``GGUFReader.tensor_bytes(name)``, a
            read-only memory map is fine), ``bytes`` or a ``memoryview``.
        ggml_type: the tensor's :class:`~bytes2logits.engine.gguf.GGMLType` (or its integer id): one of
            :data:`DEQUANTIZE_TYPES` (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K).
        shape: the tensor's shape in NumPy order (``TensorInfo.shape``). Rows run along the last axis,
            so its length must be a multiple of the type's block size (32 or 256 for quantized types).

    Returns:
        A new C-contiguous float32 array of ``shape``, bit-for-bit what ggml's ``dequantize_row_*`` (and
        gguf-py's ``gguf.quants.dequantize``) produce, including NaN/inf/-0 when the scales are such.

    Raises:
        GGUFError: (a ValueError) for an unsupported type, a last dimension that is not a whole number
            of blocks, or a byte count that does not match the shape; the message names the type and
            the expected and given sizes.

    How it works: the bytes are viewed as a (n_blocks, bytes_per_block) table, one row per block; a
    kernel turns a chunk of that table into a (n_blocks, values_per_block) float32 table at once::

        raw bytes    [ block 0 ][ block 1 ][ block 2 ] ...        (n_blocks * bytes_per_block)
                          |          |          |
        float32      [ 32 or 256 values ][ ... ][ ... ] ...       (n_blocks * values_per_block)
                     = reshaped to `shape`

    Example::

        >>> import numpy as np
        >>> block = np.float16(0.5).tobytes() + bytes([1, 2, 255] + [0] * 29)     # a Q8_0 block
        >>> dequantize(block, GGMLType.Q8_0, (32,))[:4]
        array([ 0.5,  1. , -0.5,  0. ], dtype=float32)
    """
    t = _ggml_type(ggml_type, DEQUANTIZE_TYPES, "dequantize")
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError:
        shape = (int(shape),)
    if any(s < 0 for s in shape):
        raise GGUFError(f"{t.name} tensor: invalid shape {shape}")
    data = _as_uint8(raw)
    per_block, block_bytes = GGML_BLOCK_SIZES[t]
    n = 1
    for s in shape:
        n *= s
    if per_block > 1 and (not shape or shape[-1] % per_block):
        raise GGUFError(
            f"{t.name} tensor of shape {shape}: the last dimension must be a multiple of the {t.name} "
            f"block size {per_block} (blocks never straddle rows)"
        )
    n_blocks = n // per_block
    expected = n_blocks * block_bytes
    if data.size != expected:
        raise GGUFError(
            f"{t.name} tensor of shape {shape} needs {expected} bytes ({n_blocks} blocks of {block_bytes} "
            f"bytes for {per_block} values each), got {data.size}"
        )

    if t == GGMLType.F16:  # IEEE widening; one astype is faster than copyto into a fresh array
        wide = data.view(_F16).astype(np.float32)
        wide.shape = shape  # in place: the result owns its data, as every other type's does
        return wide
    out = np.empty(shape, dtype=np.float32)
    flat = out.reshape(-1)
    if n == 0:
        return out
    if t == GGMLType.F32:
        np.copyto(flat, data.view(_F32))
    elif t == GGMLType.BF16:
        # a bf16 is the top half of a float32: widen the 16 bits to 32 and shift them up
        bits = flat.view(np.uint32)
        np.copyto(bits, data.view(_U16))
        bits <<= np.uint32(16)
    else:
        kernel = _kernel(t)
        blocks = data.reshape(n_blocks, block_bytes)
        values = flat.reshape(n_blocks, per_block)
        step = max(1, _CHUNK_VALUES // per_block)
        # inf * 0 (an inf scale times a zero quant) is NaN in ggml too: no warnings for what the format allows
        with np.errstate(all="ignore"):
            for start in range(0, n_blocks, step):
                kernel(blocks[start : start + step], values[start : start + step])
    return out


def dequantize_tensor(reader: GGUFReader, name: str) -> np.ndarray:
    """Dequantize the tensor ``name`` of an open :class:`~bytes2logits.engine.gguf.GGUFReader` to float32.

    The result has the tensor's NumPy-order shape (``reader.tensors[name].shape``), e.g.
    ``(49152, 576)`` for SmolLM2's ``token_embd.weight``. Raises :class:`GGUFError` for an unknown name.
    """
    info = reader.tensors.get(name)
    if info is None:
        raise GGUFError(f"no tensor named {name!r} in {getattr(reader, 'path', 'this file')}")
    try:
        return dequantize(reader.tensor_bytes(name), info.ggml_type, info.shape)
    except GGUFError as e:
        raise GGUFError(f"tensor {name!r}: {e}") from None


# --------------------------------------------------------------------------------------------------------
# public API: weight quantization (the reverse direction: float32 -> blocks)
#
# Each quantizer takes float32 blocks (n_blocks, 32) and returns their bytes (n_blocks, bytes_per_block),
# bit for bit what ggml's reference ``quantize_row_*_ref`` (and gguf-py's ``gguf.quants.quantize``) write.
# The rules, per block of 32 values x:
#
#   Q8_0  d = max|x| / 127                    q = round_half_away(x / d)          x ~= d * q
#   Q4_0  d = x[argmax |x|] / -8              q = min(15, trunc(x / d + 8.5))     x ~= d * (q - 8)
#   Q5_0  d = x[argmax |x|] / -16             q = min(31, trunc(x / d + 16.5))    x ~= d * (q - 16)
#   Q4_1  d = (max - min) / 15,  m = min      q = min(15, trunc((x - m) / d + .5))  x ~= d * q + m
#   Q5_1  d = (max - min) / 31,  m = min      q = min(31, trunc((x - m) / d + .5))  x ~= d * q + m
#
# "x / d" is computed as x * (1/d) in float32, with 1/d = 0 for an all-zero block, exactly as ggml does;
# d and m are stored as fp16. Q4_0/Q5_0 divide by a *negative* number so that the value of largest
# magnitude lands exactly on the end of the range that has one more step (-8 of -8..7), and the sign of d
# carries its sign.


def _fp16_bytes(v: np.ndarray) -> np.ndarray:
    """float32 values of shape (n, 1) as their fp16 bytes, shape (n, 2) (round to nearest even)."""
    return v.astype(np.float16).view(np.uint8)


def _inverse(d: np.ndarray) -> np.ndarray:
    """``1 / d`` in float32, and 0 where ``d`` is 0 (an all-zero block stays all zeros)."""
    return np.divide(np.float32(1.0), d, out=np.zeros_like(d), where=d != 0)


def _pack_nibbles(q: np.ndarray) -> np.ndarray:
    """The inverse of ``_nibbles``: 32 values 0..15 per row -> 16 bytes, value j low and j+16 high."""
    return (q[:, :16] & np.uint8(0x0F)) | (q[:, 16:] << np.uint8(4))


def _signed_max(blocks: np.ndarray) -> np.ndarray:
    """The value of largest magnitude in each block, with its sign (the first one on ties), shape (n, 1)."""
    where = np.argmax(np.abs(blocks), axis=1)[:, None]
    return np.take_along_axis(blocks, where, axis=1)


def quantize_q8_0(blocks: np.ndarray) -> np.ndarray:
    """Q8_0 blocks of float32 ``blocks`` (n, 32): 34 bytes each, an fp16 scale then 32 int8 quants.

    ``d = max|x| / 127`` and ``q = round(x * (1/d))`` with halves rounded away from zero (C's ``roundf``),
    so that the largest value becomes ±127 and every value is off by at most ``d / 2`` (plus the fp16
    rounding of ``d``). An all-zero block gets ``d = 0`` and zero quants.

    >>> b = quantize_q8_0(np.linspace(-1, 1, 32, dtype=np.float32)[None])
    >>> b.shape, b[0, 2:].view(np.int8)[[0, -1]].tolist()
    ((1, 34), [-127, 127])
    """
    d = np.max(np.abs(blocks), axis=1, keepdims=True) / np.float32(127.0)
    q = _round_half_away(blocks * _inverse(d)).astype(np.int8)
    return np.concatenate([_fp16_bytes(d), q.view(np.uint8)], axis=1)


def _symmetric(blocks: np.ndarray, half: int) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0/Q5_0's rule with ``half`` = 8 or 16: ``d = x[argmax|x|] / -half`` and quants in 0..2*half-1,
    ``q = min(2*half - 1, trunc(x/d + half + 0.5))``. Returns ``(d, q)``."""
    d = _signed_max(blocks) / np.float32(-half)
    q = np.trunc(blocks * _inverse(d) + np.float32(half + 0.5)).astype(np.uint8)
    np.minimum(q, np.uint8(2 * half - 1), out=q)
    return d, q


def _affine(blocks: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q4_1/Q5_1's rule with ``top`` = 15 or 31: ``d = (max - min) / top``, ``m = min`` and
    ``q = min(top, trunc((x - m)/d + 0.5))``. Returns ``(d, m, q)``."""
    lo = np.min(blocks, axis=1, keepdims=True)
    d = (np.max(blocks, axis=1, keepdims=True) - lo) / np.float32(top)
    q = np.trunc((blocks - lo) * _inverse(d) + np.float32(0.5)).astype(np.uint8)
    np.minimum(q, np.uint8(top), out=q)
    return d, lo, q


def quantize_q4_0(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks (18 bytes): ``d = x[argmax|x|] / -8``, ``q = min(15, trunc(x/d + 8.5))``; x ~= d(q-8)."""
    d, q = _symmetric(blocks, 8)
    return np.concatenate([_fp16_bytes(d), _pack_nibbles(q)], axis=1)


def quantize_q4_1(blocks: np.ndarray) -> np.ndarray:
    """Q4_1 blocks (20 bytes): ``d = (max-min)/15``, ``m = min``, ``q = min(15, trunc((x-m)/d + 0.5))``."""
    d, lo, q = _affine(blocks, 15)
    return np.concatenate([_fp16_bytes(d), _fp16_bytes(lo), _pack_nibbles(q)], axis=1)


def _pack_five(q: np.ndarray) -> np.ndarray:
    """32 values 0..31 per row -> 4 bytes of fifth bits (bit j = bit 4 of value j) + 16 bytes of nibbles."""
    high = np.packbits(q >> np.uint8(4), axis=1, bitorder="little")  # (n, 4): a little-endian uint32
    return np.concatenate([high, _pack_nibbles(q)], axis=1)


def quantize_q5_0(blocks: np.ndarray) -> np.ndarray:
    """Q5_0 blocks (22 bytes): ``d = x[argmax|x|] / -16``, ``q = min(31, trunc(x/d + 16.5))``."""
    d, q = _symmetric(blocks, 16)
    return np.concatenate([_fp16_bytes(d), _pack_five(q)], axis=1)


def quantize_q5_1(blocks: np.ndarray) -> np.ndarray:
    """Q5_1 blocks (24 bytes): ``d = (max-min)/31``, ``m = min``, ``q = min(31, trunc((x-m)/d + 0.5))``."""
    d, lo, q = _affine(blocks, 31)
    return np.concatenate([_fp16_bytes(d), _fp16_bytes(lo), _pack_five(q)], axis=1)


#: Every type :func:`quantize` writes.
QUANTIZE_TYPES: frozenset[GGMLType] = frozenset(
    {GGMLType.Q8_0, GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1})


def quantize(x, ggml_type) -> np.ndarray:
    """Quantize float32 weights to one of :data:`QUANTIZE_TYPES`: the tensor's bytes, as a GGUF stores them.

    Args:
        x: an array of finite numbers (converted to float32); rows run along the last axis, whose length
            must be a multiple of 32.
        ggml_type: Q8_0, Q4_0, Q4_1, Q5_0 or Q5_1 (a :class:`GGMLType` or its id).

    Returns:
        A flat uint8 array of ``x.size / 32 * bytes_per_block`` bytes; ``dequantize(result, ggml_type,
        x.shape)`` reads it back. Bit for bit what gguf-py's ``gguf.quants.quantize`` writes. As in
        ggml, a block so small that its scale underflows fp16 (``max|x| / 127`` below about 6e-8 for
        Q8_0) is stored with ``d = 0``, i.e. as zeros.

    Raises:
        GGUFError: for another type, a row that is not a whole number of blocks, or a NaN or infinity
            (ggml would write garbage for them); the message names the first bad position.

    >>> x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)
    >>> y = dequantize(quantize(x, GGMLType.Q8_0), GGMLType.Q8_0, x.shape)
    >>> bool(np.abs(y - x).max() <= 1 / 127 / 2 * 1.001)
    True
    """
    t = _ggml_type(ggml_type, QUANTIZE_TYPES, "quantize")
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 0 or x.shape[-1] % 32:
        raise GGUFError(f"quantize: {t.name} stores rows in blocks of 32 values; the last dimension of an "
                        f"array of shape {x.shape} is not a multiple of 32")
    bad = ~np.isfinite(x)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise GGUFError(f"quantize: x{list(where)} = {x[where]} is not a finite number; {t.name} cannot store it")
    blocks = x.reshape(-1, 32)
    quantizer = globals()[f"quantize_{t.name.lower()}"]
    out = np.empty((blocks.shape[0], GGML_BLOCK_SIZES[t][1]), dtype=np.uint8)
    step = _CHUNK_VALUES // 32
    # A scale too big for fp16 becomes inf (found just below); a block of subnormal floats has 1/d = inf,
    # whose quants ggml leaves undefined, but its fp16 d is 0, so it reads back as zeros either way.
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, blocks.shape[0], step):
            out[start : start + step] = quantizer(blocks[start : start + step])
    n_halves = 2 if t in (GGMLType.Q4_1, GGMLType.Q5_1) else 1  # d, or d and m
    halves = np.ascontiguousarray(out[:, : 2 * n_halves]).view(_F16)
    overflow = ~np.isfinite(halves)
    if overflow.any():
        block, field = (int(i) for i in np.argwhere(overflow)[0])
        row, col = divmod(block * 32, x.shape[-1])
        raise GGUFError(f"quantize: the {'scale d' if field == 0 else 'min m'} of the {t.name} block at row "
                        f"{row}, columns {col}..{col + 31} is larger than fp16 can hold (65504)")
    return out.reshape(-1)


# --------------------------------------------------------------------------------------------------------
# public API: activation quantization ("ggml numerics")

#: For each weight type, the type ggml's CPU backend converts the float32 activations to before the dot
#: product (``type_traits_cpu[type].vec_dot_type`` in ggml-cpu.c).
VEC_DOT_TYPE: dict[GGMLType, GGMLType] = {
    GGMLType.F32: GGMLType.F32,
    GGMLType.F16: GGMLType.F16,
    GGMLType.BF16: GGMLType.BF16,
    GGMLType.Q4_0: GGMLType.Q8_0,
    GGMLType.Q5_0: GGMLType.Q8_0,
    GGMLType.Q8_0: GGMLType.Q8_0,
    GGMLType.Q4_1: GGMLType.Q8_1,
    GGMLType.Q5_1: GGMLType.Q8_1,
    GGMLType.Q2_K: GGMLType.Q8_K,
    GGMLType.Q3_K: GGMLType.Q8_K,
    GGMLType.Q4_K: GGMLType.Q8_K,
    GGMLType.Q5_K: GGMLType.Q8_K,
    GGMLType.Q6_K: GGMLType.Q8_K,
}

#: The activation types :func:`fake_quantize` and :func:`quantize_activation` produce.
ACTIVATION_TYPES: frozenset[GGMLType] = frozenset(VEC_DOT_TYPE.values()) | {GGMLType.Q8_1}


class QuantizedActivation(NamedTuple):
    """An activation row quantized to Q8_0, Q8_1 or Q8_K, unpacked into arrays.

    Attributes:
        q: int8 quants, the same shape as the input.
        d: float32 scale of each block, shape ``(..., n_blocks)``: the fp16-rounded scale for Q8_0/Q8_1
            (what ggml stores), the exact float32 ``1/iscale`` for Q8_K. Block b of a row covers
            ``q[..., b*B : (b+1)*B]`` (B = 32, or 256 for Q8_K).
        s: Q8_1 only (else None): ``d * sum(q)`` of each block rounded to fp16 and widened again, as ggml
            stores it. The Q4_1/Q5_1 dot product uses it for the ``min`` term:
            ``sum(x_w * x_a) = d_w*d_a*sum(q_w*q_a) + m_w*s_a``.
    """

    q: np.ndarray
    d: np.ndarray
    s: np.ndarray | None


def _round_half_away(v: np.ndarray) -> np.ndarray:
    """C's ``roundf``: round to the nearest integer, halves away from zero (2.5 -> 3, -2.5 -> -3).

    ``floor(|v| + 0.5)`` would be wrong for 0.49999997 (the sum rounds up to 1.0 in float32), so the
    fraction ``|v| - floor(|v|)``, which is exact, is compared with 0.5 instead.
    """
    a = np.abs(v)
    whole = np.floor(a)
    whole += (a - whole) >= np.float32(0.5)
    return np.copysign(whole, v)


def _blocks_of(x: np.ndarray, block: int, t: GGMLType) -> np.ndarray:
    if x.ndim == 0 or x.shape[-1] % block:
        raise ValueError(
            f"{t.name} quantizes rows in blocks of {block} values: the last dimension of x "
            f"(shape {x.shape}) must be a multiple of {block}"
        )
    return x.reshape(-1, block)


def quantize_activation(x: np.ndarray, ggml_type, *, reference: bool = False) -> QuantizedActivation:
    """Quantize float32 activations to Q8_0, Q8_1 or Q8_K the way llama.cpp's x86 CPU backend does.

    Each row (last axis) is cut into blocks (32 values for Q8_0/Q8_1, 256 for Q8_K) and every block gets
    one scale ``d`` and int8 quants ``q`` with ``x ~= d * q``::

        block    [ x0  x1  ...  x31 ]          amax = max |x_i|
        Q8_0     [ d | q0 q1 ... q31 ]         d = amax / 127 (stored as fp16),  q_i = round(x_i * 127/amax)

    The rounding rules follow ggml's ``quantize_row_q8_0/q8_1/q8_K`` as built for x86 with AVX2:

    * Q8_0 and Q8_1 (``reference=False``, the default): the AVX/AVX2 path (``ggml-cpu/arch/x86/quants.c``,
      and the same rule in the AVX2 "repack" path ``ggml_quantize_mat_q8_0_4x8``) multiplies by
      ``id = 127 / amax`` and rounds with ``_mm256_round_ps(_MM_ROUND_NEAREST)``: **round half to even**.
    * Q8_0 and Q8_1 with ``reference=True``: the portable C reference ``quantize_row_q8_0_ref`` (and
      gguf-py): ``id = 1 / d`` and ``roundf``, **halves away from zero**. The two differ only at exact
      ties and where ``127/amax`` and ``1/(amax/127)`` round differently: at most one step of q.
    * Q8_K: x86 has no SIMD version (it calls ``quantize_row_q8_K_ref``): take ``max``, the value of
      largest magnitude (the first one on ties), ``iscale = -127 / max``, ``q = min(127, round(iscale*x))``
      with round half to even, and ``d = 1 / iscale`` kept as float32. Note d is negative when max > 0.
    * A block of zeros gets d = 0 and q = 0.

    Args:
        x: float32 array (other float dtypes are converted first); last axis a multiple of the block.
        ggml_type: GGMLType.Q8_0, Q8_1 or Q8_K (use ``VEC_DOT_TYPE[weight_type]`` to pick it).
        reference: use the portable reference rounding for Q8_0/Q8_1 instead of the AVX2 one.

    Returns:
        A :class:`QuantizedActivation` (q, d, s). Inputs must be finite: ggml gives garbage for NaN/inf.
    """
    t = _ggml_type(ggml_type, {GGMLType.Q8_0, GGMLType.Q8_1, GGMLType.Q8_K}, "quantize_activation")
    x = np.asarray(x, dtype=np.float32)
    block = GGML_BLOCK_SIZES[t][0]
    xb = _blocks_of(x, block, t)
    block_shape = x.shape[:-1] + (x.shape[-1] // block,)

    if t == GGMLType.Q8_K:
        where = np.argmax(np.abs(xb), axis=1)[:, None]  # first index of the largest |x|
        vmax = np.take_along_axis(xb, where, axis=1)  # that value, with its sign
        nonzero = vmax != 0
        iscale = np.divide(np.float32(-127.0), vmax, out=np.zeros_like(vmax), where=nonzero)
        v = xb * iscale
        q = np.minimum(np.rint(v), np.float32(127.0)).astype(np.int8)
        d = np.divide(np.float32(1.0), iscale, out=np.zeros_like(iscale), where=nonzero)
        return QuantizedActivation(q.reshape(x.shape), d.reshape(block_shape), None)

    amax = np.max(np.abs(xb), axis=1, keepdims=True)
    d = amax / np.float32(127.0)
    if reference:
        inv = np.divide(np.float32(1.0), d, out=np.zeros_like(d), where=d != 0)
        q = _round_half_away(xb * inv)
    else:
        inv = np.divide(np.float32(127.0), amax, out=np.zeros_like(amax), where=amax != 0)
        q = np.rint(xb * inv)
    q = q.astype(np.int8)
    d16 = d.astype(np.float16).astype(np.float32)
    s = None
    if t == GGMLType.Q8_1:
        total = q.sum(axis=1, keepdims=True, dtype=np.int32).astype(np.float32)  # |sum| <= 32 * 127
        s = (d * total).astype(np.float16).astype(np.float32).reshape(block_shape)
    return QuantizedActivation(q.reshape(x.shape), d16.reshape(block_shape), s)


def _round_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 -> float32 as ``ggml_compute_fp32_to_bf16``: round half to even on the top 16 bits,
    NaNs kept as (quiet) NaNs."""
    bits = x.view(np.uint32)
    is_nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    # adding 0x7FFF plus the lowest kept bit rounds to nearest, ties to even; done in uint64 so that
    # values near 0xFFFFFFFF do not wrap around
    rounded = (bits.astype(np.uint64) + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))))
    top = (rounded >> np.uint64(16)).astype(np.uint32)
    top = np.where(is_nan, (bits >> np.uint32(16)) | np.uint32(64), top)
    return (top << np.uint32(16)).view(np.float32)


def fake_quantize(x: np.ndarray, ggml_type, *, reference: bool = False) -> np.ndarray:
    """Round float32 activations the way ggml does before a matmul, and return them as float32 again.

    ``ggml_type`` is the *activation* type, i.e. ``VEC_DOT_TYPE[weight_type]``:

    * F32: unchanged (a copy).
    * F16: rounded to IEEE half precision (round half to even, as the F16C instruction ggml uses on x86).
    * BF16: rounded to bfloat16 (round half to even on the top 16 bits, NaN stays NaN).
    * Q8_0 / Q8_1 / Q8_K: quantized by :func:`quantize_activation` (see there for the rounding rules and
      ``reference``), then ``d * q`` per block.

    Each row (last axis) is handled on its own; for the Q8 types its length must be a multiple of the
    block (32, or 256 for Q8_K). The result has the same shape as ``x``. For every value,
    ``|fake_quantize(x) - x| <= |d| / 2`` (plus the fp16 rounding of d for Q8_0/Q8_1), zeros stay zero,
    and applying it twice changes nothing more than applying it once (up to the fp16 scale rounding).

    Example::

        >>> x = np.linspace(-1, 1, 32, dtype=np.float32)
        >>> y = fake_quantize(x, GGMLType.Q8_0)
        >>> bool(np.abs(y - x).max() <= 0.5 / 127 * 1.001)
        True
    """
    t = _ggml_type(ggml_type, frozenset(GGMLType), "fake_quantize")
    if t in VEC_DOT_TYPE and t not in ACTIVATION_TYPES:
        raise GGUFError(
            f"fake_quantize: {t.name} is a weight type, not an activation type; ggml multiplies {t.name} "
            f"weights with {VEC_DOT_TYPE[t].name} activations: call fake_quantize(x, VEC_DOT_TYPE[{t.name}])"
        )
    t = _ggml_type(t, ACTIVATION_TYPES, "fake_quantize")
    x = np.asarray(x, dtype=np.float32)
    if t == GGMLType.F32:
        return np.array(x, dtype=np.float32, order="C", copy=True)
    if t == GGMLType.F16:
        return x.astype(np.float16).astype(np.float32)
    if t == GGMLType.BF16:
        return _round_to_bf16(np.ascontiguousarray(x))
    q, d, _ = quantize_activation(x, t, reference=reference)
    block = GGML_BLOCK_SIZES[t][0]
    qb = q.reshape(-1, block)
    out = np.multiply(d.reshape(-1, 1), qb, dtype=np.float32)
    return out.reshape(x.shape)
