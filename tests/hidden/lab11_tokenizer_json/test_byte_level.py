"""Hidden suite, lab 11 task 2: byte_level_map and byte_level_pieces (oracle: HF tokenizers' ByteLevel)."""

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import pre_tokenizers

from bytes2logits import assets
from bytes2logits.kit.remote import timed

ASSIGNED = st.characters(exclude_categories=["Cn", "Cs"])  # the regex module knows newer Unicode than HF


def hf_pieces(text, add_prefix_space, use_regex):
    step = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=use_regex)
    return [p for p, _ in step.pre_tokenize_str(text)]


def _carrier(b):
    """A one-character text whose UTF-8 holds byte ``b`` (None for C0, C1 and F5..FF, which UTF-8 never uses)."""
    if b < 0x80:
        return chr(b)
    if b < 0xC0:
        return bytes([0xC2, b]).decode()
    if 0xC2 <= b <= 0xDF:
        return bytes([b, 0x80]).decode()
    if 0xE0 <= b <= 0xEF:
        return bytes([b, 0xA0 if b == 0xE0 else 0x80, 0x80]).decode()
    if 0xF0 <= b <= 0xF4:
        return bytes([b, 0x90 if b == 0xF0 else 0x80, 0x80, 0x80]).decode()
    return None


def pieces_case(text, add_prefix_space, use_regex, got):
    return f"on {text!r} with add_prefix_space={add_prefix_space}, use_regex={use_regex}: your pieces are {got!r}"


@pytest.mark.weight(2)
def test_map_is_gpt2s(impl):
    """Every byte maps to GPT-2's printable character (a space is 'Ġ'), including 0x7f..0xa0 and 0xad."""
    for b in range(256):
        text = _carrier(b)
        if text is None:
            continue
        got = impl.byte_level_map(text)
        want = hf_pieces(text, False, False)[0]
        assert type(got) is str and len(got) == len(text.encode()), (
            f"{text!r} has {len(text.encode())} UTF-8 bytes, so {len(text.encode())} characters")
        position = text.encode().index(b)
        assert got[position] == want[position], f"byte {b:#04x} (in {text!r}) maps to the wrong character"


@pytest.mark.weight(2)
@given(st.text(ASSIGNED, max_size=20), st.booleans(), st.booleans())
def test_pieces_equal_hf(impl, text, add_prefix_space, use_regex):
    """For any text and both switches, the pieces are exactly Hugging Face's ByteLevel pieces."""
    got = impl.byte_level_pieces(text, add_prefix_space, use_regex)
    assert type(got) is list and all(type(p) is str for p in got), "byte_level_pieces returns a list of str"
    assert got == hf_pieces(text, add_prefix_space, use_regex), pieces_case(text, add_prefix_space, use_regex, got)


def test_prefix_space_only_when_missing(impl):
    """add_prefix_space adds a space only when the text does not already start with one (nor to an empty text)."""
    for text in ["a", " a", "  a", " ", ""]:
        got = impl.byte_level_pieces(text, True)
        assert got == hf_pieces(text, True, True), pieces_case(text, True, True, got)


def test_prefix_space_before_the_split(impl):
    """The prefix space goes in front of the TEXT, before GPT-2's expression cuts it, not onto the first piece."""
    for text in ["'s", "2024", "\nx", "!!", "'ll go"]:
        got = impl.byte_level_pieces(text, True)
        assert got == hf_pieces(text, True, True), pieces_case(text, True, True, got)


def test_real_text(impl):
    """Botchan, code and whitespace edge cases, with and without a prefix space."""
    rng = random.Random(11)
    lines = assets.botchan_text().splitlines()
    texts = ["I'LL 2024 ½", "  a \n\n b  ", "def f(x):\n    return x  # don't\n"] + rng.sample(lines, 200)
    for text in texts:
        for prefix in (False, True):
            got = impl.byte_level_pieces(text, prefix)
            assert got == hf_pieces(text, prefix, True), pieces_case(text[:60], prefix, True, got[:8])


def test_without_the_map(impl):
    """byte_map=False keeps the pieces in real text: they join back to the text (plus the prefix space)."""
    text = "Hello  world, don't!"
    got = impl.byte_level_pieces(text, byte_map=False)
    assert got == ["Hello", " ", " world", ",", " don", "'t", "!"], f"on {text!r}: your pieces are {got!r}"
    assert "".join(impl.byte_level_pieces(text, True, byte_map=False)) == " " + text, (
        f"with add_prefix_space=True and byte_map=False the pieces of {text!r} must join to ' ' + the text")


def test_empty_text(impl):
    """An empty text has no pieces at all, with or without the regex (not one empty piece)."""
    for prefix in (False, True):
        for use_regex in (True, False):
            got = impl.byte_level_pieces("", prefix, use_regex)
            assert got == [], pieces_case("", prefix, use_regex, got)


def test_speed(impl, reference):
    """200 kB of Botchan: at most 5x the reference's time (plus 50 ms)."""
    text = assets.botchan_text()[:200_000]
    expected, ref_time = timed(reference.byte_level_pieces, text)
    got, t = timed(impl.byte_level_pieces, text)
    assert got == expected, "the pieces of 200 kB of Botchan are wrong"
    assert t <= 5 * ref_time + 0.05, f"{t:.3f} s against the reference's {ref_time:.3f} s"
