"""Tokenization pitfalls, measured (chapter 09, lab 09): digits, fertility across languages, glitch tokens.

Three failures that users blame on "the model" start in the tokenizer:

* **Numbers.** Byte-level BPE merges digits by how often strings of digits occurred in its training text,
  not by place value, so ``"2023"`` may be one token while ``"2032"`` is two. Some tokenizers cut every
  digit apart (SmolLM2, Qwen) or cut runs into groups of three (cl100k, Llama 3). :func:`split_digits` is
  that extra pre-tokenizer step.
* **Fertility.** How many tokens a language needs per character depends on how much of it the tokenizer
  saw. :func:`fertility` measures one text; :func:`relative_fertility` compares languages to a reference;
  :func:`udhr_samples` and :func:`fertility_table` do it for hundreds of languages (cached).
* **Glitch tokens.** A vocabulary entry the model rarely or never saw in training can make it misbehave.
  :func:`audit_vocab` lists the ids whose own text does not encode back to them: candidates to examine,
  some of which ``encode`` cannot produce from any text.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import unicodedata
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import NamedTuple

__all__ = ["AUDIT_CLASSES", "Fertility", "split_digits", "fertility", "relative_fertility", "audit_vocab",
           "LanguageSample", "udhr_samples", "fertility_table"]

#: The classes :func:`audit_vocab` sorts token ids into, in the order they are checked.
AUDIT_CLASSES = ("special", "partial", "mismatch", "ok")


class Fertility(NamedTuple):
    """How many tokens a text costs: per character (code point) and per UTF-8 byte."""

    per_char: float
    per_byte: float


# ------------------------------------------------------------------------------------------ task 1: digits


def split_digits(pieces: Iterable[str], group: int = 1) -> list[str]:
    r"""Refine pre-tokenized ``pieces`` so that digits are cut into groups of at most ``group``.

    A *digit* is any character whose Unicode category starts with ``N`` (what the regex ``\p{N}`` means:
    ``"7"``, ``"٣"``, ``"²"``, ``"Ⅻ"``). In each piece, every maximal run of digits is cut from the left
    into chunks of ``group`` digits (the last chunk may be shorter); the text between digit runs stays one
    piece, unchanged. ``group=1`` isolates every digit (SmolLM2, Qwen); ``group=3`` is the
    ``\p{N}{1,3}`` rule of cl100k and Llama 3. Pieces are only ever cut, never joined, so
    ``"".join(split_digits(pieces)) == "".join(pieces)``; empty pieces disappear.

    >>> split_digits(["year", " 2024", "!"])
    ['year', ' ', '2', '0', '2', '4', '!']
    >>> split_digits(["1234567"], group=3)
    ['123', '456', '7']
    """
    if isinstance(pieces, (str, bytes)):
        raise TypeError("split_digits() takes a list of pieces, not one string: write split_digits([text])")
    if type(group) is not int or group < 1:
        raise ValueError(f"group must be a positive int, got {group!r}")
    out: list[str] = []
    for index, piece in enumerate(pieces):
        if not isinstance(piece, str):
            raise TypeError(f"piece {index} is a {type(piece).__name__}, not a str")
        for is_digit, chars in groupby(piece, key=lambda ch: unicodedata.category(ch)[0] == "N"):
            run = "".join(chars)
            if is_digit:
                out.extend(run[i:i + group] for i in range(0, len(run), group))
            else:
                out.append(run)
    return out


# ------------------------------------------------------------------------------------------ task 2: fertility


def fertility(tokenize: Callable[[str], Sequence[int]], text: str) -> Fertility:
    """Tokens per character and tokens per UTF-8 byte of ``text`` under ``tokenize`` (text -> ids).

    A character is a code point, so ``len(text)``; bytes are ``len(text.encode("utf-8"))``. Per character,
    English prose costs about a fifth of a token in a tokenizer trained mostly on English; a script the
    tokenizer rarely saw can cost several tokens per character. The values are plain ``float``.

    >>> fertility(lambda text: [0] * len(text.split()), "one two, three")
    Fertility(per_char=0.21428571428571427, per_byte=0.21428571428571427)
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    if not text:
        raise ValueError("text is empty: the fertility of no characters is undefined")
    try:
        n_bytes = len(text.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise ValueError(f"text has a lone surrogate at character {e.start}: not valid Unicode") from None
    n_tokens = len(list(tokenize(text)))
    return Fertility(n_tokens / len(text), n_tokens / n_bytes)


def relative_fertility(table: Mapping[str, float], reference: str = "en_Latn") -> dict[str, float]:
    """Each language's fertility divided by the ``reference`` language's, from cheapest to dearest.

    ``table`` maps a language code to its fertility (e.g. tokens per character). The result maps the same
    codes to ratios: ``2.0`` means "twice as many tokens per character as the reference", and the reference
    itself is ``1.0``. It is a new ``dict`` ordered by increasing ratio, ties by code. Values must be finite
    numbers >= 0 and the reference's must be > 0; the error names the offending language.

    >>> relative_fertility({"en_Latn": 0.25, "el_Grek": 0.5, "fr_Latn": 0.3})
    {'en_Latn': 1.0, 'fr_Latn': 1.2, 'el_Grek': 2.0}
    """
    if reference not in table:
        raise KeyError(f"reference language {reference!r} is not in the table")
    for lang, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"fertility of {lang!r} is {value!r}: expected a finite number >= 0")
    base = table[reference]
    if base == 0:
        raise ValueError(f"the reference language {reference!r} has fertility 0: cannot divide by it")
    ratios = {lang: float(value) / base for lang, value in table.items()}
    return dict(sorted(ratios.items(), key=lambda item: (item[1], item[0])))


