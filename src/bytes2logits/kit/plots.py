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

# ---------------------------------------------------------------------- chapter 08


def compute_by_vocab(rows, *, parts=("body", "attention", "head"), zoom_from: int = 2048,
                     title: str | None = None):
    """Compute for one document against the vocabulary size: two plots side by side.

    ``rows`` holds one dict per size with the keys ``"V"``, ``"total"`` and each name in ``parts`` (FLOPs).
    Left: the parts stacked, in GFLOP. Right: the total relative to its minimum, from ``zoom_from`` up, where
    the bottom is shallow. Both mark the size of least total compute with a dotted line.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    best = min(rows, key=lambda r: r["total"])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    vs = [r["V"] for r in rows]
    bottom = np.zeros(len(rows))
    for part in parts:
        heights = np.array([r[part] / 1e9 for r in rows])
        axes[0].fill_between(vs, bottom, bottom + heights, alpha=0.6, label=part)
        bottom += heights
    axes[0].set(ylabel="GFLOP", title=title or "Compute for one document")
    zoom = [r for r in rows if r["V"] >= zoom_from]
    axes[1].plot([r["V"] for r in zoom], [r["total"] / best["total"] for r in zoom], marker="o",
                 label="total compute")
    axes[1].set(ylabel="relative to the minimum", title=f"Zoom from V = {zoom_from:,}: a shallow bottom")
    for ax in axes:
        ax.axvline(best["V"], color="k", ls=":", label=f"minimum, V = {best['V']:,}")
        ax.set(xscale="log", xlabel="vocabulary size V")
        ax.grid(alpha=0.3)
        ax.legend()
    axes[1].set_xticks([r["V"] for r in zoom][::2], [f"{r['V']:,}" for r in zoom][::2])
    axes[1].minorticks_off()
    fig.tight_layout()
    return fig


def sizes_by_year(rows, *, title: str | None = None):
    """Vocabulary sizes against the year they appeared, on a log axis, one labelled point per tokenizer.

    ``rows`` holds ``(name, year, size, read)`` tuples; ``read`` is true when the size was read from a file
    (a filled marker) and false when it is a cited fact (a hollow one).
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for name, year, size, read in rows:
        ax.scatter([year], [size], s=60, color="C0", facecolors="C0" if read else "none", zorder=3)
        ax.annotate(name, (year, size), textcoords="offset points", xytext=(6, -3), fontsize=9)
    ax.set_yscale("log", base=2)
    sizes = [size for _, _, size, _ in rows]
    ticks = [2**k for k in range(max(sizes).bit_length() + 1) if min(sizes) / 2 <= 2**k <= max(sizes) * 2]
    ax.set_yticks(ticks, [f"{t:,}" for t in ticks])
    ax.minorticks_off()
    years = [year for _, year, _, _ in rows]
    ax.set_xlim(min(years) - 0.5, max(years) + 1.5)
    ax.set_xticks(range(min(years), max(years) + 1))
    ax.set(xlabel="year", ylabel="vocabulary size V (log scale)",
           title=title or "Vocabulary sizes over time (hollow: cited, not read from a file)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


__all__ += ["compute_by_vocab", "sizes_by_year"]

# ---- chapter 08 (more)


def _draw_panel(ax, *, series=None, hists=None, bars=None, bands=None, hlines=None, stars=None, xlabel: str = "",
                ylabel: str = "", title: str | None = None, xscale: str | None = None, yscale: str | None = None,
                xticks=None, legend=True):
    """Draw one panel of :func:`curve_panels` on ``ax`` (see there for the arguments)."""
    for label, (xs, heights, colour) in (bars or {}).items():
        ax.bar(list(xs), list(heights), color=colour, label=label)
    for label, (values, style) in (hists or {}).items():
        ax.hist(values, label=label, **style)
    for label, (xs, ys, *style) in (series or {}).items():
        ax.plot(list(xs), list(ys), label=label, **(style[0] if style else {}))
    for label, (xs, low, high, colour) in (bands or {}).items():
        ax.fill_between(list(xs), low, high, alpha=0.2, color=colour, label=label)
    for label, y in (hlines or {}).items():
        ax.axhline(y, color="grey", ls=":", label=label)
    for label, (x, y) in (stars or {}).items():
        ax.scatter([x], [y], marker="*", s=200, color="C3", zorder=3, label=label)
    if xscale:
        ax.set_xscale(xscale)
    if yscale:
        ax.set_yscale(yscale)
    if xticks is not None:
        ax.set_xticks(list(xticks), [f"{v:,}" for v in xticks])
    ax.set(xlabel=xlabel, ylabel=ylabel)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    if legend:
        ax.legend(**(legend if isinstance(legend, dict) else {}))


def curve_panels(panels, *, figsize=(12, 4)):
    """Panels side by side, each a line chart described by one dict of ``panels`` (keyword arguments below).

    - ``series``: label -> ``(xs, ys)`` or ``(xs, ys, style)``, one line each; ``style`` is passed to
      ``plot`` (``{"marker": "o", "ls": "--"}``). A label starting with ``_`` stays out of the legend.
    - ``hists``: label -> ``(values, style)``, a histogram each (``style`` holds ``bins``, ``color``...).
    - ``bars``: label -> ``(xs, heights, colour)``, drawn under the lines (say, the indentation of a line).
    - ``bands``: label -> ``(xs, low, high, colour)``, a shaded range (say, the min–max of a spread).
    - ``hlines``: label -> y, a grey dotted horizontal line (a ceiling, a threshold).
    - ``stars``: label -> ``(x, y)``, one red star (a real tokenizer or model on a curve of made ones).
    - ``xlabel``, ``ylabel``, ``title``; ``xscale`` / ``yscale`` (``"log"``); ``xticks``: positions
      labelled with thousands separators; ``legend``: false for none, or a dict passed to ``legend``.
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=figsize, squeeze=False)
    for ax, panel in zip(axes[0], panels):
        _draw_panel(ax, **panel)
    fig.tight_layout()
    return fig


def curves(*, figsize=(8, 4), **panel):
    """One line chart: the keyword arguments of one panel of :func:`curve_panels` (``series``, ``stars``...)."""
    return curve_panels([panel], figsize=figsize)


def share_bars(rows, *, title: str | None = None, figsize=(9, 2.2)):
    """Horizontal bars from 0 to 1, each split into coloured parts: ``rows[bar][part] = share``.

    Every bar should have the same parts (say, where a model's parameters go, and where its file's bytes
    go); the first bar is on top, and the legend naming the parts sits to the right.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    labels = list(rows)
    parts = list(dict.fromkeys(p for bar in labels for p in rows[bar]))
    ys = list(range(len(labels) - 1, -1, -1))
    fig, ax = plt.subplots(figsize=figsize)
    left = np.zeros(len(labels))
    for part in parts:
        widths = np.array([rows[bar].get(part, 0) for bar in labels])
        ax.barh(ys, widths, left=left, label=part)
        left += widths
    ax.set(xlim=(0, 1), yticks=ys, yticklabels=labels)
    if title:
        ax.set_title(title)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    return fig


__all__ += ["curve_panels", "curves", "share_bars"]

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

# ---------------------------------------------------------------------- chapter 06


def marker_bars(counts, baselines, *, forged=(), ylabel: str = "marker / control ids", title: str | None = None):
    """How many marker ids each way of encoding the same conversation produced: one labelled bar per way.

    ``counts`` maps a label (a way of encoding) to its number of marker ids. Bars whose label is in
    ``forged`` (the ways that let message text mint markers) are red, the others green. ``baselines`` maps a
    name to the count of a harmless conversation; each is drawn as a grey line (dashed, dotted, ...) named
    in the legend, so a bar that reaches above its line shows markers the user wrote.
    """
    import matplotlib.pyplot as plt

    labels = list(counts)
    values = [counts[k] for k in labels]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    bars = ax.bar(labels, values, color=["#dc2626" if k in forged else "#16a34a" for k in labels])
    ax.bar_label(bars, [str(v) for v in values], padding=1)
    for k, (name, value) in enumerate(baselines.items()):
        ax.axhline(value, ls=("--", ":", "-.")[k % 3], c="gray", lw=1, label=f"{name}: a harmless chat ({value})")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.5 * max([*values, *baselines.values(), 1]))  # room for the legend above the bars
    if title:
        ax.set_title(title, fontsize=10)
    if baselines:
        ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


