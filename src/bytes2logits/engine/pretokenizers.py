"""Pre-tokenizers for byte-level BPE: how a text is cut into pieces before any merge happens.

A byte-level BPE tokenizer never merges across piece boundaries, so the pieces decide a lot: whether
``" world"`` keeps its space, whether ``"2024"`` is one piece or four digits, whether ``"don't"`` splits
at the apostrophe. The GGUF key ``tokenizer.ggml.pre`` names the pre-tokenizer the model was trained
with; this module maps each supported name to its list of regular expressions.

How a *list* of expressions is applied (this is what llama.cpp does, and what the test fixtures expect):
start with the whole text as one fragment; for each expression in turn, cut every fragment into the
stretches the expression matches *and the stretches between matches* (nothing is ever dropped). So a
later expression only refines the cuts of the earlier ones. With a single expression that matches every
character somewhere, this is simply ``regex.findall``.

The expressions use the third-party ``regex`` module, which understands Unicode classes such as
``\\p{L}`` (any letter), ``\\p{N}`` (any number) and ``\\p{P}`` (punctuation), and whose ``\\s`` is exactly
the Unicode ``White_Space`` set. Where a tokenizer.json pattern uses a case-insensitive group
``(?i:'s|'t|...)``, the table spells it out as ``'[sS]|'[tT]|...`` (llama.cpp's rewrite; the meaning is
the same except for one letter: ``(?i)`` also matches U+017F LONG S in ``'ſ``). ECMAScript's ``$`` (end of the
fragment) is written ``\\Z`` here, because Python's ``$`` would also match before a final newline.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import regex

from ..text import BYTE_TO_CHAR

__all__ = ["PreTokenizer", "PRE_TOKENIZERS", "supported_pre", "get_pre_tokenizer", "split", "BEHAVIORS",
           "PreTokenizerStep", "Split", "Digits", "BertPreTokenizer", "WhitespaceSplit", "ByteLevel", "Metaspace",
           "PreTokenizerSequence", "is_bert_punctuation", "split_spans", "byte_level_map",
           "byte_level_pieces", "bert_words", "is_white_space", "LlamaCppBertWords", "RegexSplits"]

# --- The building blocks -------------------------------------------------------------------------------

# GPT-2 (2019): contractions, optional space + letters / digits / other symbols, runs of whitespace.
# The whitespace rule \s+(?!\S) leaves the last space of a run for the next word: "a   b" -> "a", "  ", " b".
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

# Llama 3 (tiktoken cl100k-style): case-insensitive contractions, one leading non-letter glued to a word,
# numbers in groups of at most three digits, newlines kept together with the whitespace before them.
_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
LLAMA3 = (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# Qwen2: like Llama 3 but every digit is its own piece.
QWEN2 = (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# Qwen3.5: like Qwen2, but combining marks (\p{M}) stay with the letters they modify ("é" written e + ◌́).
QWEN35 = (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# CJK ideographs, a wide block before them (U+0800..U+4E00), and Hangul: one piece per run.
_CJK_RUN = r"[一-龥ࠀ-一가-퟿]+"

# DeepSeek LLM: letters of cased alphabets (Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee, ...)
# listed as explicit ranges in the model's tokenizer.json. A few code points are written as \u escapes:
# they have singleton canonical decompositions (U+1F7D ώ -> U+03CE), and an editor that normalizes
# text to NFC would silently change them.
_DEEPSEEK_CASED_LETTERS = (
    "A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅ"
    "ὐ-ὗὙὛὝὟ-\u1f7dᾀ-ᾴᾶ-ᾼ\u1fbeῂ-ῄῆ-ῌῐ-\u1fd3ῖ-\u1fdbῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212a-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗ"
    "Ａ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃"
)


@dataclass(frozen=True)
class PreTokenizer:
    """One pre-tokenizer: its expressions plus the two BPE switches llama.cpp ties to the same name.

    * ``patterns`` — the regular expressions, applied one after another as described in the module
      docstring.
    * ``ignore_merges`` — if a whole piece is already a vocabulary entry, use it as one token without
      running the merges (Llama 3 does this; it matters for pieces the merge list cannot rebuild).
    * ``add_bos`` — the default for "prepend BOS" when the GGUF file has no ``add_bos_token`` key.
    """

    name: str
    patterns: tuple[str, ...]
    ignore_merges: bool = False
    add_bos: bool = False

    @property
    def compiled(self) -> tuple:
        """The compiled expressions (compiled once and cached by the ``regex`` module)."""
        return tuple(regex.compile(p) for p in self.patterns)


_FAMILIES = {
    # the fallback llama.cpp uses when a GGUF file has no tokenizer.ggml.pre at all (old conversions)
    "default": PreTokenizer("default", (r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]")),
    "gpt2": PreTokenizer("gpt2", (GPT2,)),
    "llama3": PreTokenizer("llama3", (LLAMA3,), ignore_merges=True, add_bos=True),
    "qwen2": PreTokenizer("qwen2", (QWEN2,)),
    "qwen35": PreTokenizer("qwen35", (QWEN35,)),
    "deepseek-llm": PreTokenizer("deepseek-llm", (
        r"[\r\n]",
        r"\s?[" + _DEEPSEEK_CASED_LETTERS + r"]+",
        r"\s?[!-/:-~！-／：-～‘-‟　-。]+",
        r"\s+\Z",
        _CJK_RUN,
        r"\p{N}+",
    )),
    "deepseek-coder": PreTokenizer("deepseek-coder", (
        r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", _CJK_RUN, r"\p{N}",
    )),
    "falcon": PreTokenizer("falcon", (r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]")),
    # StarCoder and friends: GPT-2 pieces, but every digit on its own
    "starcoder": PreTokenizer("starcoder", (r"\p{N}", GPT2)),
}

#: ``tokenizer.ggml.pre`` value -> family. Every family here has a llama.cpp vocab fixture with expected
#: ids (or is SmolLM2's), except the aliases, which llama.cpp maps to the same expressions.
_NAMES = {
    "default": "default",
    "gpt-2": "gpt2", "gpt2": "gpt2", "mpt": "gpt2", "olmo": "gpt2", "phi-2": "gpt2",
    "llama3": "llama3", "llama-v3": "llama3", "llama-bpe": "llama3", "falcon3": "llama3",
    "qwen2": "qwen2", "stablelm2": "qwen2", "deepseek-r1-qwen": "qwen2", "megrez": "qwen2",
    "qwen35": "qwen35",
    "deepseek-llm": "deepseek-llm",
    "deepseek-coder": "deepseek-coder",
    "falcon": "falcon",
    "starcoder": "starcoder", "refact": "starcoder", "command-r": "starcoder", "smollm": "starcoder",
    "codeshell": "starcoder", "exaone": "starcoder", "minerva-7b": "starcoder",
}

PRE_TOKENIZERS: dict[str, PreTokenizer] = {name: _FAMILIES[fam] for name, fam in _NAMES.items()}


def supported_pre() -> list[str]:
    """The ``tokenizer.ggml.pre`` values this module knows, sorted."""
    return sorted(PRE_TOKENIZERS)


def get_pre_tokenizer(pre: str | None) -> PreTokenizer:
    """Return the pre-tokenizer for a ``tokenizer.ggml.pre`` value.

    A missing value (``None``) means ``"default"``, as in llama.cpp, which warns that such old files
    tokenize worse. An unknown value raises :class:`~bytes2logits.errors.TokenizerError` naming it and the
    supported ones: guessing would silently produce ids the model was never trained on.
    """
    from ..errors import TokenizerError

    if pre is None:
        return PRE_TOKENIZERS["default"]
    try:
        return PRE_TOKENIZERS[pre]
    except KeyError:
        raise TokenizerError(
            f"tokenizer.ggml.pre = {pre!r} is not a supported pre-tokenizer; supported: "
            + ", ".join(supported_pre())) from None


def split(text: str, patterns) -> list[str]:
    """Cut ``text`` into pieces with a list of compiled expressions, the way llama.cpp applies them.

    Start with the whole text as one fragment; each expression in turn cuts every fragment into the
    stretches it matches *and the stretches between matches*, so a later expression only refines the cuts
    of the earlier ones and ``"".join(split(text, ps)) == text`` always holds.

    >>> split("Hello world 2024!", [regex.compile(r"\\p{N}"), regex.compile(GPT2)])
    ['Hello', ' world', ' ', '2', '0', '2', '4', '!']
    """
    fragments = [text] if text else []
    for pattern in patterns:
        out: list[str] = []
        for frag in fragments:
            found = pattern.findall(frag)
            if sum(map(len, found)) == len(frag):  # fast path: the matches cover the whole fragment
                out.extend(found)
                continue
            pos = 0
            for m in pattern.finditer(frag):
                start, end = m.span()
                if start == end:  # an empty match cuts nothing
                    continue
                if start > pos:
                    out.append(frag[pos:start])
                out.append(frag[start:end])
                pos = end
            if pos < len(frag):
                out.append(frag[pos:])
        fragments = out
    return fragments


# --- tokenizer.json pre-tokenizers ---------------------------------------------------------------------
#
# The same stage as Hugging Face ``tokenizers`` names it: each step takes the pieces of the step before and
# cuts (or rewrites) every one of them. A piece is a ``str``; the aligned methods also carry, per character,
# the span of the original text it came from (see :mod:`bytes2logits.engine.normalizers`), so that
# ``encode(..., return_offsets=True)`` can point into the user's text.

Span = tuple[int, int]

#: how a Split step treats the stretches its pattern matches (tokenizer.json's ``behavior``)
BEHAVIORS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")


def split_spans(text: str, matches: list[Span], behavior: str, invert: bool = False) -> list[Span]:
    """The pieces of ``text`` (as spans) for the matched spans ``matches`` and a Split ``behavior``.

    The text is first written as alternating stretches, matched or not; then, as in ``tokenizers``:
    ``Removed`` drops the matches, ``Isolated`` keeps every stretch, ``MergedWithPrevious`` glues a match to
    the stretch before it (unless that was a match too), ``MergedWithNext`` to the stretch after it, and
    ``Contiguous`` joins neighbouring matches. ``invert`` swaps what counts as a match (each stretch stays
    as it is).

    >>> t = "the-final--countdown"; dashes = [(3, 4), (9, 10), (10, 11)]
    >>> [t[s:e] for s, e in split_spans(t, dashes, "MergedWithPrevious")]
    ['the-', 'final-', '-', 'countdown']
    >>> [t[s:e] for s, e in split_spans(t, dashes, "MergedWithNext")]
    ['the', '-final', '-', '-countdown']
    >>> [t[s:e] for s, e in split_spans(t, dashes, "Contiguous")]
    ['the', '-', 'final', '--', 'countdown']
    """
    stretches: list[tuple[int, int, bool]] = []
    pos = 0
    for start, end in matches:
        if end <= start:
            continue
        if start > pos:
            stretches.append((pos, start, False))
        stretches.append((start, end, True))
        pos = end
    if pos < len(text):
        stretches.append((pos, len(text), False))
    if invert:
        stretches = [(s, e, not m) for s, e, m in stretches]
    if behavior == "Removed":
        return [(s, e) for s, e, m in stretches if not m]
    if behavior == "Isolated":
        return [(s, e) for s, e, _ in stretches]
    out: list[list[int]] = []
    previous = False
    if behavior == "MergedWithNext":
        for s, e, m in reversed(stretches):
            if m and not previous and out:
                out[-1][0] = s
            else:
                out.append([s, e])
            previous = m
        out.reverse()
    else:
        for s, e, m in stretches:
            glue = (m and not previous) if behavior == "MergedWithPrevious" else (m == previous)
            if glue and out:
                out[-1][1] = e
            else:
                out.append([s, e])
            previous = m
    return [(s, e) for s, e in out]


class PreTokenizerStep:
    """One pre-tokenizer step. Subclasses define :meth:`spans` (steps that only cut) or override both
    :meth:`split` and :meth:`split_aligned` (steps that also rewrite characters)."""

    def spans(self, text: str) -> list[Span]:
        """Where to cut ``text``: the pieces as ``(start, end)`` character ranges, in order."""
        raise NotImplementedError

    def split(self, text: str, first: bool = True) -> list[str]:
        """The pieces of ``text``. ``first``: the text starts the input (not after an added token)."""
        return [text[s:e] for s, e in self.spans(text)]

    def split_aligned(self, text: str, align: list[Span], first: bool = True) -> list[tuple[str, list[Span]]]:
        """The pieces with their alignments."""
        return [(text[s:e], align[s:e]) for s, e in self.spans(text)]

    def __repr__(self) -> str:
        """The class name and its settings, as in ``tokenizer.json``."""
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


class Split(PreTokenizerStep):
    """Cut at the matches of a pattern: a literal ``{"String": ...}`` or a ``{"Regex": ...}``.

    ``behavior`` (:data:`BEHAVIORS`) says what happens to the matched text: dropped (``Removed``), a piece
    of its own (``Isolated``), glued to the piece before or after, or runs of matches kept together
    (``Contiguous``). ``invert=True`` swaps the roles of matches and the text between them.
    """

    def __init__(self, pattern: str, behavior: str = "Isolated", invert: bool = False, *, is_regex: bool = True):
        """See the class docstring; ``is_regex=False`` takes ``pattern`` literally."""
        if behavior not in BEHAVIORS:
            raise ValueError(f"Split: behavior {behavior!r} is not one of {', '.join(BEHAVIORS)}")
        self.pattern = pattern
        self.behavior = behavior
        self.invert = invert
        self.is_regex = is_regex
        self._re = regex.compile(pattern if is_regex else regex.escape(pattern))

    def spans(self, text: str) -> list[Span]:
        """Cut according to the behavior (see :func:`split_spans`)."""
        found = [m.span() for m in self._re.finditer(text)]
        return split_spans(text, found, self.behavior, self.invert)

    def split(self, text: str, first: bool = True) -> list[str]:
        """Fast path for the common ``Isolated`` split whose matches cover the whole text."""
        if self.behavior == "Isolated" and not self.invert:
            found = self._re.findall(text)
            if sum(map(len, found)) == len(text) and all(found):
                return found
        return super().split(text, first)


class Digits(PreTokenizerStep):
    """Digits apart from the rest: each digit its own piece (``individual_digits``) or runs of digits."""

    _DIGIT = regex.compile(r"\p{N}")

    def __init__(self, individual_digits: bool = False):
        """``individual_digits``: ``"2024"`` becomes four pieces instead of one."""
        self.individual_digits = individual_digits

    def spans(self, text: str) -> list[Span]:
        """Digits (Unicode ``N``) isolated, one by one or as runs."""
        matches = [m.span() for m in self._DIGIT.finditer(text)]
        return split_spans(text, matches, "Isolated" if self.individual_digits else "Contiguous")


def is_bert_punctuation(ch: str) -> bool:
    """BERT's punctuation: ASCII punctuation and symbols, or any Unicode ``P*`` character."""
    return (ch.isascii() and not ch.isalnum() and ch.isprintable() and not ch.isspace()) or \
        unicodedata.category(ch)[0] == "P"


