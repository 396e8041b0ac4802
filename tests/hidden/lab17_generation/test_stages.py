"""Hidden suite, lab 17 task 1: softmax, the repetition penalty, and the top-k, top-p and min-p filters.

Every filter is compared with an oracle that sorts the whole candidate list (larger logit first, equal logits
by smaller token id) and cuts it by the definition. Logits come with ties, -inf entries and vocabularies of
150 000 (where a full sort is what the partial selection must avoid); top-p's running sum is allowed either
answer only where it lands within 1e-9 of p (there rounding decides).
"""

import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

S = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("lab17_support.py"))))
EXAMPLES = min(100, settings().max_examples)
NAMES = ("softmax", "_descending_order", "_top_positions", "apply_repetition_penalty", "top_k_filter",
         "top_p_filter", "min_p_filter")
SPEED_FACTOR = 4.0


@pytest.fixture(autouse=True)
def fenced(impl):
    """The package's own stage functions raise while these checks run."""
    with S.fence(impl, [(S.GEN, n) for n in NAMES]):
        yield


VALUES = st.one_of(st.sampled_from([-np.inf, 0.0, 1.0, 2.5, -3.0]), st.floats(-40, 40, allow_nan=False))


@st.composite
def candidates(draw, min_size=1, max_size=80):
    """(ids, logits): distinct token ids in any order (as after an earlier filter) with tied and -inf logits."""
    logits = draw(st.lists(VALUES, min_size=min_size, max_size=max_size))
    if all(x == -np.inf for x in logits):
        logits[0] = 0.0
    n = len(logits)
    seed = draw(st.integers(0, 2**32 - 1))
    ids = np.random.default_rng(seed).permutation(3 * n + 1)[:n].astype(np.int64)
    return ids, np.array(logits, dtype=np.float64)


def big(seed: int, n: int = 150_000, decimals: int = 1) -> np.ndarray:
    """A vocabulary-sized logit row, rounded so that many logits tie (also at the top-k threshold)."""
    return np.round(np.random.default_rng(seed).standard_normal(n) * 3.0, decimals)


def as_list(x):
    return np.asarray(x).tolist()


def check_pair(got, want_ids, want_logits, what):
    assert type(got) is tuple and len(got) == 2, f"{what}: return a tuple (ids, logits)"
    ids, logits = got
    assert as_list(ids) == as_list(want_ids), f"{what}: the kept ids (or their order) differ from the definition"
    assert np.array_equal(np.asarray(logits, np.float64), np.asarray(want_logits, np.float64)), \
        f"{what}: the logits must be the kept candidates' own logits, in the same order as the ids"


# --------------------------------------------------------------------------------------------- softmax

@settings(max_examples=EXAMPLES)
@given(c=candidates())
def test_softmax_is_a_distribution(impl, c):
    """softmax returns float64 probabilities that sum to 1, exp(l_i) / sum exp(l_j), with -inf giving exactly 0."""
    _, logits = c
    p = np.asarray(impl.softmax(logits.copy()))
    assert p.shape == logits.shape and p.dtype == np.float64, "softmax returns float64 of the logits' shape"
    assert abs(p.sum() - 1.0) < 1e-9, "the probabilities must add up to 1"
    assert np.allclose(p, S.softmax64(logits), rtol=1e-9, atol=1e-300), "softmax differs from exp(l) / sum exp(l)"
    assert (p[logits == -np.inf] == 0).all(), "a -inf logit has probability exactly 0"


def test_softmax_does_not_overflow(impl):
    """Huge logits (1000, 800) do not overflow: subtract the maximum before exp."""
    with np.errstate(over="raise", invalid="raise"):
        p = np.asarray(impl.softmax(np.array([1000.0, 1000.0, 800.0, -np.inf])))
    assert np.isfinite(p).all() and np.allclose(p, [0.5, 0.5, 0.0, 0.0]), "softmax([1000, 1000, 800, -inf])"


