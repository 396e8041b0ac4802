"""Hidden suite, lab 17 task 2: Sampler, llama.cpp's chain with a seeded generator.

``distribution`` is compared with an oracle chain written from the definitions (penalty -> top_k -> top_p ->
min_p -> temperature softmax). ``sample`` is checked statistically against ``distribution``: at fixed seeds,
thousands of draws go into a chi-square test whose threshold a correct sampler passes with a huge margin
(the statistic's mean is the number of candidates minus 1) while a wrong order of the stages or an
off-by-one in the draw moves the frequencies by far more.
"""

import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

S = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("lab17_support.py"))))
EXAMPLES = min(60, settings().max_examples)
N_DRAWS = 4000


@pytest.fixture(autouse=True)
def fenced(impl):
    """The package's own Sampler methods and stage functions raise while these checks run."""
    stages = ("softmax", "apply_repetition_penalty", "top_k_filter", "top_p_filter", "min_p_filter")
    with S.fence(impl, [(S.GEN, n) for n in stages]
                 + S.methods("Sampler", ("__init__", "_penalised", "distribution", "sample", "greedy"))):
        yield


def settings_of(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.0, repeat_last_n=64):
    return dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, repeat_penalty=repeat_penalty,
                repeat_last_n=repeat_last_n)


def oracle(logits, history, kw):
    return S.chain_oracle(logits, history, kw["temperature"], kw["top_k"], kw["top_p"], kw["min_p"],
                          kw["repeat_penalty"], kw["repeat_last_n"])


def test_bad_settings_are_refused(impl):
    """Negative temperature, top_p outside (0, 1], min_p > 1, repeat_penalty <= 0, repeat_last_n < -1, a bad seed.

    ValueError for a bad value (TypeError for a non-number is also accepted)."""
    for bad in (dict(temperature=-0.5), dict(top_p=0.0), dict(top_p=1.5), dict(min_p=1.5),
                dict(repeat_penalty=0.0), dict(repeat_penalty=-1.0), dict(repeat_last_n=-2), dict(seed=-1),
                dict(temperature=float("nan")), dict(top_p=float("inf"))):
        with pytest.raises((ValueError, TypeError)):
            impl.Sampler(**bad)


def test_bad_logits_are_refused(impl):
    """NaN or +inf logits, an empty or 2-D row, and a row that is all -inf raise ValueError before any draw."""
    s = impl.Sampler(seed=0)
    for logits in (np.array([0.0, np.nan, 1.0]), np.array([np.inf, 0.0]), np.array([]), np.zeros((2, 3)),
                   np.array([-np.inf, -np.inf])):
        with pytest.raises(ValueError):
            s.sample(logits)
    with pytest.raises(ValueError):
        impl.Sampler.greedy().sample(np.array([1.0, np.nan]))


@settings(max_examples=EXAMPLES)
@given(logits=st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0, -1.0, -np.inf]), min_size=1, max_size=30)
       .filter(lambda v: any(x != -np.inf for x in v)))
def test_greedy_is_the_argmax_with_the_smaller_id_on_ties(impl, logits):
    """Sampler.greedy() (and temperature=0) returns the highest logit's id; equal best logits: the smaller id."""
    x = np.array(logits)
    want = S.full_order(np.arange(len(x)), x)[0]
    assert impl.Sampler.greedy().sample(x) == want, "greedy picks the argmax, the smaller id among ties"
    ids, probs = impl.Sampler(temperature=0.0).distribution(x)
    assert np.asarray(ids).tolist() == [want] and np.asarray(probs).tolist() == [1.0], \
        "with temperature 0, distribution() is the single best token with probability 1"


def test_greedy_sees_the_repetition_penalty(impl):
    """temperature 0 takes the argmax *after* the repetition penalty."""
    s = impl.Sampler(temperature=0.0, repeat_penalty=4.0)
    assert s.sample(np.array([3.0, 1.0, 0.5]), [0]) == 1, "3 / 4 < 1: token 1 wins once token 0 is penalised"


