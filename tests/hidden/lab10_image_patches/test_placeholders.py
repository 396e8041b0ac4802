"""Hidden suite, lab 10 task 4: expand_placeholders."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

IMAGE = 99

# Weights: the expansion itself (ids and slots) carries most of the points; argument checks a small share.
RULE, CONCEPT, VALIDATION = 4, 2, 1


def slow_expand(ids, counts):
    """First principles: copy the ids one by one; the n-th placeholder becomes counts[n] copies."""
    out, slots, n = [], [], 0
    for i in ids:
        if i == IMAGE:
            slots.append(list(range(len(out), len(out) + counts[n])))
            out += [IMAGE] * counts[n]
            n += 1
        else:
            out.append(i)
    return out, slots


@st.composite
def prompts(draw):
    """Text ids (never the placeholder) with 0 to 4 placeholders anywhere, and one count per placeholder."""
    text = draw(st.lists(st.integers(0, 60), max_size=20))
    m = draw(st.integers(0, 4))
    ids = list(text)
    for _ in range(m):
        ids.insert(draw(st.integers(0, len(ids))), IMAGE)
    counts = draw(st.lists(st.integers(1, 7), min_size=m, max_size=m))
    return ids, counts


def check_types(expanded, slots):
    assert type(expanded) is list and all(type(i) is int for i in expanded), \
        "expanded ids must be a list of Python ints"
    assert type(slots) is list and all(type(s) is range for s in slots), "slots must be a list of range objects"


@pytest.mark.weight(RULE)
def test_examples(impl):
    """Each placeholder becomes its count of copies; slots are the ranges those copies occupy."""
    expanded, slots = impl.expand_placeholders([1, 99, 2, 99, 3], 99, [2, 3])
    check_types(expanded, slots)
    copies = expanded.count(99)
    assert copies == 5, (f"[1, 99, 2, 99, 3] with counts [2, 3]: {copies} copies of the placeholder; each "
                         "placeholder is replaced by exactly its count of copies (it is one of them, not extra)")
    assert [len(s) for s in slots] == [2, 3], "[1, 99, 2, 99, 3] with counts [2, 3]: image n gets counts[n] slots"
    assert [expanded[p] for s in slots for p in s] == [99] * 5, \
        "[1, 99, 2, 99, 3] with counts [2, 3]: a slot points at a text id; slots index the expanded list"
    assert expanded == [1, 99, 99, 2, 99, 99, 99, 3] and slots == [range(1, 3), range(4, 7)]
    expanded, slots = impl.expand_placeholders([99, 5, 6], 99, 4)
    assert expanded == [99, 99, 99, 99, 5, 6] and slots == [range(0, 4)]
    expanded, slots = impl.expand_placeholders([7, 8, 99], 99, [1])
    assert expanded == [7, 8, 99] and slots == [range(2, 3)]
    expanded, slots = impl.expand_placeholders([99, 99], 99, [2, 1])
    assert expanded == [99, 99, 99] and slots == [range(0, 2), range(2, 3)], "adjacent images stay separate"


@pytest.mark.weight(RULE)
@given(prompts())
def test_matches_a_slow_expansion(impl, case):
    """For random prompts, the ids and slots are exactly those of a one-by-one copy."""
    ids, counts = case
    expanded, slots = impl.expand_placeholders(ids, IMAGE, counts)
    check_types(expanded, slots)
    want_ids, want_slots = slow_expand(ids, counts)
    assert expanded == want_ids
    assert [list(s) for s in slots] == want_slots


@pytest.mark.weight(RULE)
@given(prompts())
def test_properties(impl, case):
    """Length grows by sum(counts) - placeholders, text keeps its order, slots tile the placeholder copies."""
    ids, counts = case
    original = list(ids)
    expanded, slots = impl.expand_placeholders(ids, IMAGE, counts)
    assert ids == original, "the input ids must not be changed"
    assert len(expanded) == len(ids) - len(counts) + sum(counts)
    in_slots = [p for s in slots for p in s]
    assert in_slots == sorted(set(in_slots)), "slots come in order and never overlap"
    assert [len(s) for s in slots] == counts, "image n gets counts[n] slots"
    assert [p for p, i in enumerate(expanded) if i == IMAGE] == in_slots, "every placeholder copy is in a slot"
    assert [i for p, i in enumerate(expanded) if p not in set(in_slots)] == [i for i in ids if i != IMAGE], \
        "the text ids keep their order"


@pytest.mark.weight(CONCEPT)
@given(prompts(), st.integers(1, 6))
def test_one_count_for_every_image(impl, case, k):
    """An int count means every placeholder gets that many slots."""
    ids, _ = case
    m = ids.count(IMAGE)
    assert impl.expand_placeholders(ids, IMAGE, k) == impl.expand_placeholders(ids, IMAGE, [k] * m)


@pytest.mark.weight(VALIDATION)
def test_numpy_inputs_give_python_ints(impl):
    """ids and counts may be NumPy integers; the result still holds Python ints."""
    expanded, slots = impl.expand_placeholders(np.array([5, 99, 6], dtype=np.int64), np.int64(99), [np.int32(3)])
    check_types(expanded, slots)
    assert expanded == [5, 99, 99, 99, 6] and slots == [range(1, 4)]
    expanded, slots = impl.expand_placeholders((5, 99), 99, np.int64(2))
    check_types(expanded, slots)
    assert expanded == [5, 99, 99]


@pytest.mark.weight(CONCEPT)
def test_no_placeholder(impl):
    """A prompt without images comes back as an equal new list and no slots."""
    ids = [4, 5, 6]
    for counts in ([], 3):
        expanded, slots = impl.expand_placeholders(ids, 99, counts)
        check_types(expanded, slots)
        assert expanded == ids and expanded is not ids and slots == []


@pytest.mark.weight(VALIDATION)
def test_count_mismatch_is_refused(impl):
    """A counts list longer or shorter than the number of placeholders is a ValueError naming both numbers."""
    for ids, counts, numbers in [([1, 99, 2, 99], [4], ("2", "1")), ([99], [4, 4, 4], ("1", "3")),
                                 ([1, 2], [5], ("0", "1"))]:
        with pytest.raises(ValueError) as info:
            impl.expand_placeholders(ids, 99, counts)
        assert all(n in str(info.value) for n in numbers), "say how many placeholders and how many counts"


@pytest.mark.weight(CONCEPT)
def test_expanding_twice_is_refused(impl):
    """Expanding an already expanded prompt again with one count per image fails the count check."""
    once, _ = impl.expand_placeholders([1, 99, 2], 99, [4])
    with pytest.raises(ValueError):
        impl.expand_placeholders(once, 99, [4])


@pytest.mark.weight(VALIDATION)
def test_bad_values_are_refused(impl):
    """Counts below 1 are ValueErrors; non-integer ids, counts or placeholder ids are TypeErrors."""
    for counts in ([0, 2], [2, -1], 0, [3, 0]):
        with pytest.raises(ValueError):
            impl.expand_placeholders([99, 1, 99], 99, counts)
    for ids in ([1, 2.0, 99], [1, "2", 99], [True, 99]):
        with pytest.raises(TypeError):
            impl.expand_placeholders(ids, 99, [2])
    for counts in ([2.0], ["2"], [True]):
        with pytest.raises(TypeError):
            impl.expand_placeholders([99], 99, counts)
    with pytest.raises(TypeError):
        impl.expand_placeholders([99], 99.0, [2])