def is_white_space(ch: str) -> bool:
    """Unicode's ``White_Space`` property (what Rust's ``char::is_whitespace`` tests): Python's
    ``str.isspace`` minus the four separators U+001C..U+001F, which Unicode counts as controls."""
    return ch.isspace() and ch not in "\x1c\x1d\x1e\x1f"


def bert_words(text: str) -> list[tuple[int, int]]:
    """BERT's pre-tokenizer on one text: the spans of its words.

    Whitespace (Unicode ``White_Space``) separates words and is dropped; every punctuation character
    (:func:`is_bert_punctuation`: ASCII punctuation and symbols, or Unicode ``P*``) is a word of its own.

    >>> t = "Hello, world!"; [t[s:e] for s, e in bert_words(t)]
    ['Hello', ',', 'world', '!']
    """
    out: list[tuple[int, int]] = []
    start = -1
    for i, ch in enumerate(text):
        space = is_white_space(ch)
        if space or is_bert_punctuation(ch):
            if start >= 0:
                out.append((start, i))
                start = -1
            if not space:
                out.append((i, i + 1))
        elif start < 0:
            start = i
    if start >= 0:
        out.append((start, len(text)))
    return out


class BertPreTokenizer(PreTokenizerStep):
    """BERT's words (:func:`bert_words`): whitespace dropped, punctuation isolated."""

    def spans(self, text: str) -> list[Span]:
        """Whitespace removed, punctuation isolated."""
        return bert_words(text)


