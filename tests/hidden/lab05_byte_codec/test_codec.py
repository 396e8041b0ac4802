"""Hidden suite, lab 05 task 2: ByteLevelCodec (validation, closed round trip, specials, encode_trusted)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

SPECIALS = ["<bos>", "<eos>", "<|endoftext|>"]
HARD = ["hello world", "  \t\n\r\n   x  ", "naïve café", "e\u0301", "日本語のテキスト", "한국어",
        "👨\u200d👩\u200d👧\u200d👦 family", "🏳️\u200d🌈", "\x00\x7f\xad", "<bos>", "<eos><bos>", "<|endoftext|>!"]


def base_vocab(specials=SPECIALS):
    """Specials first, then the 256 single bytes."""
    tokens = [s.encode() for s in specials] + [bytes([b]) for b in range(256)]
    return dict(enumerate(tokens))


_TRAINED = {}


def trained(impl):
    """A codec trained on a small mixed corpus (cached per implementation)."""
    if id(impl.ByteLevelCodec) not in _TRAINED:
        from bytes2logits.lessons.bpe import train_bpe

        vocab, merges = train_bpe("the cat sat on the mat. <bos> ça va? 日本語 😀😀\n\n  " * 10, 50, SPECIALS)
        _TRAINED[id(impl.ByteLevelCodec)] = impl.ByteLevelCodec(vocab, merges, SPECIALS)
    return _TRAINED[id(impl.ByteLevelCodec)]


def test_round_trip_hard_strings(impl):
    """decode(encode(x)) == x for whitespace runs, accents, CJK, ZWJ emoji and control bytes."""
    codec = trained(impl)
    for text in HARD:
        ids = codec.encode(text)
        assert type(ids) is list and all(type(i) is int for i in ids), "encode returns a plain list of int"
        assert codec.decode(ids) == text


@given(st.text(alphabet=st.characters(exclude_categories=("Cs",))))
def test_round_trip_any_string(impl, text):
    """decode(encode(x)) == x for any string: there is no <unk>, unseen characters fall back to bytes."""
    codec = trained(impl)
    assert codec.decode(codec.encode(text)) == text, "the round trip must hold for every string"


def test_literal_special_text_is_ordinary_bytes(impl):
    """Special-token text typed by a user encodes as ordinary bytes, never as the special id."""
    codec = trained(impl)
    special_ids = {0, 1, 2}
    for text in ["<bos>", "hi<eos>", "<|endoftext|><bos>"]:
        ids = codec.encode(text)
        assert not special_ids & set(ids)
        assert codec.decode(ids) == text


def test_encode_trusted(impl):
    """encode_trusted turns literal special text into the special ids and encodes the rest as encode does."""
    codec = trained(impl)
    assert codec.encode_trusted("<bos>the cat<eos>") == [0] + codec.encode("the cat") + [1]
    assert codec.encode_trusted("a<|endoftext|>b") == codec.encode("a") + [2] + codec.encode("b")
    assert codec.encode_trusted("plain") == codec.encode("plain")
    assert codec.decode(codec.encode_trusted("<bos>x<eos>")) == "x", "decode skips specials"


def test_missing_byte_is_named(impl):
    """A vocabulary without some single byte is rejected, and the message names the missing byte."""
    vocab = base_vocab()
    del vocab[3 + 0x41]
    with pytest.raises(ValueError) as info:
        impl.ByteLevelCodec(vocab, [], SPECIALS)
    msg = str(info.value)
    assert any(s in msg for s in ("0x41", "65", "b'A'", "\\x41", "41")), "name the missing byte"


def test_missing_special_is_named(impl):
    """A special token absent from the vocabulary is rejected, and the message names it."""
    vocab = base_vocab(["<bos>"])
    with pytest.raises(ValueError) as info:
        impl.ByteLevelCodec(vocab, [], ["<bos>", "<eos>"])
    assert "<eos>" in str(info.value)


def test_duplicates_are_named(impl):
    """A token (special or not) under two ids is rejected; the message names the token and its ids."""
    vocab = base_vocab()
    vocab[259] = b"ab"
    vocab[260] = b"ab"
    with pytest.raises(ValueError) as info:
        impl.ByteLevelCodec(vocab, [(b"a", b"b")], SPECIALS)
    msg = str(info.value)
    assert "ab" in msg and "259" in msg and "260" in msg
    vocab = base_vocab()
    vocab[259] = b"<bos>"
    with pytest.raises(ValueError) as info:
        impl.ByteLevelCodec(vocab, [], SPECIALS)
    assert "<bos>" in str(info.value)


def test_bad_entries_and_merges(impl):
    """Non-int ids, non-bytes tokens, and merges whose result is not in the vocabulary are rejected."""
    vocab = base_vocab()
    vocab[259] = "ab"
    with pytest.raises((ValueError, TypeError)):
        impl.ByteLevelCodec(vocab, [], SPECIALS)
    vocab = base_vocab()
    vocab["259"] = b"ab"
    with pytest.raises((ValueError, TypeError)):
        impl.ByteLevelCodec(vocab, [], SPECIALS)
    with pytest.raises(ValueError):
        impl.ByteLevelCodec(base_vocab(), [(b"x", b"y")], SPECIALS)


def test_valid_vocab_is_accepted(impl):
    """Specials plus all 256 bytes and nothing else is a valid codec: every byte has exactly one id."""
    codec = impl.ByteLevelCodec(base_vocab(), [], SPECIALS)
    assert codec.encode("AB") == [3 + 65, 3 + 66]
    assert codec.encode("hi", add_bos=True, add_eos=True)[0] == 0
