"""The transformer forward pass in NumPy: from token ids to next-token logits.

A decoder-only transformer such as SmolLM2 turns ``n`` token ids into ``n`` rows of logits, one score per
vocabulary entry for "which token comes next". Every layer does the same two things to a stream of vectors
(one vector of ``n_embd`` floats per token, the *residual stream*)::

    x = embedding[ids]                                   # [n, n_embd]
    for each layer:
        h = rms_norm(x) * attn_norm                      # scale each vector to unit root-mean-square
        q, k, v = h @ Wq.T, h @ Wk.T, h @ Wv.T           # (+ biases for qwen2; per-head RMSNorm for qwen3)
        q, k = rope(q, positions), rope(k, positions)    # rotate pairs of dims by a position-dependent angle
        cache k, v at their positions                    # the KV cache: earlier tokens are not recomputed
        a = softmax(q k^T / sqrt(head_dim) + causal mask) v   # each query head reads its shared KV head (GQA)
        x = x + a @ Wo.T
        h = rms_norm(x) * ffn_norm
        x = x + (silu(h @ Wgate.T) * (h @ Wup.T)) @ Wdown.T  # SwiGLU feed-forward
    logits = rms_norm(x) * output_norm @ Wout.T          # Wout = the embedding when `output.weight` is absent

Weights are dequantized once, at load, to float32, and every activation stays float32 (the tests assert it:
NumPy 2 silently promotes to float64 when a float64 *scalar* sneaks in, which doubles the memory traffic).

``numerics="ggml"`` reproduces what llama.cpp's CPU backend does with a quantized file instead of exact
float32 math: before each matrix product the activations are quantized to the weight type's "vec-dot" type
(Q8_0, Q8_1 or Q8_K blocks of 8-bit integers), the KV cache is float16, and the attention products round
their float32 operand to float16 as ggml's f16 matrix product does. That mode exists to explain (and
measure) why llama.cpp's logits differ from exact math by up to about 2; the default stays exact.

Supported architectures (``general.architecture``): ``llama`` (SmolLM2, Llama; RoPE on adjacent pairs),
``qwen2`` (q/k/v biases, NEOX RoPE on the two halves), ``qwen3`` (per-head q/k RMSNorm, NEOX RoPE).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import GGUFError
from .checks import check_context, token_id_array
from .ggml_numerics import GGML
from .gguf import GGMLType, GGUFReader
from .ops import EXACT, F32, Numerics, causal_mask
from .quants import dequantize

__all__ = ["Model", "Hyperparameters", "ARCHITECTURES", "NUMERICS", "WeightTransform", "Dequantizer", "forward",
           "transformer_block"]

#: ``(tensor name, stored ggml type, float32 weight) -> float32 weight of the same shape``: see ``Model.from_gguf``
WeightTransform = Callable[[str, GGMLType, np.ndarray], np.ndarray]
#: ``(raw bytes, ggml type, shape) -> float32 array``: how a tensor's stored bytes become weights
Dequantizer = Callable[..., np.ndarray]

#: the implementations of the numerical operations, by the name ``numerics=`` takes
NUMERICS: dict[str, Numerics] = {n.name: n for n in (EXACT, GGML)}


@dataclass(frozen=True)
class _Arch:
    rope: str  # "norm": rotate adjacent pairs (2i, 2i+1); "neox": rotate (i, i + rope_dim/2)
    qkv_bias: bool
    qk_norm: bool


# What differs between the supported architectures. The RoPE style is llama.cpp's for each arch: the
# converter from Hugging Face checkpoints permutes llama's Q/K rows so that adjacent-pair rotation is right.
ARCHITECTURES = {
    "llama": _Arch(rope="norm", qkv_bias=False, qk_norm=False),
    "qwen2": _Arch(rope="neox", qkv_bias=True, qk_norm=False),
    "qwen3": _Arch(rope="neox", qkv_bias=False, qk_norm=True),
}


@dataclass(frozen=True)
class Hyperparameters:
    """The numbers that define the network's shape, read from ``<arch>.*`` metadata keys."""

    arch: str
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_ctx_train: int
    rope_dim: int
    rope_base: float
    rope_freq_scale: float
    rms_eps: float

    @classmethod
    def from_gguf(cls, reader: GGUFReader) -> "Hyperparameters":
        """Read and check the hyperparameters; a missing or inconsistent key raises :class:`GGUFError`."""
        arch = reader.require("general.architecture", str)
        if arch not in ARCHITECTURES:
            raise GGUFError(
                f"{reader.path}: architecture {arch!r} is not supported (supported: {', '.join(ARCHITECTURES)})"
            )

        def num(key: str, default=None, kind=int):
            full = f"{arch}.{key}"
            value = reader.get(full, default)
            if value is None:
                raise GGUFError(f"{reader.path}: required metadata key {full!r} is missing")
            if isinstance(value, (np.ndarray, str, list, bool)):
                raise GGUFError(f"{reader.path}: metadata key {full!r} should be a number, got {type(value).__name__}")
            value = kind(value)
            if not (np.isfinite(value) and value > 0 or key == "attention.layer_norm_rms_epsilon" and value >= 0):
                raise GGUFError(f"{reader.path}: metadata key {full!r} = {value!r} is not a positive number")
            return value

        n_embd = num("embedding_length")
        n_head = num("attention.head_count")
        n_head_kv = num("attention.head_count_kv", n_head)
        if n_head <= 0 or n_head_kv <= 0 or n_head % n_head_kv:
            raise GGUFError(
                f"{reader.path}: {arch}.attention.head_count ({n_head}) must be a positive multiple of "
                f"head_count_kv ({n_head_kv})"
            )
        head_dim = num("attention.key_length", n_embd // n_head)
        if num("attention.value_length", head_dim) != head_dim:
            raise GGUFError(f"{reader.path}: different key and value head sizes are not supported")
        rope_dim = num("rope.dimension_count", head_dim)
        if rope_dim > head_dim or rope_dim % 2:
            raise GGUFError(f"{reader.path}: {arch}.rope.dimension_count {rope_dim} does not fit head size {head_dim}")
        scaling = reader.get(f"{arch}.rope.scaling.type", "none")
        factor = reader.get(f"{arch}.rope.scaling.factor", 0.0) or 0.0
        if not isinstance(factor, (int, float)) or isinstance(factor, bool) or not np.isfinite(factor) or factor < 0:
            raise GGUFError(f"{reader.path}: {arch}.rope.scaling.factor must be a non-negative number, got {factor!r}")
        if scaling not in ("none", "linear") and factor not in (0.0, 1.0):
            raise GGUFError(f"{reader.path}: RoPE scaling {scaling!r} is not supported (only none and linear)")
        if "rope_freqs.weight" in reader.tensors:
            raise GGUFError(f"{reader.path}: tensor 'rope_freqs.weight' (per-frequency RoPE factors, Llama 3.1 "
                            "style) is not supported")
        freq_scale = 1.0 / factor if scaling == "linear" and factor > 0 else 1.0
        if "token_embd.weight" not in reader.tensors:
            raise GGUFError(f"{reader.path}: tensor 'token_embd.weight' is missing")
        n_vocab = reader.tensors["token_embd.weight"].shape[0]
        return cls(
            arch=arch,
            n_vocab=n_vocab,
            n_embd=n_embd,
            n_layer=num("block_count"),
            n_head=n_head,
            n_head_kv=n_head_kv,
            head_dim=head_dim,
            n_ff=num("feed_forward_length"),
            n_ctx_train=num("context_length"),
            rope_dim=rope_dim,
            rope_base=num("rope.freq_base", 10000.0, float),
            rope_freq_scale=freq_scale,
            rms_eps=num("attention.layer_norm_rms_epsilon", 1e-5, float),
        )


@dataclass
class _Layer:
    attn_norm: np.ndarray
    qkv: Callable[[np.ndarray], np.ndarray]  # q, k and v stacked into one matrix: one product instead of three
    q_norm: np.ndarray | None
    k_norm: np.ndarray | None
    out: Callable[[np.ndarray], np.ndarray]
    ffn_norm: np.ndarray
    gate_up: Callable[[np.ndarray], np.ndarray]  # gate and up stacked
    down: Callable[[np.ndarray], np.ndarray]


class Model:
    """A decoder-only transformer loaded from a GGUF file, with a preallocated KV cache.

    >>> model = Model.from_gguf(assets.path("smollm2"))          # doctest: +SKIP
    >>> logits = model.forward([1, 9690, 198])                   # doctest: +SKIP
    >>> logits.shape, logits.dtype                               # doctest: +SKIP
    ((3, 49152), dtype('float32'))

    ``forward(ids, start_pos)`` evaluates ``ids`` at positions ``start_pos, start_pos + 1, …``, writes their
    keys and values into the cache there, and attends to everything cached before them. To continue a
    conversation, pass only the new tokens with ``start_pos = model.n_past``; to rewind, pass an earlier
    ``start_pos`` (later entries are simply overwritten).
    """

    def __init__(self, reader: GGUFReader, *, n_ctx: int | None = None, numerics: str | Numerics = "exact",
                 progress: bool = False, weight_transform: WeightTransform | None = None,
                 dequantizer: Dequantizer | None = None):
        if isinstance(numerics, Numerics):
            ops = numerics
        elif numerics in NUMERICS:
            ops = NUMERICS[numerics]
        else:
            raise ValueError(
                f"numerics must be one of {', '.join(map(repr, NUMERICS))} or a Numerics, not {numerics!r}")
        if (weight_transform is not None or dequantizer is not None) and ops.name == "ggml":
            what = "weight_transform" if weight_transform is not None else "dequantizer"
            raise ValueError(
                f"{what} needs numerics='exact' (or a Numerics of exact building blocks): numerics='ggml' "
                "multiplies the file's own quantized blocks, "
                "which a transformed or differently decoded weight no longer matches"
            )
        self._dequantize: Dequantizer = dequantizer or dequantize
        self._weight_transform = weight_transform
        t0 = time.perf_counter()
        self.reader = reader
        self.hparams = hp = Hyperparameters.from_gguf(reader)
        self.arch = ARCHITECTURES[hp.arch]
        self.n_ctx = int(n_ctx) if n_ctx is not None else min(hp.n_ctx_train, 4096)
        if self.n_ctx <= 0:
            raise ValueError(f"n_ctx must be positive, got {self.n_ctx}")
        #: the operations whose rounding differs between the numerics; everything else is shared
        self.ops: Numerics = ops
        self._load_weights(progress)
        shape = (hp.n_layer, hp.n_head_kv, self.n_ctx, hp.head_dim)
        self.k_cache = np.zeros(shape, dtype=self.ops.cache_dtype)
        self.v_cache = np.zeros(shape, dtype=self.ops.cache_dtype)
        self.cos, self.sin = self.ops.rope_angles(self.n_ctx, hp.rope_dim, hp.rope_base, hp.rope_freq_scale)
        self.n_past = 0
        #: forward calls and resets so far: a session that finds it changed since its own last call knows that
        #: someone else has written the KV cache (see ChatSession)
        self.cache_writes = 0
        self.load_seconds = time.perf_counter() - t0

    @classmethod
    def from_gguf(cls, path: str | os.PathLike | GGUFReader, *, n_ctx: int | None = None,
                  numerics: str | Numerics = "exact", progress: bool = False,
                  weight_transform: WeightTransform | None = None,
                  dequantizer: Dequantizer | None = None) -> "Model":
        """Load a model: parse the file, check its hyperparameters, dequantize every weight to float32.

        Args:
            path: a ``.gguf`` file or an open :class:`GGUFReader`.
            n_ctx: KV-cache capacity in tokens (default: the training context, at most 4096).
            numerics: ``"exact"`` float32 math (default), ``"ggml"`` to mimic llama.cpp's quantized kernels,
                or a :class:`~bytes2logits.engine.ops.Numerics` of your own building blocks (lab 16).
            progress: show a progress bar while dequantizing.
            weight_transform: optional ``(name, stored_type, weight) -> weight``, called on every tensor
                right after it is dequantized (``weight`` is float32 in its NumPy shape; the result must
                have the same shape and dtype). It lets an experiment replace the weights, e.g. re-quantize
                them to another type (chapter 15); only with exact numerics.
            dequantizer: ``(raw, ggml_type, shape) -> float32 array`` used instead of
                :func:`~bytes2logits.engine.quants.dequantize` (the capstone loads SmolLM2 with the
                learner's lab 15 kernels); only with exact numerics.
        """
        reader = path if isinstance(path, GGUFReader) else GGUFReader(path)
        return cls(reader, n_ctx=n_ctx, numerics=numerics, progress=progress, weight_transform=weight_transform,
                   dequantizer=dequantizer)

    # -- loading ---------------------------------------------------------------------------------------------
    def _tensor(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        info = self.reader.tensors.get(name)
        if info is None:
            raise GGUFError(f"{self.reader.path}: tensor {name!r} is missing")
        if tuple(info.shape) != tuple(shape):
            # A 1-row matrix may be stored as a vector and vice versa; anything else is a real mismatch.
            if int(np.prod(info.shape)) != int(np.prod(shape)) or len(shape) > 1 and info.shape[-1] != shape[-1]:
                raise GGUFError(f"{self.reader.path}: tensor {name!r} has shape {list(info.shape)}, "
                                f"expected {list(shape)}")
        try:
            w = self._dequantize(self.reader.tensor_bytes(name), info.ggml_type, info.shape)
            if not isinstance(w, np.ndarray) or w.dtype != F32 or w.size != int(np.prod(shape)):
                got = f"{w.dtype} {w.shape}" if isinstance(w, np.ndarray) else type(w).__name__
                raise ValueError(f"the dequantizer returned {got} for tensor {name!r} ({info.ggml_type.name}); "
                                 f"expected float32 with {int(np.prod(shape))} values")
            w = w.reshape(shape)
        except GGUFError as e:
            raise GGUFError(f"{self.reader.path}: tensor {name!r}: {e}") from None
        if self._weight_transform is not None:
            new = self._weight_transform(name, info.ggml_type, w)
            if not isinstance(new, np.ndarray) or new.shape != w.shape or new.dtype != w.dtype:
                got = f"{new.dtype} {new.shape}" if isinstance(new, np.ndarray) else type(new).__name__
                raise ValueError(f"weight_transform returned {got} for tensor {name!r}; "
                                 f"expected float32 {w.shape}")
            w = np.ascontiguousarray(new)
        self._loaded_types[name] = info.ggml_type
        return w

    def _linear(self, weight: np.ndarray, bias: np.ndarray | None, names: list[str]):
        """A matrix product layer for the tensors ``names``, as the chosen numerics computes it."""
        return self.ops.linear(weight, bias, self.reader, names)

    def _load_weights(self, progress: bool) -> None:
        hp, arch = self.hparams, self.arch
        self._loaded_types: dict[str, GGMLType] = {}
        d, hd = hp.n_embd, hp.head_dim
        nq, nkv = hp.n_head * hd, hp.n_head_kv * hd
        names = [f"blk.{i}" for i in range(hp.n_layer)]
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=hp.n_layer + 2, desc="dequantizing", unit="layer", leave=False)
        self.token_embd = self._tensor("token_embd.weight", (hp.n_vocab, d))
        if bar:
            bar.update()
        self.layers: list[_Layer] = []
        for p in names:
            qkv_names = [f"{p}.attn_{x}.weight" for x in "qkv"]
            wq, wk, wv = (self._tensor(f"{p}.attn_{x}.weight", (n, d)) for x, n in (("q", nq), ("k", nkv), ("v", nkv)))
            bias = None
            if arch.qkv_bias:
                bias = np.concatenate([self._tensor(f"{p}.attn_{x}.bias", (n,))
                                       for x, n in (("q", nq), ("k", nkv), ("v", nkv))])
            self.layers.append(
                _Layer(
                    attn_norm=self._tensor(f"{p}.attn_norm.weight", (d,)),
                    qkv=self._linear(np.concatenate([wq, wk, wv]), bias, qkv_names),
                    q_norm=self._tensor(f"{p}.attn_q_norm.weight", (hd,)) if arch.qk_norm else None,
                    k_norm=self._tensor(f"{p}.attn_k_norm.weight", (hd,)) if arch.qk_norm else None,
                    out=self._linear(self._tensor(f"{p}.attn_output.weight", (d, nq)), None,
                                     [f"{p}.attn_output.weight"]),
                    ffn_norm=self._tensor(f"{p}.ffn_norm.weight", (d,)),
                    gate_up=self._linear(
                        np.concatenate([self._tensor(f"{p}.ffn_gate.weight", (hp.n_ff, d)),
                                        self._tensor(f"{p}.ffn_up.weight", (hp.n_ff, d))]),
                        None,
                        [f"{p}.ffn_gate.weight", f"{p}.ffn_up.weight"],
                    ),
                    down=self._linear(self._tensor(f"{p}.ffn_down.weight", (d, hp.n_ff)), None,
                                      [f"{p}.ffn_down.weight"]),
                )
            )
            if bar:
                bar.update()
        self.output_norm = self._tensor("output_norm.weight", (d,))
        out_name = "output.weight" if "output.weight" in self.reader.tensors else "token_embd.weight"
        self.tied_output = out_name == "token_embd.weight"
        self.output = self._linear(self.token_embd if self.tied_output else self._tensor(out_name, (hp.n_vocab, d)),
                                   None, [out_name])
        if bar:
            bar.update()
            bar.close()
        unused = [n for n in self.reader.tensors if n not in self._loaded_types]
        if unused:
            more = f" and {len(unused) - 5} more" if len(unused) > 5 else ""
            raise GGUFError(
                f"{self.reader.path}: tensors this {hp.arch} model does not use: {', '.join(unused[:5])}{more} "
                "(a different architecture or a feature this engine does not implement; refusing rather than "
                "computing something else)"
            )

    # -- properties ------------------------------------------------------------------------------------------
    @property
    def numerics(self) -> str:
        """The name of the numerics in use: ``"exact"`` or ``"ggml"`` (``self.ops.name``)."""
        return self.ops.name

    @property
    def vocab_size(self) -> int:
        """Number of rows of logits each position gets (the vocabulary size)."""
        return self.hparams.n_vocab

    @property
    def weight_bytes(self) -> int:
        """Bytes of float32 weights held in memory (the tied output is counted once)."""
        arrays = [self.token_embd, self.output_norm]
        if not self.tied_output:
            arrays.append(self.output.weight)
        for layer in self.layers:
            arrays += [layer.attn_norm, layer.qkv.weight, layer.out.weight,
                       layer.ffn_norm, layer.gate_up.weight, layer.down.weight]
            arrays += [a for a in (layer.qkv.bias, layer.q_norm, layer.k_norm) if a is not None]
        return sum(a.nbytes for a in arrays)

    def reset(self) -> None:
        """Forget the cached tokens (the next forward should start at position 0)."""
        self.n_past = 0
        self.cache_writes += 1

    def __repr__(self) -> str:
        hp = self.hparams
        return (
            f"Model({hp.arch}: {hp.n_layer} layers, d={hp.n_embd}, heads {hp.n_head}/{hp.n_head_kv}, "
            f"vocab {hp.n_vocab}, n_ctx {self.n_ctx}, numerics={self.numerics!r})"
        )

    # -- the forward pass ------------------------------------------------------------------------------------
    def forward(self, ids: Sequence[int] | np.ndarray, start_pos: int = 0, *, last_only: bool = False) -> np.ndarray:
        """Evaluate ``ids`` at positions ``start_pos …`` and return float32 logits ``[len(ids), vocab]``.

        With ``last_only=True`` only the last position's logits are computed (shape ``[1, vocab]``): that
        is all generation needs after a prefill, and it skips the largest matrix product for the others.
        The work is done by the module function :func:`forward`.
        """
        self.cache_writes += 1
        return forward(self, ids, start_pos, last_only=last_only)


def transformer_block(model: Model, li: int, x: np.ndarray, start_pos: int, mask: np.ndarray | None) -> np.ndarray:
    """Layer ``li`` of ``model`` on the residual stream ``x`` ``[n, n_embd]`` of the tokens at ``start_pos …``.

    Attention (pre-norm, grouped-query, RoPE, the KV cache) then the SwiGLU feed-forward, each added to
    ``x`` in place; returns ``x``. The layer's keys and values are written into ``model.k_cache[li]`` and
    ``model.v_cache[li]`` at positions ``start_pos .. start_pos + n - 1``, and the queries attend to every
    cached position up to their own (``mask`` is :func:`~bytes2logits.engine.ops.causal_mask`). The
    operations whose rounding can differ come from ``model.ops`` (a :class:`~bytes2logits.engine.ops.Numerics`).
    """
    hp, ops, layer = model.hparams, model.ops, model.layers[li]
    n, end = len(x), start_pos + len(x)
    hd, nh, nkv = hp.head_dim, hp.n_head, hp.n_head_kv
    group = nh // nkv
    h = ops.rms_norm(x, layer.attn_norm, hp.rms_eps)
    qkv = layer.qkv(h)  # [n, (nh + 2 nkv) hd]: the q, k and v products in one
    # Queries and keys as one [heads, n, head_dim] array (nh query heads, then nkv key heads), so that one
    # RoPE call rotates both; values go straight into the cache.
    qk = qkv[:, : (nh + nkv) * hd].reshape(n, nh + nkv, hd).transpose(1, 0, 2).copy()
    if layer.q_norm is not None:
        qk[:nh] = ops.rms_norm(qk[:nh], layer.q_norm, hp.rms_eps)
        qk[nh:] = ops.rms_norm(qk[nh:], layer.k_norm, hp.rms_eps)
    ops.apply_rope(qk, model.cos[start_pos:end], model.sin[start_pos:end], model.arch.rope)
    q, k = qk[:nh], qk[nh:]
    model.k_cache[li, :, start_pos:end] = k
    model.v_cache[li, :, start_pos:end] = qkv[:, (nh + nkv) * hd :].reshape(n, nkv, hd).transpose(1, 0, 2)
    keys, values = model.k_cache[li, :, :end], model.v_cache[li, :, :end]  # [nkv, end, hd]
    # The `group` query heads that share a KV head are stacked as rows: one batched product serves them.
    att = ops.attention(q.reshape(nkv, group * n, hd), keys, values, mask, F32(1.0 / np.sqrt(hd)))
    att = att.reshape(nh, n, hd).transpose(1, 0, 2).reshape(n, nh * hd)
    x += layer.out(att)
    h = ops.rms_norm(x, layer.ffn_norm, hp.rms_eps)
    gu = layer.gate_up(h)
    x += layer.down(ops.swiglu(gu[:, : hp.n_ff], gu[:, hp.n_ff :]))
    return x


def forward(model: Model, ids: Sequence[int] | np.ndarray, start_pos: int = 0, *,
            last_only: bool = False) -> np.ndarray:
    """Token ids to next-token logits: ``model``'s layers on ``ids`` at positions ``start_pos …``.

    Checks the ids and the position (``start_pos`` between 0 and ``model.n_past``, the context not
    overflowed), embeds the tokens, runs every :func:`transformer_block` with the causal mask, and applies
    the final norm and the output head (the embedding itself when the model is tied). Returns float32 logits
    ``[len(ids), vocab]``, or ``[1, vocab]`` for the last position with ``last_only=True``. Afterwards
    ``model.n_past`` is ``start_pos + len(ids)``.
    """
    ids = token_id_array(ids, model.hparams.n_vocab)
    if isinstance(start_pos, bool) or not hasattr(start_pos, "__index__"):
        raise TypeError(f"start_pos must be an int, not {type(start_pos).__name__}")
    start_pos = int(start_pos)
    if not 0 <= start_pos <= model.n_past:
        raise ValueError(f"start_pos {start_pos} must be between 0 and the {model.n_past} positions already cached")
    n = len(ids)
    check_context(start_pos, n, model.n_ctx)
    # Positions from start_pos on are about to be overwritten: until this call finishes, only the ones
    # before it are valid (an exception half-way must not leave stale entries counted as cached).
    model.n_past = start_pos
    mask = causal_mask(n, start_pos)
    x = model.token_embd[ids]  # [n, d]: a copy, which becomes the residual stream
    for li in range(len(model.layers)):
        x = transformer_block(model, li, x, start_pos, mask)
    model.n_past = start_pos + n
    if last_only:
        x = x[-1:]
    logits = model.output(model.ops.rms_norm(x, model.output_norm, model.hparams.rms_eps))
    assert logits.dtype == F32, f"logits drifted to {logits.dtype}"
    return logits
