"""Pictures of ggml's quantized blocks for chapter 15: where every bit of a block goes, and what it costs.

Two kinds of helper live here:

* :data:`FIELDS` names the parts of each block type (the scale ``d``, the min ``m``, the quants ``qs`` …)
  and :func:`probe_bits` finds out, for **every bit** of a block, which value it belongs to and which bit
  of that value it is. It does not read a description of the layout: it flips the bits one at a time and
  watches which outputs of a ``dequantize`` function change, and by how much. The answer therefore comes
  from the engine's kernels (or gguf-py's, passed as ``dequant``), not from a second copy of the format.
* plotting functions (matplotlib, imported inside each function) that draw what a chapter cell computed:
  :func:`block_layouts`, :func:`bit_map`, :func:`error_histograms`, :func:`decode_bounds`,
  :func:`cost_curves`. Each returns the ``Figure``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from ..engine.gguf import GGML_BLOCK_SIZES, GGMLType
from ..engine.quants import dequantize

__all__ = ["FIELDS", "BitRole", "probe_bits", "block_layouts", "bit_map", "error_histograms", "decode_bounds",
           "cost_curves"]

#: The fields of each block type, in byte order: ``(name, first byte, end byte)``. ``d``, ``m`` and
#: ``dmin`` are fp16 numbers; ``qs``/``ql`` hold the low bits of the quants, ``qh``/``hmask`` high bits,
#: ``scales`` the K-quants' sub-block scales (and mins).
FIELDS: dict[GGMLType, tuple[tuple[str, int, int], ...]] = {
    GGMLType.Q8_0: (("d", 0, 2), ("qs", 2, 34)),
    GGMLType.Q4_0: (("d", 0, 2), ("qs", 2, 18)),
    GGMLType.Q4_1: (("d", 0, 2), ("m", 2, 4), ("qs", 4, 20)),
    GGMLType.Q5_0: (("d", 0, 2), ("qh", 2, 6), ("qs", 6, 22)),
    GGMLType.Q5_1: (("d", 0, 2), ("m", 2, 4), ("qh", 4, 8), ("qs", 8, 24)),
    GGMLType.Q2_K: (("scales", 0, 16), ("qs", 16, 80), ("d", 80, 82), ("dmin", 82, 84)),
    GGMLType.Q3_K: (("hmask", 0, 32), ("qs", 32, 96), ("scales", 96, 108), ("d", 108, 110)),
    GGMLType.Q4_K: (("d", 0, 2), ("dmin", 2, 4), ("scales", 4, 16), ("qs", 16, 144)),
    GGMLType.Q5_K: (("d", 0, 2), ("dmin", 2, 4), ("scales", 4, 16), ("qh", 16, 48), ("qs", 48, 176)),
    GGMLType.Q6_K: (("ql", 0, 128), ("qh", 128, 192), ("scales", 192, 208), ("d", 208, 210)),
}

_HALVES = ("d", "m", "dmin")  # fp16 fields
#: values per sub-block (the reach of one small scale) of the K-quants
_SUB_BLOCK = {GGMLType.Q2_K: 16, GGMLType.Q3_K: 16, GGMLType.Q4_K: 32, GGMLType.Q5_K: 32, GGMLType.Q6_K: 16}

_COLOURS = {"d": "#fdba74", "m": "#fde68a", "dmin": "#fde68a", "qs": "#bfdbfe", "ql": "#bfdbfe",
            "qh": "#c4b5fd", "hmask": "#c4b5fd", "scales": "#bbf7d0"}


class BitRole(NamedTuple):
    """What one bit of a block is: bit ``bit`` (0 = least significant) of ``what`` number ``index``.

    ``what`` is ``"q"`` (the quant of value ``index``), ``"scale"`` / ``"min"`` (the small scale or min of
    sub-block ``index``, K-quants only) or the name of an fp16 field (``"d"``, ``"m"``, ``"dmin"``; then
    ``index`` is None and ``bit`` runs 0..15). ``field`` is the :data:`FIELDS` name of the bytes it sits in.
    """

    field: str
    what: str
    index: int | None
    bit: int


def _field_of(t: GGMLType, byte: int) -> tuple[str, int]:
    for name, start, end in FIELDS[t]:
        if start <= byte < end:
            return name, start
    raise ValueError(f"byte {byte} is outside every field of {t.name}")


def _base_block(t: GGMLType, rng: np.random.Generator) -> np.ndarray:
    """Random bytes, with the fp16 fields set to 1.0 (scales) and 0.5 (mins): every product stays exact."""
    block = rng.integers(0, 256, GGML_BLOCK_SIZES[t][1], dtype=np.uint8)
    for name, start, _ in FIELDS[t]:
        if name in _HALVES:
            block[start : start + 2] = np.frombuffer(np.float16(1.0 if name == "d" else 0.5).tobytes(), np.uint8)
    return block


def probe_bits(ggml_type, *, dequant: Callable = dequantize, seed: int = 0, attempts: int = 50) -> list[list[BitRole]]:
    """The role of every bit of one block of ``ggml_type``, found by flipping bits and dequantizing.

    Returns ``roles[byte][bit]`` (bit 0 = least significant bit of the byte), a :class:`BitRole` each.
    Method: take a random block whose fp16 scales are 1.0 (and mins 0.5); flip one bit of a non-fp16
    byte; dequantize both with ``dequant(raw, type, shape)``. If exactly one value changes, the bit
    belongs to that value's quant; if several values of one sub-block change, it is a bit of that
    sub-block's scale (the change is proportional to each quant) or of its min (the same change for
    all). The bits of one number are then ranked by the size of the change they cause, which is
    ``2**bit`` times the same factor: that ranking is the bit's significance. A random block in which
    some bit changes nothing (a sub-block scale of 0 hides its quants) is replaced by another.
    """
    t = GGMLType(int(ggml_type))
    if t not in FIELDS:
        raise ValueError(f"no field table for {t.name}; probe_bits knows {', '.join(x.name for x in FIELDS)}")
    n_values, n_bytes = GGML_BLOCK_SIZES[t]
    rng = np.random.default_rng(seed)
    flips = [(b, k) for b in range(n_bytes) for k in range(8) if _field_of(t, b)[0] not in _HALVES]
    for _ in range(attempts):
        base = _base_block(t, rng)
        blocks = np.repeat(base[None], len(flips) + 1, axis=0)
        for row, (b, k) in enumerate(flips, start=1):
            blocks[row, b] ^= np.uint8(1 << k)
        with np.errstate(all="ignore"):
            out = np.asarray(dequant(blocks.reshape(-1), t, (len(flips) + 1, n_values)), dtype=np.float64)
        delta = out[1:] - out[0]
        if not np.all(np.isfinite(out)):
            continue
        targets: list[tuple[str, int, float] | None] = []
        for row in delta:
            changed = np.flatnonzero(row)
            if len(changed) == 0:
                targets.append(None)
                break
            if len(changed) == 1:
                targets.append(("q", int(changed[0]), abs(float(row[changed[0]]))))
                continue
            size = _SUB_BLOCK.get(t)
            subs = set((changed // size).tolist()) if size else set()
            if len(subs) != 1:
                targets.append(None)
                break
            what = "min" if np.all(row[changed] == row[changed[0]]) else "scale"
            targets.append((what, subs.pop(), float(np.abs(row[changed]).max())))
        # A quant bit must sit in a quant field and a scale bit in "scales"; a block where, say, a scale bit
        # changes a single value (all other quants of its sub-block zero) is ambiguous: take another.
        if len(targets) == len(flips) and all(targets) and all(
                (target[0] == "q") == (_field_of(t, b)[0] != "scales") for (b, _), target in zip(flips, targets)):
            break
    else:
        raise RuntimeError(f"no random {t.name} block let every bit show its effect in {attempts} attempts")

    roles: list[list[BitRole | None]] = [[None] * 8 for _ in range(n_bytes)]
    for b in range(n_bytes):
        name, start = _field_of(t, b)
        if name in _HALVES:  # little-endian fp16: the first byte holds bits 0..7
            for k in range(8):
                roles[b][k] = BitRole(name, name, None, 8 * (b - start) + k)
    groups: dict[tuple[str, int], list[tuple[float, int, int]]] = {}
    for (b, k), (what, index, size) in zip(flips, targets):
        groups.setdefault((what, index), []).append((size, b, k))
    for (what, index), members in groups.items():
        for bit, (_, b, k) in enumerate(sorted(members)):
            roles[b][k] = BitRole(_field_of(t, b)[0], what, index, bit)
    return roles  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------- pictures


def block_layouts(types: Sequence, *, title: str | None = None):
    """One strip per type, as long as its bits per value: the fields of a block, drawn to scale.

    Every block is scaled to "bits per value" (its bytes x 8 / its values), so a Q4_K super-block of 256
    values and a Q4_0 block of 32 sit on the same axis, and the part of each strip that is not quants is
    what the scales cost.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    types = [GGMLType(int(t)) if not isinstance(t, str) else GGMLType[t] for t in types]
    fig, ax = plt.subplots(figsize=(9.5, 0.6 + 0.55 * len(types)))
    for row, t in enumerate(types):
        y = len(types) - 1 - row
        n_values, n_bytes = GGML_BLOCK_SIZES[t]
        per_byte = 8 / n_values
        for name, start, end in FIELDS[t]:
            x0, w = start * per_byte, (end - start) * per_byte
            ax.add_patch(Rectangle((x0, y + 0.15), w, 0.7, facecolor=_COLOURS[name], edgecolor="white", lw=1.5))
            label = f"{name} {end - start}B" if w > 0.9 else name if w > 0.25 else ""
            ax.text(x0 + w / 2, y + 0.5, label, ha="center", va="center", fontsize=8)
        ax.text(n_bytes * per_byte + 0.1, y + 0.5, f"{8 * n_bytes / n_values:g} bits/value  ({n_values} values "
                f"in {n_bytes} bytes)", va="center", fontsize=8)
    ax.set_xlim(0, 13)
    ax.set_ylim(0, len(types))
    ax.set_yticks([len(types) - 1 - r + 0.5 for r in range(len(types))], [t.name for t in types])
    ax.set_xlabel("bits per value (the block's bytes spread over its values)")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(left=False)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def _role_text(role: BitRole) -> str:
    if role.index is None:
        return role.what
    short = {"q": "q", "scale": "s", "min": "m"}[role.what]
    return f"{short}{role.index}"


