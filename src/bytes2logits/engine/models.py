"""Tokenizer models: the stage that turns one pre-tokenized piece into token ids (stage 4 of 6).

Four models, named as in Hugging Face ``tokenizers`` and llama.cpp:

:class:`BPE`
    byte-level or character BPE with *ranked merges*: start from single characters and repeatedly merge
    the adjacent pair whose merge rule comes first in the merge list, leftmost first on ties (GPT-2, Llama 3,
    Qwen, SmolLM2).
:class:`SentencePieceBPE`
    SentencePiece's BPE with *scores* (GGUF ``tokenizer.ggml.model = "llama"``): merge the adjacent pair
    whose concatenation is the vocabulary entry with the highest score; byte tokens ``<0xXX>`` for what is
    left over.
:class:`WordPiece`
    BERT: greedy longest match from the left, continuation pieces marked ``"##"``; a word with no complete
    cover (or longer than ``max_input_chars_per_word``) becomes the unknown token.
:class:`Unigram`
    SentencePiece's Unigram: every piece has a log-probability, and the segmentation is the path through
    the lattice of all vocabulary matches with the highest total (Viterbi). Ties go to the path whose last
    piece starts earliest.

Each model has :meth:`Model.tokenize_spans`, which returns ``(id, start, end)`` per token with character
positions inside the piece (``encode(..., return_offsets=True)`` needs them), and :meth:`Model.tokenize`,
which returns the ids only.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from ..errors import TokenizerError

__all__ = ["Model", "BPE", "SentencePieceBPE", "WordPiece", "Unigram", "bpe_merge", "spm_merge", "viterbi"]

Token = tuple[int, int, int]  # (id, start, end) inside the piece


class Model:
    """The interface every model implements."""

    def tokenize_spans(self, piece: str) -> list[Token]:
        """``(id, start, end)`` for each token of ``piece`` (character positions inside it)."""
        raise NotImplementedError

    def tokenize(self, piece: str) -> list[int]:
        """The ids of ``piece``."""
        return [i for i, _, _ in self.tokenize_spans(piece)]

    def __repr__(self) -> str:
        """The model's name and its settings (tables by size)."""
        parts = []
        for k, v in vars(self).items():
            if k.startswith("_"):
                continue
            parts.append(f"{k}=<{len(v)} entries>" if isinstance(v, (dict, list, tuple)) else f"{k}={v!r}")
        return f"{type(self).__name__}({', '.join(parts)})"


# ---------------------------------------------------------------------- BPE with ranked merges


def bpe_merge(symbols: list[str], ranks: Mapping[str, int], sep: str = " ") -> list[str]:
    """Apply BPE merge rules to a list of symbols; return the merged symbols.

    Rule: among all adjacent pairs that have a merge rule, merge the one with the lowest rank; if that
    rank occurs more than once, the leftmost. Repeat until no adjacent pair has a rule. ``ranks`` is keyed
    by ``left + sep + right``.

    Short words use the plain loop (rescan all pairs after each merge: O(n²) but tiny n). Long words
    (a line of 500 dashes) use a heap of candidate pairs and a linked list, O(n log n), which gives the
    same result: a heap entry whose symbols have changed since it was pushed is skipped.

    >>> bpe_merge(list("aaab"), {"a a": 0, "aa b": 1})   # "a a" merges at the left: aa|a|b, then no rule
    ['aa', 'a', 'b']
    """
    if len(symbols) < 2:
        return symbols
    if len(symbols) <= 48:
        syms = list(symbols)
        while len(syms) > 1:
            best_rank = None
            best = -1
            for k in range(len(syms) - 1):
                r = ranks.get(syms[k] + sep + syms[k + 1])
                if r is not None and (best_rank is None or r < best_rank):
                    best_rank, best = r, k
            if best < 0:
                break
            syms[best:best + 2] = [syms[best] + syms[best + 1]]
        return syms

    return _merge_by_priority(list(symbols), lambda left, right: ranks.get(left + sep + right))


def spm_merge(text: str, token_to_id: Mapping[str, int], scores) -> list[str]:
    """SentencePiece BPE: merge the adjacent pair whose concatenation scores highest, repeatedly.

    Start from single characters. A pair is a candidate when the two symbols written together are a
    vocabulary entry; its priority is that entry's score (ties: leftmost first). Uses a heap of
    candidates and a linked list of symbols, so a long text costs O(n log n).

    >>> spm_merge("▁ab", {"▁a": 0, "ab": 1, "▁ab": 2}, [-1.0, -2.0, -0.5])
    ['▁ab']
    """
    if len(text) < 2:
        return [text] if text else []

    def priority(left: str, right: str) -> float | None:
        tid = token_to_id.get(left + right)
        return None if tid is None else -scores[tid]

    return _merge_by_priority(list(text), priority)


