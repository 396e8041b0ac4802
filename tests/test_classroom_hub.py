"""A class on JupyterHub, end to end, with the real services on loopback.

The test starts JupyterHub 6.1.1 with ``deploy/jupyterhub/jupyterhub_config.py`` (its proxy from
``make hub-proxy``, the shared-password authenticator, the simple spawner with one home per user) and the
check service as a Hub-managed service, and nbgrader's exchange in a temporary folder. Then a class runs
lab 01 the way the instructor guide says:

* the instructor generates and releases lab 01 into the exchange (``nbgrader release_assignment``, in the
  course folder, with the two variables the Hub gives the instructor's server);
* three students log in through the Hub's login form, start their servers, and fetch the lab through their
  server's Assignments API; each writes answers into the fetched notebook through the Jupyter contents API:
  alice correct, bob partly wrong, mallory hostile (her tokenizer kills its parent process and reads the
  hidden suite);
* alice and mallory check their work on the check service from their own servers' environment (the token
  JupyterHub put there) before they submit; then all three submit;
* the instructor collects, grades (``python -m bytes2logits grade``) and releases feedback, and each student
  fetches their feedback through their server.

Each score is read from the gradebook and compared with what the trusted grader's own rules give (full marks,
the partial's points from lab 01's suite, the hostile task's points lost); no page a student receives holds
hidden-suite code. The Hub, its proxy, the servers and the service are stopped at the end, and no process
of theirs is left. Everything listens on 127.0.0.1 and every wait is bounded.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bytes2logits.kit.labs import LABS, repo_root, tool_env
from bytes2logits.kit.sampleclass import answer_cells, course_copy, hostile_byte_tokenizer

pytestmark = pytest.mark.slow
requests = pytest.importorskip("requests")

LAB = LABS["lab01_tokenizers"]
COURSE_ID = "b2l-test"
STUDENTS = ("alice", "bob", "mallory")
HUB_CONFIG = repo_root() / "deploy" / "jupyterhub" / "jupyterhub_config.py"
PROXY = repo_root() / "deploy" / "jupyterhub" / "node_modules" / ".bin" / "configurable-http-proxy"
HTTP_TIMEOUT = 60  # one request (a submit or a fetch copies files; a check grades)
START_TIMEOUT = 90  # the Hub, or one user's server
CELL_TIMEOUT = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _meta(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def _answers() -> dict[str, dict[str, str]]:
    """grade_id -> answer source, for each student."""
    good = answer_cells(LAB)
    old = 'decode("utf-8", errors="replace")'
    assert old in good["answer_byte_tokenizer"], "fixture text not found in the reference answer"
    partial = {**good, "answer_byte_tokenizer": good["answer_byte_tokenizer"].replace(
        old, 'decode("utf-8", errors="ignore")')}
    suite = repo_root() / "tests" / "hidden" / LAB.name / "test_byte_tokenizer.py"
    attack = (f"import os, signal\ntry:\n    print(open({str(suite)!r}).read())\nexcept OSError:\n    pass\n"
              "os.kill(os.getppid(), signal.SIGKILL)")
    hostile = {**good, "answer_byte_tokenizer": hostile_byte_tokenizer(attack)}
    return {"alice": good, "bob": partial, "mallory": hostile}


def _expected_scores() -> dict[str, tuple[float, float]]:
    """(low, high) bounds of each student's score from the lab's own points: exact where the rule is exact."""
    total = LAB.total_points
    byte_points = LAB.task("byte_tokenizer").points
    return {"alice": (total, total), "bob": (total - byte_points, total),
            "mallory": (total - byte_points, total - byte_points)}


class Hub:
    """A running JupyterHub of the test's own, and the HTTP calls a class makes through it."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.course = tmp / "course"
        self.exchange = tmp / "exchange"
        self.homes = tmp / "homes"
        self.state = tmp / "hub"
        self.log = tmp / "hub.log"
        self.password = secrets.token_urlsafe(12)
        self.admin_password = secrets.token_urlsafe(32)
        self.tokens: dict[str, str] = {}
        self.proc: subprocess.Popen | None = None

    # ---- the instructor's side of the machine
    def env(self, **extra: str) -> dict:
        return tool_env(B2L_EXCHANGE_ROOT=str(self.exchange), B2L_COURSE_ID=COURSE_ID,
                        BYTES2LOGITS_COURSE_ROOT=str(self.course), **extra)

    def instructor(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """A command in the instructor's terminal, in the course folder."""
        result = subprocess.run(list(args), cwd=self.course, env=self.env(BYTES2LOGITS_GRADING_EXAMPLES="20"),
                                capture_output=True, text=True, timeout=timeout)
        assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        return result

    def start(self) -> None:
        for d in (self.exchange, self.homes, self.state):
            d.mkdir(parents=True)
        self.exchange.chmod(0o777)  # nbgrader's exchange: writable by every user
        env = self.env(
            B2L_HUB_PASSWORD=self.password, B2L_HUB_ADMIN_PASSWORD=self.admin_password,
            B2L_HUB_INSTRUCTOR="instructor", B2L_HUB_STUDENTS=",".join(STUDENTS), B2L_HUB_IP="127.0.0.1",
            B2L_HUB_PORT=str(self.port), B2L_HUB_API_PORT=str(_free_port()),
            B2L_HUB_PROXY_API_PORT=str(_free_port()), B2L_HUB_STATE=str(self.state),
            B2L_HUB_SPAWNER="simple", B2L_HUB_HOMES=str(self.homes),
            B2L_CHECK_SERVICE_PORT=str(_free_port()), B2L_COURSE_ROOT=str(self.course))
        hub = Path(sys.executable).with_name("jupyterhub")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([str(hub), "-f", str(HUB_CONFIG)], cwd=self.state, env=env,
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.wait_for(lambda: requests.get(self.url + "/hub/api/", timeout=5).status_code == 200, "the Hub")
        self.wait_for(lambda: requests.get(self.url + "/services/b2l-check/", timeout=5).status_code == 200,
                      "the check service")

    def wait_for(self, ready, what: str, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                pytest.fail(f"JupyterHub exited with {self.proc.returncode} while waiting for {what}:\n"
                            + self.tail())
            try:
                if ready():
                    return
            except requests.RequestException:
                pass
            time.sleep(0.3)
        pytest.fail(f"{what} was not ready within {timeout} s:\n" + self.tail())

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)  # the Hub stops its servers, the service and the proxy
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)

    # ---- a user's side: the browser's login, then their token
    def login(self, user: str) -> str:
        """Log in through the Hub's form, as a browser does, and ask the Hub for an API token."""
        s = requests.Session()
        s.get(self.url + "/hub/login", timeout=HTTP_TIMEOUT)
        password = self.admin_password if user == "instructor" else self.password
        r = s.post(self.url + "/hub/login", data={"username": user, "password": password,
                                                  "_xsrf": s.cookies.get("_xsrf")},
                   allow_redirects=False, timeout=HTTP_TIMEOUT)
        assert r.status_code == 302, f"{user} could not log in: HTTP {r.status_code}"
        r = s.post(f"{self.url}/hub/api/users/{user}/tokens", json={"note": "test", "expires_in": 3600},
                   headers={"X-XSRFToken": s.cookies.get("_xsrf")}, timeout=HTTP_TIMEOUT)
        assert r.status_code == 201, r.text
        self.tokens[user] = r.json()["token"]
        return self.tokens[user]

    def call(self, user: str, method: str, path: str, **kw) -> requests.Response:
        headers = {"Authorization": f"token {self.tokens[user]}"}
        return requests.request(method, self.url + path, headers=headers, timeout=HTTP_TIMEOUT, **kw)

    def start_server(self, user: str) -> None:
        r = self.call(user, "POST", f"/hub/api/users/{user}/server")
        assert r.status_code in (201, 202), r.text

        def ready():
            return self.call(user, "GET", f"/hub/api/users/{user}").json()["servers"].get("", {}).get("ready")

        self.wait_for(ready, f"{user}'s server")

    def assignments(self, user: str, action: str) -> dict:
        """The Assignments tab's request: fetch, submit or fetch_feedback lab 01."""
        r = self.call(user, "POST", f"/user/{user}/assignments/{action}",
                      data={"course_id": COURSE_ID, "assignment_id": LAB.name})
        assert r.status_code == 200, f"{user} {action}: HTTP {r.status_code} {r.text[:500]}"
        reply = r.json()
        assert reply.get("success"), f"{user} {action}: {str(reply)[:2000]}\n{self.tail()}"
        return reply

    def server_env(self, user: str) -> dict:
        """The environment of ``user``'s single-user server: what a terminal in it has."""
        for p in psutil.process_iter(["cmdline"]):
            if "jupyterhub-singleuser" in " ".join(p.info["cmdline"] or []):
                try:
                    env = p.environ()
                except psutil.Error:
                    continue
                if env.get("JUPYTERHUB_USER") == user:
                    return env
        raise AssertionError(f"no single-user server of {user} is running")


def _leftovers(tmp: Path) -> list:
    left = []
    for p in psutil.process_iter(["cwd", "cmdline"]):
        try:
            in_tmp = (p.info["cwd"] and Path(p.info["cwd"]).is_relative_to(tmp)) or str(tmp) in " ".join(
                p.info["cmdline"] or [])
        except (ValueError, OSError):
            continue
        if in_tmp and p.pid != os.getpid():
            left.append((p.pid, p.info["cmdline"]))
    return left


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    if not PROXY.exists():
        message = f"JupyterHub's proxy is not installed ({PROXY}): run `make hub-proxy` (needs npm)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    tmp = tmp_path_factory.mktemp("classroom")
    hub = Hub(tmp)
    course_copy(hub.course, LAB)
    answers = _answers()
    record: dict = {"checks": {}, "feedback": {}}
    started = time.monotonic()
    try:
        hub.start()
        # The instructor releases lab 01.
        hub.login("instructor")
        hub.instructor(sys.executable, "-m", "nbgrader", "generate_assignment", LAB.name, "--force")
        hub.instructor(sys.executable, "-m", "nbgrader", "release_assignment", LAB.name, "--force")
        # Each student logs in, starts a server, fetches the lab and works in it.
        for user in STUDENTS:
            hub.login(user)
            hub.start_server(user)
            listed = hub.assignments(user, "fetch")
            record.setdefault("fetched", {})[user] = [a["assignment_id"] for a in listed["value"]]
            path = f"/user/{user}/api/contents/{LAB.name}/{LAB.name}.ipynb"
            r = hub.call(user, "GET", path)
            assert r.status_code == 200, f"{user} has no fetched notebook: {r.status_code} {r.text[:300]}"
            model = r.json()
            for cell in model["content"]["cells"]:
                gid = _meta(cell).get("grade_id")
                if gid in answers[user]:
                    cell["source"] = answers[user][gid]
            r = hub.call(user, "PUT", path, json={"type": "notebook", "format": "json",
                                                  "content": model["content"]})
            assert r.status_code == 200, r.text[:500]
        # Two of them check their work on the check service first, from their own server's environment.
        for user in ("alice", "mallory"):
            env = hub.server_env(user)
            notebook = Path(env["HOME"]) / LAB.name / f"{LAB.name}.ipynb"
            result = subprocess.run([sys.executable, "-m", "bytes2logits", "check", str(notebook)],
                                    env=env, cwd=env["HOME"], capture_output=True, text=True, timeout=300)
            record["checks"][user] = result
        for user in STUDENTS:
            hub.assignments(user, "submit")
        # The instructor collects, grades and releases feedback.
        record["collect"] = hub.instructor(sys.executable, "-m", "nbgrader", "collect", LAB.name)
        record["grade"] = hub.instructor(sys.executable, "-m", "bytes2logits", "grade", "--root", str(hub.course),
                                         "--timeout", str(CELL_TIMEOUT), timeout=900)
        record["release_feedback"] = hub.instructor(sys.executable, "-m", "nbgrader", "release_feedback", LAB.name)
        for user in STUDENTS:
            hub.assignments(user, "fetch_feedback")
            home = Path(hub.server_env(user)["HOME"])
            record["feedback"][user] = sorted((home / LAB.name / "feedback").rglob("*.html"))
        record["service_log"] = hub.course / "build" / "check-service" / "checks.jsonl"
    finally:
        hub.stop()
        record["hub_log"] = hub.tail(200) if hub.log.exists() else ""
    record["seconds"] = time.monotonic() - started
    print(f"\na class of {len(STUDENTS)} on JupyterHub, release to feedback, in {record['seconds']:.0f} s")
    deadline = time.monotonic() + 20
    while _leftovers(tmp) and time.monotonic() < deadline:
        time.sleep(0.5)
    record["leftovers"] = _leftovers(tmp)
    for pid, _ in record["leftovers"]:  # do not leave them to the rest of the suite
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return hub, record


def _scores(hub: Hub) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(hub.course / "gradebook.db"), COURSE_ID) as gb:
        return {s.student.id: s.score for s in gb.find_assignment(LAB.name).submissions}


