"""What a submission shows is inert: no HTML, SVG, JavaScript or markdown a learner wrote can run in a page an
instructor (or a learner) opens.

A submitted notebook is the learner's to write, outputs included: the autograde kernel runs their code, and
their code decides what it displays (``display(HTML(...))``, ``Javascript``, ``_repr_*_`` methods, any MIME
type, widget views, output metadata). nbconvert puts markdown and ``text/html`` into a page as they are, so
unchecked they would run in the feedback pages, in formgrader's view of a submission (served from the
instructor's Jupyter origin) and in the autograded notebook opened in JupyterLab. This module owns the rule,
an allow-list everywhere rather than a list of known attacks:

* :class:`InertOutputs`, an nbconvert preprocessor, rebuilds a notebook from what is known to be harmless.
  Outputs keep ``text/plain``, ``image/png`` and ``image/jpeg`` (checked base64 with the format's magic
  bytes), and ``text/html`` / ``text/markdown`` through :func:`sanitize_html`; every other MIME type
  (``image/svg+xml``, ``application/javascript``, widget views, ``text/latex``, anything unknown) is
  dropped, leaving its ``text/plain`` or a line saying what was withheld. Streams and errors keep their
  text (nbconvert escapes it), so the trusted grader's feedback lines stay as written. Markdown and raw
  cells are sanitised, except a cell whose text is, character for character, a markdown or raw cell of the
  instructor's ``solutions/<lab>/<lab>.ipynb`` (trust comes from the instructor's notebook, never from the
  submission's metadata). Cell and notebook metadata keep only known keys with values of the right type.
  Markup past a notebook's budget (:data:`MAX_NOTEBOOK_RICH_CHARS`) is shown escaped or withheld.
* :func:`sanitize_html` is the allow-list: harmless tags, a few attributes, no event handler, links only
  to ``http``/``https``/``mailto`` or relative, images only as ``data:image/(png|jpeg|gif)``, styles only
  with properties and values that cannot name a URL. Anything else is escaped (shown as text) or dropped.
* :func:`inert_markdown` renders markdown with nbconvert's own renderer, sanitises the HTML and returns it
  as one raw-HTML block that every markdown renderer passes through unchanged (checked on each result).
* :func:`make_page_inert` and :class:`InertHTMLExporter` give a finished HTML page a strict
  Content-Security-Policy as the first element of its ``<head>`` and remove the template's scripts: a second
  wall, should anything get past the first. MathJax is one of those scripts, so a feedback page shows
  formulas as their TeX source.

``nbgrader_config.py`` runs :class:`InertOutputs` last in autograde (the saved notebook is inert), first in
feedback, and in every HTML page formgrader renders; feedback pages come from :class:`InertHTMLExporter`.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
import uuid
from html.parser import HTMLParser

import bleach
import nbformat
import tinycss2
from bleach.css_sanitizer import CSSSanitizer
from bleach.html5lib_shim import Filter
from nbconvert.exporters import HTMLExporter
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbconvert.preprocessors import Preprocessor
from nbformat.notebooknode import NotebookNode, from_dict
from traitlets import Bool

from .labs import find_lab

__all__ = ["CSP", "InertHTMLExporter", "InertOutputs", "inert_markdown", "inert_notebook", "make_page_inert",
           "sanitize_html"]

#: The policy of every feedback page: nothing loads or runs but inline styles and data: images and fonts.
CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; base-uri 'none'; "
       "form-action 'none'")

#: Longest ``text/html`` or ``text/markdown`` output sanitised, and most characters of HTML and markdown
#: sanitised in one notebook: what is beyond is withheld with a note (an output) or shown as escaped text (a
#: cell), so that a flood of markup cannot stall a class's grading. A lab's own markdown is some 5,000
#: characters (under 0.1 s); a notebook that spends the whole budget on markup costs about 15 s per pass.
MAX_RICH_CHARS = 200_000
MAX_NOTEBOOK_RICH_CHARS = 1_000_000


class _Budget:
    def __init__(self, chars: int | None):
        self.left = chars

    def take(self, n: int) -> bool:
        if self.left is None:
            return True
        if n > self.left:
            return False
        self.left -= n
        return True


# ------------------------------------------------------------------------------------------------ HTML

TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "cite", "code", "col", "colgroup", "dd", "del", "details",
    "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img",
    "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strong", "sub", "summary",
    "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul", "var",
})
_GLOBAL_ATTRS = frozenset({"class", "title", "style"})
_TAG_ATTRS = {
    "a": {"href"}, "img": {"src", "alt", "width", "height"}, "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan", "scope"}, "ol": {"start"}, "details": {"open"}, "table": {"border"},
    "col": {"span"}, "colgroup": {"span"},
}
_NUMBER_ATTRS = frozenset({"width", "height", "colspan", "rowspan", "start", "border", "span"})
_LINK_SCHEMES = frozenset({"http", "https", "mailto"})
_DATA_IMAGE = re.compile(r"data:image/(?:png|jpeg|gif);base64,[A-Za-z0-9+/=\s]*\Z", re.IGNORECASE)
_URL_NOISE = re.compile(r"[\x00-\x20\x7f-\xa0`\s]+")
_SCHEME = re.compile(r"([a-z][a-z0-9+.\-]*):")


def _pygments_classes() -> frozenset[str]:
    from pygments.token import STANDARD_TYPES

    return frozenset(c for c in STANDARD_TYPES.values() if c)


#: Classes kept on sanitised elements: the ones nbconvert's renderer and pygments write, pandas' table class
#: and our own wrapper. Others could restyle the page around them (formgrader's ``score``, bootstrap's).
CLASSES = _pygments_classes() | {"highlight", "hll", "anchor-link", "dataframe", "b2l-inert", "jp-Mermaid",
                                 "mermaid"}


def _safe_href(value: str) -> bool:
    plain = _URL_NOISE.sub("", html.unescape(value)).lower()
    scheme = _SCHEME.match(plain)
    return scheme is None or scheme.group(1) in _LINK_SCHEMES


def _allowed_attribute(tag: str, name: str, value: str) -> bool:
    if name not in _GLOBAL_ATTRS and name not in _TAG_ATTRS.get(tag, ()):
        return False
    if name in _NUMBER_ATTRS:
        return re.fullmatch(r"\d{1,5}%?", value.strip()) is not None
    if name == "src":
        return _DATA_IMAGE.match(value.strip()) is not None
    if name == "href":
        return _safe_href(value)
    if name == "scope":
        return value in ("row", "col", "rowgroup", "colgroup")
    return True


# CSS in style attributes: these properties, and values made only of words, numbers, lengths, colours,
# strings and colour functions. No value can then name a URL (url(), image-set(), a gradient...).
CSS_PROPERTIES = frozenset({
    "background", "background-color", "border", "border-bottom", "border-collapse", "border-color",
    "border-left", "border-radius", "border-right", "border-spacing", "border-style", "border-top",
    "border-width", "box-sizing", "caption-side", "color", "display", "font", "font-family", "font-size",
    "font-style", "font-variant", "font-weight", "height", "letter-spacing", "line-height", "list-style-type",
    "margin", "margin-bottom", "margin-left", "margin-right", "margin-top", "max-height", "max-width",
    "min-height", "min-width", "opacity", "overflow", "padding", "padding-bottom", "padding-left",
    "padding-right", "padding-top", "table-layout", "text-align", "text-decoration", "text-indent",
    "text-transform", "vertical-align", "white-space", "width", "word-break",
})
_CSS_FUNCTIONS = frozenset({"rgb", "rgba", "hsl", "hsla"})
_CSS_TOKENS = frozenset({"whitespace", "ident", "number", "percentage", "dimension", "hash", "string"})


def _css_value_is_plain(tokens) -> bool:
    for t in tokens:
        if t.type in _CSS_TOKENS:
            continue
        if t.type == "literal" and t.value in (",", "/", "%"):
            continue
        if t.type == "function" and t.lower_name in _CSS_FUNCTIONS and _css_value_is_plain(t.arguments):
            continue
        return False
    return True


class _StyleSanitizer(CSSSanitizer):
    def __init__(self):
        super().__init__(allowed_css_properties=CSS_PROPERTIES, allowed_svg_properties=())

    def sanitize_css(self, style: str) -> str:
        kept = []
        for d in tinycss2.parse_declaration_list(style, skip_comments=True, skip_whitespace=True):
            if d.type == "declaration" and d.lower_name in CSS_PROPERTIES and _css_value_is_plain(d.value):
                kept.append(f"{d.lower_name}: {tinycss2.serialize(d.value).strip()}"
                            + (" !important" if d.important else ""))
        return "; ".join(kept)


_SPACE = "[ \t\n\f\r]"
_SPACE_RUN_WITH_NEWLINE = re.compile(f"{_SPACE}*\n{_SPACE}*")
_LEADING_SPACE = re.compile(f"^{_SPACE}+")


class _Tidy(Filter):
    """After bleach: classes cut to :data:`CLASSES`, ``rel`` on links, images without a source dropped, empty
    styles removed, and no blank line anywhere (inside ``<pre>`` a newline becomes ``&NewLine;``, elsewhere a
    run of white space with a newline becomes one newline), so that the result is a single raw-HTML block for
    any markdown renderer."""

    def __iter__(self):
        pre = 0
        after_newline = False  # the output so far ends with a newline and, at most, white space
        for token in Filter.__iter__(self):
            kind = token["type"]
            if kind in ("StartTag", "EmptyTag"):
                attrs = token["data"]
                if token["name"] == "img" and (None, "src") not in attrs:
                    continue  # its source was not a data: image: nothing left to show
                if (None, "class") in attrs:
                    kept = [c for c in attrs[(None, "class")].split() if c in CLASSES]
                    if kept:
                        attrs[(None, "class")] = " ".join(kept)
                    else:
                        del attrs[(None, "class")]
                if not attrs.get((None, "style"), "x").strip():
                    del attrs[(None, "style")]
                if token["name"] == "a" and (None, "href") in attrs:
                    attrs[(None, "rel")] = "noopener noreferrer nofollow"
                if token["name"] == "pre" and kind == "StartTag":
                    pre += 1
            elif kind == "EndTag" and token["name"] == "pre":
                pre = max(0, pre - 1)
            elif kind in ("Characters", "SpaceCharacters"):
                data = token["data"]
                if pre:
                    for i, part in enumerate(data.split("\n")):
                        if i:
                            yield {"type": "Entity", "name": "NewLine"}
                        if part:
                            yield {"type": "Characters", "data": part}
                    after_newline = False
                    continue
                data = _SPACE_RUN_WITH_NEWLINE.sub("\n", data)
                if after_newline:
                    data = _LEADING_SPACE.sub("", data)
                if not data:
                    continue
                token["data"] = data
                stripped = data.rstrip(" \t\f\r")
                after_newline = stripped.endswith("\n") or (after_newline and not stripped)
                yield token
                continue
            after_newline = False
            yield token


_CLEANER = bleach.Cleaner(tags=TAGS, attributes=_allowed_attribute, protocols={"http", "https", "mailto", "data"},
                          strip=False, strip_comments=True, css_sanitizer=_StyleSanitizer(), filters=[_Tidy])


def sanitize_html(text: str) -> str:
    """``text`` with only harmless HTML left: allowed tags and attributes are kept, every other tag is escaped
    (it shows as text), comments go, and the result holds no blank line."""
    return _CLEANER.clean(text)


# ------------------------------------------------------------------------------------------------ markdown

_BLOCK_OPEN, _BLOCK_CLOSE = '<div class="b2l-inert">', "</div>"


def _render_markdown(source: str, attachments: dict | None = None) -> str:
    renderer = IPythonRenderer(escape=False, attachments=attachments or {}, embed_images=False,
                               exclude_anchor_links=True)
    return MarkdownWithMath(renderer=renderer).render(source)


def _passes_through(block: str) -> bool:
    """True when nbconvert's markdown renderer gives ``block`` back unchanged (so what renders is what was
    sanitised)."""
    try:
        return _render_markdown(block).strip() == block
    except Exception:  # noqa: BLE001 - a renderer failure means: not safe to store
        return False


# An escaped block (below) as one line: no tag inside, and no line break that could end the HTML block early.
_ESCAPED_BLOCK = re.compile(r'<div class="b2l-inert"><pre>[^<>\n\r]*</pre></div>\Z')


def _is_inert_block(text: str) -> bool:
    if _ESCAPED_BLOCK.match(text):
        return True
    return (text.startswith(_BLOCK_OPEN) and text.endswith(_BLOCK_CLOSE) and sanitize_html(text) == text
            and _passes_through(text))


def _escaped_block(source: str) -> str:
    text = html.escape(source, quote=True).replace("\r\n", "\n").replace("\r", "\n").replace("\n", "&NewLine;")
    return f"{_BLOCK_OPEN}<pre>{text}</pre>{_BLOCK_CLOSE}"


def inert_markdown(source: str, attachments: dict | None = None) -> str:
    """Markdown made inert, as markdown: nbconvert's rendering of ``source`` (``attachments`` resolved, PNG and
    JPEG only), sanitised, as one raw-HTML block that renders as itself. If a renderer would not give the
    block back unchanged, the text is shown escaped in a ``<pre>`` instead. A block this function made is its own
    result."""
    if not attachments and _is_inert_block(source):
        return source
    try:
        clean = sanitize_html(_render_markdown(source, _image_attachments(attachments)))
        block = f"{_BLOCK_OPEN}{clean.strip()}{_BLOCK_CLOSE}"
    except Exception:  # noqa: BLE001 - e.g. a missing attachment: show the text, never fail the notebook
        block = ""
    if block and _passes_through(block):
        return block
    return _escaped_block(source)


def _image_attachments(attachments) -> dict:
    kept = {}
    for name, bundle in (attachments or {}).items() if isinstance(attachments, dict) else ():
        if isinstance(bundle, dict):
            images = {m: v for m, v in ((m, _clean_image(m, bundle.get(m))) for m in IMAGE_MAGIC) if v}
            if images:
                kept[name] = images
    return kept


# ------------------------------------------------------------------------------------------------ outputs

IMAGE_MAGIC = {"image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff"}
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def _text(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "".join(value)
    return "" if value is None else repr(value)


def _clean_image(mime: str, value) -> str | None:
    """The base64 text of a real PNG or JPEG image, white space removed; None for anything else."""
    data = re.sub(r"\s+", "", _text(value))
    if not data or len(data) % 4 or not _BASE64.fullmatch(data):
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return data if raw.startswith(IMAGE_MAGIC[mime]) else None


def _size(value) -> int | None:
    return value if type(value) is int and 0 < value <= 10_000 else None


def _inert_bundle(data, metadata, budget: _Budget | None = None) -> tuple[dict, dict]:
    data = data if isinstance(data, dict) else {}
    metadata = metadata if isinstance(metadata, dict) else {}
    out: dict = {}
    meta: dict = {}
    if "text/plain" in data:
        out["text/plain"] = _text(data["text/plain"])
    for mime in IMAGE_MAGIC:
        if mime in data and (image := _clean_image(mime, data[mime])):
            out[mime] = image
            given = metadata.get(mime) if isinstance(metadata.get(mime), dict) else {}
            sizes = {k: s for k in ("width", "height") if (s := _size(given.get(k))) is not None}
            if sizes:
                meta[mime] = sizes
    for mime, clean in (("text/html", sanitize_html), ("text/markdown", inert_markdown)):
        text = _text(data.get(mime)) if mime in data else ""
        if text and len(text) <= MAX_RICH_CHARS and (budget is None or budget.take(len(text))) \
                and (kept := clean(text)).strip():
            out[mime] = kept
    withheld = sorted(set(data) - set(out))
    if withheld and "text/plain" not in out:
        out["text/plain"] = (f"[output not shown: {', '.join(withheld)}; the grader keeps text, PNG and JPEG "
                             "images, and sanitised HTML and markdown]")
    return out, meta


def _count(value) -> int | None:
    return value if type(value) is int else None


def _inert_output(out, budget: _Budget | None = None) -> NotebookNode | None:
    if not isinstance(out, dict):
        return None
    kind = out.get("output_type")
    if kind == "stream":
        name = out.get("name") if out.get("name") in ("stdout", "stderr") else "stdout"
        return NotebookNode(output_type="stream", name=name, text=_text(out.get("text")))
    if kind == "error":
        tb = out.get("traceback")
        return NotebookNode(output_type="error", ename=_text(out.get("ename")), evalue=_text(out.get("evalue")),
                            traceback=[_text(line) for line in tb] if isinstance(tb, list) else [])
    if kind in ("display_data", "execute_result"):
        data, meta = _inert_bundle(out.get("data"), out.get("metadata"), budget)
        node = NotebookNode(output_type=kind, data=data, metadata=meta)
        if kind == "execute_result":
            node.execution_count = _count(out.get("execution_count"))
        return node
    return None


# ------------------------------------------------------------------------------------------------ cells

_GRADE_ID = re.compile(r"[a-zA-Z0-9_\-]*")
_CELL_ID = re.compile(r"[a-zA-Z0-9_\-]{1,64}")
_TAG = re.compile(r"[\w\-.:]{1,64}")
_NBGRADER_TYPES = {"schema_version": int, "grade": bool, "solution": bool, "locked": bool, "task": bool,
                   "grade_id": str, "points": (int, float), "checksum": str, "cell_type": str}


def _inert_nbgrader(meta) -> dict | None:
    """nbgrader's cell metadata with its known keys only (a grade's score and the grader's comment are added
    later, from the gradebook); None when the grade id could break out of an attribute."""
    if not isinstance(meta, dict):
        return None
    if "grade_id" in meta and not (isinstance(meta["grade_id"], str) and _GRADE_ID.fullmatch(meta["grade_id"])):
        return None
    kept = {}
    for key, types in _NBGRADER_TYPES.items():
        value = meta.get(key)
        if key in meta and isinstance(value, types) and (types is bool or not isinstance(value, bool)):
            kept[key] = value
    if kept.get("checksum") is not None and not re.fullmatch(r"[0-9a-f]{1,128}", kept["checksum"]):
        del kept["checksum"]
    if kept.get("cell_type") not in (None, "code", "markdown", "raw"):
        del kept["cell_type"]
    return kept


def _inert_cell_metadata(meta) -> dict:
    if not isinstance(meta, dict):
        return {}
    out = {k: meta[k] for k in ("deletable", "editable", "collapsed", "scrolled") if isinstance(meta.get(k), bool)}
    if isinstance(meta.get("tags"), list):
        tags = [t for t in meta["tags"] if isinstance(t, str) and _TAG.fullmatch(t)]
        if tags:
            out["tags"] = tags
    if isinstance(meta.get("jupyter"), dict):
        hidden = {k: v for k, v in meta["jupyter"].items() if k in ("source_hidden", "outputs_hidden")
                  and isinstance(v, bool)}
        if hidden:
            out["jupyter"] = hidden
    nbgrader = _inert_nbgrader(meta.get("nbgrader"))
    if nbgrader:
        out["nbgrader"] = nbgrader
    return out


def _cell_id(cell) -> dict:
    """The cell's id if it is a valid one, a new one for an invalid one, none if it had none (nbformat 4.4)."""
    if "id" not in cell:
        return {}
    cid = cell["id"]
    return {"id": cid if isinstance(cid, str) and _CELL_ID.fullmatch(cid) else uuid.uuid4().hex[:8]}


