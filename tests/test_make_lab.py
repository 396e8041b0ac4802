"""`make lab` starts JupyterLab headless and serves /lab (the first command of the quick start)."""

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_make_lab_serves_jupyterlab():
    port, token = _free_port(), "b2l-test-token"
    args = f"--no-browser --port={port} --ServerApp.ip=127.0.0.1 --IdentityProvider.token={token}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    proc = subprocess.Popen(["make", "--no-print-directory", "lab", f"LAB_ARGS={args}"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    status, body = None, ""
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=5) as r:
                    status, body = r.status, r.read().decode("utf-8", "replace")
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(1)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
    assert status == 200, f"no HTTP 200 from /lab; make lab said:\n{out[-3000:]}"
    assert "JupyterLab" in body
    assert f"http://127.0.0.1:{port}/lab" in out, "make lab should print the URL to open"
