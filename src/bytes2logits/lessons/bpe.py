"""Byte-level BPE from scratch: training, encoding, decoding, and the closed byte-level codec.

This module is the reference for labs 03-05.

* :func:`train_bpe` learns an ordered list of merges from a corpus (lab 03).
* :class:`BPETokenizer` replays those merges to turn text into token ids and back (lab 04);
  :class:`FastBPETokenizer` gives the same ids, merging a long text's new pieces together with NumPy.
* :class:`ByteLevelCodec` is the same tokenizer with the guarantees of a *closed* codec checked up front:
  all 256 bytes and every special token have exactly one id, user text can never produce a special id,
  and ``decode(encode(x)) == x`` for every string (lab 05).
* :func:`bytes_to_unicode` is GPT-2's printable byte <-> character map, used to *display* byte tokens.

Conventions used everywhere below:

* A **token** is a ``bytes`` object. The 256 base tokens are the single bytes ``b"\\x00"`` .. ``b"\\xff"``;
  every merge ``(left, right)`` adds the token ``left + right``.
* The **pre-tokenizer** splits text with the regular expression ``\\S+|\\s+``: runs of non-whitespace and
  runs of whitespace. Nothing is thrown away, so joining the pieces gives the text back. Merges never cross
  a piece boundary.
* The **vocabulary** is ``dict[int, bytes]``: special tokens first (ids ``0 .. k-1``, in the order given),
  then the 256 single bytes (ids ``k .. k+255``, in byte order), then one id per merge, in merge order.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain

import numpy as np

from ..text import bytes_to_unicode

__all__ = [
    "PRETOKENIZE_PATTERN",
    "pretokenize",
    "count_pieces",
    "train_bpe",
    "BPETokenizer",
    "FastBPETokenizer",
    "ByteLevelCodec",
    "bytes_to_unicode",
    "token_to_printable",
]

#: The pre-tokenizer of the course: runs of non-whitespace, or runs of whitespace.
PRETOKENIZE_PATTERN = r"\S+|\s+"
# The standard library ``re`` runs this simple pattern about twice as fast as the ``regex`` module.
_PRETOKENIZE = re.compile(PRETOKENIZE_PATTERN)


def pretokenize(text: str) -> list[str]:
    """Split ``text`` into pieces: runs of non-whitespace and runs of whitespace.

    ``"".join(pretokenize(text)) == text`` always holds, because whitespace survives as its own pieces.

    >>> pretokenize("low  lower\\n")
    ['low', '  ', 'lower', '\\n']
    """
    return _PRETOKENIZE.findall(text)


def _check_special_tokens(special_tokens: Sequence[str]) -> list[str]:
    """Return the special tokens as a list after checking they can get stable ids of their own.

    Each must be a non-empty ``str`` of at least two UTF-8 bytes (a one-byte special would collide with a
    base byte token), and no special may be listed twice.
    """
    if isinstance(special_tokens, (str, bytes)):
        raise TypeError("special_tokens must be a sequence of str, e.g. ['<bos>', '<eos>'], not one string")
    specials = list(special_tokens)
    seen: set[str] = set()
    for s in specials:
        if type(s) is not str:
            raise TypeError(f"special token {s!r} is a {type(s).__name__}, expected str")
        if len(s.encode("utf-8")) < 2:
            raise ValueError(f"special token {s!r} is shorter than two bytes: it would collide with a byte token")
        if s in seen:
            raise ValueError(f"special token {s!r} is listed twice")
        seen.add(s)
    return specials


def _split_on_specials(text: str, specials: Sequence[str]) -> list[str]:
    """Cut ``text`` around every literal occurrence of a special token, dropping the specials themselves.

    Longer specials are tried first, so ``"<|end|>"`` is not cut inside ``"<|endoftext|>"``.
    """
    if not specials:
        return [text]
    alternatives = "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True))
    return re.split(alternatives, text)


def count_pieces(text: str, special_tokens: Sequence[str] = (), pattern: str = PRETOKENIZE_PATTERN) -> Counter[str]:
    """How often each pre-token piece occurs in ``text``.

    ``pattern`` is the pre-tokenizer's regular expression (default ``\\S+|\\s+``); a pattern with Unicode
    classes such as GPT-2's ``\\p{L}`` is compiled with the ``regex`` module. Text a pattern does not match
    is left out, as ``findall`` leaves it out.

    Training works on *distinct* pieces weighted by their frequency: ``"the"`` occurring 60 000 times is one
    word with weight 60 000, not 60 000 words. Literal special-token text is cut out of the corpus first,
    so training can never learn a merge that spells a special token.
    """
    if pattern == PRETOKENIZE_PATTERN:
        findall = _PRETOKENIZE.findall
    else:
        import regex

        findall = regex.compile(pattern).findall
    counts: Counter[str] = Counter()
    for chunk in _split_on_specials(text, special_tokens):
        counts.update(findall(chunk))
    return counts


def _merge_in_word(
    word: list[int], wid: int, freq: int, left: int, right: int, new: int,
    delta: dict[tuple[int, int], int], where: dict[tuple[int, int], set[int]],
) -> None:
    """Fuse every non-overlapping ``left, right`` in ``word`` (in place, left to right) into ``new``.

    Instead of recounting the whole word, record only what changes around each occurrence, weighted by
    the word's frequency ``freq``: the neighbour pairs ``(prev, left)`` and ``(right, next)`` disappear and
    ``(prev, new)`` and ``(new, next)`` appear. (The pair ``(left, right)`` itself is dropped by the
    caller.) ``prev`` is read from the already-rewritten word, so two occurrences in a row
    (``l r l r`` -> ``N N``) cancel out correctly: ``(N, l)`` is added by the first and removed by the
    second. Every word that gains a pair with ``new`` is added to ``where`` for that pair.
    """
    find = word.index
    try:
        i = find(left)
        while True:
            if i + 1 < len(word) and word[i + 1] == right:
                if i > 0:
                    prev = word[i - 1]
                    delta[(prev, left)] -= freq
                    delta[(prev, new)] += freq
                    where[(prev, new)].add(wid)
                if i + 2 < len(word):
                    nxt = word[i + 2]
                    delta[(right, nxt)] -= freq
                    delta[(new, nxt)] += freq
                    where[(new, nxt)].add(wid)
                word[i : i + 2] = (new,)
            i = find(left, i + 1)
    except ValueError:  # list.index found no further ``left``
        pass


def train_bpe(
    text: str,
    num_merges: int,
    special_tokens: Sequence[str] = (),
    *,
    pattern: str = PRETOKENIZE_PATTERN,
    tie_break: str = "smallest",
    progress: bool = False,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Learn up to ``num_merges`` byte-level BPE merges from ``text``.

    Returns ``(vocab, merges)``: ``merges`` is the ordered list of learned pairs ``(left, right)`` of bytes,
    ``vocab`` maps id -> token bytes (special tokens, then the 256 bytes, then one token per merge).

    The algorithm, as in the chapter:

    1. Pre-tokenize with ``\\S+|\\s+`` and count each distinct piece (:func:`count_pieces`). A piece starts
       as the list of its UTF-8 bytes.
    2. Count every adjacent pair of symbols, weighted by the frequency of the piece it sits in.
    3. Repeat: take the most frequent pair; on a tie, the **lexicographically smallest pair of raw bytes**
       ``(left, right)`` wins. Record it, fuse it into one symbol everywhere, update the counts. Stop early
       when no pair is left.

    The tie rule makes the result a pure function of the corpus contents and ``num_merges``: the order of
    lines in the corpus or of keys in a dict cannot change which pair wins.

    Two keywords change the rules (chapter 11 compares them):

    * ``pattern``: the pre-tokenizer's expression instead of ``\\S+|\\s+``, e.g. GPT-2's
      (:data:`bytes2logits.engine.pretokenizers.GPT2`), so that merges never cross its pieces;
    * ``tie_break="largest"``: a tie goes to the lexicographically *largest* pair instead (subword-nmt's
      ``learn_bpe.py`` picks ``max(stats, key=lambda x: (stats[x], x))``). Any fixed rule gives a deterministic
      trainer; they differ only in which of the equally frequent pairs comes first.

    **Why it is fast.** A naive trainer recounts every pair of every word after each merge. Here a merge
    only touches the words that contain the merged pair:

    * ``where[pair]`` is the set of word ids that contain (or once contained) ``pair``;
    * after rewriting those words, only the pairs whose count changed are updated;
    * the best pair comes from a max-heap of ``(-count, left_bytes, right_bytes, ...)`` entries. A count
      change pushes a fresh entry instead of editing the old one ("lazy invalidation"); an entry popped
      from the top whose count no longer matches the current count is stale and is skipped. Because the
      heap orders by ``-count`` then by the bytes, the top valid entry is exactly the tie rule's winner.

    Internally symbols are small ints (ids into ``token_bytes``) so that words are cheap lists of ints.
    Two merges that spell the same bytes (``a+bc`` and ``ab+c``) share one symbol and one vocabulary id,
    so the vocabulary can be slightly smaller than ``k + 256 + len(merges)``.

    ``progress=True`` shows a tqdm progress bar over the merges.
    """
    if type(num_merges) is not int or num_merges < 0:
        raise ValueError(f"num_merges must be a non-negative int, got {num_merges!r}")
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if tie_break not in ("smallest", "largest"):
        raise ValueError(f"tie_break must be 'smallest' or 'largest', got {tie_break!r}")
    specials = _check_special_tokens(special_tokens)
    # The heap pops the smallest entry: for "largest", order the byte strings backwards (see _reversed_bytes).
    order = (lambda b: b) if tie_break == "smallest" else _reversed_bytes

    # token_bytes[symbol] is the bytes a symbol spells; symbol_of[bytes] goes back.
    token_bytes: list[bytes] = [bytes([b]) for b in range(256)]
    symbol_of: dict[bytes, int] = {t: i for i, t in enumerate(token_bytes)}

    # One entry per distinct piece with at least two bytes (a single byte has no pair to merge).
    words: list[list[int]] = []
    freqs: list[int] = []
    for piece, freq in count_pieces(text, specials, pattern).items():
        symbols = list(piece.encode("utf-8"))
        if len(symbols) > 1:
            words.append(symbols)
            freqs.append(freq)

    # Initial frequency-weighted pair counts, and which words hold each pair.
    pair_counts: dict[tuple[int, int], int] = defaultdict(int)
    where: dict[tuple[int, int], set[int]] = defaultdict(set)
    for wid, symbols in enumerate(words):
        freq = freqs[wid]
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += freq
            where[pair].add(wid)
    heap = [(-count, order(token_bytes[a]), order(token_bytes[b]), a, b) for (a, b), count in pair_counts.items()]
    heapq.heapify(heap)

    merges: list[tuple[bytes, bytes]] = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=num_merges, desc="train_bpe", unit="merge")
    while len(merges) < num_merges:
        # Pop stale entries until the top of the heap is a pair with its current (positive) count.
        while heap:
            neg_count, _, _, a, b = heap[0]
            if pair_counts.get((a, b), 0) == -neg_count > 0:
                break
            heapq.heappop(heap)
        else:
            break  # no pair left anywhere: stop early
        heapq.heappop(heap)
        left_bytes, right_bytes = token_bytes[a], token_bytes[b]
        merges.append((left_bytes, right_bytes))
        merged = left_bytes + right_bytes
        new = symbol_of.get(merged)
        if new is None:
            new = symbol_of[merged] = len(token_bytes)
            token_bytes.append(merged)

        # Rewrite only the words that contain the pair (a word listed there may have lost the pair to an
        # earlier merge: then nothing happens); collect the net change of every pair count.
        delta: dict[tuple[int, int], int] = defaultdict(int)
        for wid in where.pop((a, b)):
            _merge_in_word(words[wid], wid, freqs[wid], a, b, new, delta, where)
        del pair_counts[(a, b)]
        delta.pop((a, b), None)
        for pair, change in delta.items():
            if change:
                count = pair_counts[pair] + change
                if count:
                    pair_counts[pair] = count
                    heapq.heappush(heap, (-count, order(token_bytes[pair[0]]), order(token_bytes[pair[1]]), *pair))
                else:
                    del pair_counts[pair]
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return build_vocab(merges, specials), merges


