"""Generation: turn a model's logits into text, one token at a time.

A language model only ever answers one question: *given these tokens, how plausible is each possible
next token?* The answer is a vector of **logits**, one float per vocabulary entry (49k to 152k of
them). Generating text is a loop around that question:

1. **Prefill** — evaluate the whole prompt in one ``model.forward`` call. This fills the model's KV
   cache with every prompt position and gives the logits for the first new token.
2. **Sample** — pick one token id from those logits (:class:`Sampler`).
3. **Stop?** — an end-of-generation token, a stop string in the text, the token budget, or a full
   context window ends the loop.
4. **Decode step** — evaluate just the new token (one position), get the next logits, go to 2.

With ``lookup=`` (off by default), step 4 may evaluate the new token together with a few *guessed*
tokens copied from the context, and step 2 then walks the rows of that one call for as long as the
guesses agree with the sampler (prompt-lookup decoding, :mod:`bytes2logits.engine.lookup`).

Along the way the token bytes are turned into text that is *safe to show*: a character split across
two tokens is held back until it is complete (no stray U+FFFD), and text that might be the start of a
stop string is held back until it is clear that it is not.

The sampler follows llama.cpp's default chain (``common/common.h`` lists the sampler order;
``src/llama-sampling.cpp`` implements each stage; ``common/sampling.cpp`` appends the final ``dist``
draw)::

    penalties -> top_k -> top_p -> min_p -> temperature -> dist

(llama.cpp also has DRY, top-n-sigma, typical-p and XTC between these; they are off by default and
left out here.)
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from ..text import decode_utf8_prefix
from .checks import check_context, token_id_array
from .lookup import Drafter, LookupConfig, choose_with_draft

__all__ = [
    "Generation",
    "LookupConfig",
    "Sampler",
    "TextStream",
    "apply_repetition_penalty",
    "generate",
    "generation_loop",
    "generate_text",
    "min_p_filter",
    "softmax",
    "top_k_filter",
    "top_p_filter",
]

# When top-p runs on the whole vocabulary (top_k off), first try the best few hundred candidates: their
# probabilities usually already add up to p, which avoids sorting 150k logits (llama.cpp also tries 256
# first, then sorts everything; here the window grows 8-fold at a time).
_TOP_P_FIRST_TRY = 256


# --------------------------------------------------------------------------------------------------
# The sampler stages, one function each. They work on a *candidate list*: ``ids`` (token ids, int64)
# and the matching ``logits`` (float64). At the start the candidates are the whole vocabulary
# (``ids = arange(vocab)``); every filter returns a shorter list. Ties are always broken the same way:
# among equal logits the smaller token id counts as "larger", so results never depend on the luck of
# an unstable sort.
# --------------------------------------------------------------------------------------------------


def softmax(logits: np.ndarray) -> np.ndarray:
    """Turn logits into probabilities that sum to 1: ``exp(l_i) / sum_j exp(l_j)``.

    Subtracting the maximum first changes nothing mathematically (it cancels in the fraction) but
    keeps ``exp`` from overflowing. A ``-inf`` logit becomes probability 0.

    >>> softmax(np.array([0.0, 0.0])).tolist()
    [0.5, 0.5]
    """
    x = np.asarray(logits, dtype=np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


def _descending_order(ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """Positions that sort the candidates by logit, largest first; equal logits by smaller id first."""
    return np.lexsort((ids, -logits))


def _top_positions(ids: np.ndarray, logits: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest candidates, in descending order, without sorting everything.

    ``np.argpartition`` finds the k-th largest value in linear time. Everything strictly above it is
    in; of the candidates *equal* to it we take the ones with the smallest ids until we have ``k``.
    Only those ``k`` are then sorted. This equals the first ``k`` of a full (tie-broken) sort.
    """
    n = len(logits)
    if k >= n:
        return _descending_order(ids, logits)
    threshold = logits[np.argpartition(logits, n - k)[n - k]]  # the k-th largest value
    above = np.flatnonzero(logits > threshold)
    equal = np.flatnonzero(logits == threshold)
    equal = equal[np.argsort(ids[equal], kind="stable")][: k - len(above)]
    chosen = np.concatenate([above, equal])
    return chosen[_descending_order(ids[chosen], logits[chosen])]


