"""Chapter 13's views of a GGUF file: what every byte belongs to, a picture of the layout, an offset explorer.

The parsing is the engine's (:mod:`bytes2logits.engine.gguf`): :func:`file_layout` walks a file a second time
with the engine's :class:`~bytes2logits.engine.gguf.Cursor` and section functions and only *records* where
each field started and ended. On top of that map:

* :func:`describe_offset` says what byte ``offset`` is (header field; metadata key and whether in its key,
  type or value, down to the array element; tensor info record and field; padding; tensor and row/block);
* :func:`section_sizes`, :func:`metadata_sizes` and :func:`data_by_kind` count bytes, and
  :func:`layout_figure` draws them;
* :func:`offset_explorer` is an ipywidgets view of :func:`describe_offset` with a hex dump;
* :func:`time_limit` bounds the time of one parse in the chapter's fuzz loop.

Everything here reads a file that the engine's :class:`~bytes2logits.engine.gguf.GGUFReader` already opened
without error, so it may trust the lengths it meets.
"""

from __future__ import annotations

import bisect
import contextlib
import html
import mmap
import re
import signal
import struct
import threading
import time
import weakref
from dataclasses import dataclass, field

import numpy as np

from ..engine.gguf import (
    GGML_BLOCK_SIZES,
    Cursor,
    GGUFReader,
    ValueType,
    read_array,
    read_header,
    read_tensor_infos,
    read_value_type,
)

__all__ = [
    "Location",
    "Span",
    "TimeLimit",
    "can_interrupt",
    "data_by_kind",
    "describe_offset",
    "file_layout",
    "hex_line",
    "landmarks",
    "layout_figure",
    "metadata_sizes",
    "offset_explorer",
    "offset_html",
    "resident_memory",
    "section_sizes",
    "tensor_kind",
    "time_limit",
]

HEADER_FIELDS = (("magic", 0, 4, "4s"), ("version", 4, 8, "<I"), ("tensor count", 8, 16, "<Q"),
                 ("metadata count", 16, 24, "<Q"))


@dataclass(frozen=True)
class Span:
    """One field of the file: bytes ``[start, end)``.

    ``section`` is ``"header"``, ``"metadata"``, ``"tensor info"``, ``"padding"`` or ``"tensor data"``;
    ``name`` the header field, metadata key or tensor name (``""`` for padding); ``part`` the field within
    it (``"key length"``, ``"value type"``, ``"count"``, ``"dims"`` ...); ``fmt`` the ``struct`` format of a
    fixed-size field (``"<Q"`` for a uint64), ``""`` for runs of bytes.
    """

    start: int
    end: int
    section: str
    name: str
    part: str
    fmt: str = ""


@dataclass(frozen=True)
class Location:
    """What one byte of a GGUF file belongs to (see :func:`describe_offset`).

    ``span`` is the field that holds it; ``detail`` refines inside the field (which array element, which
    row and block of a tensor), or is ``""``.
    """

    offset: int
    span: Span
    detail: str = ""

    @property
    def section(self) -> str:
        """The section of the file (see :class:`Span`)."""
        return self.span.section

    @property
    def name(self) -> str:
        """The header field, metadata key or tensor name the byte belongs to (``""`` for padding)."""
        return self.span.name

    @property
    def part(self) -> str:
        """The field within it: ``"key length"``, ``"count"``, ``"dims"``, a ggml type name for tensor data."""
        return self.span.part

    def __str__(self) -> str:
        where = " › ".join(p for p in (self.section, self.name, self.part) if p)
        return f"byte {self.offset:,}: {where}" + (f" — {self.detail}" if self.detail else "")


@dataclass
class _View:
    """What the kit remembers about one reader: its own read-only map of the file and the field spans."""

    mm: mmap.mmap
    spans: list[Span]
    starts: list[int]
    array_types: dict[str, ValueType]
    element_starts: dict[str, np.ndarray] = field(default_factory=dict)


_VIEWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _view(reader: GGUFReader) -> _View:
    view = _VIEWS.get(reader)
    if view is None:
        with open(reader.path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        spans, array_types = _walk(reader, mm)
        view = _View(mm, spans, [s.start for s in spans], array_types)
        _VIEWS[reader] = view
    return view


def _walk(reader: GGUFReader, buf) -> tuple[list[Span], dict[str, ValueType]]:
    """Read the file again with the engine's functions, noting where every field starts and ends."""
    spans = [Span(a, b, "header", name, "", fmt) for name, a, b, fmt in HEADER_FIELDS]
    c = Cursor(buf, reader.size)
    _, n_tensors, n_kv = read_header(c)
    array_types: dict[str, ValueType] = {}
    for i in range(n_kv):
        at = c.pos
        key = c.string(f"key of metadata entry {i}")
        spans += [Span(at, at + 8, "metadata", key, "key length", "<Q"), Span(at + 8, c.pos, "metadata", key, "key")]
        t_at = c.pos
        vtype = read_value_type(c, f"value type of {key!r}")
        spans.append(Span(t_at, c.pos, "metadata", key, "value type", "<I"))
        v_at = c.pos
        if vtype == ValueType.STRING:
            c.string(f"string value of {key!r}")
            spans += [Span(v_at, v_at + 8, "metadata", key, "value length", "<Q"),
                      Span(v_at + 8, c.pos, "metadata", key, "value")]
        elif vtype == ValueType.ARRAY:
            (etype,) = struct.unpack_from("<I", buf, v_at)
            array_types[key] = ValueType(etype)
            read_array(c, key)
            spans += [Span(v_at, v_at + 4, "metadata", key, "element type", "<I"),
                      Span(v_at + 4, v_at + 12, "metadata", key, "count", "<Q")]
            if c.pos > v_at + 12:
                spans.append(Span(v_at + 12, c.pos, "metadata", key, "elements"))
        else:
            c.scalar(vtype, f"value of {key!r}")
            spans.append(Span(v_at, c.pos, "metadata", key, "value", _scalar_fmt(vtype)))
    for _ in range(n_tensors):
        (info,) = read_tensor_infos(c, 1, reader.alignment)
        at, name, n = info.at, info.name, len(info.dims)
        name_end = at + 8 + len(name.encode("utf-8"))
        spans += [
            Span(at, at + 8, "tensor info", name, "name length", "<Q"),
            Span(at + 8, name_end, "tensor info", name, "name"),
            Span(name_end, name_end + 4, "tensor info", name, "n_dims", "<I"),
            Span(name_end + 4, name_end + 4 + 8 * n, "tensor info", name, "dims", f"<{n}Q"),
            Span(name_end + 4 + 8 * n, name_end + 8 + 8 * n, "tensor info", name, "ggml type", "<I"),
            Span(name_end + 8 + 8 * n, name_end + 16 + 8 * n, "tensor info", name, "data offset", "<Q"),
        ]
        if spans[-1].end != c.pos:  # pragma: no cover (the record layout above is the spec's)
            raise RuntimeError(f"tensor info of {name!r} does not end where its fields add up to")
    pos = c.pos
    if reader.data_offset > pos:
        spans.append(Span(pos, reader.data_offset, "padding", "", "to the alignment before the data"))
    pos = reader.data_offset
    for t in sorted(reader.tensors.values(), key=lambda t: t.offset):
        if t.offset > pos:
            spans.append(Span(pos, t.offset, "padding", "", "between tensors"))
        spans.append(Span(t.offset, t.offset + t.nbytes, "tensor data", t.name, t.ggml_type.name))
        pos = t.offset + t.nbytes
    if reader.size > pos:
        spans.append(Span(pos, reader.size, "padding", "", "after the last tensor"))
    return spans, array_types


def _scalar_fmt(vtype: ValueType) -> str:
    return {ValueType.UINT8: "<B", ValueType.INT8: "<b", ValueType.UINT16: "<H", ValueType.INT16: "<h",
            ValueType.UINT32: "<I", ValueType.INT32: "<i", ValueType.FLOAT32: "<f", ValueType.BOOL: "<?",
            ValueType.UINT64: "<Q", ValueType.INT64: "<q", ValueType.FLOAT64: "<d"}[vtype]


def file_layout(reader: GGUFReader) -> list[Span]:
    """Every field of the file opened by ``reader``, in file order; together they cover every byte once.

    Arrays are one ``"elements"`` span each (:func:`describe_offset` finds the element inside it).
    """
    return list(_view(reader).spans)


# ------------------------------------------------------------------------------------------------------------
# What is at byte N?


def describe_offset(reader: GGUFReader, offset: int) -> Location:
    """What byte ``offset`` of the file belongs to, down to the array element or the tensor row and block.

    Raises ``ValueError`` for an offset outside ``[0, reader.size)``.
    """
    offset = int(offset)
    if not 0 <= offset < reader.size:
        raise ValueError(f"offset {offset} is outside the {reader.size}-byte file")
    view = _view(reader)
    span = view.spans[bisect.bisect_right(view.starts, offset) - 1]
    if span.section == "tensor data":
        detail = _tensor_detail(reader.tensors[span.name], offset - span.start)
    elif span.part == "elements":
        detail = _element_detail(reader, view, span, offset)
    else:
        detail = f"byte {offset - span.start} of {span.end - span.start}"
    return Location(offset, span, detail)


def _tensor_detail(info, rel: int) -> str:
    block, size = GGML_BLOCK_SIZES[info.ggml_type]
    row_bytes = info.dims[0] // block * size
    row, in_row = divmod(rel, row_bytes)
    k, byte = divmod(in_row, size)
    rows = info.nbytes // row_bytes
    if len(info.shape) > 2:
        index = np.unravel_index(row, info.shape[:-1])
        where = f"row {tuple(int(i) for i in index)} of {info.shape[:-1]}"
    elif rows > 1:
        where = f"row {row:,} of {rows:,}"
    else:
        where = ""
    if block == 1:
        what = f"element {k:,} of {info.dims[0]:,}" + (f", byte {byte} of {size}" if size > 1 else "")
    else:
        what = (f"block {k} of {info.dims[0] // block} (elements {k * block}–{k * block + block - 1}), "
                f"byte {byte} of {size}")
    return ", ".join(p for p in (where, what) if p)


def _element_detail(reader: GGUFReader, view: _View, span: Span, offset: int) -> str:
    value = reader.metadata[span.name]
    etype = view.array_types[span.name]
    rel = offset - span.start
    if etype == ValueType.STRING:
        starts = view.element_starts.get(span.name)
        if starts is None:
            lengths = np.fromiter((8 + len(s.encode("utf-8")) for s in value), dtype=np.int64, count=len(value))
            starts = np.concatenate([[0], np.cumsum(lengths)])
            view.element_starts[span.name] = starts
        i = int(np.searchsorted(starts, rel, side="right")) - 1
        inside = rel - int(starts[i])
        text = value[i] if len(value[i]) <= 40 else value[i][:39] + "…"
        part = "its length (uint64)" if inside < 8 else f"its byte {inside - 8} of {len(value[i].encode('utf-8'))}"
        return f"element {i:,} of {len(value):,} ({text!r}), {part}"
    if etype == ValueType.ARRAY:
        return _nested_detail(value, rel)
    itemsize = value.dtype.itemsize
    i, byte = divmod(rel, itemsize)
    return f"element {i:,} of {len(value):,} ({etype.name}, value {value[i].item()!r})" + (
        f", byte {byte} of {itemsize}" if itemsize > 1 else "")


def _body_size(item) -> int:
    """Bytes of one nested array body (element type, count, elements) holding ``item``."""
    if isinstance(item, np.ndarray):
        return 12 + item.nbytes
    if item and isinstance(item[0], str):
        return 12 + sum(8 + len(s.encode("utf-8")) for s in item)
    return 12 + sum(_body_size(x) for x in item)


def _nested_detail(items, rel: int, path: str = "") -> str:
    """Which inner array (and which of its parts) holds byte ``rel`` of the elements of a nested array."""
    pos = 0
    for j, item in enumerate(items):
        size = _body_size(item)
        if rel < pos + size:
            inner, here = rel - pos, f"{path}[{j}]"
            if inner < 4:
                return f"inner array {here}: its element type"
            if inner < 12:
                return f"inner array {here}: its count ({len(item)})"
            inner -= 12
            if isinstance(item, np.ndarray):
                k = inner // item.dtype.itemsize
                return f"inner array {here}: element {k} ({item.dtype.name}, value {item[k].item()!r})"
            if isinstance(item[0], str):
                for k, s in enumerate(item):
                    n = len(s.encode("utf-8"))
                    if inner < 8 + n:
                        part = "its length (uint64)" if inner < 8 else f"its byte {inner - 8} of {n}"
                        return f"inner array {here}: element {k} ({s!r}), {part}"
                    inner -= 8 + n
            return _nested_detail(item, inner, here)
        pos += size
    raise AssertionError("offset beyond the nested array")  # pragma: no cover (the span says otherwise)


def hex_line(reader: GGUFReader, offset: int, width: int = 16) -> tuple[int, bytes]:
    """The ``width`` bytes of the file around ``offset``, starting at a multiple of ``width``: (start, bytes)."""
    start = max(0, min(offset, reader.size - 1)) // width * width
    return start, bytes(_view(reader).mm[start : min(start + width, reader.size)])


# ------------------------------------------------------------------------------------------------------------
# Bytes per section and per tensor kind


def section_sizes(reader: GGUFReader) -> dict[str, int]:
    """Bytes of each part of the file, in file order; the values sum to the file size.

    Keys: ``header``, ``metadata``, ``tensor infos``, ``padding`` (before the data and between tensors),
    ``tensor data``.
    """
    out = dict.fromkeys(("header", "metadata", "tensor infos", "padding", "tensor data"), 0)
    names = {"tensor info": "tensor infos"}
    for s in _view(reader).spans:
        out[names.get(s.section, s.section)] += s.end - s.start
    return out


def metadata_sizes(reader: GGUFReader) -> dict[str, int]:
    """Bytes of each metadata key/value pair (key, type and value), in file order."""
    out: dict[str, int] = {}
    for s in _view(reader).spans:
        if s.section == "metadata":
            out[s.name] = out.get(s.name, 0) + s.end - s.start
    return out


_BLOCK = re.compile(r"^blk\.\d+\.")
NORMS = ("attn_norm", "ffn_norm", "output_norm")


def tensor_kind(name: str) -> str:
    """The kind of a tensor from its GGUF name: the block prefix and ``.weight`` go, and every norm is ``norms``.

    >>> tensor_kind("blk.7.attn_q.weight"), tensor_kind("blk.0.ffn_norm.weight"), tensor_kind("token_embd.weight")
    ('attn_q', 'norms', 'token_embd')
    """
    base = _BLOCK.sub("", name)
    base = base.removesuffix(".weight")
    return "norms" if base in NORMS else base


def data_by_kind(reader: GGUFReader) -> dict[str, dict]:
    """Tensor bytes grouped by :func:`tensor_kind`, biggest first: ``{kind: {"bytes", "tensors", "types"}}``."""
    groups: dict[str, dict] = {}
    for t in reader.tensors.values():
        g = groups.setdefault(tensor_kind(t.name), {"bytes": 0, "tensors": 0, "types": set()})
        g["bytes"] += t.nbytes
        g["tensors"] += 1
        g["types"].add(t.ggml_type.name)
    return dict(sorted(groups.items(), key=lambda kv: -kv[1]["bytes"]))


def _fmt_bytes(n: int) -> str:
    for unit, size in (("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def layout_figure(reader: GGUFReader, top_keys: int = 3):
    """Three views of where a GGUF file's bytes go, as one matplotlib figure (returned).

    Top: the whole file as one bar, by section. Middle: the bytes before the tensor data (header, metadata
    split into its ``top_keys`` biggest keys and the rest, tensor infos, padding). Bottom: the tensor data
    by kind of tensor (:func:`data_by_kind`), coloured by ggml type and labelled with size and count.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    sections = section_sizes(reader)
    keys = metadata_sizes(reader)
    biggest = sorted(keys, key=keys.get, reverse=True)[:top_keys]
    oranges = plt.get_cmap("Oranges")
    colour = {"header": "C0", "metadata": "C1", "tensor infos": "C2", "padding": "C3", "tensor data": "C4"}
    head = [("header", sections["header"], colour["header"])]
    for k, key in enumerate(biggest):
        head.append((key, keys[key], oranges(0.7 - 0.15 * k)))
    head.append(("other keys", sum(v for k, v in keys.items() if k not in biggest), oranges(0.2)))
    head.append(("tensor infos", sections["tensor infos"], colour["tensor infos"]))
    head.append(("padding", reader.data_offset - sum(n for _, n, _ in head), colour["padding"]))
    whole = [(name, n, colour[name]) for name, n in sections.items()]
    kinds = data_by_kind(reader)

    fig, axes = plt.subplots(3, 1, figsize=(9, 2.4 + 0.32 * len(kinds)),
                             gridspec_kw={"height_ratios": [1, 1, max(2, 0.45 * len(kinds))]})
    megabytes = FuncFormatter(lambda x, _: f"{x / 1e6:g} MB")
    for ax, parts, title in ((axes[0], whole, f"the whole file: {reader.size:,} bytes"),
                             (axes[1], head, f"zoom on the bytes before the tensor data: {reader.data_offset:,}")):
        total = sum(n for _, n, _ in parts) or 1
        left = 0
        for label, n, c in parts:
            ax.barh(0, n, left=left, color=c, edgecolor="white", label=f"{label}: {n:,} B ({100 * n / total:.1f}%)")
            if n / total > 0.12:
                ax.text(left + n / 2, 0, label, ha="center", va="center", fontsize=8, color="black")
            left += n
        ax.set_xlim(0, total)
        ax.set_yticks([])
        ax.xaxis.set_major_formatter(megabytes)
        ax.set_title(title, fontsize=9, loc="left")
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        ax.tick_params(labelsize=7)
    ax = axes[2]
    labels = list(kinds)
    values = [kinds[k]["bytes"] for k in labels]
    types = sorted({"/".join(sorted(kinds[k]["types"])) for k in labels})
    type_colour = {t: f"C{5 + i}" for i, t in enumerate(types)}
    bar_types = ["/".join(sorted(kinds[k]["types"])) for k in labels]
    bars = ax.barh(range(len(labels)), values, color=[type_colour[t] for t in bar_types])
    ax.bar_label(bars, [f"{_fmt_bytes(v)}  ({kinds[k]['tensors']}× {t})" for k, v, t in zip(labels, values, bar_types)],
                 fontsize=7, padding=2)
    for t in types:
        ax.barh([0], [0], color=type_colour[t], label=t)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, title="ggml type",
              title_fontsize=7)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(values, default=1) * 1.45)
    ax.xaxis.set_major_formatter(megabytes)
    ax.set_title("the tensor data, by kind of tensor", fontsize=9, loc="left")
    ax.tick_params(labelsize=7)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------------------------------
# The widget


def offset_html(reader: GGUFReader, offset: int) -> str:
    """HTML for one offset: :func:`describe_offset`, and the 16 bytes around it with that byte marked."""
    loc = describe_offset(reader, offset)
    start, raw = hex_line(reader, offset)
    cells = []
    for i, b in enumerate(raw):
        style = "background:#fde68a;font-weight:bold" if start + i == offset else ""
        cells.append(f"<span style='{style}'>{b:02x}</span>")
    text = "".join(chr(b) if 32 <= b < 127 else "." for b in raw)
    span = loc.span
    return (f"<div><b>{html.escape(str(loc))}</b></div>"
            f"<div style='color:#555'>field: bytes [{span.start:,}, {span.end:,})"
            f"{' as ' + html.escape(span.fmt) if span.fmt else ''}</div>"
            f"<pre style='margin:4px 0'>{start:>12,}  {' '.join(cells)}  {html.escape(text)}</pre>")


def landmarks(reader: GGUFReader) -> dict[str, int]:
    """Offsets worth jumping to: each section's first byte, the big arrays, the first and last tensor."""
    spans = _view(reader).spans
    meta = metadata_sizes(reader)
    marks = {"header: magic": 0}
    for s in spans:
        if s.section == "metadata" and s.part == "key length" and len(marks) == 1:
            marks[f"metadata: first key ({s.name})"] = s.start
        elif s.part == "elements" and meta[s.name] > 0.05 * sum(meta.values()):
            marks[f"metadata: elements of {s.name}"] = s.start
        elif s.section == "tensor info" and not any(k.startswith("tensor info") for k in marks):
            marks[f"tensor info: first ({s.name})"] = s.start
        elif s.section == "padding" and s.part.startswith("to the alignment"):
            marks["padding before the data"] = s.start
    data = [s for s in spans if s.section == "tensor data"]
    if data:
        marks[f"tensor data: first ({data[0].name})"] = data[0].start
        marks[f"tensor data: last ({data[-1].name})"] = data[-1].start
    return marks


def offset_explorer(reader: GGUFReader, offset: int = 0):
    """A slider, a number box and a list of landmarks: pick a byte offset, see what it belongs to."""
    import ipywidgets as w

    slider = w.IntSlider(value=offset, min=0, max=reader.size - 1, description="offset", continuous_update=True,
                         layout=w.Layout(width="70%"))
    box = w.BoundedIntText(value=offset, min=0, max=reader.size - 1, description="byte",
                           layout=w.Layout(width="220px"))
    jump = w.Dropdown(options=[("jump to …", -1)] + list(landmarks(reader).items()), value=-1,
                      layout=w.Layout(width="380px"))
    out = w.HTML(value=offset_html(reader, offset))
    w.link((slider, "value"), (box, "value"))

    def show(change):
        out.value = offset_html(reader, change["new"])

    def go(change):
        if change["new"] >= 0:
            slider.value = change["new"]

    slider.observe(show, names="value")
    jump.observe(go, names="value")
    return w.VBox([w.HBox([box, jump]), slider, out])


# ------------------------------------------------------------------------------------------------------------
# For the fuzz loop and the memory-map section


class TimeLimit(Exception):
    """Raised inside a block that ran longer than :func:`time_limit` allowed."""


def can_interrupt() -> bool:
    """Whether :func:`time_limit` can stop a running block here (a ``SIGALRM`` timer in the main thread)."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def time_limit(seconds: float):
    """Stop the block with :class:`TimeLimit` after ``seconds`` of wall time.

    Uses a ``SIGALRM`` timer where it can (the main thread on Unix, as in a notebook kernel). Elsewhere
    it cannot interrupt, so it raises :class:`TimeLimit` after a block that ran too long.
    """
    usable = can_interrupt()
    start = time.perf_counter()
    if usable:
        def stop(signum, frame):
            raise TimeLimit(f"still running after {seconds} s")

        previous = signal.signal(signal.SIGALRM, stop)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        if usable:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    if time.perf_counter() - start > seconds:
        raise TimeLimit(f"took {time.perf_counter() - start:.2f} s, more than {seconds} s")


def resident_memory() -> dict[str, int] | None:
    """This process's resident memory in bytes: ``{"anonymous", "file-backed"}`` on Linux, ``{"total"}``
    elsewhere (through psutil), or ``None`` when neither is available.

    File-backed pages are pages of a memory-mapped file that this process has touched.
    """
    try:
        with open("/proc/self/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return {"anonymous": int(fields["RssAnon"].split()[0]) * 1024,
                "file-backed": int(fields["RssFile"].split()[0]) * 1024}
    except (OSError, KeyError, ValueError):
        pass
    try:
        import psutil

        return {"total": psutil.Process().memory_info().rss}
    except Exception:
        return None
