"""The static course site (``python -m bytes2logits site``): the builder's pieces, then a real two-chapter site
in Chromium.

The fast tests check the parts that decide what the site shows: the navigation read from the README's course
map, links pointed at the site's pages, widgets made kernel-free (course anywidgets kept, other widgets shown
static with a note), and the offline and link checks, which must catch what they exist to catch.

The slow tests build chapters 01 and 03 (they carry the two anywidgets) into a temporary folder once, serve
it on 127.0.0.1 and open it in Chromium: pages load with no console error, no failed request and no request
to another host; images load; the merge stepper steps and the bytes explorer encodes in the browser with no
kernel; every internal link answers 200. Screenshots go to ``build/test-artifacts/browser/site/``.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
import urllib.error
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

from bytes2logits.kit import site
from bytes2logits.kit.labs import LABS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from browser import artifact_dir  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_CHAPTERS = ["01", "03"]


# --------------------------------------------------------------------------------------------- fast: the parts

README_WITH_PARTS = """# Course

Intro line.

## Course map

Some words about [times](tools/course_times.py).

### Part one: text

| # | chapter | lab |
|---|---|---|
| 01 | [one](course/01_a.ipynb) | [lab01_a](labs/lab01_a/lab01_a.ipynb): x |

### Part two: models

| # | chapter | lab |
|---|---|---|
| 02 | [two](course/02_b.ipynb) | no lab |
| 03 | [three](course/03_c.ipynb) | no lab |

