"""Vocabulary size: what a bigger V buys in compression, and what it costs in parameters (chapter 08, lab 08).

The vocabulary size V of a byte-level BPE tokenizer is a knob you set before training: V = 256 byte tokens
+ the number of merges. Turning it up has one benefit and one bill.

* **Benefit: shorter sequences.** More merges put more whole words into single tokens, so a text becomes
  fewer tokens: more characters per token, fewer positions for attention and the KV cache to pay for.
  :func:`compression_curve` measures characters (or bytes) per token at several sizes.
* **Bill: parameters.** Every entry is a row of the token embedding (``V x d``) and, unless the output head
  reuses that matrix ("tied" weights), a row of the output head too: ``2 x V x d`` parameters untied.
  :func:`embedding_params` and :func:`embedding_fraction` count them; :func:`kv_cache_bytes_per_token` is
  the memory each token of context costs, the other side of the trade.

One training run gives every size at once. BPE training is greedy and deterministic: merge k depends only on
the corpus and merges 0..k-1, never on how many merges were asked for (that number only says when to stop).
So the merges form a **prefix** family: the vocabulary of size V is the 256 bytes plus the first V - 256
merges of a run trained to any larger size (:func:`vocab_prefix`). Train once to the largest V, then slice.

The curve flattens: each doubling of V buys about the same gain, so the gain *per entry* halves each time
(:func:`marginal_gains`). :func:`choose_vocab_size` picks the size with the best compression that fits a
parameter budget.

A note on counting: V here is ``256 + number of merges``. Rarely, two merges spell the same bytes
(``a+bc`` and later ``ab+c``); they share one id, so such a vocabulary has one id fewer than V. Real runs
such as chapter 08's have none.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .bpe import FastBPETokenizer, build_vocab

__all__ = [
    "vocab_prefix",
    "compression_curve",
    "embedding_params",
    "embedding_fraction",
    "kv_cache_bytes_per_token",
    "marginal_gains",
    "choose_vocab_size",
]


def _positive_int(value, name: str) -> int:
    """``value`` if it is an ``int`` > 0; else a ``TypeError`` or ``ValueError`` that names ``name``.

    ``True`` is an ``int`` to Python but never a size, so booleans are refused too.
    """
    if type(value) is not int:
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def vocab_prefix(
    merges: Sequence[tuple[bytes, bytes]], vocab_size: int
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """The tokenizer of size ``vocab_size`` inside one run: ``(vocab, first vocab_size - 256 merges)``.

    ``merges`` is the ordered merge list of a run trained to some size >= ``vocab_size``. Because training
    is greedy, its first ``k`` merges are exactly what a run asked for ``k`` merges would have learned, so
    no second run is needed. ``vocab`` is built with :func:`bytes2logits.lessons.bpe.build_vocab` (the 256 bytes,
    then one id per merge).

    ``vocab_size`` must be an ``int`` (``TypeError`` otherwise) between 256 (the bytes alone) and
    ``256 + len(merges)`` (``ValueError`` otherwise: a run cannot be sliced to more merges than it learned).
    Each merge must be a pair of ``bytes`` (``TypeError`` naming the first that is not).

    >>> vocab, merges = vocab_prefix([(b"a", b"b"), (b"ab", b"c")], 257)
    >>> merges, len(vocab), vocab[256]
    ([(b'a', b'b')], 257, b'ab')
    """
    if type(vocab_size) is not int:
        raise TypeError(f"vocab_size must be an int, got {vocab_size!r} ({type(vocab_size).__name__})")
    largest = 256 + len(merges)
    if vocab_size < 256:
        raise ValueError("a byte-level vocabulary holds at least the 256 single bytes; "
                         f"got vocab_size={vocab_size}")
    if vocab_size > largest:
        raise ValueError(f"merges learned: {len(merges)}, so the largest vocabulary is {largest}; "
                         f"got vocab_size={vocab_size} (train to a larger size first)")
    prefix = []
    for rank, merge in enumerate(merges[: vocab_size - 256]):
        if type(merge) is not tuple or len(merge) != 2 or not all(type(part) is bytes for part in merge):
            raise TypeError(f"merge {rank} is {merge!r}: expected a pair (left, right) of bytes")
        prefix.append(merge)
    return build_vocab(prefix), prefix


def compression_curve(
    text: str,
    merges: Sequence[tuple[bytes, bytes]],
    sizes: Sequence[int],
    *,
    unit: str = "chars",
) -> list[tuple[int, float]]:
    """Compression of ``text`` at each vocabulary size: ``[(V, characters per token), ...]``.

    For each ``V`` in ``sizes`` take the tokenizer of that size from the one run ``merges``
    (:func:`vocab_prefix`), encode ``text`` with it, and divide the length of the text by the number of
    tokens. ``unit="chars"`` counts characters (``len(text)``), ``unit="bytes"`` counts UTF-8 bytes: at
    V = 256 every byte is one token, so bytes per token is exactly 1.0 there, while characters per token
    is below 1 for text with non-ASCII characters.

    Measure on text the merges were **not** trained on: on its own training text a vocabulary looks
    better than it will on new text, and the larger V is, the larger that flattery.

    ``sizes`` must be a non-empty sequence of ints in strictly increasing order (a curve has one point per
    size, left to right), each valid for :func:`vocab_prefix`; ``unit`` is ``"chars"`` or ``"bytes"``;
    ``text`` a non-empty ``str`` (an empty text has no compression). Violations raise ``TypeError`` (wrong
    type) or ``ValueError``. Returns a list of ``(int, float)`` tuples in the order of ``sizes``.

    Encoding uses :class:`bytes2logits.lessons.bpe.FastBPETokenizer` (the ids of lab 04's ``BPETokenizer``,
    faster on long texts). With the same merges, a larger V never gives more tokens: the extra merges only
    act after all the earlier ones, and each one fuses two tokens into one.

    >>> compression_curve("abc abc", [(b"a", b"b"), (b"ab", b"c")], [256, 257, 258])
    [(256, 1.0), (257, 1.4), (258, 2.3333333333333335)]
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text:
        raise ValueError("the text is empty: it has no characters per token to measure")
    if unit not in ("chars", "bytes"):
        raise ValueError(f'unit must be "chars" or "bytes", got {unit!r}')
    sizes = list(sizes)
    if not sizes:
        raise ValueError("sizes is empty: give at least one vocabulary size")
    for before, after in zip(sizes, sizes[1:]):
        if type(before) is int and type(after) is int and after <= before:
            raise ValueError(f"sizes must be strictly increasing, but {after} comes after {before}")
    length = len(text) if unit == "chars" else len(text.encode("utf-8"))
    curve = []
    for size in sizes:
        vocab, prefix = vocab_prefix(merges, size)
        n_tokens = len(FastBPETokenizer(vocab, prefix).encode(text))
        curve.append((size, length / n_tokens))
    return curve


