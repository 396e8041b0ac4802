"""What lab 16's hidden suites share: oracles, calls that run where the code under test runs, and models.

Loaded by each suite with ``runpy`` (the suites are imported in importlib mode, without a package).

* Oracles in float64, written here from the definitions (not the engine's code): RMSNorm, SwiGLU, the
  rotation of RoPE pairs, and attention one head at a time.
* :func:`worker_eval` evaluates a small expression (a lambda) where the implementation under test runs:
  in a trusted grading run that is the sandboxed worker, so a *probe* can look at what the learner's
  function returned before anything crosses the pipe (is the result ``x`` itself? a view of it?). Only
  plain data comes back.
* :func:`fence` turns the course package's own versions of a task's functions into traps in the worker
  while a suite runs: a learner's function that reaches them (through ``NUMERICS["exact"].attention``, a
  function's ``__globals__``, a re-export in another module ...) raises instead of passing. In a grading
  sandbox they are stubs already (bytes2logits.kit.redact); the fence keeps the rule on the plain package.
* SmolLM2 and the tiny llama / qwen2 / qwen3 models are built where the code under test runs
  (``impl.Model.from_gguf``, the notebook's own ``Model`` class, whose ``forward`` calls the notebook's
  ``forward``), kept for the suite, and reached through handles: only token ids and logits cross back.
* llama.cpp's logits for the same models (``tests/fixtures/parity``, see ``tests/parity_fixtures.py``).
"""

from __future__ import annotations

import contextlib
import runpy

import numpy as np

from bytes2logits import assets
from bytes2logits.kit import probes
from bytes2logits.kit.labs import repo_root
from bytes2logits.kit.probes import global_replaced, module_fallback, worker_eval  # noqa: F401  (S.<name>)
from bytes2logits.kit.probes import is_remote as remote
from bytes2logits.kit.remote import race  # noqa: F401  (race: the suites' speed gate, S.race)

F32 = np.float32
parity = runpy.run_path(str(repo_root() / "tests" / "parity_fixtures.py"))
SMOLLM2 = assets.path("smollm2")


# ------------------------------------------------------------------------------------------- oracles

def ulps(x: np.ndarray) -> np.ndarray:
    """The float32 spacing at |x| (float64): the size of one float32 rounding there."""
    return np.spacing(np.abs(np.asarray(x, np.float64)).astype(F32)).astype(np.float64)


def rms_norm64(x, weight, eps) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + float(eps)) * np.asarray(weight, np.float64)


def swiglu64(gate, up) -> np.ndarray:
    g = np.asarray(gate, np.float64)
    with np.errstate(over="ignore"):
        return g / (1.0 + np.exp(-g)) * np.asarray(up, np.float64)


def pair_index(head_dim: int, rope_dim: int, style: str) -> tuple[np.ndarray, np.ndarray]:
    """The dimensions of the two halves of every rotated pair (from the definition of each style)."""
    half = rope_dim // 2
    i = np.arange(half)
    if style == "norm":
        return 2 * i, 2 * i + 1
    return i, i + half


def rotate64(x, cos, sin, style: str) -> np.ndarray:
    """``x`` [heads, n, head_dim] rotated by the tables [n, rope_dim // 2], in float64, a new array."""
    x = np.asarray(x, np.float64).copy()
    a, b = pair_index(x.shape[-1], 2 * cos.shape[-1], style)
    c, s = np.asarray(cos, np.float64), np.asarray(sin, np.float64)
    xa, xb = x[..., a].copy(), x[..., b].copy()
    x[..., a] = xa * c - xb * s
    x[..., b] = xa * s + xb * c
    return x


def causal_mask_oracle(n: int, start_pos: int) -> np.ndarray:
    """Query i (at position start_pos + i) may read keys 0 .. start_pos + i: 0 there, -inf after."""
    mask = np.zeros((n, start_pos + n), F32)
    for i in range(n):
        mask[i, start_pos + i + 1 :] = -np.inf
    return mask


