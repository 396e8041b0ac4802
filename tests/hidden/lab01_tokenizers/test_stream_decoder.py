"""Hidden suite, lab 01 task 3: decode_utf8_prefix and StreamDecoder.

The stream tests use their own tiny byte tokenizer, so this task is graded on its own even when the
learner's ByteTokenizer (task 1) is unfinished.
"""

from itertools import product

import pytest
from hypothesis import given
from hypothesis import strategies as st

# Bytes that make streams interesting: lead bytes of every length, the leads with a narrow second-byte
# range (E0, ED, F0, F4), continuation bytes from each part of 80..BF, and bytes UTF-8 never uses.
TRICKY = [0x41, 0xC3, 0xA9, 0xE0, 0xE2, 0x82, 0xAC, 0xED, 0x9F, 0xA0, 0xF0, 0x9F, 0x90, 0xF4, 0x8F, 0x80, 0xBF,
          0xC0, 0xFF]


def could_still_finish(tail: bytes) -> bool:
    """True when ``tail`` is the start of some UTF-8 character but not a whole one (checked by trying)."""
    if not tail or len(tail) > 3:
        return False
    for extra in range(1, 5 - len(tail)):
        for rest in product((0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF), repeat=extra):
            try:
                if len((tail + bytes(rest)).decode("utf-8")) == 1:
                    return True
            except UnicodeDecodeError:
                pass
    return False


def undecided(buf: bytes) -> bytes:
    """The end of ``buf`` that a streaming decoder must hold: an unfinished character that may still finish.

    Only a lead byte starts a character and a lead byte always ends what came before it, so the candidate is
    the stretch from the last byte that is not a continuation byte (80..BF).
    """
    starts = [k for k, b in enumerate(buf) if not 0x80 <= b <= 0xBF]
    if not starts:
        return b""
    tail = buf[starts[-1]:]
    return tail if could_still_finish(tail) else b""


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


@pytest.mark.weight(1)
def test_worked_example(impl):
    """Streaming [195, 169, 255] gives "", "é", "\ufffd", then "" at the end."""
    chunks = stream(impl, Bytes(), [195, 169, 255])
    assert chunks == ["", "é", "\ufffd", ""], f"your chunks were {chunks}"


def test_holds_an_unfinished_character(impl):
    """The bytes of an unfinished character are held back and emitted together once complete."""
    for ch in "€🙂":
        ids = list(ch.encode())
        chunks = stream(impl, Bytes(), ids)
        assert chunks[:len(ids)] == [""] * (len(ids) - 1) + [ch], f"streaming {ids} gave the chunks {chunks}"


def test_finish_flushes_with_replacement(impl):
    """finish() turns a sequence cut off at the end into one U+FFFD."""
    chunks = stream(impl, Bytes(), [0xE2, 0x82])
    assert chunks == ["", "", "\ufffd"], f"streaming [0xE2, 0x82] gave the chunks {chunks}"


def test_invalid_byte_is_not_held(impl):
    """A byte that cannot start or continue a character becomes U+FFFD at once, not at the end."""
    chunks = stream(impl, Bytes(), [104, 0xFF, 105])
    assert chunks == ["h", "\ufffd", "i", ""], f"streaming [104, 0xFF, 105] gave the chunks {chunks}"


def test_broken_sequence_then_valid(impl):
    """A sequence broken by a byte that cannot continue it is replaced at once, and the new byte is kept."""
    chunks = stream(impl, Bytes(), [0xE2, 0x82, 0x41])
    assert "".join(chunks) == "\ufffdA" and chunks[2] == "\ufffdA", f"streaming [0xE2, 0x82, 0x41] gave {chunks}"


def test_finish_resets(impl):
    """After finish() the decoder starts clean: nothing pending leaks into the next stream."""
    d = impl.StreamDecoder(Bytes())
    d.step(0xC3)
    d.finish()
    out = d.step(0x41)
    assert out == "A", f"step(0x41) after step(0xC3) and finish() returned {out!r}"


@pytest.mark.weight(3)
@given(st.lists(st.one_of(st.integers(0, 255), st.sampled_from(TRICKY)), max_size=40))
def test_chunks_equal_whole_decode(impl, ids):
    """For any id stream, the concatenated chunks equal decoding all ids at once."""
    chunks = stream(impl, Bytes(), ids)
    assert all(type(c) is str for c in chunks), "step() and finish() should return str"
    assert "".join(chunks) == bytes(ids).decode("utf-8", "replace"), f"streaming {ids} gave the chunks {chunks}"


