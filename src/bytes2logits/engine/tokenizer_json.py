"""Read a Hugging Face ``tokenizer.json`` into the pipeline's components (chapters 11 and 12).

A ``tokenizer.json`` is the whole tokenizer in one JSON object: ``added_tokens``, then one key per stage —
``normalizer``, ``pre_tokenizer``, ``model``, ``post_processor``, ``decoder`` — each a ``{"type": ...}``
object (or ``null``), with ``Sequence`` types that chain several. :func:`load_components` turns each key
into the component class of the same name (:mod:`~bytes2logits.engine.normalizers`,
:mod:`~bytes2logits.engine.pretokenizers`, :mod:`~bytes2logits.engine.models`,
:mod:`~bytes2logits.engine.decoders`); :meth:`Tokenizer.from_file
<bytes2logits.engine.tokenizer.Tokenizer.from_file>` assembles them.

The reader accepts a subset, and refuses everything else with a :class:`~bytes2logits.errors.TokenizerError`
that names the field by its JSON path and the value found, e.g. ``model.dropout = 0.1 is not supported``.
A loader that silently ignored an unknown setting would produce ids the model was never trained on.

What is accepted, per key (a superset of the course's seed, covering GPT-2, SmolLM2, Qwen3, BERT and
SentencePiece Unigram files):

=================  ==============================================================================================
``version``        ``"1.0"``
``truncation``,    anything; ignored (this tokenizer never truncates or pads)
``padding``
``added_tokens``   ``{id, content, special, normalized, single_word, lstrip, rstrip}``; ``single_word``, ``lstrip``,
                   ``rstrip`` false; ``normalized`` true only without a normalizer
``normalizer``     null, NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, BertNormalizer, Replace, Prepend, Sequence
``pre_tokenizer``  null, ByteLevel, Split, Digits, BertPreTokenizer, WhitespaceSplit, Metaspace, Sequence
``model``          BPE, WordPiece, Unigram (below)
``post_processor`` null, ByteLevel, TemplateProcessing (single sequence), Sequence of these
``decoder``        null, ByteLevel, ByteFallback, Fuse, Replace, Strip, Metaspace, WordPiece, Sequence
=================  ==============================================================================================

Models: **BPE** — ``vocab`` (token -> id), ``merges`` (``"left right"`` or ``["left", "right"]``, by rank),
``dropout`` null, ``unk_token`` null or a token, ``continuing_subword_prefix``/``end_of_word_suffix`` null or
``""``, ``fuse_unk``/``byte_fallback``/``ignore_merges`` booleans. **WordPiece** — ``vocab``, ``unk_token``,
``continuing_subword_prefix``, ``max_input_chars_per_word``. **Unigram** — ``vocab`` (``[piece, log_prob]``
in id order), ``unk_id``, ``byte_fallback``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import TokenizerError
from . import decoders as dec
from . import normalizers as norm
from . import pretokenizers as pre
from .models import BPE, Model, Unigram, WordPiece

__all__ = ["Components", "load_components", "serde_json_float", "normalizer_from_spec", "pre_tokenizer_from_spec",
           "model_from_spec", "bpe_from_spec", "wordpiece_from_spec", "unigram_from_spec", "decoder_from_spec",
           "post_processor_from_spec", "check_added_tokens"]


_POW10 = [float(f"1e{i}") for i in range(309)]
_U64 = 2**64 - 1
_NUMBER = re.compile(r"(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?")


def serde_json_float(literal: str) -> float:
    """A JSON number read the way Hugging Face ``tokenizers`` reads it (Rust's ``serde_json``), not correctly
    rounded.

    ``serde_json`` collects the digits into a 64-bit integer (ignoring the digits that do not fit), converts
    it to a float, then multiplies or divides by a power of ten: two roundings, so the result can be one
    unit in the last place away from Python's ``float(literal)``. For most settings that never matters. For
    a Unigram model it does: two segmentations whose scores tie exactly in one reading can differ by an ulp
    in the other, and the tie rule then picks a different one. Reading scores this way gives HF's ids.

    >>> float("-10.654038311011167"), serde_json_float("-10.654038311011167")
    (-10.654038311011167, -10.654038311011169)
    """
    m = _NUMBER.fullmatch(literal)
    if m is None:
        raise ValueError(f"not a JSON number: {literal!r}")
    neg, int_part, frac, exp = m.group(1), m.group(2), m.group(3) or "", m.group(4)
    significand, exponent, overflowed = 0, 0, False
    for ch in int_part:
        if overflowed:  # digits that no longer fit only scale the number
            exponent += 1
            continue
        d = ord(ch) - 48
        if significand * 10 + d > _U64:
            overflowed = True
            exponent += 1
            continue
        significand = significand * 10 + d
    for ch in frac:
        d = ord(ch) - 48
        if significand * 10 + d > _U64:
            break  # the remaining decimals are ignored
        significand = significand * 10 + d
        exponent -= 1
    if exp is not None:
        exponent += int(exp)
    f = float(significand)
    while True:
        k = abs(exponent)
        if k < len(_POW10):
            f = f * _POW10[k] if exponent >= 0 else f / _POW10[k]
            break
        if f == 0.0:
            break
        if exponent >= 0:
            raise ValueError(f"JSON number out of range: {literal!r}")
        f /= 1e308
        exponent += 308
    return -f if neg else f


@dataclass
class Components:
    """Everything a tokenizer.json describes, as objects."""

    tokens: list[str]
    specials: dict[int, bool]              # added token id -> special?
    normalizer: norm.Normalizer | None
    pre_tokenizer: pre.PreTokenizerStep | None
    model: Model
    model_type: str
    template: tuple[list[int], list[int]]  # ids the post-processor puts before / after the text
    trim_offsets: bool
    decoder: dec.Decoder | None
    byte_level: bool                       # the decoder is ByteLevel alone: decode token by token to bytes
    unk_id: int | None = None
    notes: list[str] = field(default_factory=list)


def _fail(path: str, message: str):
    raise TokenizerError(f"tokenizer.json: {path} {message}")


def _obj(value, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        _fail(path, f"must be an object, not {type(value).__name__}")
    return value


def _type(spec: Mapping[str, Any], path: str) -> str:
    t = spec.get("type")
    if not isinstance(t, str):
        _fail(f"{path}.type", f"is missing or not a string (got {t!r})")
    return t


def _get(spec: Mapping[str, Any], key: str, path: str, kinds, default=None, *, required: bool = False):
    """``spec[key]`` checked against ``kinds`` (a type or tuple); ``bool`` is never an ``int`` here."""
    if key not in spec or spec[key] is None:
        if required:
            _fail(f"{path}.{key}", "is missing")
        return default
    value = spec[key]
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not ok:
        names = " or ".join(k.__name__ for k in kinds)
        _fail(f"{path}.{key}", f"= {value!r} must be {names}")
    return value


def _must(spec: Mapping[str, Any], key: str, path: str, allowed: tuple, default=None):
    """``spec[key]`` must be one of ``allowed`` (a missing key counts as ``default``)."""
    value = spec.get(key, default)
    if value not in allowed or isinstance(value, bool) != isinstance(allowed[0], bool):
        _fail(f"{path}.{key}", f"= {value!r} is not supported (supported: {', '.join(map(repr, allowed))})")
    return value


def _pattern(spec: Mapping[str, Any], path: str) -> tuple[str, bool]:
    """A ``{"String": ...}`` or ``{"Regex": ...}`` pattern: (text, is_regex)."""
    p = _obj(spec.get("pattern"), f"{path}.pattern")
    if set(p) == {"String"} and isinstance(p["String"], str):
        return p["String"], False
    if set(p) == {"Regex"} and isinstance(p["Regex"], str):
        return p["Regex"], True
    _fail(f"{path}.pattern", f"= {p!r} must be {{'String': ...}} or {{'Regex': ...}}")


def _compile_check(pattern: str, path: str) -> None:
    import regex

    try:
        regex.compile(pattern)
    except regex.error as e:
        _fail(path, f"= {pattern!r} is not a regular expression the regex module accepts ({e})")


# ---------------------------------------------------------------------- normalizer

def normalizer_from_spec(spec, path: str = "normalizer") -> norm.Normalizer | None:
    """A normalizer object for a tokenizer.json ``normalizer`` value (``None`` for null)."""
    if spec is None:
        return None
    spec = _obj(spec, path)
    t = _type(spec, path)
    simple = {"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD,
              "Lowercase": norm.Lowercase, "StripAccents": norm.StripAccents}
    if t in simple:
        return simple[t]()
    if t == "BertNormalizer":
        return norm.BertNormalizer(
            clean_text=_get(spec, "clean_text", path, bool, True),
            handle_chinese_chars=_get(spec, "handle_chinese_chars", path, bool, True),
            strip_accents=_get(spec, "strip_accents", path, bool, None),
            lowercase=_get(spec, "lowercase", path, bool, True))
    if t == "Replace":
        pattern, is_regex = _pattern(spec, path)
        if not pattern:
            _fail(f"{path}.pattern", "is empty")
        if is_regex:
            _compile_check(pattern, f"{path}.pattern.Regex")
        return norm.Replace(pattern, _get(spec, "content", path, str, required=True), is_regex=is_regex)
    if t == "Prepend":
        return norm.Prepend(_get(spec, "prepend", path, str, required=True))
    if t == "Sequence":
        items = _get(spec, "normalizers", path, list, required=True)
        return norm.NormalizerSequence([normalizer_from_spec(n, f"{path}.normalizers[{k}]")
                                        for k, n in enumerate(items)])
    hint = " (SentencePiece's compiled character map is not supported)" if t == "Precompiled" else ""
    _fail(f"{path}.type", f"= {t!r} is not supported{hint}")


# ---------------------------------------------------------------------- pre-tokenizer

_BEHAVIOR = {"Removed": "Removed", "Isolated": "Isolated", "MergedWithPrevious": "MergedWithPrevious",
             "MergedWithNext": "MergedWithNext", "Contiguous": "Contiguous"}


def pre_tokenizer_from_spec(spec, path: str = "pre_tokenizer") -> pre.PreTokenizerStep | None:
    """A pre-tokenizer object for a tokenizer.json ``pre_tokenizer`` value (``None`` for null)."""
    if spec is None:
        return None
    spec = _obj(spec, path)
    t = _type(spec, path)
    if t == "ByteLevel":
        return pre.ByteLevel(add_prefix_space=_get(spec, "add_prefix_space", path, bool, True),
                             use_regex=_get(spec, "use_regex", path, bool, True),
                             trim_offsets=_get(spec, "trim_offsets", path, bool, True))
    if t == "Split":
        pattern, is_regex = _pattern(spec, path)
        if is_regex:
            _compile_check(pattern, f"{path}.pattern.Regex")
        behavior = _must(spec, "behavior", path, tuple(_BEHAVIOR), "Isolated")
        return pre.Split(pattern, _BEHAVIOR[behavior], _get(spec, "invert", path, bool, False), is_regex=is_regex)
    if t == "Digits":
        return pre.Digits(_get(spec, "individual_digits", path, bool, False))
    if t == "BertPreTokenizer":
        return pre.BertPreTokenizer()
    if t == "WhitespaceSplit":
        return pre.WhitespaceSplit()
    if t == "Metaspace":
        replacement = _get(spec, "replacement", path, str, "\u2581")
        if len(replacement) != 1:
            _fail(f"{path}.replacement", f"= {replacement!r} must be one character")
        scheme = _must(spec, "prepend_scheme", path, ("always", "first", "never"), "always")
        return pre.Metaspace(replacement, scheme, _get(spec, "split", path, bool, True))
    if t == "Sequence":
        items = _get(spec, "pretokenizers", path, list, required=True)
        return pre.PreTokenizerSequence([pre_tokenizer_from_spec(p, f"{path}.pretokenizers[{k}]")
                                         for k, p in enumerate(items)])
    _fail(f"{path}.type", f"= {t!r} is not supported")


# ---------------------------------------------------------------------- model

def _vocab_dict(spec: Mapping[str, Any], path: str) -> dict[str, int]:
    vocab = _get(spec, "vocab", path, dict, required=True)
    for token, i in vocab.items():
        if isinstance(i, bool) or not isinstance(i, int) or i < 0:
            _fail(f"{path}.vocab[{token!r}]", f"= {i!r} is not a token id")
    return vocab


def _merges(spec: Mapping[str, Any], path: str, vocab: Mapping[str, int]) -> tuple[dict[str, int], str]:
    """The rank table (keyed ``left + sep + right``) and the separator (a space unless a token holds one).

    A merge listed twice keeps its *later* rank, as Hugging Face ``tokenizers`` does (it fills a hash map in
    order); llama.cpp, reading the same list from a GGUF file, keeps the first.
    """
    merges = _get(spec, "merges", path, list, [])
    pairs: list[tuple[str, str]] = []
    for k, m in enumerate(merges):
        if isinstance(m, str):
            parts = m.split(" ")
            if len(parts) != 2:
                _fail(f"{path}.merges[{k}]", f"= {m!r} is not two tokens separated by one space")
            pairs.append((parts[0], parts[1]))
        elif isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m):
            pairs.append((m[0], m[1]))
        else:
            _fail(f"{path}.merges[{k}]", f"= {m!r} must be 'left right' or ['left', 'right']")
    sep = " "
    if any(" " in a or " " in b for a, b in pairs):
        sep = "\x00"
    ranks: dict[str, int] = {}
    for k, (a, b) in enumerate(pairs):
        if a not in vocab or b not in vocab or a + b not in vocab:
            missing = next(x for x in (a, b, a + b) if x not in vocab)
            _fail(f"{path}.merges[{k}]", f"= {a!r} + {b!r}: {missing!r} is not in {path}.vocab")
        ranks[a + sep + b] = k  # a rule listed twice keeps its later rank, as in tokenizers
    return ranks, sep


def bpe_from_spec(spec: Mapping[str, Any], path: str = "model") -> tuple[BPE, list[str], int | None]:
    """A ``"BPE"`` model section -> ``(model, vocabulary in id order, unknown id)``, refusing what is unsupported.

    ``vocab`` maps token -> id; ``merges`` are ranked by position, each ``"left right"`` or
    ``["left", "right"]``, and both halves and their concatenation must be in the vocabulary. ``dropout``
    must be null (it is a training-time trick), ``continuing_subword_prefix`` and ``end_of_word_suffix``
    null or ``""``; ``unk_token`` null or a vocabulary entry; ``fuse_unk``, ``byte_fallback`` and
    ``ignore_merges`` are booleans. An error names the field by its JSON path, e.g. ``model.dropout``.

    >>> m, tokens, unk = bpe_from_spec({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})
    >>> m.tokenize("abab"), tokens, unk
    ([2, 2], ['a', 'b', 'ab'], None)
    """
    vocab = _vocab_dict(spec, path)
    if _get(spec, "dropout", path, (int, float)) is not None:
        _fail(f"{path}.dropout", f"= {spec['dropout']!r} is not supported (only null: dropout is for training)")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if _get(spec, key, path, str, ""):
            _fail(f"{path}.{key}", f"= {spec[key]!r} is not supported (only null or \"\")")
    unk = _get(spec, "unk_token", path, str)
    if unk is not None and unk not in vocab:
        _fail(f"{path}.unk_token", f"= {unk!r} is not in {path}.vocab")
    ranks, sep = _merges(spec, path, vocab)
    unk_id = None if unk is None else vocab[unk]
    model = BPE(vocab, ranks, sep=sep, unk_id=unk_id, fuse_unk=_get(spec, "fuse_unk", path, bool, False),
                byte_fallback=_get(spec, "byte_fallback", path, bool, False),
                ignore_merges=_get(spec, "ignore_merges", path, bool, False))
    return model, _ordered(vocab, path), unk_id


def wordpiece_from_spec(spec: Mapping[str, Any], path: str = "model") -> tuple[WordPiece, list[str], int]:
    """A ``"WordPiece"`` model section -> ``(model, vocabulary in id order, unknown id)``."""
    vocab = _vocab_dict(spec, path)
    unk = _get(spec, "unk_token", path, str, "[UNK]")
    if unk not in vocab:
        _fail(f"{path}.unk_token", f"= {unk!r} is not in {path}.vocab")
    model = WordPiece(vocab, vocab[unk],
                      continuing_subword_prefix=_get(spec, "continuing_subword_prefix", path, str, "##"),
                      max_input_chars_per_word=_get(spec, "max_input_chars_per_word", path, int, 100))
    return model, _ordered(vocab, path), vocab[unk]


def unigram_from_spec(spec: Mapping[str, Any], path: str = "model") -> tuple[Unigram, list[str], int | None]:
    """A ``"Unigram"`` model section -> ``(model, vocabulary in id order, unknown id)``."""
    items = _get(spec, "vocab", path, list, required=True)
    pieces = []
    for k, item in enumerate(items):
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], (int, float)) and not isinstance(item[1], bool)):
            _fail(f"{path}.vocab[{k}]", f"= {item!r} must be [piece, log_prob]")
        pieces.append((item[0], float(item[1])))
    unk_id = _get(spec, "unk_id", path, int)
    if unk_id is not None and not 0 <= unk_id < len(pieces):
        _fail(f"{path}.unk_id", f"= {unk_id} is not an index into {path}.vocab (0..{len(pieces) - 1})")
    tokens = [p for p, _ in pieces]
    if len(set(tokens)) != len(tokens):
        _fail(f"{path}.vocab", "holds the same piece twice")
    return Unigram(pieces, unk_id, _get(spec, "byte_fallback", path, bool, False)), tokens, unk_id


_MODELS = {"BPE": bpe_from_spec, "WordPiece": wordpiece_from_spec, "Unigram": unigram_from_spec}


def model_from_spec(spec, path: str = "model") -> tuple[Model, str, list[str], int | None]:
    """The model object, its type, the vocabulary in id order and the unknown token's id."""
    spec = _obj(spec, path)
    t = spec.get("type")
    if t is None:  # old files: the keys say which model it is
        t = "BPE" if "merges" in spec else "WordPiece" if "max_input_chars_per_word" in spec else None
        if t is None:
            _fail(f"{path}.type", "is missing")
    build = _MODELS.get(t)
    if build is None:
        _fail(f"{path}.type", f"= {t!r} is not supported (supported: {', '.join(map(repr, _MODELS))})")
    model, tokens, unk_id = build(spec, path)
    return model, t, tokens, unk_id


def _ordered(vocab: Mapping[str, int], path: str) -> list[str]:
    """The vocabulary as a list indexed by id (gaps are filled by added tokens or refused later)."""
    n = max(vocab.values(), default=-1) + 1
    tokens: list[str | None] = [None] * n
    for token, i in vocab.items():
        if tokens[i] is not None:
            _fail(f"{path}.vocab", f"gives id {i} to both {tokens[i]!r} and {token!r}")
        tokens[i] = token
    return tokens  # type: ignore[return-value]


# ---------------------------------------------------------------------- post-processor

def post_processor_from_spec(spec, token_to_id: Mapping[str, int], path: str = "post_processor"):
    """``(before, after, trim_offsets)``: the ids TemplateProcessing puts around a single text, and
    ByteLevel's ``trim_offsets``."""
    if spec is None:
        return [], [], False
    spec = _obj(spec, path)
    t = _type(spec, path)
    if t == "ByteLevel":
        return [], [], _get(spec, "trim_offsets", path, bool, True)
    if t == "TemplateProcessing":
        specials = _get(spec, "special_tokens", path, dict, {})
        before: list[int] = []
        after: list[int] = []
        seen_a = False
        for k, item in enumerate(_get(spec, "single", path, list, required=True)):
            where = f"{path}.single[{k}]"
            item = _obj(item, where)
            if set(item) == {"Sequence"}:
                if _obj(item["Sequence"], where).get("id") != "A" or seen_a:
                    _fail(where, f"= {item!r}: only one Sequence 'A' is supported")
                seen_a = True
            elif set(item) == {"SpecialToken"}:
                name = _obj(item["SpecialToken"], where).get("id")
                entry = specials.get(name)
                if entry is None:
                    _fail(where, f"names {name!r}, which is not in {path}.special_tokens")
                ids = _get(_obj(entry, f"{path}.special_tokens[{name!r}]"), "ids", f"{path}.special_tokens[{name!r}]",
                           list, required=True)
                for i in ids:
                    if isinstance(i, bool) or not isinstance(i, int):
                        _fail(f"{path}.special_tokens[{name!r}].ids", f"holds {i!r}, not a token id")
                (after if seen_a else before).extend(ids)
            else:
                _fail(where, f"= {item!r} must be {{'Sequence': ...}} or {{'SpecialToken': ...}}")
        if not seen_a:
            _fail(f"{path}.single", "has no Sequence 'A' (where would the text go?)")
        return before, after, False
    if t == "Sequence":
        before, after, trim = [], [], False
        for k, p in enumerate(_get(spec, "processors", path, list, required=True)):
            b, a, tr = post_processor_from_spec(p, token_to_id, f"{path}.processors[{k}]")
            before, after, trim = before + b, a + after, trim or tr
        return before, after, trim
    _fail(f"{path}.type", f"= {t!r} is not supported")


# ---------------------------------------------------------------------- decoder

class _JoinWithSpaces(dec.Decoder):
    """No decoder at all: ``tokenizers`` joins the token strings with spaces."""

    def decode_chain(self, tokens: list[str], first: bool = True) -> list[str]:
        """A space before every token but the first."""
        return [t if first and k == 0 else " " + t for k, t in enumerate(tokens)]


def decoder_from_spec(spec, path: str = "decoder") -> dec.Decoder:
    """A decoder object for a tokenizer.json ``decoder`` value."""
    if spec is None:
        return _JoinWithSpaces()
    spec = _obj(spec, path)
    t = _type(spec, path)
    if t == "ByteLevel":
        return dec.ByteLevelDecoder()
    if t == "ByteFallback":
        return dec.ByteFallback()
    if t == "Fuse":
        return dec.Fuse()
    if t == "Replace":
        pattern, is_regex = _pattern(spec, path)
        if is_regex:
            _fail(f"{path}.pattern", "is a Regex; only {'String': ...} is supported in a decoder")
        return dec.ReplaceDecoder(pattern, _get(spec, "content", path, str, required=True))
    if t == "Strip":
        content = _get(spec, "content", path, str, " ")
        if len(content) != 1:
            _fail(f"{path}.content", f"= {content!r} must be one character")
        return dec.Strip(content, _get(spec, "start", path, int, 0), _get(spec, "stop", path, int, 0))
    if t == "Metaspace":
        scheme = _must(spec, "prepend_scheme", path, ("always", "first", "never"), "always")
        return dec.MetaspaceDecoder(_get(spec, "replacement", path, str, "\u2581"), scheme)
    if t == "WordPiece":
        return dec.WordPieceDecoder(_get(spec, "prefix", path, str, "##"), _get(spec, "cleanup", path, bool, True))
    if t == "Sequence":
        items = _get(spec, "decoders", path, list, required=True)
        return dec.DecoderSequence([decoder_from_spec(d, f"{path}.decoders[{k}]") for k, d in enumerate(items)])
    _fail(f"{path}.type", f"= {t!r} is not supported")


# ---------------------------------------------------------------------- added tokens and the whole file

def check_added_tokens(items, has_normalizer: bool, path: str = "added_tokens") -> list[tuple[int, str, bool]]:
    """``(id, content, special)`` per added token, after checking the flags this tokenizer supports."""
    if items is None:
        return []
    if not isinstance(items, list):
        _fail(path, f"must be a list, not {type(items).__name__}")
    out = []
    for k, item in enumerate(items):
        where = f"{path}[{k}]"
        item = _obj(item, where)
        i = _get(item, "id", where, int, required=True)
        content = _get(item, "content", where, str, required=True)
        if not content:
            _fail(f"{where}.content", "is empty")
        for flag in ("single_word", "lstrip", "rstrip"):
            if _get(item, flag, where, bool, False):
                _fail(f"{where}.{flag}", f"= true is not supported (token {content!r})")
        if _get(item, "normalized", where, bool, False) and has_normalizer:
            _fail(f"{where}.normalized", f"= true is not supported with a normalizer (token {content!r})")
        out.append((i, content, _get(item, "special", where, bool, False)))
    return out


def load_components(data) -> Components:
    """Check a parsed tokenizer.json and build its components (see the module docstring for the subset)."""
    data = _obj(data, "(top level)")
    version = data.get("version", "1.0")
    if version != "1.0":
        _fail("version", f"= {version!r} is not supported (only '1.0')")
    known = {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "model",
             "post_processor", "decoder"}
    for key in data:
        if key not in known:
            _fail(key, "is not a tokenizer.json key this reader knows")
    if "model" not in data:
        _fail("model", "is missing")
    normalizer = normalizer_from_spec(data.get("normalizer"))
    pre_tokenizer = pre_tokenizer_from_spec(data.get("pre_tokenizer"))
    model, model_type, tokens, unk_id = model_from_spec(data["model"])
    added = check_added_tokens(data.get("added_tokens"), normalizer is not None)
    specials: dict[int, bool] = {}
    for k, (i, content, special) in enumerate(added):
        if i >= len(tokens):
            tokens.extend([None] * (i + 1 - len(tokens)))
        if tokens[i] is not None and tokens[i] != content:
            _fail(f"added_tokens[{k}]", f"gives id {i} to {content!r}, but model.vocab has {tokens[i]!r} there")
        tokens[i] = content
        specials[i] = special
    if None in tokens:
        _fail("model.vocab", f"has no token for id {tokens.index(None)} (ids must be 0..n-1 with added_tokens)")
    t2i = {t: i for i, t in enumerate(tokens)}
    before, after, trim = post_processor_from_spec(data.get("post_processor"), t2i)
    for i in before + after:
        if not 0 <= i < len(tokens):
            _fail("post_processor", f"adds id {i}, which is not in the vocabulary")
    decoder = decoder_from_spec(data.get("decoder"))
    return Components(tokens=tokens, specials=specials, normalizer=normalizer, pre_tokenizer=pre_tokenizer,
                      model=model, model_type=model_type, template=(before, after), trim_offsets=trim,
                      decoder=decoder, byte_level=isinstance(decoder, dec.ByteLevelDecoder), unk_id=unk_id)
