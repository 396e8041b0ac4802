"""The trust boundary, piece by piece: what a sandboxed worker can see, write, learn and cost the grader.

The class tests (``tests/test_nbgrader_cycle.py``) prove the same rules end to end with hostile submissions;
these prove each mechanism on its own, quickly, so that a regression names the piece that broke.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bytes2logits.kit import sandbox
from bytes2logits.kit.labs import LABS, hidden_root, repo_root
from bytes2logits.kit.remote import RemoteImplementation, Submission, WorkerLost, timed
from bytes2logits.kit.wire import decode, encode

needs_bwrap = pytest.mark.skipif(sandbox.mode() != "bwrap" and not os.environ.get("CI"),
                                 reason="bubblewrap is not available here (install it: apt-get install bubblewrap)")

PROBE = r'''
import os, subprocess

def attempt(fn):
    try:
        fn()
        return "done"
    except BaseException as e:
        return type(e).__name__

def probe(files, package):
    out = {}
    out["caps"] = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0]
    out["env"] = dict(os.environ)
    out["cwd"] = os.getcwd()
    out["write_files"] = attempt(lambda: open(os.path.join(files, "planted"), "w").write("x"))
    out["link_files"] = attempt(lambda: os.symlink("/etc/passwd", os.path.join(files, "link")))
    out["write_package"] = attempt(lambda: open(os.path.join(package, "planted.py"), "w").write("x"))
    out["remount"] = subprocess.run(["mount", "-o", "remount,rw,bind", package], capture_output=True).returncode
    out["umount"] = subprocess.run(["umount", package], capture_output=True).returncode
    out["userns"] = subprocess.run(["unshare", "-U", "true"], capture_output=True).returncode
    out["dev"] = attempt(lambda: open("/dev/planted", "w").write("x"))
    def fill(path):
        with open(path, "wb") as f:
            for _ in range(1024):
                f.write(b"\0" * (1 << 20))
    out["fill_tmp"] = attempt(lambda: fill("/tmp/fill"))
    out["tmp_ok"] = attempt(lambda: open("/tmp/small", "w").write("fine"))
    return out

def burn(n):
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os.setsid()
            while True:
                pass
        pids.append(pid)
    return pids

def alive(pids):
    out = []
    for pid in pids:
        try:
            os.kill(pid, 0)
            done, _ = os.waitpid(pid, os.WNOHANG)
            out.append(done == 0)
        except OSError:
            out.append(False)
    return out

def ident(x):
    return x
'''


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    files = tmp_path_factory.mktemp("files")
    secret = "b2l-test-secret-" + os.urandom(8).hex()
    saved = {k: os.environ.get(k) for k in ("JUPYTERHUB_API_TOKEN", "B2L_DB_PASSWORD")}
    os.environ["JUPYTERHUB_API_TOKEN"] = secret
    os.environ["B2L_DB_PASSWORD"] = secret
    try:
        sub = Submission([(0, PROBE)], files=files, call_seconds=30, label="probe")
        impl = RemoteImplementation(sub, "probe")
        impl.ident(1)  # start the worker while the secrets are in this process's environment
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    yield impl, sub, files, secret
    sub.close()


@needs_bwrap
def test_the_worker_holds_no_capability_and_cannot_change_its_mounts(worker):
    """Started by root, bwrap keeps every capability unless told otherwise: the sandbox could then remount the
    package read-write, or unmount the copy that hides the reference, and rewrite the grader's own code."""
    impl, _, files, _ = worker
    package = str(Path(sandbox.__file__).resolve().parents[1])
    seen = impl.probe(str(files), package)
    assert int(seen["caps"], 16) == 0, f"the worker has capabilities {seen['caps']}"
    assert seen["remount"] != 0 and seen["umount"] != 0, "the worker changed its own mounts"
    assert seen["userns"] != 0, "the worker made a user namespace of its own (and with it, capabilities)"
    assert seen["write_package"] != "done" and seen["dev"] != "done"
    assert not (Path(package) / "planted.py").exists()


