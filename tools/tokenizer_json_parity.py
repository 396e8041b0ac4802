#!/usr/bin/env python3
"""The tokenizer.json parity table of the README: ``Tokenizer.from_file`` against Hugging Face ``tokenizers``.

For each real file (Qwen3, GPT-2, SmolLM2, BERT, a Unigram model, Llama 2) and each kind of text (UDHR in every
language of the ``udhr-samples`` asset, Botchan lines, Wikipedia, Python source, edge cases), counts the
texts whose ids, character offsets and decoded text equal HF's, with special-token text treated as text
(the engine's default; HF with ``encode_special_tokens=True``). ``tests/test_tokenizer_json.py`` uses the
same corpus and asserts what this prints.

Texts are left out, and counted apart, in two cases: BERT texts with a character on which Python's Unicode
tables and HF's disagree (a combining mark or a cased letter only one of them knows; see
:func:`unicode_disputed`), and, for the Unigram file, texts holding special-token text (see
:func:`special_text`).

Run: ``python tools/tokenizer_json_parity.py`` (prints a Markdown table).
"""

from __future__ import annotations

import bz2
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

FILES = {"qwen3": "Qwen3 (byte-level BPE, NFC)", "gpt2": "GPT-2 (byte-level BPE)",
         "smollm2": "SmolLM2 (byte-level BPE, digits)", "bert": "BERT all-MiniLM-L6-v2 (WordPiece)",
         "unigram-mon": "mon-tokenizer (Unigram, byte fallback)",
         "llama2": "Llama 2 (SentencePiece-style BPE, byte fallback)"}


def path(name: str) -> Path:
    """The tokenizer.json of ``name``: an asset, or a file HF writes (tools/make_tokenizer_json.py)."""
    from bytes2logits import assets

    if name == "qwen3":
        return assets.path("qwen3-tokenizer")
    if name == "bert":
        return assets.path("bert-wordpiece")
    if name == "unigram-mon":
        return assets.path("unigram-mon")
    if name == "llama2":
        return assets.path("llama2-tokenizer")
    import make_tokenizer_json

    return make_tokenizer_json.ensure(name)


def load(name: str):
    """``(ours, HF's)`` for one file; HF without truncation or padding."""
    import tokenizers

    from bytes2logits.engine.tokenizer import Tokenizer

    p = path(name)
    hf = tokenizers.Tokenizer.from_file(str(p))
    hf.no_truncation()
    hf.no_padding()
    return Tokenizer.from_file(p), hf


def corpus() -> dict[str, list[str]]:
    """The texts, by kind."""
    from bytes2logits import assets
    from bytes2logits.lessons.pitfalls import udhr_samples

    rng = random.Random(12)
    with bz2.open(assets.path("enwiki"), "rt", encoding="utf-8") as f:
        wiki = re.sub(r"<[^>]+>", "", f.read(400_000))
    code = (ROOT / "src" / "bytes2logits" / "engine" / "tokenizer.py").read_text(encoding="utf-8")
    return {
        "UDHR": [s.text for s in udhr_samples().values()],
        "Botchan": rng.sample(assets.botchan_text().splitlines(), 300),
        "Wikipedia": [wiki[i:i + 700] for i in range(0, len(wiki) - 700, 20_000)],
        "code": [code[i:i + 1500] for i in range(0, 30_000, 1500)],
        "edge cases": ["", " ", "  x  ", "\n\n", "a\tb\r\nc", "don't I'LL", "2024-12-01 3.14159 ٣٤٥ ½",
                       "naïve café e\u0301 ﬁ ① Å", "中文字符和日本語のテキスト", "👩\u200d💻 😀👍🏽",
                       "[CLS] <|im_end|> <s> </s>", "x" * 300, "-" * 200 + "=" * 100],
    }


def unicode_disputed(hf, text: str) -> bool:
    """True if ``text`` holds a character that HF's BERT normalizer and the engine's treat differently
    because their Unicode tables differ (Python 3.11 has Unicode 14; HF's Rust crates other versions)."""
    from bytes2logits.engine.normalizers import bert_normalize

    norm = hf.normalizer
    return any(not c.isascii() and bert_normalize("a" + c) != norm.normalize_str("a" + c) for c in set(text))


def compare(ours, hf, text: str) -> dict[str, bool]:
    """Which of ids, offsets, decode and stream agree with HF for one text (special-token text as text)."""
    hf.encode_special_tokens = True
    e = hf.encode(text, add_special_tokens=False)
    ids, offsets = ours.encode(text, return_offsets=True)
    stream = ours.stream()
    decoded = ours.decode(ids)
    return {"ids": ids == e.ids, "offsets": offsets == e.offsets,
            "decode": decoded == hf.decode(ids, skip_special_tokens=False),
            "stream": "".join([stream.step(i) for i in ids] + [stream.flush()]) == decoded}


def special_text(ours, text: str) -> bool:
    """HF's Unigram matches typed special-token text (``<s>``) as a vocabulary piece; the engine never turns
    user text into a special id (DESIGN §8). For a Unigram file such texts cannot agree with HF's ids; the
    test checks instead that they give no special id."""
    return ours.model == "Unigram" and any(t in text for t in ours.special_tokens)


def main() -> int:
    """Print the table."""
    texts = corpus()
    print("| file | " + " | ".join(f"{k} ({len(v)})" for k, v in texts.items()) + " |")
    print("|---|" + "---|" * len(texts))
    for name, label in FILES.items():
        ours, hf = load(name)
        cells = []
        for items in texts.values():
            kept = [t for t in items if not (name == "bert" and unicode_disputed(hf, t))
                    and not special_text(ours, t)]
            results = [compare(ours, hf, t) for t in kept]
            same = sum(all(r.values()) for r in results)
            note = f" ({len(items) - len(kept)} left out)" if len(kept) < len(items) else ""
            cells.append(f"{same}/{len(kept)}{note}")
        print(f"| {label} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
