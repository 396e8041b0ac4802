"""Plotting and display helpers for the chapters, so that chapter cells show what is computed, not how.

Each function draws one kind of figure with matplotlib and returns the ``Figure`` (a chapter cell ends
with it or calls ``plt.show()``). They import matplotlib inside the function: importing the kit must not
need it.
"""

from __future__ import annotations

__all__: list[str] = []

# ---------------------------------------------------------------------- chapter 11

_SHOW_SPACE = {" ": "·", "\n": "↵", "\r": "␍", "\t": "→"}


def _visible(piece: str) -> str:
    """A piece drawn so that whitespace shows (``·`` space, ``↵`` newline) and a combining mark sits on ``◌``."""
    import unicodedata

    out = []
    for ch in piece:
        if ch in _SHOW_SPACE:
            out.append(_SHOW_SPACE[ch])
        elif unicodedata.category(ch).startswith("M"):
            out.append("◌" + ch)
        else:
            out.append(ch)
    return "".join(out)


def piece_strips(rows, *, title: str | None = None):
    """How several pre-tokenizers cut one text: one row per rule, each piece a box as wide as its characters.

    ``rows`` maps a label (the rule's name) to its list of pieces; the pieces of every row should join to
    the same text. Boxes alternate in colour so that neighbouring pieces stand apart; spaces are drawn as
    ``·`` and newlines as ``↵``. A box is as wide as the characters drawn in it, so a combining mark, drawn
    on ``◌``, takes two places: its label never spills out of its box, and the rows stay aligned.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    labels = list(rows)
    width = max((sum(len(_visible(p)) for p in pieces) for pieces in rows.values()), default=1)
    fig, ax = plt.subplots(figsize=(1.6 + 0.2 * width, 0.5 + 0.45 * len(labels)))
    colours = ("#bfdbfe", "#fde68a")
    for r, label in enumerate(labels):
        y = len(labels) - 1 - r
        x = 0
        for k, piece in enumerate(rows[label]):
            drawn = _visible(piece)
            ax.add_patch(Rectangle((x, y + 0.12), len(drawn), 0.76, facecolor=colours[k % 2], edgecolor="white"))
            ax.text(x + len(drawn) / 2, y + 0.5, drawn, ha="center", va="center", family="monospace", fontsize=10)
            x += len(drawn)
    ax.set_xlim(-0.2, width + 0.2)
    ax.set_ylim(0, len(labels))
    ax.set_yticks([len(labels) - 1 - r + 0.5 for r in range(len(labels))], labels)
    ax.set_xticks([])
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(left=False)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def grouped_bars(table, *, ylabel: str, title: str | None = None, value_format: str = "{:.0f}"):
    """Bars in groups: ``table[group][series] = value``, one group of bars per outer key.

    Every group should have the same series (say, one bar per pre-tokenizer for each kind of text); the
    series get one colour each and a legend, and each bar is labelled with its value.
    """
    import matplotlib.pyplot as plt

    groups = list(table)
    series = list(dict.fromkeys(s for g in groups for s in table[g]))
    fig, ax = plt.subplots(figsize=(max(7.0, 1.6 * len(groups)), 3.8))
    width = 0.8 / max(1, len(series))
    for k, name in enumerate(series):
        xs = [g + (k - (len(series) - 1) / 2) * width for g in range(len(groups))]
        values = [table[group].get(name, 0) for group in groups]
        bars = ax.bar(xs, values, width, label=name, color=f"C{k}")
        ax.bar_label(bars, [value_format.format(v) for v in values], fontsize=7, padding=1)
    ax.set_xticks(range(len(groups)), groups, fontsize=9)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, ncol=len(series))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def merge_curves(x, series, *, xlabel: str, ylabel: str, title: str | None = None, ylim=None):
    """One line per entry of ``series`` (label -> values, one value per point of ``x``), with markers.

    ``ylim`` (``(bottom, top)``) fixes the vertical range, e.g. ``(0, 1)`` for a fraction.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    for k, (label, values) in enumerate(series.items()):
        ax.plot(list(x), list(values), marker="o", markersize=4, label=label, color=f"C{k}",
                linestyle="-" if k % 2 == 0 else "--")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def regex_alternatives(pattern: str) -> list[str]:
    r"""The top-level alternatives of a regular expression: ``pattern`` split at each ``|`` that is outside
    a character class ``[...]`` and outside a group ``(...)``; an escaped character (``\|``) stays as it is.

    Chapter 11 reads a pre-tokenizer's rule one alternative at a time with it.

    >>> regex_alternatives(r"'(?i:[sdmt]|ll)|[^|\s]+|\||\s+")
    ["'(?i:[sdmt]|ll)", '[^|\\s]+', '\\|', '\\s+']
    """
    parts, current, depth, in_class, i = [], "", 0, False, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":  # an escape: keep the next character with it
            current += pattern[i:i + 2]
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch in "()":
            depth += 1 if ch == "(" else -1
        elif ch == "|" and depth == 0:
            parts.append(current)
            current, i = "", i + 1
            continue
        current += ch
        i += 1
    return parts + [current]


