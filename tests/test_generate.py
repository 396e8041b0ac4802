"""Tests for bytes2logits.engine.generate: the sampler stages against plain reference code, and the generation
loop (stops, UTF-8 holdback, context bookkeeping) against fake models whose every call is recorded."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bytes2logits.engine.generate import (
    Sampler,
    apply_repetition_penalty,
    generate,
    generate_text,
    min_p_filter,
    softmax,
    top_k_filter,
    top_p_filter,
)
from bytes2logits.errors import ContextFullError
from bytes2logits.lessons.basic import decode_utf8_prefix

# ------------------------------------------------------------------------------------------------
# Fakes
# ------------------------------------------------------------------------------------------------

EOS, IM_END = 256, 257


class FakeTokenizer:
    """id i -> pieces[i]; by default the 256 single bytes plus two stop ids (eos, im_end)."""

    def __init__(self, pieces=None, stop_ids=(EOS, IM_END)):
        self.pieces = [bytes([b]) for b in range(256)] + [b"", b""] if pieces is None else list(pieces)
        self.stop_ids = frozenset(stop_ids)
        self.eos_id = min(stop_ids) if stop_ids else None
        self.vocab_size = len(self.pieces)

    def decode_bytes(self, ids):
        return b"".join(self.pieces[i] for i in ids)


class RecordingModel:
    """Base fake: records forward calls and keeps a KV 'cache' of token ids to check the bookkeeping."""

    def __init__(self, vocab_size, n_ctx=64):
        self.vocab_size = vocab_size
        self.n_ctx = n_ctx
        self.calls: list[tuple[list[int], int]] = []
        self.cache: list[int] = []

    def forward(self, ids, start_pos=0):
        ids = [int(i) for i in ids]
        assert 0 <= start_pos <= len(self.cache), "a gap in the KV cache"
        assert start_pos + len(ids) <= self.n_ctx, "KV cache overflow"
        self.calls.append((ids, start_pos))
        self.cache[start_pos:] = ids  # re-evaluating from an earlier position overwrites
        return np.stack([self.row(start_pos + i) for i in range(len(ids))]).astype(np.float32)


class TableModel(RecordingModel):
    """Logits depend only on the last token: row = table[last_id]."""

    def __init__(self, table, n_ctx=64):
        super().__init__(table.shape[1], n_ctx)
        self.table = table

    def row(self, pos):
        return self.table[self.cache[pos]]


class ScriptedModel(RecordingModel):
    """Forces a fixed continuation: after the prompt (length P) it predicts script[0], script[1], ...

    The prediction made at cache position p is script[p - P + 1]; past the script it predicts EOS.
    """

    def __init__(self, script, vocab_size, prompt_len, n_ctx=512, eos=EOS):
        super().__init__(vocab_size, n_ctx)
        self.script, self.prompt_len, self.eos = list(script), prompt_len, eos

    def row(self, pos):
        k = pos - self.prompt_len + 1
        tok = self.script[k] if 0 <= k < len(self.script) else self.eos
        out = np.zeros(self.vocab_size)
        out[tok] = 10.0
        return out


def script_ids(text: bytes):
    return list(text)  # byte-level: id == byte value


def run(model, tok, prompt, **kw):
    kw.setdefault("sampler", Sampler.greedy())
    gen = generate(model, tok, prompt, **kw)
    chunks = list(gen)
    assert "".join(chunks) == gen.text
    assert all(chunks), "empty chunks must not be yielded"
    return gen, chunks


# ------------------------------------------------------------------------------------------------
# Reference implementations (deliberately plain: full sorts, Python loops)
# ------------------------------------------------------------------------------------------------


def ref_order(ids, logits):
    return sorted(range(len(ids)), key=lambda i: (-logits[i], ids[i]))


def ref_top_k(ids, logits, k):
    if k <= 0 or k >= len(ids):
        return list(ids)
    return [ids[i] for i in ref_order(ids, logits)[:k]]


def ref_top_p(ids, logits, p):
    if p >= 1.0:
        return list(ids)
    order = ref_order(ids, logits)
    probs = softmax(np.asarray(logits))
    kept, total = [], 0.0
    for i in order:
        kept.append(ids[i])
        total += probs[i]
        if total >= p:
            break
    return kept


def ref_min_p(ids, logits, p):
    if p <= 0:
        return list(ids)
    probs = softmax(np.asarray(logits))
    return [ids[i] for i in range(len(ids)) if probs[i] >= p * probs.max() * (1 - 1e-12)]


def ref_penalty(logits, history, penalty, last_n):
    out = [float(x) for x in logits]
    window = history if last_n == -1 else history[len(history) - last_n:] if last_n > 0 else []
    for t in set(window):
        out[t] = out[t] * penalty if out[t] <= 0 else out[t] / penalty
    return out


def random_logits(rng, n, ties=True):
    x = rng.normal(0, 2, n)
    return np.round(x, 1) if ties else x  # rounding creates many ties


# ------------------------------------------------------------------------------------------------
# Sampler stages
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [-1, 0, 1, 2, 5, 17, 300, 1000])
def test_top_k_matches_sorted_reference(seed, k):
    rng = np.random.default_rng(seed)
    x = random_logits(rng, 300)
    ids = np.arange(300)
    got_ids, got_logits = top_k_filter(ids, x, k)
    want = ref_top_k(list(range(300)), list(x), k)
    if 0 < k < 300:
        assert got_ids.tolist() == want  # same members, same (tie-broken) order
    else:
        assert sorted(got_ids.tolist()) == want
    assert np.array_equal(got_logits, x[got_ids])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("p", [0.01, 0.3, 0.5, 0.9, 0.95, 0.999, 1.0])
@pytest.mark.parametrize("n", [50, 3000])  # 3000 > 4*256 exercises the "best 256 first" shortcut
def test_top_p_matches_sorted_reference(seed, p, n):
    rng = np.random.default_rng(seed)
    x = random_logits(rng, n) * (0.2 if n > 1000 else 1.0)  # flat enough that 256 may not reach p
    got, _ = top_p_filter(np.arange(n), x, p)
    want = ref_top_p(list(range(n)), list(x), p)
    assert sorted(got.tolist()) == sorted(want)
    assert len(got) >= 1


def test_top_p_uses_probabilities_of_current_candidates():
    # After top-k=2 of [3, 3, 0, 0, ...] the two survivors have 0.5 each: top_p=0.5 keeps one.
    x = np.array([3.0, 3.0] + [0.0] * 20)
    ids, x2 = top_k_filter(np.arange(22), x, 2)
    kept, _ = top_p_filter(ids, x2, 0.5)
    assert kept.tolist() == [0]  # the tie goes to the smaller id
    kept, _ = top_p_filter(ids, x2, 0.51)
    assert kept.tolist() == [0, 1]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("p", [0.0, 0.01, 0.05, 0.2, 0.5, 1.0])
def test_min_p_matches_probability_reference(seed, p):
    rng = np.random.default_rng(seed)
    x = random_logits(rng, 200)
    ids = rng.permutation(200)
    got, got_x = min_p_filter(ids, x, p)
    assert got.tolist() == ref_min_p(list(ids), list(x), p)  # same order as the input
    assert np.array_equal(got_x, x[np.isin(ids, got)])


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("last_n", [-1, 0, 1, 3, 64])
def test_repetition_penalty_matches_reference(seed, last_n):
    rng = np.random.default_rng(seed)
    x = random_logits(rng, 40)
    x[:5] = 0.0
    history = rng.integers(0, 40, 30).tolist()
    got = apply_repetition_penalty(x, history, 1.3, last_n)
    assert np.allclose(got, ref_penalty(x, history, 1.3, last_n), rtol=0, atol=0)


def test_repetition_penalty_sign_rule_and_once_per_token():
    x = np.array([2.0, -2.0, 0.0, 1.0, 4.0])
    got = apply_repetition_penalty(x, [0, 1, 2, 0, 0, 1], penalty=2.0, last_n=64)
    assert got.tolist() == [1.0, -4.0, 0.0, 1.0, 4.0]  # token 0 seen 3 times, divided once
    assert x.tolist() == [2.0, -2.0, 0.0, 1.0, 4.0]  # input untouched
    # only the window counts
    assert apply_repetition_penalty(x, [0, 4], 2.0, last_n=1).tolist() == [2.0, -2.0, 0.0, 1.0, 2.0]
    # penalty < 1 is an encouragement, by the same rule
    assert apply_repetition_penalty(x, [0, 1], 0.5, 64).tolist()[:2] == [4.0, -1.0]
    with pytest.raises(ValueError, match="token id 9"):
        apply_repetition_penalty(x, [9], 2.0)


def ref_chain(x, history, s: Sampler):
    x = ref_penalty(x, list(history), s.repeat_penalty, s.repeat_last_n)
    ids = list(range(len(x)))
    for stage, arg in ((ref_top_k, s.top_k), (ref_top_p, s.top_p), (ref_min_p, s.min_p)):
        keep = stage(ids, [x[i] for i in ids], arg)
        ids = [i for i in ids if i in set(keep)]
    probs = softmax(np.array([x[i] for i in ids]) / s.temperature)
    return dict(zip(ids, probs))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    "params",
    [
        {},  # llama.cpp defaults
        dict(top_k=0, top_p=0.7, min_p=0.0, temperature=1.5),
        dict(top_k=5, top_p=1.0, min_p=0.1, temperature=0.5),
        dict(top_k=0, top_p=1.0, min_p=0.0, temperature=1.0, repeat_penalty=1.5, repeat_last_n=8),
        dict(top_k=10, top_p=0.5, min_p=0.3, repeat_penalty=0.8),
    ],
)
def test_full_chain_distribution_matches_reference(seed, params):
    rng = np.random.default_rng(seed)
    x = random_logits(rng, 120)
    history = rng.integers(0, 120, 20).tolist()
    s = Sampler(seed=0, **params)
    ids, probs = s.distribution(x, history)
    want = ref_chain(x, history, s)
    assert sorted(ids.tolist()) == sorted(want)
    assert np.allclose([want[i] for i in ids.tolist()], probs)
    assert math.isclose(probs.sum(), 1.0)


def test_order_matters_min_p_sees_logits_before_temperature():
    # With min_p=0.5, a token at logit -0.5 relative to the best has p/p_max = e^-0.5 ≈ 0.61 -> kept.
    # If temperature 0.1 were applied first it would be 0.0067 -> dropped. llama.cpp: temperature last.
    x = np.array([0.0, -0.5, -5.0])
    ids, _ = Sampler(temperature=0.1, top_k=0, top_p=1.0, min_p=0.5).distribution(x)
    assert sorted(ids.tolist()) == [0, 1]


def test_sampling_frequencies_follow_the_distribution():
    x = np.log(np.array([0.5, 0.3, 0.2, 1e-9]))
    s = Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=123)
    draws = np.bincount([s.sample(x) for _ in range(4000)], minlength=4) / 4000
    assert np.allclose(draws, [0.5, 0.3, 0.2, 0.0], atol=0.03)
    assert draws[3] == 0


def test_masked_tokens_are_never_sampled():
    x = np.full(1000, -np.inf)
    x[[7, 900]] = 0.0
    s = Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=5)
    assert {s.sample(x) for _ in range(200)} == {7, 900}


def test_greedy_is_argmax_with_first_tie_and_penalty():
    x = np.array([1.0, 3.0, 3.0, -1.0])
    assert Sampler.greedy().sample(x) == 1
    assert Sampler(temperature=0.0).sample(x) == 1  # the other stages do not change the argmax
    # the repetition penalty still applies before the argmax
    assert Sampler(temperature=0.0, repeat_penalty=2.0).sample(x, history=[1]) == 2
    ids, probs = Sampler(temperature=0).distribution(x)
    assert ids.tolist() == [1] and probs.tolist() == [1.0]


def test_seed_reproducibility():
    rng = np.random.default_rng(0)
    rows = [random_logits(rng, 500, ties=False) for _ in range(30)]

    def draws(seed):
        s = Sampler(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, seed=seed)
        return [s.sample(r) for r in rows]

    assert draws(42) == draws(42)
    assert draws(42) != draws(43)
    assert Sampler().seed is None  # random seed by default


def test_huge_vocab_is_fast_enough():
    import time

    rng = np.random.default_rng(1)
    x = rng.normal(0, 3, 152_000).astype(np.float32)
    for params in ({}, dict(top_k=0)):
        s = Sampler(seed=1, **params)
        t = time.perf_counter()
        for _ in range(5):
            s.sample(x, history=list(range(100)))
        assert (time.perf_counter() - t) / 5 < 0.25, params


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(temperature=-0.5), ValueError, "temperature must be >= 0"),
        (dict(temperature=float("nan")), ValueError, "temperature must be a finite"),
        (dict(temperature="hot"), TypeError, "temperature must be a number"),
        (dict(top_p=0.0), ValueError, r"top_p must be in \(0, 1\]"),
        (dict(top_p=1.5), ValueError, r"top_p must be in \(0, 1\]"),
        (dict(min_p=2.0), ValueError, "min_p must be <= 1"),
        (dict(top_k=2.5), TypeError, "top_k must be an int"),
        (dict(repeat_penalty=0.0), ValueError, "repeat_penalty must be > 0"),
        (dict(repeat_last_n=-2), ValueError, "repeat_last_n must be >= -1"),
        (dict(seed=-1), ValueError, "seed must be an int >= 0"),
    ],
)
def test_sampler_argument_validation(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        Sampler(**kwargs)


def test_off_values_are_accepted():
    s = Sampler(top_k=-5, top_p=1.0, min_p=-1.0, repeat_last_n=-1)
    assert s.top_k == -5


def test_bad_logits_name_the_position():
    x = np.zeros(10)
    x[6] = np.nan
    with pytest.raises(ValueError, match="token id 6"):
        Sampler(seed=0).sample(x)
    with pytest.raises(ValueError, match="token id 6"):
        Sampler.greedy().sample(x)
    with pytest.raises(ValueError, match="every logit is -inf"):
        Sampler(seed=0).sample(np.full(4, -np.inf))
    with pytest.raises(ValueError, match="1-D"):
        Sampler(seed=0).sample(np.zeros((2, 3)))


def test_nan_during_generation_names_the_sequence_position():
    table = np.zeros((258, 258), dtype=np.float32)
    table[ord("b"), 3] = np.nan
    model = TableModel(table)
    with pytest.raises(ValueError, match=r"sequence position 3 .*token id 3"):
        run(model, FakeTokenizer(), script_ids(b"aab"))


# ------------------------------------------------------------------------------------------------
# The generation loop
# ------------------------------------------------------------------------------------------------


def cyclic_table(vocab=258):
    """Greedy path: each byte predicts the next letter a->b->...->z->a."""
    t = np.zeros((vocab, vocab), dtype=np.float32)
    for b in range(vocab):
        nxt = ord("a") + ((b - ord("a") + 1) % 26) if ord("a") <= b <= ord("z") else ord("a")
        t[b, nxt] = 5.0
    return t


def test_greedy_generation_is_deterministic_and_prefill_is_one_call():
    model = TableModel(cyclic_table(), n_ctx=100)
    gen, _ = run(model, FakeTokenizer(), script_ids(b"xyz"), max_tokens=5)
    assert gen.text == "abcde"
    assert gen.stop_reason == "max_tokens"
    assert gen.tokens == script_ids(b"abcde")
    assert model.calls[0] == (script_ids(b"xyz"), 0)  # the whole prompt in ONE forward call
    assert [c for c, _ in model.calls[1:]] == [[t] for t in script_ids(b"abcd")]  # then 1 token each
    assert [p for _, p in model.calls] == [0, 3, 4, 5, 6]
    assert gen.n_prompt == 3 and gen.n_past == 7 and gen.unevaluated_ids == [ord("e")]
    model2 = TableModel(cyclic_table(), n_ctx=100)
    assert run(model2, FakeTokenizer(), script_ids(b"xyz"), max_tokens=5)[0].tokens == gen.tokens


def test_seeded_generation_is_reproducible():
    rng = np.random.default_rng(0)
    table = rng.normal(0, 1, (258, 258)).astype(np.float32)
    table[:, 256:] = -np.inf  # never stop early

    def ids(seed):
        s = Sampler(temperature=1.2, top_k=0, top_p=1.0, min_p=0.0, seed=seed)
        return run(TableModel(table), FakeTokenizer(), [65], sampler=s, max_tokens=30)[0].tokens

    assert ids(7) == ids(7)
    assert ids(7) != ids(8)


def test_history_for_penalty_includes_prompt_and_generated():
    t = np.zeros((258, 258), dtype=np.float32)
    t[:, ord("a")] = 3.0
    t[:, ord("b")] = 2.0
    t[:, ord("c")] = 1.0
    s = Sampler(temperature=0.0, repeat_penalty=2.5, repeat_last_n=2)
    gen, _ = run(TableModel(t), FakeTokenizer(), script_ids(b"a"), sampler=s, max_tokens=4)
    # 'a' is in the prompt -> 1.2 < 'b' 2.0 -> 'b'. Window [a, b]: a 1.2, b 0.8, c 1.0 -> 'a'.
    # Window [b, a] -> 'a' again. Window [a, a]: b is back at 2.0 -> 'b'.
    assert gen.text == "baab"


def test_stop_id_is_not_emitted_nor_evaluated():
    model = ScriptedModel(script_ids(b"hi") + [IM_END, ord("x")], 258, prompt_len=2)
    gen, chunks = run(model, FakeTokenizer(), script_ids(b"ok"), max_tokens=10)
    assert gen.text == "hi" and chunks == ["h", "i"]
    assert gen.stop_reason == "eos"
    assert gen.tokens == [ord("h"), ord("i"), IM_END]
    assert IM_END not in model.cache and all(IM_END not in ids for ids, _ in model.calls)
    assert gen.n_past == 4 and gen.unevaluated_ids == [IM_END]


def test_custom_stop_ids_override_the_tokenizer():
    model = ScriptedModel(script_ids(b"abc"), 258, prompt_len=1)
    gen, _ = run(model, FakeTokenizer(), [0], stop_ids={ord("b")})
    assert gen.text == "a" and gen.stop_reason == "eos"


def test_stop_string_split_across_three_tokens():
    pieces = [b"Hello", b" wo", b"rld", b"<", b"/s", b">", b"tail", b"", b""]
    tok = FakeTokenizer(pieces, stop_ids=(7, 8))
    model = ScriptedModel([0, 1, 2, 3, 4, 5, 6], len(pieces), prompt_len=1, eos=7)
    gen, chunks = run(model, tok, [6], stop_strings=["</s>"])
    assert gen.text == "Hello world"
    assert gen.stop_reason == "stop_string" and "</s>" in gen.stop_message
    assert gen.tokens == [0, 1, 2, 3, 4, 5]  # the tokens that carried the stop string are kept
    assert chunks == ["Hello", " wo", "rld"]  # "<" and "</s" were held back, then dropped


def test_false_alarm_is_released():
    # "ab" might start "abc"; "ac" shows it does not. The held-back text must come out in order.
    model = ScriptedModel(script_ids(b"xabacab") + [ord("c"), ord("z")], 258, prompt_len=1)
    gen, chunks = run(model, FakeTokenizer(), [0], stop_strings=["abc"], max_tokens=20)
    assert gen.text == "xabac"  # the second "ab" + "c" completes the stop string
    assert gen.stop_reason == "stop_string"
    assert chunks[0] == "x" and "".join(chunks) == "xabac"


def test_held_back_prefix_is_flushed_when_generation_ends():
    model = ScriptedModel(script_ids(b"xab"), 258, prompt_len=1)
    gen, chunks = run(model, FakeTokenizer(), [0], stop_strings=["abc"], max_tokens=3)
    assert gen.text == "xab" and gen.stop_reason == "max_tokens"
    assert chunks == ["x", "ab"]


def test_earliest_of_several_stop_strings_wins():
    model = ScriptedModel(script_ids(b"12 STOP 34 END"), 258, prompt_len=1)
    gen, _ = run(model, FakeTokenizer(), [0], stop_strings=["END", " STOP"], max_tokens=30)
    assert gen.text == "12"


def test_utf8_split_across_tokens_is_never_replaced():
    text = "é→😀!".encode()
    model = ScriptedModel(list(text), 258, prompt_len=1)
    gen, chunks = run(model, FakeTokenizer(), [0])
    assert gen.text == "é→😀!"
    assert chunks == ["é", "→", "😀", "!"]
    assert "\ufffd" not in gen.text


def test_invalid_bytes_become_replacement_on_final_flush():
    model = ScriptedModel([ord("a"), 0xE2, 0x86], 258, prompt_len=1)  # an unfinished 3-byte character
    gen, chunks = run(model, FakeTokenizer(), [0], max_tokens=3)
    assert chunks == ["a", "\ufffd"]


def test_stop_string_with_multibyte_characters():
    model = ScriptedModel(list("naïve → done".encode()), 258, prompt_len=1)
    gen, _ = run(model, FakeTokenizer(), [0], stop_strings=["→"], max_tokens=50)
    assert gen.text == "naïve "


def test_context_full_before_any_work():
    model = TableModel(cyclic_table(), n_ctx=8)
    with pytest.raises(ContextFullError, match=r"5 cached \+ 4 new tokens = 9 > n_ctx = 8.*new conversation"):
        generate(model, FakeTokenizer(), [1, 2, 3, 4], start_pos=5)
    assert model.calls == []


def test_context_full_during_generation_stops_cleanly():
    model = TableModel(cyclic_table(), n_ctx=6)
    gen, _ = run(model, FakeTokenizer(), script_ids(b"xyz"), max_tokens=50)
    assert gen.stop_reason == "context_full"
    assert "6" in gen.stop_message and "n_ctx" in gen.stop_message
    assert gen.n_past == 6 and len(model.cache) == 6
    assert gen.text == "abcd"  # a, b, c evaluated at positions 3..5; d sampled from position 5's logits
    assert gen.unevaluated_ids == [ord("d")]


def test_prompt_that_exactly_fills_the_context():
    model = TableModel(cyclic_table(), n_ctx=3)
    gen, _ = run(model, FakeTokenizer(), script_ids(b"xyz"), max_tokens=50)
    assert gen.text == "a" and gen.stop_reason == "context_full" and len(model.calls) == 1


def test_kv_bookkeeping_across_two_calls():
    model = TableModel(cyclic_table(), n_ctx=64)
    tok = FakeTokenizer()
    first, _ = run(model, tok, script_ids(b"xy"), max_tokens=3)  # z a b; 'b' is not evaluated
    assert first.text == "zab" and first.n_past == 4
    second_prompt = first.unevaluated_ids + script_ids(b"m")
    second, _ = run(model, tok, second_prompt, start_pos=first.n_past, max_tokens=2)
    assert model.calls[len(model.calls) - 2][1] == first.n_past  # no recomputation of the cache
    assert (second_prompt, first.n_past) in model.calls
    assert model.cache == script_ids(b"xyzabm") + [ord("n")]
    assert second.text == "no" and second.n_past == 7


def test_stats_are_present():
    model = TableModel(cyclic_table())
    gen = generate(model, FakeTokenizer(), script_ids(b"abc"), max_tokens=4, sampler=Sampler.greedy())
    assert gen.stop_reason is None
    text = "".join(gen)
    assert gen.done and text == gen.text
    assert gen.n_prompt == 3 and len(gen.tokens) == 4
    for name in ("prefill_seconds", "decode_seconds", "prefill_tokens_per_second", "decode_tokens_per_second"):
        assert isinstance(getattr(gen, name), float) and getattr(gen, name) >= 0, name
    assert gen.prefill_seconds > 0 and gen.decode_tokens_per_second > 0
    assert "max_tokens" in repr(gen)


def test_generation_is_lazy_and_generate_text():
    model = TableModel(cyclic_table())
    gen = generate(model, FakeTokenizer(), [ord("a")], max_tokens=3, sampler=Sampler.greedy())
    assert model.calls == []
    assert next(gen) == "b"
    model2 = TableModel(cyclic_table())
    assert generate_text(model2, FakeTokenizer(), [ord("a")], max_tokens=3, sampler=Sampler.greedy()) == "bcd"


def test_max_tokens_zero_only_prefills():
    model = TableModel(cyclic_table())
    gen, chunks = run(model, FakeTokenizer(), [1, 2], max_tokens=0)
    assert chunks == [] and gen.tokens == [] and gen.n_past == 2 and gen.stop_reason == "max_tokens"


@pytest.mark.parametrize(
    "prompt, kwargs, exc, match",
    [
        ([], {}, ValueError, "prompt_ids is empty"),
        ([1, 999], {}, ValueError, r"prompt_ids\[1\] = 999"),
        ([1.5], {}, TypeError, "integers"),
        ([1], dict(max_tokens=-1), ValueError, "max_tokens must be"),
        ([1], dict(start_pos=-1), ValueError, "start_pos must be"),
        ([1], dict(stop_strings=["ok", ""]), ValueError, "empty string"),
    ],
)
def test_generate_argument_validation(prompt, kwargs, exc, match):
    model = TableModel(cyclic_table())
    with pytest.raises(exc, match=match):
        generate(model, FakeTokenizer(), prompt, **kwargs)
    assert model.calls == []


# ------------------------------------------------------------------------------------------------
# Streaming invariant, for random texts cut into random tokens
# ------------------------------------------------------------------------------------------------

ALPHABET = "ab<>/ é→😀\n"
STOPS = ["</s>", "ab", "😀!", "→→"]


@st.composite
def tokenised_text(draw):
    raw = draw(st.text(alphabet=ALPHABET + "!", max_size=30)).encode()
    if draw(st.booleans()):
        raw += draw(st.binary(max_size=3))  # sometimes end with bytes that are not valid UTF-8
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(raw) - 1)), max_size=len(raw))))
    pieces = [raw[a:b] for a, b in zip([0] + cuts, cuts + [len(raw)]) if raw[a:b]]
    stops = draw(st.lists(st.sampled_from(STOPS), max_size=2, unique=True))
    return raw, pieces, stops


@settings(derandomize=True, max_examples=200, deadline=None)
@given(tokenised_text())
def test_streamed_chunks_equal_the_final_text(case):
    raw, pieces, stops = case
    vocab = pieces + [b"", b""]
    eos = len(pieces)
    tok = FakeTokenizer(vocab, stop_ids=(eos, eos + 1))
    model = ScriptedModel(list(range(len(pieces))), len(vocab), prompt_len=1, eos=eos)
    gen, chunks = run(model, tok, [eos + 1], stop_strings=stops, max_tokens=len(pieces) + 1)
    cut = min([i for i in (raw.find(s.encode()) for s in stops) if i >= 0], default=len(raw))
    expected, _ = decode_utf8_prefix(raw[:cut], final=True)
    assert "".join(chunks) == gen.text == expected
    if "\ufffd" not in raw.decode("utf-8", "replace"):
        assert "\ufffd" not in gen.text
    assert gen.stop_reason == ("stop_string" if cut < len(raw) else "eos")


def test_history_before_start_pos_feeds_the_repetition_penalty():
    """Continuing at start_pos with history= penalises like one long run would."""
    import bytes2logits.engine.generate as g

    seen = []

    class Spy(g.Sampler):
        def sample(self, logits, history=()):
            seen.append(list(history))
            return super().sample(logits, history)

    from types import SimpleNamespace

    class M:
        vocab_size, n_ctx = 8, 64

        def forward(self, ids, start_pos=0):
            return np.zeros((len(ids), 8), np.float32)

    tok = SimpleNamespace(decode_bytes=lambda ids: bytes(65 + i for i in ids), stop_ids=frozenset(), eos_id=None,
                          vocab_size=8)
    gen = g.generate(M(), tok, [3, 4], start_pos=2, history=[1, 2], max_tokens=1,
                     sampler=Spy(temperature=0.0, repeat_penalty=1.5))
    list(gen)
    assert seen[0] == [1, 2, 3, 4]
