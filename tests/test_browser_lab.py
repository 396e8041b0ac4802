"""JupyterLab in a real Chromium, used the way a learner uses it after ``make lab``.

One ``make lab`` server (headless, on a free port, with a token) serves the whole module and one headless
Chromium drives it: open a notebook, run its cells from the Run menu or the keyboard, wait for the kernel to
go idle, then use the widgets and read what the page shows. Chapter 03's merge stepper and chapter 01's bytes
explorer are anywidgets (``kit/web/*.js``), so these tests also show that their front-end code loads and talks
to the kernel inside JupyterLab. Lab 01's release stops at its first autograder cell; its solution passes.

Nothing is written into the repo: the server gets its own settings folder with autosave off (and its own
workspaces folder), and each test checks that the notebooks it opened are unchanged on disk and that no new
file appeared beside them. Screenshots of every step go to ``build/test-artifacts/browser/jupyterlab``
(tests/browser.py); a failing test names that folder and leaves a screenshot, the page's HTML and its
console log there.

JupyterLab does not mark an error output in the DOM (a traceback and a stderr stream are both rendered as
``application/vnd.jupyter.stderr``), so the server runs with ``--LabApp.expose_app_in_browser=True`` and the
tests read the output types and execution counts from the notebook model (``window.jupyterapp``).
"""

from __future__ import annotations

import contextlib
import hashlib
import html.parser
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from browser import artifact_dir, find_chromium  # noqa: E402

from bytes2logits.kit.labs import LABS  # noqa: E402
from bytes2logits.lessons.merge_stepper import bpe_trace, step_html  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CH01 = "course/01_the_model_speaks_integers.ipynb"
CH03 = "course/03_bpe_training.ipynb"
LAB = LABS["lab01_tokenizers"]
RELEASE = LAB.release_notebook(ROOT).relative_to(ROOT).as_posix()
SOLUTION = LAB.source_notebook(ROOT).relative_to(ROOT).as_posix()
TYPED = "hi 🙂 ñ"  # an emoji (4 bytes) and an accented letter (2 bytes)
NAME_OF_NEW = "latin small letter n with tilde"  # how the explorer shows unicodedata.name("ñ")
# Chapter 03's stepper cell: merge_stepper(lab_corpus, num_merges=12) over this corpus.
STEPPER_CORPUS = "the the the the the the cat cat cat sat sat mat rat ate"

# Generous limits: kernels start slowly on a loaded 2-core machine. Nothing waits for a fixed time.
SERVER_START_S = 300  # make lab may first install the package or fetch assets
PAGE_MS = 120_000
WIDGET_MS = 60_000  # a click or a keystroke, and the kernel's answer to it
RUN_MS = 300_000

