"""Hidden suite, lab 06 task 1: find_specials, the earliest-then-longest scan."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

CHATML = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]


def slow_scan(text, specials):
    """The rule written out: at each position try every special, longest first; jump past a match."""
    ordered = sorted(set(specials), key=len, reverse=True)
    out, i = [], 0
    while i < len(text):
        for s in ordered:
            if text.startswith(s, i):
                out.append((i, i + len(s), s))
                i += len(s)
                break
        else:
            i += 1
    return out


def check_types(found):
    assert type(found) is list, "find_specials returns a list"
    for item in found:
        assert type(item) is tuple and len(item) == 3, "each match is a (start, end, token) tuple"
        assert type(item[0]) is int and type(item[1]) is int and type(item[2]) is str


def test_finds_chatml_markers_in_order(impl):
    """ChatML markers are found left to right with their exact start and end offsets."""
    text = "<|im_start|>user\nhi<|im_end|>\n"
    found = impl.find_specials(text, CHATML)
    check_types(found)
    assert found == [(0, 12, "<|im_start|>"), (19, 29, "<|im_end|>")]


def test_longest_wins_at_the_same_start(impl):
    """When one special is a prefix of another, the longer wins where both match (<|endoftext|> over <|end)."""
    for specials in (["<|end", "<|endoftext|>"], ["<|endoftext|>", "<|end"]):
        found = impl.find_specials("a<|endoftext|>b<|end|>", specials)
        assert found == [(1, 14, "<|endoftext|>"), (15, 20, "<|end")]
    assert impl.find_specials("<ab>", ["<a", "<ab>", "<ab"]) == [(0, 4, "<ab>")]
    assert impl.find_specials("<s>[INST]<s>", ["<s>", "<s>[INST]"]) == [(0, 9, "<s>[INST]"), (9, 12, "<s>")]


def test_earliest_beats_longest(impl):
    """A match that starts earlier wins even when a longer one starts inside it."""
    assert impl.find_specials("xabcdef", ["ab", "bcdef"]) == [(1, 3, "ab")]
    assert impl.find_specials("abcdef", ["bcdef", "ab"]) == [(0, 2, "ab")]


def test_matches_do_not_overlap_and_scan_resumes_after_a_match(impl):
    """After a match the scan continues at its end: '<a><a>' is two matches, 'aaa' with 'aa' is one."""
    assert impl.find_specials("<a><a>", ["<a>"]) == [(0, 3, "<a>"), (3, 6, "<a>")]
    assert impl.find_specials("aaa", ["aa"]) == [(0, 2, "aa")]
    assert impl.find_specials("aaaa", ["aa"]) == [(0, 2, "aa"), (2, 4, "aa")]


def test_partial_markers_are_not_matches(impl):
    """'<|im_end' or 'im_end|>' alone are not the special token."""
    assert impl.find_specials("<|im_end and im_end|> and <|im_en d|>", CHATML) == []
    assert impl.find_specials("", CHATML) == []
    assert impl.find_specials("<|im_end|>", []) == []


@given(st.lists(st.sampled_from(["<|", "|>", "im_", "end", "<|im_end|>", "<|im_end", "<|end|>", "<|endoftext|>",
                                 "x", " ", "\n", "<", "<<|im_start|>", "é"]), max_size=25),
       st.lists(st.sampled_from(["<|im_end|>", "<|im_start|>", "<|end|>", "<|endoftext|>", "<|", "end|>", "<<"]),
                min_size=1, max_size=5, unique=True))
def test_agrees_with_the_rule_on_generated_texts(impl, parts, specials):
    """On texts glued from marker fragments, the matches are exactly those of the earliest-longest rule."""
    text = "".join(parts)
    found = impl.find_specials(text, specials)
    check_types(found)
    assert found == slow_scan(text, specials)


def test_specials_may_be_any_collection(impl):
    """specials can be a list, tuple, set or generator of str."""
    for specials in (["<a>"], ("<a>",), {"<a>"}, (s for s in ["<a>"])):
        assert impl.find_specials("x<a>", specials) == [(1, 4, "<a>")]


def test_bad_arguments_raise(impl):
    """One string instead of a collection, a non-str special, or an empty special raises an error."""
    with pytest.raises((TypeError, ValueError)):
        impl.find_specials("x<a>", "<a>")
    with pytest.raises((TypeError, ValueError)):
        impl.find_specials("x", [b"<a>"])
    with pytest.raises((TypeError, ValueError)):
        impl.find_specials("x", ["<a>", ""])
    with pytest.raises(TypeError):
        impl.find_specials(b"x<a>", ["<a>"])