# ----------------------------------------------------------------------------------------- the orders

@settings(max_examples=EXAMPLES)
@given(c=candidates())
def test_descending_order_breaks_ties_by_smaller_id(impl, c):
    """_descending_order gives the positions by logit, largest first; equal logits: the smaller id first."""
    ids, logits = c
    got = as_list(impl._descending_order(ids.copy(), logits.copy()))
    assert got == S.full_order(ids, logits), "the order must be by logit descending, ties by smaller id"


@settings(max_examples=EXAMPLES)
@given(c=candidates(), k=st.integers(1, 90))
def test_top_positions_equal_the_first_k_of_a_full_sort(impl, c, k):
    """_top_positions(ids, logits, k) equals the first k positions of the full tie-broken order (k may exceed n)."""
    ids, logits = c
    got = as_list(impl._top_positions(ids.copy(), logits.copy(), k))
    assert got == S.full_order(ids, logits)[:k], "the k best positions, in descending order, ties by smaller id"


@pytest.mark.parametrize("k", [1, 40, 1000])
def test_top_positions_on_a_huge_vocabulary(impl, k):
    """On 150 000 logits with many ties at the k-th value, _top_positions picks exactly the full sort's first k."""
    for seed in (0, 1):
        logits = big(seed)
        ids = np.arange(len(logits))
        want = np.lexsort((ids, -logits))[:k].tolist()
        assert as_list(impl._top_positions(ids, logits, k)) == want, \
            f"k={k} of 150 000: the tie among equal logits at the k-th value goes to the smaller ids"


# ------------------------------------------------------------------------------------ the penalty

@settings(max_examples=EXAMPLES)
@given(c=candidates(min_size=2, max_size=40), data=st.data(),
       penalty=st.sampled_from([1.0, 0.5, 1.1, 1.3, 2.0]), last_n=st.sampled_from([-1, 0, 1, 3, 64]))
def test_repetition_penalty_matches_the_definition(impl, c, data, penalty, last_n):
    """Distinct tokens among the last last_n of history, once each: positive logits / penalty, others * penalty.

    last_n 0 is off, -1 the whole history; a token repeated in the window is still penalised only once."""
    _, logits = c
    history = data.draw(st.lists(st.integers(0, len(logits) - 1), max_size=12))
    before = logits.copy()
    got = np.asarray(impl.apply_repetition_penalty(logits, history, penalty, last_n))
    assert np.array_equal(logits, before), "apply_repetition_penalty must not modify the logits it is given"
    want = S.penalty_oracle(before, history, penalty, last_n)
    assert got.dtype == np.float64 and np.array_equal(got, want), \
        f"penalty {penalty}, last_n {last_n}: the penalised logits differ from the sign rule"


def test_repetition_penalty_sign_rule(impl):
    """A positive logit is divided by the penalty, a zero or negative one multiplied: both become less likely."""
    got = np.asarray(impl.apply_repetition_penalty(np.array([2.0, -2.0, 0.0, 1.0]), [0, 1, 2, 0, 0], 2.0, 64))
    assert got.tolist() == [1.0, -4.0, 0.0, 1.0], "sign rule, each distinct token once, token 3 untouched"
    got = np.asarray(impl.apply_repetition_penalty(np.array([2.0, 4.0]), [0, 1], 2.0, 1))
    assert got.tolist() == [2.0, 2.0], "last_n=1 looks only at the last id of the history"


def test_repetition_penalty_refuses_ids_outside_the_vocabulary(impl):
    """A history id outside 0 .. len(logits)-1 (inside the window) raises ValueError: never a silent wrap-around."""
    for history in ([0, 5], [-1], [3, 1]):
        with pytest.raises(ValueError):
            impl.apply_repetition_penalty(np.array([1.0, 2.0, 3.0]), history, 1.5, 64)


# ------------------------------------------------------------------------------------------ filters

