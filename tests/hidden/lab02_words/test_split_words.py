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
    assert len(kinds) == 1, f"the piece {piece!r} mixes {' and '.join(sorted(kinds))}"
    return kinds.pop()


@pytest.mark.weight(2)
@pytest.mark.parametrize("text, want, note", [
    ("Hello, world!  2024", ["Hello", ",", " ", "world", "!", "  ", "2024"], ""),
    ("don't", ["don", "'", "t"], "an apostrophe is punctuation"),
    ("a...b", ["a", "...", "b"], "a run of punctuation is one piece"),
    ("x\n\n\ty", ["x", "\n\n\t", "y"], "a run of whitespace is one piece"),
    ("snake_case 3.14", ["snake_case", " ", "3", ".", "14"], "_ belongs to words"),
])
def test_examples(impl, text, want, note):
    """Words, punctuation runs and whitespace runs come out as separate pieces, in order."""
    pieces = impl.split_words(text)
    assert pieces == want, f"split_words({text!r}) returned {pieces}" + (f" ({note})" if note else "")


@pytest.mark.parametrize("text, want", [
    ("Привет мир", ["Привет", " ", "мир"]),
    ("東京タワー!", ["東京タワー", "!"]),
    ("naïve—café", ["naïve", "—", "café"]),
])
def test_any_script(impl, text, want):
    """Letters of every script are word characters (Cyrillic, CJK, accents)."""
    pieces = impl.split_words(text)
    assert pieces == want, f"split_words({text!r}) returned {pieces}"


def test_empty_and_list_of_str(impl):
    """The empty string gives []; the result is a list of str."""
    assert impl.split_words("") == [], "split_words('') should give an empty list"
    out = impl.split_words("a b")
    assert type(out) is list and all(type(p) is str for p in out), "split_words should return a list of str"


@pytest.mark.weight(0.25)
def test_rejects_non_str(impl):
    """A non-str argument (bytes, None) is a TypeError."""
    for bad in (b"bytes", None):
        with pytest.raises(TypeError):
            impl.split_words(bad)


# Text that mixes the three kinds densely: runs of spaces, of punctuation, words in several scripts.
MIXED = st.text(alphabet=st.one_of(st.sampled_from("ab Zé日_1 \t\n.,!?—'"), st.characters(exclude_categories=("Cs",))),
                max_size=60)


@pytest.mark.weight(2)
@given(MIXED)
def test_nothing_is_lost(impl, text):
    """Joining the pieces gives back the text, for any string."""
    joined = "".join(impl.split_words(text))
    assert joined == text, f"the pieces of {text!r} join to {joined!r}"


@pytest.mark.weight(2)
@given(MIXED)
def test_pieces_are_maximal_and_pure(impl, text):
    """Each piece is one kind, and two neighbours are never the same kind (runs are not cut)."""
    pieces = impl.split_words(text)
    assert all(pieces), f"split_words({text!r}) returned an empty piece"
    kinds = [kind(p) for p in pieces]
    assert all(a != b for a, b in zip(kinds, kinds[1:])), \
        f"split_words({text!r}) returned {pieces}: two neighbours of the same kind should be one piece"
