"""Hidden suite, lab 11 task 2: byte_level_map and byte_level_pieces (oracle: HF tokenizers' ByteLevel)."""

import random

from hypothesis import given
from hypothesis import strategies as st
from tokenizers import pre_tokenizers

from bytes2logits import assets
from bytes2logits.kit.remote import timed

ASSIGNED = st.characters(exclude_categories=["Cn", "Cs"])  # the regex module knows newer Unicode than HF


def hf_pieces(text, add_prefix_space, use_regex):
    step = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=use_regex)
    return [p for p, _ in step.pre_tokenize_str(text)]


def test_map_is_gpt2s(impl):
    """Every one of the 256 bytes maps to GPT-2's printable character (a space is 'Ġ')."""
    for b in range(256):
        text = bytes([b]).decode("latin-1") if b < 0x80 else None
        if text is not None:
            assert impl.byte_level_map(text) == hf_pieces(text, False, False)[0], f"byte {b:#04x}"
    for text in ["é", "日本", "😀", "\u0301", "\x00\x7f", " \t\n"]:
        assert impl.byte_level_map(text) == hf_pieces(text, False, False)[0], repr(text)


@given(st.text(ASSIGNED, max_size=20), st.booleans(), st.booleans())
def test_pieces_equal_hf(impl, text, add_prefix_space, use_regex):
    """For any text and both switches, the pieces are exactly Hugging Face's ByteLevel pieces."""
    got = impl.byte_level_pieces(text, add_prefix_space, use_regex)
    assert type(got) is list and all(type(p) is str for p in got), "byte_level_pieces returns a list of str"
    assert got == hf_pieces(text, add_prefix_space, use_regex)


def test_real_text(impl):
    """Botchan, code and whitespace edge cases, with and without a prefix space."""
    rng = random.Random(11)
    lines = assets.botchan_text().splitlines()
    texts = rng.sample(lines, 200) + ["def f(x):\n    return x  # don't\n", "  a \n\n b  ", "I'LL 2024 ½"]
    for text in texts:
        for prefix in (False, True):
            assert impl.byte_level_pieces(text, prefix) == hf_pieces(text, prefix, True), text[:60]


def test_without_the_map(impl):
    """byte_map=False keeps the pieces in real text: they join back to the text (plus the prefix space)."""
    text = "Hello  world, don't!"
    assert impl.byte_level_pieces(text, byte_map=False) == ["Hello", " ", " world", ",", " don", "'t", "!"]
    assert "".join(impl.byte_level_pieces(text, True, byte_map=False)) == " " + text
    assert impl.byte_level_pieces("", True) == [] and impl.byte_level_pieces("", False, False) == []


def test_speed(impl, reference):
    """200 kB of Botchan: at most 5x the reference's time (plus 50 ms)."""
    text = assets.botchan_text()[:200_000]
    expected, ref_time = timed(reference.byte_level_pieces, text)
    got, t = timed(impl.byte_level_pieces, text)
    assert got == expected
    assert t <= 5 * ref_time + 0.05, f"{t:.3f} s against the reference's {ref_time:.3f} s"
