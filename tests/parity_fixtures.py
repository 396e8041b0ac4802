"""Loader for the llama.cpp parity fixtures in ``tests/fixtures/parity/`` (made by
``tools/make_parity_fixtures.py``; see ``tools/README.md`` and ``manifest.json`` there).

Not a test module: the engine's tests import it. pytest runs with ``--import-mode=importlib``, so the
tests folder is not on ``sys.path``; import it like this::

    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from parity_fixtures import load_smollm2_fixture, load_tiny_fixture

``load_smollm2_fixture("exact" | "ggml")``
    llama.cpp's logits for 5 SmolLM2 chat prompts. "exact": llama.cpp on an F32 re-export of the Q4_1
    file with an f32 KV cache, to compare with ``Model.from_gguf(q4_1, numerics="exact")`` (target
    max |dlogit| <= 1e-3 and identical greedy tokens). "ggml": llama.cpp on the Q4_1 file itself with
    its default f16 KV cache, for ``numerics="ggml"`` (top-1 agreement, greedy continuations).
``load_tiny_fixture(arch, directory)``
    Regenerates the random-weight ``arch`` GGUF ("llama", "qwen2", "qwen3") into ``directory`` with
    ``tools/tiny_models.py``, checks its sha256 against the manifest and returns it with llama.cpp's
    full logits.

Both only need NumPy (plus gguf-py for the tiny models), never llama.cpp.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from functools import lru_cache
from pathlib import Path

import numpy as np

__all__ = ["FIXTURE_DIR", "LEVELS", "TINY_ARCHS", "load_manifest", "load_smollm2_fixture",
           "load_tiny_fixture", "tiny_models"]

REPO = Path(__file__).resolve().parents[1]
FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures" / "parity"
LEVELS = ("exact", "ggml")
TINY_ARCHS = ("llama", "qwen2", "qwen3")
_PROMPT_ARRAYS = ("ids", "top_ids", "top_logits", "sample_logits", "argmax", "gen_ids", "gen_top_ids",
                  "gen_top_logits")


@lru_cache(maxsize=1)
def load_manifest() -> dict:
    """The fixtures' ``manifest.json`` (versions, llama.cpp settings, sha256s, prompts)."""
    return json.loads((FIXTURE_DIR / "manifest.json").read_text(encoding="utf-8"))


def _load_npz(name: str) -> dict[str, np.ndarray]:
    with np.load(FIXTURE_DIR / name, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def load_smollm2_fixture(level: str) -> dict:
    """llama.cpp's reference for SmolLM2 at ``level`` ("exact" or "ggml").

    Returns a dict with

    * ``level``, ``settings`` (the exact llama.cpp settings), ``model_sha256`` (the file llama.cpp ran),
      ``q4_1_sha256`` (the file the engine must load), ``sample_ids`` [256] int32, ``top_k`` (64),
      ``n_gen`` (32), ``eos_token_id``;
    * ``prompts``: one dict per prompt with ``name``, ``text`` (rendered chat), ``messages`` and the arrays
      ``ids`` [T], ``top_ids``/``top_logits`` [T, 64] (descending), ``sample_logits`` [T, 256] (logits at
      ``sample_ids``), ``argmax`` [T], ``gen_ids`` [32] (greedy, argmax of the full logits, no stop at
      EOS), ``gen_top_ids``/``gen_top_logits`` [32, 64] where row j holds the logits ``gen_ids[j]`` was
      chosen from (row 0: last prompt position; row j > 0: after feeding ``gen_ids[j-1]`` at position
      ``T + j - 1``).
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, not {level!r}")
    man = load_manifest()["smollm2"]
    entry = man["levels"][level]
    arrays = _load_npz(entry["npz"])
    prompts = []
    for k, p in enumerate(man["prompts"]):
        d = {"name": p["name"], "text": p["text"], "messages": p["messages"]}
        for a in _PROMPT_ARRAYS:
            d[a] = arrays[f"p{k}_{a}"]
        assert d["ids"].tolist() == p["ids"], f"npz and manifest disagree on prompt {k} ids"
        prompts.append(d)
    return {
        "level": level,
        "settings": entry["llama_cpp_settings"],
        "description": entry["description"],
        "model_sha256": entry["model_sha256"],
        "q4_1_sha256": man["q4_1_sha256"],
        "sample_ids": arrays["sample_ids"],
        "top_k": man["top_k"],
        "n_gen": man["n_gen"],
        "eos_token_id": man["eos_token_id"],
        "prompts": prompts,
    }


@lru_cache(maxsize=1)
def tiny_models():
    """``tools/tiny_models.py`` imported as a module (it needs NumPy and gguf-py only)."""
    spec = importlib.util.spec_from_file_location("b2l_tiny_models", REPO / "tools" / "tiny_models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_tiny_fixture(arch: str, directory) -> dict:
    """Regenerate the tiny ``arch`` GGUF in ``directory``, check its sha256, return it and the logits.

    Keys: ``path`` (the regenerated GGUF), ``spec`` (the manifest entry: dims, eps, rope base, tensors,
    llama.cpp settings ...), ``ids`` [24] int32, ``logits`` [24, n_vocab] float32 (every position),
    ``gen_ids`` [8] greedy continuation, ``gen_logits`` [8, n_vocab] (row j: the logits ``gen_ids[j]``
    was chosen from, as for SmolLM2). Raises ``AssertionError`` if the regenerated file's sha256 differs
    from the one llama.cpp ran (e.g. another gguf-py or NumPy version wrote different bytes).
    """
    if arch not in TINY_ARCHS:
        raise ValueError(f"arch must be one of {TINY_ARCHS}, not {arch!r}")
    entry = load_manifest()["tiny"][arch]
    path = Path(directory) / entry["file"]
    info = tiny_models().write_tiny_gguf(path, arch, seed=entry["seed"])
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert sha == info["sha256"] == entry["sha256"], (
        f"regenerated tiny {arch} GGUF has sha256 {sha}, but the fixture was made from {entry['sha256']} "
        f"(gguf-py {load_manifest()['gguf_py']}, NumPy {load_manifest()['numpy']}); rerun "
        "tools/make_parity_fixtures.py --only tiny (see tools/README.md)"
    )
    arrays = _load_npz(entry["npz"])
    return {"path": path, "spec": entry, **arrays}