def _reversed_bytes(b: bytes) -> tuple[int, ...]:
    """A key that sorts byte strings in reverse lexicographic order: each byte ``255 - x``, then 256 (so a
    prefix sorts *after* the longer string, the reverse of ``b"a" < b"ab"``)."""
    return tuple(255 - x for x in b) + (256,)


def training_work(text: str, num_merges: int) -> dict[str, int | float]:
    """Measure what incremental training saves (chapter 03): counting work, and time against a recount.

    Runs the incremental algorithm of :func:`train_bpe` (the pair counts kept across merges, ``where[pair]``
    the words that hold a pair, :func:`_merge_in_word` for the changes) and, for the same merges, a trainer
    that recounts every pair of every distinct piece after each merge. Both must learn :func:`train_bpe`'s
    merges (checked here). Returns numbers only:

    * ``merges``, ``pieces``: merges learned, distinct pieces with at least two bytes;
    * ``recount_pair_visits``: pairs the recounting trainer visits (every pair of every piece, each merge);
    * ``pair_updates``: pair counts the incremental trainer changes (each changed pair once per merge);
    * ``pieces_rewritten``: pieces it rewrites, summed over the merges (only those that hold the pair);
    * ``recount_seconds``, ``incremental_seconds``: wall time of the two trainers in this run (use the
      ratio; the absolute times depend on the machine).
    """
    import time

    start = time.perf_counter()
    _, expected = train_bpe(text, num_merges)
    incremental_seconds = time.perf_counter() - start

    # Counting pass: the incremental bookkeeping, with the best pair found by a scan over the counts (the
    # heap of train_bpe changes how fast the best pair is found, not which pair or how many counts change).
    token_bytes = [bytes([b]) for b in range(256)]
    symbol_of = {t: i for i, t in enumerate(token_bytes)}
    pieces = [(list(p.encode("utf-8")), f) for p, f in count_pieces(text).items() if len(p.encode("utf-8")) > 1]
    words = [w for w, _ in pieces]
    freqs = [f for _, f in pieces]
    pair_counts: dict[tuple[int, int], int] = defaultdict(int)
    where: dict[tuple[int, int], set[int]] = defaultdict(set)
    for wid, symbols in enumerate(words):
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += freqs[wid]
            where[pair].add(wid)
    pairs_now = sum(len(w) - 1 for w in words)  # what one full recount visits
    recount_visits = updates = rewritten = 0
    learned: list[tuple[bytes, bytes]] = []
    while len(learned) < num_merges and pair_counts:
        recount_visits += pairs_now
        a, b = min(pair_counts, key=lambda p: (-pair_counts[p], token_bytes[p[0]], token_bytes[p[1]]))
        learned.append((token_bytes[a], token_bytes[b]))
        merged = token_bytes[a] + token_bytes[b]
        new = symbol_of.setdefault(merged, len(token_bytes))
        if new == len(token_bytes):
            token_bytes.append(merged)
        delta: dict[tuple[int, int], int] = defaultdict(int)
        for wid in where.pop((a, b)):
            before = len(words[wid])
            _merge_in_word(words[wid], wid, freqs[wid], a, b, new, delta, where)
            rewritten += before != len(words[wid])
            pairs_now -= before - len(words[wid])
        del pair_counts[(a, b)]
        delta.pop((a, b), None)
        updates += 1
        for pair, change in delta.items():
            if change:
                updates += 1
                count = pair_counts[pair] + change
                if count:
                    pair_counts[pair] = count
                else:
                    del pair_counts[pair]
    if learned != expected:
        raise AssertionError("the counting pass learned other merges than train_bpe")

    # The recounting trainer, timed: every pair of every piece counted again before each merge.
    start = time.perf_counter()
    state = {tuple(bytes([x]) for x in p.encode("utf-8")): f for p, f in count_pieces(text).items()}
    recounted: list[tuple[bytes, bytes]] = []
    while len(recounted) < num_merges:
        counts: Counter[tuple[bytes, bytes]] = Counter()
        for word, freq in state.items():
            for pair in zip(word, word[1:]):
                counts[pair] += freq
        if not counts:
            break
        left, right = min(counts, key=lambda p: (-counts[p], p))
        recounted.append((left, right))
        rebuilt: dict[tuple[bytes, ...], int] = {}
        for word, freq in state.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == left and word[i + 1] == right:
                    out.append(left + right)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            rebuilt[tuple(out)] = rebuilt.get(tuple(out), 0) + freq
        state = rebuilt
    recount_seconds = time.perf_counter() - start
    if recounted != expected:
        raise AssertionError("the recounting trainer learned other merges than train_bpe")
    return {"merges": len(expected), "pieces": len(words), "recount_pair_visits": recount_visits,
            "pair_updates": updates, "pieces_rewritten": rewritten,
            "recount_seconds": recount_seconds, "incremental_seconds": incremental_seconds}


