"""What lab 17's hidden suites share: oracles, objects built where the code under test runs, and fences.

Loaded by each suite with ``runpy`` (the suites are imported in importlib mode, without a package).

* Oracles written here from the definitions (not the engine's code): the tie-broken full sort (larger logit
  first, equal logits by smaller id), top-k / top-p / min-p on it, the repetition penalty one token at a time,
  the sampler chain, and stop strings found by trying every offset.
* :func:`worker_eval` evaluates a small expression (a lambda) where the implementation under test runs: in a
  trusted grading run that is the sandboxed worker, in-process the package. The loop's tests build their
  model, tokenizer and sampler that way (:func:`fake_model`, :func:`fake_tokenizer`, :func:`argmax_sampler`,
  :func:`smollm2`), so the learner's loop only ever calls objects of its own process; only ids, text and
  counters cross back.
* :func:`fence` turns the course package's own versions of a task's functions into traps in the worker while
  a suite runs (in a grading sandbox they are stubs already: bytes2logits.kit.redact).
"""

from __future__ import annotations

import math

import numpy as np

from bytes2logits import assets
from bytes2logits.kit import probes
from bytes2logits.kit.probes import global_replaced  # noqa: F401  (S.global_replaced)
from bytes2logits.kit.probes import is_remote as remote  # noqa: F401  (S.remote)
from bytes2logits.kit.remote import race  # noqa: F401  (race: the suites' speed gate, S.race)

SMOLLM2 = assets.path("smollm2")
GEN = "bytes2logits.engine.generate"


# ------------------------------------------------------------------------------------------- oracles

def full_order(ids, logits) -> list[int]:
    """Positions by logit, largest first; equal logits by smaller id first (a plain full sort, no tricks)."""
    ids, logits = [int(i) for i in ids], [float(x) for x in logits]
    return sorted(range(len(ids)), key=lambda j: (-logits[j], ids[j]))


def softmax64(x) -> np.ndarray:
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


def top_k_oracle(ids, logits, k):
    ids, logits = np.asarray(ids), np.asarray(logits, np.float64)
    if k <= 0 or k >= len(logits):
        return ids, logits
    pos = np.asarray(full_order(ids, logits)[:k], dtype=np.int64)
    return ids[pos], logits[pos]


def top_p_counts(logits_sorted, p, tol=1e-9) -> set[int]:
    """Every number of best candidates a correct top-p may keep (more than one only where the running sum
    lands within ``tol`` of ``p``, where rounding decides)."""
    cum = np.cumsum(softmax64(logits_sorted))
    n = len(cum)
    ok = {k for k in range(1, n + 1) if cum[k - 1] >= p - tol and (k == 1 or cum[k - 2] < p + tol)}
    return ok or {n}


def penalty_oracle(logits, history, penalty, last_n):
    out = [float(x) for x in logits]
    if penalty == 1.0 or last_n == 0 or len(history) == 0:
        return np.array(out)
    window = list(history) if last_n < 0 else list(history)[-last_n:]
    for t in set(int(t) for t in window):
        out[t] = out[t] * penalty if out[t] <= 0 else out[t] / penalty
    return np.array(out)


def chain_oracle(logits, history, temperature, top_k, top_p, min_p, penalty, last_n):
    """llama.cpp's order: penalty -> top_k -> top_p -> min_p -> temperature -> softmax. ``(ids, probs)``."""
    x = penalty_oracle(np.asarray(logits, np.float64), history, penalty, last_n)
    ids = np.arange(len(x))
    if temperature == 0:
        best = full_order(ids, x)[0]
        return np.array([best]), np.array([1.0])
    ids, x = top_k_oracle(ids, x, top_k)
    if top_p < 1.0 and len(x) > 1:
        order = full_order(ids, x)
        ids, x = ids[order], x[order]
        keep = min(top_p_counts(x, top_p))
        ids, x = ids[:keep], x[:keep]
    if min_p > 0.0:
        keep = x >= x.max() + math.log(min_p)
        ids, x = ids[keep], x[keep]
    return ids, softmax64(x / temperature)


def held_back_oracle(pending: bytes, stops) -> int:
    """The longest proper prefix of any stop string that ``pending`` ends with (0 if none)."""
    best = 0
    for s in stops:
        for n in range(1, len(s)):
            if n <= len(pending) and pending.endswith(s[:n]):
                best = max(best, n)
    return best


def first_stop_oracle(pending: bytes, stops):
    """Earliest offset; at one offset, the smallest stop string (the tuple order); ``(-1, b"")`` if none."""
    found = [(i, s) for i in range(len(pending)) for s in stops if pending.startswith(s, i)]
    return min(found) if found else (-1, b"")


