"""The static course site: ``python -m bytes2logits site`` (``make site``).

Three stages, each in its own folder under the output (default ``build/site/``):

1. **execute** every chapter of ``course/`` with nbclient, in its own folder as the working directory (the
   chapters read relative paths), into ``executed/``. ``course/`` itself is never written: its notebooks
   carry no outputs.
2. **prepare** a Sphinx source folder ``src/``: each executed chapter after :func:`prepare_notebook`
   (widgets made kernel-free, links pointed at the site's pages), an index page with the README's intro and
   course map, one page per lab of :data:`~bytes2logits.kit.labs.LABS` with its release notebook as a
   download, the configuration from ``kit/site_template/`` and the widgets' ES modules from ``kit/web/``.
3. **render** ``html/`` with Sphinx, myst-nb (``nb_execution_mode = "off"``) and sphinx-book-theme, then
   **check** it: :func:`external_references` finds anything a page would load from another host (the site
   must work offline) and :func:`broken_links` any internal link to a missing file. Either fails the build.

Widgets: a course anywidget (:class:`bytes2logits.kit.anywidgets.CourseWidget`) already carries a
kernel-free ``text/html`` form that ``static_host.js`` brings to life, so its widget view is dropped and the
HTML kept. Any other widget (plain ipywidgets) cannot run without a kernel: it is replaced by its static view,
drawn from the widget state nbclient saved in the notebook (:func:`static_widget_html`), with a note that says
where it runs. A progress bar (tqdm's) only told how long the cell took: it is left off the page.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import os
import posixpath
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .anywidgets import WEB
from .labs import LABS, Lab, command_root, course_root, find_lab

__all__ = ["main", "build_site", "SiteError", "Chapter", "Part", "course_map", "prepare_notebook",
           "static_widget_html", "rewrite_links", "lab_page", "md_text", "index_page", "external_references",
           "broken_links", "KERNEL_NOTE"]

TEMPLATE = Path(__file__).resolve().parent / "site_template"

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

#: What a reader sees under a widget that cannot run on the site.
KERNEL_NOTE = ('<p class="b2l-kernel-note">This widget needs a running kernel: open the chapter in JupyterLab '
               '(<code>make lab</code>).</p>')


class SiteError(RuntimeError):
    """The site cannot be built, or what was built fails a check (the message says which and where)."""


# Cells the site runs differently from a learner's JupyterLab, each said on the page. Chapter 17's capstone
# runs the learner's labs 13-17; on the site those would be the blank releases ("Not yet. lab 13 ..."), so
# the page runs the instructor's solutions and shows a finished engine's answer. The build fails if a
# chapter no longer holds the text to change.
SITE_EDITS: dict[str, list[tuple[str, str]]] = {
    "17_generation": [('capstone.assemble(where="labs"', 'capstone.assemble(where="solutions"')],
}
SITE_EDIT_NOTE = ("*On this page, the cell below runs the instructor's solutions (`where=\"solutions\"`), so that "
                  "you can see what a finished engine says. In JupyterLab it runs your own labs "
                  "(`where=\"labs\"`).*")


def apply_site_edits(nb, stem: str) -> int:
    """Make ``SITE_EDITS[stem]`` in notebook ``nb`` (in place), each changed cell preceded by a markdown note.

    Returns the number of cells changed; raises :class:`SiteError` naming an edit whose text is not found."""
    import nbformat

    changed = 0
    for old, new in SITE_EDITS.get(stem, []):
        hits = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and old in c.source]
        if not hits:
            raise SiteError(f"{stem}: no code cell holds {old!r} (kit/site.py SITE_EDITS is out of date)")
        for i in reversed(hits):
            nb.cells[i].source = nb.cells[i].source.replace(old, new)
            nb.cells.insert(i, nbformat.v4.new_markdown_cell(SITE_EDIT_NOTE))
            changed += 1
    return changed


# --------------------------------------------------------------------------------------------- the course map

@dataclass
class Chapter:
    """One chapter notebook of ``course/``."""

    stem: str  # 01_the_model_speaks_integers
    path: Path
    title: str = ""

    @property
    def number(self) -> str:
        return self.stem[:2]

    @property
    def doc(self) -> str:
        """The chapter's source path in the site (``chapters/<stem>.ipynb``)."""
        return f"chapters/{self.stem}.ipynb"


@dataclass
class Part:
    """A group of chapters in the left navigation (a ``###`` heading of the README's course map)."""

    title: str
    stems: list[str] = field(default_factory=list)


@dataclass
class CourseMap:
    """The README's course map: the text above its table, the table's lines, and its parts."""

    intro: str
    table: list[str]
    parts: list[Part]


