"""Hidden suite, lab 05 task 1: bytes_to_unicode and token_to_printable."""


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


def test_map_is_gpt2s(impl):
    """bytes_to_unicode maps each of the 256 byte values (ints) to GPT-2's printable character."""
    m = impl.bytes_to_unicode()
    assert type(m) is dict and sorted(m) == list(range(256)) and all(type(k) is int for k in m)
    assert all(type(v) is str and len(v) == 1 for v in m.values()), "one character per byte"
    assert m == gpt2_map()
    assert m[32] == "Ġ" and m[10] == "Ċ" and m[ord("a")] == "a"


def test_map_is_a_fresh_copy(impl):
    """Changing the returned dict does not change what the next call returns."""
    m = impl.bytes_to_unicode()
    m[0] = "X"
    assert impl.bytes_to_unicode()[0] == "Ā"


def test_token_to_printable(impl):
    """token_to_printable shows every byte of a token as one printable character."""
    assert impl.token_to_printable(b" the") == "Ġthe"
    assert impl.token_to_printable(b"\n\n") == "ĊĊ"
    assert impl.token_to_printable("é".encode()) == "Ã©", "a two-byte character shows as two characters"
    assert impl.token_to_printable(b"") == ""
    every = bytes(range(256))
    shown = impl.token_to_printable(every)
    assert type(shown) is str and len(set(shown)) == 256 and not any(c.isspace() for c in shown)