__all__ += ["marker_bars"]

# ---- chapter 07


def probability_bars(values, *, xlabel: str, title: str | None = None, good: int = 1):
    """Horizontal bars of one probability per labelled prompt, on a log scale, top to bottom in order.

    ``values`` maps a label to a probability. The first ``good`` labels are drawn green (the right
    prompts), the rest red (the mistakes); each bar is labelled with its value.
    """
    import matplotlib.pyplot as plt

    names = list(values)[::-1]  # barh draws from the bottom: reverse so the first label is on top
    probs = [values[n] for n in names]
    colours = ["tab:red"] * (len(names) - good) + ["tab:green"] * good
    fig, ax = plt.subplots(figsize=(8, 3.8))
    ax.barh(names, probs, color=colours)
    ax.set_xscale("log")
    ax.set_xlim(right=5)  # room for the labels
    ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title)
    for y, v in enumerate(probs):
        ax.text(v, y, f" {v:.1e}", va="center", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


__all__ += ["probability_bars"]

# ---------------------------------------------------------------------- chapter 10


def grid_overlay(image, step: int, *, title: str | None = None, figsize=(4.6, 5.4)):
    """An image with a white line every ``step`` pixels; leftover rows or columns (less than a step) in red."""
    import matplotlib.pyplot as plt

    h, w = image.shape[:2]
    fig, ax = plt.subplots(figsize=figsize)
    ax.imshow(image)
    for y in range(0, h, step):
        ax.axhline(y - 0.5, color="white", lw=0.4)
    for x in range(0, w, step):
        ax.axvline(x - 0.5, color="white", lw=0.4)
    if h % step:
        ax.axhspan(h - h % step - 0.5, h - 0.5, color="red", alpha=0.6)
    if w % step:
        ax.axvspan(w - w % step - 0.5, w - 0.5, color="red", alpha=0.6)
    if title:
        ax.set_title(title, fontsize=10)
    ax.axis("off")
    return fig


def image_table(rows, *, titles=None, row_labels=None, figsize=None, fontsize: int = 9):
    """Images in a table without ticks: ``rows`` is a list of rows, each a list of image arrays.

    ``titles`` (one per column, or one per image as a list of rows) go above the images of the first row
    (or above every image); ``row_labels`` (one per row) go on the left.
    """
    import matplotlib.pyplot as plt

    n_rows, n_cols = len(rows), max(len(r) for r in rows)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=figsize or (3.2 * n_cols, 3.2 * n_rows), squeeze=False)
    for i, row in enumerate(rows):
        for j in range(n_cols):
            ax = axes[i, j]
            ax.set_xticks([]), ax.set_yticks([])
            if j >= len(row):
                ax.axis("off")
                continue
            ax.imshow(row[j])
            if titles is not None:
                t = titles[i][j] if isinstance(titles[0], (list, tuple)) else (titles[j] if i == 0 else None)
                if t:
                    ax.set_title(t, fontsize=fontsize)
        if row_labels is not None:
            axes[i, 0].set_ylabel(row_labels[i], fontsize=fontsize)
    fig.tight_layout()
    return fig


