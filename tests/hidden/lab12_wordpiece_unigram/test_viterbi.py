"""Hidden suite, lab 12 task 3: viterbi, Unigram's best segmentation and its tie rule."""

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer

from bytes2logits import assets
from bytes2logits.kit.remote import timed

UNK = -100.0


def segmentations(text, scores, max_len):
    """Every segmentation (with the unknown edges of the lattice), brute force: (total, spans)."""
    n = len(text)
    out = []

    def walk(start, spans, total):
        if start == n:
            out.append((total, list(spans)))
            return
        single = False
        for end in range(start + 1, min(n, start + max_len) + 1):
            s = scores.get(text[start:end])
            if s is not None:
                single = single or end == start + 1
                spans.append((start, end))
                walk(end, spans, total + s)
                spans.pop()
        if not single:
            spans.append((start, start + 1))
            walk(start + 1, spans, total + UNK)
            spans.pop()

    walk(0, [], 0.0)
    return out


def expected(text, scores, max_len):
    """The best total; among equal totals, the last piece starts earliest, then the one before, and so on."""
    paths = segmentations(text, scores, max_len)
    best = max(t for t, _ in paths)
    winners = [p for t, p in paths if t == best]
    return min(winners, key=lambda p: [s for s, _ in reversed(p)])


def total(text, spans, scores):
    """The score of a segmentation (unknown edges count UNK)."""
    out = 0.0
    for s, e in spans:
        out += scores.get(text[s:e], UNK)
    return out


def check(impl, text, scores, max_len):
    got = impl.viterbi(text, scores, max_len, UNK)
    assert type(got) is list and all(type(s) is tuple for s in got), "viterbi returns a list of (start, end)"
    case = f"{text!r} with {scores} (unknown: {UNK})"
    covers = not got or (got[0][0] == 0 and got[-1][1] == len(text) and all(a[1] == b[0] for a, b in zip(got, got[1:])))
    assert covers and bool(got) == bool(text), (
        f"{case}: your spans {got!r} do not cover the text, each starting where the last one ended")
    pieces = [text[s:e] for s, e in got]
    for piece in pieces:
        assert piece in scores or len(piece) == 1, (
            f"{case}: your piece {piece!r} is neither a vocabulary entry nor one unknown character")
    want = expected(text, scores, max_len)
    assert total(text, got, scores) == total(text, want, scores), (
        f"{case}: your pieces {pieces!r} total {total(text, got, scores)}, which is not the highest total")
    assert got == want, (f"{case}: your pieces {pieces!r} have the best total, but among equal totals the last piece "
                         "must start earliest (then the one before)")


def test_worked_example(impl):
    """▁aaa with ▁ = a = -1 and aa = -2: three segmentations total -4; the rule picks ▁ a aa."""
    t = "▁aaa"
    got = impl.viterbi(t, {"▁": -1.0, "a": -1.0, "aa": -2.0}, 2, UNK)
    pieces = [t[s:e] for s, e in got]
    assert pieces == ["▁", "a", "aa"], f"three paths total -4; yours is {pieces!r}; the last piece must start earliest"


@pytest.mark.weight(2)
def test_adversarial_ties(impl):
    """Many equal paths: every piece scores the same, so the rule alone decides."""
    for n in range(1, 9):
        check(impl, "a" * n, {"a": -1.0, "aa": -2.0, "aaa": -3.0}, 3)
        check(impl, "ab" * n, {"a": -1.0, "b": -1.0, "ab": -2.0, "ba": -2.0, "aba": -3.0, "bab": -3.0}, 3)


@pytest.mark.weight(2)
def test_unknown_edges(impl):
    """A position with no one-character piece gets an unknown edge (worth unk_score), even where a longer one starts."""
    check(impl, "q", {}, 1)
    check(impl, "xyz", {"xy": -1.0}, 2)
    check(impl, "abc", {"ab": -1.0, "bc": -0.5}, 2)
    assert impl.viterbi("", {"a": -1.0}, 1, UNK) == [], "the empty text has no pieces"


def test_no_unknown_edge_beside_a_one_character_piece(impl):
    """Only a position WITHOUT a one-character entry gets an unknown edge, however low that entry scores."""
    check(impl, "ab", {"a": -150.0, "b": -150.0, "ab": -250.0}, 2)


