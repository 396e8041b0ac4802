"""Prompt-lookup decoding (bytes2logits.engine.lookup and generate(lookup=...)).

* the drafter: hand-checkable cases, and hypothesis against a brute-force drafter, for the vectorised
  ``find_draft`` and the incremental ``NgramIndex``;
* the loop on fake models: greedy lookup gives exactly plain greedy's run (tokens, text, stop reason, cache
  bookkeeping) for random models, prompts and stops; no forward call evaluates past max_tokens or n_ctx;
  with a random sampler every sequence keeps its probability;
* SmolLM2: identical greedy ids on a rewrite prompt, an open question and a prompt that copies, acceptance
  on the rewrite prompt, stops inside a draft, a full context, the chat session and the ``chat`` command.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bytes2logits.engine.generate import Sampler, generate
from bytes2logits.engine.lookup import Drafter, LookupConfig, NgramIndex, choose_with_draft, find_draft

# ------------------------------------------------------------------------------------------------
# The drafter
# ------------------------------------------------------------------------------------------------


def brute_force_draft(context, draft, min_ngram, max_ngram):
    """The rule in words: longest suffix first; its latest earlier occurrence; what followed it."""
    t = len(context)
    for n in range(max_ngram, min_ngram - 1, -1):
        suffix = list(context[t - n:]) if n <= t else None
        for start in range(t - n - 1, -1, -1):  # occurrences that end before the context does
            if suffix is not None and list(context[start:start + n]) == suffix:
                return list(context[start + n:start + n + draft])
    return []


@pytest.mark.parametrize("context, kwargs, expected", [
    ([5, 6, 7, 8, 5, 6], {"draft": 2}, [7, 8]),
    ([5, 6, 7, 8, 5, 6], {"draft": 8}, [7, 8, 5, 6]),           # stops where the context ends
    ([1, 2, 3, 9, 2, 3, 4, 2, 3], {}, [4, 2, 3]),               # the latest "2 3", not the first
    ([1, 2, 3, 4, 9, 3, 4, 5, 2, 3, 4], {"draft": 3}, [9, 3, 4]),  # "2 3 4" (n=3) beats the later "3 4"
    ([1, 2, 3, 4, 9, 3, 4, 5, 2, 3, 4], {"draft": 3, "max_ngram": 2}, [5, 2, 3]),
    ([7, 7, 7], {}, [7]),                                       # overlapping: "7 7" at 0 is followed by 7
    ([1, 2, 3, 1], {"min_ngram": 2}, []),                       # only a 1-gram repeats
    ([1, 2, 3, 1], {"min_ngram": 1}, [2, 3, 1]),
    ([4], {}, []),
    ([], {}, []),
    ([3, 3], {"draft": 0}, []),
])
def test_find_draft_hand_cases(context, kwargs, expected):
    assert find_draft(context, **kwargs) == expected
    kw = {"draft": 8, "min_ngram": 1, "max_ngram": 3, **kwargs}
    assert brute_force_draft(context, **kw) == expected
    index = NgramIndex(kw["min_ngram"], kw["max_ngram"])
    index.extend(context)
    assert index.draft(kw["draft"]) == expected
    assert len(index) == len(context)


@settings(max_examples=300, deadline=None)
@given(context=st.lists(st.integers(0, 3), max_size=40), draft=st.integers(0, 6),
       ngram=st.tuples(st.integers(1, 4), st.integers(0, 3)))
def test_drafters_agree_with_brute_force_at_every_prefix(context, draft, ngram):
    lo, hi = ngram[0], ngram[0] + ngram[1]
    index = NgramIndex(lo, hi)
    for t in range(len(context) + 1):
        expected = brute_force_draft(context[:t], draft, lo, hi)
        assert find_draft(context[:t], draft, lo, hi) == expected
        assert index.draft(draft) == expected
        if t < len(context):
            index.append(context[t])


def test_index_cost_per_step_does_not_grow_with_the_context():
    """Appending and drafting is a few dict operations: a step costs about the same after 2k and after 38k
    tokens of a long, repetitive context (a rescan of the context would make the late steps ~19x dearer).

    Timed as a ratio of the best of several batches, so a busy machine slows both sides alike."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 50, 40_000).tolist()

    def step_cost(n_before: int) -> float:
        best = float("inf")
        for _ in range(5):
            index = NgramIndex(1, 3)
            index.extend(tokens[:n_before])
            t0 = time.perf_counter()
            for tok in tokens[n_before:n_before + 1000]:
                index.append(tok)
                index.draft(8)
            best = min(best, time.perf_counter() - t0)
        return best

    early, late = step_cost(2_000), step_cost(38_000)
    assert late < 4 * early, f"1000 steps: {early * 1e3:.1f} ms after 2k tokens, {late * 1e3:.1f} ms after 38k"


