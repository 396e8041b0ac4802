"""Other people's tokenizer files, loaded as engine :class:`~bytes2logits.engine.tokenizer.Tokenizer` objects.

Chapter 09 compares SmolLM2's tokenizer with three famous ones. None of them needs its own library: each
is a byte-level BPE vocabulary plus a pre-tokenizer, which is exactly what
:meth:`Tokenizer.from_metadata <bytes2logits.engine.tokenizer.Tokenizer.from_metadata>` builds from GGUF-style
keys. This module only translates three published file formats into those keys:

* GPT-2's ``encoder.json`` (token -> id) and ``vocab.bpe`` (one merge per line): :func:`gpt2_metadata`;
* tiktoken's ``.tiktoken`` rank files (``base64(bytes) rank`` per line), which hold *no merges at all*:
  :func:`merges_from_ranks` recovers them (see its docstring for why that is exact), then
  :func:`tiktoken_metadata`;
* a Hugging Face ``tokenizer.json`` (Qwen3's): the engine reads those itself,
  :meth:`Tokenizer.from_file <bytes2logits.engine.tokenizer.Tokenizer.from_file>` (chapter 11's subject).

The ``load_*`` functions read the course assets (``gpt2-bpe``, ``cl100k``, ``qwen3-tokenizer``) and are
what the chapter calls. ``tests/test_vocab_files.py`` checks the ids against tiktoken and Hugging Face
``tokenizers`` on hundreds of texts.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..engine.tokenizer import Tokenizer, TokenType
from ..errors import TokenizerError
from ..text import BYTE_TO_CHAR

__all__ = ["gpt2_metadata", "read_tiktoken_ranks", "merges_from_ranks", "tiktoken_metadata", "load_gpt2",
           "load_cl100k", "load_qwen3"]

def _printable(token: bytes) -> str:
    """Token bytes written with GPT-2's printable byte map (``b" the"`` -> ``"Ġthe"``)."""
    return "".join(BYTE_TO_CHAR[b] for b in token)


# ---------------------------------------------------------------------------------------------- GPT-2


def gpt2_metadata(encoder: Mapping[str, int], merges_text: str) -> dict[str, Any]:
    """GGUF-style tokenizer keys for GPT-2's two files: ``encoder.json`` (parsed) and ``vocab.bpe`` (text).

    ``encoder`` maps each token, already written with the printable byte map, to its id; the ids must be
    exactly ``0..n-1``. ``vocab.bpe`` starts with a ``#version`` line, then one ``left right`` merge per
    line, in rank order. ``<|endoftext|>`` becomes a control token. The pre-tokenizer is GPT-2's regex.
    """
    ids = sorted(encoder.values())
    if ids != list(range(len(ids))):
        raise TokenizerError("encoder.json: ids are not exactly 0..n-1")
    tokens = [""] * len(ids)
    for token, i in encoder.items():
        tokens[i] = token
    lines = merges_text.splitlines()
    if lines and lines[0].startswith("#version"):
        lines = lines[1:]
    merges = [line for line in lines if line]
    types = [TokenType.CONTROL if t == "<|endoftext|>" else TokenType.NORMAL for t in tokens]
    return {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "gpt-2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.add_bos_token": False,
    }


# ---------------------------------------------------------------------------------------------- tiktoken


def read_tiktoken_ranks(path: str | os.PathLike) -> dict[bytes, int]:
    """Read a ``.tiktoken`` file: one ``base64(token bytes) rank`` pair per line -> ``{bytes: rank}``."""
    ranks: dict[bytes, int] = {}
    for n, line in enumerate(Path(path).read_text(encoding="ascii").splitlines(), 1):
        if not line:
            continue
        try:
            b64, rank = line.split()
            ranks[base64.b64decode(b64, validate=True)] = int(rank)
        except ValueError:
            raise TokenizerError(f"{path}: line {n} is not 'base64 rank': {line[:60]!r}") from None
    return ranks