def _merge_by_priority(symbols: list[str], priority) -> list[str]:
    """Merge adjacent symbols, best pair first, until no pair can merge; the loop BPE and SentencePiece share.

    ``priority(left, right)`` is None when the pair cannot merge, else a number: lower merges first,
    leftmost first on ties. A heap holds the candidate pairs and a linked list the symbols, so a long
    text costs O(n log n); a heap entry whose symbols changed since it was pushed is skipped.
    """
    n = len(symbols)
    nxt = list(range(1, n + 1))
    nxt[-1] = -1
    prv = list(range(-1, n - 1))
    heap: list[tuple[float, int, int, str]] = []

    def push(left: int, right: int) -> None:
        if left < 0 or right < 0:
            return
        p = priority(symbols[left], symbols[right])
        if p is not None:
            heapq.heappush(heap, (p, left, right, symbols[left] + symbols[right]))

    for k in range(n - 1):
        push(k, k + 1)
    while heap:
        _, left, right, joined = heapq.heappop(heap)
        if not symbols[left] or not symbols[right] or nxt[left] != right or symbols[left] + symbols[right] != joined:
            continue  # stale: one of the two symbols changed after this pair was pushed
        symbols[left] = joined
        symbols[right] = ""
        nxt[left] = nxt[right]
        if nxt[right] >= 0:
            prv[nxt[right]] = left
        push(prv[left], left)
        push(left, nxt[left])
    out = []
    k = 0
    while k >= 0:
        out.append(symbols[k])
        k = nxt[k]
    return out


def _byte_token_ids(token_to_id: Mapping[str, int]) -> list[int | None]:
    """The ids of ``<0x00>`` .. ``<0xFF>`` (None where missing)."""
    return [token_to_id.get(f"<0x{b:02X}>") for b in range(256)]


class BPE(Model):
    """BPE with ranked merges, as ``tokenizer.json``'s ``"BPE"`` model and GGUF's ``"gpt2"`` family.

    ``ranks`` maps ``left + sep + right`` to the merge's rank. A character that is not in the vocabulary
    becomes byte tokens (``byte_fallback``), else the unknown token (``unk_id``; consecutive ones fused with
    ``fuse_unk``), else it is dropped — what llama.cpp and ``tokenizers`` both do with a byte-level
    vocabulary that lacks a byte. ``ignore_merges``: a piece that is already a vocabulary entry is one
    token without running the merges (Llama 3).
    """

    def __init__(self, token_to_id: Mapping[str, int], ranks: Mapping[str, int], *, sep: str = " ",
                 unk_id: int | None = None, fuse_unk: bool = False, byte_fallback: bool = False,
                 ignore_merges: bool = False):
        """See the class docstring."""
        self.token_to_id = token_to_id
        self.ranks = ranks
        self.sep = sep
        self.unk_id = unk_id
        self.fuse_unk = fuse_unk
        self.byte_fallback = byte_fallback
        self.ignore_merges = ignore_merges
        self._bytes = _byte_token_ids(token_to_id) if byte_fallback else None

    def tokenize(self, piece: str) -> list[int]:
        """The ids of one piece (fast path: no positions)."""
        t2i = self.token_to_id
        if self.ignore_merges and piece in t2i:
            return [t2i[piece]]
        symbols = bpe_merge(list(piece), self.ranks, self.sep)
        ids = [t2i.get(s) for s in symbols]
        if None not in ids:
            return ids
        return [i for i, _, _ in self._finish(symbols)]

    def tokenize_spans(self, piece: str) -> list[Token]:
        """Merge, then give each symbol its place in the piece."""
        t2i = self.token_to_id
        if self.ignore_merges and piece in t2i:
            return [(t2i[piece], 0, len(piece))]
        return self._finish(bpe_merge(list(piece), self.ranks, self.sep))

    def _finish(self, symbols: list[str]) -> list[Token]:
        """Symbols -> tokens; a symbol outside the vocabulary falls back character by character."""
        t2i = self.token_to_id
        out: list[Token] = []
        pos = 0
        for s in symbols:
            i = t2i.get(s)
            if i is not None:
                out.append((i, pos, pos + len(s)))
            else:
                for k, ch in enumerate(s):
                    self._unknown_char(ch, pos + k, out)
            pos += len(s)
        return out

    def _unknown_char(self, ch: str, pos: int, out: list[Token]) -> None:
        i = self.token_to_id.get(ch)
        if i is not None:
            out.append((i, pos, pos + 1))
            return
        if self._bytes is not None:
            ids = [self._bytes[b] for b in ch.encode("utf-8")]
            if None not in ids:
                out.extend((b, pos, pos + 1) for b in ids)
                return
        if self.unk_id is None:
            return  # no token for it: dropped
        if self.fuse_unk and out and out[-1][0] == self.unk_id and out[-1][2] == pos:
            out[-1] = (self.unk_id, out[-1][1], pos + 1)
        else:
            out.append((self.unk_id, pos, pos + 1))