@pytest.mark.weight(3)
@given(st.lists(st.sampled_from(TRICKY), min_size=1, max_size=12))
def test_emits_all_it_can_after_each_step(impl, ids):
    """After each step, all text that is decided has been emitted: only a character that may still finish waits."""
    d = impl.StreamDecoder(Bytes())
    shown = ""
    for k, i in enumerate(ids):
        shown += d.step(i)
        buf = bytes(ids[:k + 1])
        decided = buf[:len(buf) - len(undecided(buf))].decode("utf-8", "replace")
        assert shown == decided, (f"after the ids {ids[:k + 1]} your decoder had emitted {shown!r}"
                                  + (" (it waits on bytes that can no longer become a character)"
                                     if decided.startswith(shown) else " (it emitted too early)"))


@pytest.mark.weight(1.5)
@given(st.lists(st.sampled_from(TRICKY), min_size=1, max_size=12))
def test_pending_is_the_unfinished_character(impl, ids):
    """pending holds exactly the bytes of the unfinished character at the end, and nothing after finish()."""
    d = impl.StreamDecoder(Bytes())
    for k, i in enumerate(ids):
        d.step(i)
        held = d.pending
        assert type(held) is bytes, f"pending is a {type(held).__name__}, not bytes"
        assert held == undecided(bytes(ids[:k + 1])), f"after the ids {ids[:k + 1]} pending was {held!r}"
    d.finish()
    assert d.pending == b"", f"after finish() pending was {d.pending!r}"


@given(st.text(max_size=60))
def test_valid_text_streams_without_replacement(impl, text):
    """Streaming valid UTF-8 never emits U+FFFD early: every chunk is exact text."""
    chunks = stream(impl, Bytes(), list(text.encode("utf-8")))
    assert "".join(chunks) == text


@pytest.mark.weight(2)
@given(st.text(min_size=1, max_size=40), st.data())
def test_multibyte_tokens(impl, text, data):
    """Tokens that carry several bytes (and split characters across tokens) stream correctly."""
    raw = text.encode("utf-8")
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, len(raw) - 1)), max_size=8))))
    bounds = [0, *cuts, len(raw)]
    pieces = [raw[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]
    chunks = stream(impl, Pieces(pieces), list(range(len(pieces))))
    assert "".join(chunks) == text, f"tokens with the bytes {pieces} streamed as {chunks}"


@pytest.mark.weight(0.5)
@pytest.mark.parametrize("raw", [b"abc", b"caf\xc3", b"\xe2\x82", b"\xf0\x9f\x99", b"ok\xff", b"\xc3\xa9",
                                 b"\xe0\x80", b"\xed\xa0", b"\xf0\x80", b"\xf4\x90", b"\xe0\xa0", b"\xed\x9f"])
def test_decode_utf8_prefix_holds_only_a_possible_start(impl, raw):
    """decode_utf8_prefix(buf, final=False) consumes all but a character that may still finish at the end."""
    text, used = impl.decode_utf8_prefix(raw, False)
    assert type(text) is str and type(used) is int, "decode_utf8_prefix should return (str, int)"
    rest = raw[used:]
    assert rest == undecided(raw), (f"decode_utf8_prefix({raw!r}, False) left {rest!r} unconsumed"
                                    + (": its second byte is outside the lead byte's range, so it can never "
                                       "finish" if len(rest) > 1 and not undecided(raw) else ""))
    assert text == raw[:used].decode("utf-8", "replace"), f"decode_utf8_prefix({raw!r}, False) returned {text!r}"


@given(st.lists(st.one_of(st.integers(0, 255), st.sampled_from(TRICKY)), max_size=30).map(bytes))
def test_decode_utf8_prefix_final(impl, raw):
    """decode_utf8_prefix(buf, final=True) consumes everything and matches replacement decoding."""
    text, used = impl.decode_utf8_prefix(raw, True)
    assert used == len(raw), f"decode_utf8_prefix({raw!r}, True) consumed {used} of {len(raw)} bytes"
    assert text == raw.decode("utf-8", "replace"), f"decode_utf8_prefix({raw!r}, True) returned {text!r}"
