"""Measurements and pictures for chapter 18 (making it fast): rooflines, a decode step's profile, BLAS threads.

Nothing here makes the engine faster, and nothing re-implements it. The helpers *measure* the engine from
the outside and count what a forward call has to do:

* :func:`best_time` — the shortest of a few timings, the run least disturbed by other programs.
* :func:`call_cost` — the floating-point operations and the bytes of one ``Model.forward`` call, counted
  from the model's shapes (weights read once per call, the KV cache read and written, attention's work),
  so that a chapter can place the call on a roofline. :data:`FILE_BITS` and friends give the bits per
  weight of other storage types.
* :func:`timed_components` — a context manager that wraps the model's layer callables (``qkv``, ``out``,
  ``gate_up``, ``down``, the output head) and the operations of ``model.ops`` (norms, RoPE, attention,
  SwiGLU) in timers, for as long as the ``with`` block lasts; whatever a call spends outside them
  (reshapes, cache writes, the embedding lookup, Python) is its ``rest``. The model is restored on exit.
* :func:`weight_products_seconds` — one call's matrix products alone, on random inputs of the same shapes:
  the time a forward call cannot go below while it multiplies float32 weights.
* :func:`blas_threads` — set the number of BLAS threads for a ``with`` block (threadpoolctl when it is
  installed, else OpenBLAS's own ``openblas_set_num_threads`` through ctypes), and
  :func:`thread_comparison`, which times a prefill and a decode step under each thread count,
  interleaved; where neither control works it measures in subprocesses started with
  ``OPENBLAS_NUM_THREADS`` set (``python -m bytes2logits.lessons.speed_view --threads N``).
* :func:`record_calls` and :func:`lookup_groups` — watch ``generate(..., lookup=...)`` from outside: which
  forward call produced which token, and which tokens were guesses the model accepted;
  :func:`lookup_html` draws that.

The plotting functions (:func:`roofline`, :func:`profile_bars`, :func:`verify_cost`) import matplotlib
inside the function and return the ``Figure``.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import html
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = ["best_time", "CallCost", "call_cost", "FILE_BITS", "COMPONENTS", "ComponentTimer", "timed_components",
           "weight_products_seconds", "blas_threads", "blas_control", "thread_comparison", "ForwardCall",
           "record_calls", "LookupGroup", "lookup_groups", "lookup_html", "roofline", "profile_bars", "verify_cost"]


def best_time(f: Callable[[], object], repeats: int = 5) -> float:
    """The shortest of ``repeats`` timings of ``f()``, in seconds.

    Other programs only ever slow a run down, so the fastest run is the one closest to what the code
    itself costs.

    >>> best_time(lambda: sum(range(1000)), 3) < 1.0
    True
    """
    times = []
    for _ in range(max(1, int(repeats))):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


# --------------------------------------------------------------------------------------------------
# Counting a forward call: FLOPs and bytes
# --------------------------------------------------------------------------------------------------

#: bits per weight of SmolLM2's file as stored: the layers' matrices Q4_1 (20 bytes per 32 values) and the
#: tied embedding / output head Q8_0 (34 bytes per 32 values)
FILE_BITS = {"layers": 20 * 8 / 32, "head": 34 * 8 / 32}


class CallCost(NamedTuple):
    """What one forward call does: ``flops`` and the bytes it must move from memory.

    ``weight_bytes`` are the weights (each read once per call), ``kv_bytes`` the keys and values of the
    cache that attention reads plus those the call writes, ``other_bytes`` the norm vectors and the
    embedding rows looked up. ``matmul_flops`` is the part of ``flops`` spent in the weight products.
    """

    n_tokens: int
    flops: float
    matmul_flops: float
    weight_bytes: float
    kv_bytes: float
    other_bytes: float

    @property
    def bytes(self) -> float:
        """All the bytes counted: weights, KV cache, norms and embedding rows."""
        return self.weight_bytes + self.kv_bytes + self.other_bytes

    @property
    def intensity(self) -> float:
        """Arithmetic intensity: floating-point operations per byte moved."""
        return self.flops / self.bytes


def weight_matrices(model) -> tuple[list, object]:
    """The layer callables with their weights (each layer's qkv, out, gate_up, down), and the output head."""
    return [c for L in model.layers for c in (L.qkv, L.out, L.gate_up, L.down)], model.output


def call_cost(model, n_tokens: int, n_past: int = 0, *, last_only: bool = False, layer_bits: float = 32.0,
              head_bits: float | None = None, kv_bytes_per_value: float = 4.0) -> CallCost:
    """The FLOPs and bytes of ``model.forward(ids, start_pos=n_past)`` for ``n_tokens`` ids.

    * Weight products: 2 FLOPs (a multiply and an add) per weight and token row. The output head gets one
      row with ``last_only=True``, else ``n_tokens``.
    * Attention: the query at position ``p`` takes ``p + 1`` dot products with the keys and sums ``p + 1``
      value vectors, ``4 * head_dim * (p + 1)`` FLOPs per query head and layer.
    * Bytes: every weight once (``layer_bits`` per weight for the layers' matrices, ``head_bits`` for the
      output head; 32 = float32 as the engine holds them), the cache's keys and values for the
      ``n_past + n_tokens`` positions attention reads plus the ``n_tokens`` it writes
      (``kv_bytes_per_value``: 4 for the engine's float32 cache, 2 for llama.cpp's float16 default),
      the norm vectors and the embedding rows. Activations are assumed to stay in the caches.

    A decode step (one token) of float32 weights does about 2 FLOPs per 4 bytes: an intensity near 0.5.
    """
    hp = model.hparams
    n, past = int(n_tokens), int(n_past)
    head_bits = layer_bits if head_bits is None else head_bits
    layers, head = weight_matrices(model)
    layer_weights = sum(c.weight.size for c in layers)
    head_weights = head.weight.size
    head_rows = 1 if last_only else n
    matmul = 2.0 * (n * layer_weights + head_rows * head_weights)
    positions = past + np.arange(1, n + 1, dtype=np.float64)  # keys each query reads
    attention = 4.0 * hp.head_dim * hp.n_head * hp.n_layer * float(positions.sum())
    kv_per_token = 2 * hp.n_layer * hp.n_head_kv * hp.head_dim * kv_bytes_per_value
    kv = kv_per_token * ((past + n) + n)
    norms = (2 * hp.n_layer + 1) * hp.n_embd * 4
    embedding_rows = n * hp.n_embd * 4
    return CallCost(n, matmul + attention, matmul, layer_weights * layer_bits / 8 + head_weights * head_bits / 8,
                    float(kv), float(norms + embedding_rows))


# --------------------------------------------------------------------------------------------------
# Profiling a forward call from the outside
# --------------------------------------------------------------------------------------------------

#: the parts :func:`timed_components` times, in the order of a layer (then the output head)
COMPONENTS = ("qkv", "rope", "attention", "out", "norms", "gate_up", "swiglu", "down", "output head")
#: which of them are weight products
WEIGHT_PRODUCTS = ("qkv", "out", "gate_up", "down", "output head")


class _Timed:
    """A callable that adds its own run time to ``timer.current[name]``; other attributes pass through."""

    __slots__ = ("_f", "_name", "_timer")

    def __init__(self, f, name: str, timer: "ComponentTimer"):
        self._f, self._name, self._timer = f, name, timer

    def __call__(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return self._f(*args, **kwargs)
        finally:
            self._timer.current[self._name] += time.perf_counter() - t0

    def __getattr__(self, attr):
        return getattr(self._f, attr)


class ComponentTimer:
    """Per-component seconds of every ``model.forward`` call made inside :func:`timed_components`.

    ``calls`` holds one dict per call: the seconds of each name of :data:`COMPONENTS`, ``"total"`` (the
    call's wall time) and ``"rest"`` (total minus the components: reshapes, cache writes, the embedding
    lookup, Python).
    """

    def __init__(self):
        """An empty record."""
        self.calls: list[dict[str, float]] = []
        self.current: dict[str, float] = dict.fromkeys(COMPONENTS, 0.0)

    def reset(self) -> None:
        """Forget the calls recorded so far (e.g. a warm-up)."""
        self.calls = []

    def _finish(self, total: float) -> None:
        row = dict(self.current)
        row["rest"] = total - sum(row.values())
        row["total"] = total
        self.calls.append(row)
        self.current = dict.fromkeys(COMPONENTS, 0.0)

    def best(self) -> dict[str, float]:
        """The breakdown of the fastest call recorded (the one least disturbed by other programs)."""
        if not self.calls:
            raise ValueError("no forward call was recorded inside timed_components")
        return dict(min(self.calls, key=lambda r: r["total"]))

    def mean(self) -> dict[str, float]:
        """The average breakdown over the calls recorded."""
        if not self.calls:
            raise ValueError("no forward call was recorded inside timed_components")
        return {k: float(np.mean([r[k] for r in self.calls])) for k in self.calls[0]}


@contextlib.contextmanager
def timed_components(model) -> Iterator[ComponentTimer]:
    """Time the parts of every ``model.forward`` call made inside the ``with`` block.

    The layer callables (``qkv``, ``out``, ``gate_up``, ``down``) and the output head are wrapped, and
    ``model.ops`` is replaced by a copy whose ``rms_norm``, ``apply_rope``, ``attention`` and ``swiglu``
    are wrapped; ``model.forward`` is wrapped to record each call's total. The engine's code runs
    unchanged (the same functions, called by the same forward pass), and on exit everything is put back.
    A timer costs well under a microsecond per wrapped call, against milliseconds for the call itself.
    """
    timer = ComponentTimer()
    saved_ops, saved_output = model.ops, model.output
    saved_layers = [(L.qkv, L.out, L.gate_up, L.down) for L in model.layers]
    had_forward = "forward" in vars(model)
    saved_forward = vars(model).get("forward")
    plain_forward = model.forward

    def forward(ids, start_pos=0, *, last_only=False):
        # the same signature as Model.forward: generate() looks for ``last_only`` in it
        t0 = time.perf_counter()
        try:
            return plain_forward(ids, start_pos, last_only=last_only)
        finally:
            timer._finish(time.perf_counter() - t0)

    try:
        model.ops = dataclasses.replace(
            saved_ops,
            rms_norm=_Timed(saved_ops.rms_norm, "norms", timer),
            apply_rope=_Timed(saved_ops.apply_rope, "rope", timer),
            attention=_Timed(saved_ops.attention, "attention", timer),
            swiglu=_Timed(saved_ops.swiglu, "swiglu", timer),
        )
        for L, (qkv, out, gate_up, down) in zip(model.layers, saved_layers):
            L.qkv, L.out = _Timed(qkv, "qkv", timer), _Timed(out, "out", timer)
            L.gate_up, L.down = _Timed(gate_up, "gate_up", timer), _Timed(down, "down", timer)
        model.output = _Timed(saved_output, "output head", timer)
        model.forward = forward
        yield timer
    finally:
        model.ops, model.output = saved_ops, saved_output
        for L, (qkv, out, gate_up, down) in zip(model.layers, saved_layers):
            L.qkv, L.out, L.gate_up, L.down = qkv, out, gate_up, down
        if had_forward:
            model.forward = saved_forward
        else:
            vars(model).pop("forward", None)


def weight_products_seconds(model, n_rows: int = 1, *, last_only: bool = True, repeats: int = 5,
                            seed: int = 0, passes: int = 1) -> float:
    """Best time of one forward call's weight products alone: every layer matrix and the output head.

    Each of the model's own layer callables is applied to a random float32 input of ``n_rows`` rows (the
    output head to 1 row with ``last_only``), exactly the products a call of ``n_rows`` tokens makes,
    without the norms, attention, reshapes and Python around them. With ``passes > 1`` each timing runs
    that many passes back to back and the result is the time per pass (averaged like a run of decode steps).
    """
    rng = np.random.default_rng(seed)
    layers, head = weight_matrices(model)
    inputs = [rng.standard_normal((n_rows, c.weight.shape[1]), dtype=np.float32) for c in layers]
    head_in = rng.standard_normal((1 if last_only else n_rows, head.weight.shape[1]), dtype=np.float32)

    def products():
        for _ in range(passes):
            for c, x in zip(layers, inputs):
                c(x)
            head(head_in)

    return best_time(products, repeats) / passes


# --------------------------------------------------------------------------------------------------
# BLAS threads
# --------------------------------------------------------------------------------------------------

_OPENBLAS_SETTERS = ("openblas_set_num_threads", "scipy_openblas_set_num_threads",
                     "scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_")


def _openblas_functions():
    """``(set, get)`` of the OpenBLAS library NumPy loaded, or ``None`` (found through /proc/self/maps)."""
    paths: list[str] = []
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line})
    except OSError:
        pass
    if not paths:
        import numpy

        libs = Path(numpy.__file__).resolve().parent.parent / "numpy.libs"
        paths = [str(p) for p in libs.glob("*openblas*")] if libs.is_dir() else []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _OPENBLAS_SETTERS:
            setter = getattr(lib, name, None)
            getter = getattr(lib, name.replace("set_", "get_"), None)
            if setter is not None and getter is not None:
                setter.argtypes, setter.restype, getter.restype = [ctypes.c_int], None, ctypes.c_int
                return setter, getter
    return None