_ROW_LINK = re.compile(r"\]\((course/(\d\d_[^)/]+)\.ipynb)\)")


def course_map(readme: str) -> CourseMap:
    """Parse the ``## Course map`` section of the README: its parts (``###`` headings) and table rows.

    A map with no ``###`` heading is one part, "Chapters". The table's chapter links decide the order.
    """
    lines = readme.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip().lower() == "## course map")
    except StopIteration:
        raise SiteError("README.md has no '## Course map' section to build the navigation from") from None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    section = lines[start + 1:end]
    intro, table, parts = [], [], []
    for line in section:
        if line.startswith("### "):
            parts.append(Part(line[4:].strip()))
            table.append(line)
        elif line.startswith("|"):
            table.append(line)
            m = _ROW_LINK.search(line)
            if m:
                if not parts:
                    parts.append(Part("Chapters"))
                parts[-1].stems.append(m.group(2))
        elif not table:
            intro.append(line)
        else:
            table.append(line)
    parts = [p for p in parts if p.stems]
    if not parts:
        raise SiteError("README.md's course map lists no chapter (rows linking to course/NN_*.ipynb)")
    return CourseMap("\n".join(intro).strip(), table, parts)


def first_heading(nb) -> str:
    """The text of a notebook's first markdown heading (its title)."""
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        for line in src.splitlines():
            if line.startswith("#"):
                return line.lstrip("#").strip()
    return ""


# --------------------------------------------------------------------------------------------- links

_LINK = re.compile(r"(?<!!)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(([^()\s]+)\)")


def rewrite_links(markdown: str, base: str, doc: str, site_docs: dict[str, str],
                  repo_blob: str | None = None) -> str:
    """Point the relative links of ``markdown`` (written in repo folder ``base``) at the site.

    ``site_docs`` maps a repo path (``course/01_x.ipynb``) to its page's source path in the site
    (``chapters/01_x.ipynb``); the link is made relative to ``doc``, the page being written. A link to any
    other repo file goes to ``repo_blob + path`` when a repository is known, else becomes its plain text (the
    site has no copy of it). External links and in-page anchors stay as they are.
    """
    doc_dir = posixpath.dirname(doc)

    def one(m: re.Match) -> str:
        text, target = m.group(1), m.group(2)
        if target.startswith("#") or urlsplit(target).scheme:
            return m.group(0)
        path, _, anchor = target.partition("#")
        repo_path = posixpath.normpath(posixpath.join(base, unquote(path)))
        if repo_path in site_docs:
            rel = posixpath.relpath(site_docs[repo_path], doc_dir or ".")
            return f"[{text}]({rel}{'#' + anchor if anchor else ''})"
        if repo_blob and not repo_path.startswith(".."):
            return f"[{text}]({repo_blob}{repo_path}{'#' + anchor if anchor else ''})"
        return text

    return _LINK.sub(one, markdown)


# --------------------------------------------------------------------------------------------- widgets

_CONTROLS = {"IntSliderModel", "FloatSliderModel", "FloatLogSliderModel", "IntRangeSliderModel",
             "FloatRangeSliderModel", "SelectionSliderModel", "SelectionRangeSliderModel", "TextModel",
             "TextareaModel", "PasswordModel", "ComboboxModel", "IntTextModel", "FloatTextModel",
             "BoundedIntTextModel", "BoundedFloatTextModel", "CheckboxModel", "ToggleButtonModel",
             "DropdownModel", "SelectModel", "SelectMultipleModel", "RadioButtonsModel", "ToggleButtonsModel",
             "ButtonModel", "ColorPickerModel", "DatePickerModel", "PlayModel", "FileUploadModel"}
_BOXES = {"BoxModel", "HBoxModel", "VBoxModel", "GridBoxModel", "AccordionModel", "TabModel", "StackModel"}


def _ref(value) -> str | None:
    return value[len("IPY_MODEL_"):] if isinstance(value, str) and value.startswith("IPY_MODEL_") else None


def _label(st: dict) -> str:
    desc = st.get("description") or ""
    return f"<label>{html.escape(desc)}</label>" if desc else ""


def _output_html(out: dict) -> str:
    """A saved notebook output (of an Output widget) as HTML."""
    kind = out.get("output_type")
    if kind == "stream":
        text = out.get("text", "")
        return f"<pre>{html.escape(''.join(text) if isinstance(text, list) else text)}</pre>"
    if kind == "error":
        return f"<pre>{html.escape(out.get('ename', ''))}: {html.escape(out.get('evalue', ''))}</pre>"
    data = out.get("data", {})
    for mime in ("image/png", "image/jpeg", "image/gif"):
        if mime in data:
            raw = data[mime]
            raw = "".join(raw) if isinstance(raw, list) else raw
            return f'<img alt="figure" src="data:{mime};base64,{raw.strip()}">'
    if "image/svg+xml" in data:
        svg = data["image/svg+xml"]
        return "".join(svg) if isinstance(svg, list) else svg
    if "text/html" in data:
        text = data["text/html"]
        return "".join(text) if isinstance(text, list) else text
    if "text/plain" in data:
        text = data["text/plain"]
        return f"<pre>{html.escape(''.join(text) if isinstance(text, list) else text)}</pre>"
    return ""


