"""Tests of bytes2logits.lessons.vocabsize: the merge-prefix slice on real text, the curve, costs read from SmolLM2."""

from __future__ import annotations

import doctest
import math

import pytest

from bytes2logits import assets
from bytes2logits.engine.gguf import GGUFReader
from bytes2logits.lessons import vocabsize
from bytes2logits.lessons.bpe import BPETokenizer, build_vocab, train_bpe
from bytes2logits.lessons.vocabsize import (
    choose_vocab_size,
    compression_curve,
    embedding_fraction,
    embedding_params,
    kv_cache_bytes_per_token,
    marginal_gains,
    vocab_prefix,
)


@pytest.fixture(scope="module")
def botchan():
    return assets.path("botchan").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def long_run(botchan):
    return train_bpe(botchan[:150_000], 600)


def test_docstring_examples():
    assert doctest.testmod(vocabsize).failed == 0


@pytest.mark.parametrize("k", [0, 1, 37, 250, 599])
def test_a_short_run_is_a_prefix_of_a_long_run(botchan, long_run, k):
    """The property chapter 08 relies on: training to k merges gives the first k merges of a longer run."""
    vocab, merges = train_bpe(botchan[:150_000], k)
    sliced_vocab, sliced = vocab_prefix(long_run[1], 256 + k)
    assert sliced == merges
    assert sliced_vocab == vocab


def test_curve_matches_lab04_tokenizer_on_real_text(botchan, long_run):
    """The curve's token counts are those of BPETokenizer (lab 04), not only of the NumPy fast path."""
    merges = long_run[1]
    held_out = botchan[150_000:230_000]
    sizes = [256, 300, 512, 856]
    curve = compression_curve(held_out, merges, sizes)
    for v, cpt in curve:
        prefix = merges[: v - 256]
        n = len(BPETokenizer(build_vocab(prefix), prefix).encode(held_out))
        assert cpt == len(held_out) / n
    values = [c for _, c in curve]
    assert values == sorted(values) and values[0] < 1.01


def test_bytes_curve_is_the_chars_curve_scaled(botchan, long_run):
    text = botchan[150_000:160_000] + " naïve café — 東京 🙂"
    sizes = [256, 400, 856]
    chars = compression_curve(text, long_run[1], sizes)
    by_bytes = compression_curve(text, long_run[1], sizes, unit="bytes")
    scale = len(text.encode("utf-8")) / len(text)
    assert by_bytes[0][1] == 1.0
    for (_, c), (_, b) in zip(chars, by_bytes):
        assert b == pytest.approx(c * scale, rel=1e-12)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="largest vocabulary is 257"):
        vocab_prefix([(b"a", b"b")], 300)
    with pytest.raises(ValueError, match="at least the 256"):
        vocab_prefix([], 100)
    with pytest.raises(TypeError, match="merge 1"):
        vocab_prefix([(b"a", b"b"), ("a", "b")], 258)
    with pytest.raises(ValueError, match="1024 comes after 2048"):
        compression_curve("abc", [], [2048, 1024])
    with pytest.raises(ValueError, match="point 1: sizes must increase"):
        marginal_gains([(512, 1.0), (512, 1.1)])
    with pytest.raises(TypeError, match="point 0: the size 512.0"):
        marginal_gains([(512.0, 1.0)])
    with pytest.raises(ValueError, match=r"smallest, V=1024, needs 1,179,648 \(embedding \+ untied head"):
        choose_vocab_size([(1024, 2.0), (4096, 2.5)], 576, 1_000_000, tied=False)
    with pytest.raises(TypeError, match="tied must be True or False"):
        embedding_params(10, 10, tied="False")


def test_smollm2_costs_from_its_gguf():
    """The numbers chapter 08 prints: SmolLM2's tied 49152 x 576 table is 21% of its 134.5 M parameters."""
    with GGUFReader(assets.path("smollm2")) as reader:
        v, d = reader.tensors["token_embd.weight"].shape
        tied = "output.weight" not in reader.tensors
        total = sum(t.n_elements for t in reader.tensors.values())
        md = reader.metadata
        kv = kv_cache_bytes_per_token(md["llama.block_count"], md["llama.attention.head_count_kv"],
                                      d // md["llama.attention.head_count"])
    assert (v, d, tied, total) == (49152, 576, True, 134_515_008)
    other = total - embedding_params(v, d, tied=True)
    assert embedding_fraction(v, d, other, tied=True) == pytest.approx(0.2105, abs=1e-4)
    assert embedding_fraction(v, d, other, tied=False) == pytest.approx(0.3478, abs=1e-4)
    assert kv == 23_040


def test_choosing_for_a_share_of_the_model():
    """A budget stated as a share f of all parameters: E <= f * body / (1 - f) is exactly at the share."""
    body, d = 106_203_456, 576
    curve = [(v, math.log2(v)) for v in (1024, 4096, 8192, 16384, 32768)]
    budget = 0.15 * body / 0.85
    v_untied = choose_vocab_size(curve, d, budget, tied=False)
    v_tied = choose_vocab_size(curve, d, budget, tied=True)
    assert (v_untied, v_tied) == (8192, 16384)
    assert embedding_fraction(v_tied, d, body, tied=True) <= 0.15
    assert embedding_fraction(32768, d, body, tied=True) > 0.15
