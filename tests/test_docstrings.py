"""Every public function, class and method of the engine has a docstring a learner can read."""

from __future__ import annotations

import importlib
import inspect

import pytest

MODULES = ["gguf", "quants", "tokenizer", "pretokenizers", "chat", "model", "ggml_numerics", "generate", "granularity", "bpe",
           "session", "cli", "errors", "basic", "specials", "templates", "vocabsize", "pitfalls", "vocab_files",
           "patches"]


def _public(module):
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj) or inspect.isclass(obj):
            yield name, obj
            if inspect.isclass(obj):
                for mname, m in vars(obj).items():
                    if mname.startswith("_"):
                        continue
                    f = m.fget if isinstance(m, property) else getattr(m, "__func__", m)
                    if inspect.isfunction(f):
                        yield f"{name}.{mname}", f


@pytest.mark.parametrize("name", MODULES)
def test_public_api_is_documented(name):
    module = importlib.import_module(f"bytes2logits.{name}")
    assert (module.__doc__ or "").strip(), f"module bytes2logits.{name} has no docstring"
    missing = [q for q, obj in _public(module) if not (inspect.getdoc(obj) or "").strip()]
    assert not missing, f"bytes2logits.{name}: no docstring on {', '.join(missing)}"
