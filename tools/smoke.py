"""A quick proof that this Python runs the course: install, one chapter, one lab check, one chat turn.

``make smoke`` runs it in the venv ``make`` built (``make smoke PYTHON=python3.13 VENV=.venv-3.13`` for
another interpreter); CI runs it on every supported CPython the machine has besides the one that runs the
whole suite. Each step prints its result and time; the exit status is the number of failed steps.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "course" / "01_the_model_speaks_integers.ipynb"
LAB = ROOT / "solutions" / "lab01_tokenizers" / "lab01_tokenizers.ipynb"


def _run(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def step_import() -> str:
    import bytes2logits
    from bytes2logits import Model, Tokenizer  # noqa: F401  (the engine's top-level exports resolve)

    return f"bytes2logits {bytes2logits.__version__} on Python {sys.version.split()[0]}"


def step_chapter() -> str:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(CHAPTER, as_version=4)
    # kernel "python3" is ipykernel's spec for this very interpreter (the venv's)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(CHAPTER.parent)}}).execute()
    code = sum(c.cell_type == "code" for c in nb.cells)
    return f"{CHAPTER.name}: {code} code cells ran"


def step_check() -> str:
    done = _run("-m", "bytes2logits", "check", str(LAB), timeout=600)
    scores = [line for line in done.stdout.splitlines() if line.startswith("score:")]
    if not scores:
        raise RuntimeError(f"check exited {done.returncode} without a score:\n"
                           f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    got, _, full = scores[-1].split()[-1].partition("/")
    if done.returncode != 0 or float(got) != float(full):
        raise RuntimeError(f"the solution of lab 01 should get full marks:\n{done.stdout[-2000:]}")
    return f"{LAB.name}: {scores[-1]}"


def step_chat() -> str:
    done = _run("-m", "bytes2logits", "chat", "-p", "What is the capital of France?", "--greedy",
                "--max-tokens", "12", timeout=600)
    answer = done.stdout.strip()
    if done.returncode != 0 or not answer:
        raise RuntimeError(f"chat exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return f"answer: {json.dumps(answer[:80])}"


def main() -> int:
    failed = 0
    for name, step in (("import", step_import), ("chapter", step_chapter), ("check", step_check), ("chat", step_chat)):
        t0 = time.perf_counter()
        try:
            result, ok = step(), True
        except Exception as e:  # report every step, whatever breaks
            result, ok = f"{type(e).__name__}: {e}", False
        failed += not ok
        print(f"smoke {name:<8} {'ok  ' if ok else 'FAIL'} {time.perf_counter() - t0:6.1f} s  {result}", flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