__all__ += ["piece_strips", "grouped_bars", "merge_curves", "regex_alternatives"]

# ---------------------------------------------------------------------- chapter 12


def unigram_lattice(text: str, edges, best, *, title: str | None = None):
    """The Unigram lattice of ``text``: nodes are the positions 0..len(text), edges the vocabulary pieces.

    ``edges`` holds ``(start, end, score)`` for every piece found in the text (the piece is
    ``text[start:end]``, the score its log-probability); ``best`` the ``(start, end)`` pieces of the chosen
    path, drawn in red. Each edge is an arc from its start node to its end node, higher for longer pieces,
    labelled with the piece and its score; the characters of the text sit between the nodes.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    n = len(text)
    chosen = {(s, e) for s, e in best}
    fig, ax = plt.subplots(figsize=(1.5 + 1.45 * n, 4.2))
    t = np.linspace(0, np.pi, 60)
    for s, e, score in sorted(edges, key=lambda edge: (edge[0], edge[1]) in chosen):
        on_path = (s, e) in chosen
        height = 0.42 * (e - s)
        ax.plot(s + (e - s) * (1 - np.cos(t)) / 2, height * np.sin(t), color="#dc2626" if on_path else "0.6",
                lw=2.6 if on_path else 1.0, zorder=3 if on_path else 2)
        ax.text((s + e) / 2, height, f"{text[s:e]}\n{score:.2f}", ha="center", va="center", fontsize=8,
                color="#b91c1c" if on_path else "0.25", zorder=4,
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.85})
    ax.scatter(range(n + 1), [0] * (n + 1), s=140, color="#1e3a8a", zorder=5)
    for k in range(n + 1):
        ax.text(k, 0, str(k), ha="center", va="center", color="white", fontsize=7, zorder=6)
    for k, ch in enumerate(text):
        ax.text(k + 0.5, -0.22, ch, ha="center", va="center", fontsize=12, family="monospace")
    total = sum(score for s, e, score in edges if (s, e) in chosen)
    ax.set_title(title or f"{len(edges)} edges; best path (red) scores {total:.2f}", fontsize=10)
    ax.set_xlim(-0.4, n + 0.4)
    ax.set_ylim(-0.45, 0.42 * max((e - s for s, e, _ in edges), default=1) + 0.35)
    ax.axis("off")
    fig.tight_layout()
    return fig


def token_rows(rows, *, title: str | None = None):
    """The same text cut by several tokenizers: one row per tokenizer, one box per token.

    ``rows`` maps a label (the tokenizer's name) to the list of its tokens' texts, drawn as they are
    (``▁``, ``##`` and all), with a space shown as ``␣``. Boxes are as wide as their text, so the rows need
    not line up; the label says how many tokens the row has.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    colours = ("#bfdbfe", "#fde68a", "#bbf7d0", "#fbcfe8")
    gap = 0.35
    lengths = {label: sum(max(len(p), 1) + gap for p in pieces) for label, pieces in rows.items()}
    width = max(lengths.values(), default=1.0)
    fig, ax = plt.subplots(figsize=(2.2 + 0.12 * width, 0.4 + 0.62 * len(rows)))
    for r, (label, pieces) in enumerate(rows.items()):
        y = len(rows) - 1 - r
        x = 0.0
        for k, piece in enumerate(pieces):
            w = max(len(piece), 1)
            ax.add_patch(FancyBboxPatch((x, y + 0.2), w, 0.6, boxstyle="round,pad=0,rounding_size=0.15",
                                        facecolor=colours[k % len(colours)], edgecolor="0.5", lw=0.6))
            ax.text(x + w / 2, y + 0.5, piece.replace(" ", "␣"), ha="center", va="center",
                    family="monospace", fontsize=10)
            x += w + gap
        ax.text(-0.6, y + 0.5, f"{label}\n{len(pieces)} tokens", ha="right", va="center", fontsize=9)
    ax.set_xlim(-0.2, width)
    ax.set_ylim(0, len(rows))
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


__all__ += ["unigram_lattice", "token_rows"]