def _bpe_below(token: bytes, ranks: Mapping[bytes, int], max_rank: int) -> list[bytes]:
    """tiktoken's merge loop on the bytes of ``token``, using only the merges ranked below ``max_rank``."""
    parts = [token[i:i + 1] for i in range(len(token))]
    while len(parts) > 1:
        best, best_rank = -1, max_rank
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < best_rank:
                best, best_rank = i, r
        if best < 0:
            break
        parts[best:best + 2] = [parts[best] + parts[best + 1]]
    return parts


def merges_from_ranks(ranks: Mapping[bytes, int]) -> list[tuple[bytes, bytes]]:
    """Recover a merge list from tiktoken ranks, in rank order.

    tiktoken stores only ``{token bytes: rank}``. Its encoder repeatedly joins the adjacent pair whose
    *joined bytes* have the lowest rank. A merge list says the same thing if the merge that builds token
    ``t`` gets ``t``'s rank. Which two parts build ``t``? Run tiktoken's own loop on the bytes of ``t``
    with only the ranks below ``rank(t)``: the loop stops one step short of ``t``, with exactly two parts
    left, and those are the merge (it is how the encoder itself would have reached ``t``). Single bytes
    need no merge. A token for which the loop does not end in two parts cannot be produced by BPE at all,
    and raises :class:`~bytes2logits.errors.TokenizerError`. (Choosing "the split whose parts have the
    lowest ranks" instead is a common shortcut that is *not* always the encoder's path.)
    """
    merges: list[tuple[bytes, bytes]] = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) == 1:
            continue
        parts = _bpe_below(token, ranks, rank)
        if len(parts) != 2:
            raise TokenizerError(f"token {token!r} (rank {rank}) is not the result of one merge "
                                 f"of lower-ranked tokens: it ends as {len(parts)} parts")
        merges.append((parts[0], parts[1]))
    return merges


def tiktoken_metadata(ranks: Mapping[bytes, int], pre: str) -> dict[str, Any]:
    """GGUF-style tokenizer keys for tiktoken ranks: id = rank, merges from :func:`merges_from_ranks`.

    The ranks must be exactly ``0..n-1`` and include all 256 single bytes. Special tokens (which tiktoken
    keeps apart, at ids with gaps) are left out: this tokenizer encodes plain text only. ``pre`` is the
    ``tokenizer.ggml.pre`` name whose expressions match the encoding's regex (``"llama3"`` for cl100k,
    whose regex Llama 3 adopted).
    """
    by_rank = sorted(ranks.items(), key=lambda kv: kv[1])
    if [r for _, r in by_rank] != list(range(len(by_rank))):
        raise TokenizerError("tiktoken ranks are not exactly 0..n-1")
    singles = {t for t in ranks if len(t) == 1}
    if len(singles) != 256:
        raise TokenizerError(f"tiktoken ranks hold {len(singles)} single bytes, not 256")
    tokens = [_printable(t) for t, _ in by_rank]
    merges = [_printable(a) + " " + _printable(b) for a, b in merges_from_ranks(ranks)]
    return {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": pre,
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.add_bos_token": False,
    }


def load_gpt2(folder: str | os.PathLike | None = None) -> Tokenizer:
    """GPT-2's tokenizer from ``encoder.json`` and ``vocab.bpe`` (default: the ``gpt2-bpe`` asset)."""
    if folder is None:
        from .. import assets

        folder = assets.path("gpt2-bpe")
    folder = Path(folder)
    encoder = json.loads((folder / "encoder.json").read_text(encoding="utf-8"))
    return Tokenizer.from_metadata(gpt2_metadata(encoder, (folder / "vocab.bpe").read_text(encoding="utf-8")))


#: cl100k_base's special tokens and their ids, as tiktoken defines the encoding
#: (``tiktoken_ext.openai_public.cl100k_base``). The ``.tiktoken`` file holds only the 100 256 ranks.
CL100K_SPECIAL_TOKENS = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


