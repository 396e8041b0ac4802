"""Small interactive views for the chapters.

Each view is a pure function of its input that returns data or HTML (tested directly). The interactive
widgets built on them are anywidgets, in :mod:`bytes2logits.kit.anywidgets`.
"""

from __future__ import annotations

import html
import unicodedata

__all__ = ["utf8_rows", "utf8_table_html", "stream_rows", "PALETTE", "token_boxes_html",
           "token_strip_html"]

#: Light background colours for consecutive tokens (they alternate so that token borders show).
PALETTE = ["#dbeafe", "#dcfce7", "#fef9c3", "#fce7f3", "#ede9fe", "#ffedd5", "#cffafe", "#e5e7eb"]


def utf8_rows(text: str) -> list[dict]:
    """One row per code point of ``text``: the character, its code point, name, UTF-8 bytes and ids."""
    rows = []
    for ch in text:
        raw = ch.encode("utf-8")
        rows.append({
            "char": ch,
            "code point": f"U+{ord(ch):04X}",
            "name": unicodedata.name(ch, "<unnamed>"),
            "bytes": " ".join(f"{b:02x}" for b in raw),
            "ids": list(raw),
        })
    return rows


_COLORS = ["#dbeafe", "#dcfce7", "#fef9c3", "#fce7f3", "#ede9fe", "#ffedd5"]


def utf8_table_html(text: str) -> str:
    """An HTML table for :func:`utf8_rows`, with the bytes of each character in one colour."""
    rows = utf8_rows(text)
    head = "".join(f"<th style='padding:2px 8px'>{h}</th>"
                   for h in ("char", "code point", "name", "UTF-8 bytes", "ids"))
    body = []
    for k, r in enumerate(rows):
        color = _COLORS[k % len(_COLORS)]
        shown = html.escape(r["char"]) if r["char"].isprintable() and not r["char"].isspace() else "&#9251;" \
            if r["char"] == " " else html.escape(repr(r["char"]))
        body.append(
            f"<tr style='background:{color}'><td style='padding:2px 8px;font-size:1.3em'>{shown}</td>"
            f"<td style='padding:2px 8px'><code>{r['code point']}</code></td>"
            f"<td style='padding:2px 8px;font-size:0.85em'>{html.escape(r['name'].lower())}</td>"
            f"<td style='padding:2px 8px'><code>{r['bytes']}</code></td>"
            f"<td style='padding:2px 8px'><code>{r['ids']}</code></td></tr>")
    n_bytes = sum(len(r["ids"]) for r in rows)
    summary = f"<p>{len(rows)} code point(s) &rarr; {n_bytes} byte id(s)</p>"
    return f"{summary}<table style='border-collapse:collapse'><tr>{head}</tr>{''.join(body)}</table>"


def stream_rows(tokenizer, ids, decoder_cls) -> list[dict]:
    """What a streaming server shows for each id: the id, its bytes, what is pending, the emitted chunk."""
    dec = decoder_cls(tokenizer)
    rows = []
    for i in ids:
        chunk = dec.step(i)
        rows.append({"id": i, "bytes": tokenizer.decode_bytes([i]).hex(" "), "pending": dec.pending.hex(" "),
                     "emitted": chunk})
    tail = dec.finish()
    rows.append({"id": "finish()", "bytes": "", "pending": "", "emitted": tail})
    return rows


def token_boxes_html(pieces, special=()) -> str:
    """Tokens as coloured inline boxes (no wrapper): ``pieces`` are the tokens' texts, in order.

    Positions listed in ``special`` are drawn dark with white text (control tokens); the others alternate
    light colours so that every token border is visible. Whitespace is made visible (``␣`` for a space,
    ``↵`` for a newline, ``→`` for a tab) and everything is HTML-escaped.
    """
    special = set(special)
    visible = str.maketrans({" ": "\u2423", "\n": "\u21b5", "\t": "\u2192"})
    boxes = []
    for k, piece in enumerate(pieces):
        text = html.escape(str(piece).translate(visible)) or "&empty;"
        style = ("background:#1f2937;color:#fff;font-weight:bold" if k in special
                 else f"background:{PALETTE[k % len(PALETTE)]}")
        boxes.append(f"<span style='{style};padding:1px 3px;margin:1px;border-radius:3px;display:inline-block'>"
                     f"<code style='color:inherit;background:none'>{text}</code></span>")
    return "".join(boxes)


def token_strip_html(pieces, special=(), title: str = "") -> str:
    """One line of :func:`token_boxes_html`, with ``title`` (escaped) above it."""
    head = f"<div style='margin-bottom:2px'>{html.escape(title)}</div>" if title else ""
    return f"<div style='line-height:1.9'>{head}{token_boxes_html(pieces, special)}</div>"


# ---- chapter 04


def token_steps_html(steps) -> str:
    """A two-column HTML table of encoding steps: ``steps`` is a list of ``(label, pieces)``.

    Each row shows ``label`` (escaped text, e.g. the merge that fired) and, beside it, the tokens after that
    step as :func:`token_boxes_html`.

    >>> token_steps_html([("bytes", ["a", "b"])]).count("<tr>")
    1
    """
    rows = "".join(f"<tr><td style='padding-right:16px;text-align:left'>{html.escape(str(label))}</td>"
                   f"<td style='text-align:left'>{token_boxes_html(pieces)}</td></tr>" for label, pieces in steps)
    return f"<table>{rows}</table>"


def token_comparison_html(rows, columns, *, corner: str = "word") -> str:
    """An HTML table comparing segmentations: ``rows`` maps a bold row label to one piece list per column.

    ``columns`` names the columns (say, one per encoding order) and ``corner`` heads the label column;
    each cell is a :func:`token_boxes_html` strip.

    >>> token_comparison_html({"ab": [["a", "b"], ["ab"]]}, ["x", "y"]).count("<th")
    3
    """
    head = "".join(f"<th style='text-align:left'>{html.escape(str(h))}</th>" for h in [corner, *columns])
    body = "".join(f"<tr><td style='text-align:left'><b>{html.escape(str(label))}</b></td>"
                   + "".join(f"<td style='text-align:left'>{token_boxes_html(p)}</td>" for p in cuts) + "</tr>"
                   for label, cuts in rows.items())
    return f"<table><tr>{head}</tr>{body}</table>"


__all__ += ["token_steps_html", "token_comparison_html"]
