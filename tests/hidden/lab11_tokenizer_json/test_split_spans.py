"""Hidden suite, lab 11 task 1: split_spans, the five behaviors of a Split step (oracle: HF tokenizers)."""

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Regex, pre_tokenizers

from bytes2logits.kit.remote import timed

BEHAVIORS = {"Removed": "removed", "Isolated": "isolated", "MergedWithPrevious": "merged_with_previous",
             "MergedWithNext": "merged_with_next", "Contiguous": "contiguous"}
PATTERNS = [r"[-\s]", r"\s+", r"\d", r"-+", r"[a-z]+"]
# smallest first, so that the first failure a check reports is the smallest one
TEXTS = ["-", "a-", "-a", "a-b", "--", "a--", "--a", "a--b", "-a-", "---", "--a--", "the-final--countdown"]


def hf_spans(text, pattern, behavior, invert=False):
    step = pre_tokenizers.Split(Regex(pattern), BEHAVIORS[behavior], invert=invert)
    return [span for _, span in step.pre_tokenize_str(text)]


def ours(impl, text, pattern, behavior, invert=False):
    matches = [m.span() for m in regex.finditer(pattern, text)]
    result = impl.split_spans(text, matches, behavior, invert)
    assert type(result) is list and all(type(s) is tuple and len(s) == 2 for s in result), (
        "split_spans returns a list of (start, end) tuples")
    return result


def case(text, pattern, behavior, invert, got):
    """The failing case in words: the input and the learner's own pieces (never the expected ones)."""
    pieces = [text[s:e] for s, e in got]
    return (f"{behavior}, invert={invert}, on {text!r} with the matches of {pattern!r}: "
            f"your pieces are {pieces!r}")


def compare(impl, behavior, invert, texts=TEXTS, pattern="-"):
    for t in texts:
        got = ours(impl, t, pattern, behavior, invert)
        assert got == hf_spans(t, pattern, behavior, invert), case(t, pattern, behavior, invert, got)


@pytest.mark.weight(2)
def test_removed_and_isolated(impl):
    """Removed drops the matches; Isolated keeps every stretch, matches and the text between them, as a piece."""
    for behavior in ("Removed", "Isolated"):
        compare(impl, behavior, False)


@pytest.mark.weight(2)
def test_merged_with_previous(impl):
    """MergedWithPrevious glues a match to the piece BEFORE it (a match after a match stays alone)."""
    compare(impl, "MergedWithPrevious", False)


@pytest.mark.weight(2)
def test_merged_with_next(impl):
    """MergedWithNext glues a match to the piece AFTER it (a match before a match stays alone)."""
    compare(impl, "MergedWithNext", False)


@pytest.mark.weight(2)
def test_contiguous(impl):
    """Contiguous joins a run of neighbouring matches into one piece (it is not Isolated: '--' stays one piece)."""
    compare(impl, "Contiguous", False)


@pytest.mark.weight(2)
def test_invert_swaps_matches(impl):
    """invert=True swaps which stretches count as matches: Removed then keeps the dashes, drops the words."""
    compare(impl, "Removed", True)
    compare(impl, "Isolated", True)


@pytest.mark.weight(2)
def test_invert_keeps_the_merge_direction(impl):
    """invert=True changes what is matched, not the direction: MergedWithPrevious still glues to the piece before."""
    for behavior in ("MergedWithPrevious", "MergedWithNext"):
        compare(impl, behavior, True)


@pytest.mark.weight(2)
def test_invert_contiguous(impl):
    """Contiguous with invert=True: the text between the matches is now matched, and neighbours of one kind join."""
    compare(impl, "Contiguous", True)
    compare(impl, "Contiguous", True, ["ab12cd3", "a  b c"], r"\d")


def test_edges(impl):
    """No match, everything matched, and the empty text: every behavior, with and without invert."""
    for behavior in BEHAVIORS:
        for invert in (False, True):
            compare(impl, behavior, invert, ["", "abc", "-", "---"])


def test_empty_matches_cut_nothing(impl):
    """A zero-width match is skipped: it neither cuts the text nor becomes a piece."""
    t = "ab-cd"
    got = impl.split_spans(t, [(0, 0), (2, 3), (5, 5)], "Isolated")
    assert got == [(0, 2), (2, 3), (3, 5)], (
        f"Isolated on 'ab-cd' with the matches [(0, 0), (2, 3), (5, 5)]: your spans are {got!r}")


@pytest.mark.weight(2)
@given(st.text(alphabet="ab1- \n", max_size=30), st.sampled_from(PATTERNS), st.sampled_from(list(BEHAVIORS)),
       st.booleans())
def test_equals_hf_on_any_text(impl, text, pattern, behavior, invert):
    """For any text, pattern and behavior, the pieces are exactly those of Hugging Face's Split."""
    got = ours(impl, text, pattern, behavior, invert)
    assert got == hf_spans(text, pattern, behavior, invert), case(text, pattern, behavior, invert, got)


def test_speed(impl, reference):
    """MergedWithNext on a text with 300 000 matches: at most 3x the reference's time (sending included)."""
    text = "word " * 300_000
    matches = [m.span() for m in regex.finditer(" ", text)]
    expected, ref_time = timed(reference.split_spans, text, matches, "MergedWithNext")
    got, t = timed(impl.split_spans, text, matches, "MergedWithNext")
    assert got == expected, "MergedWithNext: the pieces of the long text are wrong"
    assert t <= 3 * ref_time + 0.05, (f"MergedWithNext: {t:.2f} s against the reference's {ref_time:.2f} s "
                                      "(one pass over the stretches is enough; no insert at the front of a list)")
