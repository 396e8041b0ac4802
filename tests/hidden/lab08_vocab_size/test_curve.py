"""Hidden suite, lab 08 task 1: vocab_prefix and compression_curve (the merge-prefix slice, chars and bytes)."""

import random
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bytes2logits.kit.remote import timed

# Independent helpers, written here so that this suite does not move when another lab's suite does: a slow,
# obviously correct token counter (per piece, fuse the adjacent pair of lowest rank, leftmost first), random
# merge lists (rank order, not learning order, decides) and a Zipf corpus of words.

ABC = [(b"a", b"b"), (b"ab", b"c")]

# The slow, first-principles BPE code the suites of labs 03, 04 and 08 share.
oracle_module = SimpleNamespace(**runpy.run_path(str(Path(__file__).parents[1] / "bpe_oracle.py")))
random_merges = oracle_module.random_merges


def slow_token_count(text, merges):
    """How many tokens ``text`` becomes with ``merges``, by the slow rank-by-rank encoder."""
    return len(oracle_module.slow_pieces(text, merges))


def corpus(n_bytes, seed):
    """Zipf-distributed words over a skewed alphabet, twelve words a line."""
    return oracle_module.zipf_corpus(n_bytes, seed)




def expected_curve(text, merges, sizes, unit="chars"):
    """The curve from first principles: the first V - 256 merges, slow-encoded."""
    length = len(text) if unit == "chars" else len(text.encode("utf-8"))
    return [(v, length / slow_token_count(text, merges[: v - 256])) for v in sizes]


def checked(curve, sizes):
    """The curve's types, checked before any value is compared."""
    assert type(curve) is list, "compression_curve returns a plain list"
    assert len(curve) == len(sizes), "one point per size"
    for point in curve:
        assert type(point) is tuple and len(point) == 2, "each point is a tuple (V, ratio)"
        assert type(point[0]) is int and type(point[1]) is float, "each point is (int, float)"
    assert [v for v, _ in curve] == list(sizes), "the points are the sizes asked for, in order"
    return curve


def close(curve, expected):
    return all(v == w and c == pytest.approx(d, rel=1e-12) for (v, c), (w, d) in zip(curve, expected))


@pytest.mark.weight(3)
def test_prefix_is_the_first_merges(impl):
    """vocab_prefix(merges, V) gives the first V - 256 merges and the vocabulary of the bytes plus those merges."""
    merges = [(b"a", b"b"), (b"ab", b"c"), (b"x", b"y")]
    result = impl.vocab_prefix(merges, 258)
    assert type(result) is tuple and len(result) == 2, "vocab_prefix returns a tuple (vocab, merges)"
    vocab, prefix = result
    assert type(vocab) is dict and type(prefix) is list, "a dict and a list"
    assert prefix == [(b"a", b"b"), (b"ab", b"c")], (
        "vocab_prefix(3 merges, 258): V counts the 256 bytes too, so the prefix holds V - 256 merges")
    assert all(type(m) is tuple and type(m[0]) is bytes and type(m[1]) is bytes for m in prefix)
    assert vocab == {**{b: bytes([b]) for b in range(256)}, 256: b"ab", 257: b"abc"}
    assert all(type(k) is int and type(t) is bytes for k, t in vocab.items())
    vocab, prefix = impl.vocab_prefix(merges, 256)
    assert prefix == [] and len(vocab) == 256, "V = 256 is the bytes alone"
    vocab, prefix = impl.vocab_prefix(merges, 259)
    assert prefix == merges and len(vocab) == 259, "V = 256 + len(merges) is the whole run"
    assert prefix is not merges, "the prefix is a new list: changing it must not change the run"


@pytest.mark.weight(0.5)
def test_prefix_refuses_impossible_sizes(impl):
    """A size below 256 or above 256 + len(merges) is a ValueError; a size that is not an int is a TypeError."""
    merges = [(b"a", b"b")]
    for bad in (255, 0, -1, 258):
        with pytest.raises(ValueError):
            impl.vocab_prefix(merges, bad)
    for bad in (256.0, "257", True):
        with pytest.raises(TypeError):
            impl.vocab_prefix(merges, bad)


@pytest.mark.weight(0.5)
def test_prefix_refuses_merges_that_are_not_bytes(impl):
    """A merge that is not a tuple of two bytes (e.g. two str) is a TypeError."""
    with pytest.raises(TypeError):
        impl.vocab_prefix([("a", "b")], 257)
    with pytest.raises(TypeError):
        impl.vocab_prefix([(b"a", b"b"), (b"ab",)], 258)


@pytest.mark.weight(2)
def test_worked_example(impl):
    """'abc abc' with merges ab, abc: 7, 5 and 3 tokens at V = 256, 257, 258."""
    curve = checked(impl.compression_curve("abc abc", ABC, [256, 257, 258]), [256, 257, 258])
    assert close(curve, [(256, 1.0), (257, 1.4), (258, 7 / 3)])
    curve = checked(impl.compression_curve("abc abc", ABC, [258]), [258])
    assert close(curve, [(258, 7 / 3)]), "any increasing subset of sizes"


@pytest.mark.weight(2)
def test_bytes_per_token(impl):
    """unit='bytes' divides the UTF-8 length; at V = 256 that is exactly 1.0 while characters per token is lower."""
    text = "ééé é"
    merges = [(b"\xc3", b"\xa9"), ("é".encode(), "é".encode())]
    chars = checked(impl.compression_curve(text, merges, [256, 257, 258]), [256, 257, 258])
    by_bytes = checked(impl.compression_curve(text, merges, [256, 257, 258], unit="bytes"), [256, 257, 258])
    # 9 bytes, 5 characters: 9 tokens, then 5 (each é one token), then 4 (éé, é, ' ', é)
    assert close(chars, [(256, 5 / 9), (257, 1.0), (258, 5 / 4)]), "unit='chars' on 'ééé é'"
    assert close(by_bytes, [(256, 1.0), (257, 9 / 5), (258, 9 / 4)]), (
        "unit='bytes' on 'ééé é': the length is len(text.encode('utf-8')), not len(text)")


