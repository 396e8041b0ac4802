"""A tokenizer built from GGUF metadata alone (chapter 14 and its lab, "tokenizer from GGUF metadata").

A GGUF file carries its tokenizer as plain metadata: the vocabulary (``tokenizer.ggml.tokens``), a type
per token (``tokenizer.ggml.token_type``), and either BPE merges (``tokenizer.ggml.merges``) or scores
(``tokenizer.ggml.scores``). :class:`Tokenizer` turns those arrays back into ``encode``/``decode`` that give
the same ids as llama.cpp, for three families, chosen by ``tokenizer.ggml.model``:

``"gpt2"`` — byte-level BPE (GPT-2, Llama 3, Qwen, SmolLM, ...)
    1. cut the text into pieces with the pre-tokenizer named by ``tokenizer.ggml.pre``
       (see :mod:`bytes2logits.engine.pretokenizers`);
    2. write each piece's UTF-8 bytes as printable characters, one character per byte
       (:data:`bytes2logits.text.BYTE_TO_CHAR`; a space becomes ``"Ġ"``), so that every vocabulary entry is a string;
    3. start from single characters and repeatedly merge the adjacent pair whose merge rule comes first
       in the merge list (its *rank*), leftmost first on ties, until no pair has a rule;
    4. look the final symbols up in the vocabulary.

``"llama"`` — SentencePiece BPE with scores (Llama 2, Phi-3, ...)
    Spaces become ``"▁"``, one ``"▁"`` is put in front of the text (``add_space_prefix``), then the
    adjacent pair whose *concatenation is a vocabulary entry with the highest score* is merged, again and
    again. Characters that end up as no token are written as byte tokens ``<0x41>``.

``"bert"`` — WordPiece (BERT, BGE embeddings)
    Lowercase, strip accents, split at whitespace and punctuation, then take the longest vocabulary
    entry from the left of each word (word starts carry ``"▁"``; continuations have no prefix — the
    ``##`` of the original BERT vocabulary was removed by the GGUF converter). A word that cannot be
    covered becomes ``[UNK]``.

Each family is a small private class (``_ByteLevelBPE``, ``_SentencePieceBPE``, ``_WordPiece``) that
:class:`Tokenizer` picks by ``tokenizer.ggml.model``: it encodes one plain-text fragment, says which ids
``add_special`` puts around the text, and turns a token's text back into bytes.

Special tokens (``<|im_end|>``, ``<s>``...) are single ids that must only come from trusted text such as
a chat template: by default :meth:`Tokenizer.encode` treats the text as plain text, so a user who types
``<|im_end|>`` gets ordinary pieces, not the end-of-turn id.
"""

from __future__ import annotations

import heapq
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np
import regex

from ..errors import TokenizerError
from ..text import BYTE_TO_CHAR, CHAR_TO_BYTE
from .pretokenizers import get_pre_tokenizer, split

_SURROGATE = re.compile("[\ud800-\udfff]")

__all__ = ["Tokenizer", "TokenType", "SUPPORTED_MODELS"]


class TokenType:
    """The values of ``tokenizer.ggml.token_type`` (llama.cpp's ``llama_token_type``)."""

    UNDEFINED = 0
    NORMAL = 1        # an ordinary piece of text
    UNKNOWN = 2       # <unk>
    CONTROL = 3       # <s>, </s>, <|im_end|>: never typed by a user, only placed by a template
    USER_DEFINED = 4  # added tokens that stand for literal text (llama.cpp matches these even in plain text)
    UNUSED = 5
    BYTE = 6          # SentencePiece byte fallback <0x00>..<0xFF>


SPM_SPACE = "\u2581"  # ▁ LOWER ONE EIGHTH BLOCK: SentencePiece's visible space
_ASCII_SPACE = " \t\n\v\f\r"  # what C's isspace() accepts, used for llama.cpp's lstrip/rstrip

# Texts llama.cpp treats as end-of-generation (its special_eog_ids rule), and the ones it takes as the
# end-of-turn token when tokenizer.ggml.eot_token_id is missing (first match in this order wins here).
_EOG_TEXTS = (
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<｜end▁of▁sentence｜>", "[e~[",
)
_EOT_TEXTS = (
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>",
)
# fill-in-the-middle markers: llama.cpp makes them control tokens, and pad/repo/file-sep also stop generation
_FIM_PRE = ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
            "<|code_prefix|>", "<|prefix|>")
_FIM_SUF = ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
            "<|code_suffix|>", "<|suffix|>")
_FIM_MID = ("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
            "<|code_middle|>", "<|middle|>")
_FIM_PAD = ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]")
_FIM_REP = ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>")
_FIM_SEP = ("<|file_sep|>",)

_MISSING = object()


def _numeric_list(value, key: str, kinds: str) -> list:
    """A 1-D numeric metadata array as a list; anything else is a TokenizerError naming ``key``."""
    arr = value if isinstance(value, np.ndarray) else None
    if arr is None and isinstance(value, list) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        arr = np.asarray(value)
    if arr is None or arr.ndim != 1 or (arr.size and arr.dtype.kind not in kinds):
        what = type(value).__name__ if arr is None else f"a {arr.ndim}-D {arr.dtype} array"
        raise TokenizerError(f"{key} must be a 1-D array of numbers, got {what}")
    return arr.tolist()


def _flag(md: Mapping[str, Any], key: str, default: bool) -> bool:
    """A boolean metadata key (a string such as "false" is an error, not True)."""
    value = md.get(key, default)
    if not isinstance(value, (bool, np.bool_)):
        raise TokenizerError(f"{key} must be a boolean, got {value!r}")
    return bool(value)


