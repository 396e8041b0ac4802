#!/usr/bin/env python3
"""The NumPy engine's speed next to llama.cpp's, measured in the same run, reported as ratios.

    python benchmarks/bench_engine.py [--n-prompt 256] [--n-decode 64] [--repeats 3] [--no-llama]
                                      [--lookup-draft 8] [--lookup-decode 160] [--no-lookup]

Both engines get the same work: a 256-token prompt of ordinary token ids evaluated in one call (logits
for the last position only), then greedy decoding of 64 tokens, one token per call, the next token
being the argmax of the logits. Runs alternate between the two engines (ours, llama.cpp, ours, …) and
the best of each is kept, so a noisy neighbour hurts both alike. llama.cpp runs the original Q4_1 file
with 2 threads; the NumPy engine has float32 weights and uses NumPy's BLAS with its default threads.

**Prompt-lookup decoding** (``generate(lookup=...)``) is measured on two real chat prompts, the model's
template applied to a request to correct a misspelt ~100-word paragraph (the answer copies most of it)
and to an open question (it copies little). On each, the NumPy engine's plain greedy decode and its
lookup decode generate the same answer (asserted: identical ids), and the table shows decode tok/s, the
guesses' acceptance rate and the speed-up. The yardsticks are llama.cpp's plain greedy decode of as many
tokens after the same prompt, and llama-cpp-python's own prompt lookup
(``LlamaPromptLookupDecoding(num_pred_tokens=<the same draft length>)`` as ``draft_model``, greedy), each
best of the same number of runs. A line before the table says what one verification call (draft + 1
positions) costs in one-token decode steps: lookup pays only when a call's guesses are right more often
than that, minus one.

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

__all__ = ["SPEC_PROMPTS", "measure_engine", "measure_lookup", "measure_llama_lookup", "main"]

# A paragraph with spelling mistakes (about 100 words) for the rewrite prompt.
_PARAGRAPH = (
    "Their are many reasons why peple enjoy traveling to new contries. Some like to see famous places and meet "
    "diffrent people, while others just want to relaxe on a beach and forget about there work for a few weeks. "
    "Traveling can also teach us alot about history, food and culture, and it often changes the way we think "
    "about our own home. However, it is importent to plan a trip carefuly, because unexpected problems can "
    "happen at any time. Many travelers recomend keeping a copy of your pasport and booking hotels in advanse, "
    "so that you are not suprised when you arrive late at night."
)
#: the prompts of the prompt-lookup rows: (user message, most tokens to generate)
SPEC_PROMPTS = {
    "rewrite": ("Correct the spelling mistakes in this paragraph and write it out again:\n\n" + _PARAGRAPH, 160),
    "open": ("What are the main causes of climate change, and what can each of us do about it?", 160),
}


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


def measure_lookup(model, tokenizer, prompt_ids: list[int], max_tokens: int, lookup) -> dict:
    """One greedy ``generate`` run (``lookup=None`` for plain decoding); its ids, decode time and lookup stats."""
    from bytes2logits.engine.generate import Sampler, generate

    model.reset()
    gen = generate(model, tokenizer, prompt_ids, sampler=Sampler.greedy(), max_tokens=max_tokens, lookup=lookup)
    for _ in gen:
        pass
    return {"ids": list(gen.tokens), "decode_s": gen.decode_seconds, "tok_s": gen.decode_tokens_per_second,
            "drafted": gen.drafted, "accepted": gen.accepted, "forward_calls": gen.forward_calls}


def verify_cost(model, n_cached: int, k: int, repeats: int = 5) -> float:
    """How many one-token decode steps one verification call of ``k + 1`` positions costs (best times)."""
    model.reset()
    model.forward(_prompt(model.vocab_size, n_cached, seed=1), last_only=True)
    new = _prompt(model.vocab_size, k + 1, seed=2)
    one, many = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        model.forward(new[:1], start_pos=n_cached, last_only=True)
        one.append(time.perf_counter() - t)
        t = time.perf_counter()
        model.forward(new, start_pos=n_cached)
        many.append(time.perf_counter() - t)
    return min(many) / min(one)


def _llama(path, n_ctx: int, threads: int, draft_model=None):
    """A llama-cpp-python model with bench_llama_cpp's settings (CPU, f16 KV cache, no flash attention)."""
    from bench_llama_cpp import _import_llama_cpp

    _import_llama_cpp()
    from llama_cpp import Llama

    return Llama(str(path), n_ctx=n_ctx, n_batch=512, n_ubatch=512, n_threads=threads, n_threads_batch=threads,
                 n_gpu_layers=0, flash_attn=False, seed=0, verbose=False, draft_model=draft_model)


