"""Chapter 17's views (bytes2logits.lessons.generation_view), checked against the engine they watch.

* ``sampler_stages`` must end exactly where ``Sampler.distribution`` ends, for every combination of stages,
  and each stage must only remove candidates (never add or reorder probability it should not).
* ``trace_generation`` watches ``generate`` from outside; its rows must describe what the loop really did:
  the ``new`` pieces join to the loop's text, ``held`` is what was received and not shown, and wrapping the
  model changes no token (checked on a scripted fake and on SmolLM2 itself).
* the chat widget streams what the session yields, reports errors in its status line, and forgets cached ids
  when another caller moved the model's cache.
* the plots draw the numbers they are given (bar heights and line data are read back from the figure).
"""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest

from bytes2logits.engine.generate import Sampler, generate
from bytes2logits.errors import ContextFullError
from bytes2logits.lessons import generation_view as gv

matplotlib.use("Agg")

# ------------------------------------------------------------------------------------------------
# Fakes: a tokenizer whose ids are byte strings, and a model that forces a script of ids
# ------------------------------------------------------------------------------------------------

STAR = "🌟".encode()                                   # f0 9f 8c 9f
PIECES = [bytes([b]) for b in range(256)] + [b"", b" Paris", b"\n", b"Q", b":", b" What", STAR[:2], b"<b>"]
EOS, PARIS, NL, Q, COLON, WHAT, STAR_HEAD, TAG = range(256, 264)


class FakeTokenizer:
    """id -> PIECES[id]; EOS is the only stop id."""

    stop_ids = frozenset({EOS})
    vocab_size = len(PIECES)

    def decode_bytes(self, ids):
        return b"".join(PIECES[i] for i in ids)

    def decode(self, ids):
        return self.decode_bytes(ids).decode("utf-8", "replace")

    def id_to_token(self, i):
        return "<eos>" if i == EOS else PIECES[i].decode("latin-1")


class ScriptModel:
    """Whatever the input, the next logits make ``script[k]`` the clear favourite at generated step k."""

    def __init__(self, script, n_ctx=64):
        self.script, self.n_ctx, self.vocab_size = list(script), n_ctx, len(PIECES)
        self.n_past = 0
        self.calls: list[tuple[list[int], int]] = []

    def forward(self, ids, start_pos=0, *, last_only=False):
        ids = [int(i) for i in ids]
        self.calls.append((ids, start_pos))
        self.n_past = start_pos + len(ids)
        k = len(self.calls) - 1                        # call 0 is the prefill -> generated step 0
        row = np.full(self.vocab_size, -5.0, dtype=np.float32)
        row[self.script[min(k, len(self.script) - 1)]] = 10.0
        rows = 1 if last_only else len(ids)
        return np.tile(row, (rows, 1))


PROMPT = [ord(c) for c in "A:"]


def _trace(script, **kwargs):
    kwargs.setdefault("sampler", Sampler.greedy())
    return gv.trace_generation(ScriptModel(script), FakeTokenizer(), PROMPT, **kwargs)


# ------------------------------------------------------------------------------------------------
# sampler_stages
# ------------------------------------------------------------------------------------------------

SETTINGS = [
    dict(),                                                         # llama.cpp's defaults
    dict(temperature=1.3, top_k=0, top_p=0.9, min_p=0.0),
    dict(temperature=0.7, top_k=5, top_p=1.0, min_p=0.2),
    dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.5),
    dict(temperature=0.0, repeat_penalty=1.3),                      # greedy after a penalty
    dict(temperature=0.5, top_k=50, top_p=0.5, min_p=0.1, repeat_penalty=1.2, repeat_last_n=3),
]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "default")
def test_stages_end_at_the_samplers_distribution(settings):
    rng = np.random.default_rng(17)
    for _ in range(20):
        logits = rng.normal(0, 3, 300)
        history = rng.integers(0, 300, 12).tolist()
        sampler = Sampler(seed=0, **settings)
        stages = gv.sampler_stages(sampler, logits, history)
        ids, probs = sampler.distribution(logits, history)
        assert np.array_equal(stages[-1].ids, ids)
        np.testing.assert_allclose(stages[-1].probs, probs, rtol=1e-12, atol=1e-15)
        assert stages[0].name == "model" and len(stages[0].ids) == 300
        for earlier, later in zip(stages, stages[1:]):
            assert set(later.ids.tolist()) <= set(earlier.ids.tolist())   # a stage only removes
            assert np.isclose(later.probs.sum(), 1.0)