def build_vocab(merges: Iterable[tuple[bytes, bytes]], special_tokens: Sequence[str] = ()) -> dict[int, bytes]:
    """Assemble the vocabulary: special tokens (ids ``0..k-1``), the 256 bytes, then each merge in order.

    A merge whose bytes are already an ordinary token (``a+bc`` after ``ab+c``) does not get a second id.

    Special tokens and ordinary tokens are separate namespaces, as in tiktoken: a merge whose bytes spell a
    special token (``b"<bo" + b"s>"``) is an *ordinary* token with its own id after the bytes, distinct
    from the special's id. Typed ``"<bos>"`` can then encode to that ordinary id, never to the special one.
    (:func:`train_bpe` never learns such a merge, because it cuts special text out of the corpus; a merge
    list trained before a special was added can hold one.)
    """
    specials = _check_special_tokens(special_tokens)
    tokens = [s.encode("utf-8") for s in specials] + [bytes([b]) for b in range(256)]
    seen = set(tokens[len(specials):])  # only ordinary tokens: a special's bytes may also be a merge's token
    for left, right in merges:
        token = left + right
        if token not in seen:
            seen.add(token)
            tokens.append(token)
    return dict(enumerate(tokens))


class BPETokenizer:
    """Encode text to ids and decode ids to text by replaying learned merges.

    ``BPETokenizer(vocab, merges, special_tokens=(), bos="<bos>", eos="<eos>")``

    * ``vocab``: id -> token bytes, as returned by :func:`train_bpe`.
    * ``merges``: the ordered merge list; a merge's position is its **rank** (0 = learned first = applied
      first when encoding).
    * ``special_tokens``: the special token strings; each must be in ``vocab`` (as its UTF-8 bytes). A
      special's id is the lowest id that spells it; a second id with the same bytes is an ordinary token
      (a merge that happens to spell the special, see :func:`build_vocab`).
    * ``bos`` / ``eos``: which special tokens ``encode(..., add_bos=True / add_eos=True)`` puts at the
      start / end. Asking for one that is not among ``special_tokens`` is an error.

    Encoding never turns text into a special id: ``"<bos>"`` typed by a user is five ordinary bytes
    (merged as usual, possibly into the ordinary token that spells it). Special ids only appear when
    ``add_bos`` / ``add_eos`` put them there. ``self._cache`` (a :class:`_PieceCache`) remembers each
    piece's ids; ``len(tokenizer)`` is the number of ids in the vocabulary.
    """

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        merges: Sequence[tuple[bytes, bytes]],
        special_tokens: Sequence[str] = (),
        *,
        bos: str = "<bos>",
        eos: str = "<eos>",
    ):
        """Build the lookup tables: bytes -> id, id -> bytes, merge pair -> rank, and the special ids."""
        self.special_tokens = _check_special_tokens(special_tokens)
        self.vocab = dict(vocab)
        self.merges = [(bytes(left), bytes(right)) for left, right in merges]
        #: (left, right) -> rank: lower ranks are applied first
        self.merge_ranks = {}
        for rank, pair in enumerate(self.merges):
            self.merge_ranks.setdefault(pair, rank)
        special_bytes = {s.encode("utf-8"): s for s in self.special_tokens}
        #: special token string -> id
        self.special_ids: dict[str, int] = {}
        #: ordinary token bytes -> id (the first id wins if a token is listed twice)
        self.token_to_id: dict[bytes, int] = {}
        for i in sorted(self.vocab):
            token = self.vocab[i]
            if token in special_bytes and special_bytes[token] not in self.special_ids:
                self.special_ids[special_bytes[token]] = i
            else:
                self.token_to_id.setdefault(token, i)
        missing = [s for s in self.special_tokens if s not in self.special_ids]
        if missing:
            raise ValueError(f"special token(s) {missing} are not in the vocabulary")
        self.bos, self.eos = bos, eos
        # id -> bytes used by decode; special ids decode to nothing.
        self._decode_table = dict(self.vocab)
        for i in self.special_ids.values():
            self._decode_table[i] = b""
        # piece -> ids. A dict subclass whose __missing__ runs BPE, so that a cache hit is one C-level lookup.
        self._cache = _PieceCache(self._encode_piece)

    def _encode_piece(self, piece: str) -> list[int]:
        """Encode one pre-token piece: apply the lowest-ranked present merge until none applies.

        Start from the piece's single bytes. At every step look at all adjacent pairs, pick the one with
        the lowest merge rank (the leftmost one if the same pair occurs twice), and fuse it. Stop when no
        adjacent pair is a learned merge. Then look up the id of each remaining part.
        """
        data = piece.encode("utf-8")
        parts = [data[i : i + 1] for i in range(len(data))]
        rank_of = self.merge_ranks.get
        no_rank = len(self.merges)  # larger than every real rank
        # ranks[i] is the rank of the pair (parts[i], parts[i + 1]).
        ranks = [rank_of(pair, no_rank) for pair in zip(parts, parts[1:])]
        while ranks:
            best = min(ranks)
            if best == no_rank:
                break
            i = ranks.index(best)  # index() finds the leftmost
            merged = parts[i] + parts[i + 1]
            parts[i : i + 2] = (merged,)
            del ranks[i]
            # Only the two pairs next to the merged part changed.
            if i < len(ranks):
                ranks[i] = rank_of((merged, parts[i + 1]), no_rank)
            if i > 0:
                ranks[i - 1] = rank_of((parts[i - 1], merged), no_rank)
        try:
            return [self.token_to_id[p] for p in parts]
        except KeyError:
            bad = next(p for p in parts if p not in self.token_to_id)
            raise ValueError(f"token {bad!r} (in piece {piece!r}) has no id in the vocabulary") from None

    def _special_id(self, name: str, role: str) -> int:
        """The id of special token ``name``, or an error saying how to declare it for ``role``."""
        try:
            return self.special_ids[name]
        except KeyError:
            raise ValueError(
                f"add_{role}=True needs the special token {name!r}, which is not among special_tokens "
                f"{self.special_tokens}; pass it in special_tokens or choose another with {role}=..."
            ) from None

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Encode ``text`` to token ids, optionally wrapped in the ``bos`` / ``eos`` special ids.

        The text is pre-tokenized into pieces; each distinct piece is encoded once with
        :meth:`_encode_piece` and remembered, so on real text almost every piece is a cache hit. Literal
        special-token text in ``text`` is encoded as ordinary bytes.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, got {type(text).__name__}")
        ids = list(chain.from_iterable(map(self._cache.__getitem__, _PRETOKENIZE.findall(text))))
        if add_bos:
            ids.insert(0, self._special_id(self.bos, "bos"))
        if add_eos:
            ids.append(self._special_id(self.eos, "eos"))
        return ids

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Concatenate the bytes of ``ids``; special tokens contribute nothing.

        An id that is not an int, or not in the vocabulary, is an error naming the id and its position.
        """
        ids = list(ids)
        try:
            return b"".join(map(self._decode_table.__getitem__, ids))
        except (KeyError, TypeError):
            pass
        for position, i in enumerate(ids):
            if isinstance(i, bool) or not hasattr(i, "__index__"):
                raise TypeError(f"token id {i!r} at position {position} is not an int")
            if i not in self._decode_table:
                raise ValueError(f"token id {i} at position {position} is not in the vocabulary")
        raise AssertionError("unreachable")  # pragma: no cover

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """Decode ids to text, skipping special tokens.

        The bytes are decoded as UTF-8; a sequence of ids that cuts a character in half (possible when
        ids are sliced) is decoded with ``errors`` (``"replace"`` gives U+FFFD; ``"strict"`` raises).
        """
        return self.decode_bytes(ids).decode("utf-8", errors=errors)

    def __len__(self) -> int:
        """The number of ids in the vocabulary."""
        return len(self.vocab)


class _PieceCache(dict):
    """piece -> ids; a missing piece is encoded by ``compute`` and stored (see :meth:`BPETokenizer.encode`)."""

    def __init__(self, compute):
        """Remember the function that encodes a piece that is not cached yet."""
        super().__init__()
        self.compute = compute

    def __missing__(self, piece: str) -> list[int]:
        """Encode ``piece``, remember the result, return it."""
        ids = self[piece] = self.compute(piece)
        return ids


#: Texts with fewer pieces than this, or fewer new pieces, are encoded one piece at a time.
_BATCH_MIN_PIECES = 256


class FastBPETokenizer(BPETokenizer):
    """A :class:`BPETokenizer` that encodes the new pieces of a long text all at once, with NumPy.

    Same constructor, same ids: on a text with many pieces not seen before (a fresh tokenizer on a corpus),
    :meth:`encode` first merges all of them together (:class:`_BatchMerger`) and fills the cache, then
    reads every piece from the cache. On 5 MB of Wikipedia that is about three times faster than encoding
    each new piece on its own; short texts take the ordinary path.
    """

    def __init__(self, *args, **kwargs):
        """Build the tokenizer (see :class:`BPETokenizer`); the NumPy merger is built on first use."""
        super().__init__(*args, **kwargs)
        # None = not built yet, False = not applicable to this vocabulary (see _BatchMerger.build).
        self._batch: _BatchMerger | None | bool = None

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Encode like :meth:`BPETokenizer.encode`, merging a long text's new pieces in one batch first."""
        if not isinstance(text, str) or len(text) < _BATCH_MIN_PIECES:
            return super().encode(text, add_bos, add_eos)
        pieces = _PRETOKENIZE.findall(text)
        self._encode_missing(pieces)
        ids = list(chain.from_iterable(map(self._cache.__getitem__, pieces)))
        if add_bos:
            ids.insert(0, self._special_id(self.bos, "bos"))
        if add_eos:
            ids.append(self._special_id(self.eos, "eos"))
        return ids

    def _encode_missing(self, pieces: list[str]) -> None:
        """Put every piece of ``pieces`` that is not cached yet into the cache, many at once.

        Used by :meth:`encode` on long texts. When there are enough new pieces and the merge list allows it
        (see :class:`_BatchMerger`), they are merged together with NumPy; the result is identical to
        :meth:`_encode_piece` on each piece, which the tests check.
        """
        cache = self._cache
        missing = [p for p in set(pieces) if p not in cache]
        if len(missing) < _BATCH_MIN_PIECES:
            return
        if self._batch is None:
            self._batch = _BatchMerger.build(self.merge_ranks, self.token_to_id)
        if self._batch is not False:
            cache.update(self._batch.encode(missing))


