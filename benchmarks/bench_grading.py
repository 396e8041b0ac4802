"""Benchmark: what the trust boundary costs a hidden suite.

Run it as ``python benchmarks/bench_grading.py``. In one run it measures, taking the median of repeats:

* a call into a sandboxed worker (``impl.f(x)`` through the proxy, a small int in and out) against the
  same function called in-process: the per-call overhead of grading through the wire;
* the same with a 1 MB ``bytes`` argument and result (what a big input costs on the pipe);
* a callback: the worker calling a function the grader handed over;
* starting a worker and loading lab 01's solution notebook into it, and grading that notebook whole
  with ``python -m bytes2logits check``.

It ends with ``ratio proxy_call_vs_inprocess: <proxied / in-process time per call>``. There is no peer
grader to compare with: the in-process call is the floor.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

try:
    import bytes2logits  # noqa: F401
except ImportError:  # running from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bytes2logits.kit import sandbox
from bytes2logits.kit.labs import LABS, repo_root
from bytes2logits.kit.remote import RemoteImplementation, Submission

CODE = "def f(x):\n    return x\n\ndef g(cb, x):\n    return cb(x)\n"


def _per_call(fn, n: int, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - start) / n)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> dict:
    print(f"isolation: {sandbox.describe()}")
    start = time.perf_counter()
    sub = Submission([(0, CODE)])
    impl = RemoteImplementation(sub, "bench")
    impl.f(0)
    started = time.perf_counter() - start
    ns: dict = {}
    exec(CODE, ns)
    local_f = ns["f"]
    big = bytes(1 << 20)
    try:
        remote_small = _per_call(lambda: impl.f(7), 2000)
        local_small = _per_call(lambda: local_f(7), 200000)
        remote_big = _per_call(lambda: impl.f(big), 50)
        remote_cb = _per_call(lambda: impl.g(len, "abc"), 1000)
    finally:
        sub.close()
    lab = LABS["lab01_tokenizers"]
    check_times = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "bytes2logits", "check", str(lab.source_notebook())], cwd=repo_root(),
                       capture_output=True, check=True)
        check_times.append(time.perf_counter() - t0)
    print(f"{'worker start + load':<36} {started * 1e3:9.1f} ms")
    print(f"{'call, small int (proxied)':<36} {remote_small * 1e6:9.1f} us")
    print(f"{'call, small int (in-process)':<36} {local_small * 1e6:9.3f} us")
    print(f"{'call, 1 MB bytes in and out':<36} {remote_big * 1e3:9.2f} ms")
    print(f"{'call with one callback':<36} {remote_cb * 1e6:9.1f} us")
    print(f"{'check lab 01 solution (median of 3)':<36} {statistics.median(check_times):9.2f} s")
    ratio = remote_small / local_small
    print(f"ratio proxy_call_vs_inprocess: {ratio:.0f}")
    return {"ratio_proxy_call_vs_inprocess": ratio, "proxy_call_us": remote_small * 1e6,
            "check_lab01_s": statistics.median(check_times)}


if __name__ == "__main__":
    main(sys.argv[1:])
