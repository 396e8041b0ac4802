"""A check service for a class: learners send a notebook, the trusted grader returns the score and teaching lines.

A fetched assignment holds neither ``solutions/`` nor ``tests/hidden``, so a class cannot run the local
``make check``. The instructor runs this service instead, next to the course root::

    python -m bytes2logits check-service --port 10101 --root COURSE --tokens tokens.txt   # on loopback
    python -m bytes2logits check-service --root COURSE            # as a JupyterHub service (Hub's auth)

and a learner checks a notebook with ``python -m bytes2logits check NOTEBOOK --service URL`` (or
``$BYTES2LOGITS_CHECK_SERVICE``), which prints the same table as the local check.

``POST <prefix>check`` (``<prefix>`` is ``$JUPYTERHUB_SERVICE_PREFIX`` under JupyterHub, else ``/``) takes the
notebook's JSON as its body (``?lab=`` names the lab outright) and answers with
``{lab, student, score, max_score, tasks: [{task, score, points, passed, total, lines}]}``. Errors are JSON
``{"error": sentence}`` with 400 (bad input), 401 (no or unknown token), 403 (not allowed), 413 (too
large), 429 (rate limit, with ``Retry-After``), 503 (busy or the Hub unreachable) or 504 (grader time limit).

What the service guarantees:

* **The grader never runs here.** Each check is graded by a fresh ``python -m bytes2logits.kit.trusted``
  process (which runs the notebook's code in its sandboxed worker), at most ``--workers`` at a time, killed
  with its process group at ``--grader-seconds``. Nothing of the service's environment that names the Hub
  (its API token) reaches that process.
* **No test code in a reply.** The reply holds the score and the grader's teaching lines; any line that
  quotes a hidden suite (a line of 30 or more characters of ``tests/hidden``) is withheld all the same.
* **Who asks is known.** Under JupyterHub a learner's ``Authorization: token $JUPYTERHUB_API_TOKEN`` is
  resolved by the Hub (:class:`jupyterhub.services.auth.HubAuth`) and must carry the scope
  ``access:services!service=<name>``; without a Hub the service listens on loopback only and maps bearer
  tokens to students with a tokens file (``student token`` per line). ``--students`` restricts either to a
  roster.
* **Replies are data.** Every reply, errors and unknown paths included, is JSON with ``<``, ``>`` and ``&``
  escaped, sent with ``X-Content-Type-Options: nosniff`` and a Content-Security-Policy that lets a browser
  load or run nothing (:data:`REPLY_HEADERS`), so text a learner sent can never act as a page.
* **Rate-limited and logged.** Each student gets ``--per-minute`` checks in any 60 s (a sliding window);
  every request is one JSON line in ``--log`` (time, student, lab, score, seconds, outcome).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .grading import hidden_needles as grading_needles
from .labs import LABS, Lab, course_root, find_lab, tool_env

__all__ = ["CheckService", "RateLimiter", "ServiceError", "TokenFile", "check_remote", "hidden_needles",
           "main", "make_app", "read_roster", "service_url"]

MAX_BYTES = 5 * 1024 * 1024  # a lab notebook with outputs is well under 1 MB
WINDOW_SECONDS = 60.0
ENV_URL = "BYTES2LOGITS_CHECK_SERVICE"
ENV_TOKEN = "BYTES2LOGITS_CHECK_TOKEN"


class ServiceError(Exception):
    """A check the service refused or could not do: ``status`` (HTTP) and a sentence for the learner."""

    def __init__(self, status: int, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after
        self.student: str | None = None  # who asked, when known (for the log)


# ------------------------------------------------------------------------------------------------ pieces

class RateLimiter:
    """At most ``per_window`` events per key in any ``window`` seconds (a sliding window of timestamps)."""

    def __init__(self, per_window: int, window: float = WINDOW_SECONDS, clock=time.monotonic):
        if per_window < 1:
            raise ValueError("the rate limit must allow at least one check per window")
        self.per_window, self.window, self.clock = per_window, window, clock
        self._seen: dict[str, collections.deque] = {}

    def take(self, key: str) -> float | None:
        """Record an event for ``key`` and return None, or return the seconds until one is allowed."""
        now = self.clock()
        seen = self._seen.setdefault(key, collections.deque())
        while seen and seen[0] <= now - self.window:
            seen.popleft()
        if len(seen) >= self.per_window:
            return max(seen[0] + self.window - now, 0.001)
        seen.append(now)
        return None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


class TokenFile:
    """Bearer tokens of the students, from a file of ``student token`` lines (``#`` comments), re-read on change.

    Tokens are kept as SHA-256 digests; a malformed file is an error that names the line.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._stamp: tuple | None = None
        self._students: dict[str, str] = {}
        self.load()

    def load(self) -> None:
        try:
            st = self.path.stat()
            text = self.path.read_text(encoding="utf-8")
        except OSError as e:
            raise ValueError(f"cannot read the tokens file {self.path}: {e.strerror or e}") from None
        students: dict[str, str] = {}
        for n, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2:
                raise ValueError(f"{self.path}, line {n}: expected 'student token', got {len(parts)} fields")
            student, token = parts
            if len(token) < 16:
                raise ValueError(f"{self.path}, line {n}: the token of {student} is shorter than 16 characters")
            if _digest(token) in students:
                raise ValueError(f"{self.path}, line {n}: the token of {student} is already someone else's")
            students[_digest(token)] = student
        self._students, self._stamp = students, (st.st_mtime_ns, st.st_size)

    def student(self, token: str) -> str | None:
        """The student whose token this is, or None."""
        try:
            st = self.path.stat()
            if (st.st_mtime_ns, st.st_size) != self._stamp:
                self.load()
        except (OSError, ValueError):
            pass  # keep the tokens last read: a half-written file must not lock the class out
        return self._students.get(_digest(token))


def read_roster(path: Path) -> set[str]:
    """Student ids, one per line (the first field; ``#`` comments and an ``id`` header line are skipped)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ValueError(f"cannot read the roster {path}: {e.strerror or e}") from None
    names = {ln.split("#", 1)[0].replace(",", " ").split()[0] for ln in lines if ln.split("#", 1)[0].strip()}
    return names - {"id"}


def hidden_needles(hidden: Path) -> set[str]:
    """Lines of the hidden suites that must never appear in a reply: the feedback pages' rule
    (:func:`bytes2logits.kit.grading.hidden_needles`) over every file of the suites, helpers included."""
    return grading_needles(hidden, "*.py")


@dataclass
class Check:
    """One graded check, as the service replies to it."""

    lab: str
    student: str
    tasks: list[dict]

    def reply(self) -> dict:
        return {"lab": self.lab, "student": self.student,
                "score": sum(t["score"] for t in self.tasks), "max_score": sum(t["points"] for t in self.tasks),
                "tasks": self.tasks}


# ------------------------------------------------------------------------------------------------ service

class CheckService:
    """The state of the service: course, authentication, rate limit, grader pool and log."""

    def __init__(self, root: Path, *, tokens: TokenFile | None = None, hub_auth=None, roster: set[str] | None = None,
                 per_minute: int = 6, workers: int = 1, grader_seconds: float = 180.0,
                 call_seconds: float | None = 10.0, max_bytes: int = MAX_BYTES, log_path: Path | None = None,
                 hidden: Path | None = None, queue: int = 32):
        if (tokens is None) == (hub_auth is None):
            raise ValueError("the service authenticates either with a tokens file or with the Hub")
        self.root = Path(root).resolve()
        env_hidden = os.environ.get("BYTES2LOGITS_HIDDEN_TESTS")
        self.hidden = Path(hidden or env_hidden or self.root / "tests" / "hidden").resolve()
        self.labs = {name: lab for name, lab in LABS.items()
                     if lab.source_notebook(self.root).is_file() and (self.hidden / name).is_dir()}
        if not self.labs:
            raise ValueError(f"{self.root} grades no lab: no solutions/<lab>/<lab>.ipynb with its suite in "
                             f"{self.hidden}/<lab>/")
        self.tokens, self.hub_auth, self.roster = tokens, hub_auth, roster
        self.limiter = RateLimiter(per_minute)
        self.workers = max(1, workers)
        self._slots = asyncio.Semaphore(self.workers)
        self.waiting, self.queue = 0, queue
        self.grader_seconds, self.call_seconds, self.max_bytes = grader_seconds, call_seconds, max_bytes
        self.log_path = Path(log_path or self.root / "build" / "check-service" / "checks.jsonl")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.needles = hidden_needles(self.hidden)

    # ---- who asks

    async def student_for(self, authorization: str) -> str:
        """The student a request's ``Authorization`` header names, or :class:`ServiceError` 401/403/503."""
        parts = (authorization or "").split(None, 1)
        if len(parts) != 2 or parts[0].lower() not in ("token", "bearer") or not parts[1].strip():
            raise ServiceError(401, "no token: send 'Authorization: token YOUR_TOKEN' (under JupyterHub, "
                                    "$JUPYTERHUB_API_TOKEN; otherwise the token your instructor gave you)")
        token = parts[1].strip()
        if self.tokens is not None:
            student = self.tokens.student(token)
            if student is None:
                raise ServiceError(401, "this token is not known to the check service; check the token your "
                                        "instructor gave you")
        else:
            student = await self._hub_student(token)
        if self.roster is not None and student not in self.roster:
            e = ServiceError(403, f"{student} is not on this class's roster; ask your instructor to add you")
            e.student = student
            raise e
        return student

    async def _hub_student(self, token: str) -> str:
        from jupyterhub.services.auth import check_scopes
        from tornado.web import HTTPError

        try:
            model = await self.hub_auth.user_for_token(token, sync=False)
        except HTTPError as e:
            raise ServiceError(503, f"cannot check your token with JupyterHub just now ({e.log_message or e}); "
                                    "try again in a minute") from None
        if not model:
            raise ServiceError(401, "JupyterHub does not know this token (expired, or not a JupyterHub token)")
        refusal = None
        if model.get("kind", "user") != "user":
            refusal = ServiceError(403, f"{model.get('name')} is a {model.get('kind')}, not a student")
        scopes = self.hub_auth.access_scopes
        if refusal is None and scopes and not check_scopes(scopes, set(model.get("scopes", []))):
            refusal = ServiceError(403, f"the token of {model['name']} may not use this service: it lacks the "
                                        f"scope {' or '.join(sorted(scopes))} (the instructor grants it in "
                                        "jupyterhub_config.py; see the instructor guide)")
        if refusal is not None:
            refusal.student = model.get("name")
            raise refusal
        return model["name"]

    # ---- what is asked

    def parse(self, body: bytes, lab_name: str | None) -> tuple[dict, Lab]:
        """The notebook and its lab from a request body, or :class:`ServiceError` 400 saying what is wrong."""
        try:
            nb = json.loads(body.decode("utf-8"))
        except UnicodeDecodeError:
            raise ServiceError(400, "the body is not UTF-8 text: send the notebook file (.ipynb) as it is") from None
        except ValueError as e:
            raise ServiceError(400, f"the body is not JSON ({e}): send the notebook file (.ipynb) as it is") from None
        if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
            raise ServiceError(400, "the body is JSON but not a notebook: it has no list of 'cells'")
        if nb.get("nbformat") != 4:
            raise ServiceError(400, f"not a version 4 notebook (nbformat is {nb.get('nbformat')!r}); save it "
                                    "with JupyterLab or Notebook 7")
        ids = set()
        for i, cell in enumerate(nb["cells"]):
            if not isinstance(cell, dict) or not isinstance(cell.get("metadata", {}), dict):
                raise ServiceError(400, f"not a notebook: cell {i} is not a cell object")
            gid = (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id") \
                if isinstance(cell.get("metadata", {}).get("nbgrader"), dict) else None
            if isinstance(gid, str):
                ids.add(gid.removeprefix("answer_"))
        hits = [lab for lab in LABS.values() if ids & {t.id for t in lab.tasks}]
        if len(hits) > 1:
            names = ", ".join(h.name for h in hits)
            raise ServiceError(400, f"the notebook holds graded cells of several labs ({names}); check one lab "
                                    "per notebook")
        found = hits[0] if hits else None
        lab = found
        if lab_name:
            try:
                lab = find_lab(lab_name)
            except KeyError as e:
                raise ServiceError(400, f"?lab={lab_name}: {e.args[0]}") from None
            if found is not None and found is not lab:
                raise ServiceError(400, f"the notebook holds the graded cells of {found.name}, not of {lab.name}")
        if lab is None:
            raise ServiceError(400, "none of the notebook's cells is a lab's graded cell: say which lab with "
                                    "?lab=lab01 (python -m bytes2logits check --lab lab01 ...)")
        if lab.name not in self.labs:
            raise ServiceError(400, f"{lab.name} is not a lab of this course (it grades: {', '.join(self.labs)})")
        return nb, lab

    # ---- grading

    def grader_env(self) -> dict:
        env = tool_env(BYTES2LOGITS_ROOT=str(self.root), BYTES2LOGITS_HIDDEN_TESTS=str(self.hidden))
        for key in list(env):
            # The service's own Hub token (and any other credential of the Hub) stays with the service.
            if key.startswith(("JUPYTERHUB_", "JPY_")) or key in (ENV_TOKEN,):
                del env[key]
        return env

    async def grade(self, nb: dict, lab: Lab, student: str) -> Check:
        """Grade ``nb`` in a fresh trusted-grader process, at most ``workers`` at once, within the time limit."""
        if self.waiting >= self.queue + self.workers:
            raise ServiceError(503, f"the check service is busy ({self.waiting} checks waiting); try again "
                                    "in a minute", retry_after=30)
        self.waiting += 1
        try:
            async with self._slots:
                return await self._grade(nb, lab, student)
        finally:
            self.waiting -= 1

    async def _grade(self, nb: dict, lab: Lab, student: str) -> Check:
        tmp = Path(tempfile.mkdtemp(prefix="b2l-check-"))
        try:
            clean = dict(nb)
            clean["cells"] = [{**c, "outputs": []} if c.get("cell_type") == "code" else c for c in nb["cells"]]
            src = tmp / f"{lab.name}.ipynb"
            src.write_text(json.dumps(clean), encoding="utf-8")
            out = tmp / "result.json"
            cmd = [sys.executable, "-m", "bytes2logits.kit.trusted", str(src), "--lab", lab.name, "--json", str(out)]
            if self.call_seconds:
                cmd += ["--call-seconds", str(self.call_seconds)]
            # The grader's own budget ends a little before the service's limit, so that a notebook that uses it
            # all still gets its scores and the line that says what was cut off.
            cmd += ["--seconds", str(max(5.0, 0.9 * self.grader_seconds - 5.0))]
            with open(tmp / "grader.log", "wb") as log:
                proc = await asyncio.create_subprocess_exec(
                    *cmd, cwd=tmp, env=self.grader_env(), stdin=asyncio.subprocess.DEVNULL, stdout=log,
                    stderr=asyncio.subprocess.STDOUT, start_new_session=True)
            try:
                code = await asyncio.wait_for(proc.wait(), self.grader_seconds)
            except TimeoutError:
                _kill_group(proc.pid)
                await proc.wait()
                raise ServiceError(504, f"grading took longer than {self.grader_seconds:g} s and was stopped; "
                                        "does a cell of yours loop or wait forever?") from None
            except asyncio.CancelledError:
                _kill_group(proc.pid)
                raise
            if code != 0:
                tail = (tmp / "grader.log").read_text(errors="replace").strip().splitlines()[-3:]
                # The tail goes to the instructor's log only: a traceback may quote a suite.
                print(f"check-service: the grader failed for {student} ({lab.name}), exit {code}: "
                      + " | ".join(tail), file=sys.stderr, flush=True)
                raise ServiceError(500, "the grader could not grade this notebook (the instructor's log says why)")
            results = json.loads(out.read_text(encoding="utf-8"))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        tasks = [{"task": r["task"], "score": float(r["score"]), "points": float(r["points"]),
                  "passed": int(r["passed"]), "total": int(r["total"]),
                  "lines": [self._safe(line) for line in r.get("lines", [])]} for r in results]
        return Check(lab.name, student, tasks)

    def _safe(self, line: str) -> str:
        if any(n in line for n in self.needles):
            return "(a line was withheld: it quoted a hidden suite)"
        return line

    # ---- log

    def log(self, **entry) -> None:
        """Append one JSON line for a request: time, student, lab, score, seconds, outcome and more."""
        record = {"time": datetime.now(UTC).isoformat(timespec="milliseconds"), **entry}
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ------------------------------------------------------------------------------------------------ HTTP

def make_app(service: CheckService, prefix: str = "/"):
    """The tornado application: ``GET <prefix>`` (which labs it grades) and ``POST <prefix>check``."""
    import tornado.web

    if not prefix.endswith("/"):
        prefix += "/"

    class Base(tornado.web.RequestHandler):
        def set_default_headers(self):
            for name, value in REPLY_HEADERS.items():
                self.set_header(name, value)

        def send(self, status: int, payload: dict, retry_after: float | None = None):
            self.set_status(status)
            if retry_after is not None:
                self.set_header("Retry-After", str(max(1, math.ceil(retry_after))))
            self.finish(reply_json(payload))

        def write_error(self, status_code, **kwargs):
            self.finish(reply_json({"error": self._reason}))

    class NotFound(Base):
        def prepare(self):
            raise tornado.web.HTTPError(404)

    class Info(Base):
        def get(self):
            self.send(200, {"service": "bytes2logits check", "labs": sorted(service.labs),
                            "per_minute": service.limiter.per_window, "max_bytes": service.max_bytes})

    @tornado.web.stream_request_body
    class CheckHandler(Base):
        async def prepare(self):
            self.started = time.monotonic()
            self.student, self.chunks, self.size, self.done = None, [], 0, False
            hard = max(4 * service.max_bytes, service.max_bytes + (1 << 20))
            if self.request.method != "POST":
                return
            try:
                self.student = await service.student_for(self.request.headers.get("Authorization", ""))
            except ServiceError as e:
                self.student = e.student
                return self.refuse(e)
            declared = self.request.headers.get("Content-Length")
            if declared is not None and declared.isdigit() and int(declared) > hard:
                return self.refuse(self.too_large())
            self.request.connection.set_max_body_size(hard)

        def data_received(self, chunk: bytes):
            if self.done:
                return
            self.size += len(chunk)
            if self.size <= service.max_bytes:
                self.chunks.append(chunk)

        def too_large(self):
            return ServiceError(413, f"the notebook is larger than {service.max_bytes // (1 << 20)} MB: clear "
                                     "its outputs (Edit > Clear Outputs of All Cells) and save it")

        def refuse(self, e: ServiceError, lab: str | None = None):
            self.done = True
            service.log(student=self.student, lab=lab, score=None, max_score=None,
                        seconds=round(time.monotonic() - self.started, 3), outcome=_OUTCOMES.get(e.status, "error"),
                        status=e.status, error=e.message)
            self.send(e.status, {"error": e.message}, e.retry_after)

        async def post(self):
            if self.done:
                return
            lab = None
            try:
                if self.size > service.max_bytes:
                    raise self.too_large()
                nb, lab_obj = service.parse(b"".join(self.chunks), self.get_query_argument("lab", None))
                self.chunks = []
                lab = lab_obj.name
                wait = service.limiter.take(self.student)
                if wait is not None:
                    raise ServiceError(429, f"{service.limiter.per_window} checks a minute at most: try again in "
                                            f"{math.ceil(wait)} s", retry_after=wait)
                check = await service.grade(nb, lab_obj, self.student)
            except ServiceError as e:
                return self.refuse(e, lab)
            reply = check.reply()
            outcome = "full marks" if reply["score"] == reply["max_score"] else "graded"
            service.log(student=self.student, lab=lab, score=reply["score"], max_score=reply["max_score"],
                        seconds=round(time.monotonic() - self.started, 3), outcome=outcome, status=200)
            self.send(200, reply)

        def on_connection_close(self):
            self.done = True

    return tornado.web.Application([(prefix, Info), (prefix + "check", CheckHandler)], default_handler_class=NotFound)


#: Headers of every reply, errors and unknown paths included: JSON that is never sniffed as HTML, never framed,
#: and loads or runs nothing if a browser opens it. (Replies quote what a learner sent: a lab name, a message.)
REPLY_HEADERS = {
    "Content-Type": "application/json; charset=utf-8",
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
}


def reply_json(payload: dict) -> str:
    """``payload`` as JSON with ``<``, ``>`` and ``&`` written as ``\\u003c``-style escapes: the same data to
    any JSON reader, and no markup to anything that would read the body as HTML."""
    return json.dumps(payload).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_OUTCOMES = {400: "bad request", 401: "unauthorized", 403: "forbidden", 413: "too large", 429: "rate limited",
             500: "grader failed", 503: "busy", 504: "timeout"}


def _hub_env() -> bool:
    return bool(os.environ.get("JUPYTERHUB_API_TOKEN") and os.environ.get("JUPYTERHUB_API_URL")
                and os.environ.get("JUPYTERHUB_SERVICE_NAME"))


def main(argv: list[str]) -> int:
    """``python -m bytes2logits check-service``: run the service until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m bytes2logits check-service",
                                     description="Grade learners' notebooks over HTTP with the trusted grader.")
    parser.add_argument("--port", type=int, default=None,
                        help="port (default: the port of $JUPYTERHUB_SERVICE_URL under JupyterHub)")
    parser.add_argument("--ip", default=None, help="address to listen on (default 127.0.0.1, or the host of "
                        "$JUPYTERHUB_SERVICE_URL); without the Hub only a loopback address is allowed")
    parser.add_argument("--root", type=Path, default=None,
                        help="the course root (default: the course folder around this one, else this repository)")
    parser.add_argument("--tokens", type=Path, default=None,
                        help="tokens file, 'student token' per line (without JupyterHub; required then)")
    parser.add_argument("--students", type=Path, default=None, help="roster: only these students may check")
    parser.add_argument("--per-minute", type=int, default=6, help="checks per student in any 60 s (default 6)")
    parser.add_argument("--workers", type=int, default=1, help="graders at once (default 1)")
    parser.add_argument("--grader-seconds", type=float, default=180.0, help="time limit of one check (default 180)")
    parser.add_argument("--call-seconds", type=float, default=10.0,
                        help="time limit of one call into the learner's code (default 10)")
    parser.add_argument("--max-mb", type=float, default=MAX_BYTES / (1 << 20), help="largest notebook (default 5)")
    parser.add_argument("--log", type=Path, default=None,
                        help="JSON-lines log of every check (default: COURSE/build/check-service/checks.jsonl)")
    args = parser.parse_args(argv)

    hub = args.tokens is None and _hub_env()
    service_url = urllib.parse.urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", "")) if hub else None
    port = args.port or (service_url.port if service_url else None)
    ip = args.ip or (service_url.hostname if service_url and service_url.hostname else "127.0.0.1")
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/") if hub else "/"
    try:
        if port is None:
            raise ValueError("say which port to listen on (--port)")
        if not hub:
            if args.tokens is None:
                raise ValueError("without JupyterHub the service needs a tokens file (--tokens FILE, one "
                                 "'student token' per line)")
            if ip not in ("127.0.0.1", "::1", "localhost"):
                raise ValueError(f"without JupyterHub the service listens on loopback only, not on {ip}")
        tokens = TokenFile(args.tokens) if not hub else None
        hub_auth = None
        if hub:
            from jupyterhub.services.auth import HubAuth

            hub_auth = HubAuth(cache_max_age=60)
        roster = read_roster(args.students) if args.students else None
        root = course_root(args.root)
        service = CheckService(root, tokens=tokens, hub_auth=hub_auth, roster=roster, per_minute=args.per_minute,
                               workers=args.workers, grader_seconds=args.grader_seconds,
                               call_seconds=args.call_seconds or None, max_bytes=int(args.max_mb * (1 << 20)),
                               log_path=args.log)
    except (ValueError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return asyncio.run(_serve(service, ip, port, prefix, hub))


async def _serve(service: CheckService, ip: str, port: int, prefix: str, hub: bool) -> int:
    import tornado.httpserver

    app = make_app(service, prefix)
    server = tornado.httpserver.HTTPServer(app, max_body_size=max(4 * service.max_bytes, service.max_bytes + (1 << 20)))
    try:
        server.listen(port, address=ip)
    except OSError as e:
        print(f"error: cannot listen on {ip}:{port}: {e.strerror or e}", file=sys.stderr)
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    auth = "JupyterHub tokens" if hub else f"tokens from {service.tokens.path}"
    print(f"check service on http://{ip}:{port}{prefix}check ({auth}; {service.limiter.per_window} checks a "
          f"minute per student; labs: {', '.join(service.labs)}; log: {service.log_path})", flush=True)
    await stop.wait()
    server.stop()
    return 0


# ------------------------------------------------------------------------------------------------ the learner's side

def service_url(given: str | None = None) -> str | None:
    """The check URL: ``--service``, else ``$BYTES2LOGITS_CHECK_SERVICE`` (``.../check`` appended if missing)."""
    url = given or os.environ.get(ENV_URL) or None
    if not url:
        return None
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ServiceError(0, f"the check service address {url!r} is not an http:// or https:// URL")
    path = parsed.path or "/"
    if not path.rstrip("/").endswith("/check") and path.rstrip("/") != "/check":
        path = path.rstrip("/") + "/check"
    return urllib.parse.urlunparse(parsed._replace(path=path.rstrip("/"), query=""))


def check_remote(notebook: Path, lab: Lab | None, url: str, token: str | None = None,
                 timeout: float = 600.0) -> dict:
    """Send ``notebook`` to the check service at ``url``; return its reply, or :class:`ServiceError`."""
    token = token or os.environ.get(ENV_TOKEN) or os.environ.get("JUPYTERHUB_API_TOKEN")
    if not token:
        raise ServiceError(401, f"no token for the check service: pass --token, or set ${ENV_TOKEN} "
                                "(under JupyterHub, $JUPYTERHUB_API_TOKEN is used)")
    body = Path(notebook).read_bytes()
    full = url + (f"?lab={urllib.parse.quote(lab.name)}" if lab is not None else "")
    req = urllib.request.Request(full, data=body, method="POST",
                                 headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))
    except urllib.error.HTTPError as e:
        try:
            message = json.loads(e.read().decode("utf-8")).get("error") or e.reason
        except (ValueError, OSError, AttributeError):
            message = str(e.reason)
        retry = e.headers.get("Retry-After") if e.headers else None
        raise ServiceError(e.code, message, float(retry) if retry and retry.isdigit() else None) from None
    except (urllib.error.URLError, OSError) as e:
        why = getattr(e, "reason", e)
        raise ServiceError(0, f"cannot reach the check service at {url}: {why}") from None
    except ValueError:
        raise ServiceError(0, f"the check service at {url} did not answer with JSON") from None
