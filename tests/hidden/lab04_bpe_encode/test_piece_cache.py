"""Hidden suite, lab 04 task 1: _PieceCache, a dict that computes a missing entry once."""

from bytes2logits.kit.remote import is_instance


def counting():
    """A ``compute`` function that records every piece it is asked for."""
    calls = []

    def compute(piece):
        calls.append(piece)
        return [len(piece)]

    return compute, calls


def test_a_miss_is_computed_and_returned(impl):
    """Looking up a missing piece returns what compute(piece) returns."""
    compute, _ = counting()
    cache = impl._PieceCache(compute)
    got = cache["abc"]
    assert got == [3], f"cache['abc'] with compute = lambda p: [len(p)] gave {got!r}"


def test_a_miss_is_stored(impl):
    """A computed piece is stored in the cache itself (it is a dict of piece -> ids)."""
    compute, _ = counting()
    cache = impl._PieceCache(compute)
    cache["abc"]
    cache["xy"]
    held = dict(cache)
    assert held == {"abc": [3], "xy": [2]}, f"after looking up 'abc' and 'xy' the cache holds {held!r}"


def test_a_hit_is_not_computed_again(impl):
    """A piece already in the cache is a plain dict hit: compute is called once per distinct piece."""
    compute, calls = counting()
    cache = impl._PieceCache(compute)
    for piece in ["abc", "abc", "xy", "abc", "xy"]:
        cache[piece]
    assert calls == ["abc", "xy"], f"looking up abc, abc, xy, abc, xy called compute on {calls!r}"


def test_is_a_dict(impl):
    """The cache is a dict subclass (a hit is one dict lookup) that starts empty."""
    cache = impl._PieceCache(lambda piece: [0])
    assert is_instance(cache, dict), "_PieceCache must subclass dict"
    assert len(cache) == 0, "a new cache is empty"


def test_membership_does_not_compute(impl):
    """`piece in cache` only asks whether the piece is stored: it computes nothing."""
    compute, calls = counting()
    cache = impl._PieceCache(compute)
    assert "a" not in cache, "'a' in a new cache must be False"
    assert calls == [], "`in` called compute"
    cache["a"]
    assert "a" in cache, "after cache['a'] the piece is stored"
