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
the same). ECMAScript's ``$`` (end of the fragment) is written ``\\Z`` here, because Python's ``$`` would
also match before a final newline.
"""

from __future__ import annotations

from dataclasses import dataclass

import regex

__all__ = ["PreTokenizer", "PRE_TOKENIZERS", "supported_pre", "get_pre_tokenizer", "split"]

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
    "gpt-2": "gpt2", "mpt": "gpt2", "olmo": "gpt2", "phi-2": "gpt2",
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
    """Cut ``text`` into pieces with a list of compiled expressions (see the module docstring).

    Each expression refines the fragments left by the previous one: matched stretches and the stretches
    between matches both become fragments, so ``"".join(split(text, ps)) == text`` always holds.

    >>> split("Hello world 2024!", PRE_TOKENIZERS["starcoder"].compiled)
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
