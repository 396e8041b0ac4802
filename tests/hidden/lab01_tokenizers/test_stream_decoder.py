"""Hidden suite, lab 01 task 3: decode_utf8_prefix and StreamDecoder.

The stream tests use their own tiny byte tokenizer, so this task is graded on its own even when the
learner's ByteTokenizer (task 1) is unfinished.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st


class Bytes:
    """Test double: id i is the byte i."""

    def decode_bytes(self, ids):
        return bytes(ids)


class Pieces:
    """Test double: each id is a multi-byte piece (like a BPE token)."""

    def __init__(self, pieces):
        self.pieces = pieces

    def decode_bytes(self, ids):
        return b"".join(self.pieces[i] for i in ids)


def stream(impl, tokenizer, ids):
    d = impl.StreamDecoder(tokenizer)
    chunks = [d.step(i) for i in ids]
    chunks.append(d.finish())
    return chunks


def test_worked_example(impl):
    """Streaming [195, 169, 255] gives "", "é", "\ufffd", then "" at the end."""
    assert stream(impl, Bytes(), [195, 169, 255]) == ["", "é", "\ufffd", ""]


def test_holds_an_unfinished_character(impl):
    """The bytes of an unfinished character are held back and emitted together once complete."""
    assert stream(impl, Bytes(), list("€".encode()))[:3] == ["", "", "€"]
    assert stream(impl, Bytes(), list("🙂".encode()))[:4] == ["", "", "", "🙂"]


def test_finish_flushes_with_replacement(impl):
    """finish() turns a sequence cut off at the end into one U+FFFD."""
    assert stream(impl, Bytes(), [0xE2, 0x82]) == ["", "", "\ufffd"]


def test_invalid_byte_is_not_held(impl):
    """A byte that cannot start or continue a character becomes U+FFFD at once, not at the end."""
    chunks = stream(impl, Bytes(), [104, 0xFF, 105])
    assert chunks == ["h", "\ufffd", "i", ""]


def test_broken_sequence_then_valid(impl):
    """A sequence broken by a byte that cannot continue it is replaced at once, and the new byte is kept."""
    chunks = stream(impl, Bytes(), [0xE2, 0x82, 0x41])
    assert "".join(chunks) == "\ufffdA" and chunks[2] == "\ufffdA"


def test_finish_resets(impl):
    """After finish() the decoder starts clean: nothing pending leaks into the next stream."""
    d = impl.StreamDecoder(Bytes())
    d.step(0xC3)
    d.finish()
    assert d.step(0x41) == "A"


@given(st.lists(st.one_of(st.integers(0, 255), st.sampled_from([0xC3, 0xE2, 0xF0, 0xED, 0xF4, 0x80, 0xBF, 0xA0])),
                max_size=40))
def test_chunks_equal_whole_decode(impl, ids):
    """For any id stream, the concatenated chunks equal decoding all ids at once."""
    chunks = stream(impl, Bytes(), ids)
    assert all(type(c) is str for c in chunks), "step() and finish() should return str"
    assert "".join(chunks) == bytes(ids).decode("utf-8", "replace")


@given(st.text(max_size=60))
def test_valid_text_streams_without_replacement(impl, text):
    """Streaming valid UTF-8 never emits U+FFFD early: every chunk is exact text."""
    chunks = stream(impl, Bytes(), list(text.encode("utf-8")))
    assert "".join(chunks) == text


@given(st.text(min_size=1, max_size=40), st.data())
def test_multibyte_tokens(impl, text, data):
    """Tokens that carry several bytes (and split characters across tokens) stream correctly."""
    raw = text.encode("utf-8")
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, len(raw) - 1)), max_size=8))))
    bounds = [0, *cuts, len(raw)]
    pieces = [raw[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]
    chunks = stream(impl, Pieces(pieces), list(range(len(pieces))))
    assert "".join(chunks) == text


@pytest.mark.parametrize("raw", [b"abc", b"caf\xc3", b"\xe2\x82", b"\xf0\x9f\x99", b"ok\xff", b"\xc3\xa9"])
def test_decode_utf8_prefix_holds_only_a_possible_start(impl, raw):
    """decode_utf8_prefix(buf, final=False) consumes all but an unfinished character at the end."""
    text, used = impl.decode_utf8_prefix(raw, False)
    rest = raw[used:]
    assert type(text) is str and type(used) is int
    assert len(rest) <= 3, "at most an unfinished 4-byte character can be held back"
    assert text + (rest.decode("utf-8", "replace") if rest else "") == raw.decode("utf-8", "replace")
    assert not rest or rest.decode("utf-8", "replace") == "\ufffd"


@given(st.binary(max_size=30))
def test_decode_utf8_prefix_final(impl, raw):
    """decode_utf8_prefix(buf, final=True) consumes everything and matches replacement decoding."""
    text, used = impl.decode_utf8_prefix(raw, True)
    assert used == len(raw)
    assert text == raw.decode("utf-8", "replace")