def attention64(q, keys, values, mask, scale) -> np.ndarray:
    """Attention one query head at a time, softmax in float64: head ``g`` of KV group ``j`` is rows
    ``g*n .. g*n + n - 1`` of ``q[j]``, and its query ``i`` reads mask row ``i``."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, keys, values))
    nkv, rows, _ = q.shape
    n = 1 if mask is None else mask.shape[0]
    out = np.empty_like(q)
    for j in range(nkv):
        for g in range(rows // n):
            s = q[j, g * n : (g + 1) * n] @ k[j].T * float(scale)
            if mask is not None:
                s = s + np.asarray(mask, np.float64)
            s -= s.max(axis=-1, keepdims=True)
            w = np.exp(s)
            w /= w.sum(axis=-1, keepdims=True)
            out[j, g * n : (g + 1) * n] = w @ v[j]
    return out


def is_float32_array(x) -> bool:
    return type(x) is np.ndarray and x.dtype == F32


# ----------------------------------------------------------------------- where the code under test runs

_NP = module_fallback({"np": "numpy"})


def worker_name(impl, name: str):
    """``name`` as the code under test sees it: the worker's own object in a trusted run (``np``, the set-up
    cell's classes); the package's in-process (the reference namespace holds only the lab's names)."""
    return probes.worker_name(impl, name, _NP)


def fence(impl, targets):
    """:func:`bytes2logits.kit.probes.fence`, searching the notebook's namespace for copies of the fenced code."""
    return probes.fence(impl, targets, "exact_numerics")


@contextlib.contextmanager
def numpy_errors_raise(impl, **kinds):
    """``np.errstate(**kinds)`` where the code under test runs (``np.seterr`` in its worker)."""
    if not remote(impl):
        with np.errstate(**kinds):
            yield
        return
    wnp = worker_name(impl, "np")
    old = wnp.seterr(**kinds)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            wnp.seterr(**old)


# -------------------------------------------------------------------------------------------- models

_MODELS: dict = {}


def place(impl):
    """Where ``impl``'s objects live: its worker, or (in-process) the ``Model`` class it builds with. The
    package reference in-process is one place, whichever fixture asks for it."""
    sub = getattr(impl, "_submission", None)
    return ("worker", id(sub)) if sub is not None else ("here", id(impl.Model))


def cached(impl, key, build):
    """``build()`` once per place (a model built in a worker dies with it, and so does the task)."""
    full = (place(impl), key)
    if full not in _MODELS:
        _MODELS[full] = (impl, build())
    return _MODELS[full][1]


def smollm2_fixture() -> dict:
    return parity["load_smollm2_fixture"]("exact")


def tiny_fixture(arch: str, directory) -> dict:
    return parity["load_tiny_fixture"](arch, directory)


@contextlib.contextmanager
def own_numerics(model, numerics):
    """``model`` computing with ``numerics`` (its ``ops``, and the RoPE tables its ``rope_angles`` makes)."""
    saved = model.ops, model.cos, model.sin
    hp = model.hparams
    model.ops = numerics
    try:
        cos, sin = numerics.rope_angles(model.n_ctx, hp.rope_dim, hp.rope_base, hp.rope_freq_scale)
        model.cos, model.sin = cos, sin
        yield model
    finally:
        model.ops, model.cos, model.sin = saved
        model.reset()


def greedy(model, ids, n: int):
    """``n`` greedy tokens after ``ids`` through the KV cache (prefill, then one token per call); returns the
    ids, the logits row each was chosen from, and the prefill's logits."""
    ids = [int(i) for i in ids]
    prefill = model.forward(ids, 0)
    row, out, rows, pos = prefill[-1], [], [], len(ids)
    for _ in range(n):
        rows.append(row)
        nxt = int(np.argmax(row))
        out.append(nxt)
        if len(out) < n:
            row = model.forward([nxt], pos)[-1]
            pos += 1
    return out, np.array(rows), prefill


def top_delta(logits: np.ndarray, top_ids: np.ndarray, top_logits: np.ndarray) -> float:
    """max |Δlogit| over llama.cpp's 64 largest logits per position."""
    return float(np.abs(np.take_along_axis(logits, top_ids.astype(np.int64), axis=1) - top_logits).max())


def check_logits(logits, n: int, n_vocab: int, what: str) -> None:
    assert is_float32_array(logits) and logits.shape == (n, n_vocab), \
        f"{what}: forward must return float32 logits of shape [len(ids), vocab]"
    assert np.isfinite(logits).all(), f"{what}: some logits are NaN or infinite"


# --------------------------------------------------------------------------------------------- speed

