#!/usr/bin/env python3
"""``make bench``: every benchmark of the project, ending with one ``ratio <name>: <value>`` line per figure.

The ratios compare this project with a peer measured in the same run on the same machine (llama.cpp via
llama-cpp-python, gguf-py); absolute speeds differ between machines, ratios much less. Targets (issue 3):
prefill >= 2.5x llama.cpp, decode >= 0.5x llama.cpp, dequantization faster than gguf-py; (issue 4) BPE
training <= 3x the time of HF tokenizers' trainer, encoding >= 0.5x tiktoken's throughput; (issue 12)
tokenizer.json encoding against HF tokenizers on the same file: BPE >= 1.0x, WordPiece >= 0.5x, Unigram >= 0.25x.
Prompt-lookup decoding (greedy, same ids as plain decoding) on a rewrite prompt, and on an open question (``_open``):
our lookup decode against llama.cpp's plain greedy decode and against llama-cpp-python's own prompt lookup.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    import bench_bpe
    import bench_dequant
    import bench_engine
    import bench_grading
    import bench_tokenizer_json

    print("== dequantization: bytes2logits.engine.quants vs gguf-py ==")
    dq = bench_dequant.main(["--repeats", "3"])
    print()
    print("== forward pass: NumPy engine vs llama.cpp (SmolLM2-135M-Instruct) ==")
    eng = bench_engine.main([])
    print()
    print("== BPE: train_bpe vs HF tokenizers, encode vs tiktoken ==")
    bpe = bench_bpe.main([])
    print()
    print("== tokenizer.json: Tokenizer.from_file vs HF tokenizers (same file, single thread) ==")
    tj = bench_tokenizer_json.main([])
    print()
    print("== grading: a call through the sandboxed worker vs in-process ==")
    grading = bench_grading.main([])
    print()
    print("== summary ==")
    ratios = {
        "prefill_vs_llama_cpp": eng.get("ratio_prefill_vs_llama_cpp"),
        "decode_vs_llama_cpp": eng.get("ratio_decode_vs_llama_cpp"),
        "decode_vs_f32_ceiling": eng.get("ratio_decode_vs_f32_ceiling"),
        "prefill_vs_roofline": eng.get("ratio_prefill_vs_roofline"),
        "decode_lookup_vs_llama_cpp": eng.get("ratio_decode_lookup_vs_llama_cpp"),
        "decode_lookup_vs_llama_cpp_lookup": eng.get("ratio_decode_lookup_vs_llama_cpp_lookup"),
        "decode_lookup_vs_llama_cpp_open": eng.get("ratio_decode_lookup_vs_llama_cpp_open"),
        "decode_lookup_vs_llama_cpp_lookup_open": eng.get("ratio_decode_lookup_vs_llama_cpp_lookup_open"),
        "dequant_vs_gguf_py": dq["ratio_dequant_vs_gguf_py"],
        "train_bpe_vs_hf": bpe.get("ratio_train_bpe_vs_hf"),
        "encode_vs_tiktoken": bpe.get("ratio_encode_vs_tiktoken"),
        "encode_vs_hf_bpe": tj.get("ratio_encode_vs_hf_bpe"),
        "encode_vs_hf_wordpiece": tj.get("ratio_encode_vs_hf_wordpiece"),
        "encode_vs_hf_unigram": tj.get("ratio_encode_vs_hf_unigram"),
        "proxy_call_vs_inprocess": grading.get("ratio_proxy_call_vs_inprocess"),
    }
    for name, value in ratios.items():
        print(f"ratio {name}: {value:.2f}" if value is not None else f"ratio {name}: nan")
    return 0


if __name__ == "__main__":
    sys.exit(main())
