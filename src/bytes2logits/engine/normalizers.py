"""Normalizers: the tokenizer stage that rewrites the text before it is cut into pieces (stage 2 of 6).

A normalizer makes different spellings of the same text look alike to the model: ``"e"`` + a combining
acute accent becomes the single character ``"é"`` (NFC), the ligature ``"ﬁ"`` becomes ``"fi"`` (NFKC),
``"Hello"`` becomes ``"hello"`` (Lowercase), and BERT's normalizer also drops control characters, pads
Chinese characters with spaces and strips accents. The names and the behaviour follow Hugging Face
``tokenizers``, whose ``tokenizer.json`` files name them (``{"type": "NFC"}``, ``{"type": "BertNormalizer",
...}``, ``{"type": "Sequence", "normalizers": [...]}``).

Every normalizer has two methods:

* :meth:`Normalizer.normalize` — ``str -> str``, the fast path used by ``encode``;
* :meth:`Normalizer.normalize_aligned` — also says, for every character of the result, which character of
  the input it came from. ``encode(..., return_offsets=True)`` needs this to report where each token sits in
  the text the *user* typed, not in the normalized copy.

How an alignment is written (the rule of ``tokenizers``, so that offsets agree with it): the normalizer
emits each output character with a *change*. ``0`` means "this character replaces the next input
character"; ``-n`` means "this character replaces the next input character, and the ``n`` input
characters after it are removed"; ``+1`` means "this character was inserted", and it borrows the position
of the input character before it. Input characters removed before the first output character are counted
apart (``initial``). For example Lowercase turns ``"İ"`` (one character) into ``"i"`` + a combining dot
(two), written ``[("i", 0), ("\\u0307", 1)]``: both point at the ``"İ"``. :func:`apply_changes` turns such a
list into positions. An empty character with a change ``-n`` only skips ``n`` input characters.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence as SequenceABC

import regex

from .pretokenizers import is_white_space

__all__ = [
    "Normalizer", "NFC", "NFD", "NFKC", "NFKD", "Lowercase", "BertNormalizer", "Prepend", "Replace",
    "StripAccents", "NormalizerSequence", "LlamaCppBert", "apply_changes", "bert_normalize", "is_bert_control",
    "is_chinese_char",
]

# A position in the original text: the (start, end) character range one normalized character came from.
Span = tuple[int, int]


def apply_changes(changes: SequenceABC[tuple[str, int]], align: SequenceABC[Span],
                  initial: int = 0) -> tuple[str, list[Span]]:
    """Turn ``(char, change)`` pairs (see the module docstring) into the new text and its alignment.

    ``align`` is the alignment of the input (one span per input character); ``initial`` input characters
    were removed before the first output character.

    >>> apply_changes([("▁", 0), ("a", 1)], [(0, 1)])       # an inserted character borrows a neighbour
    ('▁a', [(0, 1), (0, 1)])
    >>> apply_changes([("x", 1), ("d", 0)], [(0, 1), (1, 2), (2, 3)], initial=2)   # "ab" -> "x"
    ('xd', [(1, 2), (2, 3)])
    """
    out_chars: list[str] = []
    out_align: list[Span] = []
    pos = initial  # the next input character
    end = align[-1][1] if align else 0
    for ch, change in changes:
        if not ch:  # ("", -n): skip n input characters (a removed match, before its replacement)
            pos -= change
            continue
        if change > 0:  # inserted: the position of the input character before (nothing at the very start)
            span = align[pos - 1] if pos > 0 else (0, 0)
        else:
            span = align[pos] if pos < len(align) else (end, end)
            pos += 1 - change
        out_chars.append(ch)
        out_align.append(span)
    return "".join(out_chars), out_align


class Normalizer:
    """The interface: rewrite a text, optionally keeping track of where each character came from."""

    def normalize(self, text: str) -> str:
        """The normalized text."""
        return "".join(c for c, _ in self.changes(text)[0])

    def changes(self, text: str) -> tuple[list[tuple[str, int]], int]:
        """The output characters with their changes, and the number of input characters removed before the
        first one (module docstring); subclasses implement this."""
        raise NotImplementedError

    def normalize_aligned(self, text: str, align: SequenceABC[Span]) -> tuple[str, list[Span]]:
        """The normalized text and, per character, the span of the original text it came from."""
        changes, initial = self.changes(text)
        return apply_changes(changes, align, initial)

    def __repr__(self) -> str:
        """The class name and its settings, as in ``tokenizer.json``."""
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


def _per_char(text: str, fn) -> tuple[list[tuple[str, int]], int]:
    """Changes for a rewrite of every character on its own: ``fn(ch)`` is its replacement (the first
    character replaces it, the others are inserted), or ``""`` to remove it (counted on the character before,
    as ``tokenizers``' ``filter`` does)."""
    out: list[tuple[str, int]] = []
    initial = 0
    for ch in text:
        new = fn(ch)
        if not new:
            if out:
                c, change = out[-1]
                out[-1] = (c, change - 1)
            else:
                initial += 1
            continue
        out.append((new[0], 0))
        out.extend((c, 1) for c in new[1:])
    return out, initial


# ---------------------------------------------------------------------- Unicode normalization forms

def _decompose(text: str, compat: bool) -> list[list]:
    """Full decomposition of each character, then canonical reordering: entries ``[char, ccc, inserted]``."""
    form = "NFKD" if compat else "NFD"
    entries: list[list] = []
    for ch in text:
        d = unicodedata.normalize(form, ch) if ord(ch) >= 0xA0 else ch
        for k, c in enumerate(d):
            entries.append([c, unicodedata.combining(c), k > 0])
    # canonical ordering: a stable sort by combining class inside every run of non-starters
    i, n = 0, len(entries)
    while i < n:
        if entries[i][1] == 0:
            i += 1
            continue
        j = i
        while j < n and entries[j][1] != 0:
            j += 1
        entries[i:j] = sorted(entries[i:j], key=lambda e: e[1])
        i = j
    return entries


def _compose_pair(a: str, b: str) -> str | None:
    """The primary composite of ``a`` + ``b`` (both already decomposed or composed), or None."""
    if ord(b) < 0x300:
        return None
    c = unicodedata.normalize("NFC", a + b)
    return c if len(c) == 1 else None


def _unicode_changes(text: str, compose: bool, compat: bool) -> list[tuple[str, int]]:
    """NFC/NFD/NFKC/NFKD with changes: decompose, reorder, and (for the C forms) recompose.

    A decomposition's first character replaces the input character and the others are inserted (``+1``).
    When a character is absorbed into a composite, the composite's change becomes ``starter + absorbed - 1``:
    the same bookkeeping as the ``unicode-normalization-alignments`` crate that ``tokenizers`` uses, so its
    offsets and ours agree.
    """
    entries = _decompose(text, compat)
    if not compose:
        return [(c, 1 if ins else 0) for c, _, ins in entries]
    out: list[list] = []  # [char, change]
    starter = -1          # index in ``out`` of the last starter that may still compose
    last_ccc = -1         # combining class of the last character emitted after that starter
    for c, ccc, ins in entries:
        change = 1 if ins else 0
        if starter >= 0:
            blocked = last_ccc != -1 and (last_ccc == 0 or last_ccc >= ccc)
            composite = None if blocked else _compose_pair(out[starter][0], c)
            if composite is not None:
                out[starter][0] = composite
                out[starter][1] += change - 1
                continue
        out.append([c, change])
        if ccc == 0:
            starter, last_ccc = len(out) - 1, -1
        else:
            last_ccc = ccc
    return [(c, change) for c, change in out]


class _UnicodeForm(Normalizer):
    """One of Unicode's four normalization forms (``unicodedata.normalize``)."""

    form = ""

    def normalize(self, text: str) -> str:
        """``unicodedata.normalize(form, text)``."""
        return unicodedata.normalize(self.form, text)

    def changes(self, text: str) -> tuple[list[tuple[str, int]], int]:
        """Per output character; a text already in this form maps one to one."""
        if unicodedata.is_normalized(self.form, text):
            return [(c, 0) for c in text], 0
        return _unicode_changes(text, compose=self.form in ("NFC", "NFKC"), compat=self.form.startswith("NFK")), 0


class NFC(_UnicodeForm):
    """Canonical composition: ``"e" + U+0301`` becomes ``"é"``. Qwen's tokenizer.json asks for it."""

    form = "NFC"


class NFD(_UnicodeForm):
    """Canonical decomposition: ``"é"`` becomes ``"e" + U+0301``."""

    form = "NFD"


class NFKC(_UnicodeForm):
    """Compatibility composition: also folds look-alikes, ``"ﬁ"`` -> ``"fi"``, ``"①"`` -> ``"1"``."""

    form = "NFKC"


class NFKD(_UnicodeForm):
    """Compatibility decomposition."""

    form = "NFKD"


# ---------------------------------------------------------------------- simple rewrites

class Lowercase(Normalizer):
    """Lowercase every character on its own (``"İ"`` becomes two characters, ``"i"`` + U+0307)."""

    def normalize(self, text: str) -> str:
        """Per-character lowercasing (``str.lower`` would treat a final sigma differently)."""
        return "".join(c.lower() for c in text) if "Σ" in text else text.lower()

    def changes(self, text: str) -> tuple[list[tuple[str, int]], int]:
        """One or more output characters per input character."""
        return _per_char(text, str.lower)


class StripAccents(Normalizer):
    """Remove combining nonspacing marks (category ``Mn``); use after NFD to turn ``"é"`` into ``"e"``."""

    def normalize(self, text: str) -> str:
        """The text without its ``Mn`` characters."""
        return "".join(c for c in text if unicodedata.category(c) != "Mn")

    def changes(self, text: str) -> tuple[list[tuple[str, int]], int]:
        """Marks are removed; everything else maps one to one."""
        return _per_char(text, lambda c: "" if unicodedata.category(c) == "Mn" else c)


class Prepend(Normalizer):
    """Put ``prepend`` in front of a non-empty text (Llama 2's ``"▁"``)."""

    def __init__(self, prepend: str):
        """``prepend``: the text to put in front."""
        self.prepend = prepend

    def normalize(self, text: str) -> str:
        """``prepend + text`` unless the text is empty."""
        return self.prepend + text if text else text

    def changes(self, text: str) -> tuple[list[tuple[str, int]], int]:
        """The prepended text takes the first character's place; that character and the rest of the
        prepended text borrow its position."""
        if not text:
            return [], 0
        new = self.prepend + text[0]
        return [(new[0], 0)] + [(c, 1) for c in new[1:]] + [(c, 0) for c in text[1:]], 0


class Replace(Normalizer):
    """Replace every match of a pattern by ``content``: tokenizer.json's ``{"String": " "}`` (a literal) or
    ``{"Regex": "\\p{Zs}"}`` (a regular expression, run with the ``regex`` module)."""

    def __init__(self, pattern: str, content: str, *, is_regex: bool = False):
        """``pattern``: the literal text (or, with ``is_regex``, the expression) to find; ``content``: what to
        write instead (may be empty: the match is removed)."""
        if not pattern:
            raise ValueError("Replace: the pattern is empty")
        self.pattern = pattern
        self.content = content
        self.is_regex = is_regex
        self._re = regex.compile(pattern if is_regex else regex.escape(pattern))

    def normalize(self, text: str) -> str:
        """Every match replaced."""
        if not self.is_regex:
            return text.replace(self.pattern, self.content)
        return self._re.sub(self.content.replace("\\", "\\\\"), text)

    def changes(self, text: str) -> tuple[list[tuple[str, int]], int]:
        """Each match is removed and the replacement inserted after it (the new characters borrow the
        position of the match's last character), as ``tokenizers`` does."""
        out: list[tuple[str, int]] = []
        pos = 0
        for m in self._re.finditer(text):
            start, end = m.span()
            if start == end:
                continue
            out.extend((c, 0) for c in text[pos:start])
            out.append(("", start - end))
            out.extend((c, 1) for c in self.content)
            pos = end
        out.extend((c, 0) for c in text[pos:])
        return out, 0


# ---------------------------------------------------------------------- BERT

def is_bert_control(ch: str) -> bool:
    """BERT's control characters (removed by ``clean_text``): categories Cc, Cf and Co, except tab, newline
    and CR. Unassigned code points (Cn) are kept, as ``tokenizers`` keeps them."""
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf", "Co")


def is_chinese_char(cp: int) -> bool:
    """The CJK ideograph blocks that ``handle_chinese_chars`` pads with spaces: Hugging Face's list (Google's
    original BERT code also pads U+2B820..U+2B91F; neither pads CJK Extension F or G, nor U+3007 〇)."""
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B920 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def bert_normalize(text: str, clean_text: bool = True, handle_chinese_chars: bool = True,
                   strip_accents: bool | None = None, lowercase: bool = True) -> str:
    """BERT's normalizer on one text, its four steps in order.

    1. ``clean_text``: drop NUL, U+FFFD and control characters (:func:`is_bert_control`); every whitespace
       character (:func:`~bytes2logits.engine.pretokenizers.is_white_space`: Unicode ``White_Space``) becomes ``" "``;
    2. ``handle_chinese_chars``: put a space on each side of every CJK ideograph (:func:`is_chinese_char`);
    3. ``strip_accents`` (``None`` means: the same as ``lowercase``): NFD, then drop the nonspacing marks
       (category ``Mn``), so ``"é"`` becomes ``"e"``;
    4. ``lowercase``: every character lowercased on its own.

    >>> bert_normalize("Héllo\\tWORLD 中文")
    'hello world  中  文 '
    """
    if clean_text or handle_chinese_chars:
        out = []
        for ch in text:
            if clean_text:
                if ch == "\0" or ch == "\ufffd" or is_bert_control(ch):
                    continue
                if is_white_space(ch):
                    ch = " "
            if handle_chinese_chars and is_chinese_char(ord(ch)):
                ch = " " + ch + " "
            out.append(ch)
        text = "".join(out)
    if strip_accents or (strip_accents is None and lowercase):
        text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
    if lowercase:
        text = "".join(c.lower() for c in text)
    return text


class BertNormalizer(Normalizer):
    """BERT's normalizer, in its order: clean the text, pad Chinese characters, strip accents, lowercase.

    * ``clean_text`` — drop NUL, U+FFFD and control characters; every whitespace character becomes ``" "``;
    * ``handle_chinese_chars`` — ``"中"`` becomes ``" 中 "``, so each ideograph is a word of its own;
    * ``strip_accents`` — NFD, then drop the combining marks: ``"é"`` -> ``"e"``. ``None`` (the default in
      tokenizer.json) means "the same as ``lowercase``";
    * ``lowercase`` — lowercase every character.
    """

    def __init__(self, clean_text: bool = True, handle_chinese_chars: bool = True,
                 strip_accents: bool | None = None, lowercase: bool = True):
        """The four switches of ``tokenizer.json``'s ``BertNormalizer``."""
        self.clean_text = clean_text
        self.handle_chinese_chars = handle_chinese_chars
        self.strip_accents = strip_accents
        self.lowercase = lowercase
        steps: list[Normalizer] = []
        if strip_accents or (strip_accents is None and lowercase):
            steps += [NFD(), StripAccents()]
        if lowercase:
            steps.append(Lowercase())
        self._steps = steps

    @staticmethod
    def _clean(ch: str) -> str:
        """``clean_text`` for one character: removed (``""``), a space, or itself."""
        if ch == "\0" or ch == "\ufffd" or is_bert_control(ch):
            return ""
        return " " if is_white_space(ch) else ch

    def normalize(self, text: str) -> str:
        """The normalized text: :func:`bert_normalize`."""
        if text.isascii() and text.isprintable():  # nothing to clean, pad or strip: only the case can change
            return text.lower() if self.lowercase else text
        return bert_normalize(text, self.clean_text, self.handle_chinese_chars, self.strip_accents, self.lowercase)

    def normalize_aligned(self, text: str, align: SequenceABC[Span]) -> tuple[str, list[Span]]:
        """The same steps, one pass each (as ``tokenizers`` does them), keeping the alignment."""
        if self.clean_text:
            changes, initial = _per_char(text, self._clean)
            text, align = apply_changes(changes, align, initial)
        if self.handle_chinese_chars:
            changes = []
            for ch in text:  # " 中 ": the first space takes the character's place, the rest borrow it
                changes += [(" ", 0), (ch, 1), (" ", 1)] if is_chinese_char(ord(ch)) else [(ch, 0)]
            text, align = apply_changes(changes, align)
        for step in self._steps:
            text, align = step.normalize_aligned(text, align)
        return text, list(align)


class NormalizerSequence(Normalizer):
    """Several normalizers, applied in order (``{"type": "Sequence", "normalizers": [...]}``)."""

    def __init__(self, normalizers: SequenceABC[Normalizer]):
        """``normalizers``: the steps, first to last."""
        self.normalizers = list(normalizers)

    def normalize(self, text: str) -> str:
        """Each step's output is the next step's input."""
        for n in self.normalizers:
            text = n.normalize(text)
        return text

    def normalize_aligned(self, text: str, align: SequenceABC[Span]) -> tuple[str, list[Span]]:
        """Each step, keeping the alignment back to the original text."""
        for n in self.normalizers:
            text, align = n.normalize_aligned(text, align)
        return text, list(align)


class LlamaCppBert(Normalizer):
    """BERT's normalization as llama.cpp does it for GGUF WordPiece vocabularies (one character at a time).

    With ``strip_accents``, a character becomes the first character of its canonical decomposition
    (``"é"`` -> ``"e"``) and combining marks are dropped; NUL, U+FFFD and control/format/private/surrogate
    characters are dropped; with ``lowercase``, the first character of the lowercase form is kept.
    Whitespace stays (the pre-tokenizer cuts at it).
    """

    def __init__(self, lowercase: bool = True, strip_accents: bool = True):
        """The two switches of the ``tokenizer.ggml.normalizer.*`` keys."""
        self.lowercase = lowercase
        self.strip_accents = strip_accents

    def _char(self, ch: str) -> str:
        if self.strip_accents:
            ch = unicodedata.normalize("NFD", ch)[0]
        cat = unicodedata.category(ch)
        if ch.isspace():
            return ch
        if ch == "\0" or ch == "\ufffd" or cat in ("Cc", "Cf", "Co", "Cs"):
            return ""
        if self.strip_accents and cat[0] == "M":
            return ""
        if self.lowercase:
            low = ch.lower()
            ch = low[0] if low else ch
        return ch

    def normalize(self, text: str) -> str:
        """Every character mapped on its own."""
        return "".join(map(self._char, text))

    def changes(self, text: str) -> tuple[list[tuple[str, int]], int]:
        """One character or none per input character."""
        return _per_char(text, self._char)
