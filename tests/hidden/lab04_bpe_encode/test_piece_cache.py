"""Hidden suite, lab 04 task 1: _PieceCache, a dict that computes a missing entry once."""

from bytes2logits.kit.remote import is_instance


def test_computes_on_a_miss_and_remembers(impl):
    """Looking up a missing piece calls the function once, stores its result, and returns it."""
    calls = []

    def compute(piece):
        calls.append(piece)
        return [len(piece)]

    cache = impl._PieceCache(compute)
    assert cache["abc"] == [3]
    assert cache["abc"] == [3] and cache["xy"] == [2]
    assert calls == ["abc", "xy"], "a piece already in the cache is not computed again"
    assert dict(cache) == {"abc": [3], "xy": [2]}


def test_is_a_dict(impl):
    """The cache is a dict subclass (a hit is one dict lookup) that starts empty."""
    cache = impl._PieceCache(lambda piece: [0])
    assert is_instance(cache, dict) and len(cache) == 0
    assert "a" not in cache, "membership does not compute anything"
    cache["a"]
    assert "a" in cache