def embedding_params(vocab_size: int, d_model: int, *, tied: bool) -> int:
    """Parameters spent on the vocabulary: the token embedding (``V x d``) plus the output head.

    The embedding turns each input id into a row of ``d_model`` numbers; the output head turns the last
    hidden state into one logit per vocabulary entry, another ``V x d`` matrix. A **tied** model uses the
    embedding matrix as its head (a GGUF file then has no ``output.weight`` tensor), so it pays ``V x d``
    once; an untied model pays ``2 x V x d``.

    ``vocab_size`` and ``d_model`` must be positive ints and ``tied`` a bool (``TypeError`` /
    ``ValueError`` otherwise: ``tied="no"`` would silently count as true).

    >>> embedding_params(49152, 576, tied=True), embedding_params(49152, 576, tied=False)
    (28311552, 56623104)
    """
    _positive_int(vocab_size, "vocab_size")
    _positive_int(d_model, "d_model")
    if type(tied) is not bool:
        raise TypeError(f"tied must be True or False, got {tied!r}")
    return (1 if tied else 2) * vocab_size * d_model


def embedding_fraction(vocab_size: int, d_model: int, other_params: int, *, tied: bool) -> float:
    """The share of all parameters that the vocabulary costs: ``E / (E + other_params)``.

    ``E`` is :func:`embedding_params`; ``other_params`` is everything else (attention, feed-forward, norms),
    an ``int`` >= 0. For a small model this share is large: each entry costs ``d`` parameters, so a narrow
    model pays less per entry, but the transformer body shrinks faster, roughly like ``d**2 x layers``.

    >>> round(embedding_fraction(49152, 576, 106203456, tied=True), 4)
    0.2105
    """
    table = embedding_params(vocab_size, d_model, tied=tied)
    if type(other_params) is not int:
        raise TypeError(f"other_params must be an int, got {other_params!r} ({type(other_params).__name__})")
    if other_params < 0:
        raise ValueError(f"other_params cannot be negative, got {other_params}")
    return table / (table + other_params)


def kv_cache_bytes_per_token(n_layer: int, n_head_kv: int, head_dim: int, bytes_per_value: int = 2) -> int:
    """Memory one token of context holds in the KV cache: ``2 x n_layer x n_head_kv x head_dim x bytes``.

    Each layer keeps a key and a value vector (the 2) of ``head_dim`` numbers for each key/value head, for
    every token in the context. ``bytes_per_value`` is 2 for llama.cpp's default float16 cache, 4 for
    float32. It does not depend on V, but the number of tokens a text needs does: fewer tokens, less cache
    (and less attention work, which grows with the square of the sequence length).

    >>> kv_cache_bytes_per_token(30, 3, 64)
    23040
    """
    for value, name in ((n_layer, "n_layer"), (n_head_kv, "n_head_kv"), (head_dim, "head_dim"),
                        (bytes_per_value, "bytes_per_value")):
        _positive_int(value, name)
    return 2 * n_layer * n_head_kv * head_dim * bytes_per_value