@needs_bwrap
def test_the_folder_of_handed_files_is_read_only_to_the_worker(worker):
    """The grader writes the files a test hands over into a folder the worker sees read-only: a worker cannot
    swap one for a link, so the grader never writes through a path the worker planted."""
    impl, _, files, _ = worker
    seen = impl.probe(str(files), str(repo_root() / "src"))
    assert seen["write_files"] != "done" and seen["link_files"] != "done", seen
    assert sorted(os.listdir(files)) == []


@needs_bwrap
def test_the_worker_writes_only_to_its_own_sized_tmpfs(worker):
    impl, _, files, _ = worker
    seen = impl.probe(str(files), str(repo_root() / "src"))
    assert seen["cwd"] == sandbox.HOME
    assert seen["fill_tmp"] == "OSError", "1 GiB fitted in the sandbox's tmpfs: it has no size"
    assert seen["tmp_ok"] == "OSError" or seen["tmp_ok"] == "done"
    assert not Path("/tmp/fill").exists() or Path("/tmp/fill").stat().st_size < (1 << 20)


def test_the_environment_is_an_allow_list(worker):
    """Secrets in the grader's environment never reach a sandboxed process."""
    impl, _, files, secret = worker
    env = impl.probe(str(files), str(repo_root() / "src"))["env"]
    assert secret not in json.dumps(env)
    assert set(env) <= set(sandbox.child_env()) | {"PWD", "SHLVL", "_"}, sorted(set(env) - set(sandbox.child_env()))


def test_a_timing_kills_the_submissions_helpers_and_stops_its_worker(worker):
    """While anything is timed, a submission runs nothing but its worker, and that only when called: CPU
    burners it started are killed, and the worker itself is stopped while the reference is timed."""
    impl, sub, _, _ = worker
    pids = impl.burn(3)
    assert all(impl.alive(pids))
    _, seconds = timed(sum, range(1000))
    box = sub.proc.box
    assert len(box.processes()) <= 3, f"helpers survived a timing: {sorted(box.processes())}"
    assert not any(impl.alive(pids)), "the worker answers again after a timing, and its helpers are gone"
    stopped = []

    def reference_call():
        with open(f"/proc/{sub.pid()}/stat") as f:
            stopped.append(f.read().split(")")[1].split()[0])
        return 1

    timed(reference_call)
    assert stopped == ["T"], f"the worker was {stopped} while something else was timed, not stopped"
    assert impl.ident(5) == 5, "the worker runs again when the grader calls it"


