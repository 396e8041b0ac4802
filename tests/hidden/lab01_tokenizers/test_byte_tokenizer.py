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
    hint = ": those are code points, and the ids are UTF-8 bytes" if ids == [ord(c) for c in text] else ""
    assert ids == expected, f"encode({text!r}) returned {ids}{hint}"


@pytest.mark.weight(2)
@pytest.mark.parametrize("text", ["é", "héllo", "€", "日本語", "🙂", "a\u0301!"])
def test_decode_multibyte_characters_whole(impl, text):
    """The bytes of a multi-byte character decode together into that one character."""
    ids = list(text.encode("utf-8"))
    out = impl.ByteTokenizer().decode(ids)
    one_by_one = "".join(bytes([b]).decode("utf-8", "replace") for b in ids)
    hint = ": each byte was decoded on its own, but a character's bytes belong together" if out == one_by_one else ""
    assert out == text, f"decode({ids}) returned {out!r}{hint}"


@pytest.mark.weight(3)
@given(st.text())
def test_round_trip_any_text(impl, text):
    """decode(encode(text)) gives back exactly the text, for any Unicode string."""
    tok = impl.ByteTokenizer()
    ids = tok.encode(text)
    assert plain_int_list(ids) and all(0 <= i < 256 for i in ids), "ids should be ints in 0..255"
    out = tok.decode(ids)
    assert type(out) is str and out == text, f"decode(encode({text!r})) returned {out!r}"


@pytest.mark.parametrize("raw", [
    [255], [0xC3], [0x80, 0x80], [0xC0, 0xAF], [0xED, 0xA0, 0x80],
    [0xF4, 0x90, 0x80, 0x80], [0xE0, 0x80, 0x80], [104, 0xFF, 105], [0xF0, 0x80, 0xE2, 0x82, 0xAC],
])
def test_decode_invalid_utf8_with_replacement(impl, raw):
    """Invalid UTF-8 decodes with one U+FFFD per maximal ill-formed subpart, never an exception."""
    out = impl.ByteTokenizer().decode(raw)
    assert type(out) is str, f"decode({raw}) returned a {type(out).__name__}, not a str"
    assert out == bytes(raw).decode("utf-8", "replace"), \
        f"decode({raw}) returned {out!r}: invalid bytes are replaced by U+FFFD, never dropped or kept"


@pytest.mark.weight(1.5)
@pytest.mark.parametrize("raw", [[0xE2, 0x82], [0xF0, 0x9F, 0x99], [0xE2, 0x82, 0x41], [104, 0xF0, 0x9F, 0x99, 105]])
def test_unfinished_character_is_one_replacement(impl, raw):
    """A multi-byte character cut short is ONE maximal subpart: one U+FFFD, not one per byte."""
    out = impl.ByteTokenizer().decode(raw)
    assert out == bytes(raw).decode("utf-8", "replace"), \
        f"decode({raw}) returned {out!r} ({out.count(chr(0xFFFD)) if isinstance(out, str) else '?'} U+FFFD)"


@pytest.mark.weight(2)
@given(st.lists(st.integers(0, 255), max_size=40))
def test_decode_any_bytes(impl, raw):
    """Any list of byte ids decodes (with replacement) and never raises."""
    out = impl.ByteTokenizer().decode(raw)
    assert type(out) is str and out == bytes(raw).decode("utf-8", "replace"), \
        f"decode({raw}) returned {out!r}"


@pytest.mark.weight(4)
def test_decode_bytes_gives_the_raw_bytes(impl):
    """decode_bytes(ids) returns the raw bytes as a bytes object, valid UTF-8 or not (no decoding)."""
    tok = impl.ByteTokenizer()
    for ids in ([104, 195, 169], [255, 0xE2, 0x82], [], [0, 128, 255]):
        raw = tok.decode_bytes(ids)
        assert type(raw) is bytes, f"decode_bytes({ids}) returned a {type(raw).__name__}, not bytes"
        assert raw == bytes(ids), f"decode_bytes({ids}) returned {raw!r}"
    assert tok.decode_bytes((104, 105)) == b"hi", "decode_bytes should accept a tuple of ids"


@pytest.mark.weight(0.5)
def test_decode_bytes_checks_ids(impl):
    """decode_bytes() raises ValueError for an id outside 0..255, naming the id."""
    with pytest.raises(ValueError) as info:
        impl.ByteTokenizer().decode_bytes([104, 300])
    assert "300" in str(info.value), "the ValueError message should name the offending id"


@pytest.mark.weight(0.5)
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