def measure_llama_greedy(llm, prompt_ids: list[int], n_decode: int) -> dict:
    """llama.cpp's plain greedy decode after ``prompt_ids``: ``n_decode`` one-token evaluations (as bench_llama_cpp)."""
    import llama_cpp

    n_vocab, ctx = llm.n_vocab(), llm._ctx.ctx

    def last_logits() -> np.ndarray:
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))

    llm.reset()
    llm.eval(prompt_ids)
    ids = []
    nxt = int(np.argmax(last_logits()))
    t = time.perf_counter()
    for _ in range(n_decode):
        ids.append(nxt)
        llm.eval([nxt])
        nxt = int(np.argmax(last_logits()))
    decode_s = time.perf_counter() - t
    return {"ids": ids, "decode_s": decode_s, "tok_s": n_decode / decode_s}


def measure_llama_lookup(llm, prompt_ids: list[int], max_tokens: int, stop_ids) -> dict:
    """llama-cpp-python's prompt-lookup decode (``llm`` built with a ``draft_model``), greedy.

    Tokens are taken from ``Llama.generate`` until ``max_tokens`` or a stop id. The clock starts when the
    first token arrives (the prefill is behind it), so the speed is (tokens - 1) / time.
    """
    llm.reset()
    it = llm.generate(prompt_ids, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0, reset=True)
    ids = [int(next(it))]
    t = time.perf_counter()
    while len(ids) < max_tokens and ids[-1] not in stop_ids:
        ids.append(int(next(it)))
    decode_s = time.perf_counter() - t
    it.close()
    return {"ids": ids, "decode_s": decode_s, "tok_s": (len(ids) - 1) / decode_s if decode_s > 0 else 0.0}


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def lookup_rows(model, path: Path, args, fig: dict) -> None:
    """The prompt-lookup section: plain vs lookup greedy decode of the NumPy engine, and llama.cpp's two."""
    from bytes2logits.engine.lookup import LookupConfig
    from bytes2logits.engine.session import chat_prompt_ids
    from bytes2logits.engine.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_gguf(model.reader)
    lookup = LookupConfig(draft=args.lookup_draft)
    use_llama = not args.no_llama
    fig["lookup_verify_cost_steps"] = cost = verify_cost(model, 200, lookup.draft)
    print(f"\none verification call of {lookup.draft + 1} positions costs {cost:.2f} one-token decode steps "
          "(after 200 cached positions)")
    print(f"prompt-lookup decoding, greedy, draft {lookup.draft} tokens, n-grams {lookup.ngram[0]}..{lookup.ngram[1]}, "
          f"min_accepted {lookup.min_accepted:g} (best of {args.repeats}):")
    print(f"{'prompt':<8} {'tokens':>6} {'plain tok/s':>11} {'lookup tok/s':>12} {'speed-up':>8} {'accepted':>14} "
          f"{'calls':>5}" + (f" {'llama tok/s':>11} {'llama lookup':>12} {'its speed-up':>12}" if use_llama else ""))
    for name, (question, max_tokens) in SPEC_PROMPTS.items():
        ids = chat_prompt_ids(tokenizer, [{"role": "user", "content": question}])
        max_tokens = min(max_tokens, args.lookup_decode)
        plain, spec, lplain, lspec = [], [], [], []
        llm = llm_spec = None
        for _ in range(args.repeats):
            plain.append(measure_lookup(model, tokenizer, ids, max_tokens, None))
            spec.append(measure_lookup(model, tokenizer, ids, max_tokens, lookup))
            assert spec[-1]["ids"] == plain[-1]["ids"], f"{name}: lookup decoding changed the greedy ids"
            if use_llama:
                from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

                n = len(plain[-1]["ids"])
                if llm is None:
                    llm = _llama(path, len(ids) + n + 16, args.threads)
                    llm_spec = _llama(path, len(ids) + max_tokens + 16, args.threads,
                                      LlamaPromptLookupDecoding(num_pred_tokens=lookup.draft))
                lplain.append(measure_llama_greedy(llm, ids, n))
                lspec.append(measure_llama_lookup(llm_spec, ids, max_tokens, tokenizer.stop_ids))
        best = max(plain, key=lambda r: r["tok_s"])
        best_spec = max(spec, key=lambda r: r["tok_s"])
        rate = best_spec["accepted"] / best_spec["drafted"] if best_spec["drafted"] else 0.0
        speedup = best_spec["tok_s"] / best["tok_s"]
        fig[f"decode_tok_s_{name}"] = best["tok_s"]
        fig[f"decode_lookup_tok_s_{name}"] = best_spec["tok_s"]
        fig[f"lookup_acceptance_{name}"] = rate
        fig[f"lookup_speedup_{name}"] = speedup
        row = (f"{name:<8} {len(best['ids']):>6} {best['tok_s']:>11.1f} {best_spec['tok_s']:>12.1f} {speedup:>7.2f}x "
               f"{best_spec['accepted']:>4}/{best_spec['drafted']:<4} {rate:>4.0%} {best_spec['forward_calls']:>5}")
        if lplain:
            lp = max(r["tok_s"] for r in lplain)
            ls = max(lspec, key=lambda r: r["tok_s"])
            fig[f"llama_decode_tok_s_{name}"], fig[f"llama_lookup_tok_s_{name}"] = lp, ls["tok_s"]
            row += f" {lp:>11.1f} {ls['tok_s']:>12.1f} {ls['tok_s'] / lp:>11.2f}x"
            fig[f"llama_same_ids_{name}"] = _common_prefix(lplain[-1]["ids"], best["ids"])
            fig[f"llama_lookup_tokens_{name}"] = len(ls["ids"])
        print(row)
        del llm, llm_spec
    for name in SPEC_PROMPTS:
        if f"llama_same_ids_{name}" in fig:
            print(f"{name}: llama.cpp's plain greedy ids agree with ours for the first "
                  f"{fig[f'llama_same_ids_{name}']} tokens (Q4_1 kernels vs float32 weights)")
    for name in SPEC_PROMPTS:
        print(f"lookup decoding ({name}): {fig[f'lookup_acceptance_{name}']:.0%} of the guessed tokens accepted, "
              f"{fig[f'lookup_speedup_{name}']:.2f}x the plain greedy decode speed, same ids")
    if not use_llama:
        print("(llama.cpp not measured: run without --no-llama, after `make bench` has installed llama-cpp-python, "
              "for the ratios decode_lookup_vs_llama_cpp and decode_lookup_vs_llama_cpp_lookup)")
        return
    for suffix, name in (("", "rewrite"), ("_open", "open")):
        fig[f"ratio_decode_lookup_vs_llama_cpp{suffix}"] = (
            fig[f"decode_lookup_tok_s_{name}"] / fig[f"llama_decode_tok_s_{name}"])
        fig[f"ratio_decode_lookup_vs_llama_cpp_lookup{suffix}"] = (
            fig[f"decode_lookup_tok_s_{name}"] / fig[f"llama_lookup_tok_s_{name}"])
    for suffix in ("", "_open"):
        for key in ("decode_lookup_vs_llama_cpp", "decode_lookup_vs_llama_cpp_lookup"):
            print(f"ratio {key}{suffix}: {fig[f'ratio_{key}{suffix}']:.2f}")


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
    p.add_argument("--lookup-draft", type=int, default=8, help="prompt-lookup draft length (default 8)")
    p.add_argument("--lookup-decode", type=int, default=160, help="most tokens per prompt-lookup run (default 160)")
    p.add_argument("--no-lookup", action="store_true", help="skip the prompt-lookup rows")
    args = p.parse_args(argv)

    from bytes2logits import assets
    from bytes2logits.engine.model import Model

    path = Path(assets.path("smollm2"))
    rss0 = _rss_mib()
    t = time.perf_counter()
    # the cache's size does not change the speed (attention reads only the cached positions)
    model = Model.from_gguf(path, n_ctx=max(args.n_prompt + args.n_decode + 8, 512))
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

    floors: list[dict] = []
    for _ in range(args.repeats):
        # One round: the engine, its weight products alone (the ceilings), llama.cpp. Each figure is the
        # best of its rounds, so a burst of load on the machine hits all three alike.
        ours.append(measure_engine(model, args.n_prompt, args.n_decode))
        floors.append(measure_floors(model, args.n_prompt, args.n_decode))
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
    ceiling_rows(model, args, fig, best, {k: min(f[k] for f in floors) for k in floors[0]})
    few_row_rows(model, fig)
    if not args.no_lookup:
        lookup_rows(model, path, args, fig)
    return fig