def static_widget_html(model_id: str, models: dict, _depth: int = 0) -> tuple[str, bool]:
    """The static view of widget ``model_id`` from a notebook's saved widget ``models``, and whether any part
    of it is a control (a slider, a text box, a button...) that would need a kernel to do anything.

    Containers lay out their children, HTML and labels show their value, an Output widget shows the outputs it
    captured, a progress bar its fill; a control is drawn disabled at its saved value.
    """
    model = models.get(model_id)
    if model is None or _depth > 50:
        return "", False
    name, st = model.get("model_name", ""), model.get("state", {})
    if name in _BOXES:
        parts, live = [], False
        for child in st.get("children", []):
            child_html, child_live = static_widget_html(_ref(child) or "", models, _depth + 1)
            parts.append(child_html)
            live = live or child_live
        cls = "b2l-row" if name == "HBoxModel" else "b2l-col"
        return f'<div class="{cls}">{"".join(parts)}</div>', live
    if name in ("HTMLModel", "HTMLMathModel"):
        return f"<div>{_label(st)}{st.get('value', '')}</div>", False
    if name == "LabelModel":
        return f"<span>{html.escape(str(st.get('value', '')))}</span>", False
    if name == "OutputModel":
        return f"<div>{''.join(_output_html(o) for o in st.get('outputs', []))}</div>", False
    if name in ("FloatProgressModel", "IntProgressModel"):
        value, top = st.get("value", 0), st.get("max", 100)
        return f'<span>{_label(st)}<progress value="{value}" max="{top}"></progress></span>', False
    if name not in _CONTROLS:
        return "", False
    label = _label(st)
    value = st.get("value")
    if name.endswith("SliderModel") and not name.startswith("Selection"):
        lo, hi, step = st.get("min", 0), st.get("max", 100), st.get("step", 1)
        if isinstance(value, list):
            shown = " – ".join(str(v) for v in value)
            return f"<span>{label}<code>{html.escape(shown)}</code></span>", True
        return (f'<span>{label}<input type="range" disabled min="{lo}" max="{hi}" step="{step}" '
                f'value="{value}"> <code>{html.escape(str(value))}</code></span>'), True
    if name in ("CheckboxModel", "ToggleButtonModel"):
        checked = " checked" if value else ""
        return f'<span><input type="checkbox" disabled{checked}> {label}</span>', True
    if name == "ButtonModel":
        return f"<button disabled>{html.escape(st.get('description', ''))}</button>", True
    if "_options_labels" in st:
        labels = st.get("_options_labels", [])
        index = st.get("index")
        indices = index if isinstance(index, list) else [index]
        shown = ", ".join(labels[i] for i in indices if isinstance(i, int) and 0 <= i < len(labels))
        return f'<span>{label}<select disabled><option>{html.escape(shown)}</option></select></span>', True
    if name in ("PlayModel", "FileUploadModel"):
        return f"<span>{label}<button disabled>{html.escape(name[:-5].lower())}</button></span>", True
    shown = "" if value is None else str(value)
    return f'<span>{label}<input type="text" disabled value="{html.escape(shown, quote=True)}"></span>', True


def progress_only(model_id: str, models: dict) -> bool:
    """Whether widget ``model_id`` is a progress bar and its captions only (what ``tqdm.auto`` draws).

    Such a view records how long a cell took while it ran; on a page it is a bar frozen wherever its last
    refresh caught it (96%, or hidden in JupyterLab once a ``leave=False`` bar closed), so the site drops it.
    """
    def walk(mid: str, depth: int) -> tuple[bool, bool]:  # (only bars, boxes and text; holds a bar)
        model = models.get(mid)
        if model is None or depth > 50:
            return False, False
        name = model.get("model_name", "")
        if name in ("FloatProgressModel", "IntProgressModel"):
            return True, True
        if name in ("HTMLModel", "HTMLMathModel", "LabelModel"):
            return True, False
        if name in _BOXES:
            ok, bar = True, False
            for child in model.get("state", {}).get("children", []):
                c_ok, c_bar = walk(_ref(child) or "", depth + 1)
                ok, bar = ok and c_ok, bar or c_bar
            return ok, bar
        return False, False

    ok, bar = walk(model_id, 0)
    return ok and bar