def test_drafter_stops_drafting_a_length_that_does_not_pay_and_resumes_when_it_would():
    d = Drafter(LookupConfig(draft=2, ngram=(1, 1), min_accepted=1.0))
    d.extend([5, 6, 5])
    assert d.propose(2) == [6, 5]           # a length starts optimistic (one pseudo-score of 2)
    d.append(100)                           # wrong at once: score 0, mean (2 + 0) / 2
    assert d.mean_accepted(1) == 1.0
    d.append(5)
    assert d.propose(2) == [100, 5]         # still >= 1: sent to the model
    d.append(101)                           # wrong again: mean 2 / 3
    assert d.mean_accepted(1) == 2 / 3
    d.append(5)
    assert d.index.draft(2) == [101, 5] and d.propose(2) == []  # below 1: scored, but not sent
    d.extend([101, 5])                      # ...and it would have been right twice: mean 4 / 4
    assert d.mean_accepted(1) == 1.0
    assert d.propose(2) == [101, 5] and d.propose(1) == [101] and d.propose(0) == []
    assert len(d) == 9


@pytest.mark.parametrize("value, exc, match", [
    (-1, ValueError, "lookup must be >= 0"),
    ("8", TypeError, "lookup must be None, an int"),
    (True, TypeError, "lookup must be None, an int"),
])
def test_lookup_argument_is_checked(value, exc, match):
    with pytest.raises(exc, match=match):
        LookupConfig.of(value)


@pytest.mark.parametrize("kwargs, match", [
    ({"draft": 0}, "draft must be an int >= 1"),
    ({"ngram": (0, 2)}, "1 <= min <= max"),
    ({"ngram": (3, 2)}, "1 <= min <= max"),
    ({"ngram": 2}, "1 <= min <= max"),
    ({"min_accepted": -1}, "min_accepted must be a number >= 0"),
    ({"min_accepted": float("nan")}, "min_accepted must be a number >= 0"),
])
def test_lookup_config_is_checked(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LookupConfig(**kwargs)


def test_lookup_config_forms():
    assert LookupConfig.of(None) is None and LookupConfig.of(0) is None
    assert LookupConfig.of(3) == LookupConfig(draft=3)
    cfg = LookupConfig(draft=4, ngram=[2, 5])
    assert LookupConfig.of(cfg) is cfg and cfg.ngram == (2, 5) and (cfg.min_ngram, cfg.max_ngram) == (2, 5)


# ------------------------------------------------------------------------------------------------
# Fakes: a tokenizer of single bytes and a model whose logits depend on the last two cached tokens
# ------------------------------------------------------------------------------------------------

EOS = 256


class ByteTokenizer:
    """ids 0..255 are single bytes, 256 is the end-of-generation id."""

    vocab_size = 257
    stop_ids = frozenset({EOS})

    def decode_bytes(self, ids):
        return b"".join(bytes([i]) if i < 256 else b"" for i in ids)


class PairModel:
    """Logits at position p depend only on the tokens at p-1 and p (a table), so text repeats itself often.

    It keeps a KV "cache" of token ids with the engine's rules: ``forward(ids, start_pos)`` needs
    ``start_pos <= n_past``, may not pass ``n_ctx``, overwrites from ``start_pos`` on and sets ``n_past``.
    Every call is recorded.
    """

    def __init__(self, vocab, n_ctx=64, seed=0, sharp=4.0):
        rng = np.random.default_rng(seed)
        self.vocab = vocab  # the ids the model writes (a few letters and EOS)
        self.table = rng.normal(size=(len(vocab), len(vocab), len(vocab))) * sharp
        self.vocab_size = 257
        self.n_ctx = n_ctx
        self.n_past = 0
        self.cache: list[int] = []
        self.calls: list[tuple[int, int]] = []  # (start_pos, number of ids)
        self.slot = {v: i for i, v in enumerate(vocab)}

    def row(self, pos):
        a = self.slot.get(self.cache[pos - 1], 0) if pos else 0
        b = self.slot.get(self.cache[pos], 0)
        out = np.full(self.vocab_size, -np.inf, dtype=np.float32)
        out[self.vocab] = self.table[a, b]
        return out

    def forward(self, ids, start_pos=0):
        ids = [int(i) for i in ids]
        assert 0 <= start_pos <= self.n_past, "start_pos past the valid cache"
        assert start_pos + len(ids) <= self.n_ctx, "KV cache overflow"
        self.calls.append((start_pos, len(ids)))
        self.cache[start_pos:] = ids
        self.n_past = start_pos + len(ids)
        return np.stack([self.row(start_pos + i) for i in range(len(ids))])


LETTERS = [ord(c) for c in "abcde"]


def run(model, prompt, **kwargs):
    model.n_past, model.cache, model.calls = 0, [], []
    gen = generate(model, ByteTokenizer(), prompt, **kwargs)
    chunks = list(gen)
    assert "".join(chunks) == gen.text
    return gen


def same_run(plain, spec, model_n_past_plain, model_n_past_spec):
    assert spec.tokens == plain.tokens
    assert spec.text == plain.text
    assert (spec.stop_reason, spec.stop_message) == (plain.stop_reason, plain.stop_message)
    assert spec.n_past == plain.n_past and spec.unevaluated_ids == plain.unevaluated_ids
    assert model_n_past_spec == model_n_past_plain == plain.n_past


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), prompt=st.lists(st.sampled_from(LETTERS), min_size=1, max_size=12),
       max_tokens=st.integers(0, 30), n_ctx=st.integers(13, 40), eos=st.booleans(),
       stop=st.sampled_from([(), ("c",), ("ab", "ed"), ("aaa",)]), draft=st.integers(1, 6),
       ngram=st.sampled_from([(1, 1), (1, 3), (2, 2), (2, 4)]), penalty=st.sampled_from([1.0, 1.3]),
       min_accepted=st.sampled_from([0.0, 2.0]))