def _check_curve(curve) -> list[tuple[int, float]]:
    """Check that ``curve`` is a well-formed compression curve; return it as a list of ``(int, float)``.

    A curve is a non-empty sequence of ``(V, value)`` pairs: ``V`` a positive ``int`` (not a bool or a
    float), ``value`` a finite real number >= 0, the ``V`` strictly increasing. A point that is not a
    pair, a non-int size or a non-number value is a ``TypeError``; anything else wrong is a ``ValueError``
    naming the point.
    """
    if isinstance(curve, (str, bytes)) or not isinstance(curve, Sequence):
        raise TypeError(f"a curve is a list of (V, value) pairs, got {type(curve).__name__}")
    if len(curve) == 0:
        raise ValueError("the curve is empty: it needs at least one (V, value) point")
    points = []
    for i, point in enumerate(curve):
        if not isinstance(point, (tuple, list)) or len(point) != 2:
            raise TypeError(f"point {i} of the curve is {point!r}: expected a pair (V, value)")
        size, value = point
        if type(size) is not int:
            raise TypeError(f"point {i}: the size {size!r} is a {type(size).__name__}, expected an int")
        if size <= 0:
            raise ValueError(f"point {i}: the size must be positive, got {size}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"point {i}: the value {value!r} is not a real number")
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"point {i}: the value must be finite and >= 0, got {value!r}")
        if points and size <= points[-1][0]:
            raise ValueError(f"point {i}: sizes must increase strictly, "
                             f"but {size} comes after {points[-1][0]}")
        points.append((size, float(value)))
    return points


def marginal_gains(curve: Sequence[tuple[int, float]], per: int = 1000) -> list[tuple[int, float]]:
    """What each step of the curve buys per ``per`` extra entries: ``[(V_next, gain), ...]``.

    For consecutive points ``(V0, c0)`` and ``(V1, c1)`` the gain is ``(c1 - c0) / (V1 - V0) * per``, the
    compression gained per ``per`` (default 1000) vocabulary entries added, reported at the step's upper
    size ``V1``. A curve of ``n`` points gives ``n - 1`` gains (none for a single point). When every doubling
    of V buys the same gain, this number halves with every doubling: diminishing returns.

    The curve is checked with :func:`_check_curve`; ``per`` must be a positive int.

    >>> marginal_gains([(256, 1.0), (1256, 2.0), (3256, 2.5)])
    [(1256, 1.0), (3256, 0.25)]
    """
    points = _check_curve(curve)
    _positive_int(per, "per")
    return [(v1, (c1 - c0) / (v1 - v0) * per) for (v0, c0), (v1, c1) in zip(points, points[1:])]


def choose_vocab_size(
    curve: Sequence[tuple[int, float]], d_model: int, budget_params: float, *, tied: bool
) -> int:
    """The vocabulary size with the best compression whose embedding (and head) fits a parameter budget.

    A point ``(V, value)`` fits when ``embedding_params(V, d_model, tied=tied) <= budget_params`` (a cost
    exactly at the budget fits). Among the points that fit, return the ``V`` with the highest value; when
    several share that value, the **smallest** such ``V``: entries that buy nothing are not worth paying for.
    The curve need not rise everywhere (measured curves wobble), so the answer is not always the largest
    size that fits.

    ``budget_params`` is a real number >= 0 (``math.inf`` means no limit); a bool, a string or NaN is
    refused. The curve is checked with :func:`_check_curve`. When not even the smallest size fits, the
    ``ValueError`` says what that size costs.

    >>> choose_vocab_size([(1024, 1.9), (4096, 2.4), (16384, 2.8)], 576, 5_000_000, tied=False)
    4096
    """
    points = _check_curve(curve)
    _positive_int(d_model, "d_model")
    if isinstance(budget_params, bool) or not isinstance(budget_params, (int, float)):
        raise TypeError(f"budget_params must be a number of parameters, got {budget_params!r}")
    if math.isnan(budget_params) or budget_params < 0:
        raise ValueError(f"budget_params must be >= 0, got {budget_params!r}")
    best = None
    for size, value in points:
        if embedding_params(size, d_model, tied=tied) <= budget_params and (best is None or value > best[1]):
            best = (size, value)
    if best is None:
        smallest = points[0][0]
        cost = embedding_params(smallest, d_model, tied=tied)
        kind = "tied embedding" if tied else "embedding + untied head"
        raise ValueError(f"no size fits the budget of {budget_params:,} parameters: "
                         f"the smallest, V={smallest}, needs {cost:,} ({kind} at d_model={d_model})")
    return best[0]
