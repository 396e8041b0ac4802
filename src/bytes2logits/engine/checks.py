"""The argument checks that the model, generation and a chat session share.

Token ids and context lengths reach the engine from three doors (``Model.forward``, ``generate``,
``ChatSession.send``); each checks them before any work, with one message per mistake, naming the
argument, the position and the limit.
"""

from __future__ import annotations

import numpy as np

from ..errors import ContextFullError

__all__ = ["token_id_array", "check_context"]


def token_id_array(ids, n_vocab: int, name: str = "ids") -> np.ndarray:
    """``ids`` as a 1-D int64 array, after checking that every entry is a token id in ``0..n_vocab-1``.

    Raises ``ValueError`` for a nested or empty sequence and for an id outside
    the vocabulary, naming ``name`` and the first bad position; ``TypeError`` for non-integer ids.

    >>> token_id_array([3, 1], 4).tolist()
    [3, 1]
    >>> token_id_array([3, 7], 4, "prompt_ids")
    Traceback (most recent call last):
    ...
    ValueError: prompt_ids[1] = 7 is outside the vocabulary 0..3 (token id 7 at position 1)
    """
    arr = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a flat sequence of token ids, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(
            f"{name} is empty: the model needs a non-empty sequence, at least one token to predict the next one "
            "(encode some text, or start with the BOS token)"
        )
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integers, got dtype {arr.dtype}")
    bad = np.flatnonzero((arr < 0) | (arr >= n_vocab))
    if bad.size:
        i = int(bad[0])
        x = int(arr[i])
        raise ValueError(f"{name}[{i}] = {x} is outside the vocabulary 0..{n_vocab - 1} (token id {x} at position {i})")
    return arr.astype(np.int64, copy=False)


def check_context(start_pos: int, n_new: int, n_ctx: int, advice: str = "") -> None:
    """Raise :class:`~bytes2logits.errors.ContextFullError` unless ``n_new`` tokens fit after ``start_pos``.

    >>> check_context(5, 3, 8)
    >>> check_context(5, 4, 8, "Start a new conversation.")
    Traceback (most recent call last):
    ...
    bytes2logits.errors.ContextFullError: 5 cached + 4 new tokens = 9 > n_ctx = 8: together they exceed the
    context window of 8 tokens. Start a new conversation.
    """
    if start_pos + n_new > n_ctx:
        raise ContextFullError(
            f"{start_pos} cached + {n_new} new tokens = {start_pos + n_new} > n_ctx = {n_ctx}: together they "
            f"exceed the context window of {n_ctx} tokens." + (f" {advice}" if advice else "")
        )