## Next section
"""


def test_course_map_groups_chapters_by_the_readme_parts():
    cmap = site.course_map(README_WITH_PARTS)
    assert [(p.title, p.stems) for p in cmap.parts] == [("Part one: text", ["01_a"]),
                                                        ("Part two: models", ["02_b", "03_c"])]
    assert "Some words" in cmap.intro and "Next section" not in "\n".join(cmap.table)


def test_course_map_of_the_real_readme_lists_every_chapter_in_order():
    cmap = site.course_map((ROOT / "README.md").read_text(encoding="utf-8"))
    stems = [s for p in cmap.parts for s in p.stems]
    assert stems == sorted(p.stem for p in (ROOT / "course").glob("[0-9][0-9]_*.ipynb"))


def test_a_readme_without_a_course_map_is_refused():
    with pytest.raises(site.SiteError, match="Course map"):
        site.course_map("# Title\n\nno map here\n")


def test_links_point_at_site_pages_or_lose_their_target():
    docs = {"course/03_c.ipynb": "chapters/03_c.ipynb", "labs/lab01_a/lab01_a.ipynb": "labs/lab01_a.md"}
    md = ("See [three](03_c.ipynb#top), [the lab](../labs/lab01_a/lab01_a.ipynb), [code](../src/x.py), "
          "[paper](https://arxiv.org/abs/1), [here](#anchor) and ![img](pic.png).")
    out = site.rewrite_links(md, "course", "chapters/01_a.ipynb", docs)
    assert "[three](03_c.ipynb#top)" in out
    assert "[the lab](../labs/lab01_a.md)" in out
    assert "[code]" not in out and " code," in out  # no copy of src/ on the site: plain text
    assert "[paper](https://arxiv.org/abs/1)" in out and "[here](#anchor)" in out and "![img](pic.png)" in out
    with_repo = site.rewrite_links(md, "course", "chapters/01_a.ipynb", docs, "https://example.org/r/blob/main/")
    assert "[code](https://example.org/r/blob/main/src/x.py)" in with_repo


def _widget_output(model_id: str, extra: dict | None = None) -> dict:
    data = {"text/plain": "VBox(...)",
            site.WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": model_id}}
    data.update(extra or {})
    return {"output_type": "display_data", "data": data, "metadata": {}}


def _notebook(outputs: list[dict], models: dict) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5,
            "metadata": {"widgets": {site.WIDGET_STATE: {"state": models, "version_major": 2,
                                                         "version_minor": 0}}},
            "cells": [{"cell_type": "code", "source": "x", "metadata": {}, "outputs": outputs,
                       "execution_count": 1}]}


INTERACT_STATE = {  # what nbclient saves for ipywidgets.interact(f, share=FloatSlider(...), tied=False)
    "box": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_s", "IPY_MODEL_c", "IPY_MODEL_o"]}},
    "s": {"model_name": "FloatSliderModel", "state": {"description": "share", "value": 0.15, "min": 0.01,
                                                      "max": 0.5, "step": 0.01}},
    "c": {"model_name": "CheckboxModel", "state": {"description": "tied", "value": False}},
    "o": {"model_name": "OutputModel", "state": {"outputs": [
        {"output_type": "stream", "name": "stdout", "text": "body 12.5 M <parameters>\n"},
        {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"},
         "metadata": {}}]}},
    "bar": {"model_name": "HBoxModel", "state": {"children": ["IPY_MODEL_t", "IPY_MODEL_p"]}},
    "t": {"model_name": "HTMLModel", "state": {"value": "train_bpe: 100%"}},
    "p": {"model_name": "FloatProgressModel", "state": {"value": 10.0, "max": 10.0}},
}


def test_a_plain_ipywidget_degrades_to_its_saved_view_with_the_kernel_note():
    nb = _notebook([_widget_output("box")], INTERACT_STATE)
    done = site.prepare_notebook(nb, base="course", doc="chapters/08.ipynb", site_docs={})
    data = nb["cells"][0]["outputs"][0]["data"]
    assert site.WIDGET_VIEW not in data and "widgets" not in nb["metadata"]
    shown = data["text/html"]
    assert site.KERNEL_NOTE in shown and "make lab" in shown
    assert 'type="range" disabled' in shown and "share" in shown and "0.15" in shown  # the slider, at its value
    assert "body 12.5 M &lt;parameters&gt;" in shown  # the Output widget's captured print, escaped
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in shown  # and its figure
    assert (done.degraded, done.static, done.anywidgets) == (1, 0, 0)


def test_a_progress_bar_is_dropped_from_the_page_and_the_rest_kept():
    """A tqdm bar on a kernel-free page is frozen wherever its last refresh caught it: it is removed, and the
    cell's other outputs stay, in order."""
    printed = {"output_type": "stream", "name": "stdout", "text": "trained 10 merges\n"}
    nb = _notebook([_widget_output("bar"), printed], INTERACT_STATE)
    done = site.prepare_notebook(nb, base="course", doc="chapters/08.ipynb", site_docs={})
    assert nb["cells"][0]["outputs"] == [printed]
    assert (done.dropped, done.static, done.degraded) == (1, 0, 0)
    assert not site.progress_only("box", INTERACT_STATE)  # a slider beside an output is not a progress bar


def test_the_site_runs_the_capstone_on_the_solutions_and_says_so():
    """On the site, chapter 17's capstone would run the blank releases ("Not yet. lab 13 ..."): the page runs
    the solutions instead, with a note above the cell; every edit's text must still be in its chapter."""
    import nbformat

    for stem, edits in site.SITE_EDITS.items():
        nb = nbformat.read(ROOT / "course" / f"{stem}.ipynb", as_version=4)
        before = len(nb.cells)
        changed = site.apply_site_edits(nb, stem)
        assert changed >= len(edits) and len(nb.cells) == before + changed
        for old, new in edits:
            cells = [i for i, c in enumerate(nb.cells) if new in c.source]
            assert cells and not any(old in c.source for c in nb.cells if c.cell_type == "code")
            assert all(nb.cells[i - 1].source == site.SITE_EDIT_NOTE for i in cells)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    with pytest.raises(site.SiteError, match="17_generation: no code cell holds"):
        site.apply_site_edits(nb, "17_generation")


