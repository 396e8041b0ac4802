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

import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..errors import TokenizerError
from ..text import BYTE_TO_CHAR
from .chat import ChatTemplate
from .decoders import Decoder, StreamDecoder, byte_level_bytes
from .models import BPE, Model, SentencePieceBPE, WordPiece
from .normalizers import LlamaCppBert, Normalizer, NormalizerSequence, Prepend, Replace
from .pretokenizers import (
    ByteLevel,
    LlamaCppBertWords,
    PreTokenizerSequence,
    PreTokenizerStep,
    RegexSplits,
    byte_level_map,
    get_pre_tokenizer,
)

_SURROGATE = re.compile("[\ud800-\udfff]")

__all__ = ["Tokenizer", "TokenType", "SUPPORTED_MODELS", "STEPS", "chat_template_of", "load_merges",
           "special_pattern", "split_specials", "token_bytes", "tokenizer_from_gguf"]


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
#: files larger than this (bytes) get a progress bar from ``encode_file`` unless ``progress=False``
PROGRESS_BYTES = 10_000_000


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


# ------------------------------------------------------------------ the lab-sized steps
#
# Four steps of reading a tokenizer out of GGUF metadata are module functions (lab 14 has a learner write
# them). :class:`Tokenizer` calls them through attributes of the same name, so ``tokenizer_from_gguf`` can
# build a Tokenizer from whichever functions of these names its own namespace holds.


def load_merges(merges, token_to_id: Mapping[str, int]) -> dict[str, int]:
    """Read ``tokenizer.ggml.merges`` ("left right" strings) into a rank table ``{merge: rank}``.

    The rank of a merge is its position in the list: lower ranks were learned earlier and are applied
    first. The table is keyed by the merge string itself, so looking up the pair ``(a, b)`` is
    ``ranks.get(a + " " + b)`` (byte-level vocabularies never contain a real space: it is ``"Ġ"``). A
    merge listed twice keeps its *first* rank, as llama.cpp does. Anything that is not two vocabulary
    entries separated by one space raises :class:`~bytes2logits.errors.TokenizerError` naming its index.

    >>> load_merges(["a b", "ab c", "a b"], {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4})
    {'a b': 0, 'ab c': 1}
    """
    if not isinstance(merges, (list, tuple)):
        raise TokenizerError("tokenizer.ggml.merges is missing or not a list of strings "
                             "(byte-level BPE needs its merge rules)")
    # Fast check first (C-level joins and set operations); the slow loop only runs to name the culprit.
    ok = set(map(type, merges)) <= {str}
    if ok:
        parts = " ".join(merges).split(" ")
        ok = len(parts) == 2 * len(merges) and token_to_id.keys() >= set(parts)
    if not ok:
        for i, m in enumerate(merges):
            if not isinstance(m, str):
                raise TokenizerError(f"tokenizer.ggml.merges[{i}] is {type(m).__name__}, not a string")
            left, sep, right = m.partition(" ")
            if not sep or " " in right or left not in token_to_id or right not in token_to_id:
                raise TokenizerError(f"tokenizer.ggml.merges[{i}] = {m!r} is not two vocabulary entries "
                                     "separated by one space")
    n = len(merges)
    # reversed, so that for a duplicate the first occurrence is written last and wins
    return dict(zip(reversed(merges), range(n - 1, -1, -1)))


_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def token_bytes(text: str, token_type: int, normal_bytes=None) -> bytes:
    """The bytes one token stands for: what llama.cpp's ``token_to_piece`` gives for it.

    * CONTROL, UNKNOWN and USER_DEFINED tokens (types 3, 2 and 4): their text, as UTF-8.
    * BYTE tokens (type 6, SentencePiece's byte fallback): ``"<0xE2>"`` is the single byte 0xE2.
    * NORMAL tokens (type 1): ``normal_bytes(text)``, the family's own spelling (byte-level BPE maps
      each character back to its byte); without ``normal_bytes``, the UTF-8 of the text with ``"▁"``
      (SentencePiece's visible space) read as a space.
    * UNUSED and UNDEFINED tokens (5 and 0): nothing.

    >>> token_bytes("<0xE2>", TokenType.BYTE), token_bytes("▁Hi", TokenType.NORMAL)
    (b'\xe2', b' Hi')
    """
    if token_type in (TokenType.CONTROL, TokenType.UNKNOWN, TokenType.USER_DEFINED):
        return text.encode("utf-8")
    if token_type == TokenType.NORMAL:
        if normal_bytes is None:
            return text.replace(SPM_SPACE, " ").encode("utf-8")
        return normal_bytes(text)
    if token_type == TokenType.BYTE:
        m = _BYTE_TOKEN.fullmatch(text)
        return bytes([int(m.group(1), 16)]) if m else text.encode("utf-8")
    return b""


