"""Tiny random-weight GGUF models for parity tests: ``llama``, ``qwen2`` and ``qwen3``.

:func:`write_tiny_gguf` writes a small, fully specified F32 GGUF that llama.cpp loads and runs, so that
the engine can be compared with llama.cpp on architectures other than the course's SmolLM2 (a
``llama``-architecture model). It needs only NumPy and gguf-py (``gguf==0.19.0``, a test dependency of
the project); it never imports llama.cpp. The same ``(arch, seed)`` always produces the same bytes,
which is what lets the committed fixtures record a sha256 and the tests regenerate the file instead of
committing it.

The three models (see :data:`SPECS`)
-----------------------------------
=======  ======  =====  ========  ========  ====  =====  ==========  ======  ==============================
arch     n_embd  layers heads/kv  head_dim  n_ff  vocab  rope base   eps     extras
=======  ======  =====  ========  ========  ====  =====  ==========  ======  ==============================
llama    64      2      4 / 2     16        160   272    10000       1e-5    untied ``output.weight``
qwen2    64      2      4 / 2     16        128   272    1000000     1e-6    q/k/v biases, tied output
qwen3    64      2      4 / 2     32        128   272    1000000     1e-6    q_norm/k_norm, head_dim*heads
                                                                             != n_embd, untied output
=======  ======  =====  ========  ========  ====  =====  ==========  ======  ==============================

All three use GQA (2 query heads per KV head), SwiGLU feed-forward (``down(silu(gate(x)) * up(x))``),
RMSNorm and a context length of 256. qwen3 has ``attention.key_length = value_length = 32`` with
``n_embd = 64`` and 4 heads, so Q is 64 -> 128 and ``attn_output`` is 128 -> 64: an engine that assumes
``head_dim = n_embd / n_head`` fails on it (llama.cpp reads the key/value length keys).

RoPE in llama.cpp (read from the llama.cpp source, ``src/llama-model.cpp`` ``llama_model_rope_type``)
------------------------------------------------------------------------------------------------------
* ``LLM_ARCH_LLAMA`` -> ``LLAMA_ROPE_TYPE_NORM``: "normal" RoPE rotates *adjacent* pairs
  ``(x[2i], x[2i+1])`` of each head by angle ``pos * base**(-2i/n_rot)``.
* ``LLM_ARCH_QWEN2`` and ``LLM_ARCH_QWEN3`` -> ``LLAMA_ROPE_TYPE_NEOX``: rotates pairs
  ``(x[i], x[i + n_rot/2])`` (the "rotate_half" layout of Hugging Face), same angles.

Checked against llama.cpp itself (the copy vendored in llama-cpp-python 0.3.36, llama.cpp commit
0c1e570): a float64 NumPy forward pass of these tiny models with adjacent-pair RoPE reproduces
llama.cpp's logits for ``llama`` to 2e-6 and misses by ~3.5 with NEOX RoPE; with NEOX RoPE it
reproduces ``qwen2``/``qwen3`` to 4e-6 and misses by >3 with adjacent pairs.

In ggml's CPU kernel (``ggml/src/ggml-cpu/ops.cpp``: ``ggml_rope_cache_init`` / ``rotate_pairs``) the
angle for pair ``i`` is computed in float32 by repeated multiplication ``theta *= powf(base, -2/n_rot)``
starting from ``theta = pos``, and the rotation is ``x0*cos - x1*sin, x0*sin + x1*cos``.

Why the HF -> GGUF Q/K permutation does not matter here: Hugging Face's Llama applies RoPE in the NEOX
layout, and ``convert_hf_to_gguf.py`` permutes the rows of ``q_proj``/``k_proj`` (per head) so that the
GGUF file, run with llama.cpp's *normal* (adjacent-pair) RoPE, computes exactly the same function. The
permutation is a property of the conversion, not of the GGUF format: a GGUF's ``attn_q``/``attn_k``
weights are simply "the weights llama.cpp multiplies by, then applies the arch's RoPE type to". These
random models were never in HF layout, so nothing is permuted; an engine must apply, to the weights as
stored, adjacent-pair RoPE for ``llama`` and NEOX RoPE for ``qwen2``/``qwen3`` — exactly what it must do
for a real converted file too.

Other llama.cpp facts these models exercise
-------------------------------------------
* Attention scale is ``1/sqrt(head_dim)`` for all three (``attention.scale`` is not set).
* Biases: llama.cpp loads ``attn_q/k/v.bias`` whenever they are present (they are optional for every
  arch), so only qwen2 has them here.
* qwen3 applies RMSNorm with weight ``attn_q_norm`` / ``attn_k_norm`` (length ``head_dim``, same eps as
  the layer norms) to every head of Q and K *before* RoPE.
* Tied output: when ``output.weight`` is absent llama.cpp uses ``token_embd.weight`` as the output matrix.
* Tokenizer: ``gpt2`` (byte-level BPE) with pre-tokenizer ``default``: ids 0..255 are the 256 byte
  tokens (byte ``b`` is id ``b``, spelled with the GPT-2 byte-to-unicode map), then a few merges, then 3
  control tokens. ``add_bos_token`` is false. The tokenizer is only there because llama.cpp requires
  one; the parity fixtures evaluate fixed id sequences.

Weight scales: token embeddings ~ N(0, 1), every projection ~ N(0, 1/fan_in), norm weights
~ 1 + 0.1 N(0, 1), biases ~ 0.1 N(0, 1). For the tied model (qwen2) the embeddings are ~ N(0, 0.04) and
``attn_output``/``ffn_down`` are doubled; otherwise its logits ``e_v . norm(h)`` mostly pick the input
token itself. Activations stay O(1) and the logits have a standard deviation of about 2, so argmax, the
greedy continuations and the full logit vectors are all informative (no model predicts its input token).

Command line: ``python tools/tiny_models.py OUT_DIR`` writes the three files and prints their sha256.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np

__all__ = ["ARCHS", "SPECS", "bytes_to_unicode", "sha256_file", "tiny_vocab", "write_tiny_gguf"]

ARCHS = ("llama", "qwen2", "qwen3")

# Dimensions of each tiny model. head_dim is explicit (qwen3 uses head_dim * n_head != n_embd).
SPECS: dict[str, dict] = {
    "llama": dict(n_embd=64, n_layer=2, n_head=4, n_head_kv=2, head_dim=16, n_ff=160, context_length=256,
                  rope_base=10000.0, rms_eps=1e-5, tied_output=False, qkv_bias=False, qk_norm=False,
                  rope_type="norm"),
    "qwen2": dict(n_embd=64, n_layer=2, n_head=4, n_head_kv=2, head_dim=16, n_ff=128, context_length=256,
                  rope_base=1000000.0, rms_eps=1e-6, tied_output=True, qkv_bias=True, qk_norm=False,
                  rope_type="neox"),
    "qwen3": dict(n_embd=64, n_layer=2, n_head=4, n_head_kv=2, head_dim=32, n_ff=128, context_length=256,
                  rope_base=1000000.0, rms_eps=1e-6, tied_output=False, qkv_bias=False, qk_norm=True,
                  rope_type="neox"),
}

# A handful of merges (all of whose results are tokens) and three control tokens.
_MERGES = ["Ġ t", "h e", "t h", "Ġ a", "i n", "e r", "Ġt he", "o n", "r e", "a n", "e n", "Ġ s", "o r"]
_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_ARCH_SALT = {"llama": 1, "qwen2": 2, "qwen3": 3}


def bytes_to_unicode() -> dict[int, str]:
    """The GPT-2 byte -> printable character map used by byte-level BPE vocabularies."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    table: dict[int, str] = {}
    extra = 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def tiny_vocab() -> tuple[list[str], list[int], list[str]]:
    """``(tokens, token_types, merges)`` of the tiny models' tokenizer (272 tokens)."""
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    types = [1] * 256  # NORMAL
    for m in _MERGES:
        merged = m.replace(" ", "")
        assert merged not in tokens, merged
        tokens.append(merged)
        types.append(1)
    for s in _SPECIALS:
        tokens.append(s)
        types.append(3)  # CONTROL
    return tokens, types, list(_MERGES)


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _weights(arch: str, spec: dict, n_vocab: int, seed: int) -> list[tuple[str, np.ndarray]]:
    """Named float32 tensors in NumPy layout ``(out_features, in_features)`` (GGUF ne = reversed)."""
    rng = np.random.default_rng([seed, _ARCH_SALT[arch]])
    d, hd, nh, nkv, ff = spec["n_embd"], spec["head_dim"], spec["n_head"], spec["n_head_kv"], spec["n_ff"]

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def linear(n_out, n_in):
        return normal((n_out, n_in), 1.0 / np.sqrt(n_in))

    def norm_w(n):
        return (1.0 + normal((n,), 0.1)).astype(np.float32)

    out: list[tuple[str, np.ndarray]] = []
    # A tied model's logits are e_v . norm(h) with h = e_t + layer outputs: a small embedding scale and
    # amplified layer outputs keep the model from mostly predicting its own input token.
    tied = spec["tied_output"]
    out_scale = 2.0 if tied else 1.0
    out.append(("token_embd.weight", normal((n_vocab, d), 0.2 if tied else 1.0)))
    for i in range(spec["n_layer"]):
        p = f"blk.{i}."
        out.append((p + "attn_norm.weight", norm_w(d)))
        out.append((p + "attn_q.weight", linear(nh * hd, d)))
        out.append((p + "attn_k.weight", linear(nkv * hd, d)))
        out.append((p + "attn_v.weight", linear(nkv * hd, d)))
        if spec["qkv_bias"]:
            out.append((p + "attn_q.bias", normal((nh * hd,), 0.1)))
            out.append((p + "attn_k.bias", normal((nkv * hd,), 0.1)))
            out.append((p + "attn_v.bias", normal((nkv * hd,), 0.1)))
        if spec["qk_norm"]:
            out.append((p + "attn_q_norm.weight", norm_w(hd)))
            out.append((p + "attn_k_norm.weight", norm_w(hd)))
        out.append((p + "attn_output.weight", linear(d, nh * hd) * np.float32(out_scale)))
        out.append((p + "ffn_norm.weight", norm_w(d)))
        out.append((p + "ffn_gate.weight", linear(ff, d)))
        out.append((p + "ffn_up.weight", linear(ff, d)))
        out.append((p + "ffn_down.weight", linear(d, ff) * np.float32(out_scale)))
    out.append(("output_norm.weight", norm_w(d)))
    if not spec["tied_output"]:
        out.append(("output.weight", normal((n_vocab, d), 2.0 / np.sqrt(d))))
    return out