def test_a_widget_without_saved_state_shows_its_text_with_the_note():
    nb = _notebook([_widget_output("gone")], {})
    site.prepare_notebook(nb, base="course", doc="chapters/08.ipynb", site_docs={})
    shown = nb["cells"][0]["outputs"][0]["data"]["text/html"]
    assert "VBox(...)" in shown and site.KERNEL_NOTE in shown


def test_a_course_anywidget_keeps_its_static_html_and_loses_the_widget_view():
    from bytes2logits.kit.anywidgets import static_html

    page = static_html("merge_stepper", {"frames": ["<b>a</b>"], "step": 0}, "first frame")
    nb = _notebook([_widget_output("any", {"text/html": page})], {})
    done = site.prepare_notebook(nb, base="course", doc="chapters/03.ipynb", site_docs={})
    data = nb["cells"][0]["outputs"][0]["data"]
    assert data["text/html"] == page and site.WIDGET_VIEW not in data and site.KERNEL_NOTE not in data["text/html"]
    assert done.anywidgets == 1


def test_the_offline_scan_finds_every_kind_of_external_load(tmp_path):
    (tmp_path / "a.html").write_text(
        '<html><head><script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.4/require.min.js">'
        '</script><link rel="stylesheet" href="//fonts.googleapis.com/css?family=Roboto">'
        '<script>import("https://esm.sh/x");</script><style>body{background:url(https://h.example/b.png)}'
        '</style></head><body><img src="http://h.example/i.png" srcset="a.png 1x, https://h.example/2x.png 2x">'
        '<a href="https://arxiv.org/abs/1">a paper is a link, not a load</a><img src="data:image/png;base64,x">'
        '<svg xmlns="http://www.w3.org/2000/svg"></svg></body></html>', encoding="utf-8")
    (tmp_path / "s.css").write_text('@import url("https://h.example/t.css"); a{b:url(data:image/svg+xml,'
                                    "%3Csvg xmlns='http://www.w3.org/2000/svg'%3E)}", encoding="utf-8")
    (tmp_path / "m.js").write_text('import x from "https://h.example/m.js";\nconst ns = "http://www.w3.org/2000/svg";'
                                   '\nfetch("https://h.example/data.json");', encoding="utf-8")
    found = site.external_references(tmp_path)
    hosts = sorted({urlsplit(line.split(": ", 1)[1]).netloc for line in found})
    assert hosts == ["cdnjs.cloudflare.com", "esm.sh", "fonts.googleapis.com", "h.example"], found
    assert len([f for f in found if "h.example" in f]) == 6, found
    assert not any("arxiv" in f or "w3.org" in f for f in found)


def test_the_link_check_finds_missing_pages(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "index.html").write_text('<a href="sub/p.html#x">ok</a><a href="gone.html">bad</a>'
                                         '<a href="#top">anchor</a><a href="mailto:a@b">mail</a>', encoding="utf-8")
    (tmp_path / "sub" / "p.html").write_text('<a href="../index.html">up</a><a href="../">root</a>',
                                             encoding="utf-8")
    assert site.broken_links(tmp_path) == ["index.html: gone.html"]


def test_lab_pages_show_angle_brackets_as_text_not_tags():
    for name, word in (("lab02_words", "<unk>"), ("lab10_image_patches", "<image>")):
        page = site.lab_page(LABS[name], None, "")
        assert word not in page and html_text(word) in page, name  # a raw <image> would be an empty <img>
        assert f"| {site.md_text(LABS[name].tasks[0].title)} | {LABS[name].tasks[0].points} |" in page


def test_unknown_chapters_are_refused_by_name():
    with pytest.raises(site.SiteError, match="no chapter 99"):
        site._chapters(ROOT, ["99"])


# --------------------------------------------------------------------------------------------- slow: a real site

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    return site.build_site(out, chapters=FIXTURE_CHAPTERS, jobs=2, log=lambda *a: None)


@pytest.fixture(scope="module")
def server(built):
    handler = functools.partial(_QuietHandler, directory=str(built.html))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def shots():
    return artifact_dir("site")