def apply_repetition_penalty(
    logits: np.ndarray, history: Sequence[int], penalty: float, last_n: int = 64
) -> np.ndarray:
    """Make tokens that appeared recently less likely (llama.cpp's ``penalties`` sampler, repeat part).

    Every *distinct* token among the last ``last_n`` ids of ``history`` is penalised once, however
    often it occurred: a positive logit is **divided** by ``penalty``, a zero or negative one is
    **multiplied** by it. (Dividing a negative logit would move it towards 0, i.e. make the token *more*
    likely — the sign rule keeps "penalty > 1" meaning "less likely" on both sides.)

    ``penalty == 1`` or ``last_n == 0`` switches the stage off; ``last_n == -1`` means the whole history.
    Returns a new array; ``logits`` is not modified.

    >>> apply_repetition_penalty(np.array([2.0, -2.0, 1.0]), [0, 1, 0, 0], penalty=2.0).tolist()
    [1.0, -4.0, 1.0]
    """
    out = np.array(logits, dtype=np.float64)
    if penalty == 1.0 or last_n == 0 or len(history) == 0:
        return out
    window = history if last_n < 0 else history[-last_n:]
    tokens = np.unique(np.asarray(window, dtype=np.int64))
    bad = tokens[(tokens < 0) | (tokens >= len(out))]
    if len(bad):
        raise ValueError(
            f"history contains token id {int(bad[0])}, outside the vocabulary 0..{len(out) - 1}"
        )
    v = out[tokens]
    out[tokens] = np.where(v <= 0, v * penalty, v / penalty)
    return out


