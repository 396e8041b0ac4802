#!/usr/bin/env python3
"""The NumPy engine's speed next to llama.cpp's, measured in the same run, reported as ratios.

    python benchmarks/bench_engine.py [--n-prompt 256] [--n-decode 64] [--repeats 3] [--no-llama]

Both engines get the same work: a 256-token prompt of ordinary token ids evaluated in one call (logits
for the last position only), then greedy decoding of 64 tokens, one token per call, the next token
being the argmax of the logits. Runs alternate between the two engines (ours, llama.cpp, ours, …) and
the best of each is kept, so a noisy neighbour hurts both alike. llama.cpp runs the original Q4_1 file
with 2 threads; the NumPy engine has float32 weights and uses NumPy's BLAS with its default threads.

Machines differ; these numbers are only meaningful as ratios from one run on one machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

__all__ = ["measure_engine", "main"]


def _prompt(n_vocab: int, n: int, seed: int = 0) -> list[int]:
    # Same rule as bench_llama_cpp: skip the first 256 ids (specials and bytes in most vocabularies).
    return np.random.default_rng(seed).integers(min(256, n_vocab // 2), n_vocab, n).tolist()


def measure_engine(model, n_prompt: int = 256, n_decode: int = 64) -> dict:
    """One prefill + greedy decode run of the NumPy engine; seconds for each part."""
    prompt = _prompt(model.vocab_size, n_prompt)
    model.reset()
    t0 = time.perf_counter()
    logits = model.forward(prompt, last_only=True)
    t1 = time.perf_counter()
    nxt, pos = int(np.argmax(logits[-1])), n_prompt
    t2 = time.perf_counter()
    for _ in range(n_decode):
        logits = model.forward([nxt], start_pos=pos)
        nxt = int(np.argmax(logits[-1]))
        pos += 1
    t3 = time.perf_counter()
    return {"prefill_s": t1 - t0, "decode_s": t3 - t2}


def _rss_mib() -> float:
    """Resident memory of this process now (Linux /proc), else the peak from getrusage."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> dict:
    """Run the comparison, print a table and ``ratio ...`` lines, return the figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n-prompt", type=int, default=256)
    p.add_argument("--n-decode", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2, help="llama.cpp threads (default 2)")
    p.add_argument("--no-llama", action="store_true", help="measure the NumPy engine only")
    args = p.parse_args(argv)

    from bytes2logits import assets
    from bytes2logits.engine.model import Model

    path = Path(assets.path("smollm2"))
    rss0 = _rss_mib()
    t = time.perf_counter()
    model = Model.from_gguf(path, n_ctx=args.n_prompt + args.n_decode + 8)
    load_s = time.perf_counter() - t
    print(f"NumPy engine: loaded {path.name} in {load_s:.2f} s; float32 weights {model.weight_bytes / 2**20:.0f} MiB, "
          f"resident memory +{_rss_mib() - rss0:.0f} MiB; BLAS threads: "
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'default')}")
    measure_engine(model, 16, 4)  # warm-up: first-touch of the cache and BLAS buffers

    llama_runs: list[dict] = []
    ours: list[dict] = []
    llama_measure = None
    if not args.no_llama:
        from bench_llama_cpp import measure as llama_measure  # noqa: E402

    for _ in range(args.repeats):
        ours.append(measure_engine(model, args.n_prompt, args.n_decode))
        if llama_measure is not None:
            llama_runs.append(llama_measure(path, args.n_prompt, args.n_decode, args.threads, repeats=1))

    best = {k: min(r[k] for r in ours) for k in ("prefill_s", "decode_s")}
    fig = {
        "load_s": load_s,
        "weight_mib": model.weight_bytes / 2**20,
        "prefill_tok_s": args.n_prompt / best["prefill_s"],
        "decode_tok_s": args.n_decode / best["decode_s"],
    }
    print(f"{'engine':<28} {'prefill tok/s':>14} {'decode tok/s':>13}")
    print(f"{'NumPy float32 (this repo)':<28} {fig['prefill_tok_s']:>14.1f} {fig['decode_tok_s']:>13.1f}")
    if llama_runs:
        fig["llama_prefill_tok_s"] = args.n_prompt / min(r["prefill_s"] for r in llama_runs)
        fig["llama_decode_tok_s"] = args.n_decode / min(r["decode_s"] for r in llama_runs)
        print(f"{'llama.cpp Q4_1, ' + str(args.threads) + ' threads':<28} {fig['llama_prefill_tok_s']:>14.1f} "
              f"{fig['llama_decode_tok_s']:>13.1f}")
        fig["ratio_prefill_vs_llama_cpp"] = fig["prefill_tok_s"] / fig["llama_prefill_tok_s"]
        fig["ratio_decode_vs_llama_cpp"] = fig["decode_tok_s"] / fig["llama_decode_tok_s"]
        print(f"ratio prefill_vs_llama_cpp: {fig['ratio_prefill_vs_llama_cpp']:.2f}")
        print(f"ratio decode_vs_llama_cpp: {fig['ratio_decode_vs_llama_cpp']:.2f}")
    return fig


if __name__ == "__main__":
    main()