class Watched:
    """A page with every console error, page error, failed request, HTTP error and off-site request recorded."""

    def __init__(self, browser, base: str):
        self.base = base
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.problems: list[str] = []
        origin = urlsplit(base).netloc

        def route(r):
            if urlsplit(r.request.url).scheme in ("http", "https") and urlsplit(r.request.url).netloc != origin:
                self.problems.append(f"request to another host: {r.request.url}")
                return r.abort()
            return r.continue_()

        self.context.route("**/*", route)
        self.page = self.context.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.problems.append(f"console: {m.text}"))
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url} ({r.failure})"))
        self.page.on("response", lambda r: r.status >= 400 and self.problems.append(f"HTTP {r.status}: {r.url}"))

    def open(self, path: str):
        self.problems.clear()
        self.page.goto(urljoin(self.base, path), wait_until="load")
        self.page.wait_for_load_state("networkidle")
        return self.page

    def close(self):
        self.context.close()


def _pages(built) -> list[str]:
    return (["index.html"] + [f"chapters/{stem}.html" for stem in built.chapters]
            + [f"labs/{name}.html" for name in built.labs])


@pytest.mark.slow
def test_the_fixture_site_has_its_pages_and_passes_its_own_checks(built):
    assert built.chapters == ["01_the_model_speaks_integers", "03_bpe_training"]
    assert built.labs == [lab.name for lab in LABS.values() if lab.chapter[len("course/"):][:2] in FIXTURE_CHAPTERS]
    for page in _pages(built):
        assert (built.html / page).is_file(), page
    assert site.external_references(built.html) == []
    assert site.broken_links(built.html) == []
    assert sum(p.anywidgets for p in built.widgets.values()) == 2  # the stepper (03) and the bytes explorer (01)
    assert not built.warnings, built.warnings


@pytest.mark.slow
def test_course_notebooks_stay_without_outputs(built):
    for stem in built.chapters:
        nb = json.loads((ROOT / "course" / f"{stem}.ipynb").read_text(encoding="utf-8"))
        assert not any(c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), stem


@pytest.mark.slow
def test_navigation_follows_the_course_map(built):
    import re

    index = (built.html / "index.html").read_text(encoding="utf-8")
    cmap = site.course_map((ROOT / "README.md").read_text(encoding="utf-8"))
    nav = index[index.index('class="bd-links'):]
    for part in cmap.parts:
        assert html_text(part.title) in nav, part.title
    titles = []
    for stem in built.chapters:
        nb = json.loads((built.html.parent / "executed" / f"{stem}.ipynb").read_text(encoding="utf-8"))
        titles.append(site.first_heading(nb))
    positions = [nav.find(f'href="chapters/{stem}.html"') for stem in built.chapters]
    assert all(p >= 0 for p in positions) and positions == sorted(positions)
    for title in titles:
        assert html_text(title) in nav, title
    assert 'caption-text">Labs<' in nav
    # the index page's course map links the built chapters and names the others without a dead link
    main = index[index.index('<main'):]
    assert 'href="chapters/03_bpe_training.html"' in main and "href=\"chapters/02_" not in main
    assert re.search(r"char vs word vs subword", main)


def html_text(text: str) -> str:
    import html

    return html.escape(text, quote=False)


@pytest.mark.slow
def test_each_lab_page_covers_its_tasks_and_offers_the_release_notebook(built):
    for name in built.labs:
        lab = LABS[name]
        page = (built.html / "labs" / f"{name}.html").read_text(encoding="utf-8")
        for k, task in enumerate(lab.tasks, 1):
            assert html_text(task.title) in page, (name, task.title)
            assert f'<h3>Task {k} ' in page or f'id="task-{k}-' in page, f"{name}: task {k}'s statement is missing"
        assert f'href="../chapters/{Path(lab.chapter).stem}.html"' in page
        downloads = list((built.html / "_downloads").rglob(f"{name}.ipynb"))
        assert len(downloads) == 1 and downloads[0].read_bytes() == lab.release_notebook().read_bytes()
        assert f'href="../{downloads[0].relative_to(built.html).as_posix()}"' in page


