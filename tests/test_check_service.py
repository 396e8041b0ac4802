"""The check service for a class (``python -m bytes2logits check-service``), end to end on loopback.

One service runs for the module, in tokens-file mode on a free port of 127.0.0.1, with a roster and a rate
limit of two checks a minute. Every request the tests make is recorded, in order, so that the last test can
hold the service's log to it. (Under JupyterHub the same service authenticates with the Hub's tokens; the
classroom hub test drives that mode.)
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import nbformat
import pytest

from bytes2logits.kit.grading import hidden_needles
from bytes2logits.kit.labs import LABS, hidden_root, tool_env

pytestmark = pytest.mark.slow

LAB = LABS["lab01_tokenizers"]
OTHER = LABS["lab02_words"]
PER_MINUTE = 2
# Hypothesis examples per property, for the service and the local check alike (a class grades with 150).
EXAMPLES = "30"
TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789ab", "carol": "carol-token-0123456789",
          "dave": "dave-token-0123456789a", "mallory": "mallory-token-01234567"}
ROSTER = ["alice", "bob", "carol", "dave"]  # mallory has a token but is not in the class


def _meta(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def _answers_from_solution() -> dict[str, str]:
    sol = nbformat.read(LAB.source_notebook(), as_version=4)
    return {_meta(c)["grade_id"]: "# my answer\n_checked_by_me = True\n\n" + c.source
            for c in sol.cells if _meta(c).get("solution")}


def _notebook(answers: dict[str, str], lab=LAB) -> dict:
    nb = nbformat.read(lab.release_notebook(), as_version=4)
    for cell in nb.cells:
        if _meta(cell).get("grade_id") in answers:
            cell.source = answers[_meta(cell)["grade_id"]]
    return json.loads(nbformat.writes(nb))


def _hidden_needles() -> set[str]:
    """Lines of the hidden suites a reply must not hold (the rule feedback pages are checked with)."""
    return hidden_needles(hidden_root())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """The running service, and every request made to it: (student, status) in order."""

    def __init__(self, url: str, log, proc):
        self.url, self.log, self.proc = url, log, proc
        self.requests: list[tuple[str | None, int]] = []
        self.replies: list[dict] = []

    def post(self, body, student: str | None = None, token: str | None = None, lab: str | None = None,
             recorded: bool = True):
        """POST ``body`` (a notebook dict, or bytes) to ``/check``; (status, JSON reply, headers)."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        token = token or (TOKENS[student] if student else None)
        if token:
            headers["Authorization"] = f"token {token}"
        url = self.url + "check" + (f"?lab={lab}" if lab else "")
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                status, raw, hdrs = resp.status, resp.read(), resp.headers
        except urllib.error.HTTPError as e:
            status, raw, hdrs = e.code, e.read(), e.headers
        reply = json.loads(raw.decode())
        if recorded:
            self.requests.append((student, status))
            self.replies.append(reply)
        return status, reply, hdrs


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("check-service")
    tokens = tmp / "tokens.txt"
    tokens.write_text("# student token\n" + "".join(f"{s} {t}\n" for s, t in TOKENS.items()))
    roster = tmp / "roster.txt"
    roster.write_text("\n".join(ROSTER) + "\n")
    log = tmp / "checks.jsonl"
    port = _free_port()
    env = tool_env(BYTES2LOGITS_GRADING_EXAMPLES=EXAMPLES)
    for key in ("BYTES2LOGITS_CHECK_SERVICE", "JUPYTERHUB_API_TOKEN", "JUPYTERHUB_SERVICE_NAME"):
        env.pop(key, None)
    out = open(tmp / "service.out", "w")
    proc = subprocess.Popen([sys.executable, "-m", "bytes2logits", "check-service", "--port", str(port),
                             "--tokens", str(tokens), "--students", str(roster), "--per-minute", str(PER_MINUTE),
                             "--log", str(log)], env=env, stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                assert LAB.name in json.loads(resp.read())["labs"]
            break
        except (urllib.error.URLError, OSError):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError("the check service did not start: "
                                     + (tmp / "service.out").read_text()) from None
            time.sleep(0.2)
    try:
        yield Service(url, log, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        out.close()


def _table(stdout: str) -> list[str]:
    """The score table of a check's output, from its header line to the total."""
    lines = stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("task "))
    return lines[start:]


def test_correct_notebook_gets_full_marks_as_the_local_check_does(service, tmp_path):
    nb = _notebook(_answers_from_solution())
    status, reply, _ = service.post(nb, "alice")
    assert status == 200, reply
    assert reply["lab"] == LAB.name and reply["student"] == "alice"
    assert reply["max_score"] == LAB.total_points
    assert reply["score"] == reply["max_score"], reply
    assert [t["task"] for t in reply["tasks"]] == [t.id for t in LAB.tasks]
    assert set(reply["tasks"][0]) == {"task", "score", "points", "passed", "total", "lines"}

    path = tmp_path / "my_attempt.ipynb"
    path.write_text(json.dumps(nb))
    env = tool_env(BYTES2LOGITS_GRADING_EXAMPLES=EXAMPLES)
    env.pop("BYTES2LOGITS_CHECK_SERVICE", None)
    local = subprocess.run([sys.executable, "-m", "bytes2logits", "check", str(path)], env=env,
                           capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stdout + local.stderr
    got = re.search(r"^score: (\S+)/(\S+)$", local.stdout, re.M)
    assert float(got.group(1)) == reply["score"] and float(got.group(2)) == reply["max_score"]

    # The learner's side: `check --service` prints the same table as the local check.
    remote = subprocess.run([sys.executable, "-m", "bytes2logits", "check", str(path), "--service", service.url,
                             "--token", TOKENS["bob"]], env=env, capture_output=True, text=True, timeout=300)
    service.requests.append(("bob", 200 if remote.returncode == 0 else -1))
    assert remote.returncode == 0, remote.stdout + remote.stderr
    assert "graded by the check service as bob" in remote.stdout
    assert _table(remote.stdout) == _table(local.stdout)


def test_blank_notebook_scores_zero_with_teaching_lines(service):
    status, reply, _ = service.post(_notebook({}), "alice")
    assert status == 200, reply
    assert reply["score"] == 0 and reply["max_score"] == LAB.total_points
    for task in reply["tasks"]:
        assert task["score"] == 0 and task["passed"] == 0 and task["total"] > 0
        assert task["lines"] and all(line.startswith("x test_") for line in task["lines"])


def test_no_reply_holds_hidden_code(service):
    graded = [r for r in service.replies if "tasks" in r]
    assert len(graded) >= 2  # the correct and the blank notebook, graded above
    needles = _hidden_needles()
    assert len(needles) > 50
    for reply in graded:
        text = json.dumps(reply)
        assert not [n for n in needles if n in text or json.dumps(n)[1:-1] in text]
        assert "def test_" not in text


def test_a_wrong_or_missing_token_is_401(service):
    status, reply, _ = service.post(_notebook({}), token="not-a-token-of-this-class")
    assert status == 401 and "token" in reply["error"]
    status, reply, _ = service.post(_notebook({}))
    assert status == 401 and "Authorization" in reply["error"]


def test_a_student_not_on_the_roster_is_403(service):
    status, reply, _ = service.post(_notebook({}), "mallory")
    assert status == 403 and "mallory" in reply["error"] and "roster" in reply["error"]


BAD = [
    (b"this is not json", None, "not JSON"),
    (b"\xff\xfe\x00", None, "UTF-8"),
    (json.dumps([1, 2]).encode(), None, "not a notebook"),
    (json.dumps({"nbformat": 3, "cells": []}).encode(), None, "version 4"),
    (json.dumps({"nbformat": 4, "cells": [], "metadata": {}}).encode(), None, "?lab="),
    (json.dumps({"nbformat": 4, "cells": [], "metadata": {}}).encode(), "lab99", "no lab matches"),
    (json.dumps({"nbformat": 4, "cells": ["x"], "metadata": {}}).encode(), LAB.name, "cell 0"),
]


@pytest.mark.parametrize("body,lab,reason", BAD, ids=[r for _, _, r in BAD])
def test_bad_bodies_are_400_with_the_reason(service, body, lab, reason):
    status, reply, _ = service.post(body, "dave", lab=lab)
    assert status == 400 and reason in reply["error"], reply


def test_a_notebook_of_two_labs_or_of_another_lab_is_400(service):
    nb = _notebook({})
    mixed = dict(nb, cells=nb["cells"] + _notebook({}, OTHER)["cells"])
    status, reply, _ = service.post(mixed, "dave")
    assert status == 400 and "several labs" in reply["error"] and OTHER.name in reply["error"]
    status, reply, _ = service.post(nb, "dave", lab="lab02")
    assert status == 400 and f"not of {OTHER.name}" in reply["error"]


def test_a_body_over_the_size_cap_is_413(service):
    status, reply, _ = service.post(b" " * (6 * 1024 * 1024), "dave")
    assert status == 413 and "MB" in reply["error"]


def test_the_check_after_the_limit_within_a_minute_is_429(service):
    nb = _notebook(_answers_from_solution())  # a correct notebook grades fastest
    for _ in range(PER_MINUTE):
        status, reply, _ = service.post(nb, "carol")
        assert status == 200, reply
    status, reply, headers = service.post(nb, "carol")
    assert status == 429 and "a minute" in reply["error"]
    assert 1 <= int(headers["Retry-After"]) <= 60
    # Another student's checks are not counted against carol's, nor dave's refused bodies against his.
    status, _, _ = service.post(nb, "dave", lab=LAB.name)
    assert status == 200


def test_every_request_is_one_line_of_the_log(service):
    entries = [json.loads(line) for line in service.log.read_text().splitlines()]
    assert [(e["student"], e["status"]) for e in entries] == service.requests
    graded = iter(r for r in service.replies if "tasks" in r)
    for e in entries:
        assert set(e) >= {"time", "student", "lab", "score", "seconds", "outcome"}
        assert e["seconds"] >= 0
        if e["status"] == 200:
            assert e["lab"] == LAB.name and e["outcome"] in ("graded", "full marks")
            if e["student"] != "bob":  # bob's reply went to the learner's command, not to this test
                assert e["score"] == next(graded)["score"]
        else:
            assert e["score"] is None and e["error"]
    outcomes = {e["outcome"] for e in entries}
    assert {"full marks", "graded", "unauthorized", "forbidden", "bad request", "too large",
            "rate limited"} <= outcomes


# ------------------------------------------------------------------------------------------------ the pieces

def test_the_rate_limit_is_a_sliding_window():
    from bytes2logits.kit.checkservice import RateLimiter

    now = [100.0]
    limiter = RateLimiter(2, window=60, clock=lambda: now[0])
    assert limiter.take("a") is None
    now[0] = 130.0
    assert limiter.take("a") is None
    assert limiter.take("a") == pytest.approx(30.0)  # the first check leaves the window at 160
    assert limiter.take("b") is None
    now[0] = 160.5
    assert limiter.take("a") is None  # one slot free again, not two
    assert limiter.take("a") == pytest.approx(29.5)


def test_a_malformed_tokens_file_names_the_line(tmp_path):
    from bytes2logits.kit.checkservice import TokenFile

    path = tmp_path / "tokens.txt"
    path.write_text("alice alice-token-0123456789\nbob\n")
    with pytest.raises(ValueError, match="line 2"):
        TokenFile(path)
    path.write_text("alice alice-token-0123456789\nbob alice-token-0123456789\n")
    with pytest.raises(ValueError, match="line 2: the token of bob is already"):
        TokenFile(path)
    path.write_text("alice short\n")
    with pytest.raises(ValueError, match="shorter than 16"):
        TokenFile(path)
    path.write_text("alice alice-token-0123456789  # a comment\n")
    assert TokenFile(path).student("alice-token-0123456789") == "alice"
    assert TokenFile(path).student("alice-token-012345678") is None


def test_without_a_hub_the_service_refuses_to_leave_loopback(tmp_path, capsys, monkeypatch):
    from bytes2logits.kit.checkservice import main

    monkeypatch.delenv("JUPYTERHUB_API_TOKEN", raising=False)
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("alice alice-token-0123456789\n")
    assert main(["--port", "1", "--tokens", str(tokens), "--ip", "0.0.0.0"]) == 2
    assert "loopback only" in capsys.readouterr().err
    assert main(["--port", "1"]) == 2
    assert "--tokens" in capsys.readouterr().err


def test_a_line_quoting_a_hidden_suite_is_withheld(tmp_path):
    from bytes2logits.kit.checkservice import CheckService, TokenFile
    from bytes2logits.kit.labs import course_root

    tokens = tmp_path / "tokens.txt"
    tokens.write_text("alice alice-token-0123456789\n")
    service = CheckService(course_root(), tokens=TokenFile(tokens), log_path=tmp_path / "log.jsonl")
    quoted = sorted(n for n in _hidden_needles() if "(" in n)[0]
    assert "withheld" in service._safe(f"x test_something: {quoted}")
    assert service._safe("x test_something: a teaching line") == "x test_something: a teaching line"