class SentencePieceBPE(Model):
    """SentencePiece BPE with scores (GGUF ``"llama"``); byte tokens for anything the merges leave out."""

    def __init__(self, token_to_id: Mapping[str, int], scores: Sequence[float]):
        """``scores``: one per id; every ``<0x00>`` .. ``<0xFF>`` must be in the vocabulary."""
        self.token_to_id = token_to_id
        self.scores = scores
        self._bytes = _byte_token_ids(token_to_id)
        missing = [b for b, i in enumerate(self._bytes) if i is None]
        if missing:
            raise TokenizerError(f"tokenizer.ggml.tokens lacks {len(missing)} byte-fallback token(s), "
                                 f"e.g. <0x{missing[0]:02X}>")

    def tokenize_spans(self, piece: str) -> list[Token]:
        """Merge by score; a symbol outside the vocabulary becomes its UTF-8 bytes."""
        t2i = self.token_to_id
        out: list[Token] = []
        pos = 0
        for s in spm_merge(piece, t2i, self.scores):
            i = t2i.get(s)
            if i is not None:
                out.append((i, pos, pos + len(s)))
            else:  # byte fallback: <0xE2> <0x96> ...
                for k, ch in enumerate(s):
                    out.extend((self._bytes[b], pos + k, pos + k + 1) for b in ch.encode("utf-8"))
            pos += len(s)
        return out


class WordPiece(Model):
    """Greedy longest-match-first WordPiece (BERT).

    A word is covered from the left by the longest vocabulary entry; every piece after the first is looked
    up with ``continuing_subword_prefix`` in front (``"##ing"``). If some position has no entry, or the word
    has more than ``max_input_chars_per_word`` characters, the whole word is ``unk_id``. ``word_prefix`` is
    put in front of the first piece instead (GGUF BERT vocabularies store word starts as ``"▁word"``).
    """

    def __init__(self, token_to_id: Mapping[str, int], unk_id: int | None, *,
                 continuing_subword_prefix: str = "##", max_input_chars_per_word: int = 100,
                 word_prefix: str = ""):
        """See the class docstring."""
        self.token_to_id = token_to_id
        self.unk_id = unk_id
        self.continuing_subword_prefix = continuing_subword_prefix
        self.max_input_chars_per_word = max_input_chars_per_word
        self.word_prefix = word_prefix
        self._longest = max((len(t) for t in token_to_id), default=1)

    def tokenize_spans(self, piece: str) -> list[Token]:
        """Longest matches from the left; the unknown token for the whole word when that fails."""
        n = len(piece)
        if n == 0:
            return []
        if n <= self.max_input_chars_per_word:
            t2i = self.token_to_id
            out: list[Token] = []
            start = 0
            while start < n:
                prefix = self.word_prefix if start == 0 else self.continuing_subword_prefix
                room = self._longest - len(prefix)
                for end in range(min(n, start + room), start, -1):
                    i = t2i.get(prefix + piece[start:end])
                    if i is not None:
                        out.append((i, start, end))
                        start = end
                        break
                else:
                    break
            else:
                return out
        if self.unk_id is None:
            raise TokenizerError(f"word {piece!r} has no WordPiece cover and the model has no unknown token")
        return [(self.unk_id, 0, n)]


# ---------------------------------------------------------------------- Unigram


