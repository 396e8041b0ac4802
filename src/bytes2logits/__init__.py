"""Bytes to Logits: a NumPy inference engine for GGUF models, the course's reference code, and its kit.

The package has three layers on a small base:

===================  ==========================================================================
``kit/``             course machinery: lab registry and build, check and grading (sandboxed
                     workers, wire protocol), robust notebook execution, widgets. No course content.
``lessons/``         the chapters' reference code, one module per chapter or two (``basic`` is
                     chapter 01, ``bpe`` chapters 03–05, ...); lab answers are generated from it.
``engine/``          the inference engine: ``gguf`` reader, ``quants``, ``tokenizer``, ``chat``
                     templates, ``ops`` / ``ggml_numerics``, ``model``, ``generate``, ``session``, ``cli``.
base                 ``errors`` (the exception types), ``text`` (byte <-> printable map, UTF-8 prefix
                     decoding), ``assets`` (data files pinned by sha256).
===================  ==========================================================================

``lessons`` may import ``engine`` and the kit's widgets; ``engine`` and ``kit`` import only the base
(``tests/test_layers.py`` enforces it). What a user reaches for first is exported here::

    >>> from bytes2logits import Model, Tokenizer, ChatSession, Sampler
    >>> Tokenizer.__module__
    'bytes2logits.engine.tokenizer'

The exports are resolved on first use (PEP 562), so that ``import bytes2logits.kit.worker`` in a grading
sandbox does not pay for NumPy and Jinja.
"""

from __future__ import annotations

import importlib

__all__ = ["Model", "Tokenizer", "ChatSession", "Sampler", "GGUFReader"]
__version__ = "0.1.0"

_EXPORTS = {
    "Model": "bytes2logits.engine.model",
    "Tokenizer": "bytes2logits.engine.tokenizer",
    "ChatSession": "bytes2logits.engine.session",
    "Sampler": "bytes2logits.engine.generate",
    "GGUFReader": "bytes2logits.engine.gguf",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bytes2logits' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
