"""What quantization costs the *model*: re-quantize every weight matrix, run the forward pass, compare (chapter 15).

The error bound of a format (``|x - x̂| <= d/2`` for Q8_0) says how far each weight moves; it does not say
how much the model's answers change. This module measures that directly, the way llama.cpp's
``llama-perplexity --kl-divergence`` does, on a handful of chat prompts:

1. **Reference.** Load SmolLM2 with every weight dequantized exactly to float32 and run the forward pass
   (``numerics="exact"``) on each prompt. At every position this gives a next-token distribution ``P``.
2. **Each type T.** Load it again, but pass every weight the file stores quantized through
   ``quantize(., T)`` and back (:func:`requantize`): the model now has exactly the weights a T file would
   hold. F32 tensors (the norms) stay as they are. Run the same prompts: distributions ``Q``.
3. **Compare.** At every position, the KL divergence ``KL(P || Q) = sum_v P(v) (log P(v) - log Q(v))``
   (0 when the distributions agree; in nats) and whether the most likely token is the same ("top-1
   agreement"). Average over all positions of all prompts.

The reference is not the original model. SmolLM2's file is already Q4_1 (with a Q8_0 embedding), so
"float32" means *those* weights in float32: every T is measured against the Q4_1 model, and re-quantizing
to Q4_1 lands (nearly) on the grid the weights already sit on. :func:`quantization_cost` therefore also
records how many weights each T changes.

A sweep loads the model once per type (the next one in a second thread while the current one runs) and
takes tens of seconds, so its result is cached as JSON under
``assets.cache_dir() / "computed"``, keyed by the model file's sha256, :data:`SWEEP_VERSION` and the
sweep's inputs (types and prompt ids). A missing or unreadable cache file is recomputed.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..engine.gguf import GGML_BLOCK_SIZES, GGMLType, GGUFReader
from ..engine.model import Model, WeightTransform
from ..engine.quants import QUANTIZE_TYPES, dequantize, quantize

__all__ = [
    "CONVERSATIONS",
    "SWEEP_TYPES",
    "SWEEP_VERSION",
    "UNQUANTIZED",
    "bits_per_weight",
    "file_sha256",
    "next_token_agreement",
    "prompt_ids",
    "quantization_cost",
    "requantize",
]

#: Bump when the sweep's method changes, so that cached results of the old code are not reused.
SWEEP_VERSION = "quantcost-3"

#: The types the sweep re-quantizes to, from most to fewest bits per weight.
SWEEP_TYPES: tuple[str, ...] = ("F16", "Q8_0", "Q5_1", "Q5_0", "Q4_1", "Q4_0")

#: Storage types that are plain floats: their tensors are left alone (SmolLM2's norms are F32).
UNQUANTIZED = frozenset({GGMLType.F32, GGMLType.F16, GGMLType.BF16})

#: Short chats the sweep evaluates. Each ends with an assistant answer, so the positions include the
#: model predicting a reply, not only the user's text and the template's markers.
CONVERSATIONS: tuple[tuple[dict, ...], ...] = (
    ({"role": "system", "content": "Be brief."},
     {"role": "user", "content": "What is the capital of France?"},
     {"role": "assistant", "content": "The capital of France is Paris, on the river Seine."}),
    ({"role": "system", "content": "You teach math."},
     {"role": "user", "content": "What is 12 times 7?"},
     {"role": "assistant", "content": "12 times 7 is 84."}),
    ({"role": "system", "content": "You write Python."},
     {"role": "user", "content": "A function that squares a number, please."},
     {"role": "assistant", "content": "def square(x):\n    return x * x"}),
    ({"role": "system", "content": "Be brief."},
     {"role": "user", "content": "Translate to French: the coffee is very hot."},
     {"role": "assistant", "content": "Le café est très chaud."}),
)


def bits_per_weight(ggml_type) -> float:
    """Bits one value costs in type ``ggml_type``, scales included: ``8 * bytes_per_block / values_per_block``.

    >>> bits_per_weight(GGMLType.Q8_0), bits_per_weight(GGMLType.Q4_1), bits_per_weight(GGMLType.Q6_K)
    (8.5, 5.0, 6.5625)
    """
    values, size = GGML_BLOCK_SIZES[GGMLType(int(ggml_type))]
    return 8 * size / values


def _type(name) -> GGMLType:
    t = GGMLType[name] if isinstance(name, str) else GGMLType(int(name))
    if t not in QUANTIZE_TYPES and t != GGMLType.F16:
        raise ValueError(f"cannot re-quantize to {t.name}: the engine quantizes to F16 and "
                         f"{', '.join(sorted(x.name for x in QUANTIZE_TYPES))}")
    return t


def requantize(ggml_type, stats: dict | None = None) -> WeightTransform:
    """A ``weight_transform`` for :class:`~bytes2logits.engine.model.Model` that stores weights as ``ggml_type``.

    Every tensor the file keeps quantized is sent through ``quantize`` to ``ggml_type`` and
    ``dequantize``d again (F16: rounded to half precision); tensors stored as plain floats pass unchanged.
    If ``stats`` is a dict, it collects, per stored type name (``"Q4_1"``, ``"Q8_0"``), a dict of ``n``
    (weights re-quantized) and ``changed`` (how many of them got a different value).

    >>> w = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)
    >>> stats = {}
    >>> y = requantize("Q8_0", stats)("blk.0.ffn_up.weight", GGMLType.Q4_1, w)
    >>> float(np.abs(y - w).max()) <= 1 / 127 / 2 * 1.001, stats["Q4_1"]["n"]
    (True, 64)
    """
    t = _type(ggml_type)

    def transform(name: str, stored: GGMLType, w: np.ndarray) -> np.ndarray:
        if stored in UNQUANTIZED:
            return w
        if t == GGMLType.F16:
            new = w.astype(np.float16).astype(np.float32)
        else:
            new = dequantize(quantize(w, t), t, w.shape)
        if stats is not None:
            kind = stats.setdefault(stored.name, {"n": 0, "changed": 0})
            kind["n"] += w.size
            kind["changed"] += int(np.count_nonzero(new != w))
        return new

    return transform


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities of each row, in float64 (KL divergences near 1e-6 need the precision)."""
    z = logits.astype(np.float64)
    z -= z.max(axis=-1, keepdims=True)
    z -= np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return z