def test_stage_names_follow_llama_cpp_order():
    s = Sampler(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.1)
    names = [st.name for st in gv.sampler_stages(s, np.linspace(0, 5, 100), history=[3, 99])]
    assert names == ["model", "repetition penalty 1.1", "top-k 40", "top-p 0.95", "min-p 0.05", "temperature 0.8"]
    # switched-off stages are left out; no history means no penalty stage
    s = Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.1)
    assert [st.name for st in gv.sampler_stages(s, np.zeros(4))] == ["model", "temperature 1"]
    greedy = gv.sampler_stages(Sampler.greedy(), np.array([0.0, 3.0, 3.0, 1.0]))
    assert greedy[-1].name == "greedy" and greedy[-1].ids.tolist() == [1]   # smaller id wins the tie


def test_penalty_stage_uses_the_sign_rule():
    s = Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=2.0)
    logits = np.array([4.0, -1.0, 0.0, 2.0])
    model, penalised = gv.sampler_stages(s, logits, history=[0, 1])[:2]
    expected = np.exp([2.0, -2.0, 0.0, 2.0]) / np.exp([2.0, -2.0, 0.0, 2.0]).sum()
    np.testing.assert_allclose(penalised.probs, expected)
    # both penalised tokens lose against the untouched token 2, whatever the sign of their logit
    for t in (0, 1):
        assert penalised.prob_of(t) / penalised.prob_of(2) < model.prob_of(t) / model.prob_of(2)


def test_prob_of_is_zero_for_removed_tokens():
    stage = gv.Stage("x", np.array([5, 2]), np.array([0.7, 0.3]))
    assert stage.prob_of(2) == 0.3 and stage.prob_of(7) == 0.0


def test_token_label_makes_whitespace_and_broken_bytes_visible():
    tok = FakeTokenizer()
    assert gv.token_label(tok, PARIS) == "\u2423Paris"
    assert gv.token_label(tok, NL) == "\u21b5"
    assert gv.token_label(tok, STAR_HEAD) == "<f0 9f>"
    assert gv.token_label(tok, EOS) == "\u2205"


# ------------------------------------------------------------------------------------------------
# trace_generation
# ------------------------------------------------------------------------------------------------


def test_trace_of_a_stop_string_split_over_three_tokens():
    gen, rows = _trace([PARIS, NL, NL, Q, COLON, WHAT], max_tokens=10, stop_strings=["\nQ:"])
    assert gen.stop_reason == "stop_string" and gen.text == " Paris\n"
    assert [r.token for r in rows] == [PARIS, NL, NL, Q, COLON]
    assert [r.held for r in rows] == [b"", b"\n", b"\n", b"\nQ", b""]
    assert [r.new for r in rows] == [" Paris", "", "\n", "", ""]
    assert [r.shown for r in rows] == [" Paris", " Paris", " Paris\n", " Paris\n", " Paris\n"]
    assert rows[-1].note == "stop_string" and all(not r.note for r in rows[:-1])
    assert "".join(r.new for r in rows) == gen.text


def test_trace_holds_a_split_character_and_never_shows_fffd():
    gen, rows = _trace([PARIS, STAR_HEAD, STAR[2], STAR[3], COLON], max_tokens=5)
    assert gen.text == " Paris🌟:" and gen.stop_reason == "max_tokens"
    assert [r.held for r in rows] == [b"", STAR[:2], STAR[:3], b"", b""]
    assert rows[3].new == "🌟" and rows[1].new == rows[2].new == ""
    assert all("\ufffd" not in r.shown for r in rows)
    assert "".join(r.new for r in rows) == gen.text


def test_trace_last_row_shows_the_final_flush():
    # the budget ends while a character is incomplete: the held bytes become one U+FFFD at the end
    gen, rows = _trace([PARIS, STAR_HEAD], max_tokens=2)
    assert gen.text == " Paris\ufffd" and rows[-1].new == "\ufffd" and rows[-1].note == "max_tokens"