@pytest.mark.parametrize("seed", range(5))
def test_random_merges_match_a_slow_encoder(impl, seed):
    """On random merge lists (rank order, not learning order, decides) every point matches a slow encoder."""
    rng = random.Random(seed)
    merges = random_merges(rng, rng.randint(3, 25))
    text = "".join(rng.choice(["a", "b", "c", "é", " ", "ab", "ca", "\n"]) for _ in range(rng.randint(20, 300)))
    text = text or "a"
    sizes = sorted(rng.sample(range(256, 257 + len(merges)), rng.randint(1, len(merges) + 1)))
    for unit in ("chars", "bytes"):
        curve = checked(impl.compression_curve(text, merges, sizes, unit=unit), sizes)
        assert close(curve, expected_curve(text, merges, sizes, unit)), (
            f"unit={unit}: each point encodes with the first V - 256 of the merges given (not all of them, "
            "not a new run trained on the text)")


@pytest.mark.weight(3)
def test_a_slice_equals_a_shorter_run(impl):
    """The curve point at V from a long run equals the compression of a run trained to V - 256 merges only."""
    from bytes2logits.lessons.bpe import train_bpe

    text = corpus(20_000, seed=3)
    _, long_run = train_bpe(text, 120)
    _, short_run = train_bpe(text, 30)
    held_out = corpus(5_000, seed=4)
    curve = checked(impl.compression_curve(held_out, long_run, [286, 376]), [286, 376])
    assert curve[0][1] == pytest.approx(len(held_out) / slow_token_count(held_out, short_run), rel=1e-12)
    assert curve[1][1] == pytest.approx(len(held_out) / slow_token_count(held_out, long_run), rel=1e-12)


@pytest.mark.weight(2)
@given(st.text(alphabet="aab bc\né", min_size=1, max_size=40), st.text(alphabet="aab bc\né", min_size=1, max_size=30))
def test_more_merges_never_cost_tokens(impl, train_text, text):
    """With merges from one run, compression never drops as V grows; bytes per token is 1.0 at V = 256."""
    from bytes2logits.lessons.bpe import train_bpe

    _, merges = train_bpe(train_text, 12)
    sizes = list(range(256, 257 + len(merges)))
    chars = checked(impl.compression_curve(text, merges, sizes), sizes)
    by_bytes = checked(impl.compression_curve(text, merges, sizes, unit="bytes"), sizes)
    assert by_bytes[0][1] == 1.0, "unit='bytes' at V = 256: one token per UTF-8 byte"
    values = [c for _, c in chars]
    assert all(a <= b for a, b in zip(values, values[1:])), "characters per token must not decrease as V grows"
    assert close(chars, expected_curve(text, merges, sizes)), "each point uses the first V - 256 merges of the run"
    assert all(b >= c for (_, c), (_, b) in zip(chars, by_bytes)), "a character is at least one byte"


def test_bad_arguments(impl):
    """Empty text, empty or non-increasing sizes and unknown units are ValueErrors; a non-str text is a TypeError."""
    with pytest.raises(ValueError):
        impl.compression_curve("", ABC, [256])
    with pytest.raises(ValueError):
        impl.compression_curve("abc", ABC, [])
    with pytest.raises(ValueError):
        impl.compression_curve("abc", ABC, [257, 256])
    with pytest.raises(ValueError):
        impl.compression_curve("abc", ABC, [257, 257])
    with pytest.raises(ValueError):
        impl.compression_curve("abc", ABC, [256], unit="words")
    with pytest.raises(ValueError):
        impl.compression_curve("abc", ABC, [256, 259])
    with pytest.raises(TypeError):
        impl.compression_curve(b"abc", ABC, [256])


# Speed gate. Calibrated here (2 shared cores, 300 kB text, 6 sizes up to 1256): the reference takes about
# 0.55 s, lab 04's BPETokenizer (cached, no NumPy batch) about 0.6 s, lab 04's uncached slow encoder about
# 3.5 s (7x). The gate only catches encoders that are not linear in the text (e.g. re-encoding growing
# prefixes, or rebuilding a tokenizer per piece), which would run out the cell's time limit on real text.
# Each attempt times both sides on a text of its own (another seed of the same corpus), and each timed curve
# must be right: a memo of an earlier answer has nothing to answer from, and no timed answer goes unchecked.
SPEED_FACTOR = 10


@pytest.mark.weight(2)
def test_speed(impl, reference):
    """compression_curve encodes a 300 kB text at six sizes in at most 10x the reference's time."""
    from bytes2logits.lessons.bpe import train_bpe

    _, merges = train_bpe(corpus(100_000, seed=5), 1000)
    sizes = [256, 384, 512, 768, 1024, 1256]
    ref_times = []
    for attempt in range(2):
        text = corpus(300_000, seed=6 + 100 * attempt)
        for _ in range(2 if attempt == 0 else 1):
            expected, seconds = timed(reference.compression_curve, text, merges, sizes)
            ref_times.append(seconds)
        budget = SPEED_FACTOR * min(ref_times) + 0.5
        got, elapsed = timed(impl.compression_curve, text, merges, sizes)
        assert close(checked(got, sizes), expected), "the values must also be right"
        if elapsed <= budget:
            break
    assert elapsed <= budget, f"compression_curve took {elapsed / min(ref_times):.0f}x the reference"
