"""Views for chapter 17 (generation): the sampler's stages, a trace of the streaming loop, and a chat widget.

Three kinds of helper live here, none of which re-implements the engine:

* :func:`sampler_stages` runs the engine's own stage functions (``apply_repetition_penalty``,
  ``top_k_filter``, ``top_p_filter``, ``min_p_filter``, temperature) in the order ``Sampler`` runs them,
  and keeps every intermediate candidate list, so that a chapter can *draw* what each stage removed.
  Its last stage is, by test, exactly ``Sampler.distribution``.
* :func:`trace_generation` runs the engine's ``generate`` on a real model and records, after each
  sampled token, what the loop had shown so far and what it was still holding back (part of a UTF-8
  character, or text that may be the start of a stop string). It watches from the outside: a thin
  stand-in for the model notes the loop's state each time the loop feeds a token back.
* :func:`chat_widget` wires a text box and a Send button to a :class:`~bytes2logits.engine.session.ChatSession`
  and streams the answer into an HTML area; :func:`transcript_html` (a pure function) draws the
  conversation.

The plotting functions (:func:`candidate_bars`, :func:`frequency_bars`, :func:`forward_cost`) import
matplotlib inside the function and return the ``Figure``.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from ..engine.generate import (
    Sampler,
    apply_repetition_penalty,
    generate,
    min_p_filter,
    softmax,
    top_k_filter,
    top_p_filter,
)

__all__ = ["Stage", "sampler_stages", "token_label", "candidate_bars", "frequency_bars", "forward_cost",
           "TraceRow", "trace_generation", "trace_html", "transcript_html", "chat_widget"]


# --------------------------------------------------------------------------------------------------
# The sampler, stage by stage
# --------------------------------------------------------------------------------------------------


class Stage(NamedTuple):
    """One step of the sampler chain: its ``name``, the surviving candidate ``ids`` and their ``probs``.

    ``probs`` is the softmax over the survivors at that point (so it sums to 1): what the final draw
    would use if the chain stopped there.
    """

    name: str
    ids: np.ndarray
    probs: np.ndarray

    def prob_of(self, token_id: int) -> float:
        """The probability this stage gives ``token_id`` (0.0 if the stage removed it)."""
        hit = np.flatnonzero(self.ids == token_id)
        return float(self.probs[hit[0]]) if len(hit) else 0.0


def sampler_stages(sampler: Sampler, logits: np.ndarray, history: Sequence[int] = ()) -> list[Stage]:
    """The candidate list after each stage of ``sampler``, calling the engine's stage functions in order.

    The first stage is ``"model"``: the softmax of the raw logits over the whole vocabulary. Then come
    the stages that are switched on, in ``Sampler``'s order: repetition penalty, top-k, top-p, min-p and
    temperature (llama.cpp's default chain). A greedy sampler (``temperature == 0``) has one more stage,
    ``"greedy"``: the single best token. The last stage's ids and probabilities equal
    ``sampler.distribution(logits, history)``.

    >>> s = Sampler(temperature=1.0, top_k=2, top_p=1.0, min_p=0.0)
    >>> [(st.name, st.ids.tolist()) for st in sampler_stages(s, np.array([0.0, 2.0, 1.0]))]
    [('model', [0, 1, 2]), ('top-k 2', [1, 2]), ('temperature 1', [1, 2])]
    """
    x = np.asarray(logits, dtype=np.float64)
    ids = np.arange(len(x))
    stages = [Stage("model", ids, softmax(x))]
    if sampler.repeat_penalty != 1.0 and sampler.repeat_last_n != 0 and len(history):
        x = apply_repetition_penalty(x, history, sampler.repeat_penalty, sampler.repeat_last_n)
        stages.append(Stage(f"repetition penalty {sampler.repeat_penalty:g}", ids, softmax(x)))
    if sampler.is_greedy:
        best = int(np.argmax(x))
        stages.append(Stage("greedy", np.array([best]), np.array([1.0])))
        return stages
    steps = [(f"top-k {sampler.top_k}", top_k_filter, sampler.top_k, sampler.top_k > 0),
             (f"top-p {sampler.top_p:g}", top_p_filter, sampler.top_p, sampler.top_p < 1.0),
             (f"min-p {sampler.min_p:g}", min_p_filter, sampler.min_p, sampler.min_p > 0.0)]
    for name, stage, value, on in steps:
        if on:
            ids, x = stage(ids, x, value)
            stages.append(Stage(name, ids, softmax(x)))
    stages.append(Stage(f"temperature {sampler.temperature:g}", ids, softmax(x / sampler.temperature)))
    return stages


def token_label(tokenizer, token_id: int) -> str:
    """A short, visible label for one token: its text with a space drawn as ``␣`` and a newline as ``↵``.

    Bytes that are not complete UTF-8 on their own are written as ``<e3 82>``.
    """
    raw = tokenizer.decode_bytes([int(token_id)])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "<" + raw.hex(" ") + ">"
    return text.replace(" ", "\u2423").replace("\n", "\u21b5") or "\u2205"


def candidate_bars(rows: Sequence[tuple[str, np.ndarray, np.ndarray]], tokenizer, *, n: int = 10,
                   title: str | None = None):
    """Bar charts of the same ``n`` tokens under several distributions, one panel per row.

    ``rows`` are ``(label, ids, probs)`` (a :class:`Stage` is one). The tokens on the x axis are the
    ``n`` most likely of the *first* row, so a token that a later row removed shows as an empty slot
    marked ``x`` (and named in that panel's legend); each panel's title says how many candidates the row
    has and how much of its probability the drawn bars hold.
    """
    import matplotlib.pyplot as plt

    first_ids, first_probs = np.asarray(rows[0][1]), np.asarray(rows[0][2])
    top = first_ids[np.argsort(-first_probs, kind="stable")[:n]]
    labels = [token_label(tokenizer, t) for t in top]
    fig, axes = plt.subplots(len(rows), 1, figsize=(8.5, 0.4 + 1.55 * len(rows)), sharex=True, squeeze=False)
    ymax = 0.0
    for ax, (label, ids, probs) in zip(axes[:, 0], rows):
        lookup = dict(zip(np.asarray(ids).tolist(), np.asarray(probs).tolist()))
        values = np.array([lookup.get(int(t), 0.0) for t in top])
        kept = np.array([int(t) in lookup for t in top])
        ymax = max(ymax, float(values.max()))
        ax.bar(np.flatnonzero(kept), values[kept], color="#3b82f6")
        ax.scatter(np.flatnonzero(~kept), np.zeros((~kept).sum()), marker="x", color="#9ca3af", zorder=3,
                   label="not a candidate any more")
        if not kept.all():
            ax.legend(fontsize=7, frameon=False, loc="upper right")
        ax.set_title(f"{label}: {len(lookup):,} candidate(s), these bars hold {values.sum():.0%}",
                     fontsize=9, loc="left")
        ax.set_ylabel("probability", fontsize=8)
        ax.spines[["top", "right"]].set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylim(0, ymax * 1.1)
    axes[-1, 0].set_xticks(range(len(top)), labels, rotation=30, ha="right", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def frequency_bars(ids: np.ndarray, probs: np.ndarray, counts: np.ndarray, tokenizer, *, title: str | None = None):
    """Observed frequencies (``counts / counts.sum()``) next to the exact probabilities, per candidate.

    The whiskers on the exact bars are ±2 standard errors of a frequency, ``2·sqrt(p(1-p)/N)``: where
    about 95% of the observed bars should end if the draws really follow ``probs``.
    """
    import matplotlib.pyplot as plt

    ids, probs, counts = np.asarray(ids), np.asarray(probs, dtype=float), np.asarray(counts, dtype=float)
    total = counts.sum()
    se = np.sqrt(probs * (1 - probs) / total)
    x = np.arange(len(ids))
    fig, ax = plt.subplots(figsize=(7.5, 2.8))
    ax.bar(x - 0.2, probs, 0.4, yerr=2 * se, capsize=3, color="#93c5fd", label="exact probability (±2 standard errors)")
    ax.bar(x + 0.2, counts / total, 0.4, color="#f97316", label=f"frequency in {int(total):,} draws")
    ax.set_xticks(x, [token_label(tokenizer, t) for t in ids], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("probability / frequency", fontsize=8)
    ax.legend(fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(title or "the engine's Sampler against its own distribution", fontsize=10)
    fig.tight_layout()
    return fig


def forward_cost(sizes: Sequence[int], seconds: Sequence[float], *, title: str | None = None):
    """Two panels for ``forward`` calls of ``sizes[i]`` tokens that took ``seconds[i]``.

    Left: seconds per call against tokens per call. Right: tokens per second, the same data divided.
    A call of one token (a decode step) is the leftmost point; the flat start of the left curve is
    where extra tokens in the same call come almost for free.
    """
    import matplotlib.pyplot as plt

    sizes, seconds = np.asarray(sizes, dtype=float), np.asarray(seconds, dtype=float)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.5, 3.0))
    ax1.plot(sizes, seconds * 1e3, "o-", color="#2563eb")
    ax1.set_xlabel("tokens in one forward call")
    ax1.set_ylabel("milliseconds per call")
    ax2.plot(sizes, sizes / seconds, "o-", color="#16a34a")
    ax2.set_xlabel("tokens in one forward call")
    ax2.set_ylabel("tokens per second")
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.spines[["top", "right"]].set_visible(False)
    fig.suptitle(title or "one forward call: a decode step (1 token) against prefills", fontsize=10)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------------
# Watching the streaming loop
# --------------------------------------------------------------------------------------------------


class TraceRow(NamedTuple):
    """The loop's state right after it handled one sampled token.

    ``token`` is the id and ``raw`` its bytes (empty for a stop token such as ``<|im_end|>``); ``shown``
    is all the text the loop had emitted so far and ``new`` the part emitted for this token; ``held``
    holds the bytes received but not shown yet. ``note`` says what ended the run on the last row
    (``"eos"``, ``"stop_string"``, ``"max_tokens"`` or ``"context_full"``), else it is empty.
    """

    step: int
    token: int
    raw: bytes
    shown: str
    new: str
    held: bytes
    note: str


class _Watched:
    """A stand-in for a model that forwards every call and notes the loop's state at each decode step."""

    def __init__(self, model):
        self._model = model
        self.generation = None
        self.snapshots: list[tuple[int, str]] = []  # (tokens sampled so far, text shown so far)

    @property
    def n_ctx(self):
        """The wrapped model's context size."""
        return self._model.n_ctx

    @property
    def vocab_size(self):
        """The wrapped model's vocabulary size."""
        return self._model.vocab_size

    def forward(self, ids, start_pos=0, *, last_only=False):
        """Note ``(len(tokens), text)`` of the running generation, then call the real ``forward``."""
        g = self.generation
        if g is not None and g.tokens:
            self.snapshots.append((len(g.tokens), g.text))
        return self._model.forward(ids, start_pos=start_pos, last_only=last_only)


def trace_generation(model, tokenizer, prompt_ids, **kwargs):
    """Run ``generate(model, tokenizer, prompt_ids, **kwargs)`` to the end; return ``(generation, rows)``.

    ``rows`` has one :class:`TraceRow` per sampled token. The loop feeds each token back into the model
    right after it has emitted whatever that token made safe to show, so the text shown at that moment is
    the row's ``shown``. The last token is never fed back; its row is the state at the end of the run
    (after the final flush of held-back bytes, if the run ended without a stop string). A run that feeds
    several tokens back in one call (drafted guesses) is refused with a ``ValueError``.
    """
    watched = _Watched(model)
    gen = generate(watched, tokenizer, prompt_ids, **kwargs)
    watched.generation = gen
    for _ in gen:
        pass
    shown_after = dict(watched.snapshots)
    missing = [k for k in range(1, len(gen.tokens)) if k not in shown_after]
    if missing:
        raise ValueError(
            f"generated token {missing[0]} was never fed back on its own, so the loop's state after it was not "
            "seen: trace_generation needs a run that evaluates one token per forward call"
        )
    stop_ids = set(tokenizer.stop_ids if kwargs.get("stop_ids") is None else kwargs["stop_ids"])
    rows, received, before = [], b"", ""
    for step, tok in enumerate(gen.tokens, start=1):
        last = step == len(gen.tokens)
        raw = b"" if tok in stop_ids else tokenizer.decode_bytes([tok])
        received += raw
        shown = gen.text if last else shown_after[step]
        emitted = shown.encode("utf-8")
        held = received[len(emitted):] if received.startswith(emitted) else b""
        if last and gen.stop_reason == "stop_string":
            held = b""  # the stop string and anything after it are dropped, not held
        rows.append(TraceRow(step, int(tok), raw, shown, shown[len(before):], held,
                             gen.stop_reason if last else ""))
        before = shown
    return gen, rows


_NOTES = {"eos": "stop token: not shown; the run ends", "stop_string": "stop string complete: cut off; the run ends",
          "max_tokens": "budget spent: the run ends", "context_full": "context full: the run ends"}


def _visible(text: str) -> str:
    return html.escape(text.replace(" ", "\u2423").replace("\n", "\u21b5"))


def trace_html(rows: Sequence[TraceRow], tokenizer=None, *, show_naive: bool = False) -> str:
    """An HTML table of :func:`trace_generation`'s rows: token, its bytes, what is shown, what is held.

    Spaces are drawn as ``␣`` and newlines as ``↵``; everything is HTML-escaped. With ``tokenizer``, the
    token column gives the token's text (``<|im_end|>`` for a stop token). ``show_naive=True`` adds a
    column with what decoding each token's bytes on its own would print (``bytes.decode(errors="replace")``),
    which shows U+FFFD where a character is split.
    """
    head = ["step", "token", "bytes", "shown so far", "new", "held back"]
    if show_naive:
        head.insert(3, "token decoded alone")
    cells = []
    for r in rows:
        name = tokenizer.id_to_token(r.token) if tokenizer is not None else str(r.token)
        row = [str(r.step), f"{r.token} <code>{html.escape(name)}</code>", r.raw.hex(" ") or "&mdash;",
               _visible(r.shown), _visible(r.new), r.held.hex(" ")]
        if r.held:
            row[-1] += f" <code>{_visible(r.held.decode('utf-8', 'replace'))}</code>"
        if show_naive:
            row.insert(3, _visible(r.raw.decode("utf-8", "replace")))
        if r.note:
            row[-1] += f" <i>({html.escape(_NOTES.get(r.note, r.note))})</i>"
        cells.append("".join(f"<td style='padding:1px 8px;text-align:left'>{c}</td>" for c in row))
    header = "".join(f"<th style='padding:1px 8px;text-align:left'>{h}</th>" for h in head)
    body = "".join(f"<tr>{c}</tr>" for c in cells)
    return f"<table style='border-collapse:collapse;font-size:0.9em'><tr>{header}</tr>{body}</table>"


# --------------------------------------------------------------------------------------------------
# The chat widget
# --------------------------------------------------------------------------------------------------

_BUBBLE = {"user": "background:#dbeafe;margin-left:15%", "assistant": "background:#f3f4f6;margin-right:15%",
           "system": "background:#fef9c3;font-size:0.85em"}


def transcript_html(messages: Sequence[Mapping[str, str]], *, partial: str | None = None,
                    status: str = "") -> str:
    """A conversation as HTML bubbles, one per message (HTML-escaped, newlines kept).

    ``partial`` is an assistant answer still arriving: it is drawn as a last bubble with a cursor
    (``▌``). ``status`` is a line of small grey text under the conversation (speeds, or an error).

    >>> "&lt;b&gt;" in transcript_html([{"role": "user", "content": "<b>"}])
    True
    """
    shown = list(messages)
    if partial is not None:
        shown.append({"role": "assistant", "content": partial + "\u258c"})
    parts = []
    for m in shown:
        style = _BUBBLE.get(m["role"], "background:#f3f4f6")
        text = html.escape(m["content"]).replace("\n", "<br>")
        parts.append(f"<div style='{style};padding:4px 8px;margin-top:4px;border-radius:6px'>"
                     f"<b style='font-size:0.8em'>{html.escape(m['role'])}</b><br>{text}</div>")
    if status:
        parts.append(f"<div style='color:#6b7280;font-size:0.8em;margin-top:4px'>{html.escape(status)}</div>")
    return "<div style='max-width:48em'>" + "".join(parts) + "</div>"


def _stats(session) -> str:
    g = session.last
    if g is None:
        return ""
    return (f"prompt {session.last_prompt_tokens} tokens, {session.last_new_tokens} evaluated; "
            f"{len(g.tokens)} generated at {g.decode_tokens_per_second:.1f} tokens/s; stop: {g.stop_reason}"
            + (f" ({g.stop_message})" if g.stop_reason == "context_full" else ""))


def chat_widget(session, *, placeholder: str = "Ask SmolLM2 something, then press Send"):
    """A chat box for ``session`` (a :class:`~bytes2logits.engine.session.ChatSession`): type, press Send.

    The answer streams into the conversation piece by piece, as ``session.send`` yields it. Under the
    conversation a status line gives the token counts and speed of the last turn, or the error (a full
    context window raises ``ContextFullError``; press Reset to start again). Reset calls
    ``session.reset()``. If something else used the session's model since the last turn (its KV cache no
    longer holds what the session thinks it does), the session forgets its cached ids first, so the whole
    conversation is evaluated again instead of being read from a cache that changed.

    Returns the ``VBox``; its ``children`` are the HTML area and a row with the text box and the two
    buttons.
    """
    import ipywidgets as w

    area = w.HTML(value=transcript_html(session.messages))
    box = w.Text(placeholder=placeholder, layout=w.Layout(width="60%"))
    send = w.Button(description="Send", button_style="primary")
    reset = w.Button(description="Reset")

    def on_send(_button=None):
        text = box.value.strip()
        if not text:
            return
        box.value = ""
        send.disabled = True
        before = list(session.messages) + [{"role": "user", "content": text}]
        if session.cached_ids and session.model.n_past != len(session.cached_ids):
            session.cached_ids = []
        pieces: list[str] = []
        status = ""
        try:
            area.value = transcript_html(before, partial="")
            for piece in session.send(text):
                pieces.append(piece)
                area.value = transcript_html(before, partial="".join(pieces))
            status = _stats(session)
        except Exception as e:  # shown to the person chatting, not raised into the event loop
            status = f"{type(e).__name__}: {e}"
        finally:
            send.disabled = False
        area.value = transcript_html(session.messages, status=status)

    def on_reset(_button=None):
        session.reset()
        area.value = transcript_html(session.messages)

    send.on_click(on_send)
    reset.on_click(on_reset)
    return w.VBox([area, w.HBox([box, send, reset])])
