"""Hidden suite, lab 02 task 2: WordTokenizer."""

import random
from itertools import groupby

import pytest
from hypothesis import given
from hypothesis import strategies as st

TEXT = "the cat saw the dog. the dog saw a cat!"


def pieces_of(text: str) -> list[str]:
    """The pieces of split_words, found independently: maximal runs of one kind (word, space, other)."""
    def kind(c):
        return "space" if c.isspace() else "word" if c.isalnum() or c == "_" else "other"
    return ["".join(run) for _, run in groupby(text, key=kind)]


@pytest.mark.weight(2)
def test_train_keeps_most_frequent(impl):
    """train keeps the max_vocab - 1 most frequent pieces, most frequent first, after <unk> at id 0."""
    tok = impl.WordTokenizer.train(TEXT, max_vocab=5)
    assert tok.vocab == ["<unk>", " ", "the", "cat", "dog"], f"train({TEXT!r}, max_vocab=5) kept {tok.vocab}"
    assert tok.vocab_size == 5 and tok.unk_id == 0, "vocab_size should count <unk>, and unk_id is 0"


@pytest.mark.weight(2)
@pytest.mark.parametrize("cap", [1, 2, 3, 6, 9])
def test_max_vocab_counts_unk(impl, cap):
    """max_vocab is the whole vocabulary, <unk> included: max_vocab - 1 pieces are kept (while there are enough)."""
    text = "b a c a b a d e f"  # 7 distinct pieces: ' ', a, b, c, d, e, f
    tok = impl.WordTokenizer.train(text, max_vocab=cap)
    n = len(tok.vocab)
    assert tok.vocab[0] == "<unk>" and n == min(cap, 8), \
        f"train({text!r}, max_vocab={cap}) made a vocabulary of {n}: {tok.vocab}"


@pytest.mark.weight(2)
def test_ties_are_alphabetical(impl):
    """Pieces with the same count are ordered alphabetically, whatever order they appeared in."""
    tok = impl.WordTokenizer.train("zeta alpha mid", max_vocab=4)
    assert tok.vocab == ["<unk>", " ", "alpha", "mid"], f"train('zeta alpha mid', max_vocab=4) kept {tok.vocab}"


def test_independent_of_line_order(impl):
    """Shuffling the lines of the training text gives the same vocabulary."""
    lines = [f"w{i % 7} w{i % 3} x{i % 5}\n" for i in range(60)]
    a = impl.WordTokenizer.train("".join(lines), max_vocab=8).vocab
    random.Random(0).shuffle(lines)
    b = impl.WordTokenizer.train("".join(lines), max_vocab=8).vocab
    assert a == b, f"the same lines in another order gave {b} instead of {a}"


def test_small_text_big_cap(impl):
    """A cap larger than the number of distinct pieces keeps them all (no padding)."""
    tok = impl.WordTokenizer.train("a b", max_vocab=100)
    assert sorted(tok.vocab) == sorted(["<unk>", "a", "b", " "]), f"train('a b', max_vocab=100) kept {tok.vocab}"


@pytest.mark.weight(2)
def test_encode_and_unknown(impl):
    """Known pieces get their index; unknown pieces get 0; decode shows <unk> where a word was lost."""
    tok = impl.WordTokenizer.train(TEXT, max_vocab=5)
    ids = tok.encode("the bird saw")
    assert type(ids) is list and all(type(i) is int for i in ids), "encode() should return a list of ints"
    assert ids == [2, 1, 0, 1, 0], f"with vocab {tok.vocab}, encode('the bird saw') returned {ids}"
    out = tok.decode(ids)
    assert out == "the <unk> <unk>", f"decode({ids}) returned {out!r}"


@pytest.mark.weight(2)
@given(st.text(alphabet="ab cd.\n", max_size=40))
def test_one_id_per_piece(impl, text):
    """encode gives exactly one id per piece of split_words, an unknown piece included (it is not dropped)."""
    tok = impl.WordTokenizer.train("a b a.", max_vocab=4)
    ids = tok.encode(text)
    pieces = pieces_of(text)
    assert len(ids) == len(pieces), f"encode({text!r}) gave {len(ids)} ids for {len(pieces)} pieces"


@pytest.mark.weight(1)
def test_case_is_kept(impl):
    """Capitals are kept: "The" and "the" are different pieces (a tokenizer must not change the text)."""
    tok = impl.WordTokenizer.train("The cat saw the Cat", max_vocab=100)
    out = tok.decode(tok.encode("The Cat"))
    assert out == "The Cat", f"decode(encode('The Cat')) returned {out!r}"
    assert len(tok.vocab) == 7, f"train('The cat saw the Cat') kept {tok.vocab}"


@pytest.mark.weight(2)
@given(st.text(alphabet="abAB .\n", max_size=40))
def test_round_trip_on_known_text(impl, text):
    """Text made only of known pieces decodes back exactly."""
    tok = impl.WordTokenizer.train(text, max_vocab=10_000)
    out = tok.decode(tok.encode(text))
    assert out == text, f"trained on {text!r}, decode(encode(text)) returned {out!r}"


@pytest.mark.weight(0.5)
def test_constructor_checks(impl):
    """The vocabulary must start with <unk> and hold distinct non-empty strings."""
    for bad in (["a", "<unk>"], [], ["<unk>", "a", "a"], ["<unk>", ""], ["<unk>", 3]):
        with pytest.raises(ValueError):
            impl.WordTokenizer(bad)
    assert impl.WordTokenizer(["<unk>", "x"]).encode("x y") == [1, 0, 0]


@pytest.mark.weight(0.5)
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


@pytest.mark.weight(0.5)
def test_typed_unk_is_ordinary_text(impl):
    """'<unk>' typed in a text is three ordinary pieces (<, unk, >), never a second <unk> entry or id 0."""
    tok = impl.WordTokenizer.train("<unk> <unk> a", max_vocab=10)
    assert tok.vocab.count("<unk>") == 1 and tok.vocab[0] == "<unk>", f"train('<unk> <unk> a') kept {tok.vocab}"
    ids = tok.encode("<unk>")
    assert len(ids) == 3 and 0 not in ids, f"encode('<unk>') returned {ids}"
