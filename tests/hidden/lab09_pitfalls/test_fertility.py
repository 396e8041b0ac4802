"""Hidden suite, lab 09 task 2: fertility and relative_fertility."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

# Weights: the two divisions and the ratio to the reference carry most of the points; result types and
# argument checks are a small share.
RULE, CONCEPT, VALIDATION = 4, 2, 1


def byte_tokens(text):
    """One token per UTF-8 byte."""
    return list(text.encode("utf-8"))


def char_tokens(text):
    """One token per character."""
    return [ord(c) for c in text]


@pytest.mark.weight(RULE)
def test_examples(impl):
    """Tokens are divided by characters (code points) and by UTF-8 bytes."""
    r = impl.fertility(byte_tokens, "héllo")  # 5 characters, 6 bytes
    assert r.per_char != 6.0, "a byte tokenizer on 'héllo': per_char divides by the words, not the characters"
    assert r.per_byte != 6 / 5, "a byte tokenizer on 'héllo': per_byte divides by the characters, not the UTF-8 bytes"
    assert r.per_char == 6 / 5 and r.per_byte == 1.0
    r = impl.fertility(str.split, "one two, three")  # 3 tokens, 14 characters, 14 bytes
    assert r.per_char != 1.0, "per_char divides by the words; fertility here is per character (code point)"
    assert r.per_char == 3 / 14 and r.per_byte == 3 / 14
    r = impl.fertility(char_tokens, "東京")  # 2 characters, 6 bytes
    assert r.per_char == 1.0 and r.per_byte == 2 / 6
    r = impl.fertility(byte_tokens, "👩\u200d💻")  # 3 code points, 11 bytes
    assert r.per_char == 11 / 3 and r.per_byte == 1.0


@pytest.mark.weight(VALIDATION)
def test_result_is_a_fertility_of_floats(impl):
    """The result is a Fertility (per_char, per_byte) holding plain floats, and unpacks as a pair."""
    r = impl.fertility(byte_tokens, "abc")
    assert isinstance(r, impl.Fertility)
    assert type(r.per_char) is float and type(r.per_byte) is float
    per_char, per_byte = r
    assert (per_char, per_byte) == (1.0, 1.0)


@pytest.mark.weight(CONCEPT)
def test_any_sequence_of_ids(impl):
    """tokenize may return a list, a tuple or any other iterable of ids."""
    assert impl.fertility(lambda t: (1, 2), "abcd").per_char == 0.5
    assert impl.fertility(lambda t: iter([1, 2, 3]), "abc").per_char == 1.0
    assert impl.fertility(lambda t: [], "abc") == (0.0, 0.0)


@pytest.mark.weight(RULE)
def test_real_tokenizer(impl):
    """On SmolLM2's tokenizer the numbers are its token count over the characters and bytes of the text."""
    from bytes2logits import assets
    from bytes2logits.engine.tokenizer import Tokenizer

    tok = Tokenizer.from_gguf(assets.path("smollm2"))
    for text in ["All human beings are born free and equal in dignity and rights.",
                 "Всички хора се раждат свободни и равни по достойнство и права.",
                 "人人生而自由,在尊严和权利上一律平等。"]:
        n = len(tok.encode(text))
        r = impl.fertility(tok.encode, text)
        assert r.per_char == n / len(text)
        assert r.per_byte == n / len(text.encode("utf-8"))


@pytest.mark.weight(VALIDATION)
def test_bad_text(impl):
    """An empty text is a ValueError (no characters to divide by); a non-str text is a TypeError."""
    with pytest.raises(ValueError):
        impl.fertility(byte_tokens, "")
    with pytest.raises(TypeError):
        impl.fertility(byte_tokens, b"bytes")


@pytest.mark.weight(RULE)
@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=60))
def test_byte_and_char_tokenizers(impl, text):
    """A byte tokenizer costs exactly 1 token per byte, a char tokenizer exactly 1 token per character."""
    b = impl.fertility(byte_tokens, text)
    assert b.per_byte == 1.0
    assert b.per_char == len(text.encode("utf-8")) / len(text)
    c = impl.fertility(char_tokens, text)
    assert c.per_char == 1.0
    assert c.per_byte == len(text) / len(text.encode("utf-8"))


@pytest.mark.weight(RULE)
def test_relative_examples(impl):
    """Each value is divided by the reference's; the reference becomes 1.0."""
    out = impl.relative_fertility({"en_Latn": 0.2, "el_Grek": 0.5, "fr_Latn": 0.3})
    assert out.get("el_Grek") != 0.2 / 0.5, \
        "the ratio is inverted: a language that costs more tokens than English must get a value above 1"
    assert out == {"en_Latn": 1.0, "fr_Latn": 0.3 / 0.2, "el_Grek": 0.5 / 0.2}
    out = impl.relative_fertility({"a": 2.0, "b": 1.0, "c": 4.0}, reference="b")
    assert out == {"b": 1.0, "a": 2.0, "c": 4.0}


@pytest.mark.weight(CONCEPT)
def test_relative_order(impl):
    """The result is ordered from the lowest ratio to the highest, equal ratios by language code."""
    out = impl.relative_fertility({"zz": 1.0, "en_Latn": 1.0, "aa": 1.0, "mm": 0.5, "bb": 3.0})
    assert list(out) == ["mm", "aa", "en_Latn", "zz", "bb"]


@pytest.mark.weight(VALIDATION)
def test_relative_types_and_no_mutation(impl):
    """A new plain dict of plain floats is returned (ints in the table too); the table is not changed."""
    table = {"en_Latn": 2, "de_Latn": 3}
    out = impl.relative_fertility(table)
    assert type(out) is dict and out is not table
    assert all(type(v) is float for v in out.values())
    assert table == {"en_Latn": 2, "de_Latn": 3} and list(table) == ["en_Latn", "de_Latn"]
    assert out == {"en_Latn": 1.0, "de_Latn": 1.5}


@pytest.mark.weight(VALIDATION)
def test_relative_errors(impl):
    """A missing reference is a KeyError naming it; a zero reference or a bad value a ValueError naming the language."""
    with pytest.raises(KeyError) as info:
        impl.relative_fertility({"de_Latn": 1.0})
    assert "en_Latn" in str(info.value)
    with pytest.raises(KeyError):
        impl.relative_fertility({"en_Latn": 1.0}, reference="xx_Xxxx")
    with pytest.raises(ValueError):
        impl.relative_fertility({"en_Latn": 0.0, "de_Latn": 1.0})
    for bad in (-1.0, math.nan, math.inf, "0.3", None):
        with pytest.raises(ValueError) as info:
            impl.relative_fertility({"en_Latn": 1.0, "xx_Bad": bad})
        assert "xx_Bad" in str(info.value)


@pytest.mark.weight(RULE)
@given(st.dictionaries(st.text(alphabet="abcdefgh_", min_size=1, max_size=6),
                       st.floats(min_value=1e-3, max_value=1e3), min_size=1, max_size=12))
def test_relative_properties(impl, table):
    """Same keys, each ratio exactly value / reference value, in non-decreasing order, reference at 1.0."""
    ref = sorted(table)[0]
    out = impl.relative_fertility(table, reference=ref)
    assert set(out) == set(table)
    assert all(out[k] == table[k] / table[ref] for k in table)
    values = list(out.values())
    assert values == sorted(values)
    assert out[ref] == 1.0
