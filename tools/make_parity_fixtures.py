#!/usr/bin/env python3
"""Produce the llama.cpp parity fixtures in ``tests/fixtures/parity/``.

Run with the tooling venv (see ``tools/README.md``)::

    /tmp/toolvenv/bin/python tools/make_parity_fixtures.py            # everything
    /tmp/toolvenv/bin/python tools/make_parity_fixtures.py --only tiny

What it records (all with llama-cpp-python on the CPU, 2 threads, flash attention OFF, one batch per
prompt, logits for every position):

``smollm2_exact.npz``
    llama.cpp on an F32 re-export of SmolLM2-135M-Instruct (every tensor of the Q4_1 file dequantized with
    ``gguf.quants.dequantize``, all metadata copied, ``general.file_type`` set to ALL_F32) with an f32 KV
    cache. The engine runs the original Q4_1 file with ``numerics="exact"``: its dequantization is
    bit-exact with gguf-py, so both sides use identical weights and only float32 arithmetic differs.
``smollm2_ggml.npz``
    llama.cpp on the original Q4_1 file with its default f16 KV cache: the reference for the engine's
    ``numerics="ggml"`` mode (top-1 agreement, greedy continuations).
``tiny_<arch>.npz`` for llama, qwen2, qwen3
    Random-weight F32 models written by ``tools/tiny_models.py`` (the file itself is not committed: the
    tests regenerate it and check the sha256 stored in the manifest), f32 KV cache, full logits.
``manifest.json``
    Versions, the exact llama.cpp settings, file sha256s, prompt texts and messages, token ids, array
    layouts, date.

Per SmolLM2 prompt ``k`` (``p{k}_`` prefix) the npz holds:
``ids`` [T] int32 prompt ids; ``top_ids``/``top_logits`` [T, 64] the 64 largest logits per position,
sorted descending (ties by id); ``sample_logits`` [T, 256] the logits at the shared ``sample_ids`` [256];
``argmax`` [T]; ``gen_ids`` [32] the greedy continuation (argmax over the full logits, computed here, not
by llama.cpp's sampler; generation does NOT stop at end-of-turn tokens); ``gen_top_ids``/``gen_top_logits``
[32, 64]: row ``j`` is the top-64 of the logits ``gen_ids[j]`` was chosen from (row 0 = last prompt
position, row ``j>0`` = the logits after feeding ``gen_ids[j-1]`` at position ``T+j-1``).

Everything except the manifest's ``generated_utc`` is deterministic: the npz files are written with a
fixed zip timestamp, and llama.cpp's CPU backend is deterministic for a fixed thread count and batch.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import io
import json
import os
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT_DIR = REPO / "tests" / "fixtures" / "parity"
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(1, str(REPO / "src"))

from tiny_models import ARCHS, sha256_file, write_tiny_gguf  # noqa: E402

N_THREADS = 2
N_CTX = 512
N_BATCH = 512  # = n_ubatch: every prompt is one batch and one micro-batch
TOP_K = 64
N_SAMPLE = 256
SAMPLE_SEED = 20261130
N_GEN = 32
TINY_N_IDS = 24
TINY_N_GEN = 8
TINY_IDS_SEED = 7
GGML_TYPE_F32 = 0
GGML_TYPE_F16 = 1

# Five chat conversations, rendered with SmolLM2's own chat template (add_generation_prompt=True).
PROMPTS: list[dict] = [
    {
        "name": "short",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Name a primary color."},
        ],
    },
    {
        "name": "default_system",
        "messages": [
            {"role": "user", "content": "What is the capital of France, and why is it famous?"},
        ],
    },
    {
        "name": "non_ascii",
        "messages": [
            {"role": "user",
             "content": "Traduis : « Le café est très chaud. » Écris aussi « Zürich ». 日本語で「ありがとう」は？ 🙂"},
        ],
    },
    {
        "name": "multi_turn",
        "messages": [
            {"role": "system", "content": "You are a friendly math tutor."},
            {"role": "user", "content": "What is 12 times 7?"},
            {"role": "assistant", "content": "12 times 7 is 84."},
            {"role": "user",
             "content": "And if I add 16 to that, then divide by 4? Explain the steps simply."},
        ],
    },
    {
        "name": "long",
        "messages": [
            {"role": "user", "content": (
                "Summarize the following paragraph in one sentence.\n\n"
                "The water cycle describes how water moves between the oceans, the atmosphere and the land. "
                "Sunlight heats the sea, and some of the water evaporates. The vapour rises, cools and "
                "condenses into droplets that form clouds. When the droplets grow heavy they fall as rain "
                "or snow, and the water flows back to the sea, where the cycle begins again."
            )},
        ],
    },
]


# ----------------------------------------------------------------------------------------------- helpers

def _stable_top(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k ids (descending logit, ties by smaller id) and their logits, row-wise."""
    order = np.argsort(-logits, axis=-1, kind="stable")[..., :k].astype(np.int32)
    return order, np.take_along_axis(logits, order, axis=-1).astype(np.float32)