class WhitespaceSplit(PreTokenizerStep):
    """Cut at whitespace, which is dropped."""

    def spans(self, text: str) -> list[Span]:
        """The runs of non-whitespace characters."""
        return [m.span() for m in regex.finditer(r"\P{White_Space}+", text)]


_GPT2_RE = regex.compile(GPT2)


def byte_level_map(piece: str) -> str:
    """``"é"`` -> ``"Ã©"``: each UTF-8 byte of ``piece`` written as its printable character
    (:data:`bytes2logits.text.BYTE_TO_CHAR`), so a byte-level vocabulary can store every token as a string.

    >>> byte_level_map(" héllo")
    'ĠhÃ©llo'
    """
    return piece.encode("utf-8").decode("latin-1").translate(BYTE_TO_CHAR)


def byte_level_pieces(text: str, add_prefix_space: bool = False, use_regex: bool = True, *,
                      byte_map: bool = True) -> list[str]:
    """tokenizer.json's ``ByteLevel`` pre-tokenizer on one text, in its order.

    1. ``add_prefix_space``: put a space in front, unless the text is empty or already starts with one
       (so that ``"world"`` at the start is cut like ``" world"`` in the middle);
    2. ``use_regex``: cut with GPT-2's expression (contractions, letters, digits, other symbols,
       whitespace), keeping every character; without it the text stays one piece;
    3. ``byte_map``: write each piece's UTF-8 bytes as printable characters (:func:`byte_level_map`).

    >>> byte_level_pieces("Hello world!")
    ['Hello', 'Ġworld', '!']
    >>> byte_level_pieces("Hello world!", add_prefix_space=True, use_regex=False)
    ['ĠHelloĠworld!']
    """
    if add_prefix_space and text and not text.startswith(" "):
        text = " " + text
    pieces = split(text, (regex.compile(GPT2),)) if use_regex else ([text] if text else [])
    return [byte_level_map(p) for p in pieces] if byte_map else pieces