def measure_floors(model, n_prompt: int, n_decode: int) -> dict:
    """One timing of the weight products alone for each engine figure, measured like it (seconds).

    ``decode_s``: ``n_decode`` passes of one decode step's products (every layer matrix and the output head
    on one float32 row), per pass; ``prefill_s``: the same products on ``n_prompt`` rows, the head on the
    last row only, as the prefill computes it.
    """
    from bytes2logits.lessons.speed_view import weight_products_seconds

    return {"decode_s": weight_products_seconds(model, 1, repeats=1, passes=n_decode),
            "prefill_s": weight_products_seconds(model, n_prompt, repeats=1)}


def ceiling_rows(model, args, fig: dict, best: dict, floor: dict) -> None:
    """The engine against this machine's own limits: its weight products alone, timed in the same rounds.

    * ``decode_vs_f32_ceiling``: the time of one decode step's weight products alone (the bytes a step must
      read, nothing else) over the measured time per decoded token. 1.0 would mean attention, norms, RoPE
      and Python cost nothing. Both are the best of the rounds, averaged over ``n_decode`` steps (passes).
    * ``prefill_vs_roofline``: the same products on ``n_prompt`` rows (BLAS sgemm on the real shapes), over
      the measured prefill time.
    """
    from bytes2logits.lessons.speed_view import call_cost

    decode_floor, prefill_floor = floor["decode_s"], floor["prefill_s"]
    per_token = best["decode_s"] / args.n_decode
    cost = call_cost(model, args.n_prompt, last_only=True)
    fig["sgemm_gflops"] = cost.matmul_flops / prefill_floor / 1e9
    fig["f32_ceiling_tok_s"] = 1.0 / decode_floor
    fig["ratio_decode_vs_f32_ceiling"] = decode_floor / per_token
    fig["ratio_prefill_vs_roofline"] = prefill_floor / best["prefill_s"]
    print(f"weight products alone: {decode_floor * 1e3:.1f} ms per decode step (a ceiling of "
          f"{fig['f32_ceiling_tok_s']:.1f} tok/s in float32), {prefill_floor * 1e3:.0f} ms for the "
          f"{args.n_prompt}-token prefill ({fig['sgemm_gflops']:.0f} GFLOP/s of sgemm)")
    print(f"ratio decode_vs_f32_ceiling: {fig['ratio_decode_vs_f32_ceiling']:.2f}")
    print(f"ratio prefill_vs_roofline: {fig['ratio_prefill_vs_roofline']:.2f}")