def viterbi(text: str, scores: Mapping[str, float], max_len: int, unk_score: float) -> list[tuple[int, int]]:
    """The best segmentation of ``text`` under a Unigram model, as ``(start, end)`` pieces.

    Every vocabulary entry that occurs in ``text`` is an edge of a lattice from its start to its end, worth
    its score (a log-probability). A position that no one-character entry covers also gets an "unknown"
    edge of one character, worth ``unk_score``, so a path always exists. The answer is the path from 0 to
    ``len(text)`` with the highest total.

    Ties: scanning start positions from left to right and keeping a new best only when it is strictly
    better means that, among paths with equal totals, the one whose last piece starts earliest wins (the
    rule of sentencepiece and ``tokenizers``). For example, with ``▁`` = ``a`` = -1 and ``aa`` = -2,
    ``▁aaa`` has three best paths of total -4, and the rule picks ``▁ a aa``:

    >>> t = "▁aaa"
    >>> [t[s:e] for s, e in viterbi(t, {"▁": -1.0, "a": -1.0, "aa": -2.0}, 2, -20.0)]
    ['▁', 'a', 'aa']
    """
    n = len(text)
    best = [float("-inf")] * (n + 1)
    back = [0] * (n + 1)
    best[0] = 0.0
    for s in range(n):
        base = best[s]
        if base == float("-inf"):
            continue
        single = False
        for e in range(s + 1, min(n, s + max_len) + 1):
            score = scores.get(text[s:e])
            if score is None:
                continue
            single = single or e == s + 1
            cand = base + score
            if cand > best[e]:
                best[e] = cand
                back[e] = s
        if not single:
            cand = base + unk_score
            if cand > best[s + 1]:
                best[s + 1] = cand
                back[s + 1] = s
    out = []
    e = n
    while e > 0:
        s = back[e]
        out.append((s, e))
        e = s
    out.reverse()
    return out


class Unigram(Model):
    """SentencePiece's Unigram model: the Viterbi segmentation (see :func:`viterbi`).

    ``pieces`` is the vocabulary as ``[piece, log_prob]`` in id order, ``unk_id`` the unknown token. The
    unknown edge scores ``min(log_prob) - 10`` (sentencepiece's penalty); runs of unknown characters are
    fused into one unknown token; with ``byte_fallback`` an unknown stretch becomes its UTF-8 byte tokens
    ``<0xXX>`` instead, when all of them exist.
    """

    UNK_PENALTY = 10.0

    def __init__(self, pieces: Sequence[tuple[str, float]], unk_id: int | None, byte_fallback: bool = False):
        """See the class docstring."""
        self.pieces = pieces
        self.unk_id = unk_id
        self.byte_fallback = byte_fallback
        self.token_to_id = {p: i for i, (p, _) in enumerate(pieces)}
        self.scores = {p: float(s) for p, s in pieces}
        if unk_id is not None:
            self.scores.pop(pieces[unk_id][0], None)  # the unknown piece is never matched as text
        self.min_score = min((float(s) for _, s in pieces), default=0.0)
        self.max_len = max((len(p) for p, _ in pieces), default=1)
        self._bytes = _byte_token_ids(self.token_to_id) if byte_fallback else None

    def exclude(self, texts) -> None:
        """Never match these pieces as text (special tokens: user text must not produce their ids, even
        though ``tokenizers`` would match a typed ``<s>`` as the piece ``<s>``)."""
        for t in texts:
            self.scores.pop(t, None)

    def tokenize_spans(self, piece: str) -> list[Token]:
        """Viterbi, then unknown stretches fused and (with ``byte_fallback``) written as bytes."""
        if not piece:
            return []
        t2i = self.token_to_id
        out: list[Token] = []
        unk_start = -1
        for s, e in viterbi(piece, self.scores, self.max_len, self.min_score - self.UNK_PENALTY):
            text = piece[s:e]
            if text in self.scores:
                if unk_start >= 0:
                    self._unknown(piece, unk_start, s, out)
                    unk_start = -1
                out.append((t2i[text], s, e))
            elif unk_start < 0:
                unk_start = s
        if unk_start >= 0:
            self._unknown(piece, unk_start, len(piece), out)
        return out

    def _unknown(self, piece: str, start: int, end: int, out: list[Token]) -> None:
        if self._bytes is not None:
            ids = [self._bytes[b] for b in piece[start:end].encode("utf-8")]
            if None not in ids:
                out.extend((b, start, end) for b in ids)
                return
        if self.unk_id is None:
            raise TokenizerError(f"{piece[start:end]!r} has no Unigram piece and the model has no unk_id")
        out.append((self.unk_id, start, end))