def test_trace_of_a_stop_token():
    gen, rows = _trace([PARIS, EOS, WHAT], max_tokens=10)
    assert gen.stop_reason == "eos" and [r.token for r in rows] == [PARIS, EOS]
    assert rows[-1].raw == b"" and rows[-1].new == "" and rows[-1].note == "eos"


def test_trace_changes_nothing_the_loop_does():
    script = [PARIS, NL, Q, COLON, WHAT, STAR_HEAD, STAR[2], STAR[3]]
    plain_model = ScriptModel(script)
    plain = generate(plain_model, FakeTokenizer(), PROMPT, sampler=Sampler.greedy(), max_tokens=8)
    chunks = list(plain)
    traced, rows = _trace(script, max_tokens=8)
    assert traced.tokens == plain.tokens and traced.text == plain.text == "".join(chunks)
    assert [r.new for r in rows if r.new] == chunks          # one row per chunk the loop yielded
    assert traced.n_past == plain.n_past and traced.stop_reason == plain.stop_reason


def test_trace_html_escapes_and_shows_the_naive_decoding():
    gen, rows = _trace([TAG, STAR_HEAD, STAR[2], STAR[3]], max_tokens=4)
    page = gv.trace_html(rows, FakeTokenizer(), show_naive=True)
    assert "<b>" not in page.replace("<b style", "") and "&lt;b&gt;" in page
    assert "\ufffd" in page                                   # the naive column of the split character
    assert page.count("<tr>") == len(rows) + 1
    assert "f0 9f 8c" in page                                 # held bytes, in hex


# ------------------------------------------------------------------------------------------------
# transcript_html and the chat widget
# ------------------------------------------------------------------------------------------------


def test_transcript_escapes_and_draws_the_partial_answer():
    page = gv.transcript_html([{"role": "user", "content": "<script>\nhi"}], partial="Hel", status="3 tokens")
    assert "<script>" not in page and "&lt;script&gt;<br>hi" in page
    assert "Hel\u258c" in page and "3 tokens" in page
    assert page.index("user") < page.index("assistant")


class FakeModel:
    def __init__(self):
        self.n_past = 0


class FakeSession:
    """The part of ChatSession the widget uses: messages, cached_ids, model.n_past, send, reset, last."""

    def __init__(self, answer=("Hel", "lo", "!"), error=None):
        self.model, self.messages, self.cached_ids = FakeModel(), [], []
        self.answer, self.error, self.sent, self.cached_when_sent = answer, error, [], []
        self.last, self.last_prompt_tokens, self.last_new_tokens, self.resets = None, 0, 0, 0

    def send(self, text):
        self.sent.append(text)
        self.cached_when_sent.append(list(self.cached_ids))
        if self.error:
            raise self.error
        self.messages = self.messages + [{"role": "user", "content": text}]
        yield from self.answer
        self.messages.append({"role": "assistant", "content": "".join(self.answer)})
        self.cached_ids = list(range(5))
        self.model.n_past = 5

    def reset(self):
        self.resets += 1
        self.messages, self.cached_ids = [], []


def _parts(widget):
    area, (box, send, reset) = widget.children[0], widget.children[1].children
    return area, box, send, reset


def test_widget_streams_the_answer_into_the_conversation():
    session = FakeSession()
    area, box, send, _ = _parts(gv.chat_widget(session))
    box.value = "  hello <you>  "
    send.click()
    assert session.sent == ["hello <you>"] and box.value == "" and not send.disabled
    assert "Hello!" in area.value and "hello &lt;you&gt;" in area.value and "\u258c" not in area.value
    box.value = "   "
    send.click()                                              # nothing to send
    assert session.sent == ["hello <you>"]


def test_widget_shows_an_error_in_its_status_line():
    error = ContextFullError("0 cached + 300 new tokens = 300 > n_ctx = 256")
    session = FakeSession(error=error)
    area, box, send, _ = _parts(gv.chat_widget(session))
    box.value = "too long"
    send.click()
    assert "ContextFullError" in area.value and "n_ctx = 256" in area.value and not send.disabled


