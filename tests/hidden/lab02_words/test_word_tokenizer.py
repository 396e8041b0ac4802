"""Hidden suite, lab 02 task 2: WordTokenizer."""

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

TEXT = "the cat saw the dog. the dog saw a cat!"


def test_train_keeps_most_frequent(impl):
    """train keeps the max_vocab - 1 most frequent pieces, most frequent first, after <unk> at id 0."""
    tok = impl.WordTokenizer.train(TEXT, max_vocab=5)
    assert tok.vocab == ["<unk>", " ", "the", "cat", "dog"]
    assert tok.vocab_size == 5 and tok.unk_id == 0


def test_ties_are_alphabetical(impl):
    """Pieces with the same count are ordered alphabetically, whatever order they appeared in."""
    tok = impl.WordTokenizer.train("zeta alpha mid", max_vocab=4)
    assert tok.vocab == ["<unk>", " ", "alpha", "mid"]


def test_independent_of_line_order(impl):
    """Shuffling the lines of the training text gives the same vocabulary."""
    lines = [f"w{i % 7} w{i % 3} x{i % 5}\n" for i in range(60)]
    a = impl.WordTokenizer.train("".join(lines), max_vocab=8).vocab
    random.Random(0).shuffle(lines)
    b = impl.WordTokenizer.train("".join(lines), max_vocab=8).vocab
    assert a == b


def test_small_text_big_cap(impl):
    """A cap larger than the number of distinct pieces keeps them all (no padding)."""
    tok = impl.WordTokenizer.train("a b", max_vocab=100)
    assert sorted(tok.vocab) == sorted(["<unk>", "a", "b", " "])


def test_encode_and_unknown(impl):
    """Known pieces get their index; unknown pieces get 0; decode shows <unk> where a word was lost."""
    tok = impl.WordTokenizer.train(TEXT, max_vocab=5)
    ids = tok.encode("the bird saw")
    assert type(ids) is list and all(type(i) is int for i in ids)
    assert ids == [2, 1, 0, 1, 0]
    assert tok.decode(ids) == "the <unk> <unk>"


@given(st.text(alphabet="ab .\n", max_size=40))
def test_round_trip_on_known_text(impl, text):
    """Text made only of known pieces decodes back exactly."""
    tok = impl.WordTokenizer.train(text, max_vocab=10_000)
    assert tok.decode(tok.encode(text)) == text


def test_constructor_checks(impl):
    """The vocabulary must start with <unk> and hold distinct non-empty strings."""
    for bad in (["a", "<unk>"], [], ["<unk>", "a", "a"], ["<unk>", ""], ["<unk>", 3]):
        with pytest.raises(ValueError):
            impl.WordTokenizer(bad)
    assert impl.WordTokenizer(["<unk>", "x"]).encode("x y") == [1, 0, 0]


def test_bad_arguments(impl):
    """max_vocab must be an int >= 1; decode rejects out-of-range and non-int ids, naming them."""
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError):
            impl.WordTokenizer.train("a b", max_vocab=bad)
    tok = impl.WordTokenizer.train("a b", max_vocab=3)
    with pytest.raises(ValueError, match="7"):
        tok.decode([1, 7])
    with pytest.raises(TypeError):
        tok.decode([1.0])
    with pytest.raises(TypeError):
        tok.decode([True])


def test_unk_text_in_training_is_not_duplicated(impl):
    """The literal text '<unk>' in a corpus does not get a second id."""
    tok = impl.WordTokenizer.train("<unk> <unk> a", max_vocab=10)
    assert tok.vocab.count("<unk>") == 1 and tok.vocab[0] == "<unk>"
