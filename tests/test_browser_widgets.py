"""The course's anywidgets in a real Chromium with no kernel: the ES modules of ``kit/web`` mounted by
``static_host.js`` from the ``text/html`` each widget carries (what the course site serves).

The same modules run in JupyterLab against the kernel's model (tests/test_browser_lab.py); here the page's
own model stands in, so what the stepper and the explorer do is checked without a server behind them.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from browser import artifact_dir  # noqa: E402

from bytes2logits.kit.anywidgets import WEB, utf8_explorer  # noqa: E402
from bytes2logits.kit.widgets import utf8_rows  # noqa: E402
from bytes2logits.lessons.merge_stepper import bpe_trace, merge_stepper  # noqa: E402

CORPUS = " ".join(["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3)
TYPED = "naïve 👩\u200d👩\u200d👧 e\u0301\t!"  # a ZWJ family, a combining accent, a tab


def _bundle_html(widget) -> str:
    bundle = widget._repr_mimebundle_()
    return (bundle[0] if isinstance(bundle, tuple) else bundle)["text/html"]


@pytest.fixture(scope="module")
def page_url(tmp_path_factory):
    root = tmp_path_factory.mktemp("widgets-page")
    shutil.copytree(WEB, root / "_static")
    body = "\n".join([_bundle_html(merge_stepper(CORPUS, num_merges=6)), _bundle_html(utf8_explorer("hé 🙂"))])
    (root / "index.html").write_text(
        f"<!doctype html><meta charset='utf-8'><link rel='icon' href='data:,'><title>widgets</title>{body}"
        "<script type='module' src='_static/static_host.js'></script>", encoding="utf-8")
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    server.shutdown()
    server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def page(page_url, browser):
    pg = browser.new_page()
    problems: list[str] = []
    pg.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    pg.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    pg.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    pg.goto(page_url)
    pg.wait_for_selector("div.b2l-merge-stepper")
    pg.wait_for_selector("div.b2l-utf8-explorer")
    pg.problems = problems
    yield pg
    pg.close()


@pytest.mark.slow
def test_static_pages_mount_both_widgets_without_errors(page):
    assert page.locator(".b2l-fallback").count() == 0, "static_host.js should replace every fallback view"
    assert page.problems == []


@pytest.mark.slow
def test_stepper_steps_through_the_trace(page):
    shots = artifact_dir("widgets-static")
    stepper = page.locator("div.b2l-merge-stepper")
    steps = bpe_trace(CORPUS, 6)
    pane = stepper.locator(".b2l-pane")

    def merged_line() -> str:
        return pane.inner_text().splitlines()[0]

    assert stepper.get_attribute("data-step") == "1"
    assert stepper.locator(".b2l-back").is_disabled()
    first = merged_line()
    stepper.locator(".b2l-next").click()
    stepper.locator(".b2l-next").click()
    assert stepper.get_attribute("data-step") == "3", f"screenshots in {shots}"
    assert stepper.locator(".b2l-step-label").inner_text() == f"step 3 of {len(steps)}"
    a, b = steps[2].winner
    assert merged_line() != first
    assert merged_line().startswith("step 3: merge ") and (a + b).decode() in merged_line()
    stepper.screenshot(path=str(shots / "stepper-step3.png"))
    stepper.locator(".b2l-back").click()
    assert stepper.get_attribute("data-step") == "2"
    stepper.focus()
    for _ in range(10):  # past the end: the view stops at the last step
        page.keyboard.press("ArrowRight")
    assert stepper.get_attribute("data-step") == str(len(steps))
    assert stepper.locator(".b2l-next").is_disabled()
    stepper.locator(".b2l-slider").fill("1")
    assert stepper.get_attribute("data-step") == "1"
    assert page.problems == []


@pytest.mark.slow
def test_explorer_encodes_what_is_typed(page):
    shots = artifact_dir("widgets-static-explorer")
    explorer = page.locator("div.b2l-utf8-explorer")
    before = explorer.get_attribute("data-ids")
    assert before == str(list("hé 🙂".encode())).replace(" ", "")
    box = explorer.locator("input.b2l-text")
    box.fill("")
    box.press_sequentially(TYPED)
    rows = utf8_rows(TYPED)
    ids = [i for r in rows for i in r["ids"]]
    assert explorer.get_attribute("data-ids") == str(ids).replace(" ", ""), f"screenshots in {shots}"
    assert explorer.locator(".b2l-summary").inner_text() == f"{len(rows)} code point(s) → {len(ids)} byte id(s)"
    cells = explorer.locator("table.b2l-utf8-table tr").all()[1:]
    assert [c.locator("td").nth(1).inner_text() for c in cells] == [r["code point"] for r in rows]
    assert [c.locator("td.b2l-ids").inner_text() for c in cells] == [str(r["ids"]) for r in rows]
    # no kernel here: characters typed on the page have no name, and the view says why
    assert "unicodedata" in explorer.locator(".b2l-note").inner_text()
    explorer.screenshot(path=str(shots / "explorer-typed.png"))
    assert page.problems == []