def top_k_filter(ids: np.ndarray, logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Keep the ``k`` candidates with the largest logits, sorted largest first.

    ``k <= 0`` (or ``k`` at least the number of candidates) keeps everything. Uses a partial selection
    (``argpartition``), so keeping 40 of 150 000 costs one linear pass, not a full sort.
    """
    if k <= 0 or k >= len(logits):
        return ids, logits
    pos = _top_positions(ids, logits, k)
    return ids[pos], logits[pos]


def top_p_filter(ids: np.ndarray, logits: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray]:
    """Nucleus sampling: keep the smallest set of best candidates whose probabilities add up to ≥ ``p``.

    The probabilities are a softmax over the *current* candidates (so after top-k, they are
    renormalised over the k survivors). Walking down from the most likely token, the running sum is
    checked after adding each token; the token that makes it reach ``p`` is kept and the rest are
    dropped. At least one token always survives. ``p >= 1`` switches the stage off.

    The result is sorted largest first. On a huge list it first looks only at the best 256 candidates
    (found with ``argpartition``, no full sort) and widens the window 8-fold until the sum reaches ``p``.
    """
    if p >= 1.0 or len(logits) <= 1:
        return ids, logits
    probs = softmax(logits)
    n = len(logits)
    m = n if n <= 4 * _TOP_P_FIRST_TRY else _TOP_P_FIRST_TRY
    while True:
        pos = _top_positions(ids, logits, m)
        cum = np.cumsum(probs[pos])
        if cum[-1] >= p or m >= n:
            break
        m = min(8 * m, n)  # the best m were not enough: look at 8 times as many
    reached = np.flatnonzero(cum >= p)
    keep = int(reached[0]) + 1 if len(reached) else len(pos)  # rounding may leave the sum just below p
    pos = pos[:keep]
    return ids[pos], logits[pos]


def min_p_filter(ids: np.ndarray, logits: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray]:
    """Keep candidates whose probability is at least ``p`` times the best candidate's probability.

    ``prob_i >= p * prob_max`` is the same as ``logit_i >= logit_max + log(p)`` (the softmax
    denominator cancels), so no softmax is needed. Unlike top-p this adapts to the model's confidence:
    a confident model (one dominant token) leaves few candidates, an unsure one leaves many.
    ``p <= 0`` switches the stage off. The candidates' order is kept.
    """
    if p <= 0.0 or len(logits) == 0:
        return ids, logits
    keep = logits >= logits.max() + math.log(p)
    return ids[keep], logits[keep]


class Sampler:
    """Choose the next token from a logit vector, the way llama.cpp's default sampler chain does.

    The stages run in this order (each one is a function of this module you can call on its own):

    1. :func:`apply_repetition_penalty` — tokens among the last ``repeat_last_n`` of the history get
       their logit divided (if positive) or multiplied (if not) by ``repeat_penalty``; 1.0 is off.
    2. :func:`top_k_filter` — keep the ``top_k`` best; ``top_k <= 0`` is off.
    3. :func:`top_p_filter` — keep the smallest best set with probability mass ≥ ``top_p``; 1.0 is off.
    4. :func:`min_p_filter` — keep tokens with probability ≥ ``min_p`` × the best one's; ≤ 0 is off.
    5. temperature — divide the survivors' logits by ``temperature``: below 1 sharpens the distribution,
       above 1 flattens it. Note that 2–4 saw the logits *before* temperature, as in llama.cpp.
    6. dist — softmax over the survivors and draw one at random.

    **Greedy decoding.** ``temperature == 0`` means "always take the most likely token" (after the
    repetition penalty). llama.cpp's temperature stage does exactly that for any ``t <= 0``: it keeps
    the first maximum and sets every other logit to ``-inf``, so the final draw has only one choice.
    Here a *negative* temperature is rejected instead — it is almost always a typo, and ``0`` says
    what is meant. ``Sampler.greedy()`` builds a greedy sampler with every other stage off. Among equal
    best logits the smaller token id wins.

    **Randomness.** ``seed`` (an int ≥ 0) makes runs reproducible: the same seed, logits and history give
    the same tokens. ``seed=None`` seeds from the operating system. The generator is a NumPy
    ``np.random.Generator``, so the *numbers* differ from llama.cpp's ``std::mt19937``.

    >>> s = Sampler(temperature=0.0)
    >>> s.sample(np.array([0.1, 2.0, -1.0]))
    1
    """

    def __init__(
        self,
        temperature: float = 0.8,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        repeat_penalty: float = 1.0,
        repeat_last_n: int = 64,
        seed: int | None = None,
    ):
        """Check every setting and create the random generator; see the class docstring for meanings."""
        temperature = _real("temperature", temperature)
        if temperature < 0:
            raise ValueError(
                f"temperature must be >= 0 (0 means greedy), got {temperature}. "
                "llama.cpp treats a negative temperature as greedy too; pass 0 to say so."
            )
        if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)):
            raise TypeError(f"top_k must be an int (<= 0 means off), got {top_k!r}")
        top_p = _real("top_p", top_p)
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1] (1 means off), got {top_p}")
        min_p = _real("min_p", min_p)
        if min_p > 1.0:
            raise ValueError(f"min_p must be <= 1 (0 means off), got {min_p}")
        repeat_penalty = _real("repeat_penalty", repeat_penalty)
        if repeat_penalty <= 0:
            raise ValueError(f"repeat_penalty must be > 0 (1 means off), got {repeat_penalty}")
        if isinstance(repeat_last_n, bool) or not isinstance(repeat_last_n, (int, np.integer)):
            raise TypeError(f"repeat_last_n must be an int, got {repeat_last_n!r}")
        if repeat_last_n < -1:
            raise ValueError(
                f"repeat_last_n must be >= -1 (0 = off, -1 = whole history), got {repeat_last_n}"
            )
        if seed is not None and (
            isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0
        ):
            raise ValueError(f"seed must be an int >= 0 or None (random), got {seed!r}")
        self.temperature = temperature
        self.top_k = int(top_k)
        self.top_p = top_p
        self.min_p = min_p
        self.repeat_penalty = repeat_penalty
        self.repeat_last_n = int(repeat_last_n)
        self.seed = None if seed is None else int(seed)
        self.rng = np.random.default_rng(self.seed)

    @classmethod
    def greedy(cls) -> Sampler:
        """A sampler that always returns the highest-logit token (no randomness, no penalties)."""
        return cls(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0)

    @property
    def is_greedy(self) -> bool:
        """True when ``temperature == 0``: the result is the argmax, the random generator is unused."""
        return self.temperature == 0.0

    def __repr__(self) -> str:
        """Show the settings, e.g. ``Sampler(temperature=0.8, top_k=40, ...)``."""
        return (
            f"Sampler(temperature={self.temperature}, top_k={self.top_k}, top_p={self.top_p}, "
            f"min_p={self.min_p}, repeat_penalty={self.repeat_penalty}, "
            f"repeat_last_n={self.repeat_last_n}, seed={self.seed})"
        )

    def _penalised(self, logits: np.ndarray, history: Sequence[int]) -> np.ndarray:
        """Validate one row of logits and apply the repetition penalty (stage 1)."""
        x = np.asarray(logits)
        if x.ndim != 1 or x.size == 0:
            raise ValueError(f"logits must be a non-empty 1-D array (one row), got shape {x.shape}")
        x = x.astype(np.float64)
        bad = np.flatnonzero(np.isnan(x) | (x == np.inf))
        if len(bad):
            i = int(bad[0])
            raise ValueError(
                f"logits are not usable: token id {i} has logit {x[i]} "
                f"({len(bad)} NaN/+inf value(s) in total; the model's forward pass went wrong)"
            )
        if np.all(x == -np.inf):
            raise ValueError("every logit is -inf: there is no token left to choose")
        return apply_repetition_penalty(x, history, self.repeat_penalty, self.repeat_last_n)

    def distribution(self, logits: np.ndarray, history: Sequence[int] = ()) -> tuple[np.ndarray, np.ndarray]:
        """The final candidates and their probabilities: ``(ids, probs)``, what ``sample`` draws from.

        Useful to *look at* what the sampler does (the course plots it). With ``temperature == 0`` it is
        the single best token with probability 1.
        """
        x = self._penalised(logits, history)
        if self.is_greedy:
            return np.array([int(np.argmax(x))]), np.array([1.0])
        ids = np.arange(len(x))
        ids, x = top_k_filter(ids, x, self.top_k)
        ids, x = top_p_filter(ids, x, self.top_p)
        ids, x = min_p_filter(ids, x, self.min_p)
        return ids, softmax(x / self.temperature)

    def sample(self, logits: np.ndarray, history: Sequence[int] = ()) -> int:
        """Pick one token id from ``logits`` (shape ``[vocab]``); ``history`` feeds the repetition penalty.

        The draw: put the candidates' probabilities end to end on ``[0, total)`` (their sum, 1 up to
        rounding), throw ``u = rng.random() * total`` and return the candidate whose stretch it lands in
        (``searchsorted`` on the running sum).
        """
        if self.is_greedy:
            return int(np.argmax(self._penalised(logits, history)))
        ids, probs = self.distribution(logits, history)
        if len(ids) == 1:
            return int(ids[0])
        cum = np.cumsum(probs)
        u = self.rng.random() * cum[-1]  # in [0, total): a token with probability 0 is never chosen
        i = min(int(np.searchsorted(cum, u, side="right")), len(ids) - 1)
        return int(ids[i])


def _real(name: str, value) -> float:
    """``float(value)``, with a clear error for non-numbers and NaN/inf."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")
    return value