def special_pattern(texts) -> re.Pattern | None:
    """One regular expression that finds any of the special-token ``texts`` (None when there are none).

    The texts are tried longest first, so that where two start at the same position (``<|im_start|>``
    and ``<|im_start|>assistant``, say) the longer one wins; ``re.search`` then finds the earliest.
    Every text is escaped: ``<|...|>`` is not a regex.

    >>> special_pattern(["<a>", "<a><b>"]).search("x<a><b>").group()
    '<a><b>'
    """
    texts = set(texts)
    if not texts:
        return None
    ordered = sorted(texts, key=lambda t: (-len(t), t))
    return re.compile("|".join(map(re.escape, ordered)))


def split_specials(text: str, pattern: re.Pattern | None, ids: Mapping[str, int], *,
                   control=frozenset(), literal_spans=(), rstrip=frozenset()) -> list:
    """Cut ``text`` into plain-text fragments and special tokens, the earliest match first.

    Returns ``[(start, end, id), ...]`` covering the whole text in order: ``id`` is the special token's
    id, or ``None`` for a fragment of plain text (which the pipeline then encodes). ``pattern`` comes
    from :func:`special_pattern`; ``ids`` maps each text it can match to its id.

    ``literal_spans`` are ``(start, end)`` ranges of untrusted text (a user's message inside a rendered
    template): a match of a ``control`` token that overlaps one of them is not a token; the scan looks
    again from one character later. After an id in ``rstrip`` (Phi-3's rule), ASCII whitespace belongs
    to the token and is skipped.

    llama.cpp gets the same result in another order: it cuts each special text, longest first, out of
    every fragment that is left. The two differ only where two special texts overlap in the input and the
    earlier one is the shorter (Falcon's ``>>TITLE<<`` then ``<|endoftext|>`` in ``>>TITLE<<|endoftext|>``):
    here the earlier wins, there the longer.

    >>> p = special_pattern(["<|im_end|>"])
    >>> split_specials("hi<|im_end|>", p, {"<|im_end|>": 2})
    [(0, 2, None), (2, 12, 2)]
    >>> split_specials("hi<|im_end|>", p, {"<|im_end|>": 2}, control={"<|im_end|>"}, literal_spans=[(0, 12)])
    [(0, 12, None)]
    """
    if pattern is None:
        return [(0, len(text), None)] if text else []
    out: list = []
    pos = search = 0
    while True:
        m = pattern.search(text, search)
        if m is None:
            break
        if literal_spans and m.group() in control and any(
            m.start() < end and m.end() > start for start, end in literal_spans
        ):
            search = m.start() + 1  # inside untrusted text: not a marker; look further
            continue
        if m.start() > pos:
            out.append((pos, m.start(), None))
        tid = ids[m.group()]
        out.append((m.start(), m.end(), tid))
        pos = m.end()
        if tid in rstrip:
            while pos < len(text) and text[pos] in _ASCII_SPACE:
                pos += 1
        search = pos
    if pos < len(text):
        out.append((pos, len(text), None))
    return out


