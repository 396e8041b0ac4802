"""Hidden suite, lab 08 task 3: _check_curve, marginal_gains and choose_vocab_size (budgets, ties, bad curves)."""

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

CURVE = [(1024, 1.9), (4096, 2.4), (16384, 2.8), (32768, 2.9)]
D = 576


def cost(v, d, tied):
    return (1 if tied else 2) * v * d


def brute_force(curve, d, budget, tied):
    """From first principles: the best value among the points that fit, the smallest size on a tie."""
    fits = [(v, c) for v, c in curve if cost(v, d, tied) <= budget]
    if not fits:
        return None
    best = max(c for _, c in fits)
    return min(v for v, c in fits if c == best)


def choose(impl, *args, **kwargs):
    v = impl.choose_vocab_size(*args, **kwargs)
    assert type(v) is int, f"choose_vocab_size returns a plain int, got {type(v).__name__}"
    return v


# A strictly increasing list of sizes, each with a value; few distinct values, so that ties happen.
curves = st.lists(st.integers(1, 70_000), min_size=1, max_size=12, unique=True).flatmap(
    lambda sizes: st.lists(st.sampled_from([0.5, 1.0, 1.5, 2.0, 2.25, 2.5, 3.0]), min_size=len(sizes),
                           max_size=len(sizes)).map(lambda values: list(zip(sorted(sizes), values))))


@pytest.mark.weight(2)
def test_marginal_gains_example(impl):
    """Gains are (c1 - c0) / (V1 - V0) x per, reported at the upper size of each step."""
    gains = impl.marginal_gains([(256, 1.0), (1256, 2.0), (3256, 2.5)])
    assert type(gains) is list and all(type(p) is tuple and type(p[0]) is int and type(p[1]) is float for p in gains), (
        "a list of (int, float) tuples")
    assert [v for v, _ in gains] == [1256, 3256], "each gain is reported at the upper size V1 of its step"
    assert gains == [(1256, 1.0), (3256, 0.25)], (
        "each step is measured against its previous neighbour: (c1 - c0) / (V1 - V0) x per")
    per_entry = impl.marginal_gains([(256, 1.0), (1256, 2.0), (3256, 2.5)], per=1)
    assert [v for v, _ in per_entry] == [1256, 3256]
    assert [g for _, g in per_entry] == pytest.approx([0.001, 0.00025], rel=1e-12)
    assert impl.marginal_gains([(512, 1.5)]) == [], "a single point has no step"


@pytest.mark.weight(2)
def test_marginal_gains_of_a_log_curve_halve(impl):
    """When every doubling buys the same gain, the gain per 1000 entries halves at every doubling."""
    curve = [(256 * 2**k, 1.0 + 0.2 * k) for k in range(8)]
    gains = [g for _, g in impl.marginal_gains(curve)]
    for a, b in zip(gains, gains[1:]):
        assert b == pytest.approx(a / 2, rel=1e-9), "a curve 1.0 + 0.2 per doubling from 256: the gains must halve"
    assert gains[0] == pytest.approx(0.2 / 256 * 1000, rel=1e-9)


@pytest.mark.weight(2)
@given(curves)
def test_marginal_gains_any_curve(impl, curve):
    """For any curve, one gain per step, equal to the slope times 1000."""
    gains = impl.marginal_gains(curve)
    expected = [(v1, (c1 - c0) / (v1 - v0) * 1000) for (v0, c0), (v1, c1) in zip(curve, curve[1:])]
    assert [v for v, _ in gains] == [v for v, _ in expected], "one gain per step, at the step's upper size"
    assert [g for _, g in gains] == pytest.approx([g for _, g in expected], rel=1e-9, abs=1e-12), (
        "each gain compares a point with the one just before it")


@pytest.mark.weight(2)
def test_choose_best_within_budget(impl):
    """The best point whose embedding fits: untied pays twice, so it gets a smaller V for the same budget."""
    budget = 20_000_000
    assert choose(impl, CURVE, D, budget, tied=True) == 32768, "tied: a size costs V x d"  # 32768 x 576 = 18.9 M
    assert choose(impl, CURVE, D, budget, tied=False) == 16384, (
        "untied: a size costs 2 x V x d (use embedding_params)")  # 2 x 16384 x 576 = 18.9 M
    assert choose(impl, CURVE, D, math.inf, tied=False) == 32768, "an infinite budget takes the best point"


@pytest.mark.weight(3)
def test_exactly_at_budget_fits(impl):
    """A point whose cost equals the budget fits; one parameter less and it does not."""
    assert choose(impl, CURVE, D, cost(16384, D, False), tied=False) == 16384, (
        "a budget equal to a size's cost: that size fits (<=, not <)")
    assert choose(impl, CURVE, D, cost(16384, D, False) - 1, tied=False) == 4096, "one parameter under that cost"
    assert choose(impl, CURVE, D, float(cost(4096, D, True)), tied=True) == 4096, "a float budget works too"