def blas_control() -> str | None:
    """How :func:`blas_threads` can set the thread count here: ``"threadpoolctl"``, ``"openblas"`` or ``None``."""
    try:
        import threadpoolctl  # noqa: F401

        return "threadpoolctl"
    except ImportError:
        pass
    return "openblas" if _openblas_functions() is not None else None


@contextlib.contextmanager
def blas_threads(n: int) -> Iterator[int]:
    """Run the ``with`` block with ``n`` BLAS threads, then restore the previous count; yields the count set.

    ``OPENBLAS_NUM_THREADS`` is read once, when the library loads; this changes the count of the running
    process, as threadpoolctl does (and through it when it is installed). Raises ``RuntimeError`` when
    neither works (another BLAS than OpenBLAS, without threadpoolctl): then measure in subprocesses.
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"need at least 1 BLAS thread, got {n}")
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
    if threadpool_limits is not None:
        with threadpool_limits(limits=n, user_api="blas"):
            yield n
        return
    functions = _openblas_functions()
    if functions is None:
        raise RuntimeError("cannot set the BLAS thread count in this process (no threadpoolctl, no OpenBLAS "
                           "found); measure in subprocesses with OPENBLAS_NUM_THREADS set")
    setter, getter = functions
    before = getter()
    setter(n)
    try:
        yield getter()
    finally:
        setter(before)


def _prefill_and_decode(model, prompt_ids: Sequence[int]) -> tuple[Callable[[], object], Callable[[], object]]:
    """Two callables: a prefill of ``prompt_ids`` (last row only) and one decode step after it."""
    prompt = [int(t) for t in prompt_ids]

    def prefill():
        model.forward(prompt, start_pos=0, last_only=True)

    def decode():
        model.forward(prompt[-1:], start_pos=len(prompt) - 1, last_only=True)

    return prefill, decode


def thread_comparison(model, prompt_ids: Sequence[int], threads: Sequence[int] = (1, 2), *, repeats: int = 3,
                      decode_repeats: int = 5, method: str = "auto", budget_s: float | None = None) -> dict:
    """Best prefill and decode-step seconds of ``model`` under each BLAS thread count.

    In-process (``method="inprocess"``, the default where :func:`blas_control` finds a control), the thread
    counts take turns within each repeat (1, 2, 1, 2, …), so a noisy neighbour hurts them alike; each count
    gets one untimed decode step first (starting threads is not part of the cost). With ``budget_s``, no
    new repeat starts once that many seconds have passed (the first always runs): on a busy machine a
    slow thread count cannot stretch the measurement without limit. Otherwise
    (``method="subprocess"``) each count runs in a fresh Python with ``OPENBLAS_NUM_THREADS`` (and the
    other BLAS variables) set, loading the model again from ``model.reader.path``.

    Returns ``{"method": ..., "rows": {threads: {"prefill_s": ..., "decode_s": ...}}}``.
    """
    if method == "auto":
        method = "inprocess" if blas_control() is not None else "subprocess"
    if method == "subprocess":
        rows = {int(n): _measure_in_subprocess(model, prompt_ids, int(n), repeats, decode_repeats) for n in threads}
        return {"method": method, "rows": rows}
    if method != "inprocess":
        raise ValueError(f"method must be 'auto', 'inprocess' or 'subprocess', not {method!r}")
    prefill, decode = _prefill_and_decode(model, prompt_ids)
    rows = {int(n): {"prefill_s": np.inf, "decode_s": np.inf} for n in threads}
    prefill()
    for n in threads:
        with blas_threads(n):
            decode()  # warm-up: the library starts its threads here
    t0 = time.perf_counter()
    for r in range(repeats):
        if r and budget_s is not None and time.perf_counter() - t0 > budget_s:
            break
        for n in threads:
            with blas_threads(n):
                rows[int(n)]["prefill_s"] = min(rows[int(n)]["prefill_s"], best_time(prefill, 1))
                rows[int(n)]["decode_s"] = min(rows[int(n)]["decode_s"], best_time(decode, decode_repeats))
    return {"method": method, "rows": rows}


_BLAS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def _measure_in_subprocess(model, prompt_ids, threads: int, repeats: int, decode_repeats: int) -> dict:
    """Run ``python -m bytes2logits.lessons.speed_view`` with the BLAS thread variables set; its JSON result."""
    env = dict(os.environ, **{k: str(threads) for k in _BLAS_ENV})
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "bytes2logits.lessons.speed_view", "--model", str(model.reader.path),
           "--n-ctx", str(len(prompt_ids) + 8), "--repeats", str(repeats), "--decode-repeats", str(decode_repeats),
           "--ids", ",".join(str(int(t)) for t in prompt_ids)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the measuring subprocess failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _main(argv: Sequence[str] | None = None) -> int:
    """The subprocess side of :func:`thread_comparison`: load a model, print best prefill/decode seconds as JSON."""
    import argparse

    from ..engine.model import Model

    p = argparse.ArgumentParser(description="time a prefill and a decode step (BLAS threads from the environment)")
    p.add_argument("--model", required=True)
    p.add_argument("--ids", required=True, help="comma-separated prompt ids")
    p.add_argument("--n-ctx", type=int, default=512)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--decode-repeats", type=int, default=5)
    args = p.parse_args(argv)
    ids = [int(t) for t in args.ids.split(",")]
    model = Model.from_gguf(args.model, n_ctx=max(args.n_ctx, len(ids)))
    prefill, decode = _prefill_and_decode(model, ids)
    prefill()  # warm-up
    result = {"prefill_s": best_time(prefill, args.repeats), "decode_s": best_time(decode, args.decode_repeats)}
    print(json.dumps(result))
    return 0


# --------------------------------------------------------------------------------------------------
# Watching prompt-lookup decoding
# --------------------------------------------------------------------------------------------------


class ForwardCall(NamedTuple):
    """One ``model.forward`` call: the ``ids`` evaluated, from position ``start_pos``, and its ``seconds``."""

    ids: list[int]
    start_pos: int
    seconds: float


@contextlib.contextmanager
def record_calls(model) -> Iterator[list[ForwardCall]]:
    """Record every ``model.forward`` call made inside the ``with`` block (the model is restored on exit).

    The recording wrapper has ``Model.forward``'s signature, ``(ids, start_pos=0, *, last_only=False)``, so
    ``generate`` still asks for the last row only after a prefill, as it does without the recorder.
    """
    calls: list[ForwardCall] = []
    had_forward = "forward" in vars(model)
    saved_forward = vars(model).get("forward")
    plain_forward = model.forward

    def forward(ids, start_pos=0, *, last_only=False):
        # the same signature as Model.forward: generate() looks for ``last_only`` in it
        t0 = time.perf_counter()
        out = plain_forward(ids, start_pos, last_only=last_only)
        calls.append(ForwardCall([int(i) for i in ids], int(start_pos), time.perf_counter() - t0))
        return out

    model.forward = forward
    try:
        yield calls
    finally:
        if had_forward:
            model.forward = saved_forward
        else:
            vars(model).pop("forward", None)


class LookupGroup(NamedTuple):
    """The tokens one forward call produced during a lookup run.

    ``tokens`` are generated tokens (indices into the run's output: ``first .. first + len(tokens) - 1``);
    the first ``accepted`` of them were guesses the model confirmed, the others its own picks. ``drafted``
    is how many guesses the call evaluated (``rejected = drafted - accepted``).
    """

    call: int
    first: int
    tokens: list[int]
    drafted: int
    accepted: int

    @property
    def rejected(self) -> int:
        """Guesses evaluated for nothing."""
        return self.drafted - self.accepted


def lookup_groups(calls: Sequence[ForwardCall], n_prompt: int, tokens: Sequence[int],
                  start_pos: int = 0) -> list[LookupGroup]:
    """Which call produced which generated token, from the calls :func:`record_calls` saw.

    The first call is the prefill: its last row gives token 0. A later call evaluates ``[t, d1 .. dk]``
    at position ``p``: ``t`` is the token at ``p`` and each ``di`` a guess for the token at ``p + i``. Its
    rows give the tokens from ``p + 1`` on: guess ``di`` is accepted when it equals the token generated
    there and every guess before it was accepted; then comes the model's own pick, unless the run ended.
    As in the engine's count, the run's last token is never counted as accepted (the loop stops before
    it would be evaluated).
    """
    tokens = [int(t) for t in tokens]
    base = start_pos + n_prompt  # sequence position of generated token 0
    groups: list[LookupGroup] = []
    for c, call in enumerate(calls):
        if c == 0:
            if call.start_pos != start_pos or len(call.ids) != n_prompt:
                raise ValueError("the first recorded call is not the prefill of the prompt")
            if tokens:
                groups.append(LookupGroup(0, 0, tokens[:1], 0, 0))
            continue
        j = call.start_pos - base  # index of the generated token evaluated first
        if not 0 <= j < len(tokens) or tokens[j] != call.ids[0]:
            raise ValueError(f"call {c} evaluates {call.ids[0]} at position {call.start_pos}, which is not the "
                             "generated token there")
        drafts = call.ids[1:]
        accepted = 0
        while (accepted < len(drafts) and j + 1 + accepted < len(tokens) - 1
               and tokens[j + 1 + accepted] == drafts[accepted]):
            accepted += 1
        end = min(len(tokens), j + 2 + accepted)
        groups.append(LookupGroup(c, j + 1, tokens[j + 1:end], len(drafts), accepted))
    return groups


def lookup_html(groups: Sequence[LookupGroup], tokenizer) -> str:
    """The generated text, one box per forward call: accepted guesses green, rejected guesses counted."""
    parts = ['<div style="font-family: monospace; font-size: 12px; line-height: 2.0">']
    for g in groups:
        inner = []
        for k, t in enumerate(g.tokens):
            text = html.escape(tokenizer.decode([t])).replace("\n", "↵")
            style = "background:#bbf7d0" if k < g.accepted else ""
            inner.append(f'<span style="{style}">{text}</span>')
        mark = f'<sup style="color:#dc2626">✗{g.rejected}</sup>' if g.rejected else ""
        parts.append('<span style="border:1px solid #cbd5e1; border-radius:3px; padding:1px 2px; margin:1px">'
                     + "".join(inner) + mark + "</span>")
    parts.append("</div>")
    return "".join(parts)


# --------------------------------------------------------------------------------------------------
# Pictures
# --------------------------------------------------------------------------------------------------


def roofline(peak_gflops: float, bandwidth_gbs: float, points: Mapping[str, tuple[float, float]], *,
             marks: Mapping[str, float] | None = None, title: str | None = None):
    """A roofline: attainable GFLOP/s = min(peak, intensity x bandwidth), with measured ``points``.

    ``points`` maps a label to ``(FLOPs per byte, measured GFLOP/s)``. ``marks`` maps a label to an
    intensity drawn as a dotted vertical line (e.g. a decode step with quantized weights). Both axes are
    logarithmic; the ridge point, where the two ceilings meet, is at ``peak / bandwidth`` FLOPs per byte.
    """
    import matplotlib.pyplot as plt

    xs = [x for x, _ in points.values()] + list((marks or {}).values())
    ridge = peak_gflops / bandwidth_gbs
    lo, hi = min(xs + [ridge]) / 4, max(xs + [ridge]) * 4
    grid = np.geomspace(lo, hi, 200)
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ax.plot(grid, np.minimum(peak_gflops, grid * bandwidth_gbs), color="#111827", lw=2, label="roofline")
    ax.axhline(peak_gflops, color="#9ca3af", ls="--", lw=1)
    ax.text(hi, peak_gflops * 1.08, f"compute: {peak_gflops:.0f} GFLOP/s (sgemm)", ha="right", fontsize=8)
    x0 = max(lo * 3, ridge / 8)  # a point on the sloped roof, labelled from the empty corner above it
    ax.annotate(f"memory: {bandwidth_gbs:.1f} GB/s × intensity", xy=(x0, x0 * bandwidth_gbs),
                xytext=(lo * 1.3, peak_gflops * 0.9), fontsize=8, va="top",
                arrowprops={"arrowstyle": "->", "color": "#6b7280", "lw": 0.8})
    ax.axvline(ridge, color="#d1d5db", lw=1)
    ax.text(ridge * 1.05, peak_gflops / 30, f"ridge: {ridge:.1f} FLOP/byte", fontsize=8, color="#6b7280")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, (x, y)) in enumerate(points.items()):
        ax.plot([x], [y], "o", color=colors[i % len(colors)], ms=7, label=label)
    bottom = min(y for _, y in points.values()) / 4
    for label, x in (marks or {}).items():
        ax.axvline(x, color="#f97316", ls=":", lw=1.5)
        ax.text(x * 1.04, bottom * 1.2, label, fontsize=8, color="#c2410c", rotation=90, va="bottom")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(bottom, peak_gflops * 2)
    ax.set_xlabel("arithmetic intensity (FLOPs per byte moved from memory)")
    ax.set_ylabel("GFLOP/s")
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(title or "roofline of this machine, one core", fontsize=10)
    fig.tight_layout()
    return fig


_COLORS = {"qkv": "#1d4ed8", "out": "#60a5fa", "gate_up": "#15803d", "down": "#4ade80", "output head": "#a855f7",
           "attention": "#f97316", "rope": "#fdba74", "norms": "#facc15", "swiglu": "#fde68a", "rest": "#9ca3af"}


def profile_bars(breakdowns: Mapping[str, Mapping[str, float]], *, shares: bool = True, title: str | None = None):
    """Stacked horizontal bars, one per breakdown (``{label: {component: seconds}}`` from :class:`ComponentTimer`).

    With ``shares`` each bar is scaled to 100% of its call's total, so calls of very different lengths can
    be compared; the weight products are drawn first, in blues, greens and purple.
    """
    import matplotlib.pyplot as plt

    order = list(WEIGHT_PRODUCTS) + [c for c in COMPONENTS if c not in WEIGHT_PRODUCTS] + ["rest"]
    fig, ax = plt.subplots(figsize=(9, 0.9 + 0.6 * len(breakdowns)))
    labels = list(breakdowns)
    for row, label in enumerate(labels):
        b = breakdowns[label]
        total = b.get("total", sum(b.get(c, 0.0) for c in order))
        left = 0.0
        for c in order:
            width = max(b.get(c, 0.0), 0.0) / (total if shares else 1e-3)
            ax.barh(row, width, left=left, color=_COLORS[c], edgecolor="white", label=c if row == 0 else None)
            left += width
    ax.set_yticks(range(len(labels)), labels, fontsize=9)
    ax.invert_yaxis()
    if shares:
        ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.0%}"))
        ax.set_xlim(0, 1)
    else:
        ax.set_xlabel("milliseconds")
    ax.legend(ncol=5, fontsize=8, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.35 if shares else -0.5))
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(title or "where the time of a forward call goes", fontsize=10)
    fig.tight_layout()
    return fig


def verify_cost(sizes: Sequence[int], seconds: Sequence[float], *, title: str | None = None):
    """Milliseconds of one forward call of ``sizes[i]`` tokens after a prompt, against as many decode steps.

    ``sizes`` must start with 1 (the decode step). The dashed line is ``sizes[i]`` separate one-token
    steps; a bar below it is a verification call (the last token plus ``sizes[i] - 1`` guesses) that is
    cheaper than decoding its tokens one by one.
    """
    import matplotlib.pyplot as plt

    sizes, ms = np.asarray(sizes), np.asarray(seconds, dtype=float) * 1e3
    if sizes[0] != 1:
        raise ValueError("sizes must start with 1 (one decode step)")
    fig, ax = plt.subplots(figsize=(7, 3.0))
    ax.bar(range(len(sizes)), ms, color="#60a5fa", label="one call of n tokens")
    ax.plot(range(len(sizes)), sizes * ms[0], "k--", marker=".", label="n decode steps of 1 token each")
    ax.set_xticks(range(len(sizes)), [str(s) for s in sizes])
    ax.set_xlabel("tokens in the call, n (the last token + n - 1 guesses)")
    ax.set_ylabel("milliseconds")
    ax.legend(fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(title or "what a verification call costs", fontsize=10)
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    raise SystemExit(_main())