def bit_map(ggml_type, roles: Sequence[Sequence[BitRole]] | None = None, *, byte_ranges=None, columns: int = 2,
            title: str | None = None):
    """Every bit of (part of) a block: one row per byte, bit 7 on the left, labelled with what it is.

    ``roles`` is :func:`probe_bits`'s answer (computed when omitted). Neighbouring bits of the same number
    are drawn as one box, labelled e.g. ``q17 3:0`` (bits 3 down to 0 of value 17's quant), ``s5 5:4``
    (bits 5..4 of sub-block 5's scale) or ``d 15:8``. ``byte_ranges`` (a list of ``(start, end)``) picks
    the bytes to draw; the rows are split into ``columns`` side-by-side columns. Colours are the fields.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    t = GGMLType[ggml_type] if isinstance(ggml_type, str) else GGMLType(int(ggml_type))
    roles = roles if roles is not None else probe_bits(t)
    ranges = byte_ranges or [(0, len(roles))]
    rows: list[int | None] = []
    for start, end in ranges:
        if rows:
            rows.append(None)  # a gap between ranges
        rows.extend(range(start, end))
    per_column = -(-len(rows) // columns)
    fig, ax = plt.subplots(figsize=(5.2 * columns, 0.45 + 0.32 * per_column))
    for k, b in enumerate(rows):
        col, r = divmod(k, per_column)
        x0, y = col * 10.5, per_column - 1 - r
        if b is None:
            ax.text(x0 + 5, y + 0.5, "⋮", ha="center", va="center", fontsize=10)
            continue
        ax.text(x0 + 1.6, y + 0.5, f"byte {b}", ha="right", va="center", fontsize=7.5, family="monospace")
        bits = [roles[b][k] for k in range(7, -1, -1)]  # left to right: bit 7 .. bit 0
        i = 0
        while i < 8:
            j = i
            while j + 1 < 8 and (bits[j + 1].what, bits[j + 1].index) == (bits[i].what, bits[i].index):
                j += 1
            role_hi, role_lo = bits[i], bits[j]
            span = f"{role_hi.bit}:{role_lo.bit}" if j > i else f"{role_hi.bit}"
            ax.add_patch(Rectangle((x0 + 1.8 + i, y + 0.08), j - i + 1, 0.84, facecolor=_COLOURS[role_hi.field],
                                   edgecolor="white", lw=1.2))
            text = f"{_role_text(role_hi)} {span}" if j > i else f"{_role_text(role_hi)}\n{span}"
            ax.text(x0 + 1.8 + (i + j + 1) / 2, y + 0.5, text, ha="center", va="center",
                    fontsize=7 if j > i else 5.5, linespacing=0.9)
            i = j + 1
    ax.set_xlim(0, 10.5 * columns)
    ax.set_ylim(0, per_column)
    ax.axis("off")
    fields = sorted({roles[b][k].field for b in rows if b is not None for k in range(8)},
                    key=[f[0] for f in FIELDS[t]].index)
    handles = [Rectangle((0, 0), 1, 1, facecolor=_COLOURS[f]) for f in fields]
    ax.legend(handles, fields, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(fields), fontsize=8,
              frameon=False)
    ax.set_title(title or f"{t.name}: every bit of a block (bit 7 left, bit 0 right)", fontsize=10)
    fig.tight_layout()
    return fig


def error_histograms(errors: Mapping[str, np.ndarray], *, title: str | None = None):
    """Histograms of rounding errors measured in units of each block's scale: ``(x - x̂) / |d|``.

    ``errors`` maps a label to an array of such ratios. Dashed lines mark ±1/2, the bound of rounding to
    the nearest step.
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(errors), figsize=(3.3 * len(errors), 2.7), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, (label, ratio) in zip(axes, errors.items()):
        ratio = np.asarray(ratio).ravel()
        ax.hist(ratio, bins=np.linspace(-1.05, 1.05, 85), color="#60a5fa", density=True)
        for edge in (-0.5, 0.5):
            ax.axvline(edge, color="k", ls="--", lw=0.8)
        ax.set_title(f"{label}: max {np.abs(ratio).max():.3f}", fontsize=9)
        ax.set_xlabel("(x − x̂) / |d|")
    axes[0].set_ylabel("density")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def decode_bounds(bounds: Mapping[str, float], *, measured: Mapping[str, float] | None = None,
                  title: str | None = None):
    """Horizontal bars: the largest possible decode speed (tokens/s) for each way of storing the weights.

    ``bounds`` maps a label to tokens/s; ``measured`` adds labelled points (e.g. the engine's own speed).
    """
    import matplotlib.pyplot as plt

    labels = list(bounds)
    fig, ax = plt.subplots(figsize=(7.5, 0.6 + 0.45 * len(labels)))
    ys = np.arange(len(labels))[::-1]
    ax.barh(ys, [bounds[k] for k in labels], color="#93c5fd")
    for y, k in zip(ys, labels):
        ax.text(bounds[k], y, f" {bounds[k]:.0f}", va="center", fontsize=8)
    for k, (label, value) in enumerate((measured or {}).items()):
        ax.axvline(value, color=f"C{k + 1}", ls="--", lw=1.2, label=f"{label}: {value:.1f} tokens/s")
    ax.set_yticks(ys, labels)
    ax.set_xlabel("tokens per second, at most (memory bandwidth / bytes read per token)")
    ax.set_xlim(0, 1.12 * max(list(bounds.values()) + list((measured or {}).values())))
    if measured:
        ax.legend(fontsize=8, loc="center right")
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def cost_curves(result: Mapping, *, reference_type: str | None = None, title: str | None = None):
    """Two panels against bits per weight: mean KL divergence (log scale) and top-1 agreement.

    ``result`` is :func:`bytes2logits.lessons.quantcost.quantization_cost`'s answer. ``reference_type``
    marks the type the reference model's weights already have.
    """
    import matplotlib.pyplot as plt

    rows = result["types"]
    names = sorted(rows, key=lambda n: rows[n]["bits_per_weight"])
    bpw = [rows[n]["bits_per_weight"] for n in names]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, key, label in ((ax1, "mean_kl", "mean KL(reference ‖ re-quantized), nats"),
                           (ax2, "top1", "top-1 agreement with the reference")):
        # one marker per type, named in the legend (no line: the types are not points of one curve)
        for k, (x, n) in enumerate(zip(bpw, names)):
            ax.plot([x], [rows[n][key]], marker="osD^vP"[k % 6], ls="none", ms=7, color=f"C{k}",
                    label=f"{n} ({x:g} bits)")
        if reference_type:
            ax.axvline(rows[reference_type]["bits_per_weight"] if reference_type in rows else 5.0, color="gray",
                       ls=":", lw=1)
        ax.set_xlabel("bits per weight")
        ax.set_ylabel(label, fontsize=9)
        ax.grid(alpha=0.3)
    ax1.set_yscale("log")
    ax2.legend(fontsize=8, loc="lower right")
    ax2.set_ylim(min(0.5, min(rows[n]["top1"] for n in names) - 0.05), 1.02)
    if reference_type:
        ax1.text(0.01, 0.02, f"dotted: {reference_type}, the type the file's matrices already have",
                 transform=ax1.transAxes, fontsize=7.5, color="gray")
    fig.suptitle(title or f"what re-quantizing costs SmolLM2 ({result['n_positions']} positions)", fontsize=10)
    fig.tight_layout()
    return fig