def next_token_agreement(ref_logits: np.ndarray, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per position: ``KL(P_ref || P)`` in nats and whether the two argmax tokens agree.

    Both arguments are logits of shape ``[positions, vocab]``; the distributions are their softmaxes.

    >>> a = np.array([[2.0, 1.0, 0.0], [0.0, 0.0, 5.0]], dtype=np.float32)
    >>> kl, same = next_token_agreement(a, a)
    >>> kl.tolist(), same.tolist()
    ([0.0, 0.0], [True, True])
    >>> kl, same = next_token_agreement(a, a[:, ::-1])
    >>> bool(kl[0] > 0), same.tolist()
    (True, [False, False])
    """
    ref_logits, logits = np.atleast_2d(ref_logits), np.atleast_2d(logits)
    if ref_logits.shape != logits.shape:
        raise ValueError(f"logits of shapes {ref_logits.shape} and {logits.shape} cannot be compared")
    lp, lq = _log_softmax(ref_logits), _log_softmax(logits)
    kl = np.maximum((np.exp(lp) * (lp - lq)).sum(axis=-1), 0.0)  # >= 0 in exact math; clip the rounding
    return kl, ref_logits.argmax(axis=-1) == logits.argmax(axis=-1)


def prompt_ids(reader: GGUFReader, conversations: Sequence[Sequence[dict]] = CONVERSATIONS) -> list[list[int]]:
    """The token ids of each conversation, rendered with the file's own chat template (no generation prompt
    is needed: each conversation already ends with the assistant's answer)."""
    from ..engine.tokenizer import Tokenizer, chat_template_of

    tokenizer = Tokenizer.from_gguf(reader)
    template = chat_template_of(tokenizer)
    return [tokenizer.encode(template.render(list(c), add_generation_prompt=False), allowed_special="all")
            for c in conversations]


def file_sha256(path) -> str:
    """The sha256 of a file, read in 1 MiB pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for piece in iter(lambda: f.read(1 << 20), b""):
            h.update(piece)
    return h.hexdigest()


def _cache_path(sha: str, types: Sequence[str], prompts: Sequence[Sequence[int]]) -> Path:
    from ..assets import cache_dir

    inputs = hashlib.sha256(json.dumps([SWEEP_VERSION, list(types), [list(p) for p in prompts]]).encode())
    return cache_dir() / "computed" / f"quantcost-{sha[:16]}-{SWEEP_VERSION}-{inputs.hexdigest()[:12]}.json"


def _weight_summary(stats: dict) -> dict:
    """Per stored type and in total: how many weights were re-quantized and the fraction that changed."""
    total = {k: sum(v[k] for v in stats.values()) for k in ("n", "changed")}
    return {kind: {"n": v["n"], "changed": v["changed"] / v["n"]} for kind, v in {**stats, "all": total}.items()}


def _evaluate(model: Model, prompts: Sequence[Sequence[int]]) -> np.ndarray:
    """All positions' logits of every prompt, stacked: ``[total positions, vocab]``."""
    rows = []
    for ids in prompts:
        model.reset()
        rows.append(model.forward(ids))
    return np.concatenate(rows)


def quantization_cost(path=None, *, types: Sequence[str] = SWEEP_TYPES,
                      conversations: Sequence[Sequence[dict]] = CONVERSATIONS,
                      cache: bool = True, progress: bool = True, reference: Model | None = None) -> dict:
    """Re-quantize the model to each of ``types`` and measure how its next-token predictions change.

    Args:
        path: the GGUF file (default: the course's SmolLM2, ``assets.path("smollm2")``).
        types: type names from :data:`SWEEP_TYPES` (any of F16, Q8_0, Q5_1, Q5_0, Q4_1, Q4_0).
        conversations: the chats to evaluate; every position of every one counts.
        cache: reuse (and write) the JSON result under ``assets.cache_dir() / "computed"``.
        progress: show a tqdm progress bar, one step per model evaluated.
        reference: optionally, an already loaded ``Model`` of the same file with ``numerics="exact"`` and
            no ``weight_transform``, used as the reference instead of loading another copy (its KV cache
            is overwritten). Only used when the result has to be computed.

    Returns:
        A dict with ``model_sha256``, ``version``, ``prompt_tokens`` (tokens per conversation),
        ``n_positions``, ``seconds`` (of the run that computed it), ``cached`` (True when read from the
        cache) and ``types``: for each type name, ``bits_per_weight``, ``mean_kl`` / ``median_kl`` /
        ``max_kl`` (nats), ``top1`` (fraction of positions whose argmax agrees with the reference),
        ``weights`` (for each stored type of the file, ``"Q4_1"`` and ``"Q8_0"``, and for ``"all"``: ``n``
        weights re-quantized and the fraction ``changed`` that got a new value), ``build_seconds`` (loading
        and re-quantizing) and ``eval_seconds`` (the forward passes and the comparison).
    """
    from tqdm.auto import tqdm

    if path is None:
        from .. import assets

        path = assets.path("smollm2")
    names = [_type(t).name for t in types]
    reader = GGUFReader(path)
    try:
        prompts = prompt_ids(reader, conversations)
        sha = file_sha256(path)
        cache_file = _cache_path(sha, names, prompts) if cache else None
        if cache_file is not None:
            try:
                stored = json.loads(cache_file.read_text(encoding="utf-8"))
                if (stored["model_sha256"], stored["version"], list(stored["types"])) == (sha, SWEEP_VERSION, names):
                    stored["cached"] = True
                    return stored
            except (OSError, ValueError, KeyError, TypeError):
                pass  # missing, empty or damaged: compute it again

        start = time.perf_counter()
        n_ctx = max(len(p) for p in prompts)
        result = {"model_sha256": sha, "version": SWEEP_VERSION, "prompt_tokens": [len(p) for p in prompts],
                  "n_positions": sum(len(p) for p in prompts), "types": {}}

        def build(name: str | None):
            """Load the model, re-quantized to ``name`` (None: the reference), and time it."""
            t0 = time.perf_counter()
            stats: dict = {}
            transform = requantize(name, stats) if name else None
            model = Model.from_gguf(reader, n_ctx=n_ctx, weight_transform=transform)
            return model, stats, time.perf_counter() - t0

        if reference is not None:
            if os.path.realpath(reference.reader.path) != os.path.realpath(path) or reference.numerics != "exact":
                raise ValueError(f"reference must be a Model of {path} with numerics='exact'")
            if reference.n_ctx < n_ctx:
                raise ValueError(f"reference has n_ctx {reference.n_ctx}; the prompts need {n_ctx}")
        # While one model runs its prompts (matrix products), the next one is loaded and re-quantized in a
        # second thread: NumPy releases the GIL inside its loops, so on two cores the two overlap.
        order: list[str | None] = [None, *names]
        with ThreadPoolExecutor(max_workers=1) as pool, \
                tqdm(total=len(order), desc="quantization sweep", unit="model", disable=not progress) as bar:
            pending = None if reference is not None else pool.submit(build, order[0])
            ref = None
            for k, name in enumerate(order):
                bar.set_postfix_str(name or "float32 reference")
                if pending is None:
                    model, stats, build_seconds = reference, {}, 0.0
                else:
                    model, stats, build_seconds = pending.result()
                if k + 1 < len(order):
                    pending = pool.submit(build, order[k + 1])
                t0 = time.perf_counter()
                logits = _evaluate(model, prompts)
                del model
                if name is None:
                    ref = logits
                else:
                    kl, same = next_token_agreement(ref, logits)
                    result["types"][name] = {
                        "bits_per_weight": bits_per_weight(GGMLType[name]),
                        "mean_kl": float(kl.mean()),
                        "median_kl": float(np.median(kl)),
                        "max_kl": float(kl.max()),
                        "top1": float(same.mean()),
                        "weights": _weight_summary(stats),
                        "build_seconds": build_seconds,
                        "eval_seconds": time.perf_counter() - t0,
                    }
                bar.update()
        result["seconds"] = time.perf_counter() - start
    finally:
        reader.close()
    if cache_file is not None:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(result, indent=1), encoding="utf-8")
        tmp.replace(cache_file)
    result["cached"] = False
    return result
