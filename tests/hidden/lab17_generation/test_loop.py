"""Hidden suite, lab 17 task 4: generation_loop, run through the given generate() / Generation.

Every object the loop calls is built where the loop runs (the sandboxed worker, for a notebook): SmolLM2 and
its tokenizer from the package, a deterministic fake model over a small vocabulary that records every
``forward`` call (ids, start_pos, last_only) and refuses ids that do not fit into ``n_ctx``, a fake tokenizer,
and a greedy sampler. The package's TextStream stands in for the notebook's while these checks run, so the
loop is graded on its own (task 3 grades the stream). Only ids, text and counters cross back.

The greedy ids are llama.cpp's for the five fixture prompts (``tests/fixtures/parity``): the engine's forward
pass meets them, so a loop that feeds it the right ids at the right positions gets them too.
"""

import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

S = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("lab17_support.py"))))
P = runpy.run_path(str(Path(__file__).parents[2] / "parity_fixtures.py"))
FX = P["load_smollm2_fixture"]("exact")
PROMPTS = {p["name"]: p for p in FX["prompts"]}
N_GREEDY = 16
SPEED_FACTOR = 2.0

# A fake vocabulary: id i decodes to PIECES[i]; the fake model's best next token after t is TABLE[t].
PIECES = [b"<eos>", b"Hel", b"lo", b" wor", b"ld", b"!", b" <|", b"en", b"d|>", b"\xf0\x9f", b"\x99\x82", b" ok"]
EOS = 0


@pytest.fixture(autouse=True)
def own_loop(impl):
    """The package's own generation_loop raises; the notebook's loop uses the package's TextStream."""
    with S.fence(impl, [(S.GEN, "generation_loop")]), \
            S.global_replaced(impl, "generation_loop", "TextStream", S.worker_eval(impl, S.PACKAGE_TEXTSTREAM)):
        yield


def fake(impl, chain, n_ctx=64, stop_ids=(EOS,)):
    """A fake model whose greedy continuation after chain[0] is chain[1], chain[2], ... (then chain[-1] forever)."""
    table = list(range(len(PIECES)))
    for a, b in zip(chain, chain[1:], strict=False):
        table[a] = b
    table[chain[-1]] = chain[-1] if chain[-1] != EOS else EOS
    return S.fake_model(impl, table, n_ctx), S.fake_tokenizer(impl, PIECES, stop_ids)


def attrs(gen, *names):
    return {n: getattr(gen, n) for n in names}


def test_greedy_ids_match_llama_cpp(impl):
    """On SmolLM2, a greedy run after each of five chat prompts gives llama.cpp's first 16 generated ids.

    The prompt goes in with one prefill; then each sampled token is evaluated at position n_past."""
    model, tok = S.smollm2(impl)
    sampler = S.argmax_sampler(impl)
    for name, p in PROMPTS.items():
        chunks, gen = S.run(impl, model, tok, p["ids"].tolist(), sampler=sampler, max_tokens=N_GREEDY, stop_ids=())
        assert gen.tokens == p["gen_ids"][:N_GREEDY].tolist(), f"prompt {name!r}: the greedy ids differ"
        assert "".join(chunks) == gen.text, f"prompt {name!r}: gen.text must be the concatenation of the chunks"
        assert gen.text == tok.decode_bytes(gen.tokens).decode("utf-8", "replace"), \
            f"prompt {name!r}: the text must be the decoded tokens"
        assert gen.stop_reason == "max_tokens" and gen.done is True


def counting_run(impl):
    """A 4-token greedy run on the fake model after the prompt [5, 1]: (chunks, gen, the model's calls)."""
    model, tok = fake(impl, [1, 2, 3, 4, 5, 11])
    chunks, gen = S.run(impl, model, tok, [5, 1], sampler=S.argmax_sampler(impl), max_tokens=4)
    return chunks, gen, model.calls


