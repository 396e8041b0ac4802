"""Hidden suite, lab 02 task 1: split_words."""

import pytest
from hypothesis import given
from hypothesis import strategies as st


def kind(piece: str) -> str:
    """Independent classifier: word (a letter or digit of any script, or _), space, or anything else."""
    def k(c):
        if c.isspace():
            return "space"
        if c.isalnum() or c == "_":
            return "word"
        return "punct"
    kinds = {k(c) for c in piece}
    assert len(kinds) == 1, f"piece {piece!r} mixes kinds {sorted(kinds)}"
    return kinds.pop()


def test_examples(impl):
    """Words, punctuation runs and whitespace runs come out as separate pieces, in order."""
    assert impl.split_words("Hello, world!  2024") == ["Hello", ",", " ", "world", "!", "  ", "2024"]
    assert impl.split_words("don't") == ["don", "'", "t"], "an apostrophe is punctuation"
    assert impl.split_words("a...b") == ["a", "...", "b"], "a run of punctuation is one piece"
    assert impl.split_words("x\n\n\ty") == ["x", "\n\n\t", "y"], "a run of whitespace is one piece"
    assert impl.split_words("snake_case 3.14") == ["snake_case", " ", "3", ".", "14"], "_ belongs to words"


def test_any_script(impl):
    """Letters of every script are word characters (Cyrillic, CJK, accents)."""
    assert impl.split_words("Привет мир") == ["Привет", " ", "мир"]
    assert impl.split_words("東京タワー!") == ["東京タワー", "!"]
    assert impl.split_words("naïve—café") == ["naïve", "—", "café"]


def test_empty_and_types(impl):
    """The empty string gives []; a list of str is returned; a non-str argument is a TypeError."""
    assert impl.split_words("") == []
    out = impl.split_words("a b")
    assert type(out) is list and all(type(p) is str for p in out)
    with pytest.raises(TypeError):
        impl.split_words(b"bytes")


@given(st.text())
def test_nothing_is_lost(impl, text):
    """Joining the pieces gives back the text, for any string."""
    assert "".join(impl.split_words(text)) == text


@given(st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=60))
def test_pieces_are_maximal_and_pure(impl, text):
    """Each piece is one kind, and two neighbours are never the same kind (runs are not cut)."""
    pieces = impl.split_words(text)
    assert all(pieces), "no empty pieces"
    kinds = [kind(p) for p in pieces]
    assert all(a != b for a, b in zip(kinds, kinds[1:])), "neighbouring pieces of the same kind should be one piece"