def test_a_reply_of_twenty_million_values_is_refused_cheaply():
    """Five bytes on the wire make an empty list of 56 bytes or more: a cap on values, not only on bytes.
    ``[[]] * 20_000_000`` (100 MB on the wire) once grew the grader by 1.4 GB; now decoding stops at the cap."""
    code = ("import resource, time\nfrom bytes2logits.kit.wire import WireError, decode, encode\n"
            "huge = b'l' + (20_000_000).to_bytes(4, 'big') + encode([]) * 20_000_000\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\nstart = time.monotonic()\n"
            "try:\n    decode(huge)\nexcept WireError as e:\n    print('refused:', e)\n"
            "print(time.monotonic() - start, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300).stdout
    refused, figures = out.splitlines()
    assert "more than" in refused and "values" in refused
    seconds, grown = map(float, figures.split())
    assert grown < 400 * 1024 ** 2, f"decoding the refused reply grew the grader by {grown / 1024 ** 2:.0f} MB"
    assert seconds < 60
    assert decode(encode([[]] * 1000)) == [[]] * 1000


def test_cells_that_ignore_the_alarm_cost_their_own_time_and_the_budget_holds(tmp_path):
    """A cell that ignores the worker's alarm is cut by the grader after its own time, and the whole
    submission never takes more than its budget, however many such cells it has."""
    hang = "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass"
    cells = [(i, hang) for i in range(8)] + [(8, "def ok():\n    return 'ok'")]
    start = time.monotonic()
    sub = Submission(cells, cell_seconds=2, call_seconds=5, deadline=time.monotonic() + 20, files=tmp_path)
    try:
        impl = RemoteImplementation(sub, "hangs")
        with pytest.raises(WorkerLost, match="budget"):
            impl.ok()
    finally:
        sub.close()
    took = time.monotonic() - start
    assert took < 20 + 8, f"eight hanging cells held the submission {took:.0f} s past a 20 s budget"
    assert len(sub.skip) >= 2, "each hanging cell is skipped after its own time, not the whole load's"


def test_a_broken_sandbox_is_refused_loudly(monkeypatch):
    """A worker that cannot start (a venv the sandbox cannot see) must stop the grading with the reason, never
    score every task of every submission 0 in silence."""
    if sandbox.mode() != "bwrap":
        pytest.skip("needs bwrap")
    monkeypatch.setattr(sandbox, "_readable_binds", lambda: [])
    monkeypatch.setattr(sandbox, "_SELFTEST", {})
    with pytest.raises(sandbox.SandboxError, match="cannot start"):
        sandbox.selftest()


@needs_bwrap
def test_a_venv_reached_through_a_link_still_grades(tmp_path):
    """A course whose ``.venv`` is a link to another disk: the sandbox shows the venv at both paths."""
    link = tmp_path / "venv-link"
    link.symlink_to(Path(sys.prefix).resolve())
    honest = json.loads((repo_root() / "tests" / "fixtures" / "honest" / "lab01_tokenizers.json").read_text())
    import nbformat

    from bytes2logits.kit.sampleclass import submission

    nb_path = tmp_path / "lab01_tokenizers.ipynb"
    nbformat.write(submission(LABS["lab01_tokenizers"], honest), nb_path)
    result = subprocess.run([str(link / "bin" / "python"), "-m", "bytes2logits", "check", str(nb_path)],
                            capture_output=True, text=True, timeout=600, cwd=repo_root())
    assert "score: 10/10" in result.stdout, result.stdout[-2000:] + result.stderr[-2000:]


def test_only_the_instructors_notebook_says_which_cells_are_locked():
    """A learner's cell marked ``locked`` in its own metadata is still the learner's."""
    from bytes2logits.kit.notebook import instructor_cells, read_notebook, submission_cells

    lab = LABS["lab01_tokenizers"]
    nb = read_notebook(lab.release_notebook())
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade_id") == "answer_byte_tokenizer":
            meta["locked"] = True
            cell["source"] = "from bytes2logits.lessons.basic import ByteTokenizer"
    solution = read_notebook(lab.source_notebook())
    instructor_cells(nb, solution)
    _, written = submission_cells(nb, lab, solution)
    assert any(task == "byte_tokenizer" and "import ByteTokenizer" in src for _, src, task in written)


def test_no_needle_matches_what_the_release_notebooks_show():
    """A feedback page quotes the lab's own text; only hidden-suite code may withhold it."""
    from bytes2logits.kit.grading import hidden_needles

    needles = hidden_needles(hidden_root())
    for lab in LABS.values():
        nb = json.loads(lab.release_notebook().read_text(encoding="utf-8"))
        text = "\n".join("".join(c["source"]) for c in nb["cells"])
        assert not [n for n in needles if n in text], lab.name


def test_links_in_submitted_are_skipped(tmp_path):
    from bytes2logits.kit.classroom import scan_submissions

    lab = "lab01_tokenizers"
    real = tmp_path / "submitted" / "alice" / lab
    real.mkdir(parents=True)
    (real / f"{lab}.ipynb").write_text("{}")
    (tmp_path / "submitted" / "mallory").mkdir()
    (tmp_path / "submitted" / "mallory" / lab).symlink_to(real)
    (tmp_path / "submitted" / "eve").symlink_to(tmp_path / "submitted" / "alice")
    bob = tmp_path / "submitted" / "bob" / lab
    bob.mkdir(parents=True)
    (bob / f"{lab}.ipynb").symlink_to(real / f"{lab}.ipynb")
    huge = tmp_path / "submitted" / "hugo" / lab
    huge.mkdir(parents=True)
    with open(huge / f"{lab}.ipynb", "wb") as f:
        f.truncate(65 * 1024 ** 2)  # sparse: no disk used
    found, skipped = scan_submissions(tmp_path)
    assert found == [(lab, "alice")]
    assert {s.path.split("/")[1] for s in skipped} == {"mallory", "eve", "bob", "hugo"}
    assert all("link" in s.reason for s in skipped if "hugo" not in s.path)
    assert any("larger than" in s.reason for s in skipped if "hugo" in s.path)


def _gated_peak(tmp_path, src: str, call: str, n: int) -> int:
    """The memory ``call(n)`` of ``src`` uses, as a memory gate measures it (skipped where it cannot)."""
    from bytes2logits.kit.remote import peak_memory

    sub = Submission([(0, src)], files=tmp_path)
    try:
        impl = RemoteImplementation(sub, "memory")
        getattr(impl, call)(1024)
        with peak_memory(impl) as peak:
            getattr(impl, call)(n)
    finally:
        sub.close()
    if peak.how != "sandbox cgroup peak":
        pytest.skip("needs root and a cgroup-v1 memory hierarchy (as on CI)")
    return peak.peak


def test_memory_handed_to_a_child_process_still_counts(tmp_path):
    """A memory gate measures the whole sandbox where it can (the cgroup's peak): a child that allocates,
    answers and exits before the block ends is counted as the worker itself would be."""
    src = ("import os\n\ndef offload(n):\n    r, w = os.pipe()\n    pid = os.fork()\n    if pid == 0:\n"
           "        b = bytearray(n)\n        b[::4096] = b'x' * len(b[::4096])\n        os.write(w, b'ok')\n"
           "        os._exit(0)\n    os.read(r, 2)\n    os.waitpid(pid, 0)\n    return n\n")
    peak = _gated_peak(tmp_path, src, "offload", 200 * 1024 ** 2)
    assert peak >= 150 * 1024 ** 2, f"a child's 200 MiB counted as {peak / 1024 ** 2:.0f} MiB"


def test_memory_freed_inside_the_call_does_not_hide_what_the_call_uses(tmp_path):
    """Ballast: a notebook that holds 300 MB, frees it inside the gated call and uses 200 MB there, used 200 MB."""
    src = ("_ballast = [bytearray(300 * 1024 ** 2)]\nfor b in _ballast:\n    b[::4096] = b'x' * len(b[::4096])\n\n\n"
           "def call(n):\n    if n > 1024:\n        _ballast.clear()\n    b = bytearray(n)\n"
           "    b[::4096] = b'x' * len(b[::4096])\n    return len(b)\n")
    peak = _gated_peak(tmp_path, src, "call", 200 * 1024 ** 2)
    assert peak >= 150 * 1024 ** 2, f"200 MB used after freeing 300 MB counted as {peak >> 20} MB"


def test_a_peer_that_stops_reading_cannot_block_the_grader():
    """A worker can fill its own inbound pipe and stop: the grader's write then waits only until its deadline."""
    from bytes2logits.kit.wire import Channel, Timeout

    r, w = os.pipe()
    channel = Channel(os.open("/dev/null", os.O_RDONLY), w)
    try:
        start = time.monotonic()
        with pytest.raises(Timeout):
            channel.send(b"x" * (4 << 20), deadline=time.monotonic() + 0.5)
        assert time.monotonic() - start < 5
    finally:
        channel.close()
        os.close(r)


def test_code_built_at_run_time_is_flagged_for_review():
    from bytes2logits.kit.similarity import opaque_findings

    lab = LABS["lab01_tokenizers"]
    hidden = "import base64, zlib\nexec(zlib.decompress(base64.b64decode(DATA)))"
    assert [f.task for f in opaque_findings(lab, [(4, hidden, "char_tokenizer")])] == ["char_tokenizer"]
    assert {f.task for f in opaque_findings(lab, [(4, hidden, None)])} == {t.id for t in lab.tasks}
    assert opaque_findings(lab, [(4, "import re\n_P = re.compile('a+')\nexec('x = 1')", "char_tokenizer")]) == []


def test_socket_folders_of_killed_graders_are_removed(tmp_path):
    """A grader killed before its kernel's clean-up (a worker lost mid-submission) leaves the kernel's socket
    folder behind; the next kernel manager removes those whose owner has gone, and only those."""
    from bytes2logits.kit.nbgrade import _reap_kernel_folders

    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = tmp_path / f"b2l-kernel-{dead.pid}-abc123"
    mine = tmp_path / f"b2l-kernel-{os.getpid()}-def456"
    unknown = tmp_path / "b2l-kernel-ghi789"
    for d in (gone, mine, unknown):
        (d / "sock").mkdir(parents=True)
    _reap_kernel_folders(tmp_path)
    assert not gone.exists() and mine.exists() and unknown.exists()
