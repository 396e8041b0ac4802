"""Hidden suite, lab 11 task 1: split_spans, the five behaviors of a Split step (oracle: HF tokenizers)."""

import regex
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Regex, pre_tokenizers

from bytes2logits.kit.remote import timed

BEHAVIORS = {"Removed": "removed", "Isolated": "isolated", "MergedWithPrevious": "merged_with_previous",
             "MergedWithNext": "merged_with_next", "Contiguous": "contiguous"}
PATTERNS = [r"[-\s]", r"\s+", r"\d", r"-+", r"[a-z]+"]


def hf_spans(text, pattern, behavior, invert=False):
    step = pre_tokenizers.Split(Regex(pattern), BEHAVIORS[behavior], invert=invert)
    return [span for _, span in step.pre_tokenize_str(text)]


def ours(impl, text, pattern, behavior, invert=False):
    matches = [m.span() for m in regex.finditer(pattern, text)]
    result = impl.split_spans(text, matches, behavior, invert)
    assert type(result) is list and all(type(s) is tuple and len(s) == 2 for s in result), (
        "split_spans returns a list of (start, end) tuples")
    return result


def test_the_final_countdown(impl):
    """The example of the task: each behavior on 'the-final--countdown' with the dashes matched, not inverted."""
    t = "the-final--countdown"
    for behavior in BEHAVIORS:
        assert ours(impl, t, "-", behavior) == hf_spans(t, "-", behavior), (
            f"{behavior}: your pieces differ from Hugging Face's Split")


def test_inverted(impl):
    """invert=True: the text between the matches counts as matched; with Contiguous, neighbours of one kind join."""
    for t, pattern in [("the-final--countdown", "-"), ("ab12cd3", r"\d"), ("a  b c", " ")]:
        for behavior in BEHAVIORS:
            assert ours(impl, t, pattern, behavior, True) == hf_spans(t, pattern, behavior, True), (
                f"{behavior} with invert=True: your pieces differ from Hugging Face's Split")


def test_edges(impl):
    """No match, everything matched, matches at both ends, and the empty text."""
    for t in ["", "-", "---", "abc", "-abc-", "a-b", "--a--"]:
        for behavior in BEHAVIORS:
            for invert in (False, True):
                assert ours(impl, t, "-", behavior, invert) == hf_spans(t, "-", behavior, invert), (
                    f"{behavior} with invert={invert} on a text with dashes at its edges: pieces differ from HF's")


def test_empty_matches_cut_nothing(impl):
    """A zero-width match is skipped: it neither cuts the text nor becomes a piece."""
    t = "ab-cd"
    assert impl.split_spans(t, [(0, 0), (2, 3), (5, 5)], "Isolated") == [(0, 2), (2, 3), (3, 5)]


@given(st.text(alphabet="ab1- \n", max_size=30), st.sampled_from(PATTERNS), st.sampled_from(list(BEHAVIORS)),
       st.booleans())
def test_equals_hf_on_any_text(impl, text, pattern, behavior, invert):
    """For any text, pattern and behavior, the pieces are exactly those of Hugging Face's Split."""
    assert ours(impl, text, pattern, behavior, invert) == hf_spans(text, pattern, behavior, invert), (
        f"{behavior} with invert={invert}: your pieces differ from Hugging Face's Split")


def test_speed(impl, reference):
    """MergedWithNext on a text with 300 000 matches: at most 3x the reference's time (which includes sending the
    matches both ways)."""
    text = "word " * 300_000
    matches = [m.span() for m in regex.finditer(" ", text)]
    for behavior in ("MergedWithNext",):
        expected, ref_time = timed(reference.split_spans, text, matches, behavior)
        got, t = timed(impl.split_spans, text, matches, behavior)
        assert got == expected, f"{behavior}: the pieces of the long text are wrong"
        assert t <= 3 * ref_time + 0.05, (f"{behavior}: {t:.2f} s against the reference's {ref_time:.2f} s "
                                          "(one pass over the stretches is enough)")