def test_greedy_lookup_is_plain_greedy_on_fake_models(seed, prompt, max_tokens, n_ctx, eos, stop, draft, ngram,
                                                      penalty, min_accepted):
    model = PairModel(LETTERS + ([EOS] if eos else []), n_ctx=n_ctx, seed=seed)
    sampler = Sampler(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=penalty)
    kw = {"sampler": sampler, "max_tokens": max_tokens, "stop_strings": stop}
    plain = run(model, prompt, **kw)
    plain_calls, plain_n_past = model.calls, model.n_past
    assert all(n == 1 for _, n in plain_calls[1:])
    spec = run(model, prompt, lookup=LookupConfig(draft=draft, ngram=ngram, min_accepted=min_accepted), **kw)
    same_run(plain, spec, plain_n_past, model.n_past)
    # No call writes past the context, or past the last position the token budget lets plain decoding fill.
    assert max(s + n for s, n in model.calls) <= min(n_ctx, len(prompt) + max(max_tokens - 1, 0))
    assert spec.forward_calls == len(model.calls) and plain.forward_calls == len(plain_calls)
    assert spec.drafted == sum(n - 1 for _, n in model.calls[1:])
    assert spec.accepted <= spec.drafted
    assert len(model.calls) == len(plain_calls) - spec.accepted  # each accepted guess saved one call


class Stepper(PairModel):
    """Predicts (5 * token + 3) mod 256: an answer that never repeats itself within 64 tokens."""

    def row(self, pos):
        out = np.full(self.vocab_size, -np.inf, dtype=np.float32)
        out[(5 * self.cache[pos] + 3) % 256] = 0.0
        return out


def test_min_accepted_keeps_hopeless_guesses_away_from_the_model():
    """The prompt is random bytes: 1-gram matches abound, but what followed them is never what comes next."""
    model = Stepper(LETTERS, n_ctx=256)
    prompt = np.random.default_rng(0).integers(0, 256, 150).tolist()
    kw = {"sampler": Sampler.greedy(), "max_tokens": 40}
    eager = run(model, prompt, lookup=LookupConfig(draft=8, ngram=(1, 3), min_accepted=0), **kw)
    gated = run(model, prompt, lookup=LookupConfig(draft=8, ngram=(1, 3), min_accepted=2), **kw)
    assert gated.tokens == eager.tokens
    assert eager.drafted >= 80 and eager.acceptance_rate < 0.1
    assert gated.drafted <= eager.drafted / 4


