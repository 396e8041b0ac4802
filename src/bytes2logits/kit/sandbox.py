"""Where a submission's code runs: a bubblewrap sandbox with resource limits, or a loud fallback.

With ``bwrap`` (Debian package ``bubblewrap``) a sandboxed process gets new user, pid, network, IPC and UTS
namespaces, so it can neither see nor signal the grader (its pids are not there), nor reach any network
(it has only its own empty loopback). It holds no capability (``--cap-drop ALL``) and cannot make another
user namespace (``--disable-userns``): without both, a sandbox started by root could remount its read-only
views read-write, or unmount them, and rewrite the grader's own code. Its filesystem is built from nothing:

* read-only views of the system libraries, the Python installation, the virtual environment (at its real
  path and at the path it is reached by, when a link leads to it), the course package and the asset cache;
* read-only *overlays* that hide what lies under them (the grader mounts a copy of the package in which
  the tasks being graded are stubs over the package itself: :mod:`bytes2logits.kit.redact`);
* read-only views of folders the grader fills for the sandbox (the files a hidden test hands over);
* one writable place, a private tmpfs of :attr:`Limits.disk` bytes at ``/tmp`` (its home, its working
  folder and ``TMPDIR``), and a small one at ``/dev/shm``. They live in the sandbox's own mount namespace:
  no process outside it can follow a path into them, and they vanish with it. Nothing the grader reads or
  writes later is writable in here, so a symlink planted by a submission can never redirect the grader.

The hidden suites, ``solutions/``, the gradebook, ``autograded/`` and other students' folders are simply
not in its view. Its environment is an allow-list (:func:`child_env`): no secret of the grader's
environment reaches it. It dies with its parent and runs in a session of its own.

Limits apply either way (``setrlimit`` before ``exec``): CPU seconds, address space, open files, file
size, no core files; and, where the machine's cgroups can be written (root, as on CI), a cap on the
number of processes, on memory (the tmpfs counts, as it is memory) and on CPU (:attr:`Limits.cpus` cores
at most) for the sandbox as a whole, so that a fork bomb stops at the cap and a CPU burner cannot slow
other sandboxes. (``RLIMIT_NPROC`` does not bind root, so it is set only for other users.)

Without bwrap (macOS, a host that forbids user namespaces) a process runs in a new session with the same
rlimits, in a private folder of its own, and :func:`describe` says loudly what is lost: it can then read
what your user can read, use the network, and signal your processes. ``BYTES2LOGITS_SANDBOX=bwrap`` makes
a missing bwrap an error instead (CI sets ``CI``, which does the same).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HOME", "Limits", "Mounts", "SandboxError", "Sandboxed", "bwrap_path", "child_env", "describe",
           "launch", "mode", "selftest"]

GIB = 1024 ** 3
MIB = 1024 ** 2
HOME = "/tmp"  # inside a bwrap sandbox: its home, working folder and TMPDIR, on its own sized tmpfs


class SandboxError(RuntimeError):
    """The sandbox was required but cannot be set up here (the message says what is missing)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed process (and, with cgroups, of its whole sandbox)."""

    cpu_seconds: int = 900
    address_space: int = 6 * GIB
    open_files: int = 256
    processes: int = 64
    file_size: int = 256 * MIB
    memory: int = 4 * GIB
    disk: int = 512 * MIB  # the private tmpfs at /tmp: everything the sandbox can write
    shm: int = 64 * MIB  # the private tmpfs at /dev/shm
    cpus: float = 1.0  # cores' worth of CPU time per second, for the whole sandbox (cgroup cpu quota)


@dataclass(frozen=True)
class Mounts:
    """What a sandbox sees besides the system, Python, the package and the asset cache.

    ``readonly``: host folders shown read-only at the same path (filled by the grader, never by the sandbox).
    ``writable``: host folders the sandbox may write (only a kernel's socket folder, on a host tmpfs).
    ``overlays``: ``(source, dest)`` pairs: ``source`` shown read-only at ``dest``, hiding what is there.
    """

    readonly: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    overlays: tuple[tuple[Path, Path], ...] = ()


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


_checked: dict[str, bool] = {}


def _bwrap_works(path: str) -> bool:
    """bwrap may be installed and still refused user namespaces (a locked-down host): try it once."""
    if path not in _checked:
        try:
            r = subprocess.run([path, "--unshare-user", "--unshare-pid", "--unshare-net", "--disable-userns",
                                "--cap-drop", "ALL", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
                                "true"], capture_output=True, timeout=30)
            _checked[path] = r.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _checked[path] = False
    return _checked[path]


def _required() -> bool:
    return os.environ.get("BYTES2LOGITS_SANDBOX") == "bwrap" or bool(os.environ.get("CI"))


def mode() -> str:
    """``"bwrap"`` when sandboxes get the full isolation here, ``"fallback"`` otherwise."""
    wanted = os.environ.get("BYTES2LOGITS_SANDBOX", "auto")
    if wanted == "none":
        if _required() and os.environ.get("CI"):
            raise SandboxError("CI must grade with bwrap; BYTES2LOGITS_SANDBOX=none is refused there")
        return "fallback"
    path = bwrap_path()
    if path and _bwrap_works(path):
        return "bwrap"
    if _required():
        why = "is not installed" if not path else "cannot create user namespaces here (or is older than 0.8)"
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
    """One line for logs and reports: how sandboxes are isolated on this machine."""
    if mode() == "bwrap":
        caps = [name for name, c in (("processes", "pids"), ("memory", "memory"), ("CPU", "cpu"))
                if _cgroup_root(c)]
        if caps:
            cg = f"with cgroup caps on {', '.join(caps)}"
        elif os.geteuid() == 0:
            cg = "with rlimits only: " + ROOT_WITHOUT_CGROUPS
        else:
            cg = "with rlimits (no cgroups: not root)"
        return (f"bwrap sandbox (user, pid, network, IPC namespaces; no capabilities; read-only system; "
                f"private {Limits().disk // MIB} MiB tmpfs; {cg})")
    return "fallback: new session + rlimits only (no bwrap)"


ROOT_WITHOUT_CGROUPS = (
    "WARNING: grading as root where no cgroup-v1 pids controller can be used (a cgroup-v2-only host?): a sandbox's "
    "processes, memory and CPU are not capped as a whole, and RLIMIT_NPROC does not bind root, so a fork bomb is "
    "bounded only by the host. Grade as a non-root user, or on a host with cgroup v1 controllers.")


def warn_if_reduced() -> None:
    global _WARNED
    if _WARNED:
        return
    if mode() != "bwrap":
        _WARNED = True
        print(FALLBACK_WARNING, file=sys.stderr, flush=True)
        warnings.warn(FALLBACK_WARNING, RuntimeWarning, stacklevel=2)
    elif os.geteuid() == 0 and _cgroup_root("pids") is None:
        _WARNED = True
        print(ROOT_WITHOUT_CGROUPS, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------ environment

# Variables passed through from the grader's environment when set (none of them can hold a secret).
_PASSED = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "NBGRADER_EXECUTION", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
           "BYTES2LOGITS_WORKER_STDERR")


def child_env(home: str = HOME, extra: dict | None = None) -> dict:
    """The whole environment of a sandboxed process: an allow-list, never the grader's own environment.

    Secrets the grader holds (``JUPYTERHUB_API_TOKEN``, a database password, cloud keys) are not on it, so
    a submission cannot print them into its feedback. ``extra`` adds the caller's own fixed variables."""
    from .. import assets

    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
           "LC_ALL": "C.UTF-8", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
           "BYTES2LOGITS_CACHE": str(assets.cache_dir()), "BYTES2LOGITS_SANDBOXED": "1",
           "NBGRADER_EXECUTION": "autograde"}
    for key in _PASSED:
        if key in os.environ:
            env[key] = os.environ[key]
    env.update(extra or {})
    return env


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
    """A pids, memory and cpu cgroup (where each can be made) for one sandbox; removed when it ends."""

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
        period = 100_000
        for controller, files in (("pids", {"pids.max": str(limits.processes)}),
                                  ("memory", {"memory.limit_in_bytes": str(limits.memory)}),
                                  ("cpu", {"cpu.cfs_period_us": str(period),
                                           "cpu.cfs_quota_us": str(max(1000, int(limits.cpus * period)))})):
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

    def pids(self) -> list[int] | None:
        """The host pids of every process in the sandbox (None without a pids cgroup)."""
        for d in self.dirs:
            if d.parent.parent.name == "pids":
                with _suppress():
                    return [int(p) for p in (d / "cgroup.procs").read_text().split()]
                return []
        return None

    def memory(self) -> tuple[int, int] | None:
        """``(usage now, peak since the last reset)`` of the sandbox's memory cgroup in bytes (None without one)."""
        for d in self.dirs:
            if d.parent.parent.name == "memory":
                with _suppress():
                    return (int((d / "memory.usage_in_bytes").read_text()),
                            int((d / "memory.max_usage_in_bytes").read_text()))
        return None

    def reset_peak(self) -> bool:
        for d in self.dirs:
            if d.parent.parent.name == "memory":
                with _suppress():
                    (d / "memory.max_usage_in_bytes").write_text("0")
                    return True
        return False

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
                    time.sleep(0.02)