def write_tiny_gguf(path: str | Path, arch: str, seed: int = 0) -> dict:
    """Write the tiny ``arch`` model with weights drawn from ``seed`` to ``path``; return its description.

    The returned dict has the model's dimensions (``SPECS[arch]`` plus ``n_vocab``), the tensor names and
    shapes (GGUF order, i.e. ``ne``), ``path``, ``sha256`` and the special token ids.
    """
    import gguf  # local import: only this function needs gguf-py

    if arch not in SPECS:
        raise ValueError(f"unknown arch {arch!r}; expected one of {ARCHS}")
    spec = SPECS[arch]
    tokens, types, merges = tiny_vocab()
    n_vocab = len(tokens)
    eot = tokens.index("<|endoftext|>")
    path = Path(path)

    w = gguf.GGUFWriter(str(path), arch)
    w.add_type("model")
    w.add_name(f"bytes2logits tiny {arch} seed {seed}")
    w.add_file_type(int(gguf.LlamaFileType.ALL_F32))
    w.add_vocab_size(n_vocab)
    w.add_context_length(spec["context_length"])
    w.add_embedding_length(spec["n_embd"])
    w.add_block_count(spec["n_layer"])
    w.add_feed_forward_length(spec["n_ff"])
    w.add_head_count(spec["n_head"])
    w.add_head_count_kv(spec["n_head_kv"])
    w.add_key_length(spec["head_dim"])
    w.add_value_length(spec["head_dim"])
    w.add_rope_dimension_count(spec["head_dim"])
    w.add_rope_freq_base(spec["rope_base"])
    w.add_layer_norm_rms_eps(spec["rms_eps"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(eot)
    w.add_eos_token_id(eot)
    w.add_pad_token_id(eot)
    w.add_add_bos_token(False)
    w.add_add_eos_token(False)

    tensors = _weights(arch, spec, n_vocab, seed)
    for name, arr in tensors:
        w.add_tensor(name, np.ascontiguousarray(arr, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    return {
        "arch": arch,
        "seed": seed,
        "path": str(path),
        "sha256": sha256_file(path),
        "n_vocab": n_vocab,
        **spec,
        "bos_token_id": eot,
        "eos_token_id": eot,
        "add_bos": False,
        "tensors": {name: list(arr.shape[::-1]) for name, arr in tensors},
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0] if argv else ".")
    out.mkdir(parents=True, exist_ok=True)
    for arch in ARCHS:
        info = write_tiny_gguf(out / f"tiny-{arch}.gguf", arch)
        print(f"{arch:6s} {info['sha256']}  {info['path']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