def test_the_prefill_is_one_call(impl):
    """The prefill is one forward of the whole prompt at start_pos, asking for the last row only (last_only=True).

    gen._forward does exactly that; its last row of logits gives the first token."""
    _, gen, calls = counting_run(impl)
    assert gen.tokens == [2, 3, 4, 5], "the greedy continuation of the fake model"
    assert calls[0] == ([5, 1], 0, True), "the prefill: the whole prompt in one call at start_pos, last_only=True"


def test_one_token_per_decode_step(impl):
    """Each decode step evaluates only the token just sampled, at start_pos = n_past: the KV cache holds the rest.

    No step passes the prompt or earlier tokens again."""
    _, _, calls = counting_run(impl)
    assert [c[0] for c in calls[1:]] == [[2], [3], [4]], "each decode step evaluates only the token just sampled"
    assert [c[1] for c in calls[1:]] == [2, 3, 4], "each decode step's start_pos is n_past (KV cache positions)"


def test_positions_are_counted(impl):
    """max_tokens=N costs N forward calls, the prefill included: the last sampled token is never evaluated.

    n_past = start_pos + the evaluated tokens; unevaluated_ids holds the last sampled one."""
    chunks, gen, calls = counting_run(impl)
    got = attrs(gen, "n_past", "unevaluated_ids", "forward_calls", "stop_reason", "n_prompt")
    assert len(calls) == 4, "4 tokens, 4 forward calls: one prefill and 3 decode steps"
    assert got == {"n_past": 5, "unevaluated_ids": [5], "forward_calls": 4, "stop_reason": "max_tokens",
                   "n_prompt": 2}, "max_tokens: the last token is sampled but not evaluated (n_past, unevaluated_ids)"
    assert gen.text == "lo world!" and "".join(chunks) == gen.text


def test_a_stop_id_is_neither_shown_nor_evaluated(impl):
    """A sampled stop id ends the run: it is in tokens (last), not in the text, not evaluated; stop_reason 'eos'."""
    model, tok = fake(impl, [1, 2, 5, EOS])
    chunks, gen = S.run(impl, model, tok, [1], sampler=S.argmax_sampler(impl), max_tokens=50)
    assert gen.tokens == [2, 5, EOS], "tokens include the stop id that ended the run"
    assert gen.text == "lo!" and "".join(chunks) == "lo!", "the stop id's piece is never shown"
    assert gen.stop_reason == "eos" and gen.stop_message, "stop_reason 'eos', with a stop_message"
    assert [c[0] for c in model.calls] == [[1], [2], [5]], "the stop id is not evaluated"
    assert gen.n_past == 3 and gen.unevaluated_ids == [EOS], "n_past counts evaluated tokens only"


def test_stop_ids_come_from_the_argument(impl):
    """stop_ids=() switches the stop id off: the run goes on to max_tokens (and shows the token's bytes)."""
    model, tok = fake(impl, [1, 2, EOS])
    _, gen = S.run(impl, model, tok, [1], sampler=S.argmax_sampler(impl), max_tokens=4, stop_ids=())
    assert gen.tokens == [2, EOS, EOS, EOS] and gen.stop_reason == "max_tokens"
    assert gen.text == "lo<eos><eos><eos>"


def test_a_stop_string_over_three_tokens(impl):
    """A stop string split over three tokens ends the run: the text before it is kept; stop_reason 'stop_string'.

    The token that completes it is sampled (in tokens) but not evaluated."""
    model, tok = fake(impl, [1, 2, 6, 7, 8, 5])
    chunks, gen = S.run(impl, model, tok, [1], sampler=S.argmax_sampler(impl), max_tokens=50,
                        stop_strings=["<|end|>"])
    assert gen.tokens == [2, 6, 7, 8], "the run stops at the token that completes the stop string"
    assert gen.text == "lo " and "".join(chunks) == "lo ", "the text before the stop string, nothing of it"
    assert gen.stop_reason == "stop_string" and gen.stop_message
    assert len(model.calls) == 4 and gen.n_past == 4 and gen.unevaluated_ids == [8]


