"""The chapter views are pure functions; the widgets only wire them up."""

from bytes2logits import ByteTokenizer, StreamDecoder
from bytes2logits.kit.widgets import stream_rows, utf8_explorer, utf8_rows, utf8_table_html


def test_utf8_rows():
    rows = utf8_rows("aé🙂")
    assert [r["code point"] for r in rows] == ["U+0061", "U+00E9", "U+1F642"]
    assert [r["ids"] for r in rows] == [[97], [0xC3, 0xA9], [0xF0, 0x9F, 0x99, 0x82]]
    assert rows[1]["bytes"] == "c3 a9"


def test_table_escapes_html_and_counts():
    page = utf8_table_html("<b>")
    assert "&lt;" in page and "font-size:1.3em'><</td>" not in page
    assert "3 code point(s) &rarr; 3 byte id(s)" in page


def test_explorer_updates_when_typing():
    w = utf8_explorer("a")
    box, out = w.children
    box.value = "é"
    assert "U+00E9" in out.value and "c3 a9" in out.value


def test_stream_rows_concatenate_to_text():
    tok = ByteTokenizer()
    rows = stream_rows(tok, tok.encode("é🙂"), StreamDecoder)
    assert "".join(r["emitted"] for r in rows) == "é🙂"
    assert rows[0]["pending"] == "c3" and rows[0]["emitted"] == ""