def save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Like ``np.savez_compressed`` but byte-for-byte reproducible (fixed zip timestamps, sorted keys)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key in sorted(arrays):
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            arr_buf = io.BytesIO()
            np.lib.format.write_array(arr_buf, np.ascontiguousarray(arrays[key]), allow_pickle=False)
            zf.writestr(info, arr_buf.getvalue(), compresslevel=9)
    path.write_bytes(buf.getvalue())


def smollm2_path() -> Path:
    try:
        from bytes2logits import assets

        return Path(assets.path("smollm2"))
    except Exception:  # not installed / not fetched: fall back to the default cache location
        p = Path.home() / ".cache" / "bytes2logits" / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
        if not p.exists():
            sys.exit(f"SmolLM2 not found at {p}; fetch it with: python -m bytes2logits.assets fetch smollm2")
        return p


def work_dir() -> Path:
    base = os.environ.get("BYTES2LOGITS_CACHE")
    d = (Path(base).expanduser() if base else Path.home() / ".cache" / "bytes2logits") / "parity"
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_f32_export(src: Path, dst: Path) -> str:
    """Dequantize every tensor of ``src`` to F32 with gguf-py and write ``dst``; return dst's sha256.

    Reuses ``dst`` when a side-car records the same source sha256 and the export's own sha256 still
    matches (the export is deterministic, so a rerun would write the same bytes).
    """
    import gguf

    src_sha = sha256_file(src)
    stamp = dst.with_suffix(".json")
    if dst.exists() and stamp.exists():
        meta = json.loads(stamp.read_text())
        if meta.get("source_sha256") == src_sha and meta.get("gguf_py") == _gguf_version():
            if sha256_file(dst) == meta.get("sha256"):
                return meta["sha256"]
    print(f"writing F32 re-export {dst} ...", flush=True)
    r = gguf.GGUFReader(str(src))
    arch = r.fields["general.architecture"].contents()
    tmp = dst.with_suffix(".tmp")
    w = gguf.GGUFWriter(str(tmp), arch)
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = field.types[0]
        if key == "general.file_type":
            w.add_key_value(key, int(gguf.LlamaFileType.ALL_F32), vtype)
            continue
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(key, field.contents(), vtype, sub)
    for t in r.tensors:
        arr = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)
        shape = tuple(int(n) for n in reversed(t.shape))  # numpy order = reversed ne
        w.add_tensor(t.name, np.ascontiguousarray(arr.reshape(shape)),
                     raw_dtype=gguf.GGMLQuantizationType.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(dst)
    sha = sha256_file(dst)
    stamp.write_text(json.dumps({"source": str(src), "source_sha256": src_sha, "sha256": sha,
                                 "gguf_py": _gguf_version()}, indent=1))
    return sha


def _gguf_version() -> str:
    from importlib.metadata import version

    return version("gguf")


def render_chat(template: str, messages: list[dict]) -> str:
    """Render ``messages`` with the model's jinja chat template, as Hugging Face does."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, add_generation_prompt=True)


# ------------------------------------------------------------------------------------------- llama.cpp

def open_llama(path: Path, *, f32_kv: bool, n_ctx: int = N_CTX):
    from llama_cpp import Llama

    kw = dict(n_ctx=n_ctx, n_batch=N_BATCH, n_ubatch=N_BATCH, n_threads=N_THREADS, n_threads_batch=N_THREADS,
              n_gpu_layers=0, flash_attn=False, logits_all=True, seed=0, verbose=False)
    if f32_kv:
        kw.update(type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32)
    return Llama(str(path), **kw)


def settings_record(*, f32_kv: bool, n_ctx: int = N_CTX) -> dict:
    return {
        "n_ctx": n_ctx, "n_batch": N_BATCH, "n_ubatch": N_BATCH, "n_threads": N_THREADS,
        "n_threads_batch": N_THREADS, "n_gpu_layers": 0, "flash_attn": False,
        "type_k": "f32" if f32_kv else "f16 (llama.cpp default)",
        "type_v": "f32" if f32_kv else "f16 (llama.cpp default)",
        "logits_all": True, "use_mmap": True, "backend": "CPU",
        "prompt_eval": "one llama_decode call for the whole prompt (n_tokens <= n_batch = n_ubatch)",
        "decode": "one llama_decode call per generated token; next token = argmax of the full logits "
                  "computed in NumPy (first index on ties)",
    }


def run_sequence(llm, ids: list[int], n_gen: int) -> tuple[np.ndarray, list[int], np.ndarray]:
    """Logits for every prompt position, the greedy ids, and the logits each greedy id came from."""
    llm.reset()
    llm.eval(ids)
    prompt_logits = np.array(llm.scores[: len(ids)], dtype=np.float32, copy=True)
    gen_ids: list[int] = []
    gen_logits = [prompt_logits[-1]]
    for j in range(n_gen):
        nxt = int(np.argmax(gen_logits[-1]))
        gen_ids.append(nxt)
        if j == n_gen - 1:
            break
        llm.eval([nxt])
        gen_logits.append(np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32, copy=True))
    return prompt_logits, gen_ids, np.stack(gen_logits)


# -------------------------------------------------------------------------------------------- SmolLM2

def make_smollm2(manifest: dict) -> dict[str, int]:
    import gguf

    q41 = smollm2_path()
    f32 = work_dir() / "SmolLM2-135M-Instruct.F32.gguf"
    q41_sha = sha256_file(q41)
    t0 = time.time()
    f32_sha = write_f32_export(q41, f32)
    print(f"F32 re-export ready ({time.time() - t0:.0f}s): {f32} sha256 {f32_sha}", flush=True)

    reader = gguf.GGUFReader(str(q41))
    template = reader.fields["tokenizer.chat_template"].contents()
    add_bos_meta = bool(reader.fields["tokenizer.ggml.add_bos_token"].contents()) \
        if "tokenizer.ggml.add_bos_token" in reader.fields else None
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    rng = np.random.default_rng(SAMPLE_SEED)
    sample_ids = np.sort(rng.choice(n_vocab, N_SAMPLE, replace=False)).astype(np.int32)

    levels = {
        "exact": {"file": f32, "sha256": f32_sha, "f32_kv": True,
                  "engine": "Model.from_gguf(<Q4_1 file>, numerics='exact')",
                  "description": "llama.cpp on the F32 re-export (weights identical to the engine's exact "
                                 "dequantization of the Q4_1 file), f32 KV cache"},
        "ggml": {"file": q41, "sha256": q41_sha, "f32_kv": False,
                 "engine": "Model.from_gguf(<Q4_1 file>, numerics='ggml')",
                 "description": "llama.cpp on the original Q4_1 file, default f16 KV cache"},
    }

    prompts_out = []
    rendered = [render_chat(template, p["messages"]) for p in PROMPTS]
    token_ids: list[list[int]] | None = None
    argmaxes: dict[str, list[np.ndarray]] = {}
    sizes = {}
    for level, spec in levels.items():
        llm = open_llama(spec["file"], f32_kv=spec["f32_kv"])
        if token_ids is None:
            token_ids = []
            for text in rendered:
                plain = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
                with_special = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
                assert plain == with_special, "SmolLM2 adds no BOS: add_special must not change the ids"
                assert len(plain) + N_GEN <= N_CTX and len(plain) <= N_BATCH
                token_ids.append(plain)
            add_bos_llama = bool(llm._model.add_bos_token())
            manifest["smollm2"] = {
                "q4_1_file": q41.name, "q4_1_sha256": q41_sha,
                "f32_export_file": f32.name, "f32_export_sha256": f32_sha,
                "f32_export_recipe": "every tensor gguf.quants.dequantize()d to F32 with gguf-py "
                                     f"{_gguf_version()}, all metadata copied in order, general.file_type "
                                     "= 0 (ALL_F32); written to the user cache, not the repo",
                "n_vocab": n_vocab,
                "add_bos_token_metadata": add_bos_meta,
                "add_bos_llama_cpp": add_bos_llama,
                "bos_token_id": int(llm.token_bos()), "eos_token_id": int(llm.token_eos()),
                "tokenization": "llama.cpp llama_tokenize(text, add_special=False, parse_special=True); "
                                "identical with add_special=True since the model has add_bos_token=false",
                "chat_template_rendering": "jinja2 ImmutableSandboxedEnvironment(trim_blocks=True, "
                                           "lstrip_blocks=True), add_generation_prompt=True",
                "top_k": TOP_K, "n_sample": N_SAMPLE, "sample_seed": SAMPLE_SEED,
                "sample_ids_rule": f"np.sort(np.random.default_rng({SAMPLE_SEED}).choice(n_vocab, "
                                   f"{N_SAMPLE}, replace=False))",
                "n_gen": N_GEN,
                "levels": {},
            }
            for p, text, ids in zip(PROMPTS, rendered, token_ids):
                prompts_out.append({"name": p["name"], "messages": p["messages"], "text": text,
                                    "ids": [int(i) for i in ids], "n_tokens": len(ids)})
            manifest["smollm2"]["prompts"] = prompts_out

        arrays: dict[str, np.ndarray] = {"sample_ids": sample_ids}
        argmaxes[level] = []
        texts = []
        t0 = time.time()
        for k, ids in enumerate(token_ids):
            logits, gen_ids, gen_logits = run_sequence(llm, ids, N_GEN)
            top_ids, top_logits = _stable_top(logits, TOP_K)
            g_ids, g_logits = _stable_top(gen_logits, TOP_K)
            am = np.argmax(logits, axis=-1).astype(np.int32)
            arrays.update({
                f"p{k}_ids": np.asarray(ids, dtype=np.int32),
                f"p{k}_top_ids": top_ids, f"p{k}_top_logits": top_logits,
                f"p{k}_sample_logits": logits[:, sample_ids].astype(np.float32),
                f"p{k}_argmax": am,
                f"p{k}_gen_ids": np.asarray(gen_ids, dtype=np.int32),
                f"p{k}_gen_top_ids": g_ids, f"p{k}_gen_top_logits": g_logits,
            })
            argmaxes[level].append(am)
            text = llm.detokenize(gen_ids, special=True).decode("utf-8", "replace")
            texts.append(text)
            print(f"  [{level}] prompt {k} ({PROMPTS[k]['name']}, {len(ids)} tokens) -> {text!r}", flush=True)
        del llm
        out = OUT_DIR / f"smollm2_{level}.npz"
        save_npz(out, arrays)
        sizes[out.name] = out.stat().st_size
        manifest["smollm2"]["levels"][level] = {
            "npz": out.name, "model_file": spec["file"].name, "model_sha256": spec["sha256"],
            "engine": spec["engine"], "description": spec["description"],
            "llama_cpp_settings": settings_record(f32_kv=spec["f32_kv"]),
            "greedy_texts": texts,
            "seconds": round(time.time() - t0, 1),
        }
    agree = [float(np.mean(a == b)) for a, b in zip(argmaxes["exact"], argmaxes["ggml"])]
    manifest["smollm2"]["exact_vs_ggml_top1_agreement"] = agree
    print(f"  llama.cpp exact (F32) vs ggml (Q4_1) top-1 agreement per prompt: "
          f"{', '.join(f'{a:.3f}' for a in agree)}")
    return sizes


# ----------------------------------------------------------------------------------------- tiny models

def tiny_ids(n_vocab: int) -> list[int]:
    rng = np.random.default_rng(TINY_IDS_SEED)
    return [int(i) for i in rng.integers(0, n_vocab, TINY_N_IDS)]


def make_tiny(manifest: dict) -> dict[str, int]:
    sizes = {}
    manifest["tiny"] = {}
    with tempfile.TemporaryDirectory() as td:
        for arch in ARCHS:
            info = write_tiny_gguf(Path(td) / f"tiny-{arch}.gguf", arch, seed=0)
            ids = tiny_ids(info["n_vocab"])
            llm = open_llama(Path(info["path"]), f32_kv=True, n_ctx=64)
            logits, gen_ids, gen_logits = run_sequence(llm, ids, TINY_N_GEN)
            del llm
            out = OUT_DIR / f"tiny_{arch}.npz"
            save_npz(out, {"ids": np.asarray(ids, dtype=np.int32), "logits": logits,
                           "gen_ids": np.asarray(gen_ids, dtype=np.int32), "gen_logits": gen_logits})
            sizes[out.name] = out.stat().st_size
            meta = {k: v for k, v in info.items() if k != "path"}
            meta.update({"file": Path(info["path"]).name, "npz": out.name,
                         "writer": "tools/tiny_models.py write_tiny_gguf(path, arch, seed=0)",
                         "ids_rule": f"np.random.default_rng({TINY_IDS_SEED})"
                                     f".integers(0, n_vocab, {TINY_N_IDS})",
                         "n_gen": TINY_N_GEN,
                         "llama_cpp_settings": settings_record(f32_kv=True, n_ctx=64),
                         "logit_std": float(logits.std()),
                         "argmax": [int(i) for i in logits.argmax(-1)]})
            manifest["tiny"][arch] = meta
            print(f"  [tiny {arch}] sha256 {info['sha256'][:16]}… logits std {logits.std():.2f}, "
                  f"argmax {logits.argmax(-1)[:8].tolist()}…, greedy {gen_ids}", flush=True)
    return sizes


# ------------------------------------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["smollm2", "tiny"], help="regenerate only one part (the manifest "
                    "keeps the other part's entry)")
    args = ap.parse_args(argv)
    try:
        import llama_cpp
    except ImportError:
        sys.exit("llama_cpp is not importable: install the tooling venv as described in tools/README.md")
    import gguf  # noqa: F401

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    man_path = OUT_DIR / "manifest.json"
    old = json.loads(man_path.read_text()) if man_path.exists() else {}
    manifest: dict = {
        "generated_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "generator": "tools/make_parity_fixtures.py",
        "llama_cpp_python": llama_cpp.__version__,
        "gguf_py": _gguf_version(),
        "numpy": np.__version__,
        "llama_cpp_system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
        "notes": [
            "logits are float32 as returned by llama_get_logits; positions are 0-based",
            "greedy = argmax over the full logit vector (first index on ties), "
            "no stopping at EOS / <|im_end|>",
            "flash attention is OFF everywhere; every prompt is evaluated in one batch/micro-batch",
        ],
    }
    sizes: dict[str, int] = {}
    if args.only in (None, "smollm2"):
        sizes.update(make_smollm2(manifest))
    elif "smollm2" in old:
        manifest["smollm2"] = old["smollm2"]
    if args.only in (None, "tiny"):
        sizes.update(make_tiny(manifest))
    elif "tiny" in old:
        manifest["tiny"] = old["tiny"]
    man_path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")

    total = sum(p.stat().st_size for p in OUT_DIR.iterdir() if p.is_file())
    print("\nfixtures in", OUT_DIR.relative_to(REPO))
    for p in sorted(OUT_DIR.iterdir()):
        digest = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
        print(f"  {p.name:24s} {p.stat().st_size / 1024:8.1f} KiB  sha256 {digest}")
    print(f"  total {total / 1024:.1f} KiB")
    if "smollm2" in manifest:
        for p in manifest["smollm2"]["prompts"]:
            print(f"  prompt {p['name']:15s} {p['n_tokens']:4d} tokens")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
