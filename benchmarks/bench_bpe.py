#!/usr/bin/env python3
"""BPE benchmark: ``bytes2logits.lessons.bpe`` against HF ``tokenizers`` (training) and ``tiktoken`` (encoding).

* Training: 10 MB of real text to an 8192-token vocabulary (256 bytes + 7936 merges) with
  :func:`bytes2logits.lessons.bpe.train_bpe` and with HF's ``BpeTrainer`` on the same text and the same
  pre-tokenizer (``\\S+|\\s+``, then GPT-2's byte-level alphabet), single thread
  (``RAYON_NUM_THREADS=1``, ``TOKENIZERS_PARALLELISM=false``, set before ``tokenizers`` is imported).
* Encoding: the first 5 MB of the corpus with :class:`bytes2logits.lessons.bpe.FastBPETokenizer` built from our
  merges (and, for comparison, lab 04's :class:`~bytes2logits.lessons.bpe.BPETokenizer`, which gives the same ids),
  and with a ``tiktoken.Encoding`` built in memory from the same merges (no file is downloaded). Ours is
  timed cold (a fresh tokenizer, empty piece cache: every distinct piece is encoded once, which is the fair
  comparison with tiktoken, which has no cache; the ratio line uses this) and warm (the same text again).
  Each figure is the best of two or three runs.

Corpus: the Wikipedia sample of the gensim 4.4.0 wheel via ``bytes2logits.assets.path("enwiki")`` when that
asset exists, else ``--corpus PATH`` (plain text or ``.bz2``), else botchan.txt (``assets.path("botchan")``).
A corpus shorter than 10 MB is repeated and truncated to 10 MB, which the table says.

Needs: ``tokenizers`` (HF) and ``tiktoken`` from PyPI; a missing one is reported as ``nan`` with the
install command.

Ends with ``ratio train_bpe_vs_hf: <our time / HF time>`` (lower is better, target <= 3) and
``ratio encode_vs_tiktoken: <our MB/s / tiktoken MB/s>`` (higher is better, target >= 0.5).
"""

from __future__ import annotations

import argparse
import bz2
import math
import os
import sys
import time
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

MB = 1_000_000


def _read_text(path: Path) -> str:
    """Read a corpus file as UTF-8 text, decompressing ``.bz2``."""
    data = path.read_bytes()
    if path.suffix == ".bz2":
        data = bz2.decompress(data)
    return data.decode("utf-8", errors="replace")