class ByteLevel(PreTokenizerStep):
    """GPT-2's byte-level step: optionally a space in front and the GPT-2 regex, then every piece's UTF-8
    bytes written as printable characters (:data:`bytes2logits.text.BYTE_TO_CHAR`), one per byte.

    The byte map is what lets a byte-level vocabulary store every token as a string: the BPE model then
    works on those characters. ``trim_offsets`` only matters to the post-processor of the same name.
    """

    def __init__(self, add_prefix_space: bool = False, use_regex: bool = True, trim_offsets: bool = True):
        """The three switches of tokenizer.json's ``ByteLevel``."""
        self.add_prefix_space = add_prefix_space
        self.use_regex = use_regex
        self.trim_offsets = trim_offsets
        self._map = True

    def without_byte_map(self) -> ByteLevel:
        """The same step minus the byte map (a tokenizer applies the map itself, only on a cache miss)."""
        other = ByteLevel(self.add_prefix_space, self.use_regex, self.trim_offsets)
        other._map = False
        return other

    def __repr__(self) -> str:
        """The settings, and ``byte_map=False`` when a tokenizer took the byte map over (it maps on cache misses)."""
        extra = "" if self._map else ", byte_map=False"
        return (f"ByteLevel(add_prefix_space={self.add_prefix_space!r}, use_regex={self.use_regex!r}, "
                f"trim_offsets={self.trim_offsets!r}{extra})")

    def split(self, text: str, first: bool = True) -> list[str]:
        """The pieces (in the byte alphabet unless the map was split off): :func:`byte_level_pieces`."""
        return byte_level_pieces(text, self.add_prefix_space, self.use_regex, byte_map=self._map)

    def split_aligned(self, text: str, align: list[Span], first: bool = True) -> list[tuple[str, list[Span]]]:
        """Each byte character keeps the span of the character it is a byte of."""
        if self.add_prefix_space and text and not text.startswith(" "):
            text, align = " " + text, [align[0]] + list(align)
        spans = ([m.span() for m in _GPT2_RE.finditer(text)] if self.use_regex else [(0, len(text))])
        if not self._map:
            return [(text[s:e], align[s:e]) for s, e in split_spans(text, spans, "Isolated")]
        out = []
        for s, e in split_spans(text, spans, "Isolated"):
            chars, al = [], []
            for ch, span in zip(text[s:e], align[s:e]):
                b = byte_level_map(ch)
                chars.append(b)
                al.extend([span] * len(b))
            out.append(("".join(chars), al))
        return out


