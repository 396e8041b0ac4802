"""Characters, words or subwords: what each granularity costs (chapter 02, lab 02).

A tokenizer trades two things against each other. Small units (characters, bytes) need a tiny vocabulary
and never meet an unknown symbol, but make long sequences. Big units (words) make short sequences, but the
vocabulary must be capped, and every word outside it becomes ``<unk>``: that text is gone. Subwords sit in
between. This module measures the word end of that trade:

* :func:`split_words` cuts text into words, punctuation runs and whitespace runs, losing nothing;
* :class:`WordTokenizer` keeps the most frequent pieces of a training text and maps the rest to ``<unk>``;
* :func:`oov_rate` and :func:`chars_per_token` are the two numbers chapter 02 plots.
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = ["UNK", "split_words", "WordTokenizer", "oov_rate", "chars_per_token"]

UNK = "<unk>"


def split_words(text: str) -> list[str]:
    """Cut ``text`` into word, punctuation and whitespace pieces; ``"".join(pieces) == text`` always.

    >>> split_words("Hello, world!  2024")
    ['Hello', ',', ' ', 'world', '!', '  ', '2024']
    """
    if not isinstance(text, str):
        raise TypeError(f"split_words() takes a str, not {type(text).__name__}")
    # a word (letters, digits, _ in any script) | a run of punctuation or symbols | a run of whitespace
    return re.findall(r"\w+|[^\w\s]+|\s+", text)


class WordTokenizer:
    """One id per piece of :func:`split_words`, for a fixed vocabulary; id 0 is ``<unk>``.

    >>> tok = WordTokenizer.train("the cat saw the dog", max_vocab=4)
    >>> tok.vocab
    ['<unk>', ' ', 'the', 'cat']
    >>> tok.decode(tok.encode("the dog"))
    'the <unk>'
    """

    def __init__(self, vocab: list[str]):
        """Wrap a vocabulary: a list of distinct, non-empty strings whose first entry is ``"<unk>"``."""
        if not isinstance(vocab, list) or not vocab or vocab[0] != UNK:
            raise ValueError(f'vocab must be a list whose first entry is "{UNK}"')
        index: dict[str, int] = {}
        for i, piece in enumerate(vocab):
            if not isinstance(piece, str) or not piece:
                raise ValueError(f"vocab[{i}] must be a non-empty str, got {piece!r}")
            if piece in index:
                raise ValueError(f"vocab[{i}] = {piece!r} repeats vocab[{index[piece]}]")
            index[piece] = i
        self.vocab = list(vocab)
        self._index = index

    @classmethod
    def train(cls, text: str, max_vocab: int) -> "WordTokenizer":
        """Keep the ``max_vocab - 1`` most frequent pieces of ``text`` (plus ``<unk>``).

        Ties in frequency go to the alphabetically smaller piece, so the result depends only on the text,
        not on the order in which pieces were counted.
        """
        if isinstance(max_vocab, bool) or not isinstance(max_vocab, int) or max_vocab < 1:
            raise ValueError(f"max_vocab must be an int >= 1 (room for {UNK}), got {max_vocab!r}")
        counts = Counter(split_words(text))
        ranked = sorted(counts, key=lambda piece: (-counts[piece], piece))
        return cls([UNK] + [p for p in ranked if p != UNK][: max_vocab - 1])

    @property
    def vocab_size(self) -> int:
        """Number of ids, ``<unk>`` included."""
        return len(self.vocab)

    @property
    def unk_id(self) -> int:
        """The id unknown pieces get (always 0)."""
        return 0

    def encode(self, text: str) -> list[int]:
        """The id of every piece of ``text``; pieces outside the vocabulary become ``unk_id``."""
        get = self._index.get
        return [get(piece, 0) for piece in split_words(text)]

    def decode(self, ids) -> str:
        """Join the pieces of ``ids``; ``<unk>`` stays ``"<unk>"`` (what it stood for is lost)."""
        out = []
        for pos, i in enumerate(ids):
            if isinstance(i, bool) or not isinstance(i, int):
                raise TypeError(f"token id at position {pos} is {i!r} ({type(i).__name__}), not an int")
            if not 0 <= i < len(self.vocab):
                raise ValueError(f"token id {i} at position {pos} is outside the vocabulary 0..{len(self.vocab) - 1}")
            out.append(self.vocab[i])
        return "".join(out)


def oov_rate(tokenizer: WordTokenizer, text: str) -> float:
    """The fraction of the pieces of ``text`` that the tokenizer does not know (0.0 for empty text)."""
    ids = tokenizer.encode(text)
    if not ids:
        return 0.0
    return sum(1 for i in ids if i == tokenizer.unk_id) / len(ids)


def chars_per_token(text: str, ids) -> float:
    """Compression: how many characters of ``text`` each token carries on average."""
    n = len(ids)
    if n == 0:
        if text:
            raise ValueError("a non-empty text cannot have zero tokens")
        return 0.0
    return len(text) / n
