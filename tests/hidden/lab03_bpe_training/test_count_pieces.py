"""Hidden suite, lab 03 task 1: pretokenize and count_pieces."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st


def test_pretokenize_examples(impl):
    """pretokenize cuts runs of non-whitespace and runs of whitespace, in order, and returns a list of str."""
    out = impl.pretokenize("low  lower\n")
    assert type(out) is list and all(type(p) is str for p in out)
    assert out == ["low", "  ", "lower", "\n"]
    assert impl.pretokenize("") == []
    assert impl.pretokenize("\t\n x,y! ") == ["\t\n ", "x,y!", " "], "punctuation stays inside a non-space run"


def test_pretokenize_any_script(impl):
    """Letters of any script and emoji are non-whitespace like any other character."""
    assert impl.pretokenize("日本語 テキスト") == ["日本語", " ", "テキスト"]
    assert impl.pretokenize("a\u00a0b") == ["a", "\u00a0", "b"], "a no-break space is whitespace too"


@settings(report_multiple_bugs=False)
@given(st.text())
def test_pretokenize_loses_nothing(impl, text):
    """Joining the pieces gives back the text, and whitespace and non-whitespace pieces alternate."""
    pieces = impl.pretokenize(text)
    assert "".join(pieces) == text
    kinds = [p.isspace() for p in pieces]
    assert all(pieces) and all(a != b for a, b in zip(kinds, kinds[1:]))


def test_count_pieces_weights(impl):
    """count_pieces maps every distinct piece to how often it occurs, whitespace pieces included."""
    counts = impl.count_pieces("the cat the\nthe")
    assert dict(counts) == {"the": 3, " ": 2, "cat": 1, "\n": 1}
    assert all(type(k) is str and type(v) is int for k, v in counts.items())


def test_count_pieces_cuts_out_special_tokens(impl):
    """Literal special-token text is removed from the corpus before counting, and splits the text there."""
    counts = impl.count_pieces("ab<eos>cd ab<eos>", ["<eos>"])
    assert dict(counts) == {"ab": 2, "cd": 1, " ": 1}, (
        "no piece may contain the special text, and the text on its two sides must not join into one piece")
    counts = impl.count_pieces("x<|endoftext|>y", ["<|end|>", "<|endoftext|>"])
    assert dict(counts) == {"x": 1, "y": 1}, "the longer special is cut whole"
    counts = impl.count_pieces("x<|endoftext|>y", ["<|end", "<|endoftext|>"])
    assert dict(counts) == {"x": 1, "y": 1}, (
        "a special that starts with another special is cut whole: try the longer one first")


@settings(report_multiple_bugs=False)
@given(st.lists(st.sampled_from(["low", "lower", "new", " ", "  ", "\n", "é", "日本"]), max_size=30))
def test_count_pieces_matches_a_recount(impl, parts):
    """The counts agree with counting the pieces one by one, whatever the order of the text."""
    text = "".join(parts)
    expected = {}
    for p in re.findall(r"\S+|\s+", text):
        expected[p] = expected.get(p, 0) + 1
    assert dict(impl.count_pieces(text)) == expected


def test_pattern_keyword_uses_unicode_classes(impl):
    """count_pieces(..., pattern=...) pre-tokenizes with that regex; \\p{L} must work (the regex module)."""
    counts = impl.count_pieces("don't stop 2024", pattern=r"'s|'t| ?\p{L}+| ?\p{N}+|\s+")
    assert dict(counts) == {"don": 1, "'t": 1, " stop": 1, " 2024": 1}