@settings(max_examples=EXAMPLES)
@given(c=candidates(), k=st.integers(-2, 90))
def test_top_k_matches_a_full_sort(impl, c, k):
    """top_k_filter keeps the k best (ties by smaller id), sorted largest first; k <= 0 or k >= n keeps all as is."""
    ids, logits = c
    before = (ids.copy(), logits.copy())
    got = impl.top_k_filter(ids, logits, k)
    assert np.array_equal(ids, before[0]) and np.array_equal(logits, before[1]), "the inputs must not be modified"
    check_pair(got, *S.top_k_oracle(ids, logits, k), f"k={k} of {len(ids)}")


@pytest.mark.parametrize("k", [40, 1])
def test_top_k_on_a_huge_vocabulary(impl, k):
    """top_k_filter on 150 000 logits (many ties) equals the full sort's first k, sorted."""
    logits = big(3)
    ids = np.arange(len(logits))
    check_pair(impl.top_k_filter(ids, logits, k), *S.top_k_oracle(ids, logits, k), f"k={k} of 150 000")


def check_top_p(got, ids, logits, p, what):
    assert type(got) is tuple and len(got) == 2, f"{what}: return a tuple (ids, logits)"
    if p >= 1.0 or len(logits) <= 1:
        check_pair(got, ids, logits, what)
        return
    order = np.lexsort((ids, -logits))
    sorted_ids, sorted_logits = ids[order], logits[order]
    got_ids = as_list(got[0])
    counts = S.top_p_counts(sorted_logits, p)
    assert len(got_ids) in counts, (f"{what}: keep the smallest set of best candidates whose probabilities "
                                    "reach p (the one that reaches it included)")
    check_pair(got, sorted_ids[: len(got_ids)], sorted_logits[: len(got_ids)], what)


@settings(max_examples=EXAMPLES)
@given(c=candidates(), p=st.one_of(st.sampled_from([0.5, 0.9, 0.95, 1.0, 1e-6]), st.floats(0.01, 1.0)))
def test_top_p_matches_the_running_sum(impl, c, p):
    """top_p_filter: softmax over the candidates, walk down the tie-broken order, keep up to the one reaching p."""
    ids, logits = c
    before = (ids.copy(), logits.copy())
    got = impl.top_p_filter(ids, logits, p)
    assert np.array_equal(ids, before[0]) and np.array_equal(logits, before[1]), "the inputs must not be modified"
    check_top_p(got, before[0], before[1], p, f"p={p} over {len(ids)} candidates")


@pytest.mark.parametrize("scale,p", [(3.0, 0.9), (0.3, 0.95), (0.02, 0.5), (8.0, 0.5)])
def test_top_p_on_a_huge_vocabulary(impl, scale, p):
    """top_p_filter on 150 000 logits, peaked or nearly flat: a flat one needs far more than the first 256.

    Start with the best _TOP_P_FIRST_TRY and widen the window until the running sum reaches p."""
    logits = np.round(np.random.default_rng(7).standard_normal(150_000) * scale, 3)
    ids = np.arange(len(logits))
    check_top_p(impl.top_p_filter(ids, logits, p), ids, logits, p, f"150 000 logits (scale {scale}), p={p}")


@settings(max_examples=EXAMPLES)
@given(c=candidates(), p=st.one_of(st.sampled_from([0.0, 0.05, 0.5, 1.0, -0.1]), st.floats(0.001, 1.0)))
def test_min_p_matches_the_definition(impl, c, p):
    """min_p_filter keeps candidates with probability >= p * the best one's, in their order; p <= 0 keeps all.

    Within 1e-9 of the threshold logit either answer is accepted (rounding)."""
    ids, logits = c
    before = (ids.copy(), logits.copy())
    got = impl.min_p_filter(ids, logits, p)
    assert np.array_equal(ids, before[0]) and np.array_equal(logits, before[1]), "the inputs must not be modified"
    assert type(got) is tuple and len(got) == 2, "return a tuple (ids, logits)"
    if p <= 0:
        check_pair(got, ids, logits, f"min_p={p} (off)")
        return
    thr = logits.max() + np.log(p)
    must, may = logits > thr + 1e-9, logits >= thr - 1e-9
    kept = as_list(got[0])
    pos = {int(i): j for j, i in enumerate(ids.tolist())}
    assert all(k in pos for k in kept), f"min_p={p}: returned ids that are not candidates"
    idx = [pos[k] for k in kept]
    assert idx == sorted(idx), f"min_p={p}: keep the candidates' order"
    assert set(np.flatnonzero(must).tolist()) <= set(idx) <= set(np.flatnonzero(may).tolist()), \
        f"min_p={p}: keep exactly the candidates with prob >= min_p * max prob (logit >= max + log(min_p))"
    check_pair(got, ids[idx], logits[idx], f"min_p={p}")