# ------------------------------------------------------------------------------------------ task 3: glitch audit


def audit_vocab(pieces: Sequence[bytes], encode: Callable[[str], Sequence[int]],
                special_ids: Collection[int] = ()) -> dict[str, list[int]]:
    r"""Sort every token id by what happens when its text is decoded and encoded again.

    ``pieces[i]`` is the bytes token ``i`` stands for (``tokenizer.decode_bytes([i])``); ``encode`` turns
    text into ids; ``special_ids`` are control tokens. Each id gets the first class that applies, in the
    order of :data:`AUDIT_CLASSES`:

    * ``"special"`` — the id is in ``special_ids``: plain text never produces it, by design;
    * ``"partial"`` — its bytes are not valid UTF-8 on their own (a piece of a multi-byte character),
      so it has no text to re-encode;
    * ``"mismatch"`` — it decodes to text, but ``encode(text) != [id]``: re-encoding the token's own text
      does not give it back. A *glitch-token candidate*: when the normalizer changes that text, or the
      pre-tokenizer always cuts it, ``encode`` cannot produce the id from any text at all;
    * ``"ok"`` — ``encode(text) == [id]``.

    Returns ``{class: ids}`` with all four classes as keys and each id, ascending, in exactly one list.
    A piece that is not ``bytes`` raises ``TypeError`` naming its id.

    >>> audit_vocab([b"a", b"b", b"ab", b"\xe6"], lambda t: {"a": [0], "b": [1], "ab": [0, 1]}[t])
    {'special': [], 'partial': [3], 'mismatch': [2], 'ok': [0, 1]}
    """
    special = set(special_ids)
    result: dict[str, list[int]] = {name: [] for name in AUDIT_CLASSES}
    for token_id, piece in enumerate(pieces):
        if not isinstance(piece, bytes):
            raise TypeError(f"pieces[{token_id}] is a {type(piece).__name__}, not bytes")
        if token_id in special:
            result["special"].append(token_id)
            continue
        try:
            text = piece.decode("utf-8")
        except UnicodeDecodeError:
            result["partial"].append(token_id)
            continue
        if list(encode(text)) == [token_id]:
            result["ok"].append(token_id)
        else:
            result["mismatch"].append(token_id)
    return result


# ------------------------------------------------------------------------------------------ UDHR samples (chapter)


@dataclass(frozen=True)
class LanguageSample:
    """One language's sample text: its gflanguages code (``"de_Latn"``), English name, script and text."""

    code: str
    name: str
    script: str
    text: str


_FIELD = re.compile(r'^\s*(\w+): "((?:[^"\\]|\\.)*)"\s*$')
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\"}


def _unescape(value: str, where: str) -> str:
    """Undo the text-format escapes of one quoted .textproto value."""
    def replace(m: re.Match) -> str:
        try:
            return _ESCAPES[m.group(1)]
        except KeyError:
            raise ValueError(f"{where}: unsupported escape \\{m.group(1)}") from None

    return re.sub(r"\\(.)", replace, value)


def _read_textproto(path: Path) -> tuple[dict[str, str], list[str], bool, int]:
    """Top-level string fields, sample_text lines, the historical flag and the population of one file."""
    top: dict[str, str] = {}
    lines: list[str] = []
    historical, population, block = False, 0, None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.endswith("{") and not line.startswith(" "):
            block = line.split()[0]
            continue
        if line.startswith("}"):
            block = None
            continue
        if line.startswith("historical: true"):
            historical = True
        elif line.startswith("population: "):
            population = int(line.split()[1])
        m = _FIELD.match(line)
        if not m:
            continue
        value = _unescape(m.group(2), f"{path.name} line {number}")
        if block is None:
            top.setdefault(m.group(1), value)
        elif block == "sample_text" and not m.group(1).startswith(("masthead", "poster")):
            lines.extend(part for part in value.split("\n") if part.strip())
    return top, lines, historical, population


