"""The engine's error types, in one place so every stage can raise and catch them by name.

Each error's message names the thing that is wrong (a GGUF key and byte offset, a token id, a template
line), because the person reading it is usually looking at a file they did not write.
"""

from __future__ import annotations


class GGUFError(ValueError):
    """A GGUF file is malformed, truncated, hostile or uses something this reader does not support."""


class TokenizerError(ValueError):
    """Tokenizer metadata is inconsistent or unsupported, or an id/text cannot be handled."""


class TemplateError(ValueError):
    """A chat template failed to render (the message names the template line) or was refused."""


class ContextFullError(RuntimeError):
    """The prompt plus the tokens to generate do not fit into the model's context window (KV cache)."""