# ------------------------------------------------------------------------------------------- speed

# Each timed pair filters a logit row of its own (a memo of earlier answers has nothing to answer from), and
# the row travels inside the timed call, so no code of the submission can see it before its time runs: as
# int16 codes (logit x 10, 300 KB; about 0.35 ms of pipe and division on both sides, next to the reference's
# 2-7 ms), turned into the row there. The untimed first call gets a row of its own. A timed call returns a
# fingerprint of what it kept, made in the same call: how many ids, the first and last 16, a position-weighted
# sum of all ids, the sum and the first 16 of the logits. Every pair's fingerprints must be equal (the rows'
# top-p sums land nowhere near p, so that the tie-broken definition allows exactly one answer, the reference's).
_FILTERED = ("lambda f, arg: (lambda codes: (lambda x: (lambda r: (lambda a, b: (int(a.size), a[:16].tolist(), "
             "a[-16:].tolist(), int((a.astype(np.int64) * np.arange(1, a.size + 1)).sum()), float(b.sum()), "
             "b[:16].tolist()))(np.asarray(r[0]), np.asarray(r[1], dtype=np.float64)) "
             "if type(r) is tuple and len(r) == 2 else 'not a tuple (ids, logits)')"
             "(f(np.arange(x.size), x, arg)))(codes / 10.0))")
SPEED_PAIRS = 5


def logit_codes(i: int) -> np.ndarray:
    """Pair ``i``'s row as int16 codes: ``codes / 10`` is ``big()``'s kind of row (standard normal x 3, one
    decimal, many ties)."""
    return np.rint(np.random.default_rng([17, i]).standard_normal(150_000) * 30).astype(np.int16)


def test_filters_are_fast_on_a_huge_vocabulary(impl, reference):
    """top_k (k=40) and top_p (top-k off, peaked logits) on 150 000 logits take at most 4x the reference's time.

    Both select with argpartition and sort only the few survivors: no full sort of the vocabulary."""
    codes = [logit_codes(i) for i in range(SPEED_PAIRS + 1)]  # the last one for the untimed first call
    for name, arg in (("top_k_filter", 40), ("top_p_filter", 0.9)):
        mine = S.worker_eval(impl, _FILTERED)(getattr(impl, name), arg)
        ref = S.worker_eval(reference, _FILTERED)(getattr(reference, name), arg)
        ref(codes[SPEED_PAIRS]), mine(codes[SPEED_PAIRS])

        def same(i, got, want, name=name):
            assert got == want, f"{name} on 150 000 logits: a timed call kept other candidates than the definition's"

        best_ref, best, ok = S.race(lambda i: mine(codes[i]), lambda i: ref(codes[i]), SPEED_FACTOR, slack=0.004,
                                    pairs=SPEED_PAIRS, check=same)
        print(f"{name}: {best * 1e3:.1f} ms against the reference's {best_ref * 1e3:.1f} ms")
        assert ok, (f"{name} on 150 000 logits took {best * 1e3:.1f} ms, {best / best_ref:.1f}x the reference's "
                    f"{best_ref * 1e3:.1f} ms (limit {SPEED_FACTOR:g}x): select the best with argpartition")
