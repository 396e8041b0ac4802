"""Prompt-lookup decoding: guess the next few tokens by copying from the context, check them in one call.

A decode step reads every weight of the model to produce *one* token: it is limited by memory traffic,
not arithmetic. Evaluating a few positions at once reads the same weights once, so if we had good guesses
for the next tokens we could check several of them for roughly the price of one step. *Speculative
decoding* gets the guesses from a small draft model; **prompt lookup** needs no model at all. Many answers
copy long stretches of their context (a corrected paragraph, a summary that quotes, code being edited), so:

1. **Draft** — take the last ``n`` tokens of the context (prompt + everything generated so far), find the
   most recent *earlier* place where the same ``n`` tokens occurred, and propose the tokens that followed
   them there. Try the longest ``n`` first (``max_ngram`` down to ``min_ngram``): a longer match is a
   more specific, more trustworthy guess. :func:`find_draft` is the rule as one pure function;
   :class:`NgramIndex` gives the same answers in constant time per step, from a dictionary that is
   updated as tokens arrive.
2. **Verify** — evaluate ``[last token, d1, ..., dk]`` in one ``forward`` call. Row ``j`` of its logits
   is what the model predicts after ``dj`` (row 0: after the last token). Walk the rows: as long as the
   token the sampler picks from row ``j - 1`` equals ``dj``, the guess was right and row ``j`` is already
   computed. At the first mismatch the sampler's own pick from that row is the next token (the guess
   still bought us that token), and the cache entries written for the rejected guesses are stale: the
   next call starts at the first of them and overwrites them.
3. **Only where it pays** — a verification call costs more than a one-token step, so a guess is worth
   checking only if enough of its tokens tend to be right. :class:`Drafter` scores *every* guess it
   could make (also the ones it does not send to the model) against the tokens that really came next,
   per match length, and drafts a length only while its guesses average at least
   ``LookupConfig.min_accepted`` right tokens. Scoring a guess that was not checked costs nothing: the
   tokens it is compared with are generated anyway.

Under greedy decoding this is *lossless*: every emitted token is the argmax of the same logits plain
decoding would compute, so the ids are the same. With a random sampler, :func:`choose_with_draft`
accepts a guess ``d`` with probability ``p(d)`` and otherwise samples from ``p`` with ``d`` removed, the
standard speculative-sampling rule for a draft that is one fixed token: every token still has exactly
the sampler's probability (see its docstring). Only the random numbers are used differently, so a seeded
run gives other (equally likely) text than without lookup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Drafter", "LookupConfig", "NgramIndex", "choose_with_draft", "find_draft"]


@dataclass(frozen=True)
class LookupConfig:
    """Settings of prompt-lookup decoding (``generate(..., lookup=LookupConfig(...))``).

    ``draft``
        the most tokens proposed per verification call (the call evaluates ``draft + 1`` positions).
    ``ngram``
        ``(min_ngram, max_ngram)``: the lengths of context suffix that are looked up, longest first.
    ``min_accepted``
        draft a match length only while its guesses have averaged at least this many right tokens
        (:class:`Drafter`); ``0`` checks every guess. A check of ``a`` right tokens gives ``a + 1`` tokens
        for one call, so it pays when ``a + 1`` exceeds the call's cost in one-token steps.

    Why the defaults skip 1-grams: a single repeated token (``" the"``, ``","``) almost always has an
    earlier occurrence, but what followed it there is rarely what comes next, and each wasted guess costs a
    verification call. In this engine a call of ``draft + 1`` positions costs several one-token steps
    (NumPy's matrix products are much less efficient for a few rows than for one; ``benchmarks/bench_engine.py``
    prints the ratio), so a guess pays only when about two or more of its tokens are usually right
    (hence ``min_accepted=2``). ``ngram=(1, 3), min_accepted=0`` drafts far more often, which pays where
    that ratio is close to 1.

    >>> LookupConfig(draft=4, ngram=(1, 3)).max_ngram
    3
    """

    draft: int = 8
    ngram: tuple[int, int] = (2, 3)
    min_accepted: float = 2.0

    def __post_init__(self):
        """Check the settings (a draft of at least 1 token, ``1 <= min_ngram <= max_ngram``)."""
        if isinstance(self.draft, bool) or not isinstance(self.draft, (int, np.integer)) or self.draft < 1:
            raise ValueError(f"LookupConfig.draft must be an int >= 1 (tokens proposed per step), got {self.draft!r}")
        ngram = tuple(self.ngram) if isinstance(self.ngram, (tuple, list)) else None
        if (ngram is None or len(ngram) != 2
                or any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) for n in ngram)
                or not 1 <= ngram[0] <= ngram[1]):
            raise ValueError(
                f"LookupConfig.ngram must be (min_ngram, max_ngram) with 1 <= min <= max, got {self.ngram!r}"
            )
        m = self.min_accepted
        if isinstance(m, bool) or not isinstance(m, (int, float, np.integer, np.floating)) or not 0 <= m < np.inf:
            raise ValueError(f"LookupConfig.min_accepted must be a number >= 0 (0 = always draft), got {m!r}")
        object.__setattr__(self, "min_accepted", float(m))
        object.__setattr__(self, "draft", int(self.draft))
        object.__setattr__(self, "ngram", (int(ngram[0]), int(ngram[1])))

    @property
    def min_ngram(self) -> int:
        """The shortest suffix that is looked up."""
        return self.ngram[0]

    @property
    def max_ngram(self) -> int:
        """The longest suffix that is looked up (tried first)."""
        return self.ngram[1]

    @classmethod
    def of(cls, value) -> LookupConfig | None:
        """Normalise what ``generate(lookup=...)`` accepts: ``None``/``0`` (off), an int draft length, or a config.

        >>> LookupConfig.of(5)
        LookupConfig(draft=5, ngram=(2, 3), min_accepted=2.0)
        >>> LookupConfig.of(0) is None
        True
        """
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"lookup must be None, an int (the draft length; 0 = off) or a LookupConfig, got {value!r}")
        if value < 0:
            raise ValueError(f"lookup must be >= 0 (the draft length; 0 = off), got {value}")
        return cls(draft=int(value)) if value else None


def find_draft(context: Sequence[int], draft: int = 8, min_ngram: int = 1, max_ngram: int = 3) -> list[int]:
    """The prompt-lookup guess for what follows ``context``: at most ``draft`` token ids (maybe none).

    For ``n`` from ``max_ngram`` down to ``min_ngram``: the suffix ``context[-n:]`` is searched for among
    the *earlier* n-grams (those that start before ``len(context) - n``, so each is followed by at least
    one token). The first ``n`` that has a match wins; of its matches the most recent one is used, and
    the guess is the up to ``draft`` tokens that followed it (fewer if the context ends first). No match
    for any ``n`` gives ``[]``.

    Each ``n`` is one vectorised comparison of all length-``n`` windows, ``O(n * len(context))`` work;
    generation uses :class:`NgramIndex` instead, which gives the same answer in ``O(max_ngram)`` per step.

    >>> find_draft([5, 6, 7, 8, 5, 6], draft=2)       # "5 6" occurred at the start, followed by 7 8
    [7, 8]
    >>> find_draft([1, 2, 3, 9, 2, 3, 4, 2, 3])       # the latest "2 3" wins: it was followed by 4 2 3
    [4, 2, 3]
    >>> find_draft([1, 2, 3], min_ngram=1)            # nothing repeats
    []
    """
    ctx = np.asarray(context, dtype=np.int64)
    t = len(ctx)
    for n in range(max_ngram, min_ngram - 1, -1):
        if t <= n:  # no earlier n-gram can exist
            continue
        # windows of ctx[:-1] are exactly the n-grams that start before t - n (each has a follower)
        windows = np.lib.stride_tricks.sliding_window_view(ctx[:-1], n)
        hits = np.flatnonzero((windows == ctx[t - n:]).all(axis=1))
        if len(hits):
            start = int(hits[-1]) + n
            return ctx[start:start + draft].tolist()
    return []


class NgramIndex:
    """The token context with an index that answers :func:`find_draft` in constant time per step.

    For every ``n`` in ``min_ngram..max_ngram`` a dictionary maps an n-gram to the position just after
    its latest occurrence *that has a follower*. Appending a token at position ``T`` gives the n-grams
    ending just before ``T`` their follower, so they are entered (or moved to ``T``) then. The suffix of
    the context itself is never in the index until a token follows it, which is exactly "occurred
    earlier". Memory is ``O(len(context) * (max_ngram - min_ngram + 1))`` small tuples.

    >>> index = NgramIndex(min_ngram=1, max_ngram=2)
    >>> index.extend([5, 6, 7, 8, 5, 6])
    >>> index.draft(3)
    [7, 8, 5]
    """

    def __init__(self, min_ngram: int = 1, max_ngram: int = 3):
        """An empty context; ``1 <= min_ngram <= max_ngram``."""
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        self.min_ngram, self.max_ngram = int(min_ngram), int(max_ngram)
        self.tokens: list[int] = []
        self._follow: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in range(min_ngram, max_ngram + 1)}

    def __len__(self) -> int:
        """The number of tokens in the context."""
        return len(self.tokens)

    def append(self, token: int) -> None:
        """Add one token at the end of the context."""
        toks, t = self.tokens, len(self.tokens)
        for n, follow in self._follow.items():
            if t >= n:
                follow[tuple(toks[t - n:t])] = t
        toks.append(int(token))

    def extend(self, tokens) -> None:
        """Add several tokens (e.g. the prompt) at the end of the context."""
        for token in tokens:
            self.append(token)

    def match(self, k: int) -> tuple[int, list[int]]:
        """``(n, guess)``: the matched suffix length and up to ``k`` guessed tokens, or ``(0, [])``."""
        toks, t = self.tokens, len(self.tokens)
        if k <= 0:
            return 0, []
        for n in range(self.max_ngram, self.min_ngram - 1, -1):
            if t <= n:
                continue
            at = self._follow[n].get(tuple(toks[t - n:]))
            if at is not None:
                return n, toks[at:at + k]
        return 0, []

    def draft(self, k: int) -> list[int]:
        """Up to ``k`` guessed tokens for what follows the context; the same as :func:`find_draft`."""
        return self.match(k)[1]


class Drafter:
    """What generation asks for guesses: an :class:`NgramIndex` plus a record of how well guesses do.

    Every call of :meth:`propose` looks up a guess of ``config.draft`` tokens. The guess is remembered
    with its match length ``n`` and scored as the following tokens arrive (:meth:`append`): its score is
    how many of its first tokens were right. ``mean_accepted(n)`` averages the scores of length ``n``,
    starting from one optimistic pseudo-score of ``config.draft``, so each length is tried before it can
    be ruled out. A guess whose length averages less than ``config.min_accepted`` is scored but not
    returned: that length comes back as soon as its (free) scores recover.

    >>> d = Drafter(LookupConfig(draft=3, ngram=(1, 1), min_accepted=1.0))
    >>> d.extend([1, 2, 9, 1])
    >>> d.propose(3)        # "1" was followed by "2 9 1"
    [2, 9, 1]
    >>> d.append(5)         # wrong at once: score 0, mean (3 + 0) / 2
    >>> d.mean_accepted(1)
    1.5
    """

    def __init__(self, config: LookupConfig):
        """An empty context for ``config``'s n-gram lengths."""
        self.config = config
        self.index = NgramIndex(config.min_ngram, config.max_ngram)
        self._scores = {n: [1, float(config.draft)] for n in range(config.min_ngram, config.max_ngram + 1)}
        self._open: list[tuple[int, list[int], int]] = []  # (n, guess, tokens of it confirmed so far)

    def __len__(self) -> int:
        """The number of tokens in the context."""
        return len(self.index)

    def append(self, token: int) -> None:
        """Add one token to the context, and score the open guesses against it."""
        self.index.append(token)
        still = []
        for n, guess, right in self._open:
            if guess[right] == token:
                right += 1
                if right < len(guess):
                    still.append((n, guess, right))
                    continue
            scores = self._scores[n]
            scores[0] += 1
            scores[1] += right
        self._open = still

    def extend(self, tokens) -> None:
        """Add several tokens (e.g. the prompt) to the context."""
        for token in tokens:
            self.append(token)

    def mean_accepted(self, n: int) -> float:
        """The average score of the guesses made from an ``n``-token match (optimistic before any)."""
        count, total = self._scores[n]
        return total / count

    def propose(self, room: int) -> list[int]:
        """A guess for what follows the context, at most ``room`` tokens; ``[]`` if none, or if it would not pay."""
        n, guess = self.index.match(self.config.draft)
        if not guess:
            return []
        self._open.append((n, guess, 0))
        if room <= 0 or self.mean_accepted(n) < self.config.min_accepted:
            return []
        return guess[:room]