@pytest.mark.weight(3)
def test_ties_go_to_the_smallest_size(impl):
    """When several sizes share the best value, the smallest wins: extra entries that buy nothing are not paid for."""
    flat = [(1024, 2.0), (2048, 2.5), (4096, 2.5), (8192, 2.5)]
    assert choose(impl, flat, D, math.inf, tied=True) == 2048, (
        "curve (1024, 2.0), (2048, 2.5), (4096, 2.5), (8192, 2.5), no limit: the larger sizes buy nothing more")
    assert choose(impl, [(300, 0.0), (400, 0.0)], 1, 10**6, tied=True) == 300, "curve (300, 0.0), (400, 0.0)"


@pytest.mark.weight(3)
def test_best_value_not_largest_size(impl):
    """A measured curve can dip: the answer is the best value that fits, not the largest size that fits."""
    bumpy = [(1024, 2.0), (2048, 2.6), (4096, 2.4), (8192, 2.5)]
    assert choose(impl, bumpy, D, math.inf, tied=False) == 2048, (
        "curve (1024, 2.0), (2048, 2.6), (4096, 2.4), (8192, 2.5), no limit")


def test_nothing_fits(impl):
    """When not even the smallest size fits (or the budget is 0), it is a ValueError that names the smallest size."""
    with pytest.raises(ValueError) as info:
        impl.choose_vocab_size(CURVE, D, cost(1024, D, True) - 1, tied=True)
    assert "1024" in str(info.value), "say which size was the smallest and what it costs"
    with pytest.raises(ValueError):
        impl.choose_vocab_size(CURVE, D, 0, tied=False)


@pytest.mark.weight(3)
@given(curves, st.integers(1, 2048), st.integers(0, 200_000_000), st.booleans())
@example([(1, 0.5), (2, 1.0)], 3, 6, True)       # a budget exactly at the best size's cost
@example([(10, 1.0), (20, 1.0), (30, 0.5)], 1, 100, False)  # a tie, and a dip at the largest size
def test_choose_matches_first_principles(impl, curve, d, budget, tied):
    """For any curve and budget: the brute-force answer, or a ValueError exactly when nothing fits."""
    expected = brute_force(curve, d, budget, tied)
    if expected is None:
        with pytest.raises(ValueError):
            impl.choose_vocab_size(curve, d, budget, tied=tied)
    else:
        assert choose(impl, curve, d, budget, tied=tied) == expected, (
            f"curve={curve}, d_model={d}, budget_params={budget}, tied={tied}")


def refused_everywhere(impl, curve, error):
    """The three functions that take a curve all refuse it with the same kind of error."""
    for call in (lambda: impl.choose_vocab_size(curve, D, math.inf, tied=True), lambda: impl.marginal_gains(curve),
                 lambda: impl._check_curve(curve)):
        with pytest.raises(error):
            call()


def test_malformed_curves_are_refused(impl):
    """Empty curves, repeated or decreasing sizes, sizes <= 0 and bad values are ValueErrors, in all three functions."""
    bad = [
        [],
        [(1024, 2.0), (1024, 2.1)],
        [(2048, 2.0), (1024, 2.1)],
        [(0, 1.0)],
        [(-256, 1.0)],
        [(1024, float("nan"))],
        [(1024, float("inf"))],
        [(1024, -0.5)],
    ]
    for curve in bad:
        refused_everywhere(impl, curve, ValueError)


def test_mistyped_curves_are_refused(impl):
    """A point that is not a pair, a size that is not an int (1024.0, True) or a non-number value is a TypeError."""
    bad = [
        [(1024,)],
        [(1024, 2.0, 3)],
        [1024],
        [(1024.0, 2.0)],
        [(True, 2.0)],
        [("1024", 2.0)],
        [(1024, "2.0")],
        [(1024, None)],
    ]
    for curve in bad:
        refused_everywhere(impl, curve, TypeError)


def test_check_curve_returns_clean_points(impl):
    """_check_curve gives back a new list of (int, float) tuples, ints as values turned into floats."""
    given_curve = [[256, 1], (512, 1.5)]
    points = impl._check_curve(given_curve)
    assert type(points) is list and points is not given_curve
    assert all(type(p) is tuple and type(p[0]) is int and type(p[1]) is float for p in points)
    assert points == [(256, 1.0), (512, 1.5)]


def test_bad_budgets_and_widths(impl):
    """A budget must be a number >= 0 (not a bool, a str or NaN); d_model a positive int; tied a bool."""
    with pytest.raises(ValueError):
        impl.choose_vocab_size(CURVE, D, -1, tied=True)
    with pytest.raises(ValueError):
        impl.choose_vocab_size(CURVE, D, float("nan"), tied=True)
    for budget in ("20000000", True, None):
        with pytest.raises(TypeError):
            impl.choose_vocab_size(CURVE, D, budget, tied=True)
    with pytest.raises(ValueError):
        impl.choose_vocab_size(CURVE, 0, math.inf, tied=True)
    with pytest.raises(TypeError):
        impl.choose_vocab_size(CURVE, 576.0, math.inf, tied=True)
    with pytest.raises(TypeError):
        impl.choose_vocab_size(CURVE, D, math.inf, tied="false")