#: The names of the steps above, in the order lab 14 builds them.
STEPS: tuple[str, ...] = ("load_merges", "token_bytes", "special_pattern", "split_specials")


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

    # The lab-sized steps (module functions); ``steps=`` in the constructors replaces them for one tokenizer.
    load_merges = staticmethod(load_merges)
    token_bytes = staticmethod(token_bytes)
    special_pattern = staticmethod(special_pattern)
    split_specials = staticmethod(split_specials)

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_gguf(cls, path_or_reader, *, steps: Mapping[str, Any] | None = None) -> "Tokenizer":
        """Read the tokenizer of a GGUF file: a path, or an already open ``GGUFReader``.

        Only the metadata is used; tensors are never touched, so this works on vocab-only files.
        ``steps`` replaces some of :data:`STEPS` by other functions of the same signature (see
        :func:`tokenizer_from_gguf`).
        """
        if isinstance(path_or_reader, (str, os.PathLike)):
            from .gguf import GGUFReader

            path_or_reader = GGUFReader(path_or_reader)
        metadata = getattr(path_or_reader, "metadata", None)
        if not isinstance(metadata, Mapping):
            raise TypeError("from_gguf() takes a path or an object with a .metadata mapping "
                            f"(a GGUFReader), not {type(path_or_reader).__name__}")
        return cls.from_metadata(metadata, steps=steps)

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any], *, steps: Mapping[str, Any] | None = None) -> "Tokenizer":
        """Build from a mapping of GGUF keys (``tokenizer.ggml.model``, ``tokenizer.ggml.tokens``, ...).

        Every inconsistency raises :class:`~bytes2logits.errors.TokenizerError` naming the key.
        """
        return cls(metadata, steps=steps)

    @classmethod
    def from_file(cls, path: str | os.PathLike, *, config: str | os.PathLike | None = None) -> Tokenizer:
        """Read a Hugging Face ``tokenizer.json`` (see :mod:`bytes2logits.engine.tokenizer_json` for the keys
        and values it accepts; anything else is refused, naming the field).

        BOS, EOS and the chat template are not part of tokenizer.json; they are read from
        ``tokenizer_config.json`` (``config``, or the file of that name next to ``path`` if there is one).
        """
        import json

        from .tokenizer_json import serde_json_float

        path = Path(path)
        try:  # numbers are read as HF reads them (see serde_json_float): Unigram ties then break the same way
            data = json.loads(path.read_text(encoding="utf-8"), parse_float=serde_json_float)
        except json.JSONDecodeError as e:
            raise TokenizerError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
        cfg_path = Path(config) if config is not None else path.with_name("tokenizer_config.json")
        cfg = {}
        if cfg_path.is_file():
            cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        elif config is not None:
            raise FileNotFoundError(f"tokenizer config {cfg_path} does not exist")
        return cls.from_json(data, config=cfg)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, config: Mapping[str, Any] | None = None) -> Tokenizer:
        """Build from a parsed tokenizer.json (and optionally a parsed tokenizer_config.json).

        Numbers are used as given; :meth:`from_file` parses them as Hugging Face does
        (:func:`~bytes2logits.engine.tokenizer_json.serde_json_float`), which matters for Unigram ties.
        """
        from .tokenizer_json import load_components

        c = load_components(data)
        tok = cls.__new__(cls)
        tok.model = c.model_type
        tok.pre = None
        tok.missing_bytes = frozenset()
        tok.add_space_prefix = False
        tok._tokens = c.tokens
        tok._token_to_id = {t: i for i, t in enumerate(c.tokens)}
        types = [TokenType.NORMAL] * len(c.tokens)
        for i, special in c.specials.items():
            types[i] = TokenType.CONTROL if special else TokenType.USER_DEFINED
        tok._types = types
        config = config or {}

        def config_token(key: str) -> int | None:
            value = config.get(key)
            if isinstance(value, Mapping):
                value = value.get("content")
            if value is None:
                return None
            if value not in tok._token_to_id:
                raise TokenizerError(f"tokenizer_config.json: {key} = {value!r} is not in the vocabulary")
            return tok._token_to_id[value]

        tok.bos_id = config_token("bos_token")
        tok.eos_id = config_token("eos_token")
        tok.unk_id = c.unk_id
        tok.sep_id = config_token("sep_token")
        tok.pad_id = config_token("pad_token")
        tok.add_bos = bool(config.get("add_bos_token", False)) and tok.bos_id is not None
        tok.add_eos = bool(config.get("add_eos_token", False)) and tok.eos_id is not None
        tok.eot_id = _first_present({t: i for t, i in tok._token_to_id.items() if types[i] == TokenType.CONTROL},
                                    _EOT_TEXTS)
        stops = {i for t in _EOG_TEXTS if (i := tok._token_to_id.get(t)) is not None and types[i] == TokenType.CONTROL}
        tok.stop_ids = frozenset(stops | ({tok.eos_id} if tok.eos_id is not None else set()))
        tok._index_special_tokens({})
        if hasattr(c.model, "exclude"):
            c.model.exclude(tok._control)
        before, after = c.template
        tok._post_processor = lambda: (list(before), list(after))
        pre_tokenizer, piece_map = _defer_byte_map(c.pre_tokenizer)
        tok._set_pipeline(c.normalizer, pre_tokenizer, piece_map, c.model,
                          decoder=None if c.byte_level else c.decoder,
                          normal_bytes=byte_level_bytes if c.byte_level else None, trim_offsets=c.trim_offsets)
        template = config.get("chat_template")
        tok.chat_template = template if isinstance(template, str) else None
        return tok

    def __init__(self, metadata: Mapping[str, Any], *, steps: Mapping[str, Any] | None = None):
        """Validate the ``tokenizer.*`` keys of ``metadata`` and build the lookup tables.

        Prefer :meth:`from_gguf` / :meth:`from_metadata`; this does the work for both. In order: the family
        named by ``tokenizer.ggml.model``, the vocabulary every family shares, the family's own keys, the
        flags and special-token ids, llama.cpp's end-of-generation and control fix-ups, the chat template.
        """
        md = metadata
        for name, function in (steps or {}).items():
            if name not in STEPS or not callable(function):
                raise TypeError(f"steps: {name!r} is not one of {', '.join(STEPS)}, or is not callable")
            setattr(self, name, function)
        model = md.get("tokenizer.ggml.model")
        family_cls = _family_class(model)
        self.model: str = model
        scores = self._read_vocabulary(md)
        family = family_cls(md, self._tokens, self._token_to_id, scores, load_merges=self.load_merges)
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
        family.finish(self)
        self._post_processor = lambda: family.specials(self)
        self._set_pipeline(family.normalizer, family.pre_tokenizer, family.piece_map, family.stage,
                           decoder=None, normal_bytes=family.normal_bytes)
        template = md.get("tokenizer.chat_template")
        self.chat_template: str | None = template if isinstance(template, str) else None

    def _set_pipeline(self, normalizer: Normalizer | None, pre_tokenizer: PreTokenizerStep | None, piece_map,
                      model: Model, *, decoder: Decoder | None, normal_bytes=None, trim_offsets: bool = False) -> None:
        """Install the stages (both loaders end here) and empty the caches.

        ``piece_map`` (the byte-level map) turns a pre-tokenized piece into the model's alphabet; it is
        applied only when a piece is not in the cache yet. ``decoder`` is a tokenizer.json decoder; without
        one, every token decodes to bytes on its own (``normal_bytes`` for NORMAL tokens), as in llama.cpp.
        """
        self.normalizer = normalizer
        self.pre_tokenizer = pre_tokenizer
        self._piece_map = piece_map
        self.model_stage: Model = model
        self._decoder = decoder
        self._normal_bytes = normal_bytes or (lambda text: text.encode("utf-8"))
        self._trim_offsets = trim_offsets
        self._cache: dict[str, tuple[int, ...]] = {}
        self._special_patterns: dict[Any, re.Pattern | None] = {}
        self._piece_bytes: dict[int, bytes] = {}

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
               literal_spans: Iterable[tuple[int, int]] = (), return_offsets: bool = False):
        """Turn ``text`` into token ids.

        The stages, in order: special tokens are split out of the text first (they are never normalized
        or merged); each plain-text fragment is normalized, cut into pieces by the pre-tokenizer, and each
        piece becomes ids through the model; with ``add_special`` the post-processor adds BOS/EOS (or
        ``[CLS]`` ... ``[SEP]``).

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

        ``return_offsets=True`` returns ``(ids, offsets)``: for each token the ``(start, end)`` character
        range of ``text`` it came from (``(0, 0)`` for tokens the post-processor added), equal to the
        ``offsets`` of Hugging Face ``tokenizers``. Several tokens can share a range: the byte tokens of
        one character, or the pieces of one ligature that NFKC expanded.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, not {type(text).__name__}")
        bad = _SURROGATE.search(text)
        if bad:
            raise TokenizerError(f"text contains a lone surrogate {bad.group()!r} at character {bad.start()} "
                                 "(not valid Unicode: was it decoded with errors='surrogateescape'?)")
        fragments = self._split_special(text, allowed_special, tuple(literal_spans))
        head, tail = self._post_processor() if add_special else ((), ())
        ids: list[int] = list(head)
        offsets: list[tuple[int, int]] = [(0, 0)] * len(ids)
        for start, end, tid in fragments:
            if tid is not None:
                ids.append(tid)
                offsets.append((start, end))
            elif return_offsets:
                for i, s, e in self._encode_fragment_spans(text, start, end):
                    ids.append(i)
                    offsets.append((s, e))
            else:
                self._encode_fragment(text[start:end], start == 0, ids)
        ids.extend(tail)
        if not return_offsets:
            return ids
        offsets.extend([(0, 0)] * len(tail))
        return ids, offsets

    def _encode_fragment(self, text: str, first: bool, out: list[int]) -> None:
        """Normalizer, pre-tokenizer and model for one plain-text fragment (ids only, cached per piece)."""
        if self.normalizer is not None:
            text = self.normalizer.normalize(text)
        pieces = self.pre_tokenizer.split(text, first) if self.pre_tokenizer is not None else (
            [text] if text else [])
        cache, piece_map, model = self._cache, self._piece_map, self.model_stage
        for piece in pieces:
            ids = cache.get(piece)
            if ids is None:
                ids = tuple(model.tokenize(piece_map(piece) if piece_map else piece))
                if len(cache) < 200_000:
                    cache[piece] = ids
            out.extend(ids)

    def _encode_fragment_spans(self, text: str, start: int, end: int) -> list[tuple[int, int, int]]:
        """The same stages keeping track of positions: ``(id, start, end)`` in ``text``."""
        frag = text[start:end]
        align = [(k, k + 1) for k in range(start, end)]
        if self.normalizer is not None:
            frag, align = self.normalizer.normalize_aligned(frag, align)
        if self.pre_tokenizer is not None:
            pieces = self.pre_tokenizer.split_aligned(frag, align, start == 0)
        else:
            pieces = [(frag, align)] if frag else []
        out = []
        for piece, al in pieces:
            if self._piece_map is not None:  # the byte map: every byte keeps its character's span
                mapped = [self._piece_map(ch) for ch in piece]
                piece = "".join(mapped)
                al = [span for m, span in zip(mapped, al) for _ in m]
            for tid, s, e in self.model_stage.tokenize_spans(piece):
                a, b = al[s][0], al[e - 1][1]
                if self._trim_offsets:
                    a, b = _trim(piece[s:e], a, b)
                out.append((tid, a, b))
        return out

    def encode_iterable(self, texts: Iterable[str], allowed_special=None, *, progress: bool | None = None,
                        total: int | None = None) -> Iterator[list[int]]:
        """Encode many texts one by one (lines of a file, say); yields one id list per text.

        Memory stays bounded by the longest text, whatever the number of texts. ``progress`` shows a
        progress bar (by default when ``total`` is known to be large, or always with ``True``).
        """
        if isinstance(texts, str):
            raise TypeError("encode_iterable() takes an iterable of texts, not one str (use encode)")
        bar = None
        if progress or (progress is None and total is not None and total >= 10_000):
            from tqdm.auto import tqdm

            bar = tqdm(total=total, unit="text", desc="encode")
        try:
            for text in texts:
                yield self.encode(text, allowed_special)
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()

    def encode_file(self, path: str | os.PathLike, *, progress: bool | None = None,
                    encoding: str = "utf-8") -> Iterator[list[int]]:
        """Encode a text file line by line (each line keeps its newline); yields one id list per line.

        Reads in chunks, so a file of any size takes bounded memory (plus the longest line). A progress bar
        in bytes is shown for files over 10 MB, or always with ``progress=True``. Lines are encoded apart, so
        the ids can differ from ``encode(whole_file)`` where a piece would have crossed a newline.
        """
        path = Path(path)
        size = path.stat().st_size
        bar = None
        if progress or (progress is None and size > PROGRESS_BYTES):
            from tqdm.auto import tqdm

            bar = tqdm(total=size, unit="B", unit_scale=True, desc=f"encode {path.name}")
        try:
            with open(path, encoding=encoding, newline="") as f:
                for n, line in enumerate(f, 1):
                    try:
                        ids = self.encode(line)
                    except TokenizerError as e:
                        raise TokenizerError(f"{path}, line {n}: {e}") from None
                    if bar is not None:
                        bar.update(len(line.encode(encoding)))
                    yield ids
        finally:
            if bar is not None:
                bar.close()

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
        pattern = self.special_pattern(texts)
        self._special_patterns[key] = pattern
        return pattern

    def _split_special(self, text: str, allowed_special, literal_spans: tuple = ()) -> list:
        """Cut ``text`` into plain-text fragments and special tokens: ``(start, end, id)`` with ``id`` None
        for plain text (:func:`split_specials`). A control token overlapping ``literal_spans`` stays text."""
        return self.split_specials(text, self._special_pattern(allowed_special), self._special_ids,
                                   control=self._control.keys(), literal_spans=literal_spans, rstrip=self._rstrip)

    # ------------------------------------------------------------------ decoding

    def _piece(self, i: int) -> bytes:
        """The bytes one token stands for (what llama.cpp's ``token_to_piece`` returns), cached."""
        b = self._piece_bytes.get(i)
        if b is not None:
            return b
        b = self.token_bytes(self._tokens[i], self._types[i], self._normal_bytes)
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
        if self._decoder is not None:
            return self.decode(ids, skip_special).encode("utf-8")
        return b"".join(map(self._piece, self._kept_ids(ids, skip_special)))

    def decode(self, ids, skip_special: bool = False) -> str:
        """Decode ids to text; each invalid UTF-8 stretch becomes U+FFFD.

        ``skip_special=True`` leaves out control and unknown tokens (``<s>``, ``<|im_end|>``).
        A GGUF SentencePiece vocabulary keeps the space that ``add_space_prefix`` put in front, as
        llama.cpp's ``token_to_piece`` does (its whole-text ``llama_detokenize`` strips that one space from
        the first token); a tokenizer.json decoder (Metaspace, WordPiece, ByteFallback ...) is applied as Hugging Face
        ``tokenizers`` applies it.
        """
        if self._decoder is None:
            return self.decode_bytes(ids, skip_special).decode("utf-8", errors="replace")
        return "".join(self._decoder.decode_chain(self._token_texts(ids, skip_special)))

    def _token_texts(self, ids, skip_special: bool) -> list[str]:
        """The vocabulary entries of ``ids``, without special ones if asked."""
        tokens = self._tokens
        return [tokens[i] for i in self._kept_ids(ids, skip_special)]

    def _kept_ids(self, ids, skip_special: bool) -> list[int]:
        """``ids`` validated (an error names the bad id and its position), without special ones if asked."""
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise TypeError(f"decode takes a sequence of token ids, not {type(ids).__name__} "
                            f"(for one id write [{ids!r}])")
        out = []
        types = self._types
        for pos, value in enumerate(ids):
            i = self._check_id(value, pos)
            if not (skip_special and types[i] in (TokenType.CONTROL, TokenType.UNKNOWN)):
                out.append(i)
        return out

    @property
    def decoder(self) -> Decoder | None:
        """The tokenizer.json decoder chain, or ``None`` when every token decodes to bytes on its own
        (GGUF vocabularies, and tokenizer.json files whose decoder is ByteLevel alone)."""
        return self._decoder

    def stream(self, skip_special: bool = False) -> StreamDecoder:
        """A streaming decoder: ``step(id)`` returns the new text, ``flush()`` the rest; the chunks always
        concatenate to ``decode(ids)`` (see :class:`~bytes2logits.engine.decoders.StreamDecoder`)."""
        return StreamDecoder(self, skip_special)

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
            template = self._chat = chat_template_of(self)
        return template.render(messages, add_generation_prompt=add_generation_prompt, **context)

    def __repr__(self) -> str:
        """A one-line summary: model, pre-tokenizer and vocabulary size."""
        return f"Tokenizer(model={self.model!r}, pre={self.pre!r}, vocab_size={self.vocab_size})"


def tokenizer_from_gguf(path_or_reader) -> Tokenizer:
    """:meth:`Tokenizer.from_gguf`, built from the :data:`STEPS` functions defined next to this function.

    In this module that is exactly ``Tokenizer.from_gguf``. In lab 14's notebook this same function finds
    the learner's ``load_merges``, ``token_bytes``, ``special_pattern`` and ``split_specials`` instead
    (``globals()`` is the namespace a function was defined in), so the engine's pipeline runs with them.
    """
    namespace = globals()
    return Tokenizer.from_gguf(path_or_reader, steps={name: namespace[name] for name in STEPS if name in namespace})


def chat_template_of(tokenizer) -> ChatTemplate:
    """The compiled chat template of a tokenizer: its ``chat_template`` (from ``tokenizer.chat_template``).

    The template sees ``bos_token`` and ``eos_token`` as the vocabulary spells them and is rendered in the
    sandbox of :class:`~bytes2logits.engine.chat.ChatTemplate`; a template that does not compile raises
    :class:`~bytes2logits.errors.TemplateError` naming its line, here, before any conversation. A model
    with no template gets ChatML, and a notice on stderr says so: a guess that is announced, never a
    silent one.
    """
    bos, eos = tokenizer.bos_token or "", tokenizer.eos_token or ""
    source = tokenizer.chat_template
    if source is None:
        print("notice: this model has no tokenizer.chat_template; using ChatML", file=sys.stderr)
        return ChatTemplate.chatml(bos_token=bos, eos_token=eos or "<|im_end|>")
    return ChatTemplate(source, bos_token=bos, eos_token=eos, name="tokenizer.chat_template")


def _defer_byte_map(pre_tokenizer):
    """Split off a final ByteLevel step's byte map, so that the tokenizer caches pieces of real text and maps
    a piece only when it misses the cache: ``(pre-tokenizer without the map, map or None)``."""
    if isinstance(pre_tokenizer, ByteLevel):
        return pre_tokenizer.without_byte_map(), byte_level_map
    if isinstance(pre_tokenizer, PreTokenizerSequence) and pre_tokenizer.steps and isinstance(
            pre_tokenizer.steps[-1], ByteLevel):
        steps = pre_tokenizer.steps[:-1] + [pre_tokenizer.steps[-1].without_byte_map()]
        return PreTokenizerSequence(steps), byte_level_map
    return pre_tokenizer, None


def _trim(token: str, start: int, end: int) -> tuple[int, int]:
    """ByteLevel's ``trim_offsets``: leave the spaces at either end of a byte-level token out of its range."""
    lead = len(token) - len(token.lstrip("Ġ"))
    trail = len(token) - len(token.rstrip("Ġ"))
    if lead:
        start = min(start + lead, end)
    if trail and end >= trail:
        end = max(end - trail, start)
    return start, end


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

    Built from the metadata and the shared vocabulary, a family reads its own keys and assembles the
    pipeline's components: ``normalizer``, ``pre_tokenizer`` (plus ``piece_map``, the byte-level map that
    is applied only when a piece misses the cache), ``model``, :meth:`specials` (the post-processor: the
    ids ``add_special`` puts around the text) and :meth:`normal_bytes` (the decoder, for one NORMAL token).
    """

    model = ""
    #: llama.cpp's special-token ids and ``add_bos`` for this family, used when the keys are missing
    defaults = _Defaults(bos=None, eos=None, unk=None, sep=None, add_bos=False)
    #: whether ``tokenizer.ggml.add_space_prefix`` applies, and its default (only SentencePiece has one)
    space_prefix = False
    #: whether ``add_bos`` decides the BOS, so that it needs ``bos_token_id`` (WordPiece always adds [CLS])
    bos_by_flag = True
    missing_bytes: frozenset[int] = frozenset()
    normalizer: Normalizer | None = None
    pre_tokenizer: PreTokenizerStep | None = None
    piece_map = None

    def __init__(self, md: Mapping[str, Any], tokens: list[str], token_to_id: dict[str, int], scores, *,
                 load_merges=load_merges):
        """Keep the vocabulary lookup and ``tokenizer.ggml.pre`` as given (only byte-level BPE uses it)."""
        pre = md.get("tokenizer.ggml.pre")
        self.pre: str | None = pre if isinstance(pre, str) else None
        self._token_to_id = token_to_id
        self.stage: Model

    def finish(self, tok: Tokenizer) -> None:
        """Complete the components once the tokenizer's flags and special ids are known."""

    def specials(self, tok: Tokenizer) -> tuple[list[int], list[int]]:
        """The ids ``encode(..., add_special=True)`` puts around the text: BOS/EOS as ``tok`` says."""
        return ([tok.bos_id] if tok.add_bos else []), ([tok.eos_id] if tok.add_eos else [])

    def normal_bytes(self, text: str) -> bytes:
        """The bytes a NORMAL token's text stands for: its UTF-8, with ``"▁"`` as a space."""
        return text.replace(SPM_SPACE, " ").encode("utf-8")


