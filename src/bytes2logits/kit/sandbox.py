"""Where a submission's code runs: a bubblewrap sandbox with resource limits, or a loud fallback.

With ``bwrap`` (Debian package ``bubblewrap``) a worker gets new user, pid, network, IPC and UTS
namespaces, so it can neither see nor signal the grader (its pids are not there), nor reach any network
(it has only its own empty loopback). Its filesystem is built from nothing: read-only binds of the system
libraries, the Python installation, the virtual environment, the course package and the asset cache,
plus one writable scratch folder. The hidden suites, ``solutions/``, the gradebook and other students'
folders are simply not in its view. It dies with its parent and runs in a session of its own.

Limits apply either way (``setrlimit`` before ``exec``): CPU seconds, address space, open files, file
size, no core files; and, where the machine's cgroups can be written (root, as on CI), a cap on the
number of processes and on memory for the sandbox as a whole, so that a fork bomb stops at the cap.
(``RLIMIT_NPROC`` does not bind root, so it is set only for other users.)

Without bwrap (macOS, a host that forbids user namespaces) a worker runs in a new session with the same
rlimits, and :func:`describe` says loudly what is lost: the worker can then read what your user can read,
use the network, and signal your processes. ``BYTES2LOGITS_SANDBOX=bwrap`` makes a missing bwrap an
error instead (CI sets ``CI``, which does the same).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Limits", "SandboxError", "Sandboxed", "bwrap_path", "describe", "launch", "mode"]

GIB = 1024 ** 3


class SandboxError(RuntimeError):
    """The sandbox was required but cannot be set up here (the message says what is missing)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one worker (and, with cgroups, of its whole sandbox)."""

    cpu_seconds: int = 900
    address_space: int = 6 * GIB
    open_files: int = 256
    processes: int = 64
    file_size: int = 256 * 1024 * 1024
    memory: int = 4 * GIB


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


_checked: dict[str, bool] = {}


def _bwrap_works(path: str) -> bool:
    """bwrap may be installed and still refused user namespaces (a locked-down host): try it once."""
    if path not in _checked:
        try:
            r = subprocess.run([path, "--unshare-user", "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/",
                                "--proc", "/proc", "--dev", "/dev", "true"], capture_output=True, timeout=30)
            _checked[path] = r.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _checked[path] = False
    return _checked[path]


def _required() -> bool:
    return os.environ.get("BYTES2LOGITS_SANDBOX") == "bwrap" or bool(os.environ.get("CI"))


def mode() -> str:
    """``"bwrap"`` when workers get the full sandbox here, ``"fallback"`` otherwise."""
    wanted = os.environ.get("BYTES2LOGITS_SANDBOX", "auto")
    if wanted == "none":
        if _required() and os.environ.get("CI"):
            raise SandboxError("CI must grade with bwrap; BYTES2LOGITS_SANDBOX=none is refused there")
        return "fallback"
    path = bwrap_path()
    if path and _bwrap_works(path):
        return "bwrap"
    if _required():
        why = "is not installed" if not path else "cannot create user namespaces here"
        raise SandboxError(f"bubblewrap (bwrap) {why}, and grading here requires it. Install it with "
                           "`apt-get install bubblewrap` (make setup does this as root).")
    return "fallback"


_WARNED = False

FALLBACK_WARNING = (
    "WARNING: bubblewrap (bwrap) is not available, so submissions are graded with REDUCED ISOLATION: the "
    "worker runs in its own session with CPU, memory, file and output limits, but it can read what your "
    "user can read (including the hidden suites), use the network, and signal your processes. The grader "
    "still never runs submission code in its own process. Install bubblewrap (apt-get install bubblewrap) "
    "for the full sandbox.")


def describe() -> str:
    """One line for logs and reports: how workers are isolated on this machine."""
    if mode() == "bwrap":
        cg = "with cgroup caps on processes and memory" if _cgroup_root("pids") else "with rlimits"
        return f"bwrap sandbox (user, pid, network, IPC namespaces; read-only system; {cg})"
    return "fallback: new session + rlimits only (no bwrap)"


def warn_if_reduced() -> None:
    global _WARNED
    if mode() != "bwrap" and not _WARNED:
        _WARNED = True
        print(FALLBACK_WARNING, file=sys.stderr, flush=True)
        warnings.warn(FALLBACK_WARNING, RuntimeWarning, stacklevel=2)


# ------------------------------------------------------------------------------------------------ cgroups

def _cgroup_root(controller: str) -> Path | None:
    if os.geteuid() != 0:
        return None
    base = Path("/sys/fs/cgroup") / controller
    if not (base / "cgroup.procs").is_file():
        return None
    root = base / "bytes2logits"
    try:
        root.mkdir(exist_ok=True)
    except OSError:
        return None
    return root if os.access(root, os.W_OK) else None


class _Cgroups:
    """A pids (and, if possible, memory) cgroup for one sandbox; removed when the sandbox ends."""

    @classmethod
    def none(cls) -> _Cgroups:
        self = cls.__new__(cls)
        self.dirs = []
        return self

    def __init__(self, limits: Limits, owner: int | None = None):
        self.dirs: list[Path] = []
        # The owner's pid leads the name: another sandbox's clean-up removes an empty cgroup only once its
        # owner is gone, never one that a sandbox still starting has made and not yet joined.
        name = f"{owner or os.getpid()}-{uuid.uuid4().hex[:12]}"
        for controller, files in (("pids", {"pids.max": str(limits.processes)}),
                                  ("memory", {"memory.limit_in_bytes": str(limits.memory)})):
            root = _cgroup_root(controller)
            if root is None:
                continue
            d = root / name
            try:
                d.mkdir()
                for f, v in files.items():
                    (d / f).write_text(v)
            except OSError:
                with _suppress():
                    d.rmdir()
                continue
            self.dirs.append(d)

    def join(self) -> None:
        """Called in the child before exec: put this process (and so all it forks) in the cgroups."""
        for d in self.dirs:
            with _suppress():
                (d / "cgroup.procs").write_text(str(os.getpid()))

    def kill_all(self) -> None:
        for d in self.dirs:
            with _suppress():
                for pid in (d / "cgroup.procs").read_text().split():
                    with _suppress():
                        os.kill(int(pid), 9)

    def remove(self) -> None:
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except OSError:
                    self.kill_all()
                    import time

                    time.sleep(0.02)


class _suppress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return exc[0] is not None and issubclass(exc[0], (OSError, ValueError))


# ------------------------------------------------------------------------------------------------ launch

def _readable_paths() -> list[Path]:
    """What a worker must be able to read: the interpreter, the venv, the package, the asset cache."""
    import bytes2logits

    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(),
             Path(bytes2logits.__file__).resolve().parent.parent}
    exe = Path(sys.executable).resolve()
    paths.add(exe.parent.parent)
    from .. import assets

    cache = assets.cache_dir()
    if cache.is_dir():
        paths.add(cache.resolve())
    out = []
    for p in sorted(paths, key=lambda p: len(p.parts)):
        if not any(p == q or q in p.parents for q in out):
            out.append(p)
    return out


_SYSTEM = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin"]
_ETC = ["/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives",
        "/etc/fonts", "/etc/mime.types", "/etc/matplotlibrc"]


class Sandboxed:
    """A running sandboxed process: ``proc`` (the Popen of bwrap or of the fallback), its limits, cleanup."""

    def __init__(self, proc: subprocess.Popen, cgroups: _Cgroups, info_fd: int | None, isolation: str):
        self.proc, self._cgroups, self._info_fd, self.isolation = proc, cgroups, info_fd, isolation
        self._pid: int | None = None if info_fd is not None else proc.pid
        # inner_pid and kill may run on different threads: the info pipe is closed exactly once, under
        # this lock (closing a descriptor twice can close whatever file was given its number in between).
        self._lock = threading.Lock()

    def _close_info(self) -> None:
        if self._info_fd is not None:
            with _suppress():
                os.close(self._info_fd)
            self._info_fd = None

    def inner_pid(self) -> int | None:
        """The outer pid of the sandboxed program itself (for reading its memory from /proc)."""
        with self._lock:
            if self._pid is None and self._info_fd is not None:
                try:
                    raw = os.read(self._info_fd, 4096)
                    child = int(json.loads(raw)["child-pid"])
                    kids = Path(f"/proc/{child}/task/{child}/children").read_text().split()
                    self._pid = int(kids[0]) if kids else child
                except (OSError, ValueError, KeyError, IndexError):
                    self._pid = None
                finally:
                    self._close_info()
            return self._pid

    def kill(self) -> None:
        with _suppress():
            if self.isolation == "fallback":
                os.killpg(self.proc.pid, 9)
            else:
                self.proc.kill()
        self._cgroups.kill_all()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a kill that did not take
            pass
        self._cgroups.remove()
        with self._lock:
            self._close_info()


def _bwrap_args(scratch: Path, writable: tuple[Path, ...] = (), info_fd: int | None = None) -> list[str]:
    """bwrap's command line up to ``--``: namespaces, a read-only system, ``scratch`` writable and the cwd."""
    cmd = [bwrap_path(), "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
           "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    if info_fd is not None:
        cmd += ["--info-fd", str(info_fd)]
    for p in _SYSTEM:
        if os.path.islink(p):
            cmd += ["--symlink", os.readlink(p), p]
        elif os.path.isdir(p):
            cmd += ["--ro-bind", p, p]
    for p in _ETC:
        if os.path.exists(p):
            cmd += ["--ro-bind", p, p]
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    for p in _readable_paths():
        cmd += ["--ro-bind", str(p), str(p)]
    for p in (scratch, *writable):
        cmd += ["--bind", str(p), str(p)]
    # Everything but the binds above lives on bwrap's own root, which becomes read-only too (TMPDIR and HOME
    # point into the scratch folder).
    return cmd + ["--remount-ro", "/", "--chdir", str(scratch), "--"]


def _limit_self(limits: Limits, cgroups: _Cgroups, is_root: bool) -> None:
    """Apply the limits to this process (in a child before exec): cgroups, then rlimits."""
    cgroups.join()
    for res, value in ((resource.RLIMIT_CPU, limits.cpu_seconds), (resource.RLIMIT_AS, limits.address_space),
                       (resource.RLIMIT_NOFILE, limits.open_files), (resource.RLIMIT_FSIZE, limits.file_size),
                       (resource.RLIMIT_CORE, 0)):
        with _suppress():
            resource.setrlimit(res, (value, value))
    if not is_root:
        with _suppress():
            # NPROC counts every process of the user, so leave room for the ones already running.
            running = sum(1 for p in Path("/proc").iterdir() if p.name.isdigit())
            resource.setrlimit(resource.RLIMIT_NPROC, (running + limits.processes,) * 2)


def _stderr():
    return None if os.environ.get("BYTES2LOGITS_WORKER_STDERR") else subprocess.DEVNULL


def launch(argv: list[str], *, scratch: Path, pass_fds: tuple[int, ...] = (), env: dict | None = None,
           limits: Limits = Limits()) -> Sandboxed:
    """Start ``argv`` (a Python command) sandboxed, with ``scratch`` as its only writable folder and cwd."""
    scratch = Path(scratch).resolve()
    how = mode()
    _reap_stale_cgroups()
    cgroups = _Cgroups(limits) if how == "bwrap" else _Cgroups.none()
    if how != "bwrap":
        warn_if_reduced()
    is_root = os.geteuid() == 0
    env = dict(env or {})
    env.setdefault("HOME", str(scratch))
    if how == "bwrap":
        r, w = os.pipe()
        proc = subprocess.Popen(_bwrap_args(scratch, info_fd=w) + list(argv), pass_fds=(*pass_fds, w), env=env,
                                cwd=scratch, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=_stderr(),
                                preexec_fn=lambda: _limit_self(limits, cgroups, is_root), close_fds=True)
        os.close(w)
        return Sandboxed(proc, cgroups, r, "bwrap")
    proc = subprocess.Popen(list(argv), pass_fds=pass_fds, env=env, cwd=scratch, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=_stderr(),
                            preexec_fn=lambda: _limit_self(limits, cgroups, is_root), start_new_session=True,
                            close_fds=True)
    return Sandboxed(proc, cgroups, None, "fallback")


def _owner_alive(name: str) -> bool:
    """Whether the process that made cgroup ``name`` (``<pid>-<id>``) still runs; unknown names count as gone."""
    pid = name.split("-", 1)[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, OverflowError):  # gone, or an older name that was all digits
        return False
    except PermissionError:
        return True
    return True


def _reap_stale_cgroups() -> None:
    """Remove the empty cgroups of sandboxes that ended without cleaning up (``exec`` ones cannot).

    Only those whose owner has exited: a cgroup is empty between its creation and the moment the sandbox's
    first process joins it, and removing it then (another grader's clean-up, running at the same instant)
    left that sandbox with no cap on its processes or memory: a fork bomb could then take the machine's pids.
    """
    for controller in ("pids", "memory"):
        root = _cgroup_root(controller)
        if root is None:
            continue
        for d in root.iterdir():
            if d.is_dir() and not _owner_alive(d.name):
                with _suppress():
                    if not (d / "cgroup.procs").read_text().strip():
                        d.rmdir()


def _die_with(parent: int) -> None:
    """Be killed (SIGKILL) when ``parent``, the process that started this one, dies; exit now if it already has.

    bwrap's ``--die-with-parent`` sets the same signal, but only once bwrap runs: a parent killed while this
    launcher was still starting (nbgrader's worker, killed in the middle of a submission) left the kernel
    running for good, reparented. The signal is kept across ``exec`` (bwrap is not set-user-ID here)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def exec_main(argv: list[str]) -> int:
    """``python -m bytes2logits.kit.sandbox --scratch DIR [--rw DIR]... -- CMD...``: become CMD, sandboxed.

    How nbgrader's autograde kernel is started (its kernel manager prefixes the kernel's command with
    this): the limits are applied to this process and it ``exec``s bwrap (or, without it, the command).
    """
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bytes2logits.kit.sandbox")
    parser.add_argument("--scratch", type=Path, required=True)
    parser.add_argument("--rw", type=Path, action="append", default=[])
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="die with this process (the kernel manager's), even if it died while this started")
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        parser.error("no command after --")
    if args.parent_pid is not None:
        _die_with(args.parent_pid)
    how = mode()
    _reap_stale_cgroups()
    # jupyter_client tells a kernel its parent's pid so that it exits when the parent does; in a new pid
    # namespace that pid means nothing (and reads as gone). --die-with-parent does that job instead.
    os.environ.pop("JPY_PARENT_PID", None)
    limits = Limits()
    cgroups = _Cgroups(limits) if how == "bwrap" else _Cgroups.none()
    _limit_self(limits, cgroups, os.geteuid() == 0)
    scratch = args.scratch.resolve()
    if how == "bwrap":
        full = _bwrap_args(scratch, tuple(p.resolve() for p in args.rw)) + cmd
    else:
        warn_if_reduced()
        os.setsid()
        os.chdir(scratch)
        full = cmd
    os.execvpe(full[0], full, os.environ)
    return 1  # pragma: no cover - exec does not return


if __name__ == "__main__":
    sys.exit(exec_main(sys.argv[1:]))