def test_a_draft_through_the_stop_token_emits_nothing_after_it():
    """The prompt contains 'abcd' + EOS + 'xyz'; the answer copies 'abcd', so the guess runs past EOS."""

    class Copier(PairModel):
        def row(self, pos):  # predict the token that followed the latest earlier copy of the current token
            out = np.full(self.vocab_size, -np.inf, dtype=np.float32)
            cur = self.cache[pos]
            prev = [i for i in range(pos) if self.cache[i] == cur]
            out[self.cache[prev[-1] + 1] if prev else ord("a")] = 0.0
            return out

    model = Copier(LETTERS, n_ctx=64)
    prompt = [ord(c) for c in "abcd"] + [EOS] + [ord(c) for c in "xyz."]
    greedy = Sampler.greedy()
    plain = run(model, prompt, sampler=greedy, max_tokens=20)
    plain_n_past = model.n_past
    one_gram = LookupConfig(draft=8, ngram=(1, 3), min_accepted=0)  # the first answer token is a 1-gram match
    spec = run(model, prompt, sampler=greedy, max_tokens=20, lookup=one_gram)
    assert plain.text == "abcd" and plain.stop_reason == "eos"
    same_run(plain, spec, plain_n_past, model.n_past)
    assert spec.unevaluated_ids == [EOS]
    # the second call guessed "bcd" + EOS + "xyz.": the guess was checked in one call and EOS ended the run
    assert model.calls[1] == (len(prompt), 1 + 8) and len(model.calls) == 2
    assert spec.accepted == 3  # b, c, d; EOS was guessed right too, but a stop id never counts as evaluated
    for max_tokens in (1, 2, 3, 4):  # a budget that ends inside the guess
        plain = run(model, prompt, sampler=greedy, max_tokens=max_tokens)
        plain_n_past = model.n_past
        spec = run(model, prompt, sampler=greedy, max_tokens=max_tokens, lookup=one_gram)
        same_run(plain, spec, plain_n_past, model.n_past)
        assert max(s + n for s, n in model.calls) <= len(prompt) + max_tokens - 1
    plain = run(model, prompt, sampler=greedy, max_tokens=20, stop_strings=("bc",))
    plain_n_past = model.n_past
    spec = run(model, prompt, sampler=greedy, max_tokens=20, stop_strings=("bc",), lookup=one_gram)
    same_run(plain, spec, plain_n_past, model.n_past)
    assert spec.text == "a" and spec.stop_reason == "stop_string"


def test_random_sampling_with_lookup_keeps_every_sequence_probability():
    """Exact probabilities of all 3-token beginnings of a fake model's answers against frequencies with lookup on.

    With 4 tokens to generate, the first call after the prefill checks 2 guesses (the last token of the budget
    is never evaluated, so a longer guess would be wasted work).
    """
    model = PairModel(LETTERS[:3], seed=3, sharp=1.5)
    prompt = [ord(c) for c in "abcabcab"]
    sampler = Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=1)
    n = 4000
    counts: dict[tuple[int, ...], int] = {}
    drafted = accepted = 0
    for _ in range(n):
        gen = run(model, prompt, sampler=sampler, max_tokens=4,
                  lookup=LookupConfig(draft=2, ngram=(1, 2), min_accepted=0))
        counts[tuple(gen.tokens[:3])] = counts.get(tuple(gen.tokens[:3]), 0) + 1
        drafted += gen.drafted
        accepted += gen.accepted
    assert drafted >= 2 * n and accepted > n // 4  # the guesses were really tried, and often right

    def probs(context):
        model.cache = list(context)
        row = model.row(len(context) - 1)
        ids, p = sampler.distribution(row, [])
        return {i: q for i, q in zip(ids.tolist(), p.tolist()) if q > 0}

    chi2, cells = 0.0, 0
    for a, pa in probs(prompt).items():
        for b, pb in probs(prompt + [a]).items():
            for c, pc in probs(prompt + [a, b]).items():
                expected = n * pa * pb * pc
                chi2 += (counts.get((a, b, c), 0) - expected) ** 2 / expected
                cells += 1
    assert cells == 27
    assert chi2 < 60, chi2  # 26 degrees of freedom: the 99.99th percentile is about 61