def load_corpus(corpus: str | None, size: int) -> tuple[str, str]:
    """The benchmark corpus of ``size`` characters and a sentence saying where it came from."""
    from bytes2logits import assets

    source, text = None, None
    try:
        p = assets.path("enwiki")
        text, source = _read_text(Path(p)), f"asset enwiki ({p})"
    except Exception as exc:  # unknown asset name or not fetched yet
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if corpus:
            text, source = _read_text(Path(corpus)), f"--corpus {corpus} (asset enwiki unavailable: {why})"
        else:
            p = assets.path("botchan")
            text, source = _read_text(Path(p)), f"FALLBACK botchan.txt {p} (no enwiki asset, no --corpus: {why})"
    original = len(text)
    if original < size:
        text = (text * (size // original + 1))[:size]
        source += f"; {original / MB:.2f} M chars repeated to {size / MB:.0f} M"
    else:
        text = text[:size]
        source += f"; truncated from {original / MB:.2f} M chars"
    return text, source


def time_ours_train(text: str, vocab_size: int) -> tuple[float, dict, list]:
    """Train ``bytes2logits.lessons.bpe.train_bpe`` to ``vocab_size`` tokens; return seconds, vocab, merges."""
    from bytes2logits.lessons.bpe import train_bpe

    start = time.perf_counter()
    vocab, merges = train_bpe(text, vocab_size - 256, progress=sys.stderr.isatty())
    return time.perf_counter() - start, vocab, merges


def time_hf_train(text: str, vocab_size: int) -> tuple[float, int]:
    """Train HF ``tokenizers`` BPE (byte-level, ``\\S+|\\s+`` split, 1 thread); return seconds, #merges."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\S+|\s+"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=0, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    lines = text.splitlines(keepends=True)
    start = time.perf_counter()
    tok.train_from_iterator(lines, trainer=trainer, length=len(lines))
    elapsed = time.perf_counter() - start
    import json

    merges = json.loads(tok.to_str())["model"]["merges"]
    return elapsed, len(merges)


def time_encode(text: str, vocab: dict, merges: list) -> dict:
    """MB/s of our encoder (cold and warm cache) and of tiktoken built from the same merges."""
    from bytes2logits.lessons.bpe import BPETokenizer, FastBPETokenizer

    size = len(text.encode("utf-8")) / MB
    cold = warm = math.inf
    for _ in range(2):  # best of two, each with a fresh tokenizer (an empty cache); construction not timed
        tok = FastBPETokenizer(vocab, merges)
        start = time.perf_counter()
        ours = tok.encode(text)
        cold = min(cold, time.perf_counter() - start)
        start = time.perf_counter()
        tok.encode(text)
        warm = min(warm, time.perf_counter() - start)
    # The lab 04 tokenizer (one new piece at a time), cold, once: the figure the batching improves on.
    start = time.perf_counter()
    assert BPETokenizer(vocab, merges).encode(text) == ours, "BPETokenizer and FastBPETokenizer disagree"
    lab_cold = time.perf_counter() - start
    assert tok.decode(ours) == text, "round trip failed"
    out = {"ours_cold_MBps": size / cold, "ours_warm_MBps": size / warm, "lab_cold_MBps": size / lab_cold,
           "tiktoken_MBps": math.nan,
           "same_ids_fraction": math.nan, "tokens": len(ours)}
    try:
        import tiktoken
    except ImportError:
        print("tiktoken is not installed: pip install tiktoken   (reporting nan)")
        return out
    ranks = {bytes([b]): b for b in range(256)}
    for left, right in merges:
        ranks.setdefault(left + right, len(ranks))
    enc = tiktoken.Encoding(name="bytes2logits-bench", pat_str=r"\S+|\s+", mergeable_ranks=ranks,
                            special_tokens={})
    best = math.inf
    for _ in range(3):  # best of three (the first run also warms tiktoken up)
        start = time.perf_counter()
        theirs = enc.encode_ordinary(text)
        best = min(best, time.perf_counter() - start)
    out["tiktoken_MBps"] = size / best
    # Our ids are vocab ids (no specials here, so id == tiktoken rank); compare the token sequences.
    out["same_ids_fraction"] = float(ours == theirs) if len(ours) != len(theirs) else (
        sum(a == b for a, b in zip(ours, theirs)) / len(ours))
    return out


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark, print a table and the two ratio lines, return the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", help="plain-text or .bz2 corpus if the enwiki asset is not available")
    ap.add_argument("--mb", type=float, default=10.0, help="training corpus size in M characters")
    ap.add_argument("--encode-mb", type=float, default=5.0, help="encoding corpus size in M characters")
    ap.add_argument("--vocab-size", type=int, default=8192)
    args = ap.parse_args(argv)

    text, source = load_corpus(args.corpus, int(args.mb * MB))
    print(f"corpus: {source}")
    print(f"        {len(text.encode('utf-8')) / MB:.2f} MB UTF-8; vocab size {args.vocab_size}")
    ours_s, vocab, merges = time_ours_train(text, args.vocab_size)
    try:
        hf_s, hf_merges = time_hf_train(text, args.vocab_size)
    except ImportError:
        print("HF tokenizers is not installed: pip install tokenizers   (reporting nan)")
        hf_s, hf_merges = math.nan, 0
    enc = time_encode(text[: int(args.encode_mb * MB)], vocab, merges)

    rows = [
        ("train: bytes2logits.lessons.bpe.train_bpe", f"{ours_s:8.2f} s", f"{len(merges)} merges"),
        ("train: HF tokenizers BpeTrainer (1 thread)", f"{hf_s:8.2f} s", f"{hf_merges} merges"),
        ("encode: FastBPETokenizer, cold cache", f"{enc['ours_cold_MBps']:8.2f} MB/s", f"{enc['tokens']} tokens"),
        ("encode: FastBPETokenizer, warm cache", f"{enc['ours_warm_MBps']:8.2f} MB/s", ""),
        ("encode: BPETokenizer (lab 04), cold cache", f"{enc['lab_cold_MBps']:8.2f} MB/s", "same ids"),
        ("encode: tiktoken, same merges", f"{enc['tiktoken_MBps']:8.2f} MB/s",
         f"same ids: {enc['same_ids_fraction']:.4f}"),
    ]
    for name, value, note in rows:
        print(f"{name:<45} {value:>14}  {note}")
    ratio_train = ours_s / hf_s
    ratio_encode = enc["ours_cold_MBps"] / enc["tiktoken_MBps"]
    print(f"(warm-cache encode vs tiktoken: {enc['ours_warm_MBps'] / enc['tiktoken_MBps']:.2f})")
    print(f"ratio train_bpe_vs_hf: {ratio_train:.2f}")
    print(f"ratio encode_vs_tiktoken: {ratio_encode:.2f}")
    return {"train_ours_s": ours_s, "train_hf_s": hf_s, **enc, "ratio_train_bpe_vs_hf": ratio_train,
            "ratio_encode_vs_tiktoken": ratio_encode, "corpus": source}


if __name__ == "__main__":
    main()