def few_row_rows(model, fig: dict, rows: tuple[int, ...] = (2, 9, 16, 32), repeats: int = 3) -> None:
    """The orientation ``ops.Linear`` does not use, timed against the one it does: every weight product of one
    call on ``k`` rows (a prompt-lookup verification has 2-9), as ``x @ W.T`` and as ``(W @ x.T).T``,
    alternately, best times.

    Prints ``ratio few_rows_k<k>_wxt_vs_xwt`` (> 1: the weight-on-the-left orientation would be faster).
    Seen here: 1.15-2x on a machine busy with other work, 0.82-1.09 on a quiet one; the engine keeps
    ``x @ W.T``.
    """
    from bytes2logits.lessons.speed_view import weight_matrices

    layers, head = weight_matrices(model)
    weights = [c.weight for c in layers] + [head.weight]
    rng = np.random.default_rng(0)
    print("weight products of one call on k rows (the engine computes x @ W.T):")
    for k in rows:
        xs = [rng.standard_normal((k, w.shape[1]), dtype=np.float32) for w in weights]
        plain, turned = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            for w, x in zip(weights, xs):
                x @ w.T
            plain.append(time.perf_counter() - t)
            t = time.perf_counter()
            for w, x in zip(weights, xs):
                np.ascontiguousarray((w @ x.T).T)
            turned.append(time.perf_counter() - t)
        fig[f"ratio_few_rows_k{k}_wxt_vs_xwt"] = min(plain) / min(turned)
        print(f"  k={k:<3} x @ W.T {min(plain) * 1e3:6.1f} ms   (W @ x.T).T {min(turned) * 1e3:6.1f} ms   "
              f"ratio few_rows_k{k}_wxt_vs_xwt: {fig[f'ratio_few_rows_k{k}_wxt_vs_xwt']:.2f}")


if __name__ == "__main__":
    main()
