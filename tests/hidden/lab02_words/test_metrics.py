"""Hidden suite, lab 02 task 3: oov_rate and chars_per_token.

The OOV checks use their own small word tokenizer, so this task is graded on its own even when the
learner's WordTokenizer (task 2) is unfinished.
"""

from itertools import groupby

import pytest
from hypothesis import given
from hypothesis import strategies as st


def pieces_of(text: str) -> list[str]:
    """The pieces of split_words, found independently: maximal runs of one kind (word, space, other)."""
    def kind(c):
        return "space" if c.isspace() else "word" if c.isalnum() or c == "_" else "other"
    return ["".join(run) for _, run in groupby(text, key=kind)]


class Known:
    """Test double: a word tokenizer with a fixed vocabulary; id 0 is <unk>."""

    unk_id = 0

    def __init__(self, vocab):
        self.vocab = ["<unk>", *vocab]
        self._index = {p: i for i, p in enumerate(self.vocab)}

    @property
    def vocab_size(self):
        return len(self.vocab)

    def encode(self, text):
        return [self._index.get(p, 0) for p in pieces_of(text)]

    def decode(self, ids):
        return "".join(self.vocab[i] for i in ids)


TOK = Known([" ", "the", "cat"])


@pytest.mark.weight(2)
@pytest.mark.parametrize("text, want", [("the dog", 1 / 3), ("the the", 0.0), ("zebra", 1.0), ("the cat, ok", 2 / 6)])
def test_oov_rate_examples(impl, text, want):
    """oov_rate is (unknown pieces) / (all pieces), spaces and punctuation included."""
    r = impl.oov_rate(TOK, text)
    assert r == pytest.approx(want), f"with the vocabulary {TOK.vocab}, oov_rate({text!r}) returned {r!r}"


@pytest.mark.weight(2)
@pytest.mark.parametrize("text", ["dog dog the", "the dog the cat the", "a a a a cat"])
def test_oov_rate_counts_every_occurrence(impl, text):
    """oov_rate counts tokens, not distinct pieces: an unknown word that occurs twice counts twice."""
    ids = TOK.encode(text)
    want = ids.count(0) / len(ids)
    r = impl.oov_rate(TOK, text)
    assert r == pytest.approx(want), (f"with the vocabulary {TOK.vocab}, oov_rate({text!r}) returned {r!r}"
                                      + (": that counts each distinct piece once" if r == pytest.approx(
                                          len({p for p, i in zip(pieces_of(text), ids) if i == 0})
                                          / len(set(pieces_of(text)))) else ""))


def test_oov_rate_of_empty_text(impl):
    """The OOV rate of an empty text is 0.0 (no pieces, none unknown), not an error."""
    r = impl.oov_rate(TOK, "")
    assert r == 0.0, f"oov_rate('') returned {r!r}"


@given(st.text(alphabet="abc d,", max_size=30), st.lists(st.sampled_from(["a", "b", " ", "c", ","]), unique=True))
def test_oov_rate_is_the_unknown_share(impl, text, vocab):
    """For any text and vocabulary, the rate is the share of the text's pieces that encode to <unk>."""
    tok = Known(vocab)
    ids = tok.encode(text)
    want = ids.count(0) / len(ids) if ids else 0.0
    r = impl.oov_rate(tok, text)
    assert r == pytest.approx(want), f"with the vocabulary {tok.vocab}, oov_rate({text!r}) returned {r!r}"


@pytest.mark.weight(2)
@pytest.mark.parametrize("text, ids", [("hello", [1, 2]), ("the dog", [2, 1, 0]), ("a", [7]), ("ab cd", [1, 2, 3, 4])])
def test_chars_per_token(impl, text, ids):
    """chars_per_token is the number of characters of the text divided by the number of its tokens."""
    r = impl.chars_per_token(text, ids)
    assert r == pytest.approx(len(text) / len(ids)), f"chars_per_token({text!r}, {ids}) returned {r!r}"


@pytest.mark.weight(2)
@pytest.mark.parametrize("text, ids", [("日本", [5]), ("héllo wörld", [1, 2, 3]), ("🙂🙂", [9, 9])])
def test_chars_not_bytes(impl, text, ids):
    """chars_per_token counts characters (code points), not UTF-8 bytes."""
    r = impl.chars_per_token(text, ids)
    hint = ": that counts UTF-8 bytes" if r == pytest.approx(len(text.encode()) / len(ids)) else ""
    assert r == pytest.approx(len(text) / len(ids)), f"chars_per_token({text!r}, {ids}) returned {r!r}{hint}"


@pytest.mark.weight(0.5)
def test_chars_per_token_empty(impl):
    """chars_per_token of an empty text with no tokens is 0.0."""
    r = impl.chars_per_token("", [])
    assert r == 0.0, f"chars_per_token('', []) returned {r!r}"


@pytest.mark.weight(0.5)
def test_text_without_tokens_is_an_error(impl):
    """A non-empty text with no tokens is a ValueError (no tokenizer encodes text to nothing)."""
    with pytest.raises(ValueError):
        impl.chars_per_token("text", [])
