"""Shared set-up of the browser tests (JupyterLab and the course site): find Chromium, launch it, keep
screenshots.

Playwright cannot download a browser here, so the tests drive an installed Chromium: ``B2L_CHROMIUM`` if
set, else ``chromium`` / ``chromium-browser`` / ``google-chrome`` on PATH (``make test`` installs Debian's
``chromium`` where it can). Without one the browser tests are skipped with a line that says how to enable
them, except under CI (``CI`` set), where a missing browser is a failure: CI never skips them.

Tests take the module-scoped ``browser`` fixture of ``tests/conftest.py`` (built on :func:`running_chromium`),
and import the rest like this (the tests folder is not on ``sys.path``)::

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from browser import artifact_dir
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Screenshots and page dumps of the browser tests (git-ignored; CI keeps the folder as its artefact).
ARTIFACTS = ROOT / "build" / "test-artifacts" / "browser"

ENABLE_HINT = ("install Chromium to run them (Debian/Ubuntu: sudo apt-get install chromium; `make test` does it "
               "as root), or set B2L_CHROMIUM=/path/to/chrome")

# Chromium on this network: no sandbox as root, no GPU, and no background calls to Google's hosts (they are
# refused here, many at a time, and slow the start).
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage"]


def find_chromium() -> str | None:
    """The Chromium executable the browser tests use, or None."""
    env = os.environ.get("B2L_CHROMIUM")
    if env:
        return env if Path(env).is_file() and os.access(env, os.X_OK) else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def chromium_or_skip() -> str:
    """Chromium's path; skips the calling test without one, and fails instead when ``CI`` is set."""
    import pytest

    path = find_chromium()
    if path:
        return path
    if os.environ.get("CI"):
        pytest.fail(f"CI runs the browser tests and no Chromium was found: {ENABLE_HINT}")
    pytest.skip(f"browser tests skipped, no Chromium: {ENABLE_HINT}")


def launch(playwright, executable: str):
    """A headless Chromium from ``executable`` with this machine's flags."""
    return playwright.chromium.launch(executable_path=executable, headless=True, args=LAUNCH_ARGS)


@contextlib.contextmanager
def running_chromium():
    """A headless Chromium for a block (skips without one, fails under CI): ``with running_chromium() as b``."""
    executable = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p, executable)
        try:
            yield browser
        finally:
            browser.close()


def artifact_dir(name: str) -> Path:
    """A fresh folder for one test's screenshots, ``build/test-artifacts/browser/<name>``."""
    out = ARTIFACTS / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    return out