def choose_with_draft(sampler, logits: np.ndarray, history: Sequence[int], guess: int | None) -> int:
    """The next token from ``logits``, given the draft's ``guess`` for it, with the sampler's exact distribution.

    * Greedy sampler (``temperature == 0``), or no guess: ``sampler.sample(logits, history)``, so under
      greedy decoding the token is the same as without lookup (the guess is accepted exactly when it is
      the argmax).
    * Random sampler with a guess ``d``: let ``p`` be the sampler's final distribution
      (``sampler.distribution``). Accept ``d`` with probability ``p(d)``; otherwise draw from ``p`` with
      ``d`` removed and the rest renormalised. A token ``x != d`` then comes out with probability
      ``(1 - p(d)) * p(x) / (1 - p(d)) = p(x)``, and ``d`` with ``p(d)``: exactly ``p``. (This is the
      speculative-sampling acceptance rule ``min(1, p/q)`` with residual ``max(0, p - q)`` for a draft
      distribution ``q`` that puts all its mass on ``d``.) It uses ``sampler.rng``.

    >>> from bytes2logits.engine.generate import Sampler
    >>> choose_with_draft(Sampler.greedy(), np.array([0.0, 3.0, 1.0]), [], guess=2)
    1
    """
    if guess is None or getattr(sampler, "is_greedy", False):
        return sampler.sample(logits, history)
    ids, probs = sampler.distribution(logits, history)
    hit = np.flatnonzero(ids == guess)
    p_guess = float(probs[hit[0]]) if len(hit) else 0.0
    if p_guess > 0.0 and sampler.rng.random() < p_guess:
        return int(guess)
    rest = probs.copy()
    rest[hit] = 0.0
    cum = np.cumsum(rest)
    u = sampler.rng.random() * cum[-1]  # in [0, total): the removed guess (probability 0) cannot be drawn
    i = min(int(np.searchsorted(cum, u, side="right")), len(ids) - 1)
    return int(ids[i])