class _ByteLevelBPE(_Family):
    """``"gpt2"``: pre-tokenize, write each piece's bytes as printable characters, merge by rank."""

    model = "gpt2"
    piece_map = staticmethod(byte_level_map)

    def __init__(self, md: Mapping[str, Any], tokens: list[str], token_to_id: dict[str, int], scores, *,
                 load_merges=load_merges):
        """Read the pre-tokenizer and the merges; every printable ASCII byte must have a token."""
        super().__init__(md, tokens, token_to_id, scores)
        pre = md.get("tokenizer.ggml.pre")
        if pre is not None and not isinstance(pre, str):
            raise TokenizerError("tokenizer.ggml.pre is not a string")
        spec = get_pre_tokenizer(pre)
        self.pre = pre if pre is not None else "default"
        self.pre_tokenizer = RegexSplits(spec)
        self.defaults = _Defaults(bos=11, eos=11, unk=None, sep=None, add_bos=spec.add_bos)
        ranks = load_merges(md.get("tokenizer.ggml.merges"), token_to_id)
        byte_ids = {b: token_to_id.get(c) for b, c in BYTE_TO_CHAR.items()}
        self.missing_bytes = frozenset(b for b, i in byte_ids.items() if i is None)
        printable = [b for b in range(0x20, 0x7F) if b in self.missing_bytes]
        if printable:
            raise TokenizerError("tokenizer.ggml.tokens has no byte-level token for printable ASCII "
                                 f"byte(s) {', '.join(hex(b) for b in printable)}")
        self.stage = BPE(token_to_id, ranks, ignore_merges=spec.ignore_merges)

    def normal_bytes(self, text: str) -> bytes:
        """Each character back through :data:`~bytes2logits.text.CHAR_TO_BYTE`; others are themselves."""
        return byte_level_bytes(text)


