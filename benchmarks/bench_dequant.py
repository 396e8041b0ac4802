"""Benchmark: bytes2logits.engine.quants.dequantize against gguf-py's gguf.quants.dequantize.

Run it as ``python benchmarks/bench_dequant.py`` (``--help`` for options). It times, in the same process and
interleaved so that a busy machine slows both sides alike, taking the best of a few repeats:

* every tensor of the SmolLM2 GGUF file (Q8_0, Q4_1 and F32), as one total;
* a synthetic tensor of every supported type (4M values each by default, fp16 scales kept finite).

It prints a table of throughputs in million values per second, and for each type the rate at which
float32 output is written (GB/s) as a share of this machine's memory-copy bandwidth measured in the same
run (``np.copyto`` of 256 MB, best of the repeats): a dequantizer can at best write as fast as memory
copies. Rows marked ``*`` are the types of lab 15, whose reference answers are these very kernels. It
ends with exactly one line ``ratio dequant_vs_gguf_py: <ours / gguf-py speed on the SmolLM2 total>``.
A bench runner can import the file and call :func:`main`, which returns the figures as a dict.

Note: for F32, gguf-py returns a view of the input bytes while ``dequantize`` returns a fresh, writable
copy, so that row of the table compares a copy with no work at all.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import numpy as np

try:
    from bytes2logits import assets
except ImportError:  # running from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from bytes2logits import assets

import gguf
from gguf.quants import dequantize as gguf_dequantize

from bytes2logits.engine.gguf import GGML_BLOCK_SIZES, GGMLType, GGUFReader
from bytes2logits.engine.quants import DEQUANTIZE_TYPES, dequantize

# byte offsets of the fp16 scales in one block, so synthetic blocks get finite, ordinary scales
_HALF_FIELDS = {
    GGMLType.Q8_0: (0,), GGMLType.Q4_0: (0,), GGMLType.Q4_1: (0, 2), GGMLType.Q5_0: (0,),
    GGMLType.Q5_1: (0, 2), GGMLType.Q2_K: (80, 82), GGMLType.Q3_K: (108,), GGMLType.Q4_K: (0, 2),
    GGMLType.Q5_K: (0, 2), GGMLType.Q6_K: (208,),
}  # fmt: skip


def _theirs(raw2d: np.ndarray, t: GGMLType) -> np.ndarray:
    return gguf_dequantize(raw2d, gguf.GGMLQuantizationType(int(t)))


def _time(fn) -> float:
    start = time.perf_counter()
    out = fn()
    elapsed = time.perf_counter() - start
    del out
    return elapsed


def _synthetic(t: GGMLType, n_values: int, rng: np.random.Generator) -> tuple[np.ndarray, tuple[int, int]]:
    """Random bytes for a (rows, 4096) tensor of type t, with finite scales (and floats for F32/F16/BF16)."""
    per_block, block_bytes = GGML_BLOCK_SIZES[t]
    cols = 4096
    rows = max(1, n_values // cols)
    if t == GGMLType.F32:
        raw = rng.standard_normal(rows * cols, dtype=np.float32).view(np.uint8)
    elif t == GGMLType.F16:
        raw = rng.standard_normal(rows * cols).astype(np.float16).view(np.uint8)
    elif t == GGMLType.BF16:
        raw = (rng.standard_normal(rows * cols, dtype=np.float32).view(np.uint32) >> 16).astype("<u2")
        raw = raw.view(np.uint8)
    else:
        n_blocks = rows * cols // per_block
        raw = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
        for f in _HALF_FIELDS[t]:
            scales = (rng.standard_normal(n_blocks) * 0.01).astype(np.float16)
            raw[:, f : f + 2] = scales.view(np.uint8).reshape(n_blocks, 2)
    return raw.reshape(rows, -1), (rows, cols)


def bench_smollm2(repeats: int) -> dict | None:
    """Best-of-``repeats`` total time to dequantize every SmolLM2 tensor, ours and gguf-py's."""
    if not assets.is_fetched("smollm2"):
        return None
    with GGUFReader(assets.path("smollm2")) as r:
        jobs = []
        for info in r:
            raw = np.asarray(r.tensor_bytes(info.name))
            n_rows = info.n_elements // info.shape[-1]
            jobs.append((raw, info.ggml_type, info.shape, raw.reshape(n_rows, -1)))
        n_values = sum(int(np.prod(shape)) for _, _, shape, _ in jobs)
        for raw, t, shape, _ in jobs:  # warm the page cache and both code paths
            dequantize(raw, t, shape)
        best_ours = best_theirs = float("inf")
        for _ in range(repeats):
            gc.collect()
            ours = sum(_time(lambda raw=raw, t=t, shape=shape: dequantize(raw, t, shape)) for raw, t, shape, _ in jobs)
            best_ours = min(best_ours, ours)
            gc.collect()
            theirs = sum(_time(lambda rows=rows, t=t: _theirs(rows, t)) for _, t, _, rows in jobs)
            best_theirs = min(best_theirs, theirs)
    return {"tensors": len(jobs), **_figures(n_values, best_ours, best_theirs)}