def _inert_cell(cell, trusted: frozenset[str], budget: _Budget) -> NotebookNode:
    cell = cell if isinstance(cell, dict) else {}
    kind = cell.get("cell_type")
    source = _text(cell.get("source"))
    base = {**_cell_id(cell), "metadata": _inert_cell_metadata(cell.get("metadata"))}
    if kind == "code":
        given = cell.get("outputs") if isinstance(cell.get("outputs"), list) else []
        outputs = [o for o in (_inert_output(out, budget) for out in given) if o is not None]
        return NotebookNode(cell_type="code", **base, source=source, outputs=outputs,
                            execution_count=_count(cell.get("execution_count")))
    if kind in ("markdown", "raw") and source in trusted and not cell.get("attachments"):
        return NotebookNode(cell_type=kind, **base, source=source)  # the instructor's text, as written
    if not _ESCAPED_BLOCK.match(source) and not budget.take(len(source)):
        return NotebookNode(cell_type="markdown", **base, source=_escaped_block(source))
    if kind == "raw":
        return NotebookNode(cell_type="raw", **base, source=sanitize_html(source))
    # markdown, or a cell of a type nbformat does not know (shown as markdown)
    return NotebookNode(cell_type="markdown", **base, source=inert_markdown(source, cell.get("attachments")))