@pytest.mark.slow
def test_pages_load_cleanly_with_their_images(built, server, browser, shots):
    watched = Watched(browser, server)
    report = []
    try:
        for path in _pages(built):
            page = watched.open(path)
            images = page.evaluate("() => [...document.images].map(i => [i.currentSrc || i.src,"
                                   " i.complete && i.naturalWidth > 0])")
            broken = [src for src, ok in images if not ok]
            if path.startswith("chapters/"):
                page.screenshot(path=str(shots / f"{Path(path).stem}.png"), full_page=False)
                if not images:
                    report.append(f"{path}: no image (the chapter's figures are missing)")
            report += [f"{path}: {p}" for p in watched.problems]
            report += [f"{path}: image not loaded: {src[:120]}" for src in broken]
    finally:
        watched.close()
    assert not report, "\n".join(report) + f"\n(screenshots in {shots})"


@pytest.mark.slow
def test_the_merge_stepper_steps_without_a_kernel(server, browser, shots):
    watched = Watched(browser, server)
    try:
        page = watched.open("chapters/03_bpe_training.html")
        stepper = page.locator("div.b2l-merge-stepper").first
        stepper.wait_for(timeout=10_000)
        stepper.scroll_into_view_if_needed()
        pane = stepper.locator("div.b2l-pane")
        seen = []
        for expected in (1, 2, 3):
            if expected > 1:
                stepper.locator("button.b2l-next").click()
            page.wait_for_function("([el, k]) => el.dataset.step === String(k)",
                                   arg=[stepper.element_handle(), expected], timeout=5_000)
            first = pane.inner_text().strip().splitlines()[0]
            assert first.startswith(f"step {expected}:"), first
            assert stepper.locator("span.b2l-step-label").inner_text().startswith(f"step {expected} of ")
            seen.append(pane.inner_text())
        stepper.screenshot(path=str(shots / "stepper_step3.png"))
        assert len(set(seen)) == 3, "the pane did not change between steps"
        assert page.locator("div.b2l-anywidget .b2l-fallback").count() == 0  # every static view was replaced
        assert not watched.problems, watched.problems
    finally:
        watched.close()


@pytest.mark.slow
def test_the_bytes_explorer_encodes_what_is_typed(server, browser, shots):
    watched = Watched(browser, server)
    try:
        page = watched.open("chapters/01_the_model_speaks_integers.html")
        explorer = page.locator("div.b2l-utf8-explorer").first
        explorer.wait_for(timeout=10_000)
        explorer.scroll_into_view_if_needed()
        before = json.loads(explorer.get_attribute("data-ids"))
        box = explorer.locator("input.b2l-text")
        box.fill("")
        text = "añ€🙂"
        box.press_sequentially(text)
        expected = list(text.encode("utf-8"))
        page.wait_for_function("([el, ids]) => el.dataset.ids === ids",
                               arg=[explorer.element_handle(), json.dumps(expected, separators=(",", ":"))],
                               timeout=5_000)
        assert json.loads(explorer.get_attribute("data-ids")) == expected != before
        assert explorer.locator(".b2l-summary").inner_text().startswith(f"4 code point(s) → {len(expected)} byte")
        assert explorer.locator("table.b2l-utf8-table tr").count() >= 4
        explorer.screenshot(path=str(shots / "bytes_explorer.png"))
        assert not watched.problems, watched.problems
    finally:
        watched.close()