# --------------------------------------------------------------------------------------------------
# The generation loop.
# --------------------------------------------------------------------------------------------------


def _held_back(pending: bytes, stops: Sequence[bytes]) -> int:
    """How many trailing bytes of ``pending`` might be the beginning of a stop string.

    For stop string ``b"abc"``: ``b"xa"`` → 1, ``b"xab"`` → 2, ``b"xb"`` → 0. Those bytes must not be
    shown yet: the next token may complete the stop string, and then they were never part of the
    answer.
    """
    hold = 0
    for s in stops:
        for length in range(min(len(s) - 1, len(pending)), hold, -1):
            if pending.endswith(s[:length]):
                hold = length
                break
    return hold


def _first_stop(pending: bytes, stops: Sequence[bytes]) -> tuple[int, bytes]:
    """``(offset, stop)`` of the earliest stop string in ``pending``, or ``(-1, b"")``."""
    found = [(i, s) for s, i in ((s, pending.find(s)) for s in stops) if i >= 0]
    return min(found) if found else (-1, b"")


class TextStream:
    """The streaming text decoder: the bytes of each new token in, text that is safe to show out.

    Two kinds of bytes are held back: the start of a UTF-8 character whose other bytes have not arrived
    yet (so a character split across tokens never shows as U+FFFD), and trailing bytes that might be the
    beginning of a stop string (:func:`_held_back`). When a stop string is complete (:func:`_first_stop`,
    matched on the bytes, across token boundaries), ``stop`` is set, the text before it is returned and the
    rest is dropped; the stream takes no more bytes after that.

    >>> s = TextStream([b"Q:"])
    >>> [s.push(b) for b in (b"Yes. ", b"\\xf0\\x9f", b"\\x99\\x82", b"Q", b":")], s.stop
    (['Yes. ', '', '🙂', '', ''], b'Q:')
    """

    def __init__(self, stops: Sequence[bytes] = ()):
        """``stops``: the stop strings as non-empty UTF-8 bytes."""
        self.stops = tuple(stops)
        self.pending = b""  # bytes received but not shown yet
        self.stop: bytes | None = None  # the stop string that ended the stream

    def push(self, data: bytes) -> str:
        """Add one token's bytes; return the text that is now safe to show (often ``""``)."""
        if self.stop is not None:
            raise RuntimeError(f"the stream already ended at stop string {self.stop!r}")
        self.pending += data
        cut, stop = _first_stop(self.pending, self.stops)
        if cut >= 0:
            text, _ = decode_utf8_prefix(self.pending[:cut], final=True)
            self.pending, self.stop = b"", stop
            return text
        safe = len(self.pending) - _held_back(self.pending, self.stops)
        text, used = decode_utf8_prefix(self.pending[:safe], final=False)
        self.pending = self.pending[used:]
        return text

    def finish(self) -> str:
        """The end of the run: everything held back, decoded (an incomplete character becomes U+FFFD)."""
        text, _ = decode_utf8_prefix(self.pending, final=True)
        self.pending = b""
        return text