def test_every_student_fetched_the_released_lab(classroom):
    _, record = classroom
    assert record["fetched"] == {user: [LAB.name] for user in STUDENTS}


def test_collect_took_each_submission_from_the_exchange(classroom):
    hub, _ = classroom
    for user in STUDENTS:
        folder = hub.course / "submitted" / user / LAB.name
        assert (folder / f"{LAB.name}.ipynb").is_file(), f"{user}'s work was not collected"
        assert (folder / "timestamp.txt").is_file() and (folder / "submission_secret.txt").is_file()


def test_scores_in_the_gradebook_follow_the_grader_rules(classroom):
    hub, record = classroom
    scores = _scores(hub)
    assert set(scores) == set(STUDENTS), (scores, record["grade"].stdout[-2000:])
    for user, (low, high) in _expected_scores().items():
        assert low <= scores[user] <= high, (user, scores, record["grade"].stdout[-2000:])
    assert scores["bob"] < LAB.total_points, "bob's decode drops invalid bytes: the suite must see it"
    assert "NOT GRADED" not in record["grade"].stdout


def test_each_student_fetched_their_own_feedback_without_hidden_code(classroom):
    from bytes2logits.kit.grading import hidden_needles

    hub, record = classroom
    needles = hidden_needles(hub.course / "tests" / "hidden")
    for user in STUDENTS:
        pages = record["feedback"][user]
        assert len(pages) == 1, (user, pages, record["release_feedback"].stderr[-2000:])
        text = pages[0].read_text(errors="replace")
        assert not [n for n in needles if n in text], f"{user}'s feedback holds hidden-suite code"
        graded = (hub.course / "feedback" / user / LAB.name / f"{LAB.name}.html").read_text(errors="replace")
        assert text == graded, f"{user} received a page that is not their own"