def _inert_notebook_metadata(meta) -> dict:
    meta = meta if isinstance(meta, dict) else {}
    out = {}
    for key, fields in (("kernelspec", ("name", "display_name", "language")),
                        ("language_info", ("name", "version", "file_extension", "mimetype", "pygments_lexer",
                                           "nbconvert_exporter"))):
        given = meta.get(key)
        if isinstance(given, dict):
            kept = {f: given[f] for f in fields if isinstance(given.get(f), str)}
            if kept:
                out[key] = kept
    return out


def inert_notebook(nb, trusted: frozenset[str] = frozenset()):
    """Make ``nb`` inert in place (and return it): see the module's docstring. ``trusted`` holds the texts of
    markdown and raw cells that stay as they are (the instructor's own)."""
    cells = nb.get("cells") if isinstance(nb.get("cells"), list) else []
    # from_dict: nested dicts become NotebookNodes too (nbgrader reads cell.metadata.nbgrader as attributes).
    budget = _Budget(MAX_NOTEBOOK_RICH_CHARS)
    nb["cells"] = [from_dict(_inert_cell(c, trusted, budget)) for c in cells]
    nb["metadata"] = from_dict(_inert_notebook_metadata(nb.get("metadata")))
    return nb


def _instructor_texts(lab_name: str | None, log=None) -> frozenset[str]:
    """The markdown and raw cells' texts of ``lab_name``'s source notebook in the course (empty if unknown)."""
    if not lab_name:
        return frozenset()
    try:
        source = nbformat.read(find_lab(lab_name).source_notebook(), as_version=4)
    except Exception as e:  # noqa: BLE001 - not a lab of this course, no course folder...: trust nothing
        if log is not None:
            log.info("no instructor notebook for %s (%s): every markdown cell is sanitised", lab_name, e)
        return frozenset()
    return frozenset(c.source for c in source.cells if c.cell_type in ("markdown", "raw"))