class Generation:
    """One run of the generation loop: iterate it to receive text chunks as they become safe to show.

    ``for chunk in generate(...): print(chunk, end="", flush=True)`` streams the answer. Once the
    iterator is exhausted, these attributes describe the run:

    ``tokens``
        every sampled id, *including* the stop token if one ended the run.
    ``text``
        the emitted text (the concatenation of all chunks; a stop string and what follows it are cut off).
    ``stop_reason``
        ``"eos"`` (a stop id was sampled), ``"stop_string"``, ``"max_tokens"`` or ``"context_full"``.
    ``stop_message``
        one human-readable sentence about why it stopped (with numbers and a hint for context_full).
    ``n_prompt``
        how many prompt ids were prefilled.
    ``n_past``
        how many positions of the model's KV cache are now valid: ``start_pos`` + every evaluated token.
        The last sampled token is *not* evaluated (nothing would ever read its logits), so a follow-up
        call that continues this conversation must pass it again, with ``start_pos=n_past``; it is also
        in ``unevaluated_ids``.
    ``unevaluated_ids``
        sampled ids that are not in the KV cache (normally just the last one; empty if none was sampled).
    ``start_pos``, ``done``
        where the prompt went in the cache; whether the loop has finished (``stop_reason`` is set then).
    ``prefill_seconds``, ``prefill_tokens_per_second``
        time of the single prompt ``forward`` call and prompt tokens per second.
    ``decode_seconds``, ``decode_tokens_per_second``
        time spent generating after the prefill (sampling, one-token ``forward`` calls, detokenizing;
        not the time your loop body takes between chunks) and sampled tokens per second.
    ``forward_calls``
        how many times ``model.forward`` ran, the prefill included (without lookup: one per evaluated token).
    ``lookup``, ``drafted``, ``accepted``, ``acceptance_rate``
        prompt-lookup decoding (:class:`~bytes2logits.engine.lookup.LookupConfig`, or ``None`` when off):
        guessed tokens that were evaluated, how many of them the sampler then picked (each one a token
        generated without a ``forward`` call of its own), and ``accepted / drafted``.
    """

    def __init__(self, model, tokenizer, prompt_ids: np.ndarray, sampler: Sampler, max_tokens: int,
                 stops: tuple[bytes, ...], stop_ids: frozenset[int], start_pos: int, history: list[int],
                 lookup: LookupConfig | None = None):
        """Store the already-validated settings; use :func:`generate` to create one."""
        self._model = model
        self._history = history  # ids before start_pos, for the repetition penalty
        self._last_only: bool | None = None  # whether model.forward takes last_only (found on first use)
        self._tokenizer = tokenizer
        self._prompt = prompt_ids
        self._sampler = sampler
        self._max_tokens = max_tokens
        self._stops = stops
        self._stop_ids = stop_ids
        self.start_pos = start_pos
        self.n_prompt = len(prompt_ids)
        self.tokens: list[int] = []
        self.text = ""
        self.stop_reason: str | None = None
        self.stop_message = ""
        self.n_past = start_pos
        self.unevaluated_ids: list[int] = []
        self.prefill_seconds = 0.0
        self.decode_seconds = 0.0
        self.done = False
        self.lookup = lookup
        self.forward_calls = 0
        self.drafted = 0
        self.accepted = 0
        self._steps = self._run()

    def __iter__(self) -> Iterator[str]:
        """A Generation is its own iterator (it can be consumed once)."""
        return self

    def __next__(self) -> str:
        """Run the loop until the next non-empty chunk of text is safe to show."""
        return next(self._steps)

    @property
    def prefill_tokens_per_second(self) -> float:
        """Prompt tokens evaluated per second during the prefill (0.0 before it ran)."""
        return self.n_prompt / self.prefill_seconds if self.prefill_seconds > 0 else 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        """Sampled tokens per second after the prefill (0.0 if nothing was generated)."""
        return len(self.tokens) / self.decode_seconds if self.decode_seconds > 0 else 0.0

    @property
    def acceptance_rate(self) -> float:
        """The share of drafted tokens that were accepted (0.0 when nothing was drafted)."""
        return self.accepted / self.drafted if self.drafted else 0.0

    def __repr__(self) -> str:
        """A one-line summary: stop reason, token counts and speeds."""
        spec = ""
        if self.lookup is not None:
            spec = (f", lookup {self.accepted}/{self.drafted} drafted tokens accepted, "
                    f"{self.forward_calls} forward calls")
        return (
            f"<Generation {self.stop_reason or 'running'}: {self.n_prompt} prompt + {len(self.tokens)} "
            f"generated tokens, n_past={self.n_past}, prefill {self.prefill_tokens_per_second:.1f} tok/s, "
            f"decode {self.decode_tokens_per_second:.1f} tok/s{spec}>"
        )

    def _forward(self, ids: np.ndarray) -> np.ndarray:
        """Evaluate ``ids`` at positions ``n_past...``; return the last row of logits.

        Generation only needs the last position's logits. A model whose ``forward`` takes ``last_only``
        (the engine's :class:`~bytes2logits.engine.model.Model` does) is asked for just that row, which skips the
        vocabulary-sized product for every other prompt position.
        """
        if self._last_only is None:
            import inspect

            try:
                self._last_only = "last_only" in inspect.signature(self._model.forward).parameters
            except (TypeError, ValueError):
                self._last_only = False
        if self._last_only:
            out = np.asarray(self._model.forward(ids, start_pos=self.n_past, last_only=True))
            rows = 1
        else:
            out = np.asarray(self._model.forward(ids, start_pos=self.n_past))
            rows = len(ids)
        if out.ndim != 2 or out.shape[0] != rows:
            raise RuntimeError(
                f"model.forward returned logits of shape {out.shape} for {len(ids)} token(s); "
                f"expected ({rows}, vocab)"
            )
        self.n_past += len(ids)
        self.forward_calls += 1
        return out[-1]

    def _verify(self, ids: list[int]) -> np.ndarray:
        """Evaluate ``[token, *draft]`` at ``n_past``; return every row of logits (row j follows ids[j]).

        Only the first id counts as evaluated (``n_past`` grows by 1): each guess joins it once the
        sampler has picked it. The cache entries of guesses that are rejected are overwritten by the next
        call, which starts at the first of them.
        """
        out = np.asarray(self._model.forward(np.array(ids, dtype=np.int64), start_pos=self.n_past))
        if out.ndim != 2 or out.shape[0] != len(ids):
            raise RuntimeError(
                f"model.forward returned logits of shape {out.shape} for {len(ids)} token(s); "
                f"expected ({len(ids)}, vocab)"
            )
        self.n_past += 1
        self.forward_calls += 1
        self.drafted += len(ids) - 1
        return out

    def _finish(self, reason: str, message: str) -> None:
        """Record why the loop ended."""
        self.stop_reason = reason
        self.stop_message = message

    def _run(self) -> Iterator[str]:
        """The loop itself, as a generator. Timing counts only the work done inside it."""
        try:
            yield from generation_loop(self)
        finally:
            # Rejected guesses (and an accepted one that ended the run) left entries past n_past in the
            # model's cache: make the model's count agree, so a follow-up call sees only valid positions.
            if self.lookup is not None and getattr(self._model, "n_past", -1) > self.n_past:
                self._model.n_past = self.n_past

