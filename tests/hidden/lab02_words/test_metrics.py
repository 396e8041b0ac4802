"""Hidden suite, lab 02 task 3: oov_rate and chars_per_token."""

import pytest
from hypothesis import given
from hypothesis import strategies as st


def test_oov_rate_examples(impl):
    """oov_rate is (unknown pieces) / (all pieces), spaces included, and 0.0 for an empty text."""
    tok = impl.WordTokenizer.train("the cat saw the dog", max_vocab=4)
    assert impl.oov_rate(tok, "the dog") == pytest.approx(1 / 3)
    assert impl.oov_rate(tok, "the the") == 0.0
    assert impl.oov_rate(tok, "zebra") == 1.0
    assert impl.oov_rate(tok, "") == 0.0


@given(st.text(alphabet="abc d", max_size=30))
def test_oov_rate_is_a_fraction(impl, text):
    """The rate is between 0 and 1, and 0 when the tokenizer was trained on the same text."""
    tok = impl.WordTokenizer.train("a b", max_vocab=3)
    r = impl.oov_rate(tok, text)
    assert 0.0 <= r <= 1.0
    full = impl.WordTokenizer.train(text, max_vocab=10_000)
    assert impl.oov_rate(full, text) == 0.0


def test_chars_per_token(impl):
    """chars_per_token is len(text) / len(ids); 0.0 when both are empty; an error for text without tokens."""
    assert impl.chars_per_token("hello", [1, 2]) == 2.5
    assert impl.chars_per_token("", []) == 0.0
    assert impl.chars_per_token("日本", [5]) == 2.0, "characters, not bytes"
    with pytest.raises(ValueError):
        impl.chars_per_token("text", [])
