#!/usr/bin/env python3
"""llama.cpp's CPU speed on a GGUF file, as the yardstick for the NumPy engine.

    python benchmarks/bench_llama_cpp.py [MODEL.gguf ...] [--threads 2] [--n-prompt 256] [--n-decode 64]

Without a model argument it measures the course's SmolLM2-135M-Instruct Q4_1 file (``bytes2logits.assets``
cache). :func:`measure` is importable. It reports

* prefill: tokens/s for one ``llama_decode`` of an ``n_prompt``-token prompt (a single batch and
  micro-batch, logits for the last position only);
* decode: tokens/s for ``n_decode`` greedy steps after that prompt, one token per ``llama_decode``, the
  next token being the argmax of the logits (computed in NumPy);

each the best of ``repeats`` runs (a fresh KV cache every run), on the CPU with ``threads`` threads,
flash attention off and the default f16 KV cache (the same settings as the "ggml" parity fixtures).
The prompt is a fixed pseudo-random sequence of ordinary token ids (seed 0), so the result does not
depend on a tokenizer. Needs llama-cpp-python (see ``tools/README.md``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["measure", "main"]


_MISSING = ("llama_cpp (llama-cpp-python) is not importable ({err}); run make bench, which installs it "
            "(or see tools/README.md).")


def _import_llama_cpp():
    """llama_cpp, or an ImportError that says how to install it."""
    try:
        import llama_cpp
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("bench_llama_cpp: " + _MISSING.format(err=e)) from None
    return llama_cpp


def _default_model() -> Path:
    repo = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(repo / "src"))
    from bytes2logits import assets

    return Path(assets.path("smollm2"))


def measure(model_path, n_prompt: int = 256, n_decode: int = 64, threads: int = 2, *, repeats: int = 3,
            flash_attn: bool = False, seed: int = 0) -> dict:
    """Best-of-``repeats`` llama.cpp prefill and decode speed on ``model_path``; returns a dict.

    Keys: ``prefill_tok_s``, ``decode_tok_s``, ``prefill_s`` / ``decode_s`` (best times), every run's
    times, the settings used, and the greedy ids of the last run (``decode_ids``).
    """
    llama_cpp = _import_llama_cpp()
    from llama_cpp import Llama

    model_path = Path(model_path)
    llm = Llama(str(model_path), n_ctx=n_prompt + n_decode + 8, n_batch=n_prompt, n_ubatch=n_prompt,
                n_threads=threads, n_threads_batch=threads, n_gpu_layers=0, flash_attn=flash_attn,
                logits_all=False, seed=seed, verbose=False)
    n_vocab = llm.n_vocab()
    ctx = llm._ctx.ctx
    # Ordinary (non-special) token ids: skip the first 256 ids, which hold bytes/specials in most vocabs.
    lo = min(256, n_vocab // 2)
    prompt = np.random.default_rng(seed).integers(lo, n_vocab, n_prompt).tolist()

    def last_logits() -> np.ndarray:
        ptr = llama_cpp.llama_get_logits_ith(ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(n_vocab,))

    prefill_times, decode_times = [], []
    ids: list[int] = []
    for _ in range(repeats):
        llm.reset()  # eval() then drops every KV cell from position 0 on: a fresh cache
        t0 = time.perf_counter()
        llm.eval(prompt)
        t1 = time.perf_counter()
        ids = []
        nxt = int(np.argmax(last_logits()))
        t2 = time.perf_counter()
        for _ in range(n_decode):
            ids.append(nxt)
            llm.eval([nxt])
            nxt = int(np.argmax(last_logits()))
        t3 = time.perf_counter()
        prefill_times.append(t1 - t0)
        decode_times.append(t3 - t2)
    del llm
    best_p, best_d = min(prefill_times), min(decode_times)
    return {
        "model": str(model_path),
        "model_bytes": model_path.stat().st_size,
        "llama_cpp_python": llama_cpp.__version__,
        "threads": threads,
        "n_prompt": n_prompt,
        "n_decode": n_decode,
        "repeats": repeats,
        "flash_attn": flash_attn,
        "kv_cache": "f16 (default)",
        "prefill_tok_s": n_prompt / best_p,
        "decode_tok_s": n_decode / best_d,
        "prefill_s": best_p,
        "decode_s": best_d,
        "prefill_runs_s": prefill_times,
        "decode_runs_s": decode_times,
        "decode_ids": ids,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="llama.cpp prefill/decode tokens/s (llama-cpp-python, CPU)")
    ap.add_argument("models", nargs="*", help="GGUF files (default: the course's SmolLM2 Q4_1 file)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-prompt", type=int, default=256)
    ap.add_argument("--n-decode", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print the full result dicts as JSON")
    args = ap.parse_args(argv)
    try:
        _import_llama_cpp()
    except ImportError as e:
        print(e, file=sys.stderr)
        return 1
    models = [Path(m) for m in args.models] or [_default_model()]
    results = []
    for m in models:
        r = measure(m, args.n_prompt, args.n_decode, args.threads, repeats=args.repeats)
        results.append(r)
        if not args.json:
            print(f"{m.name}: prefill {r['prefill_tok_s']:8.1f} tok/s ({args.n_prompt} tokens, one batch)   "
                  f"decode {r['decode_tok_s']:7.1f} tok/s ({args.n_decode} greedy steps)   "
                  f"[{args.threads} threads, best of {args.repeats}, "
                  f"llama-cpp-python {r['llama_cpp_python']}]")
    if args.json:
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