class _BatchMerger:
    """BPE on many pieces at once, with NumPy: the fast path of :meth:`BPETokenizer.encode` for new pieces.

    All pieces sit in one array of token ids, each followed by a separator id that no merge contains, so
    no pair ever spans two pieces. ``rank[i]`` is the merge rank of the pair starting at ``i``. One round
    finds each piece's lowest rank and merges **every** non-overlapping occurrence of that pair (leftmost
    first); only the ranks next to a merge are looked up again. A piece with nothing left to merge leaves
    the arrays. A round is a fixed number of array operations, so the Python cost is per round (the
    longest piece needs the most rounds), not per piece or per merge.

    Merging all occurrences of the lowest pair in one round gives the result of merging them one at a time
    (:meth:`BPETokenizer._encode_piece`) only if a merge never creates a pair of *lower* rank than its own.
    That holds for most learned merge lists, where a token can only take part in a merge after it exists,
    but not for a hand-made list such as ``[(b"ab", b"c"), (b"a", b"b")]``, nor when two merges make the
    same bytes (``a+bc`` and later ``ab+c``) and a merge using those bytes sits between them.
    :meth:`build` checks the merge list; when the condition fails, every round merges only the leftmost
    lowest pair of each piece, which is exactly one step of the one-at-a-time algorithm. :meth:`build`
    returns ``False`` when ids do not fit the arithmetic; the tokenizer then encodes piece by piece.

    Pair ranks are found in an open-addressing hash table (keys ``left * base + right``), probed for all
    pairs at once.
    """

    _EMPTY = -1
    _NO_RANK = np.iinfo(np.int32).max
    _MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing

    def __init__(self, byte_ids, table_keys, table_ranks, new_ids, base: int, shift: int, all_at_once: bool):
        """Store the lookup arrays; use :meth:`build`."""
        self.all_at_once = all_at_once  # merge every occurrence of a piece's lowest pair in one round
        self.byte_ids = byte_ids  # byte value -> id of that single-byte token (int32)
        self.table_keys = table_keys  # hash table of pair keys, _EMPTY where free (int64)
        self.table_ranks = table_ranks  # rank stored with each key, _NO_RANK where free (int32)
        self.new_ids = new_ids  # rank -> id of the token that merge makes (int32)
        self.base = base  # pair key = left * base + right; base - 1 is the separator id
        self.shift = np.uint64(shift)
        self.mask = len(table_keys) - 1

    @classmethod
    def build(cls, merge_ranks: Mapping[tuple[bytes, bytes], int], token_to_id: Mapping[bytes, int]):
        """The merger for these merges and ids, or ``False`` if some id or rank does not fit its arrays."""
        if any(bytes([b]) not in token_to_id for b in range(256)) or not merge_ranks:
            return False
        made_by: dict[bytes, int] = {}  # token bytes -> highest rank of a merge that makes it
        for (left, right), rank in merge_ranks.items():
            made_by[left + right] = max(rank, made_by.get(left + right, -1))
        top = max(token_to_id.values())
        if min(token_to_id.values()) < 0 or top >= 2**31 - 2 or max(merge_ranks.values()) >= cls._NO_RANK:
            return False
        base = top + 2  # ids are < top + 1; top + 1 is the separator
        size = 1 << max(4, (8 * len(merge_ranks)).bit_length())  # load factor <= 1/8
        shift = 64 - (size.bit_length() - 1)
        table_keys = np.full(size, cls._EMPTY, dtype=np.int64)
        table_ranks = np.full(size, cls._NO_RANK, dtype=np.int32)
        new_ids = np.zeros(max(merge_ranks.values()) + 1, dtype=np.int32)
        all_at_once = True
        for (left, right), rank in merge_ranks.items():
            if made_by.get(left, -1) > rank or made_by.get(right, -1) > rank:
                all_at_once = False  # a merge can create a pair of lower rank: see the class docstring
            if left not in token_to_id or right not in token_to_id or left + right not in token_to_id:
                return False  # _encode_piece names the token that has no id
            key = token_to_id[left] * base + token_to_id[right]
            slot = ((key * 0x9E3779B97F4A7C15) % 2**64) >> shift
            while table_keys[slot] != cls._EMPTY:
                slot = (slot + 1) & (size - 1)
            table_keys[slot], table_ranks[slot] = key, rank
            new_ids[rank] = token_to_id[left + right]
        byte_ids = np.array([token_to_id[bytes([b])] for b in range(256)], dtype=np.int32)
        return cls(byte_ids, table_keys, table_ranks, new_ids, base, shift, all_at_once)

    def ranks_of(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """The merge rank of each pair ``(left[i], right[i])``, ``_NO_RANK`` for pairs that are not merges."""
        keys = left.astype(np.int64) * self.base + right
        slot = ((keys.view(np.uint64) * self._MULTIPLIER) >> self.shift).view(np.intp)
        found = self.table_keys[slot]
        ranks = self.table_ranks[slot]
        missed = found != keys
        ranks[missed] = self._NO_RANK
        todo = np.flatnonzero(missed & (found != self._EMPTY))  # collided: probe the next slots
        while len(todo):
            slot[todo] = (slot[todo] + 1) & self.mask
            found = self.table_keys[slot[todo]]
            match = found == keys[todo]
            ranks[todo[match]] = self.table_ranks[slot[todo[match]]]
            todo = todo[~match & (found != self._EMPTY)]
        return ranks

    def encode(self, pieces: Sequence[str]) -> dict[str, list[int]]:
        """piece -> ids for each of ``pieces``: the same lists :meth:`BPETokenizer._encode_piece` returns."""
        separator = self.base - 1
        blobs = [p.encode("utf-8") for p in pieces]
        sizes = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs)) + 1  # + the separator
        ids = self.byte_ids[np.frombuffer(b"\0".join(blobs) + b"\0", dtype=np.uint8)]
        ids[np.cumsum(sizes) - 1] = separator
        rank = np.empty(len(ids), dtype=np.int32)
        rank[:-1] = self.ranks_of(ids[:-1], ids[1:])
        rank[-1] = self._NO_RANK
        piece = np.arange(len(blobs))  # which piece each segment is
        done_ids, done_pieces = [], []
        while len(ids):
            starts = np.cumsum(sizes) - sizes
            lowest = np.minimum.reduceat(rank, starts)
            finished = lowest == self._NO_RANK
            if finished.any():  # move finished pieces out
                positions = np.repeat(finished, sizes)
                done_ids.append(ids[positions])
                done_pieces.append(piece[finished])
                ids, rank = ids[~positions], rank[~positions]
                piece, lowest, sizes = piece[~finished], lowest[~finished], sizes[~finished]
                if not len(ids):
                    break
                starts = np.cumsum(sizes) - sizes
            merge_at = np.flatnonzero(rank == np.repeat(lowest, sizes))
            owner = np.searchsorted(starts, merge_at, side="right") - 1  # the piece of each merge
            if not self.all_at_once:  # one merge per piece and round: its leftmost lowest pair
                first = np.r_[True, owner[1:] != owner[:-1]]
                merge_at, owner = merge_at[first], owner[first]
            else:
                adjacent = np.diff(merge_at) == 1
                if adjacent.any():  # runs such as (x, x) in "xxxx": merge the 1st, 3rd, ... pair of each run
                    k = np.arange(len(merge_at))
                    run_start = np.maximum.accumulate(np.where(np.r_[True, ~adjacent], k, 0))
                    every_other = (k - run_start) % 2 == 0
                    merge_at, owner = merge_at[every_other], owner[every_other]
            ids[merge_at] = self.new_ids[rank[merge_at]]
            keep = np.ones(len(ids), dtype=bool)
            keep[merge_at + 1] = False
            ids, rank = ids[keep], rank[keep]
            sizes -= np.bincount(owner, minlength=len(sizes))
            # Look up again the two pairs that touch each merged token (the one before it, the one after it).
            at = merge_at - np.arange(len(merge_at))
            at = np.concatenate([at[at > 0] - 1, at])
            rank[at] = self.ranks_of(ids[at], ids[at + 1])
        flat = np.concatenate(done_ids)
        ends = np.flatnonzero(flat == separator)
        starts = np.r_[0, ends[:-1] + 1]
        flat = flat.tolist()
        order = map(pieces.__getitem__, np.concatenate(done_pieces).tolist())
        return dict(zip(order, map(flat.__getitem__, map(slice, starts.tolist(), ends.tolist()))))