PIECES = ["a", "b", "c", "ab", "bc", "abc", "ca", "aa", "bb", "cab"]


@pytest.mark.weight(2)
@given(st.text(alphabet="abcx", max_size=9), st.dictionaries(st.sampled_from(PIECES),
       st.sampled_from([-1.0, -2.0, -3.0, -1.5, -0.5]), min_size=1))
def test_optimal_and_tie_rule_against_brute_force(impl, text, scores):
    """For any short text and small model: the best total, and the tie rule, as a brute force finds them."""
    check(impl, text, scores, max(map(len, scores)))


@pytest.fixture(scope="module")
def mon():
    path = assets.path("unigram-mon")
    data = json.loads(path.read_text(encoding="utf-8"))
    return data["model"], HFTokenizer.from_file(str(path))


@pytest.mark.weight(2)
def test_real_unigram_equals_hf(impl, mon):
    """The real Mon/Burmese/English Unigram model: segmentations of UDHR and Botchan words equal HF's."""
    from bytes2logits.lessons.pitfalls import udhr_samples

    model, hf = mon
    vocab = model["vocab"]
    rng = random.Random(8)
    texts = rng.sample(assets.botchan_text().splitlines(), 60)
    samples = udhr_samples()
    texts += [samples[c].text[:300] for c in ("mnw_Mymr", "my_Mymr", "en_Latn") if c in samples]
    words = sorted({w for t in texts for w, _ in hf.pre_tokenizer.pre_tokenize_str(hf.normalizer.normalize_str(t))})
    min_score = min(s for _, s in vocab)
    max_len = max(len(p) for p, _ in vocab)
    for w in words:
        # only the pieces that occur in the word, so that little crosses into your code
        scores = {p: s for i, (p, s) in enumerate(vocab) if i != model["unk_id"] and p in w}
        theirs = [t.value for t in hf.model.tokenize(w)]
        if any(t.startswith("<0x") for t in theirs):
            continue  # byte fallback: the model's job after viterbi, not viterbi's
        spans = impl.viterbi(w, scores, max_len, min_score - 10.0)
        mine = [w[s:e] for s, e in spans]
        assert mine == theirs, f"the real model segments {w!r} differently from Hugging Face: yours is {mine!r}"


def long_case(n, seed=2):
    rng = random.Random(seed)
    pieces = {"".join(rng.choices("abcd", k=rng.randint(1, 6))): -rng.uniform(1, 10) for _ in range(2000)}
    return "".join(rng.choices("abcd", k=n)), pieces


@pytest.mark.weight(2)
def test_long_text_adds_log_probabilities(impl, reference):
    """On a 3 000-character text the best path is still found: add the log-probabilities (a product underflows)."""
    text, pieces = long_case(3000)
    want = reference.viterbi(text, pieces, 6, UNK)
    got = impl.viterbi(text, pieces, 6, UNK)
    wrong = next((text[s:e] for s, e in got if e - s > 1 and text[s:e] not in pieces), None)
    assert wrong is None, (f"a 3 000-character text: your path holds {wrong[:20]!r} ({len(wrong)} characters), "
                           "neither a vocabulary entry nor one unknown character (did the running score reach 0?)")
    assert total(text, got, pieces) == total(text, want, pieces), (
        f"a 3 000-character text: your path totals {total(text, got, pieces):.1f}, not the best total")
    assert got == want, "a 3 000-character text: a best total, but not the path the tie rule picks"


def test_speed(impl, reference):
    """A 3 000-character word over a 2 000-piece model: at most 5x the reference's time (plus 50 ms)."""
    text, pieces = long_case(3000, seed=3)  # not the text of the check above: a memo of its answer cannot help
    want, ref_time = timed(reference.viterbi, text, pieces, 6, UNK)
    got, t = timed(impl.viterbi, text, pieces, 6, UNK)
    assert got == want, "the 3 000-character text gets another segmentation than the reference's"
    assert t <= 5 * ref_time + 0.05, f"{t:.3f} s against the reference's {ref_time:.3f} s"
