"""Tables and pictures for chapter 14 (the tokenizer and chat template read from GGUF metadata).

Everything here *shows* what the engine computes; none of it tokenizes on its own. The merge trace calls the
engine's :func:`~bytes2logits.engine.models.bpe_merge`, the tables read the public attributes of a
:class:`~bytes2logits.engine.tokenizer.Tokenizer`, and the figure only draws a list of token types.
matplotlib is imported inside the function that needs it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["TYPE_NAMES", "TYPE_COLOURS", "short_value", "metadata_table", "pipeline_rows", "merge_steps",
           "token_type_map"]

#: ``tokenizer.ggml.token_type`` values and the names llama.cpp gives them
TYPE_NAMES = {0: "undefined", 1: "normal", 2: "unknown", 3: "control", 4: "user-defined", 5: "unused", 6: "byte"}
#: one colour per token type (normal tokens are the pale background of the figure)
TYPE_COLOURS = {0: "#9ca3af", 1: "#e5e7eb", 2: "#f59e0b", 3: "#1f2937", 4: "#16a34a", 5: "#a855f7", 6: "#2563eb"}


def short_value(value: Any, width: int = 46) -> str:
    """A metadata value in one short line: arrays as ``[n] first, second, ...``, long strings cut with ``…``.

    >>> short_value(["a", "b", "c"], width=20)
    "[3] 'a', 'b', 'c'"
    >>> short_value("x" * 30, width=10)
    "'xxxxxxxx…"
    """
    if isinstance(value, (str, bool, int, float)) or value is None:
        text = repr(value)
    else:  # lists and NumPy arrays
        items = list(value[:8])
        shown = ", ".join(repr(v.item() if hasattr(v, "item") else v) for v in items)
        text = f"[{len(value)}] {shown}"
    text = text.replace("\n", "\\n")
    return text if len(text) <= width else text[: width - 1] + "…"


def metadata_table(files: Mapping[str, Mapping[str, Any]], prefix: str = "tokenizer.", width: int = 30) -> str:
    """A text table of the metadata keys that start with ``prefix``: one row per key, one column per file.

    ``files`` maps a label to a metadata mapping (``GGUFReader.metadata``). Keys appear in the order the
    files list them (first file first); a key a file lacks shows as ``—``. The common ``prefix`` is not
    repeated in the key column.
    """
    keys = list(dict.fromkeys(k for md in files.values() for k in md if k.startswith(prefix)))
    header = f"key ({prefix}…)"
    key_width = max([len(header)] + [len(k) - len(prefix) for k in keys]) + 2
    lines = [f"{header:<{key_width}}" + "".join(f"{label:<{width + 2}}" for label in files)]
    for key in keys:
        cells = [short_value(md[key], width) if key in md else "—" for md in files.values()]
        lines.append(f"{key[len(prefix):]:<{key_width}}" + "".join(f"{c:<{width + 2}}" for c in cells))
    return "\n".join(line.rstrip() for line in lines)


def _describe(stage: Any) -> str:
    """A pipeline component as one line: its class and the settings that decide what it does."""
    if stage is None:
        return "(none)"
    text = repr(stage)
    return text if len(text) <= 100 else text[:99] + "…"


def pipeline_rows(tokenizers: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """One row per pipeline stage, one column per tokenizer: what each stage is, read from the tokenizer.

    The six stages are those of :class:`~bytes2logits.engine.tokenizer.Tokenizer`: added tokens (how many
    control and user-defined texts the scan knows), normalizer, pre-tokenizer, model, post-processor (the ids
    ``encode("", add_special=True)`` returns, i.e. what ``add_special`` puts around any text) and decoder.
    The first row is the header.
    """
    rows: list[tuple[str, ...]] = [("stage", *tokenizers)]
    added, post, decoder = [], [], []
    for tok in tokenizers.values():
        types = Counter(tok.token_type(i) for i in range(tok.vocab_size))
        added.append(f"{types[3] + types[2]} control/unknown, {types[4]} user-defined")
        around = tok.encode("", add_special=True)
        post.append(" … ".join(tok.id_to_token(i) for i in around) or "(adds nothing)")
        decoder.append("token_bytes, per token" if tok.decoder is None else _describe(tok.decoder))
    rows.append(("added tokens", *added))
    rows.append(("normalizer", *(_describe(t.normalizer) for t in tokenizers.values())))
    rows.append(("pre-tokenizer", *(_describe(t.pre_tokenizer) for t in tokenizers.values())))
    rows.append(("model", *(_describe(t.model_stage) for t in tokenizers.values())))
    rows.append(("post-processor", *post))
    rows.append(("decoder", *decoder))
    return rows


def merge_steps(piece: str, ranks: Mapping[str, int], sep: str = " ") -> list[tuple[int | None, list[str]]]:
    """How BPE merges one pre-tokenized piece: ``[(rank, symbols), ...]``, the first entry ``(None, characters)``.

    Each later entry is the result of running the engine's :func:`~bytes2logits.engine.models.bpe_merge` with
    only the merges of rank <= ``rank``, listed for each rank at which the result changes. So it reads as "after
    the first ``rank + 1`` merge rules, the piece is cut like this"; the last entry is what the full table
    gives. Only rules whose joined text occurs in ``piece`` can apply, so only those are tried.

    >>> merge_steps("abc", {"a b": 0, "ab c": 1, "b c": 2})
    [(None, ['a', 'b', 'c']), (0, ['ab', 'c']), (1, ['abc'])]
    """
    from ..engine.models import bpe_merge

    relevant = {m: r for m, r in ranks.items() if m.replace(sep, "", 1) in piece}
    steps: list[tuple[int | None, list[str]]] = [(None, list(piece))]
    for rank in sorted(set(relevant.values())):
        merged = bpe_merge(list(piece), {m: r for m, r in relevant.items() if r <= rank}, sep)
        if merged != steps[-1][1]:
            steps.append((rank, merged))
    return steps


def token_type_map(rows: Mapping[str, Sequence[int]], *, window: int = 1024, title: str | None = None):
    """Where the non-normal tokens sit in each vocabulary: its first and its last ``window`` ids.

    ``rows`` maps a label to the vocabulary's token types (``tokenizer.ggml.token_type``, one per id). Each
    vocabulary is one band in two panels, the first ``window`` ids on the left and the last ``window`` on the
    right. Normal tokens are the pale band; every other token is a vertical line in its type's colour (at
    least a pixel wide, so a single token shows; neighbours merge into a block). Converters put added tokens
    at one end of the vocabulary, so the two windows usually hold all of them; the text on the right counts
    each type in the whole vocabulary and says how many non-normal tokens lie between the windows, if any.
    """
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Patch, Rectangle

    labels = list(rows)
    fig, axes = plt.subplots(1, 2, figsize=(12, 1.0 + 0.5 * len(labels)), sharey=True, gridspec_kw={"wspace": 0.05})
    seen: set[int] = set()
    for r, label in enumerate(labels):
        types = np.asarray(rows[label], dtype=np.int64)
        n = len(types)
        y = len(labels) - 1 - r
        starts = (0, max(n - window, 0))
        for k, (ax, first) in enumerate(zip(axes, starts)):
            shown = types[first:first + window]
            offset = 0 if k == 0 else window - len(shown)  # the last ids end at the right edge
            ax.add_patch(Rectangle((offset, y - 0.35), len(shown), 0.7, facecolor=TYPE_COLOURS[1], edgecolor="none"))
            for t in sorted(set(shown.tolist()) - {1}):
                xs = offset + np.nonzero(shown == t)[0] + 0.5
                ax.vlines(xs, y - 0.35, y + 0.35, colors=TYPE_COLOURS.get(t, "red"), linewidth=1.0)
        counts = Counter(types.tolist())
        seen.update(counts)
        note = ", ".join(f"{counts[t]} {TYPE_NAMES.get(t, t)}" for t in sorted(counts) if t != 1) or "all normal"
        between = int(np.count_nonzero(types[window: max(n - window, window)] != 1))
        if between:
            note += f"\n({between} of them between the two windows)"
        axes[1].text(window * 1.03, y, note, va="center", fontsize=8)
    for ax, xlabel in zip(axes, (f"ids 0 … {window - 1}", f"the last {window} ids")):
        ax.set_xlim(0, window)
        ax.set_ylim(-0.6, len(labels) - 0.4)
        ax.set_xticks([])
        ax.set_xlabel(xlabel, fontsize=9)
        for side in ("top", "right", "left", "bottom"):
            ax.spines[side].set_visible(False)
    axes[0].set_yticks(range(len(labels)), [f"{label} ({len(rows[label]):,} ids)" for label in reversed(labels)],
                       fontsize=9)
    axes[0].tick_params(left=False)
    axes[1].tick_params(left=False)
    handles = [Patch(color=TYPE_COLOURS[t], label=TYPE_NAMES.get(t, str(t))) for t in sorted(seen | {1})]
    fig.legend(handles=handles, ncol=len(handles), fontsize=8, loc="lower center", frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.subplots_adjust(left=0.17, right=0.7, top=0.9, bottom=0.5 / (1.0 + 0.5 * len(labels)) + 0.08)
    return fig
