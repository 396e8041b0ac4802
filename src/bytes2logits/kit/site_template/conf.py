"""Sphinx configuration of the course site (copied into the site's source folder by ``bytes2logits site``).

The builder writes ``site.json`` beside this file (title, repository link, what to load); everything else
is fixed here. The site must work offline: no file of it may load anything from another host.
"""

import json
from pathlib import Path

_site = json.loads((Path(__file__).parent / "site.json").read_text(encoding="utf-8"))

project = _site["title"]
author = _site.get("author", "the Bytes to Logits authors")
copyright = _site.get("copyright", author)
html_title = _site["title"]

extensions = ["myst_nb"]
# The chapters were executed by the builder; Sphinx only renders them.
nb_execution_mode = "off"
# No kernel on the site: the builder already turned every widget output into HTML, and the ipywidgets
# embedder (RequireJS and the html-manager, both from CDNs by default) is never loaded.
nb_ipywidgets_js = {}
nb_mime_priority_overrides = [("*", "application/vnd.jupyter.widget-view+json", None),
                              ("*", "application/vnd.jupyter.widget-state+json", None)]
nb_merge_streams = True
myst_enable_extensions = ["colon_fence", "html_image"]
myst_heading_anchors = 3
# Chapters may jump from a title to a level-three heading; the page still reads well.
suppress_warnings = ["myst.header"]

exclude_patterns = ["_build", "**.ipynb_checkpoints", "downloads/**"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
master_doc = "index"

html_theme = "sphinx_book_theme"
html_static_path = ["_static"]
html_css_files = ["b2l-site.css"]
# A page without an icon makes the browser ask for /favicon.ico, a 404 in every console.
html_favicon = "_static/favicon.svg"
# The course's anywidgets (kit/web/*.js) come to life on every page without a kernel.
html_js_files = [("static_host.js", {"type": "module"})]
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "navigation_with_keys": False,
    # one search field, in the sidebar (not a second one in a header bar)
    "navbar_persistent": [],
}
if _site.get("repo_url"):
    html_theme_options.update(repository_url=_site["repo_url"], use_repository_button=True)
# The theme's first page would otherwise log "Got invalid theme mode" (no mode saved yet); the chapters'
# figures and tables are drawn for a light page.
html_context = {"default_mode": "light"}