def generation_loop(gen: Generation) -> Iterator[str]:
    """The generation loop of ``gen``: prefill, then sample, check the stops, decode one step, repeat.

    Yields text chunks as they become safe to show, and records on ``gen`` the tokens, the text, the stop
    reason, the cache position ``n_past`` and the timings (see :class:`Generation`).

    1. **Prefill**: one ``forward`` of the whole prompt at ``gen.start_pos``; its last row of logits
       gives the first token.
    2. **Sample** the next token from the current logits (the history feeds the repetition penalty).
    3. **Stop?** A stop id ends the run without being shown or evaluated. Otherwise its bytes go into a
       :class:`TextStream`, which says whether a stop string is complete and what text is safe to show.
       The token budget (``max_tokens``) and a full context window end the run too.
    4. **Decode step**: evaluate just the new token at position ``n_past`` (the KV cache holds everything
       before it) and go to 2. With prompt lookup (``gen.lookup``), a few guessed tokens are evaluated in
       the same call, and each guess the sampler agrees with saves a step.
    """
    n_ctx = gen._model.n_ctx
    t0 = time.perf_counter()
    logits = gen._forward(gen._prompt)
    gen.prefill_seconds = time.perf_counter() - t0

    history = gen._history + [int(t) for t in gen._prompt]
    t = time.perf_counter()
    drafter = None
    if gen.lookup is not None:  # the drafting context: earlier turns, the prompt, then each new token
        drafter = Drafter(gen.lookup)
        drafter.extend(history)
    rows: np.ndarray | list[np.ndarray] = [logits]  # rows[i]: the logits the next token is sampled from
    guesses: list[int] = []  # guesses[i]: the draft's token for rows[i] (the last row has none)
    i = 0
    stream = TextStream(gen._stops)  # token bytes in, text that is safe to show out
    for step in range(gen._max_tokens):
        guess = guesses[i] if i < len(guesses) else None
        try:
            tok = choose_with_draft(gen._sampler, rows[i], history, guess)
        except ValueError as e:
            raise ValueError(f"at sequence position {gen.n_past} (generated token {step}): {e}") from e
        gen.tokens.append(tok)
        gen.unevaluated_ids = [tok]
        if tok in gen._stop_ids:
            gen._finish("eos", f"stopped at end-of-generation token {tok}")
            break
        history.append(tok)
        if drafter is not None:
            drafter.append(tok)
        chunk = stream.push(gen._tokenizer.decode_bytes([tok]))
        if stream.stop is not None:  # the text before the stop string is shown, the rest dropped
            gen._finish("stop_string", f"stopped at stop string {stream.stop.decode('utf-8', 'replace')!r}")
            if chunk:
                gen.decode_seconds += time.perf_counter() - t
                gen.text += chunk
                yield chunk
                t = time.perf_counter()
            break
        if chunk:
            gen.decode_seconds += time.perf_counter() - t
            gen.text += chunk
            yield chunk
            t = time.perf_counter()

        if step == gen._max_tokens - 1:
            break  # the budget is spent; evaluating this token would be wasted work
        if guess is not None and tok == guess:  # a right guess: it is evaluated, its row is computed
            gen.accepted += 1
            gen.n_past += 1
            gen.unevaluated_ids = []
            i += 1
            continue
        if gen.n_past >= n_ctx:
            gen._finish(
                "context_full",
                f"context window full: all {n_ctx} positions of the KV cache are used "
                f"({gen.n_past - gen.start_pos - gen.n_prompt} generated tokens evaluated). "
                "Start a new conversation or load the model with a larger n_ctx.",
            )
            break
        draft: list[int] = []
        if drafter is not None:
            # Each guess must fit into the cache after tok, and stand for a token that may still be
            # sampled *and* evaluated (the budget's last token never is, as in plain decoding).
            room = min(gen.lookup.draft, n_ctx - gen.n_past - 1, gen._max_tokens - step - 2)
            draft = drafter.propose(room)
        if draft:
            rows, guesses, i = gen._verify([tok] + draft), draft, 0
        else:
            rows, guesses, i = [gen._forward(np.array([tok], dtype=np.int64))], [], 0
        gen.unevaluated_ids = []

    if gen.stop_reason is None:
        gen._finish("max_tokens", f"stopped after max_tokens={gen._max_tokens} tokens")
    chunk = stream.finish()  # held-back bytes are now final
    gen.decode_seconds += time.perf_counter() - t
    gen.done = True
    if chunk:
        gen.text += chunk
        yield chunk