class Metaspace(PreTokenizerStep):
    """SentencePiece's visible spaces: every ``" "`` becomes ``replacement`` (``"▁"``), a ``"▁"`` is put in
    front (``prepend_scheme``: ``"always"``, ``"first"`` — only where the input starts — or ``"never"``), and
    with ``split`` the text is cut before every ``"▁"``."""

    def __init__(self, replacement: str = "\u2581", prepend_scheme: str = "always", split: bool = True):
        """The settings of tokenizer.json's ``Metaspace``."""
        if len(replacement) != 1:
            raise ValueError(f"Metaspace: replacement must be one character, not {replacement!r}")
        if prepend_scheme not in ("always", "first", "never"):
            raise ValueError(f"Metaspace: prepend_scheme {prepend_scheme!r} is not always, first or never")
        self.replacement = replacement
        self.prepend_scheme = prepend_scheme
        self.split_pieces = split

    def _prepend(self, text: str, first: bool) -> bool:
        scheme = self.prepend_scheme
        return bool(text) and not text.startswith(self.replacement) and (
            scheme == "always" or (scheme == "first" and first))

    def _spans(self, text: str) -> list[Span]:
        if not self.split_pieces:
            return [(0, len(text))] if text else []
        r = self.replacement
        return split_spans(text, [(i, i + 1) for i, c in enumerate(text) if c == r], "MergedWithNext")

    def split(self, text: str, first: bool = True) -> list[str]:
        """The pieces, spaces written as the replacement."""
        text = text.replace(" ", self.replacement)
        if self._prepend(text, first):
            text = self.replacement + text
        return [text[s:e] for s, e in self._spans(text)]

    def split_aligned(self, text: str, align: list[Span], first: bool = True) -> list[tuple[str, list[Span]]]:
        """The pieces with alignments; a replaced space keeps its span, a prepended one borrows the first."""
        text = text.replace(" ", self.replacement)  # one for one: the alignment does not move
        align = list(align)
        if self._prepend(text, first):
            text, align = self.replacement + text, [align[0]] + align
        return [(text[s:e], align[s:e]) for s, e in self._spans(text)]