def udhr_samples(folder: str | os.PathLike | None = None, *, min_chars: int = 100) -> dict[str, LanguageSample]:
    """Read the UDHR sample texts of gflanguages (the ``udhr-samples`` asset), one per living language.

    Each ``<code>.textproto`` may hold a ``sample_text`` block: passages of the Universal Declaration of
    Human Rights in that language, chosen by Google Fonts to show off type (so *different passages for
    different languages*, not one parallel text). The text kept here is every distinct line of those
    passages that is not part of a longer line, joined by newlines. Left out: languages marked
    ``historical``, scripts that no living language in the data set uses (demonstration transliterations
    into Egyptian hieroglyphs and the like), and texts shorter than ``min_chars`` characters.

    Returns ``{code: LanguageSample}`` sorted by code.
    """
    if folder is None:
        from .. import assets

        folder = assets.path("udhr-samples")
    parsed = {p.stem: _read_textproto(p) for p in sorted(Path(folder).glob("*.textproto"))}
    if not parsed:
        raise FileNotFoundError(f"no .textproto files in {folder}")
    living = {top.get("script") for top, _, hist, pop in parsed.values() if pop > 0 and not hist}
    out: dict[str, LanguageSample] = {}
    for code, (top, lines, historical, _pop) in parsed.items():
        if historical or top.get("script") not in living or not lines:
            continue
        unique = list(dict.fromkeys(lines))
        kept = [s for s in unique if not any(s != other and s in other for other in unique)]
        text = "\n".join(kept)
        if len(text) >= min_chars:
            out[code] = LanguageSample(code, top.get("name", code), top["script"], text)
    return out


# ------------------------------------------------------------------------------------------ the table (chapter)

_PROBE = "Tokenizers 2024: naïve café, 東京, Ελλάδα, हिन्दी, 👩\u200d💻\n\tdef f(x):  return x"


def _table_key(tokenizers: Mapping[str, Callable[[str], Sequence[int]]], texts: Mapping[str, str]) -> str:
    """A fingerprint of the inputs: each tokenizer's ids for a mixed-script probe, and every text."""
    h = hashlib.sha256(b"fertility-table v1\n")
    for name in sorted(tokenizers):
        h.update(json.dumps([name, [int(i) for i in tokenizers[name](_PROBE)]]).encode())
    for code in sorted(texts):
        h.update(json.dumps([code, texts[code]], ensure_ascii=False).encode())
    return h.hexdigest()[:20]


def fertility_table(tokenizers: Mapping[str, Callable[[str], Sequence[int]]], texts: Mapping[str, str], *,
                    cache: bool = True, progress: bool = True) -> dict[str, dict[str, float]]:
    """Tokens per character for every (tokenizer, language): ``{tokenizer name: {code: fertility}}``.

    ``tokenizers`` maps a name to an encode function; ``texts`` maps a language code to its text. Encoding
    hundreds of languages with several pure-Python tokenizers takes a while, so with ``cache=True`` the
    table is stored under the asset cache folder (``computed/fertility-<fingerprint>.json``) and reused
    while the inputs are the same: the fingerprint covers every text and each tokenizer's ids for a probe
    string. A missing, empty or unreadable cache file is recomputed (with a progress bar).
    """
    from tqdm.auto import tqdm

    path = None
    if cache:
        from ..assets import cache_dir

        path = cache_dir() / "computed" / f"fertility-{_table_key(tokenizers, texts)}.json"
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
            if set(stored) == set(tokenizers) and all(set(v) == set(texts) for v in stored.values()):
                return {name: {code: stored[name][code] for code in texts} for name in tokenizers}
        except (OSError, ValueError):
            pass  # missing, empty or damaged: compute it again
    table: dict[str, dict[str, float]] = {name: {} for name in tokenizers}
    with tqdm(total=len(tokenizers) * len(texts), desc="fertility", unit="text", disable=not progress) as bar:
        for name, tokenize in tokenizers.items():
            bar.set_postfix_str(name)
            for code, text in texts.items():
                table[name][code] = fertility(tokenize, text).per_char
                bar.update()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(table, ensure_ascii=False), encoding="utf-8")
        tmp.replace(path)
    return table