def generate(
    model,
    tokenizer,
    prompt_ids: Iterable[int],
    *,
    sampler: Sampler | None = None,
    max_tokens: int = 256,
    stop_strings: Iterable[str | bytes] = (),
    stop_ids: Iterable[int] | None = None,
    start_pos: int = 0,
    history: Iterable[int] = (),
    lookup: LookupConfig | int | None = None,
) -> Generation:
    """Generate a continuation of ``prompt_ids``; returns a :class:`Generation` to iterate over.

    ``model``      has ``forward(ids, start_pos) -> logits[len(ids), vocab]`` (which also stores the ids'
                   keys/values at positions ``start_pos...`` in its KV cache), ``n_ctx`` and ``vocab_size``.
    ``tokenizer``  has ``decode_bytes(ids) -> bytes`` and ``stop_ids``.
    ``sampler``    defaults to ``Sampler()`` (llama.cpp's defaults, random seed).
    ``max_tokens`` caps the number of sampled tokens (a stop token counts).
    ``stop_strings`` end generation when they appear in the output (matched on the UTF-8 bytes, across
                   token boundaries); the text before the stop string is kept, the rest dropped.
    ``stop_ids``   end-of-generation ids; default ``tokenizer.stop_ids``. A stop id is not shown and not
                   evaluated.
    ``start_pos``  where the prompt goes in the KV cache: 0 for a fresh conversation, or a previous
                   run's ``n_past`` to continue it without recomputing what is cached.
    ``history``    the ids already in the cache before ``start_pos`` (a chat's earlier turns): they are
                   not evaluated again, but the repetition penalty sees them, as it would in one long run.
    ``lookup``     prompt-lookup decoding (:mod:`~bytes2logits.engine.lookup`): ``None`` or ``0`` is off (the
                   default), an int ``N`` means ``LookupConfig(draft=N)``. Each decode call then also
                   evaluates up to ``N`` tokens guessed by copying from the context (``history`` + prompt +
                   output). Under a greedy sampler the ids are the same as without it; with a random
                   sampler the guesses are accepted by the speculative-sampling rule, which keeps the
                   sampler's distribution exactly (other random numbers, so other text for one seed). Stops,
                   ``max_tokens`` and the context limit behave as without it. A sampler that is not a
                   :class:`Sampler` needs ``is_greedy = True``, or ``distribution()`` and ``rng``.

    Everything is checked here, before any work: an empty prompt, ids outside the vocabulary, and a
    prompt that does not fit into the context window (:class:`~bytes2logits.errors.ContextFullError`).
    The model is only called once you start iterating.
    """
    prompt = token_id_array(prompt_ids, int(model.vocab_size), "prompt_ids")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)) or max_tokens < 0:
        raise ValueError(f"max_tokens must be an int >= 0, got {max_tokens!r}")
    if isinstance(start_pos, bool) or not isinstance(start_pos, (int, np.integer)) or start_pos < 0:
        raise ValueError(f"start_pos must be an int >= 0, got {start_pos!r}")
    check_context(int(start_pos), len(prompt), int(model.n_ctx), "Start a new conversation (or shorten the "
                  "prompt), or load the model with a larger n_ctx.")
    if isinstance(stop_strings, (str, bytes)):
        stop_strings = (stop_strings,)
    stops = []
    for k, s in enumerate(stop_strings):
        if not isinstance(s, (str, bytes)):
            raise TypeError(f"stop_strings[{k}] is {s!r} ({type(s).__name__}); stop strings are str or bytes")
        b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
        if not b:
            raise ValueError("stop_strings contains an empty string, which would stop before any output")
        stops.append(b)
    ids = frozenset(int(i) for i in (tokenizer.stop_ids if stop_ids is None else stop_ids))
    sampler = sampler if sampler is not None else Sampler()
    lookup = LookupConfig.of(lookup)
    if lookup is not None and not getattr(sampler, "is_greedy", False) and not (
            hasattr(sampler, "distribution") and hasattr(sampler, "rng")):
        raise TypeError(
            f"lookup decoding needs a greedy sampler or one with distribution() and rng (as Sampler has); "
            f"{type(sampler).__name__} has neither"
        )
    return Generation(
        model, tokenizer, prompt, sampler, int(max_tokens),
        tuple(stops), ids, int(start_pos), [int(t) for t in history], lookup,
    )


def generate_text(model, tokenizer, prompt_ids: Iterable[int], **kwargs) -> str:
    """Run :func:`generate` to the end and return the whole text (same keyword arguments)."""
    gen = generate(model, tokenizer, prompt_ids, **kwargs)
    for _ in gen:
        pass
    return gen.text