class _suppress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return exc[0] is not None and issubclass(exc[0], (OSError, ValueError))


# ------------------------------------------------------------------------------------------------ launch

def _readable_binds() -> list[tuple[Path, Path]]:
    """``(host path, path in the sandbox)`` of what a sandboxed Python must read: the interpreter, the venv,
    the package and the asset cache. A path reached through a symbolic link (a ``.venv`` that links to
    another disk) is shown at both places, so that ``sys.executable`` starts in the sandbox as it does here."""
    import bytes2logits

    from .. import assets

    wanted = [Path(sys.base_prefix), Path(sys.prefix), Path(bytes2logits.__file__).parent.parent,
              Path(os.path.abspath(sys.executable)).parent.parent]
    cache = assets.cache_dir()
    if cache.is_dir():
        wanted.append(cache)
    pairs: list[tuple[Path, Path]] = []
    for p in wanted:
        real = p.resolve()
        pairs.append((real, real))
        seen = Path(os.path.abspath(p))
        if seen != real:
            pairs.append((real, seen))
    out: list[tuple[Path, Path]] = []
    for src, dest in sorted(set(pairs), key=lambda sd: (len(sd[1].parts), str(sd[1]))):
        if not any(dest == d or d in dest.parents for _, d in out):
            out.append((src, dest))
    return out


