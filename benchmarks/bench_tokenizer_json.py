#!/usr/bin/env python3
"""tokenizer.json encoding: ``Tokenizer.from_file`` against Hugging Face ``tokenizers`` on the same file.

Three real files, one per model family: Qwen3's byte-level BPE (``qwen3-tokenizer``), BERT's WordPiece
(``bert-wordpiece``) and a SentencePiece Unigram model (``unigram-mon``). Each encodes the same text, the
Wikipedia sample of the ``enwiki`` asset (1 MB by default), as one string, without special tokens. HF runs
single-threaded (``RAYON_NUM_THREADS=1``, ``TOKENIZERS_PARALLELISM=false``, set before it is imported). Both
produce the same ids (checked here before anything is timed).

Ours is timed twice:

* **cold**: a freshly loaded tokenizer, its per-piece cache empty, so every distinct piece goes through the
  model once (HF has no such cache: this is the fair comparison, and what the ratio lines use);
* **warm**: the same text again, every piece already in the cache (what a long-running server sees).

Each figure is the best of ``--repeats`` runs (cold runs reload the tokenizer each time; loading is not timed).
Ends with ``ratio encode_vs_hf_bpe``, ``ratio encode_vs_hf_wordpiece`` and ``ratio encode_vs_hf_unigram``:
HF's time divided by ours (higher is better; targets 1.0, 0.5 and 0.25).
"""

from __future__ import annotations

import argparse
import bz2
import os
import re
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

FILES = {"bpe": "qwen3-tokenizer", "wordpiece": "bert-wordpiece", "unigram": "unigram-mon"}
TARGETS = {"bpe": 1.0, "wordpiece": 0.5, "unigram": 0.25}


def corpus(size: int) -> str:
    """``size`` characters of Wikipedia text (markup tags removed), repeated if the sample is shorter."""
    from bytes2logits import assets

    with bz2.open(assets.path("enwiki"), "rt", encoding="utf-8") as f:
        text = re.sub(r"<[^>]+>", "", f.read(4 * size))
    while len(text) < size:
        text += text
    return text[:size]


def best(fn, repeats: int) -> float:
    """The fastest of ``repeats`` calls of ``fn()`` (``fn`` may do untimed set-up and return the time)."""
    return min(fn() for _ in range(repeats))


def measure(kind: str, text: str, repeats: int) -> dict:
    """Times (seconds) for one file: HF, ours cold, ours warm; and whether the ids agree."""
    import tokenizers

    from bytes2logits import assets
    from bytes2logits.engine.tokenizer import Tokenizer

    path = assets.path(FILES[kind])
    hf = tokenizers.Tokenizer.from_file(str(path))
    hf.no_truncation()
    hf.no_padding()
    hf.encode_special_tokens = True
    ours = Tokenizer.from_file(path)
    same = ours.encode(text) == hf.encode(text, add_special_tokens=False).ids

    def hf_run():
        t0 = time.perf_counter()
        hf.encode(text, add_special_tokens=False)
        return time.perf_counter() - t0

    def cold_run():
        tok = Tokenizer.from_file(path)
        t0 = time.perf_counter()
        tok.encode(text)
        return time.perf_counter() - t0

    def warm_run():
        t0 = time.perf_counter()
        ours.encode(text)
        return time.perf_counter() - t0

    return {"hf": best(hf_run, repeats), "cold": best(cold_run, repeats), "warm": best(warm_run, repeats),
            "same": same}


def main(argv: list[str] | None = None) -> dict:
    """Run the three comparisons, print a table and the ratio lines; return the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1_000_000, help="characters of text to encode (default 1 MB)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        print("HF tokenizers is missing: pip install tokenizers (it comes with the course extras)")
        return {f"ratio_encode_vs_hf_{k}": None for k in FILES}
    text = corpus(args.size)
    print(f"text: {len(text):,} characters of the enwiki sample; best of {args.repeats} runs; HF single thread")
    print(f"{'model':10} {'file':16} {'HF s':>7} {'ours cold s':>12} {'ours warm s':>12} {'ids equal':>10}")
    out = {}
    for kind in FILES:
        r = measure(kind, text, args.repeats)
        print(f"{kind:10} {FILES[kind]:16} {r['hf']:7.3f} {r['cold']:12.3f} {r['warm']:12.3f} {str(r['same']):>10}")
        out[f"ratio_encode_vs_hf_{kind}"] = r["hf"] / r["cold"]
        out[f"warm_encode_vs_hf_{kind}"] = r["hf"] / r["warm"]
    for kind in FILES:
        print(f"  {kind}: warm cache {out[f'warm_encode_vs_hf_{kind}']:.2f}x HF (target for cold: "
              f">= {TARGETS[kind]}x)")
    for kind in FILES:
        print(f"ratio encode_vs_hf_{kind}: {out[f'ratio_encode_vs_hf_{kind}']:.2f}")
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
