"""The BPE merge stepper of chapter 03: watch byte-pair encoding learn its merges one at a time.

The views are pure functions of a small corpus, tested directly; :func:`merge_stepper` renders every step
once and hands the frames to an anywidget (back, slider, next), whose front-end works in JupyterLab and, with
no kernel, on the course site.

* :func:`bpe_trace` replays training step by step and records, for every step, the pair counts, the tied
  candidates, the winner and the segmented words. It recounts every pair at every step, which is fine for
  a chapter-sized corpus; the fast trainer is :func:`bytes2logits.lessons.bpe.train_bpe`, and a test checks that
  both learn the same merges.
* :func:`step_html` renders one step: the top pairs (ties highlighted, the winner marked), the words cut
  into coloured tokens, and the vocabulary learned so far.
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass

from ..kit.widgets import token_boxes_html
from .bpe import count_pieces, token_to_printable

__all__ = ["Step", "bpe_trace", "step_html", "merge_stepper", "encode_steps"]


@dataclass(frozen=True)
class Step:
    """The state of training before merge number ``index`` (0-based) and the merge it chose.

    ``words`` maps each distinct pre-token piece to its current segmentation (a tuple of byte strings),
    ``counts`` holds every adjacent pair's frequency-weighted count, ``tied`` the pairs sharing the top
    count (sorted by raw bytes), ``winner`` the smallest of them, or ``None`` when no pair is left.
    """

    index: int
    words: dict[str, tuple[bytes, ...]]
    frequency: dict[str, int]
    counts: dict[tuple[bytes, bytes], int]
    tied: tuple[tuple[bytes, bytes], ...]
    winner: tuple[bytes, bytes] | None
    merges: tuple[tuple[bytes, bytes], ...]


def _pair_counts(words: dict[str, tuple[bytes, ...]], freq: dict[str, int]) -> Counter:
    counts: Counter = Counter()
    for piece, symbols in words.items():
        for pair in zip(symbols, symbols[1:]):
            counts[pair] += freq[piece]
    return counts


def bpe_trace(text: str, num_merges: int) -> list[Step]:
    """Replay BPE training on ``text`` for up to ``num_merges`` merges; one :class:`Step` per merge.

    Same rules as :func:`bytes2logits.lessons.bpe.train_bpe`: pieces from ``\\S+|\\s+``, bytes as base symbols,
    counts weighted by piece frequency, the most frequent pair wins and ties go to the smallest pair of raw
    bytes. The list ends with a step whose ``winner`` is ``None`` when the corpus runs out of pairs.
    """
    if isinstance(num_merges, bool) or not isinstance(num_merges, int) or num_merges < 0:
        raise ValueError(f"num_merges must be an int >= 0, got {num_merges!r}")
    freq = dict(count_pieces(text))
    words = {piece: tuple(bytes([b]) for b in piece.encode("utf-8")) for piece in freq}
    steps: list[Step] = []
    merges: list[tuple[bytes, bytes]] = []
    for index in range(num_merges):
        counts = _pair_counts(words, freq)
        if not counts:
            steps.append(Step(index, dict(words), freq, {}, (), None, tuple(merges)))
            break
        top = max(counts.values())
        tied = tuple(sorted(p for p, c in counts.items() if c == top))
        winner = tied[0]
        steps.append(Step(index, dict(words), freq, dict(counts), tied, winner, tuple(merges)))
        merges.append(winner)
        joined = winner[0] + winner[1]
        for piece, symbols in words.items():
            if len(symbols) < 2:
                continue
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == winner[0] and symbols[i + 1] == winner[1]:
                    out.append(joined)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            words[piece] = tuple(out)
    return steps


def _show(b: bytes) -> str:
    return html.escape(token_to_printable(b))


def step_html(step: Step, top: int = 8, max_words: int = 12) -> str:
    """HTML for one step: the top ``top`` pair counts, the segmented words, and the merges so far."""
    rows = sorted(step.counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    cells = []
    for pair, count in rows:
        style = ""
        mark = ""
        if pair == step.winner:
            style, mark = "background:#bbf7d0;font-weight:bold", " &larr; merged"
        elif pair in step.tied:
            style, mark = "background:#fef08a", " (tie, loses: larger bytes)"
        cells.append(f"<tr style='{style}'><td><code>{_show(pair[0])}</code> + <code>{_show(pair[1])}</code></td>"
                     f"<td style='text-align:right;padding:0 8px'>{count}</td><td>{mark}</td></tr>")
    title = (f"<b>step {step.index + 1}</b>: merge <code>{_show(step.winner[0])}</code> + "
             f"<code>{_show(step.winner[1])}</code> &rarr; <code>{_show(step.winner[0] + step.winner[1])}</code>"
             if step.winner else f"<b>step {step.index + 1}</b>: no pair left, training stops")
    table = ("<table style='border-collapse:collapse'><tr><th>pair</th><th>count</th><th></th></tr>"
             + "".join(cells) + "</table>")
    words = sorted(step.words, key=lambda p: (-step.frequency[p], p))[:max_words]
    seg = []
    for piece in words:
        toks = token_boxes_html([token_to_printable(t) for t in step.words[piece]])
        seg.append(f"<div>{toks} &times;{step.frequency[piece]}</div>")
    vocab = ", ".join(f"<code>{_show(a + b)}</code>" for a, b in step.merges) or "(only the 256 bytes)"
    return (f"<div>{title}</div><div style='display:flex;gap:24px;align-items:flex-start'>"
            f"<div>{table}</div><div>{''.join(seg)}</div></div>"
            f"<div style='margin-top:6px'>learned so far ({len(step.merges)}): {vocab}</div>")


def merge_stepper(text: str, num_merges: int = 10, top: int = 8):
    """Back, slider and next over :func:`bpe_trace` of ``text``; each step shows :func:`step_html`.

    A :class:`bytes2logits.kit.anywidgets.MergeStepper` (an anywidget): the steps are computed here, once,
    and the same front-end steps through them in JupyterLab and, with no kernel, on the course site.
    """
    from ..kit.anywidgets import MergeStepper

    return MergeStepper(frames=[step_html(s, top) for s in bpe_trace(text, num_merges)])


def encode_steps(piece: str, merges) -> list[tuple[tuple[bytes, ...], int | None]]:
    """How encoding replays the merges on one piece: every segmentation, with the rank that produced it.

    Starts from the piece's bytes (rank ``None``); at each step the adjacent pair with the lowest rank in
    ``merges`` is merged (the leftmost occurrence when a pair occurs twice), until no pair has a rank.
    """
    ranks = {pair: r for r, pair in enumerate(merges)}
    symbols = tuple(bytes([b]) for b in piece.encode("utf-8"))
    out: list[tuple[tuple[bytes, ...], int | None]] = [(symbols, None)]
    while len(symbols) > 1:
        best = min(((ranks[p], i) for i, p in enumerate(zip(symbols, symbols[1:])) if p in ranks), default=None)
        if best is None:
            break
        rank, i = best
        symbols = symbols[:i] + (symbols[i] + symbols[i + 1],) + symbols[i + 2 :]
        out.append((symbols, rank))
    return out