@pytest.mark.slow
def test_every_internal_link_answers_200(built, server, browser):
    watched = Watched(browser, server)
    targets: dict[str, str] = {}
    try:
        for path in _pages(built):
            page = watched.open(path)
            for href in page.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.href)"):
                parts = urlsplit(href)
                if parts.scheme in ("http", "https") and href.startswith(server):
                    targets.setdefault(href.split("#")[0], path)
    finally:
        watched.close()
    downloads = [urljoin(server, d.relative_to(built.html).as_posix())
                 for d in (built.html / "_downloads").rglob("*.ipynb")]
    assert {urljoin(server, p) for p in _pages(built)} | set(downloads) <= set(targets)  # all linked, all checked
    bad = []
    for url, where in sorted(targets.items()):
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                status = r.status
        except urllib.error.HTTPError as e:
            status = e.code
        if status != 200:
            bad.append(f"{where} -> {url}: HTTP {status}")
    assert not bad, "\n".join(bad)


_CONTRAST_JS = """() => {
  const rgba = c => (c.match(/[\\d.]+/g) || ["0", "0", "0", "0"]).map(Number);
  const lum = c => {
    const [r, g, b] = rgba(c).slice(0, 3).map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const opaque = c => { const v = rgba(c); return v.length < 4 || v[3] > 0.5; };
  const backdrop = el => {
    for (let e = el; e; e = e.parentElement) {
      const c = getComputedStyle(e).backgroundColor;
      if (opaque(c)) return c;
    }
    return "rgb(255, 255, 255)";
  };
  const bad = [];
  for (const scope of document.querySelectorAll("div.cell_output, .b2l-kernel-note")) {
    const walk = document.createTreeWalker(scope, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      const el = n.parentElement, text = n.textContent.trim();
      if (!text || !el.getClientRects().length || getComputedStyle(el).visibility === "hidden") continue;
      if (el.closest(":disabled")) continue;  // WCAG exempts inactive controls (the stepper's back at step 1)
      const fg = getComputedStyle(el).color, bg = backdrop(el);
      const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
      const ratio = (a + 0.05) / (b + 0.05);
      if (ratio < 4.5) bad.push(`${ratio.toFixed(2)}: ${fg} on ${bg}: ${text.slice(0, 40)}`);
    }
  }
  return bad;
}"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["light", "dark"])
def test_outputs_are_readable_in_light_and_dark_mode(built, server, browser, shots, mode):
    """Every piece of text in a chapter's outputs (token tables, the stepper, printed text, the kernel note) has
    a WCAG AA contrast (4.5:1) with what is behind it, in the theme's light mode and in its dark mode. The
    outputs are drawn for a light page; in dark mode, light text on their light panels was unreadable."""
    watched = Watched(browser, server)
    report = []
    try:
        for stem in built.chapters:
            page = watched.open(f"chapters/{stem}.html")
            page.evaluate("m => { document.documentElement.dataset.theme = m; "
                          "document.documentElement.dataset.mode = m; }", mode)
            page.wait_for_timeout(200)
            bad = page.evaluate(_CONTRAST_JS)
            if bad:
                page.screenshot(path=str(shots / f"{stem}-{mode}-contrast-FAILED.png"), full_page=True)
            report += [f"{stem} ({mode}): {line}" for line in bad[:15]] + (
                [f"{stem} ({mode}): ... {len(bad) - 15} more"] if len(bad) > 15 else [])
    finally:
        watched.close()
    assert not report, "\n".join(report)


@pytest.mark.slow
def test_printed_output_wraps_instead_of_running_off_the_column(built, server, browser):
    """A printed line wider than the page's column wraps, as in JupyterLab, rather than being cut at the
    column's edge behind a scrollbar most browsers hide (chapter 03 prints several such lines)."""
    watched = Watched(browser, server)
    report = []
    try:
        for stem in built.chapters:
            page = watched.open(f"chapters/{stem}.html")
            wide = page.evaluate("() => [...document.querySelectorAll('div.cell_output pre')]"
                                 ".filter(e => e.scrollWidth > e.clientWidth + 1)"
                                 ".map(e => `${e.scrollWidth}px in ${e.clientWidth}px: ${e.textContent.slice(0, 60)}`)")
            report += [f"{stem}: {line}" for line in wide]
    finally:
        watched.close()
    assert not report, "\n".join(report)