def test_widget_forgets_cached_ids_when_the_model_moved():
    session = FakeSession()
    area, box, send, reset = _parts(gv.chat_widget(session))
    box.value = "one"
    send.click()
    box.value = "two"
    send.click()                                              # nothing else touched the model: cache kept
    session.model.n_past = 2                                  # something else used the model
    box.value = "three"
    send.click()
    assert session.cached_when_sent == [[], [0, 1, 2, 3, 4], []]
    reset.click()
    assert session.resets == 1 and session.messages == [] and "assistant" not in area.value


# ------------------------------------------------------------------------------------------------
# Plots: the numbers drawn are the numbers given
# ------------------------------------------------------------------------------------------------


def _heights(ax):
    return sorted(round(p.get_height(), 9) for p in ax.patches)


def test_candidate_bars_draw_each_rows_probabilities():
    import matplotlib.pyplot as plt

    tok = FakeTokenizer()
    first = gv.Stage("model", np.array([PARIS, NL, Q, COLON]), np.array([0.4, 0.3, 0.2, 0.1]))
    cut = gv.Stage("cut", np.array([PARIS, Q]), np.array([0.6, 0.4]))
    fig = gv.candidate_bars([first, cut], tok, n=3)
    top, bottom = fig.axes
    assert _heights(top) == [0.2, 0.3, 0.4]                  # the 3 best of the first row
    assert _heights(bottom) == [0.4, 0.6]                    # NL was removed: no bar, an x instead
    assert len(bottom.collections[0].get_offsets()) == 1
    assert [t.get_text() for t in bottom.get_xticklabels()] == ["\u2423Paris", "\u21b5", "Q"]
    assert bottom.get_title(loc="left") == "cut: 2 candidate(s), these bars hold 100%"
    assert top.get_legend() is None                          # nothing removed: no legend for the x marks
    assert [t.get_text() for t in bottom.get_legend().get_texts()] == ["not a candidate any more"]
    assert top.get_ylabel() == bottom.get_ylabel() == "probability"
    plt.close(fig)


def test_frequency_bars_draw_probabilities_and_frequencies():
    import matplotlib.pyplot as plt

    fig = gv.frequency_bars(np.array([PARIS, Q]), np.array([0.75, 0.25]), np.array([70, 30]), FakeTokenizer())
    assert _heights(fig.axes[0]) == [0.25, 0.3, 0.7, 0.75]
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["exact probability (±2 standard errors)", "frequency in 100 draws"]
    plt.close(fig)


def test_forward_cost_plots_time_and_rate():
    import matplotlib.pyplot as plt

    fig = gv.forward_cost([1, 2, 4], [0.1, 0.2, 0.2])
    left, right = fig.axes
    np.testing.assert_allclose(left.lines[0].get_ydata(), [100, 200, 200])
    np.testing.assert_allclose(right.lines[0].get_ydata(), [10, 10, 20])
    plt.close(fig)


# ------------------------------------------------------------------------------------------------
# On SmolLM2 itself: the trace watches, it does not change anything
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2():
    from bytes2logits import assets
    from bytes2logits.engine.model import Model
    from bytes2logits.engine.tokenizer import Tokenizer

    model = Model.from_gguf(assets.path("smollm2"), n_ctx=64)
    return model, Tokenizer.from_gguf(model.reader)


def test_trace_on_smollm2_matches_a_plain_run(smollm2):
    model, tok = smollm2
    prompt = tok.encode("Q: What is the capital of Spain?\nA: Madrid\n\nQ: What is the capital of France?\nA:")
    plain = generate(model, tok, prompt, sampler=Sampler(seed=3), max_tokens=6)
    chunks = list(plain)
    traced, rows = gv.trace_generation(model, tok, prompt, sampler=Sampler(seed=3), max_tokens=6)
    assert traced.tokens == plain.tokens and traced.text == plain.text == "".join(chunks)
    assert "".join(r.new for r in rows) == traced.text and len(rows) == len(traced.tokens)
    received = tok.decode_bytes([t for t in traced.tokens if t not in tok.stop_ids])
    for r in rows[:-1]:                                      # shown + held = everything received so far
        assert (r.shown.encode() + r.held) == received[: len(r.shown.encode()) + len(r.held)]