def cut_text(pieces, stops) -> tuple[str, bytes | None]:
    """What a run that receives ``pieces`` one token at a time shows: the text before the first stop string
    to be complete (after the first piece that completes one, at the earliest offset where one is found;
    decoded as a whole), and that stop string, or None.

    Found piece by piece, not over the whole byte string: with stops ``bc`` and ``abcd`` on ``a|b|c|d`` the
    stream stops at ``bc`` after the third piece, although ``abcd`` starts earlier in the whole string.
    """
    seen = b""
    for piece in pieces:
        seen += piece
        i, s = first_stop_oracle(seen, stops)
        if i >= 0:
            return seen[:i].decode("utf-8", "replace"), s
    return seen.decode("utf-8", "replace"), None


# ----------------------------------------------------------------------- where the code under test runs

def worker_name(impl, name: str):
    return probes.worker_name(impl, name)


def worker_eval(impl, source: str):
    """:func:`bytes2logits.kit.probes.worker_eval`; the worker's ``numpy`` is the one ``generate`` sees when
    the notebook has no ``np`` of its own."""
    return probes.worker_eval(impl, source, "generate")


def methods(cls_name: str, names) -> list:
    return [(GEN, f"{cls_name}.{n}") for n in names]


def fence(impl, targets):
    """:func:`bytes2logits.kit.probes.fence`, searching the notebook's namespace for copies of the fenced code."""
    return probes.fence(impl, targets, "generate")


PACKAGE_TEXTSTREAM = "__import__('bytes2logits.engine.generate', fromlist=['_']).TextStream"

# A deterministic model over a small vocabulary: after token t the best next token is table[t] (logit 5,
# every other one -1). It records every forward call as (ids, start_pos, last_only), keeps n_past like the
# engine's Model and refuses ids that do not fit into n_ctx.
_FAKE_MODEL = """lambda vocab, n_ctx, table: type('FakeModel', (), {'__module__': 'lab17_suite',
    'vocab_size': vocab, 'n_ctx': n_ctx, 'table': np.asarray(table, dtype=np.int64),
    '__init__': lambda self: self.__dict__.update(calls=[], n_past=0),
    'rows': lambda self, ids: np.where(np.arange(self.vocab_size)[None, :] == self.table[ids][:, None],
                                       np.float32(5.0), np.float32(-1.0)).astype(np.float32),
    'forward': lambda self, ids, start_pos=0, last_only=False: (
        (_ for _ in ()).throw(ValueError('ids do not fit into n_ctx'))
        if int(start_pos) + len(ids) > self.n_ctx or int(start_pos) > self.n_past else (
            self.calls.append((np.asarray(ids).tolist(), int(start_pos), bool(last_only))),
            self.__dict__.update(n_past=int(start_pos) + len(ids)),
            self.rows(np.asarray(ids, dtype=np.int64)[-1:] if last_only else np.asarray(ids, dtype=np.int64)))[-1]),
})()"""

_FAKE_TOKENIZER = """lambda pieces, stop_ids: type('FakeTokenizer', (), {'__module__': 'lab17_suite',
    'pieces': [bytes(p) for p in pieces], 'stop_ids': frozenset(stop_ids),
    'decode_bytes': lambda self, ids: b''.join(self.pieces[int(i)] for i in ids),
})()"""

_ARGMAX = """lambda: type('Argmax', (), {'__module__': 'lab17_suite',
    'is_greedy': True, 'temperature': 0.0,
    'sample': lambda self, logits, history=(): int(np.argmax(np.asarray(logits))),
})()"""


def fake_model(impl, table, n_ctx=64):
    return worker_eval(impl, _FAKE_MODEL)(len(table), int(n_ctx), [int(t) for t in table])


def fake_tokenizer(impl, pieces, stop_ids=()):
    return worker_eval(impl, _FAKE_TOKENIZER)([bytes(p) for p in pieces], [int(i) for i in stop_ids])


def argmax_sampler(impl):
    """A greedy sampler built in the worker (not the learner's Sampler: the loop is graded on its own)."""
    return worker_eval(impl, _ARGMAX)()


_MODELS: dict = {}

_SMOLLM2 = ("lambda path, n_ctx: (lambda m: (m, __import__('bytes2logits.engine.tokenizer', fromlist=['_'])"
            ".Tokenizer.from_gguf(m.reader)))(__import__('bytes2logits.engine.model', fromlist=['_'])"
            ".Model.from_gguf(path, n_ctx=n_ctx))")


def smollm2(impl, n_ctx=256):
    """``(model, tokenizer)``: the package's SmolLM2 and its tokenizer, built where ``impl`` runs, kept."""
    sub = getattr(impl, "_submission", None)
    key = (("worker", id(sub)) if sub is not None else ("here", id(impl)), n_ctx)
    if key not in _MODELS:
        _MODELS[key] = (impl, worker_eval(impl, _SMOLLM2)(str(SMOLLM2), int(n_ctx)))
    return _MODELS[key][1]


def run(impl, model, tokenizer, prompt, **kwargs):
    """Run ``impl.generate`` to the end in the worker; return the chunks and the Generation (a handle)."""
    gen = impl.generate(model, tokenizer, [int(i) for i in prompt], **kwargs)
    chunks = worker_eval(impl, "lambda g: [c for c in g]")(gen)
    return chunks, gen