def _readable_paths() -> list[Path]:
    """The host folders a sandbox reads (their real paths)."""
    return sorted({src for src, _ in _readable_binds()})


_SYSTEM = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin"]
_ETC = ["/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives",
        "/etc/fonts", "/etc/mime.types", "/etc/matplotlibrc"]


class Sandboxed:
    """A running sandboxed process: ``proc`` (the Popen of bwrap or of the fallback), its limits, cleanup."""

    def __init__(self, proc: subprocess.Popen, cgroups: _Cgroups, info_fd: int | None, isolation: str,
                 private: Path | None = None):
        self.proc, self._cgroups, self._info_fd, self.isolation = proc, cgroups, info_fd, isolation
        self._private = private  # the fallback's own folder, removed with it
        self._pid: int | None = None if info_fd is not None else proc.pid
        self._init: int | None = None
        self.paused = False
        # inner_pid and kill may run on different threads: the info pipe is closed exactly once, under
        # this lock (closing a descriptor twice can close whatever file was given its number in between).
        self._lock = threading.Lock()

    def _close_info(self) -> None:
        if self._info_fd is not None:
            with _suppress():
                os.close(self._info_fd)
            self._info_fd = None

    def inner_pid(self) -> int | None:
        """The host pid of the sandboxed program itself (for reading its memory from /proc)."""
        with self._lock:
            if self._pid is None and self._info_fd is not None:
                try:
                    raw = os.read(self._info_fd, 4096)
                    child = int(json.loads(raw)["child-pid"])
                    kids = Path(f"/proc/{child}/task/{child}/children").read_text().split()
                    self._init = child
                    self._pid = int(kids[0]) if kids else child
                except (OSError, ValueError, KeyError, IndexError):
                    self._pid = None
                finally:
                    self._close_info()
            return self._pid

    def processes(self) -> set[int]:
        """The host pids of every process of the sandbox: its cgroup's, and the descendants of its launcher
        (orphans are adopted by bwrap's own init, so they stay among them)."""
        seen: set[int] = set()
        todo = [self.proc.pid]
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            with _suppress():
                for task in os.listdir(f"/proc/{pid}/task"):
                    with _suppress():
                        todo += [int(k) for k in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        return {pid for pid in seen | set(self._cgroups.pids() or ()) if not _zombie(pid)}

    def quiesce(self) -> int:
        """Kill every process of the sandbox but the program itself (and bwrap's two around it); return how
        many. A timing gate calls this first, so that nothing the submission started can run meanwhile."""
        me = self.inner_pid()
        keep = {self.proc.pid, self._init, me}
        killed = set()
        for _ in range(3):  # a process may fork while its siblings are being killed: look again
            doomed = self.processes() - keep
            if not doomed:
                break
            for pid in doomed:
                with _suppress():
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
        end = time.monotonic() + 2.0
        while time.monotonic() < end and any(not _zombie(pid) for pid in killed):
            time.sleep(0.005)  # a SIGKILL takes effect when the process is next scheduled
        return len(killed)

    def memory_mark(self) -> int | None:
        """Reset the sandbox's memory peak and return its usage now (None without a memory cgroup)."""
        if not self._cgroups.reset_peak():
            return None
        now = self._cgroups.memory()
        return None if now is None else now[0]

    def memory_peak(self) -> int | None:
        """The sandbox's memory peak (every process in it, children that have exited included) since
        :meth:`memory_mark`, in bytes (None without a memory cgroup)."""
        now = self._cgroups.memory()
        return None if now is None else now[1]

    def pause(self) -> None:
        """Stop the program (SIGSTOP) until :meth:`resume`: it uses no CPU while something else is timed."""
        pid = self.inner_pid()
        if pid is not None and not self.paused:
            with _suppress():
                os.kill(pid, signal.SIGSTOP)
                self.paused = True
                end = time.monotonic() + 1.0
                while time.monotonic() < end and _state(pid) not in ("T", "t", "Z", "X", ""):
                    time.sleep(0.001)  # a stop, like a kill, takes effect when the process is next scheduled

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            pid = self.inner_pid()
            if pid is not None:
                with _suppress():
                    os.kill(pid, signal.SIGCONT)

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
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)