def test_held_back_text_is_released_at_the_end(impl):
    """Bytes held back as a possible stop string are shown when the run ends without it (stream.finish())."""
    model, tok = fake(impl, [1, 2, 6, 7, 5])
    _, gen = S.run(impl, model, tok, [1], sampler=S.argmax_sampler(impl), max_tokens=3, stop_strings=["<|end|>"])
    assert gen.tokens == [2, 6, 7] and gen.stop_reason == "max_tokens"
    assert gen.text == "lo <|en", "at the end of the run everything held back is final: show it"


def test_a_character_split_over_two_tokens(impl):
    """A character whose bytes come from two tokens is shown whole (no U+FFFD), in the chunk that completes it."""
    model, tok = fake(impl, [1, 9, 10, 11])
    chunks, gen = S.run(impl, model, tok, [1], sampler=S.argmax_sampler(impl), max_tokens=3)
    assert gen.text == "🙂 ok" and not any("\ufffd" in c for c in chunks)
    assert "".join(chunks) == gen.text


def test_a_full_context_stops_the_run(impl):
    """When every position of the KV cache is used, the run ends with stop_reason 'context_full' and a message.

    The message names n_ctx (how many positions) and says what to do; the model is never asked for more
    positions than n_ctx."""
    n_ctx = 10
    model, tok = fake(impl, [1, 2, 3, 4, 5, 11], n_ctx=n_ctx)
    _, gen = S.run(impl, model, tok, [5, 1, 2, 3], sampler=S.argmax_sampler(impl), max_tokens=100)
    assert gen.stop_reason == "context_full", "a full KV cache ends the run with stop_reason 'context_full'"
    assert gen.n_past == n_ctx and len(gen.tokens) == n_ctx - 4 + 1, \
        "every position is used: the token sampled from the last position's logits is kept (not evaluated)"
    assert str(n_ctx) in gen.stop_message and "n_ctx" in gen.stop_message, \
        "the message says how many positions there are and suggests a larger n_ctx"
    assert max(c[1] + len(c[0]) for c in model.calls) == n_ctx
    assert all(len(c[0]) == 1 for c in model.calls[1:]), "every decode step evaluates one token"


def test_max_tokens_zero_and_one(impl):
    """max_tokens=0 samples nothing (the prompt is still prefilled); max_tokens=1 needs the prefill only."""
    model, tok = fake(impl, [1, 2, 3])
    chunks, gen = S.run(impl, model, tok, [1], sampler=S.argmax_sampler(impl), max_tokens=0)
    assert gen.tokens == [] and gen.text == "" and gen.stop_reason == "max_tokens" and gen.unevaluated_ids == []
    model, tok = fake(impl, [1, 2, 3])
    _, gen = S.run(impl, model, tok, [1], sampler=S.argmax_sampler(impl), max_tokens=1)
    assert gen.tokens == [2] and len(model.calls) == 1 and gen.n_past == 1 and gen.unevaluated_ids == [2]


def test_continuing_at_start_pos(impl):
    """A follow-up run at start_pos=n_past, with the unevaluated id first, evaluates only the new ids.

    The sampler's history is the earlier ids (history=), then the prompt, then each new token."""
    model, tok = fake(impl, [1, 2, 3, 4, 5, 11])
    _, first = S.run(impl, model, tok, [1], sampler=S.argmax_sampler(impl), max_tokens=2)
    assert first.tokens == [2, 3] and first.n_past == 2
    rec = S.worker_eval(impl, "lambda: type('Rec', (), {'__module__': 'lab17_suite', 'is_greedy': True, "
                              "'temperature': 0.0, 'seen': [], 'sample': lambda self, logits, history=(): "
                              "(self.seen.append([int(t) for t in history]), "
                              "int(np.argmax(np.asarray(logits))))[1]})()")()
    prompt = first.unevaluated_ids + [3]
    _, gen = S.run(impl, model, tok, prompt, sampler=rec, max_tokens=3, start_pos=first.n_past, history=[1, 2])
    assert model.calls[2] == ([3, 3], 2, True), "the prefill goes at start_pos, after what is cached"
    assert gen.n_past == 2 + 2 + 2 and gen.start_pos == 2
    assert gen.tokens == [4, 5, 11]
    assert [c[:2] for c in model.calls[3:]] == [([4], 4), ([5], 5)], "then one token per step at n_past"
    assert rec.seen == [[1, 2, 3, 3], [1, 2, 3, 3, 4], [1, 2, 3, 3, 4, 5]], \
        "the sampler gets the history: earlier ids, the prompt, then the tokens sampled so far"