@pytest.mark.parametrize("guess_rank", [0, 1, 4])
def test_choose_with_draft_has_the_sampler_distribution(guess_rank):
    logits = np.array([2.0, 1.5, 1.0, 0.0, -1.0, -3.0])
    sampler = Sampler(temperature=0.9, top_k=4, top_p=1.0, min_p=0.0, seed=0)
    ids, p = sampler.distribution(logits)
    guess = int(np.argsort(-logits)[guess_rank])  # rank 4 is cut by top_k: it can never be accepted
    n = 20_000
    draws = np.bincount([choose_with_draft(sampler, logits, [], guess) for _ in range(n)], minlength=len(logits))
    expected = np.zeros(len(logits))
    expected[ids] = p
    assert np.abs(draws / n - expected).max() < 0.015
    assert draws[4] == draws[5] == 0


def test_lookup_with_a_sampler_it_cannot_check_is_refused():
    class Opaque:
        def sample(self, logits, history=()):
            return int(np.argmax(logits))

    model = PairModel(LETTERS)
    with pytest.raises(TypeError, match="lookup decoding needs a greedy sampler"):
        generate(model, ByteTokenizer(), [97], sampler=Opaque(), lookup=4)
    gen = generate(model, ByteTokenizer(), [97], sampler=Opaque(), max_tokens=3)  # without lookup it is fine
    list(gen)
    assert len(gen.tokens) == 3


def test_stats_and_repr():
    model = PairModel(LETTERS, seed=5)
    gen = run(model, [ord(c) for c in "abababab"], sampler=Sampler.greedy(), max_tokens=12, lookup=4)
    assert gen.lookup == LookupConfig(draft=4)
    assert gen.drafted > 0 and 0.0 <= gen.acceptance_rate <= 1.0
    assert gen.acceptance_rate == gen.accepted / gen.drafted
    assert "drafted tokens accepted" in repr(gen) and f"{gen.forward_calls} forward calls" in repr(gen)
    off = run(model, [97], sampler=Sampler.greedy(), max_tokens=3)
    assert off.lookup is None and off.drafted == 0 and off.acceptance_rate == 0.0 and off.forward_calls == 3
    assert "lookup" not in repr(off)


# ------------------------------------------------------------------------------------------------
# SmolLM2
# ------------------------------------------------------------------------------------------------

PARAGRAPH = (
    "Their are many reasons why peple enjoy traveling to new contries. Some like to see famous places and meet "
    "diffrent people, while others just want to relaxe on a beach and forget about there work. Traveling can also "
    "teach us alot about history, food and culture. However, it is importent to plan a trip carefuly, because "
    "unexpected problems can happen at any time."
)
PROMPTS = {
    "rewrite": ("Correct the spelling in this paragraph: " + PARAGRAPH, 40),
    "open": ("What are the main causes of climate change?", 16),
    "copy": ("Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the river bank.", 32),
}


@pytest.fixture(scope="module")
def smol():
    from bytes2logits import assets
    from bytes2logits.engine.model import Model
    from bytes2logits.engine.session import chat_prompt_ids
    from bytes2logits.engine.tokenizer import Tokenizer

    model = Model.from_gguf(assets.path("smollm2"), n_ctx=512)
    tok = Tokenizer.from_gguf(model.reader)
    ids = {k: chat_prompt_ids(tok, [{"role": "user", "content": q}]) for k, (q, _) in PROMPTS.items()}
    return model, tok, ids


def smol_run(smol, name, **kwargs):
    model, tok, ids = smol
    kwargs.setdefault("max_tokens", PROMPTS[name][1])
    model.reset()
    gen = generate(model, tok, ids[name], sampler=Sampler.greedy(), **kwargs)
    list(gen)
    return gen, model.n_past


@pytest.fixture(scope="module")
def plain_runs(smol):
    return {name: smol_run(smol, name) for name in PROMPTS}