def _state(pid: int) -> str:
    """The one-letter state of ``pid`` (``R``, ``S``, ``T``, ``Z``...), or ``""`` when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and only waits to be reaped (or is gone): it uses no CPU and holds nothing."""
    return _state(pid) in ("Z", "X", "")


def _bwrap_args(mounts: Mounts, limits: Limits, info_fd: int | None = None) -> list[str]:
    """bwrap's command line up to ``--``: namespaces, no capabilities, a read-only system, the mounts, and a
    private sized tmpfs as home and working folder."""
    cmd = [bwrap_path(), "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
           "--unshare-uts", "--unshare-cgroup-try", "--disable-userns", "--cap-drop", "ALL",
           "--die-with-parent", "--new-session", "--hostname", "sandbox"]
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
    cmd += ["--proc", "/proc", "--dev", "/dev", "--size", str(limits.shm), "--tmpfs", "/dev/shm",
            "--size", str(limits.disk), "--perms", "1777", "--tmpfs", HOME]
    for src, dest in _readable_binds():
        cmd += ["--ro-bind", str(src), str(dest)]
    # Results computed from the assets and cached beside them (the hidden suites' expected readings of real
    # files, the chapters' tables) are answers: a sandbox sees an empty folder of its own in their place.
    from .. import assets

    computed = assets.cache_dir() / "computed"
    if computed.is_dir():
        cmd += ["--size", str(64 * MIB), "--tmpfs", str(computed)]
    for p in mounts.readonly:
        cmd += ["--ro-bind", str(Path(p).resolve()), str(Path(p).resolve())]
    for src, dest in mounts.overlays:
        cmd += ["--ro-bind", str(Path(src).resolve()), str(dest)]
    for p in mounts.writable:
        cmd += ["--bind", str(Path(p).resolve()), str(Path(p).resolve())]
    # Everything but the binds above lives on bwrap's own root, which becomes read-only too, as does /dev
    # (its device nodes still work; /dev/shm is its own tmpfs).
    return cmd + ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", HOME, "--"]


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


def _fallback_home() -> Path:
    """Without bwrap: a private folder of this user's as home."""
    return Path(tempfile.mkdtemp(prefix="b2l-sandbox-"))