@settings(max_examples=EXAMPLES)
@given(seed=st.integers(0, 2**32 - 1), n=st.sampled_from([5, 60, 500]),
       temperature=st.sampled_from([0.3, 0.8, 1.0, 1.7]), top_k=st.sampled_from([0, 1, 3, 40]),
       top_p=st.sampled_from([1.0, 0.95, 0.6, 0.2]), min_p=st.sampled_from([0.0, 0.05, 0.3]),
       penalty=st.sampled_from([1.0, 1.3]))
def test_distribution_is_llama_cpp_chain(impl, seed, n, temperature, top_k, top_p, min_p, penalty):
    """distribution() = penalty -> top_k -> top_p -> min_p -> softmax(logits / temperature), ids best first.

    The filters see the logits before temperature; the probabilities sum to 1."""
    rng = np.random.default_rng(seed)
    logits = np.round(rng.standard_normal(n) * 2.5, 1)
    history = rng.integers(0, n, 6).tolist()
    kw = settings_of(temperature, top_k, top_p, min_p, penalty)
    ids, probs = impl.Sampler(**kw, seed=1).distribution(logits, history)
    want_ids, want_probs = oracle(logits, history, kw)
    ids, probs = np.asarray(ids), np.asarray(probs, np.float64)
    assert ids.tolist() == want_ids.tolist(), f"{kw}: the surviving candidates (or their order) differ"
    assert np.allclose(probs, want_probs, rtol=1e-9, atol=1e-12), f"{kw}: the probabilities differ"


def test_same_seed_same_tokens(impl):
    """Two samplers with the same seed, logits and history draw the same ids; another seed draws others."""
    logits = np.random.default_rng(0).standard_normal(300) * 2
    runs = []
    for seed in (7, 7, 8):
        s = impl.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=seed)
        runs.append([s.sample(logits, [1, 2]) for _ in range(30)])
    assert runs[0] == runs[1], "the same seed must give the same ids"
    assert runs[0] != runs[2], "another seed should give other ids"
    assert all(type(t) is int for t in runs[0]), "sample returns a Python int"


CASES = [
    ("uniform-ish", np.log([0.3, 0.25, 0.2, 0.15, 0.1]), settings_of(1.0, 0, 1.0, 0.0)),
    ("cold top-p", np.array([2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -2.0]), settings_of(0.5, 0, 0.9, 0.0)),
    ("hot top-p", np.array([2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -2.0]), settings_of(2.0, 0, 0.8, 0.0)),
    ("defaults", np.round(np.random.default_rng(3).standard_normal(100) * 2, 1), settings_of()),
    ("penalty", np.array([3.0, 2.0, 1.0, 0.0, -1.0]), settings_of(1.0, 4, 1.0, 0.0, 2.0)),
]


@pytest.mark.parametrize("name,logits,kw", CASES, ids=[c[0] for c in CASES])
def test_sample_frequencies_follow_the_distribution(impl, name, logits, kw):
    """sample()'s frequencies over 4000 draws at a fixed seed fit distribution() (chi-square, generous threshold).

    The draw: u uniform in [0, 1), the candidate whose stretch of the running sum u lands in."""
    history = [0, 1] if kw["repeat_penalty"] != 1.0 else []
    want_ids, want_probs = oracle(logits, history, kw)
    draw = S.worker_eval(impl, "lambda s, logits, history, n: [s.sample(logits, history) for _ in range(n)]")
    for seed in (11, 12):
        s = impl.Sampler(**kw, seed=seed)
        got = draw(s, logits, history, N_DRAWS)
        index = {int(t): j for j, t in enumerate(want_ids.tolist())}
        assert all(t in index for t in got), f"{name}: sample() returned a token the chain had filtered out"
        counts = np.bincount([index[t] for t in got], minlength=len(want_ids))
        expected = want_probs * N_DRAWS
        chi2 = float(((counts - expected) ** 2 / expected).sum())
        limit = 3 * len(want_ids) + 30
        assert chi2 < limit, (f"{name}, seed {seed}: the frequencies of sample() do not fit distribution() "
                              f"(chi-square {chi2:.0f}, limit {limit}): check the order of the stages and the draw")