def labelled_bars(values, *, highlight=(), xlabel: str = "", title: str | None = None, figsize=(8, 3.4)):
    """Horizontal bars, top to bottom in the order of ``values`` (label -> number), each with its value.

    Labels in ``highlight`` are grey (a reference, such as a paragraph of text), the others blue.
    """
    import matplotlib.pyplot as plt

    names, numbers = list(values), list(values.values())
    fig, ax = plt.subplots(figsize=figsize)
    bars = ax.barh(names, numbers, color=["tab:gray" if k in highlight else "tab:blue" for k in names])
    ax.bar_label(bars, labels=[f"{v:,}" for v in numbers], padding=3, fontsize=8)
    ax.set_xlim(0, max(numbers) * 1.1)
    ax.set_xlabel(xlabel)
    ax.invert_yaxis()
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def similarity_maps(maps, mark, *, vmin: float = -0.2, vmax: float = 1.0, label: str = "cosine similarity",
                    figsize=(8.6, 4.6)):
    """Heat maps side by side on one colour scale, with a red cross at ``mark`` = (row, column).

    ``maps`` maps a title to a 2-D array; the shared colour bar is named ``label``.
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(maps), figsize=figsize, squeeze=False)
    for ax, (title, values) in zip(axes[0], maps.items()):
        im = ax.imshow(values, cmap="viridis", vmin=vmin, vmax=vmax)
        ax.plot(mark[1], mark[0], "r+", ms=10, mew=2)
        ax.set_title(title, fontsize=9)
        ax.set_xticks([]), ax.set_yticks([])
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label=label)
    return fig


def sequence_layout(kind, values, *, names, ylabel: str, title: str | None = None, figsize=(9, 3.8)):
    """One sequence seen two ways: a strip saying what each position holds, over one dot per position.

    ``kind[pos]`` is 0 for text and ``n`` for the n-th image; ``names`` names each kind (text first) for the
    legend; ``values`` is the number plotted for each position (a vector norm, say).
    """
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap

    kind, values = np.asarray(kind), np.asarray(values)
    colours = ["tab:gray", "tab:blue", "tab:orange", "tab:green", "tab:purple"][: len(names)]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=figsize, sharex=True, gridspec_kw={"height_ratios": [1, 3]})
    top.imshow(kind[None, :], aspect="auto", cmap=ListedColormap(colours), vmin=0, vmax=len(colours) - 1,
               interpolation="nearest")
    top.set_yticks([])
    if title:
        top.set_title(title, fontsize=9)
    positions = np.arange(len(kind))
    for n, (name, colour) in enumerate(zip(names, colours)):
        where = kind == n
        bottom.plot(positions[where], values[where], ".", ms=4 if n == 0 else 2, color=colour, label=name)
    bottom.set_ylim(0, None)
    bottom.set_xlabel("position in the sequence")
    bottom.set_ylabel(ylabel)
    bottom.legend(fontsize=8, markerscale=3)
    fig.tight_layout()
    return fig


__all__ += ["grid_overlay", "image_table", "labelled_bars", "similarity_maps", "sequence_layout"]

# ---------------------------------------------------------------------- chapter 09


def relative_fertility_curves(relative, names=None, *, reference: str = "en_Latn", dearest: int = 4,
                              cheapest: int = 3):
    """One panel per tokenizer: every language's fertility relative to the reference, cheapest to dearest.

    ``relative`` maps a tokenizer's name to ``{language code: ratio}`` ordered by ratio (what
    :func:`bytes2logits.lessons.pitfalls.relative_fertility` returns), ``reference`` at 1.0. ``names`` maps
    a language code to the name shown in the labels (default: the code). The ``dearest`` languages and the
    ``cheapest`` ones other than the reference are labelled with their ratio; the y axis is logarithmic,
    with a line at 1 for the reference.
    """
    import matplotlib.pyplot as plt

    names = names or {}
    ref_name = names.get(reference, reference)
    cols = 2 if len(relative) > 1 else 1
    rows = -(-len(relative) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 3.5 * rows), sharey=True, squeeze=False)
    for ax, (tokenizer, ratios) in zip(axes.flat, relative.items()):
        items = list(ratios.items())
        ax.plot(range(len(items)), [v for _, v in items], color="C0")
        ax.axhline(1, color="0.5", linewidth=0.8)
        ax.text(len(items) * 0.98, 1.05, f"{ref_name} = 1", ha="right", fontsize=8, color="0.4")
        ax.set_yscale("log")
        ax.set_title(f"{tokenizer}: tokens per character relative to {ref_name}", fontsize=10)
        arrow = dict(arrowstyle="-", color="0.6", lw=0.6)
        for k, rank in enumerate(range(len(items) - 1, max(len(items) - 1 - dearest, -1), -1)):
            code, value = items[rank]
            ax.annotate(f"{names.get(code, code)} {value:.1f}x", (rank, value), xytext=(0.30, 0.92 - 0.08 * k),
                        textcoords="axes fraction", fontsize=8, arrowprops=arrow)
        others = [rank for rank, (code, _) in enumerate(items) if code != reference]
        for k, rank in enumerate(others[:cheapest]):
            code, value = items[rank]
            ax.annotate(f"{names.get(code, code)} {value:.2f}x", (rank, value), xytext=(0.15, 0.30 - 0.08 * k),
                        textcoords="axes fraction", fontsize=8, arrowprops=arrow)
        ax.set_xlabel("languages, cheapest to dearest")
        ax.grid(alpha=0.3, which="both")
    for ax in list(axes.flat)[len(relative):]:
        ax.axis("off")
    fig.tight_layout()
    return fig


__all__ += ["relative_fertility_curves"]

# ---------------------------------------------------------------------- chapter 02

GRANULARITY_MARKERS = {"char": "X", "word": "o", "subword (BPE)": "s", "SmolLM2": "*"}


def granularity_tradeoff(results, colours, *, ticks=(), lost_ticks=(), markers=None):
    """The two sides of the granularity trade-off: sequence length (left) and what is lost (right).

    ``results`` maps a text's name to its rows ``(kind, vocab size, tokens per 1000 characters, lost share
    of pieces, lost share of words, round trip exact)``, one row per tokenizer; ``colours`` gives each text
    its colour and ``markers`` each kind of tokenizer its marker (default :data:`GRANULARITY_MARKERS`). The
    left panel plots tokens per 1000 characters against the vocabulary size for every kind; the right one
    the lost share of words (solid) for words and subwords, and of pieces (dashed, hollow) for words. Both x
    axes are logarithmic, labelled at ``ticks`` and ``lost_ticks`` (``8000`` shows as ``8k``).
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    markers = dict(markers or GRANULARITY_MARKERS)

    def label(t):
        return f"{round(t / 1000)}k" if t >= 1000 else str(t)

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    first = next(iter(results), None)
    for name, rows in results.items():
        for kind, marker in markers.items():
            points = [(v, t, lp, lw) for k, v, t, lp, lw, _ in rows if k == kind]
            if not points:
                continue
            vs, per1000, lost_p, lost_w = zip(*points)
            axes[0].plot(vs, per1000, marker=marker, ms=11 if marker == "*" else 7, color=colours[name])
            if kind in ("word", "subword (BPE)"):
                big = kind == "subword (BPE)" and name == first  # drawn first: keep it visible under the rest
                axes[1].plot(vs, [100 * x for x in lost_w], marker=marker, ms=10 if big else 6, color=colours[name])
            if kind == "word":
                axes[1].plot(vs, [100 * x for x in lost_p], marker=marker, color=colours[name], ls="--", mfc="white")
    axes[0].set(ylabel="tokens per 1000 characters", title="Sequence length on the test part")
    axes[1].set(ylabel="share lost (%)", title="What does not come back from decode(encode(text))")
    for ax, at in zip(axes, [ticks, lost_ticks]):
        ax.set_xscale("log")
        ax.minorticks_off()
        if at:
            ax.set_xticks(list(at), [label(t) for t in at])
        ax.set_xlabel("vocabulary size (log scale)")
        ax.grid(alpha=0.3)
    by_colour = [Line2D([], [], color=c, lw=3, label=n) for n, c in colours.items()]
    by_marker = [Line2D([], [], color="grey", ls="", marker=m, ms=8, label=k) for k, m in markers.items()]
    axes[0].legend(handles=by_colour + by_marker, fontsize=8, ncol=2)
    axes[1].legend(handles=by_colour + [Line2D([], [], color="grey", label="share of words"),
                                        Line2D([], [], color="grey", ls="--", label="share of pieces (oov_rate)")],
                   fontsize=8)
    fig.tight_layout()
    return fig