def test_chunks_are_streamed(impl):
    """The loop yields each chunk as soon as it is safe to show, not everything at the end."""
    model, tok = fake(impl, [1, 2, 3, 4, 5, 11])
    gen = impl.generate(model, tok, [1], sampler=S.argmax_sampler(impl), max_tokens=20)
    first, calls = S.worker_eval(impl, "lambda g, m: (next(g), len(m.calls))")(gen, model)
    assert first == "lo" and calls <= 2, "the first chunk comes right after the first token, before the rest run"


# Each timed run starts from a prompt of its own (22 random ordinary ids, as long as the short fixture prompt;
# the untimed first run gets one more), sent inside the timed call, so a memo of earlier runs has nothing to
# answer from and no code of the submission sees a prompt before its time runs. A run returns its chunks and
# its tokens, made in the timed call (16 of each: nothing to speak of next to 16 forward passes), and every
# pair's must be the reference loop's for the same prompt.
_TIMED_RUN = ("lambda generate, model, tok, sampler: (lambda ids: (lambda g: (lambda chunks: "
              "(chunks, [int(t) for t in g.tokens]))([c for c in g]))"
              "(generate(model, tok, ids, sampler=sampler, max_tokens=16, stop_ids=())))")
SPEED_PAIRS = 4


def test_speed(impl, reference):
    """A 16-token greedy run on SmolLM2 takes at most 2x the reference loop's time, measured in the same run.

    The forward calls dominate: one prefill and one single-token call per step, nothing recomputed."""
    import numpy as np

    model, tok = S.smollm2(impl)
    ref_model, ref_tok = S.smollm2(reference)
    n = len(PROMPTS["short"]["ids"])
    prompts = [np.random.default_rng([17, 100 + i]).integers(100, 49_000, n).tolist() for i in range(SPEED_PAIRS + 1)]
    mine = S.worker_eval(impl, _TIMED_RUN)(impl.generate, model, tok, S.argmax_sampler(impl))
    ref = S.worker_eval(reference, _TIMED_RUN)(reference.generate, ref_model, ref_tok, S.argmax_sampler(reference))
    ref(prompts[SPEED_PAIRS]), mine(prompts[SPEED_PAIRS])

    def same(i, got, want):
        chunks, tokens = got
        assert type(chunks) is list and all(type(c) is str for c in chunks), "the loop yields str chunks"
        assert tokens == want[1], "a timed run: the greedy tokens differ from the reference loop's"
        assert "".join(chunks) == "".join(want[0]), "a timed run: the text differs from the reference loop's"

    best_ref, best, ok = S.race(lambda i: mine(prompts[i]), lambda i: ref(prompts[i]), SPEED_FACTOR, slack=0.05,
                                pairs=SPEED_PAIRS, check=same)
    print(f"speed: {best:.3f} s against the reference's {best_ref:.3f} s ({best / best_ref:.2f}x)")
    assert ok, (f"16 tokens took {best:.2f} s, {best / best_ref:.1f}x the reference's {best_ref:.2f} s "
                f"(limit {SPEED_FACTOR:g}x): one single-token forward per step, the KV cache does the rest")