def launch(argv: list[str], *, mounts: Mounts = Mounts(), pass_fds: tuple[int, ...] = (),
           env: dict | None = None, limits: Limits = Limits()) -> Sandboxed:
    """Start ``argv`` (a Python command) sandboxed; ``env`` adds fixed variables to :func:`child_env`."""
    how = mode()
    _reap_stale_cgroups()
    cgroups = _Cgroups(limits) if how == "bwrap" else _Cgroups.none()
    if how != "bwrap":
        warn_if_reduced()
    is_root = os.geteuid() == 0
    if how == "bwrap":
        r, w = os.pipe()
        try:
            proc = subprocess.Popen(_bwrap_args(mounts, limits, info_fd=w) + list(argv), pass_fds=(*pass_fds, w),
                                    env=child_env(HOME, env), cwd="/", stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=_stderr(),
                                    preexec_fn=lambda: _limit_self(limits, cgroups, is_root), close_fds=True)
        finally:
            os.close(w)
        return Sandboxed(proc, cgroups, r, "bwrap")
    home = _fallback_home()
    proc = subprocess.Popen(list(argv), pass_fds=pass_fds, env=child_env(str(home), env), cwd=home,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=_stderr(),
                            preexec_fn=lambda: _limit_self(limits, cgroups, is_root), start_new_session=True,
                            close_fds=True)
    return Sandboxed(proc, cgroups, None, "fallback", private=home)


_SELFTEST: dict[tuple, str | None] = {}


def selftest(mounts: Mounts = Mounts()) -> None:
    """Start this Python in a sandbox and import the package and NumPy there; raise :class:`SandboxError`
    saying why when it cannot (a ``.venv`` the sandbox cannot see, a bwrap that cannot start), instead of
    letting every task of every submission score 0 without a word. Done once per process and mount set."""
    key = (mode(), mounts)
    if key not in _SELFTEST:
        argv = [sys.executable, "-I", "-c", "import bytes2logits, numpy; print('ok')"]
        home = None
        try:
            if mode() == "bwrap":
                cmd, env, cwd = _bwrap_args(mounts, Limits()) + argv, child_env(), "/"
            else:
                home = _fallback_home()
                cmd, env, cwd = argv, child_env(str(home)), home
            res = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
            ok, why = res.returncode == 0 and res.stdout.strip() == "ok", (res.stderr or res.stdout)[-800:]
        except (OSError, subprocess.TimeoutExpired) as e:
            ok, why = False, str(e)
        finally:
            if home is not None:
                shutil.rmtree(home, ignore_errors=True)
        _SELFTEST[key] = None if ok else why.strip() or "no output"
    why = _SELFTEST[key]
    if why is not None:
        raise SandboxError(f"a sandboxed Python cannot start here, so no submission could be graded: {why}. "
                           f"Interpreter {sys.executable} (real path {Path(sys.executable).resolve()}), package "
                           f"{Path(__file__).resolve().parents[1]}.")


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
    for controller in ("pids", "memory", "cpu"):
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

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def exec_main(argv: list[str]) -> int:
    """``python -m bytes2logits.kit.sandbox [--ro DIR]... [--rw DIR]... -- CMD...``: become CMD, sandboxed.

    How nbgrader's autograde kernel is started (its kernel manager prefixes the kernel's command with
    this): the limits are applied to this process and it ``exec``s bwrap (or, without it, the command) with
    the allow-listed environment of :func:`child_env`.
    """
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bytes2logits.kit.sandbox")
    parser.add_argument("--ro", type=Path, action="append", default=[], help="a folder shown read-only")
    parser.add_argument("--rw", type=Path, action="append", default=[], help="a folder the command may write")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a variable for the command, besides the allow-list")
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="die with this process (the kernel manager's), even if it died while this started")
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        parser.error("no command after --")
    if args.parent_pid is not None:
        _die_with(args.parent_pid)
    extra = dict(item.split("=", 1) for item in args.env if "=" in item)
    how = mode()
    _reap_stale_cgroups()
    limits = Limits()
    cgroups = _Cgroups(limits) if how == "bwrap" else _Cgroups.none()
    _limit_self(limits, cgroups, os.geteuid() == 0)
    mounts = Mounts(readonly=tuple(args.ro), writable=tuple(args.rw))
    if how == "bwrap":
        full = _bwrap_args(mounts, limits) + cmd
        env = child_env(HOME, extra)
        os.chdir("/")
    else:
        warn_if_reduced()
        os.setsid()
        home = _fallback_home()
        os.chdir(home)
        full = cmd
        env = child_env(str(home), extra)
    os.execvpe(full[0], full, env)
    return 1  # pragma: no cover - exec does not return


if __name__ == "__main__":
    sys.exit(exec_main(sys.argv[1:]))