def load_cl100k(path: str | os.PathLike | None = None) -> Tokenizer:
    """cl100k_base (GPT-3.5/GPT-4) from its ``.tiktoken`` ranks (default: the ``cl100k`` asset), with its
    five special tokens.

    The ranks are ids 0..100255. The specials of :data:`CL100K_SPECIAL_TOKENS` (``<|endoftext|>`` 100257 ...
    ``<|endofprompt|>`` 100276) are control tokens: ``encode(text, allowed_special="all")`` turns their text
    into their ids, as tiktoken does, while plain ``encode(text)`` encodes it as ordinary text (tiktoken's
    ``encode_ordinary``; tiktoken's ``encode`` refuses such text instead). ``decode`` writes their text. The
    ids tiktoken leaves unassigned (100256 and 100261..100275) are unused tokens named ``[PAD<id>]``, as
    llama.cpp's converter names them: nothing encodes to them and they decode to nothing (tiktoken raises
    ``KeyError``), so ``vocab_size`` is 100277, tiktoken's ``n_vocab``.

    The pre-tokenizer is Llama 3's, which is cl100k's regex as published. tiktoken 0.7+ runs a rewritten
    regex with one extra rule (``\\s++$``): a text that *ends* in whitespace containing a line break keeps
    that whitespace as one piece there. Only those final pieces can differ.
    """
    if path is None:
        from .. import assets

        path = assets.path("cl100k")
    metadata = tiktoken_metadata(read_tiktoken_ranks(path), pre="llama3")
    tokens = list(metadata["tokenizer.ggml.tokens"])
    types = [TokenType.NORMAL] * len(tokens)
    by_id = {i: text for text, i in CL100K_SPECIAL_TOKENS.items()}
    for i in range(len(tokens), max(by_id) + 1):
        tokens.append(by_id.get(i, f"[PAD{i}]"))
        types.append(TokenType.CONTROL if i in by_id else TokenType.UNUSED)
    metadata.update({"tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types,
                     "tokenizer.ggml.eos_token_id": CL100K_SPECIAL_TOKENS["<|endoftext|>"]})
    return Tokenizer.from_metadata(metadata)


def load_qwen3(path: str | os.PathLike | None = None) -> Tokenizer:
    """Qwen3's tokenizer from its ``tokenizer.json`` (default: the ``qwen3-tokenizer`` asset), NFC included.

    This is :meth:`Tokenizer.from_file <bytes2logits.engine.tokenizer.Tokenizer.from_file>`, the engine's
    tokenizer.json loader (chapter 11), with the asset as default.
    """
    from .. import assets

    return Tokenizer.from_file(path or assets.path("qwen3-tokenizer"))


# ---------------------------------------------------------------------------------------------- sizes


def vocabulary_size(path: str | os.PathLike) -> int:
    """How many token ids a tokenizer file defines, read from the file itself (chapter 08's table).

    * a GGUF file (``.gguf``): the length of ``tokenizer.ggml.tokens``;
    * a tiktoken rank file (``.tiktoken``): the number of ranks; tiktoken keeps its special tokens in its
      source code, not in this file, so they are not counted;
    * GPT-2's ``encoder.json``: its number of entries (``<|endoftext|>`` included);
    * a Hugging Face ``tokenizer.json``: one more than the highest id among the model's vocabulary and the
      added tokens (ids may leave gaps, and the embedding needs a row for the highest).
    """
    path = Path(path)
    if path.suffix == ".gguf":
        from ..engine.gguf import GGUFReader

        with GGUFReader(path) as reader:
            return len(reader.metadata["tokenizer.ggml.tokens"])
    if path.suffix == ".tiktoken":
        return len(read_tiktoken_ranks(path))
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and isinstance(data.get("model"), dict):  # tokenizer.json
        ids = list(data["model"].get("vocab", {}).values()) + [t["id"] for t in data.get("added_tokens", [])]
        return max(ids) + 1
    if isinstance(data, dict) and all(isinstance(i, int) for i in data.values()):  # encoder.json
        return len(data)
    raise TokenizerError(f"{path}: not a GGUF, .tiktoken, encoder.json or tokenizer.json file")


__all__ += ["vocabulary_size"]
