"""Hidden suite, lab 05 task 2: ByteLevelCodec (validation, closed round trip, specials, encode_trusted).

The codec inherits encode and decode from the course's BPETokenizer, so the checks of the round trip
alone would pass for a constructor that validates nothing. The weight sits on what the learner writes:
the checks that make the codec closed (every byte required, every defect named) and encode_trusted.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bytes2logits.kit.remote import WorkerLost

SPECIALS = ["<bos>", "<eos>", "<|endoftext|>"]
HARD = ["hello world", "  \t\n\r\n   x  ", "naïve café", "e\u0301", "日本語のテキスト", "한국어",
        "👨\u200d👩\u200d👧\u200d👦 family", "🏳️\u200d🌈", "\x00\x7f\xad", "<bos>", "<eos><bos>", "<|endoftext|>!"]
CORPUS = "the cat sat on the mat. <bos> ça va? 日本語 😀😀\n\n  " * 10


def base_vocab(specials=SPECIALS):
    """Specials first, then the 256 single bytes."""
    tokens = [s.encode() for s in specials] + [bytes([b]) for b in range(256)]
    return dict(enumerate(tokens))


def trained_vocab():
    from bytes2logits.lessons.bpe import train_bpe

    return train_bpe(CORPUS, 50, SPECIALS)


_TRAINED = {}


def trained(impl):
    """A codec trained on a small mixed corpus (cached per implementation)."""
    if impl not in _TRAINED:
        _TRAINED.clear()
        vocab, merges = trained_vocab()
        _TRAINED[impl] = impl.ByteLevelCodec(vocab, merges, SPECIALS)
    return _TRAINED[impl]


def refused(impl, vocab, merges, specials=SPECIALS):
    """The ValueError the constructor raised, or None when it accepted the vocabulary."""
    try:
        impl.ByteLevelCodec(vocab, merges, specials)
    except WorkerLost:
        raise
    except ValueError as e:
        return e
    return None


def short(e) -> str:
    return repr(str(e)[:120])


# ------------------------------------------------------------------- the round trip (encode is inherited)


def test_round_trip_hard_strings(impl):
    """decode(encode(x)) == x for whitespace runs, accents, CJK, ZWJ emoji and control bytes."""
    codec = trained(impl)
    for text in HARD:
        ids = codec.encode(text)
        assert type(ids) is list and all(type(i) is int for i in ids), "encode returns a plain list of int"
        got = codec.decode(ids)
        assert got == text, f"{text!r} came back as {got!r}"


@given(st.text(alphabet=st.characters(exclude_categories=("Cs",))))
def test_round_trip_any_string(impl, text):
    """decode(encode(x)) == x for any string: there is no <unk>, unseen characters fall back to bytes."""
    codec = trained(impl)
    got = codec.decode(codec.encode(text))
    assert got == text, f"{text!r} came back as {got!r}"


def test_literal_special_text_is_ordinary_bytes(impl):
    """Special-token text typed by a user encodes as ordinary bytes, never as the special id."""
    codec = trained(impl)
    for text in ["<bos>", "hi<eos>", "<|endoftext|><bos>"]:
        ids = codec.encode(text)
        assert not {0, 1, 2} & set(ids), f"encode({text!r}) gave a special id: {ids!r}"
        assert codec.decode(ids) == text, f"{text!r} did not come back"


# ------------------------------------------------------------------------ what the constructor accepts


def test_valid_vocab_is_accepted(impl):
    """Specials plus all 256 bytes and nothing else is a valid codec: every byte has exactly one id."""
    error = refused(impl, base_vocab(), [])
    assert error is None, f"a vocabulary of 3 specials and the 256 bytes was refused: {short(error)}"
    codec = impl.ByteLevelCodec(base_vocab(), [], SPECIALS)
    assert codec.encode("AB") == [3 + 65, 3 + 66], "the single bytes must keep their ids"
    error = refused(impl, *trained_vocab())
    assert error is None, f"a trained vocabulary (train_bpe, 50 merges) was refused: {short(error)}"


def test_a_merge_that_spells_a_special_is_accepted(impl):
    """A merge may spell a special's text: that second id is an ordinary token, allowed, and typed text uses it."""
    merges = [(b"<", b"b"), (b"o", b"s"), (b"<b", b"os"), (b"<bos", b">")]
    vocab = base_vocab()
    for left, right in merges:
        vocab[len(vocab)] = left + right  # <bos> is id 0 (special) and id 262 (ordinary, the last merge)
    error = refused(impl, vocab, merges)
    assert error is None, f"merges that spell <bos> (ordinary id 262, special id 0) were refused: {short(error)}"
    codec = impl.ByteLevelCodec(vocab, merges, SPECIALS)
    got = codec.encode("<bos>")
    assert got == [262], f"typed '<bos>' gave {got!r}, expected the ordinary token [262]"


# ------------------------------------------------------------------------ what the constructor refuses


@pytest.mark.weight(3)
def test_every_byte_is_required(impl):
    """A vocabulary without any one of the 256 bytes (ASCII or not, merges or not) is refused with a ValueError."""
    vocab, merges = trained_vocab()
    by_token = {t: i for i, t in vocab.items()}
    accepted = []
    for b in range(256):
        without = dict(vocab)
        del without[by_token[bytes([b])]]
        if refused(impl, without, []) is None:
            accepted.append(b)
            if len(accepted) >= 4:
                break
    assert not accepted, "accepted a trained vocabulary missing the byte(s) " + \
        ", ".join(f"0x{b:02x}" for b in accepted)