class _SentencePieceBPE(_Family):
    """``"llama"``: spaces as ``"▁"`` (and one in front), merge the best-scoring pair, byte tokens for the rest."""

    model = "llama"
    defaults = _Defaults(bos=1, eos=2, unk=0, sep=None, add_bos=True)
    space_prefix = True

    def __init__(self, md: Mapping[str, Any], tokens: list[str], token_to_id: dict[str, int], scores, **_):
        """Missing scores count as 0; the 256 byte-fallback tokens ``<0x00>``..``<0xFF>`` must exist."""
        super().__init__(md, tokens, token_to_id, scores)
        self.stage = SentencePieceBPE(token_to_id, [0.0] * len(tokens) if scores is None else scores)

    def finish(self, tok: Tokenizer) -> None:
        """Spaces become ``"▁"``, and with ``add_space_prefix`` one ``"▁"`` goes in front of every fragment
        (every plain-text fragment starts the text or follows a special token, as in llama.cpp)."""
        steps: list[Normalizer] = [Replace(" ", SPM_SPACE)]
        if tok.add_space_prefix:
            steps.append(Prepend(SPM_SPACE))
        self.normalizer = NormalizerSequence(steps)


class _WordPiece(_Family):
    """``"bert"``: normalize, split into words, longest vocabulary entries from the left, [CLS] ... [SEP]."""

    model = "bert"
    defaults = _Defaults(bos=101, eos=None, unk=100, sep=102, add_bos=True)
    bos_by_flag = False
    pre_tokenizer = LlamaCppBertWords()

    def __init__(self, md: Mapping[str, Any], tokens: list[str], token_to_id: dict[str, int], scores, **_):
        """Read the normalizer flags (lowercase, strip accents)."""
        super().__init__(md, tokens, token_to_id, scores)
        lowercase = _flag(md, "tokenizer.ggml.normalizer.lowercase", True)
        strip_accents = _flag(md, "tokenizer.ggml.normalizer.strip_accents", lowercase)
        self.normalizer = LlamaCppBert(lowercase, strip_accents)

    def finish(self, tok: Tokenizer) -> None:
        """Word starts are stored with a leading ``"▁"`` and continuations have no prefix (the GGUF
        converter's spelling of BERT's ``##``); there is no length limit."""
        self.stage = WordPiece(self._token_to_id, tok.unk_id, continuing_subword_prefix="",
                               max_input_chars_per_word=1 << 62, word_prefix=SPM_SPACE)

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