class PreTokenizerSequence(PreTokenizerStep):
    """Steps applied one after another, each to every piece of the one before."""

    def __init__(self, steps):
        """``steps``: the pre-tokenizer steps, first to last."""
        self.steps = list(steps)

    def split(self, text: str, first: bool = True) -> list[str]:
        """Every step refines the pieces of the previous one."""
        pieces = [text] if text else []
        for step in self.steps:
            pieces = [p for i, piece in enumerate(pieces) for p in step.split(piece, first and i == 0)]
        return pieces

    def split_aligned(self, text: str, align: list[Span], first: bool = True) -> list[tuple[str, list[Span]]]:
        """The same, keeping alignments."""
        pieces = [(text, list(align))] if text else []
        for step in self.steps:
            pieces = [p for i, (t, al) in enumerate(pieces) for p in step.split_aligned(t, al, first and i == 0)]
        return pieces


def _is_chinese(cp: int) -> bool:
    """CJK ideograph blocks that BERT splits into single-character words."""
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B920 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


class LlamaCppBertWords(PreTokenizerStep):
    """llama.cpp's BERT words (after :class:`~bytes2logits.engine.normalizers.LlamaCppBert`): cut at
    whitespace (dropped); punctuation, ASCII symbols and CJK ideographs are one-character words."""

    def spans(self, text: str) -> list[Span]:
        """Whitespace removed; punctuation, ASCII symbols and ideographs isolated."""
        out: list[Span] = []
        start = -1
        for i, ch in enumerate(text):
            space = ch.isspace()
            cat = "" if space else unicodedata.category(ch)
            alone = not space and (cat[0] == "P" or (ord(ch) < 0x7F and cat[0] == "S") or _is_chinese(ord(ch)))
            if space or alone:
                if start >= 0:
                    out.append((start, i))
                    start = -1
                if alone:
                    out.append((i, i + 1))
            elif start < 0:
                start = i
        if start >= 0:
            out.append((start, len(text)))
        return out


class RegexSplits(PreTokenizerStep):
    """llama.cpp's list of expressions for a ``tokenizer.ggml.pre`` name (see :func:`split`): each one
    refines the pieces of the one before, matched stretches and the stretches between them both kept."""

    def __init__(self, pre: PreTokenizer):
        """``pre``: the entry of :data:`PRE_TOKENIZERS`."""
        self.name = pre.name
        self._patterns = pre.compiled

    def split(self, text: str, first: bool = True) -> list[str]:
        """:func:`split` with the expressions."""
        return split(text, self._patterns)

    def spans(self, text: str) -> list[Span]:
        """The pieces as spans (they tile the text)."""
        out, pos = [], 0
        for piece in split(text, self._patterns):
            out.append((pos, pos + len(piece)))
            pos += len(piece)
        return out