class ByteLevelCodec(BPETokenizer):
    """The closed byte-level codec: a :class:`BPETokenizer` whose guarantees are checked at construction.

    Construction raises ``ValueError`` naming the problem unless

    * every id is an ``int`` and every token is ``bytes``;
    * every special token is in the vocabulary exactly once;
    * all 256 single bytes are in the vocabulary, each exactly once, so every string can be encoded
      (there is no ``<unk>``: an unseen character falls back to its UTF-8 bytes);
    * no token bytes appear under two ids, so encoding is unambiguous. The one exception is a special's
      text that a merge also makes: that is an ordinary token with its own id (specials and ordinary tokens
      are separate namespaces, see :func:`build_vocab`), so a special's bytes may have two ids then;
    * every merge makes a token that is in the vocabulary.

    Then for every string ``x`` (without lone surrogates, which UTF-8 cannot encode),
    ``decode(encode(x)) == x``. User text never produces a special id; :meth:`encode_trusted` is the one
    method that turns literal special-token text into special ids, for text you wrote yourself (templates).
    """

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        merges: Sequence[tuple[bytes, bytes]],
        special_tokens: Sequence[str] = (),
        *,
        bos: str = "<bos>",
        eos: str = "<eos>",
    ):
        """Validate the vocabulary (see the class docstring), then build the tokenizer."""
        specials = _check_special_tokens(special_tokens)
        owners: dict[bytes, list[int]] = defaultdict(list)
        for i, token in vocab.items():
            if type(i) is not int:
                raise ValueError(f"vocabulary id {i!r} is a {type(i).__name__}, expected int")
            if type(token) is not bytes:
                raise ValueError(f"vocabulary entry {i} is {token!r}, a {type(token).__name__}, expected bytes")
            owners[token].append(i)
        missing_specials = [s for s in specials if s.encode("utf-8") not in owners]
        if missing_specials:
            raise ValueError(f"special token(s) missing from the vocabulary: {missing_specials}")
        missing_bytes = [b for b in range(256) if bytes([b]) not in owners]
        if missing_bytes:
            shown = ", ".join(f"0x{b:02x}" for b in missing_bytes[:16])
            more = f" and {len(missing_bytes) - 16} more" if len(missing_bytes) > 16 else ""
            raise ValueError(f"{len(missing_bytes)} single byte(s) missing from the vocabulary: {shown}{more}")
        special_bytes = {s.encode("utf-8") for s in specials}
        # A special's bytes may have one more id, as the ordinary token a merge makes (see build_vocab).
        made = {left + right for left, right in merges if type(left) is bytes and type(right) is bytes}
        duplicated = {token: ids for token, ids in owners.items()
                      if len(ids) > 1 and not (len(ids) == 2 and token in special_bytes and token in made)}
        if duplicated:
            token, ids = min(duplicated.items(), key=lambda kv: min(kv[1]))
            what = f"special token {token.decode('utf-8')!r}" if token in special_bytes else f"token {token!r}"
            raise ValueError(f"{what} has {len(ids)} ids {sorted(ids)}; every token needs exactly one id"
                             f" ({len(duplicated)} duplicated token(s) in all)")
        for left, right in merges:
            if left + right not in owners:
                raise ValueError(f"merge {(left, right)!r} makes {left + right!r}, which is not in the vocabulary")
        super().__init__(vocab, merges, specials, bos=bos, eos=eos)

    def encode_trusted(self, text: str) -> list[int]:
        """Encode text *you* wrote, where literal special-token text means the special token.

        Only for trusted text such as a chat template: ``"<bos>hi"`` becomes ``[id of <bos>, ...]``. Never
        pass user input here; :meth:`encode` is the method for untrusted text.
        """
        if not self.special_tokens:
            return self.encode(text)
        alternatives = "|".join(re.escape(s) for s in sorted(self.special_tokens, key=len, reverse=True))
        ids: list[int] = []
        for k, chunk in enumerate(re.split(f"({alternatives})", text)):
            if k % 2:
                ids.append(self.special_ids[chunk])
            elif chunk:
                ids.extend(self.encode(chunk))
        return ids

    def token_repr(self, token_id: int) -> str:
        """A printable form of one token: specials as themselves, bytes through :func:`bytes_to_unicode`."""
        token = self.vocab[token_id]
        if token_id in self.special_ids.values():
            return token.decode("utf-8")
        return token_to_printable(token)


def token_to_printable(token: bytes) -> str:
    """Show token bytes the way GPT-2 vocabularies do, one printable character per byte (``b" the"`` -> ``"Ġthe"``).

    Decoding as Latin-1 turns each byte into the character with the same number; ``str.translate`` then
    swaps each for its printable stand-in.
    """
    return bytes(token).decode("latin-1").translate(bytes_to_unicode())
