"""Hidden suite, lab 06 task 1: find_specials, the earliest-then-longest scan.

Weights: the three rules of the scan (earliest start, longest at one start, no overlap) and the property
over generated texts carry most of the task; the argument checks are a minor share. Failure messages
show the call and what it returned: the rule in the check's first docstring line says what was expected.
"""

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


def call(impl, text, specials):
    """The learner's result, and the line that names the call and what it returned."""
    found = impl.find_specials(text, specials)
    return found, f"find_specials({text!r}, {specials!r}) returned {found!r}"


def check_types(found):
    assert type(found) is list, f"find_specials returns a list, not a {type(found).__name__}"
    for item in found:
        assert type(item) is tuple and len(item) == 3, f"each match is a (start, end, token) tuple, not {item!r}"
        assert type(item[0]) is int and type(item[1]) is int and type(item[2]) is str, (
            f"a match is (int, int, str), not {item!r}")


def test_finds_chatml_markers_in_order(impl):
    """ChatML markers are found left to right with their exact start and end offsets."""
    found, said = call(impl, "<|im_start|>user\nhi<|im_end|>\n", CHATML)
    check_types(found)
    assert found == [(0, 12, "<|im_start|>"), (19, 29, "<|im_end|>")], said


@pytest.mark.weight(2)
@pytest.mark.parametrize("specials", [["<|end", "<|endoftext|>"], ["<|endoftext|>", "<|end"]])
def test_longest_wins_at_the_same_start_in_any_list_order(impl, specials):
    """Where two specials start at the same position the longer wins, whatever their order in the list."""
    found, said = call(impl, "<|endoftext|>", specials)
    assert found == [(0, 13, "<|endoftext|>")], said


@pytest.mark.weight(2)
def test_longest_wins_among_three_prefixes(impl):
    """'<ab>' with specials '<a', '<ab>', '<ab' is one match, the longest; '<s>[INST]<s>' is '<s>[INST]' then '<s>'."""
    found, said = call(impl, "<ab>", ["<a", "<ab>", "<ab"])
    assert found == [(0, 4, "<ab>")], said
    found, said = call(impl, "<s>[INST]<s>", ["<s>", "<s>[INST]"])
    assert found == [(0, 9, "<s>[INST]"), (9, 12, "<s>")], said


@pytest.mark.weight(2)
@pytest.mark.parametrize("text,specials", [("xabcdef", ["ab", "bcdef"]), ("abcdef", ["bcdef", "ab"])])
def test_earliest_beats_longest(impl, text, specials):
    """A match that starts earlier wins even when a longer special starts inside it: position first, length second."""
    found, said = call(impl, text, specials)
    assert found == slow_scan(text, specials), said


@pytest.mark.weight(2)
@pytest.mark.parametrize("text,specials", [("aaa", ["aa"]), ("aaaa", ["aa"]), ("<a><a>", ["<a>"])])
def test_matches_do_not_overlap_and_scan_resumes_after_a_match(impl, text, specials):
    """After a match the scan continues at its end: matches never overlap, and none is skipped."""
    found, said = call(impl, text, specials)
    assert found == slow_scan(text, specials), said


@pytest.mark.weight(0.5)
@pytest.mark.parametrize("text,specials", [("<|im_end and im_end|> and <|im_en d|>", CHATML), ("", CHATML),
                                           ("<|im_end|>", [])])
def test_partial_markers_are_not_matches(impl, text, specials):
    """'<|im_end' or 'im_end|>' alone is not the special token; an empty text or an empty list finds nothing."""
    found, said = call(impl, text, specials)
    assert found == [], said


def test_specials_that_mean_something_to_a_regex_are_literal(impl):
    """Special tokens are matched as literal text: '|', '[', '.', '*' in them mean nothing special."""
    for text, specials in [("<x>", ["<|end|>"]), ("[INST]", ["[INST]"]), ("axy", ["a.y"]), ("**", ["a*"])]:
        found, said = call(impl, text, specials)
        assert found == slow_scan(text, specials), said


@pytest.mark.weight(3)
@given(st.lists(st.sampled_from(["<|", "|>", "im_", "end", "<|im_end|>", "<|im_end", "<|end|>", "<|endoftext|>",
                                 "x", " ", "\n", "<", "<<|im_start|>", "é"]), max_size=25),
       st.lists(st.sampled_from(["<|im_end|>", "<|im_start|>", "<|end|>", "<|endoftext|>", "<|", "end|>", "<<"]),
                min_size=1, max_size=5, unique=True))
def test_agrees_with_the_rule_on_generated_texts(impl, parts, specials):
    """On texts glued from marker fragments, the matches are exactly those of the earliest-longest rule."""
    text = "".join(parts)
    found, said = call(impl, text, specials)
    check_types(found)
    assert found == slow_scan(text, specials), said


@pytest.mark.weight(0.5)
def test_specials_may_be_any_collection(impl):
    """specials can be a list, tuple, set or generator of str."""
    for kind, specials in [("list", ["<a>"]), ("tuple", ("<a>",)), ("set", {"<a>"}),
                           ("generator", (s for s in ["<a>"]))]:
        found = impl.find_specials("x<a>", specials)
        assert found == [(1, 4, "<a>")], f"with specials given as a {kind}: returned {found!r}"


@pytest.mark.weight(0.25)
def test_one_string_instead_of_a_collection_raises(impl):
    """One string instead of a collection of specials raises an error: '<a>' is not ['<a>']."""
    with pytest.raises((TypeError, ValueError)):
        impl.find_specials("x<a>", "<a>")


@pytest.mark.weight(0.25)
def test_a_special_that_is_not_a_str_raises(impl):
    """A special that is not a str (b'<a>') raises an error."""
    with pytest.raises((TypeError, ValueError)):
        impl.find_specials("x", [b"<a>"])


@pytest.mark.weight(0.25)
def test_the_empty_special_raises(impl):
    """The empty string as a special raises an error: it would match everywhere."""
    with pytest.raises((TypeError, ValueError)):
        impl.find_specials("x", ["<a>", ""])


@pytest.mark.weight(0.25)
def test_text_that_is_not_a_str_raises(impl):
    """A text that is not a str (b'x<a>') raises TypeError."""
    with pytest.raises(TypeError):
        impl.find_specials(b"x<a>", ["<a>"])