def test_the_check_service_graded_from_the_students_servers(classroom):
    hub, record = classroom
    total = LAB.total_points
    alice, mallory = record["checks"]["alice"], record["checks"]["mallory"]
    assert alice.returncode == 0, alice.stdout[-2000:] + alice.stderr[-2000:]
    assert "graded by the check service as alice" in alice.stdout
    assert mallory.returncode == 1, mallory.stdout[-2000:] + mallory.stderr[-2000:]
    assert "graded by the check service as mallory" in mallory.stdout
    entries = [json.loads(line) for line in record["service_log"].read_text().splitlines()]
    checks = {e["student"]: e for e in entries if e.get("lab") == LAB.name}
    assert checks["alice"]["score"] == total and checks["alice"]["outcome"] == "full marks"
    low, high = _expected_scores()["mallory"]
    assert low <= checks["mallory"]["score"] <= high
    from bytes2logits.kit.grading import hidden_needles

    needles = hidden_needles(hub.course / "tests" / "hidden")
    for out in (alice.stdout, mallory.stdout):
        assert not [n for n in needles if n in out], "a check's reply holds hidden-suite code"


def test_the_hub_and_everything_it_started_are_gone(classroom):
    hub, record = classroom
    assert hub.proc.poll() is not None
    assert record["leftovers"] == [], record["leftovers"]