class InertOutputs(Preprocessor):
    """Rebuild the notebook from harmless parts only (see :mod:`bytes2logits.kit.inert`).

    Runs once per conversion: listed twice for one page (formgrader's exporter and a converter's own list),
    the second run finds the notebook already done.
    """

    enabled = Bool(True).tag(config=True)

    def preprocess(self, nb, resources):
        resources = resources if resources is not None else {}
        if resources.get(_DONE):
            return nb, resources
        lab = (resources.get("nbgrader") or {}).get("assignment") or resources.get("assignment_id")
        inert_notebook(nb, _instructor_texts(lab, self.log))
        resources[_DONE] = True
        return nb, resources

    def preprocess_cell(self, cell, resources, index):  # pragma: no cover - preprocess does the work
        return cell, resources


_DONE = "bytes2logits_inert"

# ------------------------------------------------------------------------------------------------ pages


class _PageScan(HTMLParser):
    """Where ``<html>`` and ``<head>`` open and where each ``<script>`` element starts and ends."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.lines = [0]
        for m in re.finditer("\n", page):
            self.lines.append(m.end())
        self.page = page
        self.html_end = self.head_end = None
        self.scripts: list[tuple[int, int]] = []
        self._script = None

    def _here(self) -> int:
        line, col = self.getpos()
        return self.lines[line - 1] + col

    def handle_starttag(self, tag, attrs):
        start = self._here()
        end = start + len(self.get_starttag_text() or "")
        if tag == "html" and self.html_end is None:
            self.html_end = end
        elif tag == "head" and self.head_end is None:
            self.head_end = end
        elif tag == "script" and self._script is None:
            self._script = start

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            close = self.page.find(">", self._here())
            self.scripts.append((self._script, len(self.page) if close < 0 else close + 1))
            self._script = None


def make_page_inert(page: str) -> str:
    """``page`` with ``<meta http-equiv="Content-Security-Policy" content=CSP>`` as the first element of its
    ``<head>`` (a head is added if it has none) and without ``<script>`` elements."""
    scan = _PageScan(page)
    scan.feed(page)
    scan.close()
    if scan._script is not None:  # an unclosed script runs to the end of the page
        scan.scripts.append((scan._script, len(page)))
    meta = f'<meta http-equiv="Content-Security-Policy" content="{html.escape(CSP, quote=True)}">'
    if scan.head_end is not None:
        edits = [(scan.head_end, scan.head_end, meta)]
    elif scan.html_end is not None:
        edits = [(scan.html_end, scan.html_end, f"<head>{meta}</head>")]
    else:
        doctype = re.match(r"\s*<!doctype[^>]*>", page, re.IGNORECASE)
        at = doctype.end() if doctype else 0
        edits = [(at, at, f"<head>{meta}</head>")]
    edits += [(start, end, "") for start, end in scan.scripts if not start < edits[0][0] < end]
    for start, end, text in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        page = page[:start] + text + page[end:]
    return page


class InertHTMLExporter(HTMLExporter):
    """nbconvert's HTML exporter whose pages pass through :func:`make_page_inert` (nbgrader's feedback)."""

    def from_notebook_node(self, nb, resources=None, **kw):
        output, resources = super().from_notebook_node(nb, resources, **kw)
        return make_page_inert(output), resources