def _figures(n_values: int, ours_s: float, theirs_s: float) -> dict:
    """The figures of one comparison: times, throughputs, and ours-vs-gguf-py speed ratio."""
    return {
        "values": n_values,
        "ours_s": ours_s,
        "gguf_py_s": theirs_s,
        "ours_mvalues_per_s": n_values / ours_s / 1e6,
        "gguf_py_mvalues_per_s": n_values / theirs_s / 1e6,
        "ratio": theirs_s / ours_s,
    }


def bench_synthetic(n_values: int, repeats: int, seed: int = 0) -> dict[str, dict]:
    """Best-of-``repeats`` time per supported type on a synthetic tensor of about ``n_values`` values."""
    rng = np.random.default_rng(seed)
    results = {}
    for t in sorted(DEQUANTIZE_TYPES):
        raw, shape = _synthetic(t, n_values, rng)
        dequantize(raw, t, shape)
        _theirs(raw, t)
        best_ours = best_theirs = float("inf")
        for _ in range(repeats):
            best_ours = min(best_ours, _time(lambda raw=raw, t=t, shape=shape: dequantize(raw, t, shape)))
            best_theirs = min(best_theirs, _time(lambda raw=raw, t=t: _theirs(raw, t)))
        results[t.name] = _figures(shape[0] * shape[1], best_ours, best_theirs)
        del raw
    return results


#: The types whose kernels lab 15 has a learner write (its answers are generated from these kernels).
LAB15_TYPES = frozenset({"Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K"})


def copy_bandwidth(repeats: int, n_bytes: int = 256 << 20) -> float:
    """This machine's memory-copy bandwidth in GB/s (read + write counted once each: 2 bytes per byte)."""
    src = np.ones(n_bytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    best = min(_time(lambda: np.copyto(dst, src)) for _ in range(max(3, repeats)))
    return 2 * n_bytes / best / 1e9


def _row(name: str, r: dict, bandwidth: float | None = None) -> str:
    line = (
        f"{name:<14} {r['values'] / 1e6:>9.1f} {r['ours_mvalues_per_s']:>11.0f} "
        f"{r['gguf_py_mvalues_per_s']:>11.0f} {r['ratio']:>7.2f}"
    )
    if bandwidth:
        written = r["ours_mvalues_per_s"] * 4e6 / 1e9  # float32 output, GB/s
        line += f" {written:>8.2f} {written / bandwidth:>8.0%}"
    return line


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark, print the table and the ratio line, and return the figures as a dict.

    Keys: ``smollm2`` (totals over the model's tensors, or None if the file is not fetched),
    ``synthetic`` (one entry per type name) and ``ratio_dequant_vs_gguf_py`` (the number on the last
    line: ours / gguf-py throughput on the SmolLM2 total, or on the synthetic total without the model).
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="best of this many runs (default 5)")
    parser.add_argument("--values", type=float, default=4.0,
                        help="million values per synthetic tensor (default 4; 0 skips them)")  # fmt: skip
    args = parser.parse_args(argv)

    with np.errstate(all="ignore"):
        bandwidth = copy_bandwidth(args.repeats)
        smol = bench_smollm2(args.repeats)
        synth = bench_synthetic(int(args.values * 1e6), args.repeats) if args.values > 0 else {}

    print(f"memory copy on this machine: {bandwidth:.1f} GB/s (np.copyto of 256 MB, read + write)")
    print(f"{'tensor':<14} {'M values':>9} {'ours M/s':>11} {'gguf-py M/s':>11} {'ratio':>7} {'out GB/s':>8} "
          f"{'of copy':>8}")
    if smol is None:
        print("SmolLM2        (not fetched: python -m bytes2logits.assets fetch smollm2)")
    else:
        print(_row(f"SmolLM2 ({smol['tensors']})", smol, bandwidth))
    for name, r in synth.items():
        print(_row(name + (" *" if name in LAB15_TYPES else ""), r, bandwidth))
    print("* lab 15's types: the lab's reference answers are these kernels. F32/F16/BF16 have no kernel: both "
          "sides run one NumPy cast (gguf-py returns F32 as a view, no copy at all).")

    if smol is not None:
        ratio = smol["ratio"]
    elif synth:
        ratio = sum(r["gguf_py_s"] for r in synth.values()) / sum(r["ours_s"] for r in synth.values())
    else:
        ratio = float("nan")
    print(f"ratio dequant_vs_gguf_py: {ratio:.2f}")
    return {"smollm2": smol, "synthetic": synth, "copy_gb_per_s": bandwidth,
            "ratio_dequant_vs_gguf_py": round(ratio, 2)}


if __name__ == "__main__":
    main()