__all__ += ["GRANULARITY_MARKERS", "granularity_tradeoff"]


# ---- chapter 02


def vocabulary_growth(curves, colours, *, cap: int | None = None, title: str = "A word vocabulary keeps growing"):
    """Distinct pieces seen against characters read: ``curves[name] = (characters read, distinct pieces)``.

    One line per text, in ``colours[name]``; ``cap``, if given, is drawn as a dotted horizontal line (the
    largest vocabulary a table tries). The x axis is labelled in millions of characters.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for name, (xs, ys) in curves.items():
        ax.plot(xs, ys, color=colours[name], label=name)
    if cap is not None:
        ax.axhline(cap, color="grey", ls=":", label=f"largest cap tried ({cap:,})")
    ax.set(xlabel="characters read", ylabel="distinct pieces seen", title=title)
    ax.ticklabel_format(style="plain")
    ax.xaxis.set_major_formatter(lambda x, _: f"{x / 1e6:g} M" if x else "0")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


__all__ += ["vocabulary_growth"]

# ---- chapter 05


def token_cost_panels(names, chars, nbytes, tokens, *, notes=None, figsize=(10, 6.5)):
    """Two panels over the same texts: bytes per token (top) and tokens per character (bottom).

    ``names`` labels the texts; ``chars`` and ``nbytes`` give each text's length in characters and UTF-8
    bytes; ``tokens`` maps a tokenizer's name to its token count for each text (one bar per tokenizer).
    ``notes`` (name -> text) adds a detail to that tokenizer's label in the top legend. The baseline of
    no merges is drawn in black: one byte per token on top, the UTF-8 bytes per character below.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    chars, nbytes = np.asarray(chars, dtype=float), np.asarray(nbytes, dtype=float)
    counts = {name: np.asarray(c, dtype=float) for name, c in tokens.items()}
    notes = notes or {}
    x = np.arange(len(names))
    width = 0.8 / max(1, len(counts))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=figsize, sharex=True)
    for k, (name, c) in enumerate(counts.items()):
        dx = (k - (len(counts) - 1) / 2) * width
        label = f"{name} ({notes[name]})" if name in notes else name
        top.bar(x + dx, nbytes / c, width=width, label=label, color=f"C{k}")
        bottom.bar(x + dx, c / chars, width=width, label=name, color=f"C{k}")
    top.axhline(1.0, color="black", ls="--", lw=1, label="no merges: one byte per token")
    top.set(ylabel="bytes per token", title="What a token carries",
            ylim=(0, 1.3 * max(float((nbytes / c).max()) for c in counts.values())))
    bottom.scatter(x, nbytes / chars, marker="_", s=900, color="black", zorder=3,
                   label="no merges: one token per byte, so UTF-8 bytes per character")
    bottom.set(ylabel="tokens per character", title="What a character costs (lower is cheaper)",
               ylim=(0, 1.3 * float((nbytes / chars).max())))
    bottom.set_xticks(x, list(names))
    top.legend(fontsize=8, loc="upper right")
    bottom.legend(fontsize=8, loc="upper left", markerscale=0.5)
    for ax in (top, bottom):
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


__all__ += ["token_cost_panels"]