# JupyterLab settings for the test server: nothing is saved unless asked (the repo's notebooks stay as they
# are), no news or update pop-ups over the page, and every cell in the DOM (no virtual scrolling).
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                        "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """A running ``make lab``: its base URL, token and everything it printed so far."""

    def __init__(self, port: int, token: str, proc: subprocess.Popen):
        self.base = f"http://127.0.0.1:{port}"
        self.port, self.token, self.proc = port, token, proc
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # drained all along, so the server never blocks on a full pipe
            self.lines.append(line)

    @property
    def output(self) -> str:
        """Everything make lab printed so far."""
        return "".join(self.lines)

    def url(self, path: str) -> str:
        """The address of ``path`` on the server, with the token."""
        return f"{self.base}/{path.lstrip('/')}{'&' if '?' in path else '?'}token={self.token}"

    def api(self, path: str, method: str = "GET"):
        """Call the server's REST API; the decoded JSON answer (None if empty)."""
        req = urllib.request.Request(f"{self.base}{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read()
        return json.loads(body) if body else None

    def shut_down_kernel_of(self, path: str) -> None:
        """Stop the session (and kernel) of the notebook at ``path``, so finished notebooks use no CPU."""
        for session in self.api("/api/sessions"):
            if session.get("path") == path:
                self.api(f"/api/sessions/{session['id']}", method="DELETE")


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    """``make lab`` as a learner starts it, headless on a free port; one server for the module."""
    home = tmp_path_factory.mktemp("jupyterlab")
    for rel, value in LAB_SETTINGS.items():
        f = home / "settings" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(value), encoding="utf-8")
    port, token = _free_port(), "b2l-browser-test-token"
    args = (f"--no-browser --port={port} --ServerApp.ip=127.0.0.1 --IdentityProvider.token={token} "
            "--LabApp.expose_app_in_browser=True")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    env |= {"JUPYTERLAB_SETTINGS_DIR": str(home / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces")}
    proc = subprocess.Popen(["make", "--no-print-directory", "lab", f"LAB_ARGS={args}"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    server = LabServer(port, token, proc)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if proc.poll() is not None:
                server._reader.join(5)
                pytest.fail(f"make lab exited with {proc.returncode} before serving /lab:\n{server.output[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"make lab did not serve /lab within {SERVER_START_S} s:\n{server.output[-3000:]}")
            try:
                with urllib.request.urlopen(server.url("/lab"), timeout=5) as r:
                    server.status, server.body = r.status, r.read().decode("utf-8", "replace")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        yield server
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        server._reader.join(5)


@pytest.fixture(scope="module")
def shots():
    """The module's screenshot folder, ``build/test-artifacts/browser/jupyterlab`` (emptied first)."""
    return artifact_dir("jupyterlab")


# --- the notebook model, read in the page ------------------------------------------------------------------

# The current notebook's code cells (index, execution count, output types, text of error outputs), its
# kernel's status, and whether any prompt in the DOM still shows [*].
_STATE_JS = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!w || !w.content || !w.content.model || !w.sessionContext) return null;
  const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
  const cells = [];
  const all = w.content.model.cells;
  for (let i = 0; i < all.length; i++) {
    const c = all.get(i);
    if (c.type !== 'code') continue;
    const types = [], errors = [];
    for (let j = 0; j < c.outputs.length; j++) {
      const o = c.outputs.get(j);
      types.push(o.type);
      if (o.type === 'error') {
        const raw = o.toJSON();
        errors.push(raw.ename + ': ' + raw.evalue);
      }
    }
    cells.push({index: i, count: c.executionCount, types: types, errors: errors});
  }
  const stars = [...w.node.querySelectorAll('.jp-InputPrompt')].filter(e => e.textContent.includes('*')).length;
  return {kernel: kernel ? kernel.status : 'none', name: kernel ? kernel.name : '', cells: cells, stars: stars};
}"""

# True once the cells up to `upto` (every cell if null) have run and the kernel is idle, or once an error
# output appeared and the kernel is idle (Run All stops at an error, so waiting on would never end).
_DONE_JS = "([upto]) => {\n  const s = (" + _STATE_JS + """)();
  if (!s || s.kernel !== 'idle' || s.stars) return false;
  const cells = s.cells.filter(c => upto === null || c.index <= upto);
  if (s.cells.some(c => c.errors.length)) return true;
  return cells.every(c => c.count !== null);
}"""


class Notebook:
    """One notebook open in its own JupyterLab tab; records console problems and screenshots."""

    def __init__(self, server: LabServer, browser, shots: Path, path: str, tag: str):
        self.server, self.path, self.tag, self.shots = server, path, tag, shots
        self.file = ROOT / path
        self.digest = hashlib.sha256(self.file.read_bytes()).hexdigest()
        self.neighbours = set(os.listdir(self.file.parent))
        # JupyterLab saves a first checkpoint of a file it opens (File > Revert to checkpoint): ours to remove.
        self.checkpoints = self.file.parent / ".ipynb_checkpoints"
        self.checkpoint = self.checkpoints / f"{self.file.stem}-checkpoint{self.file.suffix}"
        self.had_checkpoint = self.checkpoint.exists()
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.console: list[str] = []
        self.page.on("console", lambda m: self.console.append(f"console {m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.console.append(f"page error: {e}"))
        self.taken: list[Path] = []

    def open(self) -> None:
        """Open the notebook (``?reset``: a fresh layout) and wait until its kernel is idle."""
        self.page.goto(self.server.url(f"/lab/tree/{self.path}?reset"), timeout=PAGE_MS)
        self.page.wait_for_function(
            "() => { const s = (" + _STATE_JS + ")(); return s && s.cells.length > 0 && s.kernel === 'idle'; }",
            timeout=PAGE_MS)
        # What the learner sees too: the status bar says the kernel is idle.
        self.page.wait_for_function(
            "() => [...document.querySelectorAll('.jp-StatusBar-TextItem')].some(e => /\\| Idle$/.test(e.textContent))",
            timeout=PAGE_MS)
        autosave = self.page.evaluate("""async () => (await window.jupyterapp.serviceManager.settings.fetch(
            '@jupyterlab/docmanager-extension:plugin')).settings.autosave""")
        assert autosave is False, f"the test server's settings did not load: autosave is {autosave!r}"
        counts = [c["count"] for c in self.state()["cells"]]
        assert all(c is None for c in counts), f"{self.path} is stored with execution counts: {counts}"
        self.shot("opened")

    def state(self) -> dict:
        """The code cells (index, execution count, output types, errors) and the kernel's status, read now."""
        return self.page.evaluate(_STATE_JS)

    def run_all(self) -> dict:
        """Run → Run All Cells, and wait for every code cell to run (or for an error) with the kernel idle."""
        self.page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        self.page.locator(".lm-Menu-item:visible", has_text="Run All Cells").first.click()
        return self._wait(None)

    def run_down_to(self, index: int) -> dict:
        """Shift+Enter from the first cell down to and including cell ``index``, as a learner steps through."""
        first = self.page.locator(".jp-Notebook .jp-Cell").first
        first.locator(".jp-InputPrompt, .jp-InputArea-prompt").first.click()  # selects it, in command mode
        for _ in range(index + 1):
            self.page.keyboard.press("Shift+Enter")
        return self._wait(index)

    def _wait(self, upto: int | None) -> dict:
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:
            self.page.wait_for_function(_DONE_JS, arg=[upto], timeout=RUN_MS)
        except PlaywrightTimeout:
            raise AssertionError(f"{self.path}: the cells did not finish within {RUN_MS // 1000} s; "
                                 f"kernel and cells: {self.state()}") from None
        state = self.state()
        self.shot("ran")
        return state

    def shot(self, name: str, element=None, full_page: bool = False) -> Path:
        """Save a screenshot ``<tag>-<n>-<name>.png`` of the page (or of ``element``) in the artefact folder."""
        out = self.shots / f"{self.tag}-{len(self.taken) + 1:02d}-{name}.png"
        if element is not None:
            element.screenshot(path=out)
        else:
            self.page.screenshot(path=out, full_page=full_page)
        self.taken.append(out)
        return out

    def close(self) -> None:
        """Close the tab without saving, stop the kernel, and remove the checkpoint JupyterLab made."""
        if not self.page.is_closed():
            self.page.close()  # no beforeunload: the dirty notebook is dropped, not saved
        with contextlib.suppress(OSError, ValueError):
            self.server.shut_down_kernel_of(self.path)
        if not self.had_checkpoint:
            self.checkpoint.unlink(missing_ok=True)
            if self.checkpoints.name not in self.neighbours:
                with contextlib.suppress(OSError):
                    self.checkpoints.rmdir()

    def check_disk(self) -> None:
        """The notebook is as it was on disk, and running it left no new file beside it."""
        assert hashlib.sha256(self.file.read_bytes()).hexdigest() == self.digest, \
            f"{self.path} changed on disk while JupyterLab had it open (autosave should be off)"
        new = set(os.listdir(self.file.parent)) - self.neighbours
        assert not new, f"running {self.path} in JupyterLab left new files beside it: {sorted(new)}"

    def failed(self, exc: BaseException) -> AssertionError:
        """An assertion that says what failed and where its screenshot, HTML and console log are."""
        notes = self.shots / f"{self.tag}-FAILED"
        with contextlib.suppress(Exception):
            self.page.screenshot(path=notes.with_suffix(".png"), full_page=True)
            notes.with_suffix(".html").write_text(self.page.content(), encoding="utf-8")
        notes.with_suffix(".console.txt").write_text("\n".join(self.console) + "\n", encoding="utf-8")
        return AssertionError(f"{exc}\n[{self.path}] screenshots, page HTML and console log: {self.shots} "
                              f"({notes.name}.png, {notes.name}.html, {notes.name}.console.txt)")


@contextlib.contextmanager
def notebook(server, browser, shots, path: str, tag: str):
    """Open ``path`` in a new tab; on any failure, keep the page's evidence and name the folder."""
    nb = Notebook(server, browser, shots, path, tag)
    try:
        nb.open()
        yield nb
    except Exception as exc:
        raise nb.failed(exc) from exc
    finally:
        (shots / f"{tag}-console.txt").write_text("\n".join(nb.console) + "\n", encoding="utf-8")
        nb.close()
    nb.check_disk()


def _widget_view(nb: Notebook, selector: str):
    """The widget's live view; fails at once, saying why, if JupyterLab shows a widget error or the static form.

    Without anywidget's front-end extension the widget manager shows its error box ("Click to show javascript
    error"; the console says "No version of module anywidget is registered"); without a widget manager at
    all, JupyterLab falls back to the bundle's ``text/html``, the static view of the course site.
    """
    error, static = ".jupyter-widgets-error-widget", ".jp-OutputArea-output div.b2l-anywidget"
    nb.page.locator(f"{selector}, {error}, {static}").first.wait_for(state="attached", timeout=PAGE_MS)
    view = nb.page.locator(selector)
    if view.count() == 0:
        if nb.page.locator(error).count():
            raise AssertionError(f"JupyterLab shows a widget error box instead of {selector}; console errors: "
                                 f"{_widget_problems(nb.console)}")
        raise AssertionError(f"JupyterLab shows the widget's static text/html form, not its anywidget view "
                             f"({selector} missing): no widget manager rendered it")
    return view


def _widget_problems(console: list[str]) -> list[str]:
    """First lines of the console errors and uncaught page errors (JupyterLab logs debug and info lines too)."""
    return [line.splitlines()[0] for line in console if line.startswith(("page error", "console error"))]


def _until(page, js: str, arg, what) -> None:
    """Wait for ``js(arg)`` to be true; if it never is, fail with ``what()`` (what the page shows instead)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(js, arg=arg, timeout=WIDGET_MS)
    except PlaywrightTimeout:
        raise AssertionError(f"{what()} (waited {WIDGET_MS // 1000} s)") from None


def _no_errors(state: dict, path: str) -> None:
    errors = [(c["index"], c["errors"]) for c in state["cells"] if c["errors"]]
    assert not errors, f"{path}: cells show errors: {errors}"
    missing = [c["index"] for c in state["cells"] if c["count"] is None]
    assert not missing, f"{path}: code cells that did not run: {missing}"
    counts = [c["count"] for c in state["cells"]]
    assert counts == list(range(1, len(counts) + 1)), f"{path}: cells did not run once each, in order: {counts}"


class _Text(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data):
        self.parts.append(data)


def _title_line(step_index: int) -> str:
    """The first line of the stepper's frame for a step (0-based), as Python's step_html renders it."""
    frame = step_html(bpe_trace(STEPPER_CORPUS, 12)[step_index], 8)
    title = frame[len("<div>"):frame.index("</div>")]
    p = _Text()
    p.feed(title)
    return " ".join("".join(p.parts).split())


# --- tests -------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_make_lab_serves_jupyterlab(lab_server):
    """The first command of the quick start: make lab serves /lab and prints the URL to open."""
    assert lab_server.status == 200, f"no HTTP 200 from /lab; make lab said:\n{lab_server.output[-3000:]}"
    assert "JupyterLab" in lab_server.body
    assert f"http://127.0.0.1:{lab_server.port}/lab" in lab_server.output, "make lab should print the URL to open"


def test_ci_has_chromium():
    """CI never skips the browser tests: there, Chromium must be found."""
    if not os.environ.get("CI"):
        pytest.skip("only checked under CI (CI set)")
    assert find_chromium(), "CI must run the browser tests, and no Chromium was found (see tests/browser.py)"


@pytest.mark.slow
def test_chapter03_merge_stepper_steps_in_jupyterlab(lab_server, browser, shots):
    """Run chapter 03, click next twice on the merge stepper: step 1 → 3, and bpe_trace's third merge shows."""
    with notebook(lab_server, browser, shots, CH03, "ch03") as nb:
        _no_errors(nb.run_all(), CH03)
        stepper = _widget_view(nb, "div.b2l-merge-stepper")
        assert stepper.count() == 1, f"one merge stepper expected in {CH03}, found {stepper.count()}"
        stepper.scroll_into_view_if_needed()
        pane = stepper.locator("div.b2l-pane")
        first_line = lambda: " ".join(pane.locator("div").first.inner_text().split())  # noqa: E731
        assert stepper.get_attribute("data-step") == "1"
        before = first_line()
        assert before == _title_line(0), "the stepper's first frame should be bpe_trace's step 1"
        nb.shot("stepper-step1", element=stepper)
        nxt = stepper.locator("button.b2l-next")
        for expected in ("2", "3"):
            nxt.click()
            _until(nb.page, "([el, n]) => el.dataset.step === n", [stepper.element_handle(), expected],
                   lambda n=expected: f"after a click on next, data-step is {stepper.get_attribute('data-step')!r}, "
                                      f"not {n!r}")
        after = first_line()
        assert stepper.get_attribute("data-step") == "3"
        assert after != before, f"the merged pair did not change: {after!r}"
        assert after.startswith("step 3: merge ") and after == _title_line(2), \
            f"step 3's frame should be bpe_trace's third merge: {after!r}, expected {_title_line(2)!r}"
        label = stepper.locator("span.b2l-step-label").inner_text()
        assert label.startswith("step 3 of "), label
        nb.shot("stepper-step3", element=stepper)
        nb.shot("stepper-step3-page", full_page=True)
        problems = _widget_problems(nb.console)
        assert not problems, f"console errors in JupyterLab with the stepper: {problems}"


@pytest.mark.slow
def test_chapter01_bytes_explorer_follows_typing_in_jupyterlab(lab_server, browser, shots):
    """Run chapter 01, type an emoji and an ñ into the bytes explorer: the ids shown are Python's UTF-8 bytes."""
    with notebook(lab_server, browser, shots, CH01, "ch01") as nb:
        _no_errors(nb.run_all(), CH01)
        explorer = _widget_view(nb, "div.b2l-utf8-explorer")
        assert explorer.count() == 1, f"one bytes explorer expected in {CH01}, found {explorer.count()}"
        explorer.scroll_into_view_if_needed()
        before = json.loads(explorer.get_attribute("data-ids"))
        nb.shot("explorer-initial", element=explorer)
        box = explorer.locator("input.b2l-text")
        box.fill("")
        box.press_sequentially(TYPED)
        # The kernel saw the typing: Python's unicodedata named the ñ typed in the browser (the first text has
        # no ñ). Read the view after that round trip, so that a kernel echo undoing some typing is caught.
        _until(nb.page, "([el, name]) => el.textContent.includes(name)", [explorer.element_handle(), NAME_OF_NEW],
               lambda: f"no Unicode name from the kernel for ñ; the table reads "
                       f"{explorer.locator('table').inner_text()!r}")
        assert box.input_value() == TYPED, f"the box reads {box.input_value()!r} after typing {TYPED!r}"
        expected = list(TYPED.encode("utf-8"))
        shown = json.loads(explorer.get_attribute("data-ids"))
        assert shown != before, "the ids did not change after typing"
        assert shown == expected, f"ids shown {shown}, Python's UTF-8 gives {expected}"
        rows = explorer.locator("table.b2l-utf8-table tr")
        assert rows.count() == 1 + len(TYPED), "one table row per code point (plus the header)"
        table_ids = [json.loads(t) for t in explorer.locator("td.b2l-ids").all_inner_texts()]
        assert sum(table_ids, []) == expected, f"the table's ids {table_ids} should be the UTF-8 bytes"
        summary = explorer.locator(".b2l-summary").inner_text()
        assert summary == f"{len(TYPED)} code point(s) → {len(expected)} byte id(s)", summary
        nb.shot("explorer-typed", element=explorer)
        nb.shot("explorer-typed-page", full_page=True)
        problems = _widget_problems(nb.console)
        assert not problems, f"console errors in JupyterLab with the bytes explorer: {problems}"


def _first_autograder_cell(path: Path) -> int:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for i, cell in enumerate(cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "code" and meta.get("grade") and not meta.get("solution"):
            return i
    raise AssertionError(f"{path} has no autograder cell")


@pytest.mark.slow
def test_lab01_release_stops_at_its_first_check_and_the_solution_passes(lab_server, browser, shots):
    """Lab 01's release, run down to its first autograder cell, fails there; its solution passes every check."""
    target = _first_autograder_cell(ROOT / RELEASE)
    with notebook(lab_server, browser, shots, RELEASE, "lab01-release") as nb:
        state = nb.run_down_to(target)
        ran = {c["index"]: c for c in state["cells"]}
        assert ran[target]["count"] is not None, f"the first autograder cell (cell {target}) did not run"
        earlier = [c for i, c in ran.items() if i < target]
        assert all(c["count"] is not None and not c["errors"] for c in earlier), \
            f"the cells above the first check should run cleanly: {earlier}"
        assert any(e.startswith("NotImplementedError") for e in ran[target]["errors"]), \
            f"a blank release's first check should fail on the unwritten stub: {ran[target]}"
        later = [c["index"] for c in state["cells"] if c["index"] > target and c["count"] is not None]
        assert not later, f"cells below the first check ran: {later}"
        cell = nb.page.locator(".jp-Notebook .jp-Cell").nth(target)
        cell.scroll_into_view_if_needed()
        text = cell.locator(".jp-OutputArea").inner_text()
        assert "NotImplementedError" in text, f"the failure is not shown under the cell:\n{text[-1500:]}"
        assert "not written yet" in text, f"the stub's failure should say it in words:\n{text[-1500:]}"
        assert "visible checks passed" not in text
        nb.shot("first-check-fails", element=cell)
        nb.shot("first-check-fails-page")
    with notebook(lab_server, browser, shots, SOLUTION, "lab01-solution") as nb:
        _no_errors(nb.run_all(), SOLUTION)
        graded = nb.page.locator(".jp-Notebook .jp-Cell").nth(target)
        graded.scroll_into_view_if_needed()
        assert "visible checks passed" in graded.locator(".jp-OutputArea").inner_text()
        passed = nb.page.locator(".jp-OutputArea-output", has_text="visible checks passed")
        checks = [i for i, c in enumerate(json.loads((ROOT / SOLUTION).read_text(encoding="utf-8"))["cells"])
                  if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
        assert passed.count() == len(checks), f"every autograder cell should print it ({len(checks)} cells)"
        nb.shot("checks-pass", element=graded)
        nb.shot("checks-pass-page", full_page=True)
