"""Hidden suite, lab 05 task 1: bytes_to_unicode and token_to_printable."""

import pytest

from bytes2logits.kit.probes import worker_eval

# Calls the function twice where it runs (in a grading run: the worker, where a dict shared between calls is
# visible; the grader only ever receives copies): the second call's byte 0 after the first result was changed.
AFTER_CHANGE = "lambda f: (lambda first: (first.__setitem__(0, 'X'), f()[0])[1])(f())"


def gpt2_map():
    """GPT-2's rule, built independently: printable Latin-1 bytes stand for themselves, the rest shift to 256+."""
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
            + list(range(ord("®"), ord("ÿ") + 1)))
    out, shift = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + shift)
            shift += 1
    return out


def test_map_is_a_dict_of_256_ints_to_characters(impl):
    """bytes_to_unicode returns a dict with the 256 byte values (ints) as keys and one character each."""
    m = impl.bytes_to_unicode()
    assert type(m) is dict, f"bytes_to_unicode() returned a {type(m).__name__}, not a dict"
    assert sorted(m) == list(range(256)) and all(type(k) is int for k in m), "the keys must be the ints 0..255"
    bad = [k for k, v in m.items() if not (type(v) is str and len(v) == 1)]
    assert not bad, f"byte 0x{bad[0]:02x} maps to {m[bad[0]]!r}: one character per byte"


@pytest.mark.weight(2)
def test_map_is_gpt2s(impl):
    """bytes_to_unicode maps each byte to GPT-2's character: printable Latin-1 as itself, the rest to 256+."""
    m = impl.bytes_to_unicode()
    want = gpt2_map()
    wrong = [b for b in range(256) if m.get(b) != want[b]]
    assert not wrong, f"{len(wrong)} byte(s) map to the wrong character, the first 0x{wrong[0]:02x} " \
                      f"to {m.get(wrong[0])!r}"


def test_map_is_a_fresh_copy(impl):
    """Changing the returned dict does not change what the next call returns."""
    again = worker_eval(impl, AFTER_CHANGE)(impl.bytes_to_unicode)
    assert again == "Ā", "after the returned dict's entry for byte 0 was changed, the next call returned it changed"


def test_token_to_printable(impl):
    """token_to_printable shows every byte of a token as its one printable character (b' the' -> 'Ġthe')."""
    for token, want in [(b" the", "Ġthe"), (b"\n\n", "ĊĊ"), ("é".encode(), "Ã©"), (b"", "")]:
        got = impl.token_to_printable(token)
        assert got == want, f"token_to_printable({token!r}) gave {got!r}"


def test_token_to_printable_all_bytes(impl):
    """token_to_printable of all 256 bytes gives 256 distinct characters, none of them whitespace."""
    shown = impl.token_to_printable(bytes(range(256)))
    assert type(shown) is str and len(shown) == 256, "one character per byte"
    assert len(set(shown)) == 256, "two bytes show as the same character"
    spaces = [f"0x{b:02x}" for b, c in enumerate(shown) if c.isspace()]
    assert not spaces, f"byte(s) {', '.join(spaces[:4])} show as whitespace"