@dataclass
class Prepared:
    """What :func:`prepare_notebook` changed in one notebook."""

    anywidgets: int = 0
    degraded: int = 0  # widgets replaced by their static view with the kernel note
    static: int = 0  # widgets replaced by their static view, nothing to interact with
    dropped: int = 0  # progress bars (tqdm's), removed from the page


def _joined(value) -> str:
    return "".join(value) if isinstance(value, list) else (value or "")


def prepare_notebook(nb: dict, *, base: str, doc: str, site_docs: dict[str, str],
                     repo_blob: str | None = None) -> Prepared:
    """Make an executed notebook ready for a kernel-free page, in place.

    * a course anywidget's output keeps its ``text/html`` (``div.b2l-anywidget``) and loses the widget view;
    * a progress bar and its captions (:func:`progress_only`) is removed;
    * any other widget output becomes its static view (:func:`static_widget_html`) followed by
      :data:`KERNEL_NOTE` when it holds a control, or its ``text/plain`` when no state was saved;
    * the saved widget state is removed (nothing on the page reads it);
    * markdown links go through :func:`rewrite_links` (``base``: the notebook's folder in the repo).
    """
    done = Prepared()
    meta = nb.setdefault("metadata", {})
    models = meta.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = rewrite_links(_joined(cell["source"]), base, doc, site_docs, repo_blob)
            continue
        if cell["cell_type"] != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            kept.append(out)
            data = out.get("data")
            if not data or WIDGET_VIEW not in data:
                continue
            view = data.pop(WIDGET_VIEW)
            if "b2l-anywidget" in _joined(data.get("text/html")):
                done.anywidgets += 1
                continue
            if progress_only(view.get("model_id", ""), models):
                kept.pop()
                done.dropped += 1
                continue
            shown, live = static_widget_html(view.get("model_id", ""), models)
            if not shown:
                plain = _joined(data.get("text/plain"))
                shown, live = f"<pre>{html.escape(plain)}</pre>", True
            if live:
                done.degraded += 1
                data["text/html"] = f'<div class="b2l-static-widget">{shown}</div>{KERNEL_NOTE}'
            else:
                done.static += 1
                data["text/html"] = f'<div class="b2l-static">{shown}</div>'
        if "outputs" in cell:
            cell["outputs"] = kept
    meta.pop("widgets", None)
    return done


# --------------------------------------------------------------------------------------------- pages

def index_page(readme: str, cmap: CourseMap, parts: list[Part], labs: list[Lab], site_docs: dict[str, str],
               repo_blob: str | None) -> str:
    """The home page: the README's title and opening paragraph, the course map, and the navigation."""
    lines = readme.splitlines()
    title = next((line[2:].strip() for line in lines if line.startswith("# ")), "Bytes to Logits")
    body, seen_title = [], False
    for line in lines:
        if line.startswith("# "):
            seen_title = True
            continue
        if seen_title and line.startswith("## "):
            break
        if seen_title:
            body.append(line)
    intro = "\n".join(body).strip().split("\n\n")[0]

    def fix(text: str) -> str:
        return rewrite_links(text, "", "index.md", site_docs, repo_blob)

    out = [f"# {title}", "", fix(intro), "",
           "This site shows every chapter with the outputs of one run. The course's own widgets (the merge "
           "stepper, the bytes explorer) work here in the browser; widgets that need Python show the view they "
           "were left in, with a note. To run the chapters yourself, clone the repository and run `make lab`.",
           "", "## Course map", ""]
    if cmap.intro:
        out += [fix(cmap.intro), ""]
    out += [fix(line) for line in cmap.table]
    out.append("")
    for part in parts:
        out += ["```{toctree}", ":hidden:", f":caption: {part.title}", ""]
        out += [f"chapters/{stem}" for stem in part.stems]
        out += ["```", ""]
    if labs:
        out += ["```{toctree}", ":hidden:", ":caption: Labs", ""]
        out += [f"labs/{lab.name}" for lab in labs]
        out += ["```", ""]
    return "\n".join(out)


