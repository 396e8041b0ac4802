"""Hidden suite, lab 01 task 1: ByteTokenizer."""

import pytest
from hypothesis import given
from hypothesis import strategies as st


def utf8_by_hand(cp: int) -> list[int]:
    """UTF-8 from its definition (bit layout), independent of Python's codec."""
    if cp < 0x80:
        return [cp]
    if cp < 0x800:
        return [0xC0 | cp >> 6, 0x80 | cp & 0x3F]
    if cp < 0x10000:
        return [0xE0 | cp >> 12, 0x80 | cp >> 6 & 0x3F, 0x80 | cp & 0x3F]
    return [0xF0 | cp >> 18, 0x80 | cp >> 12 & 0x3F, 0x80 | cp >> 6 & 0x3F, 0x80 | cp & 0x3F]


def plain_int_list(x) -> bool:
    return type(x) is list and all(type(i) is int for i in x)


def test_encode_ascii(impl):
    """An ASCII character is one byte, its id is its character code, and vocab_size is 256."""
    text = "Hello, world!\n\t~"
    tok = impl.ByteTokenizer()
    ids = tok.encode(text)
    assert tok.vocab_size == 256, "vocab_size should be 256: one id per byte value, no specials"
    assert plain_int_list(ids), "encode() should return a plain list of Python ints"
    assert ids == [ord(c) for c in text], "ASCII ids should be the character codes"


def test_encode_empty(impl):
    """The empty string encodes to the empty list."""
    ids = impl.ByteTokenizer().encode("")
    assert type(ids) is list and ids == []


@pytest.mark.parametrize("text", ["é", "héllo", "€", "日本語", "🙂", "👩‍💻", "a\u0301", "\U0010FFFF", "\x00"])
def test_encode_multibyte(impl, text):
    """Characters beyond ASCII become their 2, 3 or 4 UTF-8 bytes, in order."""
    expected = [b for ch in text for b in utf8_by_hand(ord(ch))]
    ids = impl.ByteTokenizer().encode(text)
    assert plain_int_list(ids), "encode() should return a plain list of Python ints"
    assert ids == expected, "encode() should give the UTF-8 bytes of every character, in order"


@given(st.text())
def test_round_trip_any_text(impl, text):
    """decode(encode(text)) gives back exactly the text, for any Unicode string."""
    tok = impl.ByteTokenizer()
    ids = tok.encode(text)
    assert plain_int_list(ids) and all(0 <= i < 256 for i in ids), "ids should be ints in 0..255"
    out = tok.decode(ids)
    assert type(out) is str and out == text, "decode(encode(text)) should return the text unchanged"


@pytest.mark.parametrize("raw", [
    [255], [0xC3], [0xE2, 0x82], [0xF0, 0x9F, 0x99], [0x80, 0x80], [0xC0, 0xAF], [0xED, 0xA0, 0x80],
    [0xF4, 0x90, 0x80, 0x80], [0xE0, 0x80, 0x80], [104, 0xFF, 105], [0xF0, 0x80, 0xE2, 0x82, 0xAC],
])
def test_decode_invalid_utf8_with_replacement(impl, raw):
    """Invalid UTF-8 decodes with one U+FFFD per maximal ill-formed subpart, never an exception."""
    out = impl.ByteTokenizer().decode(raw)
    assert type(out) is str
    assert out == bytes(raw).decode("utf-8", "replace"), \
        "each maximal invalid stretch should become exactly one U+FFFD"


@given(st.lists(st.integers(0, 255), max_size=40))
def test_decode_any_bytes(impl, raw):
    """Any list of byte ids decodes (with replacement) and never raises."""
    out = impl.ByteTokenizer().decode(raw)
    assert type(out) is str and out == bytes(raw).decode("utf-8", "replace"), \
        "decode() should match UTF-8 decoding with one U+FFFD per invalid stretch"


@pytest.mark.parametrize("ids,bad,pos", [([104, 256], 256, 1), ([-1], -1, 0), ([1, 2, 3, 1000], 1000, 3)])
def test_decode_rejects_ids_outside_0_255(impl, ids, bad, pos):
    """decode() raises ValueError for an id outside 0..255, naming the id and its position."""
    with pytest.raises(ValueError) as info:
        impl.ByteTokenizer().decode(ids)
    msg = str(info.value)
    assert str(bad) in msg, "the ValueError message should name the offending id"
    assert str(pos) in msg, "the ValueError message should name the position of the offending id"


def test_decode_accepts_any_sequence(impl):
    """decode() accepts a tuple or any iterable of ids, not only a list."""
    tok = impl.ByteTokenizer()
    assert tok.decode((104, 105)) == "hi"
    assert tok.decode(iter([104, 105])) == "hi"