@pytest.mark.parametrize("name", list(PROMPTS))
def test_smollm2_greedy_ids_are_identical_with_lookup(smol, plain_runs, name):
    plain, plain_n_past = plain_runs[name]
    # every guess checked (1-grams too, no gate): as many verification calls as possible
    spec, spec_n_past = smol_run(smol, name, lookup=LookupConfig(draft=8, ngram=(1, 3), min_accepted=0))
    same_run(plain, spec, plain_n_past, spec_n_past)
    assert spec.forward_calls == plain.forward_calls - spec.accepted
    if name in ("rewrite", "copy"):
        assert spec.accepted > 0 and spec.acceptance_rate > 0
    if name == "copy":  # the answer quotes the prompt: most guesses are right, and it ends with <|im_end|>
        assert "quick brown fox jumps over the lazy dog" in spec.text and spec.stop_reason == "eos"
        assert spec.accepted >= len(spec.tokens) // 2


def test_smollm2_sampling_with_lookup(smol):
    """A random sampler with lookup: guesses are accepted by the speculative rule, the answer still copies."""
    model, tok, ids = smol
    model.reset()
    gen = generate(model, tok, ids["copy"], sampler=Sampler(temperature=0.5, seed=0), max_tokens=24,
                   lookup=LookupConfig(draft=8, ngram=(1, 3), min_accepted=0))
    list(gen)
    assert "brown fox" in gen.text and gen.accepted > 0 and model.n_past == gen.n_past


def test_smollm2_stops_inside_a_draft(smol, plain_runs):
    """A stop string, a small budget and the stop token all land inside copied stretches."""
    model, tok, ids = smol
    copy, _ = plain_runs["copy"]
    word = " lazy"
    assert word in copy.text
    for kwargs in ({"stop_strings": (word,)}, {"max_tokens": 7}):
        plain, plain_n_past = smol_run(smol, "copy", **kwargs)
        spec, spec_n_past = smol_run(smol, "copy", lookup=8, **kwargs)
        same_run(plain, spec, plain_n_past, spec_n_past)
        assert spec.accepted > 0
    assert spec.tokens == copy.tokens[:7] and spec.stop_reason == "max_tokens"
    # the eos case: the full copy run above ended with <|im_end|>, sampled from a verified row
    assert copy.tokens[-1] in tok.stop_ids


def test_smollm2_context_full_with_lookup(smol):
    """A context with room for 12 answer tokens: lookup stops exactly where plain decoding does."""
    from bytes2logits.engine.model import Model

    _, tok, ids = smol
    prompt = ids["copy"]
    model = Model.from_gguf(smol[0].reader, n_ctx=len(prompt) + 12)
    runs = []
    for lookup in (None, 8):
        model.reset()
        gen = generate(model, tok, prompt, sampler=Sampler.greedy(), max_tokens=100, stop_ids=(), lookup=lookup)
        list(gen)
        runs.append((gen, model.n_past))
    (plain, plain_n_past), (spec, spec_n_past) = runs
    assert plain.stop_reason == "context_full" and plain.n_past == model.n_ctx
    same_run(plain, spec, plain_n_past, spec_n_past)
    assert spec.accepted > 0


def test_chat_session_and_cli_pass_lookup_through(smol, capsys):
    from bytes2logits.engine.cli import chat_main
    from bytes2logits.engine.session import ChatSession

    model, tok, _ = smol
    question = PROMPTS["copy"][0]
    answers = []
    for lookup in (None, 6):
        model.reset()
        chat = ChatSession(model, tok, sampler=Sampler.greedy(), max_tokens=24, lookup=lookup)
        turns = [chat.ask(question)]
        accepted = chat.last.accepted
        turns.append(chat.ask("Again, please."))
        answers.append((turns, chat.cached_ids, model.n_past, chat.last.lookup, accepted))
    (plain_turns, plain_cached, plain_n_past, off, _), (turns, cached, n_past, on, accepted) = answers
    assert turns == plain_turns and cached == plain_cached and n_past == plain_n_past
    assert off is None and on == LookupConfig(draft=6) and accepted > 0
    with pytest.raises(ValueError, match="lookup must be >= 0"):
        ChatSession(model, tok, lookup=-2)

    assert chat_main(["-p", question, "--lookup", "-1"]) == 1
    assert "--lookup must be >= 0" in capsys.readouterr().err
    assert chat_main(["-p", question, "--greedy", "--max-tokens", "24", "--lookup", "6", "--verbose",
                      "--n-ctx", "256"]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == plain_turns[0].strip()
    assert "drafted tokens accepted" in out.err and "forward calls" in out.err
