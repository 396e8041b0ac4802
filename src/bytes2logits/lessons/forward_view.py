"""Pictures for chapter 16 (the transformer forward pass in NumPy).

Nothing here computes the forward pass: the chapter's cells do that, step by step. These helpers only draw
what a cell computed, or label it:

* :func:`token_labels` turns token ids into short, visible axis labels (spaces and newlines shown);
* :func:`rope_pairs_diagram` colours the dimensions of one attention head by the RoPE pair they belong to,
  in llama.cpp's two modes. The pairs are found by calling the engine's
  :func:`~bytes2logits.engine.ops.rope_pairs` on the dimension numbers, not from a second description;
* :func:`attention_grid` draws a grid of causal attention patterns (rows = queries, columns = keys);
* :func:`logit_lens_plot` draws the rank and probability of one token, layer by layer;
* :func:`parameter_bars` draws a parameter count per component.

matplotlib is imported inside each plotting function, and each returns its ``Figure``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..engine.ops import rope_pairs

__all__ = ["token_labels", "pair_index", "rope_pairs_diagram", "attention_grid", "logit_lens_plot",
           "parameter_bars"]

_VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥"}


def token_labels(tokenizer, ids: Sequence[int], width: int = 10) -> list[str]:
    """One short label per token id: its decoded text with spaces, newlines and tabs made visible.

    ``tokenizer`` is anything with ``decode(list_of_ids) -> str``. A label longer than ``width`` characters
    is cut and ends with ``…``; an empty decoding (a byte that is only part of a UTF-8 character) shows as
    ``<id>``.

    >>> class T:
    ...     def decode(self, ids): return {1: " Paris", 2: "\\n", 3: ""}[ids[0]]
    >>> token_labels(T(), [1, 2, 3])
    ['␣Paris', '↵', '<3>']
    """
    labels = []
    for i in ids:
        text = tokenizer.decode([int(i)])
        shown = "".join(_VISIBLE.get(c, c) for c in text) or f"<{int(i)}>"
        labels.append(shown if len(shown) <= width else shown[: width - 1] + "…")
    return labels


def pair_index(head_dim: int, style: str, rope_dim: int | None = None) -> np.ndarray:
    """For each dimension of a head, the number of the RoPE pair it belongs to (-1: not rotated).

    Found by asking :func:`~bytes2logits.engine.ops.rope_pairs` which dimensions it pairs: it is given
    the dimension numbers themselves, so its two views name the partners of every pair.

    >>> pair_index(8, "norm").tolist()
    [0, 0, 1, 1, 2, 2, 3, 3]
    >>> pair_index(8, "neox").tolist()
    [0, 1, 2, 3, 0, 1, 2, 3]
    """
    rope_dim = head_dim if rope_dim is None else rope_dim
    dims = np.arange(head_dim)
    first, second = rope_pairs(dims, rope_dim // 2, style)
    index = np.full(head_dim, -1)
    index[first] = np.arange(first.size)
    index[second] = np.arange(second.size)
    return index


def rope_pairs_diagram(head_dim: int = 16, styles: Sequence[str] = ("norm", "neox"), *, title: str | None = None):
    """One row per RoPE mode: the ``head_dim`` dimensions of a head, coloured (and numbered) by their pair.

    Two cells of the same colour are rotated together, by the same angle. Returns the ``Figure``.
    """
    import matplotlib.pyplot as plt

    half = head_dim // 2
    cmap = plt.get_cmap("tab20" if half <= 20 else "viridis", half)
    fig, axes = plt.subplots(len(styles), 1, figsize=(0.42 * head_dim + 1.5, 1.0 * len(styles) + 0.4),
                             squeeze=False)
    for ax, style in zip(axes[:, 0], styles):
        index = pair_index(head_dim, style)
        for dim, pair in enumerate(index):
            ax.add_patch(plt.Rectangle((dim, 0), 0.94, 0.94, color=cmap(pair), label=f"pair {pair}"))
            ax.text(dim + 0.47, 0.47, str(pair), ha="center", va="center", fontsize=8)
        ax.set_xlim(0, head_dim)
        ax.set_ylim(0, 1)
        ax.set_yticks([])
        ax.set_xticks(np.arange(head_dim) + 0.47, [str(d) for d in range(head_dim)], fontsize=7)
        ax.set_ylabel(f'"{style}"', rotation=0, ha="right", va="center")
        for side in ax.spines.values():
            side.set_visible(False)
    axes[-1, 0].set_xlabel("dimension of the head (the number in a cell is its pair)")
    fig.suptitle(title or f"which dimensions RoPE rotates together (head size {head_dim})", fontsize=10)
    fig.tight_layout()
    return fig


def attention_grid(patterns: Sequence[np.ndarray], labels: Sequence[str], titles: Sequence[str], *,
                   ncols: int = 2, title: str | None = None):
    """Heatmaps of causal attention weights: ``patterns[i]`` is ``[n, n]`` (row = query, column = key).

    Cells above the diagonal (a query looking at a later key, which the causal mask forbids) are drawn
    blank rather than as zeros. ``labels`` are the ``n`` token labels, ``titles`` one per pattern.
    Returns the ``Figure``.
    """
    import matplotlib.pyplot as plt

    if len(patterns) != len(titles):
        raise ValueError(f"{len(patterns)} patterns but {len(titles)} titles")
    n = len(labels)
    for p in patterns:
        if np.shape(p) != (n, n):
            raise ValueError(f"a pattern has shape {np.shape(p)}, expected ({n}, {n}) for {n} labels")
    nrows = -(-len(patterns) // ncols)
    size = 0.22 * n + 1.6
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols + 1, size * nrows), squeeze=False,
                             layout="constrained")
    future = np.triu(np.ones((n, n), dtype=bool), k=1)
    image = None
    for ax, pattern, name in zip(axes.flat, patterns, titles):
        image = ax.imshow(np.ma.masked_where(future, pattern), vmin=0, vmax=1, cmap="magma_r")
        ax.set_title(name, fontsize=9)
        ax.set_xticks(range(n), labels, rotation=90, fontsize=7)
        ax.set_yticks(range(n), labels, fontsize=7)
    for ax in list(axes.flat)[len(patterns):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("key (attended to)")
    for ax in axes[:, 0]:
        ax.set_ylabel("query")
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6, label="attention weight")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def logit_lens_plot(ranks: Sequence[int], probs: Sequence[float], token: str, *, title: str | None = None):
    """Two panels over the layers: the rank (0 = top) and the probability of ``token``.

    ``ranks[i]`` and ``probs[i]`` are read after layer ``i`` (``i = 0`` is the embedding, before any layer).
    The rank axis is logarithmic (rank + 1 is drawn, so that rank 0 fits). Returns the ``Figure``.
    """
    import matplotlib.pyplot as plt

    if len(ranks) != len(probs):
        raise ValueError(f"{len(ranks)} ranks but {len(probs)} probabilities")
    layers = np.arange(len(ranks))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
    left.plot(layers, np.asarray(ranks) + 1, marker="o", ms=3)
    left.set_yscale("log")
    left.invert_yaxis()
    left.set_ylabel(f"rank of {token!r} + 1 (top = 1)")
    right.plot(layers, probs, marker="o", ms=3, color="tab:green")
    right.set_ylim(0, 1)
    right.set_ylabel(f"probability of {token!r}")
    for ax in (left, right):
        ax.set_xlabel("after layer (0 = the embedding)")
        ax.grid(alpha=0.3)
    fig.suptitle(title or "the logit lens: final norm + output head applied after every layer", fontsize=10)
    fig.tight_layout()
    return fig


def parameter_bars(counts: Mapping[str, int], *, title: str | None = None):
    """A horizontal bar per component, with its parameter count and share of the total. Returns the ``Figure``."""
    import matplotlib.pyplot as plt

    names = list(counts)
    values = np.array([counts[k] for k in names], dtype=float)
    total = values.sum()
    fig, ax = plt.subplots(figsize=(8, 0.42 * len(names) + 1.2))
    ax.barh(range(len(names)), values / 1e6, color="tab:blue")
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    for i, v in enumerate(values):
        ax.text(v / 1e6, i, f" {v / 1e6:.2f} M ({v / total:.1%})", va="center", fontsize=8)
    ax.set_xlim(0, values.max() / 1e6 * 1.35)
    ax.set_xlabel("parameters (millions)")
    ax.set_title(title or f"{total / 1e6:.1f} M parameters", fontsize=10)
    fig.tight_layout()
    return fig