def test_missing_byte_is_named(impl):
    """A vocabulary without some single byte is rejected, and the message names the missing byte."""
    vocab = base_vocab()
    del vocab[3 + 0x41]
    with pytest.raises(ValueError) as info:
        impl.ByteLevelCodec(vocab, [], SPECIALS)
    msg = str(info.value)
    assert any(s in msg for s in ("0x41", "65", "b'A'", "\\x41", "41")), \
        f"byte 0x41 was missing; the message does not name it: {short(msg)}"


def test_missing_special_is_named(impl):
    """A special token absent from the vocabulary is rejected, and the message names it."""
    vocab = base_vocab(["<bos>"])
    with pytest.raises(ValueError) as info:
        impl.ByteLevelCodec(vocab, [], ["<bos>", "<eos>"])
    assert "<eos>" in str(info.value), f"<eos> was missing; the message does not name it: {short(info.value)}"


def test_duplicate_token_is_named(impl):
    """An ordinary token under two ids is refused; the message names the token and both ids."""
    vocab = base_vocab()
    vocab[259] = b"ab"
    vocab[260] = b"ab"
    with pytest.raises(ValueError) as info:
        impl.ByteLevelCodec(vocab, [(b"a", b"b")], SPECIALS)
    msg = str(info.value)
    assert "ab" in msg and "259" in msg and "260" in msg, \
        f"b'ab' had ids 259 and 260; the message does not name the token and both ids: {short(msg)}"


def test_duplicate_special_is_named(impl):
    """A special's text under a second id that no merge makes is refused; the message names the special."""
    vocab = base_vocab()
    vocab[259] = b"<bos>"
    with pytest.raises(ValueError) as info:
        impl.ByteLevelCodec(vocab, [], SPECIALS)
    assert "<bos>" in str(info.value), \
        f"<bos> had ids 0 and 259 and no merge makes it; the message does not name it: {short(info.value)}"


def test_non_int_id_is_refused(impl):
    """An id that is not an int is refused with an error that names it."""
    vocab = base_vocab()
    vocab["259"] = b"ab"
    with pytest.raises((ValueError, TypeError)) as info:
        impl.ByteLevelCodec(vocab, [], SPECIALS)
    assert "259" in str(info.value), f"the id '259' (a str) is not named: {short(info.value)}"


def test_non_bytes_token_is_refused(impl):
    """A token that is not bytes is refused with an error that names it."""
    vocab = base_vocab()
    vocab[259] = "ab"
    with pytest.raises((ValueError, TypeError)) as info:
        impl.ByteLevelCodec(vocab, [], SPECIALS)
    assert "259" in str(info.value) or "ab" in str(info.value), \
        f"entry 259 = 'ab' (a str) is not named: {short(info.value)}"


def test_merge_token_missing_is_refused(impl):
    """A merge whose token is not in the vocabulary is refused with a ValueError (encode could not map it)."""
    with pytest.raises(ValueError):
        impl.ByteLevelCodec(base_vocab(), [(b"x", b"y")], SPECIALS)
    vocab, merges = trained_vocab()
    last = merges[-1][0] + merges[-1][1]
    vocab = {i: t for i, t in vocab.items() if t != last}
    error = refused(impl, vocab, merges)
    assert error is not None, f"a trained vocabulary without the token {last!r} of its last merge was accepted"


# ----------------------------------------------------------------------------- encode_trusted, token_repr


@pytest.mark.weight(2)
def test_encode_trusted_places_specials(impl):
    """encode_trusted turns literal special text into the special ids and encodes the text between with encode."""
    codec = trained(impl)
    for text, want in [("<bos>the cat<eos>", [0] + codec.encode("the cat") + [1]),
                       ("a<|endoftext|>b", codec.encode("a") + [2] + codec.encode("b")),
                       ("<eos><bos>", [1, 0])]:
        got = codec.encode_trusted(text)
        assert got == want, f"encode_trusted({text!r}) gave {got!r}, expected {want!r}"
    got = codec.decode(codec.encode_trusted("<bos>x<eos>"))
    assert got == "x", f"decode(encode_trusted('<bos>x<eos>')) gave {got!r}: decode skips specials"


def test_encode_trusted_prefers_the_longest_special(impl):
    """Where two specials match at one place, encode_trusted takes the longer one."""
    specials = ["<|end", "<|end|>", "<|endoftext|>"]
    codec = impl.ByteLevelCodec(base_vocab(specials), [], specials)
    got = codec.encode_trusted("<|endoftext|><|end|>")
    assert got == [2, 1], f"with specials {specials} (ids 0, 1, 2), encode_trusted('<|endoftext|><|end|>') " \
                          f"gave {got!r}"


def test_encode_trusted_plain_text_is_encode(impl):
    """Text without special tokens: encode_trusted gives exactly what encode gives."""
    codec = trained(impl)
    for text in ["plain", "the mat, ça va", "<bo s>", ""]:
        got, want = codec.encode_trusted(text), codec.encode(text)
        assert got == want, f"encode_trusted({text!r}) gave {got!r}, encode gave {want!r}"


def test_token_repr(impl):
    """token_repr shows a special as its text and any other token through token_to_printable (b'\\n\\n' -> 'ĊĊ')."""
    codec = trained(impl)
    vocab, _ = trained_vocab()
    ids = {t: i for i, t in vocab.items()}
    for token, want in [(b"<bos>", "<bos>"), (b"<|endoftext|>", "<|endoftext|>"), (b" ", "Ġ"), (b"\xc3", "Ã"),
                        (b"\n\n", "ĊĊ"), ("ça".encode(), "Ã§a"), (b"mat.", "mat.")]:
        got = codec.token_repr(ids[token])
        assert got == want, f"token_repr({ids[token]}) (token {token!r}) gave {got!r}"