def _read_release(release: Path) -> dict:
    """The release notebook as JSON, or an empty notebook when it cannot be read."""
    try:
        return json.loads(release.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _lab_intro(nb: dict, lab: Lab, site_docs: dict[str, str], repo_blob: str | None) -> str:
    """What the lab covers, from its release notebook's intro cell (title, chapter line and how-to cut)."""
    cell = next((c for c in nb.get("cells", []) if c.get("cell_type") == "markdown"), None)
    if cell is None:
        return ""
    text = _joined(cell.get("source"))
    kept = [line for line in text.splitlines()
            if not line.startswith("# ") and not line.lower().startswith("chapter:")]
    text = "\n".join(kept)
    text = re.split(r"\n\*\*(?:How this lab works|Your grade)", text)[0].strip()
    return rewrite_links(text, f"labs/{lab.name}", f"labs/{lab.name}.md", site_docs, repo_blob)


def _lab_task_texts(nb: dict, lab: Lab, site_docs: dict[str, str], repo_blob: str | None) -> str:
    """Each task's statement, from the release notebook's ``## Task`` cells, one heading level down."""
    parts = []
    for cell in nb.get("cells", []):
        text = _joined(cell.get("source")).strip()
        if cell.get("cell_type") == "markdown" and text.startswith("## Task"):
            lines, fenced = [], False
            for line in text.splitlines():
                fenced ^= line.lstrip().startswith("```")
                lines.append("#" + line if line.startswith("#") and not fenced else line)
            parts.append(rewrite_links("\n".join(lines), f"labs/{lab.name}", f"labs/{lab.name}.md", site_docs,
                                       repo_blob))
    return "\n\n".join(parts)


def md_text(text: str) -> str:
    """``text`` as literal Markdown text: ``<unk>`` stays words, not an HTML tag, and ``|`` keeps a table whole."""
    return html.escape(text, quote=False).replace("|", "\\|").replace("*", "\\*").replace("_", "\\_")


def lab_page(lab: Lab, chapter: Chapter | None, intro: str, tasks: str = "") -> str:
    """A lab's page: what it covers, its tasks and points (from the registry), each task's statement (``tasks``,
    from the release notebook), and its notebook to download."""
    short = f"lab{lab.number}"
    out = [f"# {md_text(lab.title)}", ""]
    if chapter is not None:
        out += [f"Follows chapter [{md_text(chapter.title)}](../{chapter.doc}).", ""]
    if intro:
        out += [intro, ""]
    out += ["## Tasks", "", "| task | points |", "|---|---|"]
    out += [f"| {md_text(t.title)} | {t.points} |" for t in lab.tasks]
    out += [f"| **total** | **{lab.total_points}** |", ""]
    if tasks:
        out += [tasks, ""]
    out += ["## Doing the lab", "",
            f"The notebook: {{download}}`{lab.name}.ipynb <../downloads/{lab.name}.ipynb>`. It runs in the "
            "course's environment (its cells import `bytes2logits`). From a clone of the repository:", "",
            "```", f"make start LAB={short}   # your own copy in work/{lab.name}/", "make lab               "
            "# open it in JupyterLab", f"make check LAB={short}   # grade it with the hidden suite", "```", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------- checks

_URL = r"((?:https?:)?//[^\s\"'`)]+)"
_JS_LOADS = [re.compile(p) for p in (
    r"\bimport\s*\(\s*[\"'`]" + _URL,
    r"\b(?:import|from)\s*[\"']" + _URL,
    r"\bimportScripts\s*\(\s*[\"'`]" + _URL,
    r"\bfetch\s*\(\s*[\"'`]" + _URL,
    r"\.(?:src|href)\s*=\s*[\"'`]" + _URL,
    r"\burl\(\s*[\"']?" + _URL,
)]
_CDN = re.compile(r"(?:https?:)?//(?:cdn\.jsdelivr\.net|unpkg\.com|cdnjs\.cloudflare\.com|esm\.sh|"
                  r"fonts\.googleapis\.com|fonts\.gstatic\.com|cdn\.mathjax\.org|cdn\.plot\.ly|"
                  r"code\.jquery\.com|ajax\.googleapis\.com)[^\s\"'`)]*")
_CSS_LOADS = [re.compile(r"\burl\(\s*[\"']?" + _URL), re.compile(r"@import\s+(?:url\()?\s*[\"']?" + _URL)]
# Attributes whose URL the browser fetches by itself.
_FETCHED = {"src", "srcset", "data", "poster", "background", "formaction", "action"}


def _is_external(url: str) -> bool:
    url = url.strip()
    return url.startswith("//") or urlsplit(url).scheme in ("http", "https")


class _Scan(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.loads: list[str] = []  # URLs the page would fetch
        self.links: list[str] = []  # href of <a>
        self._in: str | None = None
        self.inline: list[tuple[str, str]] = []  # (script|style, text)

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name in _FETCHED:
                urls = [part.strip().split(" ")[0] for part in value.split(",")] if name == "srcset" else [value]
                self.loads += urls
            elif name == "href" and tag == "link":
                self.loads.append(value)
            elif name == "href" and tag == "a":
                self.links.append(value)
            elif name == "style":
                self.inline.append(("style", value))
        if tag in ("script", "style"):
            self._in = tag

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None

    def handle_data(self, data):
        if self._in:
            self.inline.append((self._in, data))


def _text_loads(kind: str, text: str) -> list[str]:
    found = [m.group(1) for p in (_JS_LOADS if kind == "script" else _CSS_LOADS) for m in p.finditer(text)]
    found += [m.group(0) for m in _CDN.finditer(text)]
    return [u for u in found if _is_external(u)]


def external_references(html_dir: Path) -> list[str]:
    """Everything under ``html_dir`` that would load a resource from another host, as ``file: url`` lines.

    HTML: ``src``/``srcset``/``data``/``poster`` attributes, ``<link href>``, inline scripts and styles. CSS:
    ``url()`` and ``@import``. JS: ES and dynamic imports, ``fetch``, ``importScripts``, ``.src =``, and any
    URL of a CDN. Links a reader follows (``<a href>`` to a paper) are not loads and are allowed.
    """
    found = []
    for path in sorted(html_dir.rglob("*")):
        if not path.is_file() or path.suffix not in (".html", ".css", ".js", ".mjs"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        rel = path.relative_to(html_dir).as_posix()
        if path.suffix == ".html":
            scan = _Scan()
            scan.feed(text)
            urls = [u for u in scan.loads if _is_external(u)]
            for kind, inline in scan.inline:
                urls += _text_loads(kind, inline)
        else:
            urls = _text_loads("style" if path.suffix == ".css" else "script", text)
        found += [f"{rel}: {u}" for u in dict.fromkeys(urls)]
    return found


def internal_links(html_dir: Path) -> dict[str, list[str]]:
    """Every page's internal link targets (``<a href>`` that is neither external, a bare anchor nor mailto)."""
    out = {}
    for path in sorted(html_dir.rglob("*.html")):
        scan = _Scan()
        scan.feed(path.read_text(encoding="utf-8", errors="replace"))
        rel = path.relative_to(html_dir).as_posix()
        out[rel] = [h for h in dict.fromkeys(scan.links)
                    if h and not h.startswith("#") and not _is_external(h) and not urlsplit(h).scheme]
    return out


def broken_links(html_dir: Path) -> list[str]:
    """Internal links of the built pages whose file does not exist, as ``page: href`` lines."""
    bad = []
    for page, hrefs in internal_links(html_dir).items():
        for href in hrefs:
            target = unquote(urlsplit(href).path)
            if not target:
                continue
            resolved = (html_dir / posixpath.dirname(page) / target).resolve()
            if resolved.is_dir():
                resolved = resolved / "index.html"
            if not resolved.is_file():
                bad.append(f"{page}: {href}")
    return bad


# --------------------------------------------------------------------------------------------- the build

def _chapters(root: Path, only: list[str] | None) -> list[Chapter]:
    found = sorted((root / "course").glob("[0-9][0-9]_*.ipynb"))
    chapters = [Chapter(p.stem, p) for p in found]
    if only:
        wanted = {f"{int(n):02d}" if n.isdigit() else n for n in only}
        unknown = wanted - {c.number for c in chapters} - {c.stem for c in chapters}
        if unknown:
            raise SiteError(f"no chapter {', '.join(sorted(unknown))} in course/ "
                            f"(chapters: {', '.join(c.number for c in chapters)})")
        chapters = [c for c in chapters if c.number in wanted or c.stem in wanted]
    if not chapters:
        raise SiteError("course/ holds no chapter notebook")
    return chapters


def _execute(chapters: list[Chapter], dest: Path, jobs: int, timeout: int) -> dict[str, float]:
    """Execute the chapters into ``dest`` with up to ``jobs`` kernels at once; seconds per chapter."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from tqdm import tqdm

    dest.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    failures: list[str] = []
    bar = tqdm(total=len(chapters), desc="executing chapters", unit="chapter", file=sys.stderr)

    async def run_all():
        gate = asyncio.Semaphore(max(1, jobs))

        async def one(ch: Chapter):
            async with gate:
                nb = nbformat.read(ch.path, as_version=4)
                apply_site_edits(nb, ch.stem)
                client = NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                                        resources={"metadata": {"path": str(ch.path.parent)}})
                start = time.perf_counter()
                try:
                    await client.async_execute()
                except CellExecutionError as e:
                    failures.append(f"{ch.path.name}: {getattr(e, 'ename', 'error')}: "
                                    f"{str(getattr(e, 'evalue', e))[:300]}")
                except Exception as e:  # noqa: BLE001 - a dead kernel or a timeout names the chapter too
                    failures.append(f"{ch.path.name}: {type(e).__name__}: {str(e)[:300]}")
                else:
                    nbformat.write(nb, dest / ch.path.name)
                seconds[ch.stem] = time.perf_counter() - start
                bar.set_postfix_str(f"{ch.number} in {seconds[ch.stem]:.0f} s")
                bar.update(1)

        await asyncio.gather(*(one(ch) for ch in chapters))

    try:
        asyncio.run(run_all())
    finally:
        bar.close()
    if failures:
        raise SiteError("chapters failed to execute (the site shows no tracebacks):\n  " + "\n  ".join(failures))
    return seconds


def _check_tools() -> None:
    """Fail before executing anything when the site's generator is not installed."""
    import importlib.util

    missing = [m for m in ("sphinx", "myst_nb", "sphinx_book_theme") if importlib.util.find_spec(m) is None]
    if missing:
        raise SiteError(f"{', '.join(missing)} not installed: the site needs the package's 'site' extra "
                        "(pip install -e '.[site]', or make site EXTRAS=course,site)")


def _copy_template(src: Path, info: dict) -> None:
    shutil.copy2(TEMPLATE / "conf.py", src / "conf.py")
    (src / "site.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    static = src / "_static"
    static.mkdir(parents=True, exist_ok=True)
    for f in (TEMPLATE / "static").iterdir():
        shutil.copy2(f, static / f.name)
    if not (WEB / "static_host.js").is_file():
        raise SiteError(f"{WEB / 'static_host.js'} is missing: the course widgets cannot run on the site")
    for f in WEB.glob("*.js"):
        shutil.copy2(f, static / f.name)


def _sphinx(src: Path, out: Path, doctrees: Path, warnings: Path, jobs: int) -> None:
    from sphinx.cmd.build import build_main

    args = ["-b", "html", "-q", "-E", "-d", str(doctrees), "-w", str(warnings), "-j", str(max(1, jobs)),
            str(src), str(out)]
    status = build_main(args)
    if status:
        raise SiteError(f"Sphinx failed (status {status}); its warnings are in {warnings}")


@dataclass
class Built:
    """The result of :func:`build_site`."""

    html: Path
    pages: int
    chapters: list[str]
    labs: list[str]
    seconds: float
    execute_seconds: dict[str, float]
    widgets: dict[str, Prepared]
    warnings: list[str]


def build_site(out: Path, *, chapters: list[str] | None = None, jobs: int = 2, execute: bool = True,
               timeout: int = 300, repo_url: str | None = None, branch: str = "main", root: Path | None = None,
               log=print) -> Built:
    """Build the course site into ``out`` (see the module docstring) and check it; raises :class:`SiteError`."""
    start = time.perf_counter()
    _check_tools()
    root = root or course_root()
    out = Path(out).resolve()
    readme = (root / "README.md").read_text(encoding="utf-8")
    cmap = course_map(readme)
    chosen = _chapters(root, chapters)
    executed = out / "executed"

    if execute:
        log(f"executing {len(chosen)} chapter(s), {jobs} kernel(s) at a time, into {executed}")
        times = _execute(chosen, executed, jobs, timeout)
    else:
        missing = [c.path.name for c in chosen if not (executed / c.path.name).is_file()]
        if missing:
            raise SiteError(f"--no-execute: no executed copy of {', '.join(missing)} in {executed}; "
                            "build once without --no-execute")
        times = {}

    import nbformat

    notebooks = {c.stem: nbformat.read(executed / c.path.name, as_version=4) for c in chosen}
    for c in chosen:
        c.title = first_heading(notebooks[c.stem]) or c.stem
    stems = {c.stem for c in chosen}
    labs = [lab for lab in LABS.values() if Path(lab.chapter).stem in stems]

    site_docs = {f"course/{c.stem}.ipynb": c.doc for c in chosen}
    site_docs.update({f"labs/{lab.name}/{lab.name}.ipynb": f"labs/{lab.name}.md" for lab in labs})
    site_docs["README.md"] = "index.md"
    repo_blob = f"{repo_url.rstrip('/')}/blob/{branch}/" if repo_url else None

    src = out / "src"
    shutil.rmtree(src, ignore_errors=True)
    (src / "chapters").mkdir(parents=True)
    (src / "labs").mkdir()
    (src / "downloads").mkdir()
    _copy_template(src, {"title": "Bytes to Logits", "repo_url": repo_url})

    widgets = {}
    for c in chosen:
        nb = notebooks[c.stem]
        widgets[c.stem] = prepare_notebook(nb, base="course", doc=c.doc, site_docs=site_docs, repo_blob=repo_blob)
        nbformat.write(nb, src / c.doc)
    by_stem = {c.stem: c for c in chosen}
    for lab in labs:
        release = lab.release_notebook(root)
        if not release.is_file():
            raise SiteError(f"{lab.name}: no release notebook {release} (make labs writes it)")
        shutil.copy2(release, src / "downloads" / f"{lab.name}.ipynb")
        nb = _read_release(release)
        intro = _lab_intro(nb, lab, site_docs, repo_blob)
        page = lab_page(lab, by_stem.get(Path(lab.chapter).stem), intro,
                        _lab_task_texts(nb, lab, site_docs, repo_blob))
        (src / "labs" / f"{lab.name}.md").write_text(page, encoding="utf-8")
    parts = [Part(p.title, [s for s in p.stems if s in stems]) for p in cmap.parts]
    parts = [p for p in parts if p.stems]
    listed = {s for p in parts for s in p.stems}
    unlisted = [c.stem for c in chosen if c.stem not in listed]
    if unlisted:  # a chapter the README does not map yet still gets a page
        parts.append(Part("More chapters", unlisted))
    (src / "index.md").write_text(index_page(readme, cmap, parts, labs, site_docs, repo_blob), encoding="utf-8")

    html_dir = out / "html"
    shutil.rmtree(html_dir, ignore_errors=True)
    warnings_file = out / "sphinx-warnings.txt"
    log(f"rendering {1 + len(chosen) + len(labs)} page(s) with Sphinx into {html_dir}")
    _sphinx(src, html_dir, out / "doctrees", warnings_file, jobs)
    (html_dir / ".nojekyll").write_text("", encoding="utf-8")  # GitHub Pages: serve _static/ as it is
    warnings = [w for w in warnings_file.read_text(encoding="utf-8").splitlines() if w.strip()]

    log("checking: nothing loaded from another host, every internal link resolves")
    external = external_references(html_dir)
    if external:
        raise SiteError(f"{len(external)} reference(s) to other hosts (the site must work offline):\n  "
                        + "\n  ".join(external[:40]))
    broken = broken_links(html_dir)
    if broken:
        raise SiteError(f"{len(broken)} internal link(s) to missing files:\n  " + "\n  ".join(broken[:40]))
    pages = 1 + len(chosen) + len(labs)
    return Built(html_dir, pages, [c.stem for c in chosen], [lab.name for lab in labs],
                 time.perf_counter() - start, times, widgets, warnings)


def main(argv: list[str] | None = None) -> int:
    """``python -m bytes2logits site [--out DIR] [--chapters 01,03] [--jobs N] [--no-execute] [--repo-url URL]``."""
    parser = argparse.ArgumentParser(prog="python -m bytes2logits site",
                                     description="Build the static course site: every chapter executed and "
                                                 "rendered with its outputs, a page per lab, offline.")
    parser.add_argument("--out", default=None, help="output folder (default: build/site under the repo)")
    parser.add_argument("--chapters", default="", help="comma-separated chapter numbers, or the labs whose chapters "
                        "to build (1, 01, lab01 or lab01_tokenizers; default: all)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="chapters executed at once, and Sphinx's workers (default: 2)")
    parser.add_argument("--no-execute", action="store_true",
                        help="reuse the executed chapters of the last build (OUT/executed/)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds one cell may run (default: 300)")
    parser.add_argument("--repo-url", default=None,
                        help="the repository's web address: a repository button, and links to its files")
    parser.add_argument("--branch", default="main", help="the branch repository links point at (default: main)")
    parser.add_argument("--root", default=None,
                        help="the course folder (default: the course folder around the current directory)")
    args = parser.parse_args(argv)
    try:
        root = command_root(args.root)
        # A lab names its chapter (lab01 and lab01_tokenizers are chapter 01); digits are chapter numbers.
        only = [Path(find_lab(c).chapter).stem[:2] if c.lower().startswith("lab") else c
                for c in (c.strip() for c in args.chapters.split(",")) if c] or None
    except (KeyError, RuntimeError) as e:
        print(f"error: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else root / "build" / "site"
    try:
        built = build_site(out, chapters=only, jobs=args.jobs, execute=not args.no_execute, timeout=args.timeout,
                           repo_url=args.repo_url, branch=args.branch, root=root)
    except SiteError as e:
        print(f"site: {e}", file=sys.stderr)
        return 1
    degraded = sum(p.degraded for p in built.widgets.values())
    live = sum(p.anywidgets for p in built.widgets.values())
    bars = sum(p.dropped for p in built.widgets.values())
    if built.warnings:
        print(f"site: {len(built.warnings)} Sphinx warning(s), in {out / 'sphinx-warnings.txt'}", file=sys.stderr)
    print(f"site: {built.pages} pages ({len(built.chapters)} chapters, {len(built.labs)} labs; {live} live "
          f"widget(s), {degraded} shown static with the kernel note, {bars} progress bar(s) left off) in "
          f"{built.seconds:.0f} s -> "
          f"{built.html / 'index.html'}")
    return 0