def _first_present(token_to_id: Mapping[str, int], texts: Iterable[str]) -> int | None:
    """The id of the first text in ``texts`` that is in the vocabulary, or ``None``."""
    for t in texts:
        i = token_to_id.get(t)
        if i is not None:
            return i
    return None


def _per_token(md: Mapping[str, Any], key: str, kinds: str, n: int) -> list | None:
    """A per-token numeric array (token types, scores) as a list of ``n`` entries, or ``None`` when absent."""
    value = md.get(key)
    if value is None:
        return None
    values = _numeric_list(value, key, kinds)
    if len(values) != n:
        raise TokenizerError(f"{key} has {len(values)} entries but tokenizer.ggml.tokens has {n}")
    return values


def _special_id(md: Mapping[str, Any], key: str, default: int | None, n: int) -> int | None:
    """A special-token id key: ``default`` when missing (if inside the vocabulary), else a valid id."""
    value = md.get(key)
    if value is None:
        return default if default is not None and default < n else None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n:
        raise TokenizerError(f"{key} = {value!r} is not a token id in 0..{n - 1}")
    return value


class Tokenizer:
    """Text <-> token ids for a GGUF model, matching llama.cpp's ids.

    Build one with :meth:`from_gguf` (a path or a :class:`~bytes2logits.engine.gguf.GGUFReader`) or
    :meth:`from_metadata` (any mapping with the ``tokenizer.*`` keys, handy for small hand-made
    vocabularies).

    >>> tok = Tokenizer.from_gguf("SmolLM2-135M-Instruct.Q4_1.gguf")      # doctest: +SKIP
    >>> ids = tok.encode("Hello world")                                   # doctest: +SKIP
    >>> tok.decode(ids)                                                    # doctest: +SKIP
    'Hello world'

    Attributes a caller needs: ``vocab_size``, ``model`` (``"gpt2"``, ``"llama"`` or ``"bert"``), ``pre``
    (the pre-tokenizer name), ``bos_id``/``eos_id``/``eot_id``/``unk_id`` (``None`` when absent),
    ``bos_token``/``eos_token`` (their texts), ``stop_ids`` (ids that end generation), ``add_bos``/
    ``add_eos`` (what ``encode(..., add_special=True)`` adds), ``chat_template`` (``str`` or ``None``).
    """

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_gguf(cls, path_or_reader) -> "Tokenizer":
        """Read the tokenizer of a GGUF file: a path, or an already open ``GGUFReader``.

        Only the metadata is used; tensors are never touched, so this works on vocab-only files.
        """
        if isinstance(path_or_reader, (str, os.PathLike)):
            from .gguf import GGUFReader

            path_or_reader = GGUFReader(path_or_reader)
        metadata = getattr(path_or_reader, "metadata", None)
        if not isinstance(metadata, Mapping):
            raise TypeError("from_gguf() takes a path or an object with a .metadata mapping "
                            f"(a GGUFReader), not {type(path_or_reader).__name__}")
        return cls.from_metadata(metadata)

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> "Tokenizer":
        """Build from a mapping of GGUF keys (``tokenizer.ggml.model``, ``tokenizer.ggml.tokens``, ...).

        Every inconsistency raises :class:`~bytes2logits.errors.TokenizerError` naming the key.
        """
        return cls(metadata)

    def __init__(self, metadata: Mapping[str, Any]):
        """Validate the ``tokenizer.*`` keys of ``metadata`` and build the lookup tables.

        Prefer :meth:`from_gguf` / :meth:`from_metadata`; this does the work for both. In order: the family
        named by ``tokenizer.ggml.model``, the vocabulary every family shares, the family's own keys, the
        flags and special-token ids, llama.cpp's end-of-generation and control fix-ups, the chat template.
        """
        md = metadata
        model = md.get("tokenizer.ggml.model")
        family_cls = _family_class(model)
        self.model: str = model
        scores = self._read_vocabulary(md)
        family = family_cls(md, self._tokens, self._token_to_id, scores)
        self._family: _Family = family
        #: the ``tokenizer.ggml.pre`` value (only byte-level BPE uses it; ``"default"`` when missing there)
        self.pre: str | None = family.pre
        #: byte values that have no token: llama.cpp (and HF) silently drop such bytes when encoding
        self.missing_bytes: frozenset[int] = family.missing_bytes

        self.add_space_prefix: bool = (_flag(md, "tokenizer.ggml.add_space_prefix", family.space_prefix)
                                       and family.space_prefix)
        self.add_bos: bool = _flag(md, "tokenizer.ggml.add_bos_token", family.defaults.add_bos)
        self.add_eos: bool = _flag(md, "tokenizer.ggml.add_eos_token", False)
        eot, eom = self._read_special_ids(md, family)
        self._find_end_of_generation(eot, eom)
        self._index_special_tokens(md)
        self._special_patterns: dict[Any, re.Pattern | None] = {}
        self._piece_bytes: dict[int, bytes] = {}

        template = md.get("tokenizer.chat_template")
        self.chat_template: str | None = template if isinstance(template, str) else None

    def _read_vocabulary(self, md: Mapping[str, Any]) -> list | None:
        """Read what every family shares: ``_tokens``, ``_token_to_id``, ``_types``; return the scores (or
        None), which only the family's model uses."""
        tokens = md.get("tokenizer.ggml.tokens")
        if not isinstance(tokens, (list, tuple)) or not tokens:
            raise TokenizerError("tokenizer.ggml.tokens is missing or not a non-empty list of strings")
        tokens = list(tokens)
        if set(map(type, tokens)) != {str}:
            i = next(i for i, t in enumerate(tokens) if not isinstance(t, str))
            raise TokenizerError(f"tokenizer.ggml.tokens[{i}] is {type(tokens[i]).__name__}, not a string")
        if "" in tokens:  # llama.cpp renames empty entries so that they stay unique and visible
            tokens = [t or f"[EMPTY_{i}]" for i, t in enumerate(tokens)]
        n = len(tokens)
        self._tokens: list[str] = tokens
        self._token_to_id: dict[str, int] = dict(zip(tokens, range(n)))
        if len(self._token_to_id) != n:
            seen: dict[str, int] = {}
            for i, t in enumerate(tokens):
                if t in seen:
                    raise TokenizerError(f"tokenizer.ggml.tokens: {t!r} appears twice (ids {seen[t]} and {i})")
                seen[t] = i
        types = _per_token(md, "tokenizer.ggml.token_type", "iu", n)
        self._types: list[int] = [TokenType.NORMAL] * n if types is None else types
        return _per_token(md, "tokenizer.ggml.scores", "iuf", n)

    def _read_special_ids(self, md: Mapping[str, Any], family: _Family) -> tuple[int | None, int | None]:
        """Set ``bos_id``/``eos_id``/``unk_id``/``sep_id``/``pad_id`` (the family's defaults where a key is
        missing), check that ``add_bos``/``add_eos`` have their ids, and return the stored eot and eom ids."""
        n = len(self._tokens)
        defaults = family.defaults
        self.bos_id: int | None = _special_id(md, "tokenizer.ggml.bos_token_id", defaults.bos, n)
        self.eos_id: int | None = _special_id(md, "tokenizer.ggml.eos_token_id", defaults.eos, n)
        self.unk_id: int | None = _special_id(md, "tokenizer.ggml.unknown_token_id", defaults.unk, n)
        self.sep_id: int | None = _special_id(md, "tokenizer.ggml.seperator_token_id", defaults.sep, n)  # sic
        self.pad_id: int | None = _special_id(md, "tokenizer.ggml.padding_token_id", None, n)
        eot = _special_id(md, "tokenizer.ggml.eot_token_id", None, n)
        eom = _special_id(md, "tokenizer.ggml.eom_token_id", None, n)
        if self.add_bos and self.bos_id is None and family.bos_by_flag:
            raise TokenizerError("tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set")
        if self.add_eos and self.eos_id is None:
            raise TokenizerError("tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set")
        return eot, eom

    def _find_end_of_generation(self, eot: int | None, eom: int | None) -> None:
        """Set ``eot_id`` and ``stop_ids`` the way llama.cpp does, making those tokens control tokens.

        llama.cpp finds end-of-turn and fill-in-the-middle tokens by their text and makes them control
        tokens even if the converter forgot to (so plain text can never produce them).
        """
        t2i, types = self._token_to_id, self._types
        if eot is None:
            eot = _first_present(t2i, _EOT_TEXTS)
        if eom is None:
            eom = t2i.get("<|eom_id|>")
        fim = {name: _first_present(t2i, texts) for name, texts in
               (("pre", _FIM_PRE), ("suf", _FIM_SUF), ("mid", _FIM_MID),
                ("pad", _FIM_PAD), ("rep", _FIM_REP), ("sep", _FIM_SEP))}
        eog = {t2i[t] for t in _EOG_TEXTS if t in t2i}
        for i in (*eog, eot, eom, *fim.values()):
            if i is not None and types[i] != TokenType.CONTROL:
                types[i] = TokenType.CONTROL
        eog |= {i for i in (fim["pad"], fim["rep"], fim["sep"], self.eos_id, eot, eom) if i is not None}
        # gpt-oss / solar-open: with <|return|> and <|call|> present, <|end|> only ends a message
        texts = {self._tokens[i] for i in eog}
        if "<|end|>" in texts and (("<|return|>" in texts and "<|call|>" in texts)
                                   or ("<|calls|>" in texts and "<|flush|>" in texts)):
            eog.discard(t2i["<|end|>"])
        if "<|tool_response>" in texts and "</s>" in texts:  # gemma4: </s> is ordinary text there
            eog.discard(t2i["</s>"])
        self.eot_id: int | None = eot
        self.stop_ids: frozenset[int] = frozenset(eog)

    def _index_special_tokens(self, md: Mapping[str, Any]) -> None:
        """Build the text -> id tables of user-defined and control tokens, and Phi-3's right-strip set."""
        tokens, types, t2i = self._tokens, self._types, self._token_to_id
        special = [i for i, ty in enumerate(types) if ty != TokenType.NORMAL]  # few: no need to scan all twice
        self._user_defined = {tokens[i]: i for i in special if types[i] == TokenType.USER_DEFINED}
        self._control = {tokens[i]: i for i in special if types[i] in (TokenType.CONTROL, TokenType.UNKNOWN)}
        # Phi-3: whitespace right after a special token belongs to the token (llama.cpp's RSTRIP rule)
        name = str(md.get("general.name", "")).lower()
        self._rstrip: frozenset[int] = frozenset()
        if "phi-3" in name or "phi3" in name:
            keep = {t2i.get(t) for t in ("<unk>", "<s>", "<|endoftext|>")}
            ids = set(self._user_defined.values()) | set(self._control.values())
            if "</s>" in t2i:
                ids.add(t2i["</s>"])
            self._rstrip = frozenset(ids - keep)
        self._special_ids = {**self._user_defined, **self._control}

    # ------------------------------------------------------------------ small accessors

    @property
    def vocab_size(self) -> int:
        """Number of token ids (``len(tokenizer.ggml.tokens)``)."""
        return len(self._tokens)

    @property
    def bos_token(self) -> str | None:
        """The text of the BOS token (e.g. ``"<s>"``), or ``None``."""
        return None if self.bos_id is None else self._tokens[self.bos_id]

    @property
    def eos_token(self) -> str | None:
        """The text of the EOS token (e.g. ``"</s>"``), or ``None``."""
        return None if self.eos_id is None else self._tokens[self.eos_id]

    def token_to_id(self, text: str, default=_MISSING):
        """The id of a vocabulary entry, written exactly as stored (``"Ġworld"``, ``"▁the"``, ``"<s>"``).

        Raises :class:`~bytes2logits.errors.TokenizerError` if absent, unless ``default`` is given.
        """
        i = self._token_to_id.get(text)
        if i is None:
            if default is _MISSING:
                raise TokenizerError(f"{text!r} is not in the vocabulary")
            return default
        return i

    def id_to_token(self, token_id: int) -> str:
        """The vocabulary entry of an id, as stored (``"Ġworld"``); see :meth:`decode` for real text."""
        return self._tokens[self._check_id(token_id, 0)]

    def token_type(self, token_id: int) -> int:
        """The :class:`TokenType` of an id (after llama.cpp's control-token fix-ups)."""
        return self._types[self._check_id(token_id, 0)]

    def is_special(self, token_id: int) -> bool:
        """True for control and unknown tokens: the ids plain-text encoding never produces and
        ``decode(..., skip_special=True)`` leaves out."""
        return self._types[self._check_id(token_id, 0)] in (TokenType.CONTROL, TokenType.UNKNOWN)

    @property
    def special_tokens(self) -> dict[str, int]:
        """Text -> id of every control/unknown token (what ``allowed_special="all"`` may produce)."""
        return dict(self._control)

    def _check_id(self, value, position: int) -> int:
        """Validate one id; the error names the id and its position in the input."""
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise TokenizerError(f"token id at position {position} is {value!r} "
                                 f"({type(value).__name__}), not an int")
        i = value.__index__()
        if not 0 <= i < len(self._tokens):
            raise TokenizerError(f"token id {i} at position {position} is outside the vocabulary "
                                 f"0..{len(self._tokens) - 1}")
        return i

    # ------------------------------------------------------------------ encoding

    def encode(self, text: str, allowed_special=None, add_special: bool = False, *,
               literal_spans: Iterable[tuple[int, int]] = ()) -> list[int]:
        """Turn ``text`` into token ids.

        ``allowed_special`` says which control tokens may be recognised in the text:

        * ``None`` (default): none. ``"<|im_end|>"`` typed by a user becomes ordinary pieces. (Like
          llama.cpp, *user-defined* tokens — type 4, added tokens that stand for literal text such as a
          run of spaces — are still matched: they are text, not control.)
        * ``"all"``: every control/unknown token, for trusted text such as a rendered chat template.
        * a set of token texts, e.g. ``{"<|im_start|>", "<|im_end|>"}``: only those.

        Where several special tokens could match, the one starting earliest wins, and among those
        starting at the same place the longest.

        ``add_special=True`` adds BOS and/or EOS as the model asks (``add_bos``/``add_eos``; BERT always
        adds ``[CLS]`` ... ``[SEP]``).

        ``literal_spans``: ``(start, end)`` character ranges of ``text`` that came from untrusted input
        (a chat message inside a rendered template): control tokens are not recognised inside them, even
        when ``allowed_special`` allows them elsewhere. The text is still encoded in one piece, so the ids
        are exactly those of the whole text wherever nobody tried to smuggle in a marker.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, not {type(text).__name__}")
        bad = _SURROGATE.search(text)
        if bad:
            raise TokenizerError(f"text contains a lone surrogate {bad.group()!r} at character {bad.start()} "
                                 "(not valid Unicode: was it decoded with errors='surrogateescape'?)")
        fragments = self._split_special(text, allowed_special, tuple(literal_spans))
        family = self._family
        if add_special:
            head, tail = family.specials(self)  # the post-processor (BERT: error without [CLS]/[SEP])
            out: list[int] = list(head)
        else:
            out = []
        encode_text = family.encode_text
        after_special = True  # the first fragment counts as after a special (SentencePiece's "▁")
        for frag in fragments:
            if isinstance(frag, int):
                out.append(frag)
                after_special = True
            else:
                encode_text(self, frag, out, after_special)
                after_special = False
        if add_special:
            out.extend(tail)
        return out

    def _special_pattern(self, allowed_special):
        """The compiled alternation of the special-token texts that may match, cached per setting."""
        if allowed_special is None:
            key = None
        elif isinstance(allowed_special, bool) or not isinstance(allowed_special, (str, Iterable)):
            raise TokenizerError(f"allowed_special must be None, 'all' or a set of token texts, "
                                 f"not {allowed_special!r}")
        elif isinstance(allowed_special, str):
            if allowed_special != "all":
                raise TokenizerError(f"allowed_special must be None, 'all' or a set of token texts, "
                                     f"not {allowed_special!r}")
            key = "all"
        else:
            key = frozenset(allowed_special)
            for t in key:
                if t not in self._control and t not in self._user_defined:
                    raise TokenizerError(f"allowed_special: {t!r} is not a special token of this vocabulary")
        if key in self._special_patterns:
            return self._special_patterns[key]
        texts = set(self._user_defined)
        if key == "all":
            texts |= set(self._control)
        elif key is not None:
            texts |= key
        if texts:
            # longest first, so that at one starting position the longest text wins
            ordered = sorted(texts, key=lambda t: (-len(t), t))
            pattern = re.compile("|".join(map(re.escape, ordered)))
        else:
            pattern = None
        self._special_patterns[key] = pattern
        return pattern

    def _split_special(self, text: str, allowed_special, literal_spans: tuple = ()) -> list:
        """Cut ``text`` into plain-text fragments (``str``) and special-token ids (``int``).

        A control token whose match overlaps one of ``literal_spans`` stays text.
        """
        pattern = self._special_pattern(allowed_special)
        if pattern is None:
            return [text] if text else []
        out: list = []
        pos = search = 0
        ids = self._special_ids
        while True:
            m = pattern.search(text, search)
            if m is None:
                break
            if literal_spans and m.group() in self._control and any(
                m.start() < end and m.end() > start for start, end in literal_spans
            ):
                search = m.start() + 1  # inside untrusted text: not a marker; look further
                continue
            if m.start() > pos:
                out.append(text[pos:m.start()])
            tid = ids[m.group()]
            out.append(tid)
            pos = m.end()
            if tid in self._rstrip:
                while pos < len(text) and text[pos] in _ASCII_SPACE:
                    pos += 1
            search = pos
        if pos < len(text):
            out.append(text[pos:])
        return out

    # ------------------------------------------------------------------ decoding

    def _piece(self, i: int) -> bytes:
        """The bytes one token stands for (what llama.cpp's ``token_to_piece`` returns), cached."""
        b = self._piece_bytes.get(i)
        if b is not None:
            return b
        text = self._tokens[i]
        ttype = self._types[i]
        if ttype in (TokenType.CONTROL, TokenType.UNKNOWN, TokenType.USER_DEFINED):
            b = text.encode("utf-8")
        elif ttype == TokenType.NORMAL:
            b = self._family.normal_bytes(text)  # the decoder seam
        elif ttype == TokenType.BYTE:
            m = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", text)
            b = bytes([int(m.group(1), 16)]) if m else text.encode("utf-8")
        else:  # unused / undefined tokens have no text
            b = b""
        self._piece_bytes[i] = b
        return b

    def decode_bytes(self, ids, skip_special: bool = False) -> bytes:
        """The raw bytes of ``ids``, without interpreting them as UTF-8.

        A streaming decoder needs this: one token may carry half of a character (``<0xE2>``, or a
        byte-level piece ending inside an emoji). Byte-level tokens map back through
        :data:`bytes2logits.text.CHAR_TO_BYTE`, ``<0xXX>`` becomes its byte, ``"▁"`` a space; control tokens give their
        text unless ``skip_special``. A bad id raises :class:`~bytes2logits.errors.TokenizerError`
        naming the id and its position.
        """
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise TypeError(f"decode takes a sequence of token ids, not {type(ids).__name__} "
                            f"(for one id write [{ids!r}])")
        parts = []
        for pos, value in enumerate(ids):
            i = self._check_id(value, pos)
            if skip_special and self._types[i] in (TokenType.CONTROL, TokenType.UNKNOWN):
                continue
            parts.append(self._piece(i))
        return b"".join(parts)

    def decode(self, ids, skip_special: bool = False) -> str:
        """Decode ids to text; each invalid UTF-8 stretch becomes U+FFFD.

        ``skip_special=True`` leaves out control and unknown tokens (``<s>``, ``<|im_end|>``).
        Note that SentencePiece output keeps the space that ``add_space_prefix`` put in front.
        """
        return self.decode_bytes(ids, skip_special).decode("utf-8", errors="replace")

    # ------------------------------------------------------------------ chat template

    def apply_chat_template(self, messages, add_generation_prompt: bool = True, **context) -> str:
        """Render a conversation into the model's prompt text with its own ``tokenizer.chat_template``.

        ``messages`` is a list of ``{"role": ..., "content": ...}``. With ``add_generation_prompt=True`` the
        text ends with the opener of an assistant turn, so the model answers instead of continuing the
        user. Extra keywords reach the template (``tools=...``, ``enable_thinking=False``). The template
        sees ``bos_token``/``eos_token`` as this vocabulary spells them. A model without a template gets
        ChatML and a one-time notice on stderr; a template that fails raises
        :class:`~bytes2logits.errors.TemplateError` naming its line, never a silent fallback.

        To tokenize the result, let the template's markers become control tokens but not marker text that
        came from a message: ``encode(text, allowed_special="all", literal_spans=spans)`` with the spans
        from :func:`bytes2logits.engine.session.message_spans`
        (:class:`~bytes2logits.engine.session.ChatSession` does this).
        """
        template = getattr(self, "_chat", None)
        if template is None:
            from .chat import ChatTemplate

            bos, eos = self.bos_token or "", self.eos_token or ""
            if self.chat_template is None:
                import sys

                print("notice: this model has no tokenizer.chat_template; using ChatML", file=sys.stderr)
                template = ChatTemplate.chatml(bos_token=bos, eos_token=eos or "<|im_end|>")
            else:
                template = ChatTemplate(self.chat_template, bos_token=bos, eos_token=eos,
                                        name="tokenizer.chat_template")
            self._chat = template
        return template.render(messages, add_generation_prompt=add_generation_prompt, **context)

    def __repr__(self) -> str:
        """A one-line summary: model, pre-tokenizer and vocabulary size."""
        return f"Tokenizer(model={self.model!r}, pre={self.pre!r}, vocab_size={self.vocab_size})"


# ---------------------------------------------------------------------- the three families


class _Defaults(NamedTuple):
    """llama.cpp's defaults for a family, used when the GGUF keys are missing."""

    bos: int | None
    eos: int | None
    unk: int | None
    sep: int | None
    add_bos: bool


class _Family:
    """What one ``tokenizer.ggml.model`` family does its own way; one subclass per family.

    Built from the metadata and the shared vocabulary, a family holds its own tables and fills the seams
    of the pipeline: :meth:`encode_text` (normalizer, pre-tokenizer and model, for one plain-text
    fragment), :meth:`specials` (the post-processor: the ids ``add_special`` puts around the text) and
    :meth:`normal_bytes` (the decoder, for one NORMAL token).
    """

    model = ""
    #: llama.cpp's special-token ids and ``add_bos`` for this family, used when the keys are missing
    defaults = _Defaults(bos=None, eos=None, unk=None, sep=None, add_bos=False)
    #: whether ``tokenizer.ggml.add_space_prefix`` applies, and its default (only SentencePiece has one)
    space_prefix = False
    #: whether ``add_bos`` decides the BOS, so that it needs ``bos_token_id`` (WordPiece always adds [CLS])
    bos_by_flag = True
    missing_bytes: frozenset[int] = frozenset()

    def __init__(self, md: Mapping[str, Any], tokens: list[str], token_to_id: dict[str, int], scores):
        """Keep the vocabulary lookup and ``tokenizer.ggml.pre`` as given (only byte-level BPE uses it)."""
        pre = md.get("tokenizer.ggml.pre")
        self.pre: str | None = pre if isinstance(pre, str) else None
        self._token_to_id = token_to_id

    def encode_text(self, tok: Tokenizer, text: str, out: list[int], after_special: bool) -> None:
        """Append the ids of one plain-text fragment to ``out``.

        ``after_special``: the fragment starts the text or follows a special token.
        """
        raise NotImplementedError

    def specials(self, tok: Tokenizer) -> tuple[list[int], list[int]]:
        """The ids ``encode(..., add_special=True)`` puts around the text: BOS/EOS as ``tok`` says."""
        return ([tok.bos_id] if tok.add_bos else []), ([tok.eos_id] if tok.add_eos else [])

    def normal_bytes(self, text: str) -> bytes:
        """The bytes a NORMAL token's text stands for: its UTF-8, with ``"▁"`` as a space."""
        return text.replace(SPM_SPACE, " ").encode("utf-8")


class _ByteLevelBPE(_Family):
    """``"gpt2"``: pre-tokenize, write each piece's bytes as printable characters, merge by rank."""

    model = "gpt2"

    def __init__(self, md: Mapping[str, Any], tokens: list[str], token_to_id: dict[str, int], scores):
        """Read the pre-tokenizer and the merges; every printable ASCII byte must have a token."""
        super().__init__(md, tokens, token_to_id, scores)
        pre = md.get("tokenizer.ggml.pre")
        if pre is not None and not isinstance(pre, str):
            raise TokenizerError("tokenizer.ggml.pre is not a string")
        self._pre = get_pre_tokenizer(pre)
        self.pre = pre if pre is not None else "default"
        self._patterns = self._pre.compiled
        self.defaults = _Defaults(bos=11, eos=11, unk=None, sep=None, add_bos=self._pre.add_bos)
        self._ranks: dict[str, int] = self._load_merges(md, token_to_id)
        self._byte_ids = {b: token_to_id.get(c) for b, c in BYTE_TO_CHAR.items()}
        self.missing_bytes = frozenset(b for b, i in self._byte_ids.items() if i is None)
        printable = [b for b in range(0x20, 0x7F) if b in self.missing_bytes]
        if printable:
            raise TokenizerError("tokenizer.ggml.tokens has no byte-level token for printable ASCII "
                                 f"byte(s) {', '.join(hex(b) for b in printable)}")
        self._cache: dict[str, tuple[int, ...]] = {}

    @staticmethod
    def _load_merges(md: Mapping[str, Any], t2i: Mapping[str, int]) -> dict[str, int]:
        """Read ``tokenizer.ggml.merges`` ("left right" strings) into a rank table.

        The rank of a merge is its position in the list: lower ranks were learned earlier and are applied
        first. The table is keyed by the merge string itself, so looking up the pair ``(a, b)`` is
        ``ranks.get(a + " " + b)`` — byte-level vocabularies never contain a real space (it is ``"Ġ"``).
        """
        merges = md.get("tokenizer.ggml.merges")
        if not isinstance(merges, (list, tuple)):
            raise TokenizerError("tokenizer.ggml.merges is missing or not a list of strings "
                                 "(byte-level BPE needs its merge rules)")
        # Fast check first (C-level joins and set operations); the slow loop only runs to name the culprit.
        ok = set(map(type, merges)) <= {str}
        if ok:
            parts = " ".join(merges).split(" ")
            ok = len(parts) == 2 * len(merges) and t2i.keys() >= set(parts)
        if not ok:
            for i, m in enumerate(merges):
                if not isinstance(m, str):
                    raise TokenizerError(f"tokenizer.ggml.merges[{i}] is {type(m).__name__}, not a string")
                left, sep, right = m.partition(" ")
                if not sep or " " in right or left not in t2i or right not in t2i:
                    raise TokenizerError(f"tokenizer.ggml.merges[{i}] = {m!r} is not two vocabulary entries "
                                         "separated by one space")
        n = len(merges)
        # the first occurrence of a duplicate rule wins, as in llama.cpp
        return dict(zip(reversed(merges), range(n - 1, -1, -1)))

    def encode_text(self, tok: Tokenizer, text: str, out: list[int], after_special: bool) -> None:
        """Pre-tokenize one plain-text fragment and append the BPE ids of every piece (cached per piece)."""
        cache = self._cache
        for piece in split(text, self._patterns):
            ids = cache.get(piece)
            if ids is None:
                ids = self._bpe_piece(piece)
                if len(cache) < 200_000:
                    cache[piece] = ids
            out.extend(ids)

    def _bpe_piece(self, piece: str) -> tuple[int, ...]:
        """BPE-encode one pre-tokenized piece (a ``str`` of real text)."""
        try:
            raw = piece.encode("utf-8")
        except UnicodeEncodeError as e:
            raise TokenizerError(f"text contains a lone surrogate {piece[e.start]!r}, which is not "
                                 "valid Unicode text") from None
        word = raw.decode("latin-1").translate(BYTE_TO_CHAR)
        t2i = self._token_to_id
        if self._pre.ignore_merges and word in t2i:
            return (t2i[word],)
        symbols = bpe_merge(list(word), self._ranks)
        ids: list[int] = []
        for s in symbols:
            i = t2i.get(s)
            if i is not None:
                ids.append(i)
                continue
            for ch in s:  # not in the vocabulary: one token per byte; a byte without a token is dropped
                i = t2i.get(ch)
                if i is not None:
                    ids.append(i)
        return tuple(ids)

    def normal_bytes(self, text: str) -> bytes:
        """Each character back through :data:`~bytes2logits.text.CHAR_TO_BYTE`; others are themselves."""
        try:
            return bytes(CHAR_TO_BYTE[c] for c in text)
        except KeyError:  # a character outside the byte alphabet stands for itself
            return b"".join(bytes([CHAR_TO_BYTE[c]]) if c in CHAR_TO_BYTE else c.encode("utf-8")
                            for c in text)


class _SentencePieceBPE(_Family):
    """``"llama"``: spaces as ``"▁"``, merge the best-scoring pair, byte tokens for what is left over."""

    model = "llama"
    defaults = _Defaults(bos=1, eos=2, unk=0, sep=None, add_bos=True)
    space_prefix = True

    def __init__(self, md: Mapping[str, Any], tokens: list[str], token_to_id: dict[str, int], scores):
        """Find the 256 byte-fallback tokens ``<0x00>``..``<0xFF>``; missing scores count as 0."""
        super().__init__(md, tokens, token_to_id, scores)
        self._byte_ids = {b: token_to_id.get(f"<0x{b:02X}>") for b in range(256)}
        missing = [b for b, i in self._byte_ids.items() if i is None]
        if missing:
            raise TokenizerError(f"tokenizer.ggml.tokens lacks {len(missing)} byte-fallback token(s), "
                                 f"e.g. <0x{missing[0]:02X}>")
        self._scores = [0.0] * len(tokens) if scores is None else scores

    def encode_text(self, tok: Tokenizer, text: str, out: list[int], after_special: bool) -> None:
        """A space in front (``add_space_prefix``: at the start, after a special), spaces as "▁", then BPE."""
        if tok.add_space_prefix and after_special:
            text = " " + text
        out.extend(self._encode_spm(text.replace(" ", SPM_SPACE)))

    def _encode_spm(self, text: str) -> list[int]:
        """SentencePiece BPE of one fragment whose spaces are already ``"▁"``."""
        t2i = self._token_to_id
        symbols = spm_merge(text, t2i, self._scores)
        out: list[int] = []
        for s in symbols:
            i = t2i.get(s)
            if i is not None:
                out.append(i)
            else:  # byte fallback: <0xE2> <0x96> ...
                out.extend(self._byte_ids[b] for b in s.encode("utf-8"))
        return out


class _WordPiece(_Family):
    """``"bert"``: normalize, split into words, longest vocabulary entries from the left, [CLS] ... [SEP]."""

    model = "bert"
    defaults = _Defaults(bos=101, eos=None, unk=100, sep=102, add_bos=True)
    bos_by_flag = False

    def __init__(self, md: Mapping[str, Any], tokens: list[str], token_to_id: dict[str, int], scores):
        """Read the normalizer flags (lowercase, strip accents) and note the longest entry's length."""
        super().__init__(md, tokens, token_to_id, scores)
        self._max_token_chars = max(map(len, tokens))
        self._lowercase = _flag(md, "tokenizer.ggml.normalizer.lowercase", True)
        self._strip_accents = _flag(md, "tokenizer.ggml.normalizer.strip_accents", self._lowercase)

    def encode_text(self, tok: Tokenizer, text: str, out: list[int], after_special: bool) -> None:
        """Normalize, split into words, take longest vocabulary matches from the left; else ``tok.unk_id``."""
        t2i = self._token_to_id
        max_len = self._max_token_chars
        for word in wordpiece_words(text, self._lowercase, self._strip_accents):
            w = SPM_SPACE + word  # word starts are stored with a leading "▁"
            n = len(w)
            start = len(out)
            i = 0
            while i < n:
                for j in range(min(n, i + max_len), i, -1):
                    tid = t2i.get(w[i:j])
                    if tid is not None:
                        out.append(tid)
                        i = j
                        break
                else:  # no entry covers position i: the whole word is unknown
                    del out[start:]
                    break
            if len(out) == start:
                if tok.unk_id is None:
                    raise TokenizerError(f"word {word!r} has no WordPiece cover and there is no "
                                         "tokenizer.ggml.unknown_token_id")
                out.append(tok.unk_id)

    def specials(self, tok: Tokenizer) -> tuple[list[int], list[int]]:
        """Always ``[CLS]`` before and ``[SEP]`` after (``bos_id``, ``sep_id``); an error without them."""
        if tok.bos_id is None or tok.sep_id is None:
            raise TokenizerError("add_special needs tokenizer.ggml.bos_token_id and "
                                 "tokenizer.ggml.seperator_token_id for a BERT vocabulary")
        return [tok.bos_id], [tok.sep_id]


_FAMILIES: dict[str, type[_Family]] = {f.model: f for f in (_ByteLevelBPE, _SentencePieceBPE, _WordPiece)}
#: the ``tokenizer.ggml.model`` values this tokenizer reads
SUPPORTED_MODELS: tuple[str, ...] = tuple(_FAMILIES)


def _family_class(model) -> type[_Family]:
    """The :class:`_Family` subclass for a ``tokenizer.ggml.model`` value; anything else is an error."""
    if not isinstance(model, str):
        raise TokenizerError("tokenizer.ggml.model is missing or not a string")
    family = _FAMILIES.get(model)
    if family is None:
        raise TokenizerError(f"tokenizer.ggml.model = {model!r} is not supported "
                             f"(supported: {', '.join(SUPPORTED_MODELS)})")
    return family


# ---------------------------------------------------------------------- the merge loops


def bpe_merge(symbols: list[str], ranks: Mapping[str, int]) -> list[str]:
    """Apply BPE merge rules to a list of symbols; return the merged symbols.

    Rule: among all adjacent pairs that have a merge rule, merge the one with the lowest rank; if that
    rank occurs more than once, the leftmost. Repeat until no adjacent pair has a rule.

    Short words use the plain loop (rescan all pairs after each merge: O(n²) but tiny n). Long words
    (a line of 500 dashes) use a heap of candidate pairs and a linked list, O(n log n), which gives the
    same result: a heap entry whose symbols have changed since it was pushed is skipped.

    >>> bpe_merge(list("aaab"), {"a a": 0, "aa b": 1})   # "a a" merges at the left: aa|a|b, then no rule
    ['aa', 'a', 'b']
    """
    if len(symbols) < 2:
        return symbols
    if len(symbols) <= 48:
        syms = list(symbols)
        while len(syms) > 1:
            best_rank = None
            best = -1
            for k in range(len(syms) - 1):
                r = ranks.get(syms[k] + " " + syms[k + 1])
                if r is not None and (best_rank is None or r < best_rank):
                    best_rank, best = r, k
            if best < 0:
                break
            syms[best:best + 2] = [syms[best] + syms[best + 1]]
        return syms

    return _merge_by_priority(list(symbols), lambda left, right: ranks.get(left + " " + right))


def spm_merge(text: str, token_to_id: Mapping[str, int], scores) -> list[str]:
    """SentencePiece BPE: merge the adjacent pair whose concatenation scores highest, repeatedly.

    Start from single characters. A pair is a candidate when the two symbols written together are a
    vocabulary entry; its priority is that entry's score (ties: leftmost first). Uses a heap of
    candidates and a linked list of symbols, so a long text costs O(n log n).

    >>> spm_merge("▁ab", {"▁a": 0, "ab": 1, "▁ab": 2}, [-1.0, -2.0, -0.5])
    ['▁ab']
    """
    if len(text) < 2:
        return [text] if text else []

    def priority(left: str, right: str) -> float | None:
        tid = token_to_id.get(left + right)
        return None if tid is None else -scores[tid]

    return _merge_by_priority(list(text), priority)


def _merge_by_priority(symbols: list[str], priority) -> list[str]:
    """Merge adjacent symbols, best pair first, until no pair can merge; the loop BPE and SentencePiece share.

    ``priority(left, right)`` is None when the pair cannot merge, else a number: lower merges first,
    leftmost first on ties. A heap holds the candidate pairs and a linked list the symbols, so a long
    text costs O(n log n); a heap entry whose symbols changed since it was pushed is skipped.
    """
    n = len(symbols)
    nxt = list(range(1, n + 1))
    nxt[-1] = -1
    prv = list(range(-1, n - 1))
    heap: list[tuple[float, int, int, str]] = []

    def push(left: int, right: int) -> None:
        if left < 0 or right < 0:
            return
        p = priority(symbols[left], symbols[right])
        if p is not None:
            heapq.heappush(heap, (p, left, right, symbols[left] + symbols[right]))

    for k in range(n - 1):
        push(k, k + 1)
    while heap:
        _, left, right, joined = heapq.heappop(heap)
        if not symbols[left] or not symbols[right] or nxt[left] != right or symbols[left] + symbols[right] != joined:
            continue  # stale: one of the two symbols changed after this pair was pushed
        symbols[left] = joined
        symbols[right] = ""
        nxt[left] = nxt[right]
        if nxt[right] >= 0:
            prv[nxt[right]] = left
        push(prv[left], left)
        push(left, nxt[left])
    out = []
    k = 0
    while k >= 0:
        out.append(symbols[k])
        k = nxt[k]
    return out


# ---------------------------------------------------------------------- WordPiece normalization

_WHITESPACE = regex.compile(r"\s")


def _is_chinese(cp: int) -> bool:
    """CJK ideograph blocks that BERT splits into single-character words."""
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B920 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def wordpiece_words(text: str, lowercase: bool = True, strip_accents: bool = True) -> list[str]:
    """BERT's basic normalization as llama.cpp does it; returns the words to look up.

    Per character: replace it by the first character of its canonical decomposition (NFD) when
    stripping accents, so ``é`` becomes ``e``; whitespace ends a word; NUL, U+FFFD and control/format
    characters are dropped; combining marks are dropped when stripping accents; letters are lowercased;
    punctuation, ASCII symbols and CJK ideographs become one-character words of their own.

    >>> wordpiece_words("Héllo, World!")
    ['hello', ',', 'world', '!']
    """
    words: list[str] = []
    cur: list[str] = []
    for ch in text:
        if strip_accents:
            ch = unicodedata.normalize("NFD", ch)[0]
        if _WHITESPACE.match(ch):
            if cur:
                words.append("".join(cur))
                cur = []
            continue
        cat = unicodedata.category(ch)
        if ch == "\0" or ch == "\ufffd" or cat in ("Cc", "Cf", "Co", "Cs"):
            continue
        if strip_accents and cat[0] == "M":
            continue
        if lowercase:
            low = ch.lower()
            ch = low[0] if low else ch
        if cat[0] == "P" or (ord(ch) < 0x7F and cat[0] == "S") or _is_chinese(ord(ch)):
            if cur:
                words.append("".join(cur))
                cur = []
            words.append(ch)
        else:
            cur.append(ch)
    if cur:
        words.append("".join(cur))
    return words
