"""Hidden suite, lab 09 task 1: split_digits, the digit-splitting pre-tokenizer step."""

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

# ASCII digits, Arabic-Indic and Devanagari digits, superscript two, one half, Roman numeral twelve: all \p{N}
DIGITS = "0123456789٣٤०१²½Ⅻ"
OTHERS = "ab Z,.-+$\n\té日👩"

# Weights: cutting digit runs (which characters are digits, groups from the left, piece boundaries kept)
# carries most of the points; argument checks and result types are a small share.
RULE, CONCEPT, VALIDATION = 4, 2, 1


def is_digit(ch):
    return unicodedata.category(ch).startswith("N")


def expected(pieces, group):
    """The rule written out character by character: runs of digits cut every `group` from the left."""
    out = []
    for piece in pieces:
        run, kind = "", None
        for ch in piece:
            d = is_digit(ch)
            if run and (d != kind or (d and len(run) == group)):
                out.append(run)
                run = ""
            run += ch
            kind = d
        if run:
            out.append(run)
    return out


@pytest.mark.weight(RULE)
def test_examples(impl):
    """Every digit becomes its own piece; the text around the digits stays as it was."""
    assert impl.split_digits(["year", " 2024", "!"]) == ["year", " ", "2", "0", "2", "4", "!"]
    assert impl.split_digits(["$1,234.56"]) == ["$", "1", ",", "2", "3", "4", ".", "5", "6"]
    assert impl.split_digits(["no digits here"]) == ["no digits here"]
    assert impl.split_digits([]) == []


@pytest.mark.weight(RULE)
def test_groups_of_three_from_the_left(impl):
    """With group=3 a run of digits is cut into threes from the left, like cl100k's \\p{N}{1,3} rule."""
    assert impl.split_digits(["1234567"], group=3) == ["123", "456", "7"]
    assert impl.split_digits([" 12345+67890"], group=3) == [" ", "123", "45", "+", "678", "90"]
    assert impl.split_digits(["a12345b"], group=2) == ["a", "12", "34", "5", "b"]
    assert impl.split_digits(["999"], group=3) == ["999"]


@pytest.mark.weight(RULE)
def test_unicode_digits_count(impl):
    """Any character of Unicode category N is a digit: Arabic-Indic ٣, superscript ², one half ½, Roman Ⅻ."""
    assert impl.split_digits(["x٣٤y"]) == ["x", "٣", "٤", "y"]
    assert impl.split_digits(["m²"]) == ["m", "²"]
    assert impl.split_digits(["½Ⅻ"]) == ["½", "Ⅻ"]
    assert impl.split_digits(["٣٤٥٦"], group=3) == ["٣٤٥", "٦"]


@pytest.mark.weight(RULE)
def test_pieces_are_cut_never_joined(impl):
    """Input piece boundaries stay: digits or letters from two neighbouring pieces are never joined."""
    assert impl.split_digits(["12", "34"], group=3) == ["12", "34"]
    assert impl.split_digits(["ab", "cd"]) == ["ab", "cd"]
    assert impl.split_digits(["a", "1", "b"], group=5) == ["a", "1", "b"]


@pytest.mark.weight(CONCEPT)
def test_empty_pieces_disappear(impl):
    """Empty input pieces produce no output piece (no empty strings in the result)."""
    assert impl.split_digits(["", "a", "", "1", ""]) == ["a", "1"]


@pytest.mark.weight(VALIDATION)
def test_accepts_any_iterable(impl):
    """The pieces may come as a tuple or a generator, not only a list."""
    assert impl.split_digits(("a1",)) == ["a", "1"]
    assert impl.split_digits(p for p in ["a1", "2"]) == ["a", "1", "2"]


@pytest.mark.weight(VALIDATION)
def test_result_types(impl):
    """The result is a plain list of plain str, not look-alike objects."""
    out = impl.split_digits(["ab12", " 3"], group=2)
    assert type(out) is list
    assert all(type(p) is str for p in out)
    assert [str(p) for p in out] == ["ab", "12", " ", "3"]


@pytest.mark.weight(VALIDATION)
def test_bad_arguments(impl):
    """One string instead of a list, a non-str piece, or a group below 1 is refused with an error."""
    with pytest.raises(TypeError):
        impl.split_digits("2024")
    with pytest.raises(TypeError):
        impl.split_digits(["a", 12])
    for bad in (0, -1, 1.5):
        with pytest.raises((TypeError, ValueError)):
            impl.split_digits(["123"], group=bad)


pieces_strategy = st.lists(st.text(alphabet=DIGITS + OTHERS, max_size=14), max_size=6)


@pytest.mark.weight(CONCEPT)
@given(pieces=pieces_strategy, group=st.integers(1, 5))
def test_join_is_the_identity(impl, pieces, group):
    """Joining the output gives back exactly the joined input: nothing lost, added or reordered."""
    out = impl.split_digits(pieces, group=group)
    assert "".join(out) == "".join(pieces)
    assert all(p != "" for p in out)


@pytest.mark.weight(RULE)
@given(pieces=pieces_strategy, group=st.integers(1, 5))
def test_digits_isolated_and_others_untouched(impl, pieces, group):
    """Each output piece is all digits (at most `group` of them) or has no digit; non-digit runs are unchanged."""
    out = impl.split_digits(pieces, group=group)
    for p in out:
        flags = {is_digit(c) for c in p}
        assert len(flags) == 1, "a piece mixes digits and other characters"
        if flags == {True}:
            assert len(p) <= group
    assert out == expected(pieces, group)


@pytest.mark.weight(CONCEPT)
@given(pieces=pieces_strategy)
def test_piece_by_piece(impl, pieces):
    """Splitting the pieces one at a time gives the same result as splitting the whole list."""
    one_by_one = [q for p in pieces for q in impl.split_digits([p])]
    assert impl.split_digits(pieces) == one_by_one


@pytest.mark.weight(CONCEPT)
@given(text=st.text(alphabet=DIGITS + OTHERS, max_size=40))
def test_on_a_real_pre_tokenizer(impl, text):
    """After GPT-2's pre-tokenizer, split_digits leaves every digit alone and keeps all other GPT-2 pieces."""
    from bytes2logits.engine.pretokenizers import PRE_TOKENIZERS, split

    pieces = split(text, PRE_TOKENIZERS["gpt-2"].compiled)
    out = impl.split_digits(pieces)
    assert sum(1 for p in out if is_digit(p[0])) == sum(1 for c in text if is_digit(c))
    assert [p for p in out if not is_digit(p[0])] == [
        q for p in pieces for q in expected([p], 1) if not is_digit(q[0])]
