"""The two smallest honest tokenizers, and streaming decode (chapter 01, lab 01).

A language model reads integers. A tokenizer is the pair of functions that turn text into those integers
and back, under a contract: ``decode(encode(text)) == text`` (reversible), every input has an encoding
(closed), and the ids mean what they meant in training.

* :class:`ByteTokenizer` — the ids are the UTF-8 bytes of the text: 256 symbols, closed by construction.
* :class:`CharTokenizer` — one id per Unicode code point from a fixed list, ``<unk>`` for the rest
  (so it is *not* closed: unknown characters are lost).
* :class:`StreamDecoder` — turns a stream of ids into text one id at a time, holding back a UTF-8
  sequence that has not finished yet, as a chat server must.
* :func:`decode_utf8_prefix` — the UTF-8 decoder underneath, written out so that every rule is visible.
"""

from __future__ import annotations

import json
import operator
from pathlib import Path

from ..text import REPLACEMENT, decode_utf8_prefix

__all__ = ["ByteTokenizer", "CharTokenizer", "StreamDecoder", "decode_utf8_prefix", "REPLACEMENT"]


def _as_id(value, position: int, vocab_size: int) -> int:
    """Check one token id: an integer (not a bool, not a float) in ``0..vocab_size-1``."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"token id at position {position} is {value!r} ({type(value).__name__}), not an int")
    i = operator.index(value)
    if not 0 <= i < vocab_size:
        raise ValueError(f"token id {i} at position {position} is outside the vocabulary 0..{vocab_size - 1}")
    return i


class ByteTokenizer:
    """Byte-level tokenizer: the ids of a text are its UTF-8 bytes.

    The vocabulary is the 256 byte values and the id of a byte is its value, so ``vocab_size`` is 256 and
    there are no special tokens. Every string has an encoding, so nothing is ever unknown.

    >>> tok = ByteTokenizer()
    >>> tok.encode("héllo")
    [104, 195, 169, 108, 108, 111]
    >>> tok.decode([104, 195, 169])
    'hé'
    """

    vocab_size = 256

    def encode(self, text: str) -> list[int]:
        """Return the UTF-8 bytes of ``text`` as a list of ints in 0..255.

        ``"é"`` is U+00E9, which UTF-8 writes as the two bytes ``c3 a9``: one character, two ids.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, not {type(text).__name__}")
        return list(text.encode("utf-8"))

    def decode_bytes(self, ids) -> bytes:
        """Return the raw bytes of ``ids`` without interpreting them as UTF-8."""
        return bytes(_as_id(i, pos, 256) for pos, i in enumerate(ids))

    def decode(self, ids) -> str:
        """Decode ids to text; each invalid UTF-8 stretch becomes one U+FFFD.

        A model that samples bytes can produce sequences that are not UTF-8 (``[255]``, or a three-byte
        character cut after two bytes). Decoding must not crash on them: each *maximal subpart* of an
        ill-formed sequence becomes a single replacement character, as Unicode recommends and as Python's
        ``errors="replace"`` does. An id outside 0..255 is a bug in the caller and raises ``ValueError``
        naming the id and its position.
        """
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


class CharTokenizer:
    """Character-level tokenizer: one id per Unicode code point in a fixed vocabulary.

    Saved as JSON: ``{"type": "char", "vocab": ["<unk>", "\\n", " ", "a", "b"], "specials": {"unk": 0}}``.
    ``vocab[i]`` is the text of id ``i``: one code point, or a special token's text. ``specials`` maps the
    names ``unk``, ``bos``, ``eos``, ``pad`` to ids; only ``unk`` is required.

    Encoding maps each code point to its id and an unknown one to ``unk``, which loses it for good. The
    text of a special token in the input is *not* matched: ``"<unk>"`` typed by a user is five ordinary
    characters, never the special id.
    """

    SPECIAL_NAMES = ("unk", "bos", "eos", "pad")

    def __init__(self, vocab: list[str], specials: dict[str, int]):
        """Build from a vocabulary list and a ``{name: id}`` map of specials; see :meth:`from_dict`."""
        d = self._validated({"type": "char", "vocab": vocab, "specials": specials})
        self.vocab: list[str] = d["vocab"]
        self.specials: dict[str, int] = d["specials"]
        self.special_ids: frozenset[int] = frozenset(self.specials.values())
        self.unk_id: int = self.specials["unk"]
        # Only ordinary entries are reachable from text: special ids are never produced by encode().
        self._id_of = {s: i for i, s in enumerate(self.vocab) if i not in self.special_ids}

    @staticmethod
    def _validated(d) -> dict:
        """Check a char-tokenizer dict; every error names the field that is wrong."""
        if not isinstance(d, dict):
            raise ValueError(f"char tokenizer: expected a JSON object, got {type(d).__name__}")
        if d.get("type") != "char":
            raise ValueError(f"char tokenizer: field 'type' must be \"char\", got {d.get('type')!r}")
        vocab = d.get("vocab")
        if not isinstance(vocab, list) or not vocab:
            raise ValueError("char tokenizer: field 'vocab' must be a non-empty list of strings")
        seen: dict[str, int] = {}
        for i, entry in enumerate(vocab):
            if not isinstance(entry, str) or entry == "":
                raise ValueError(f"char tokenizer: field 'vocab[{i}]' must be a non-empty string, got {entry!r}")
            if entry in seen:
                raise ValueError(f"char tokenizer: field 'vocab[{i}]' duplicates vocab[{seen[entry]}] ({entry!r})")
            seen[entry] = i
        specials = d.get("specials")
        if not isinstance(specials, dict):
            raise ValueError("char tokenizer: field 'specials' must be an object such as {\"unk\": 0}")
        for name, sid in specials.items():
            if name not in CharTokenizer.SPECIAL_NAMES:
                raise ValueError(f"char tokenizer: field 'specials.{name}' is not one of "
                                 f"{', '.join(CharTokenizer.SPECIAL_NAMES)}")
            if isinstance(sid, bool) or not isinstance(sid, int) or not 0 <= sid < len(vocab):
                raise ValueError(f"char tokenizer: field 'specials.{name}' must be an id in 0..{len(vocab) - 1}, "
                                 f"got {sid!r}")
        if "unk" not in specials:
            raise ValueError("char tokenizer: field 'specials.unk' is required")
        special_ids = set(specials.values())
        for i, entry in enumerate(vocab):
            if i not in special_ids and len(entry) != 1:
                raise ValueError(f"char tokenizer: field 'vocab[{i}]' ({entry!r}) must be one code point "
                                 "unless it is a special token")
        return {"type": "char", "vocab": list(vocab), "specials": dict(specials)}

    @classmethod
    def from_dict(cls, d: dict) -> "CharTokenizer":
        """Build from the JSON structure described in the class docstring, validating every field."""
        d = cls._validated(d)
        return cls(d["vocab"], d["specials"])

    @classmethod
    def from_file(cls, path) -> "CharTokenizer":
        """Load a ``tinyllm_char.json``-style file; a JSON syntax error names the file, line and column."""
        path = Path(path)
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
        return cls.from_dict(d)

    def to_dict(self) -> dict:
        """The JSON structure :meth:`from_dict` reads (the file format), as a new dict: save it with ``json.dump``."""
        return {"type": "char", "vocab": list(self.vocab), "specials": dict(self.specials)}

    @property
    def vocab_size(self) -> int:
        """Number of ids: the length of ``vocab`` (specials included)."""
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        """One id per code point; a code point outside the vocabulary becomes ``unk`` (and is lost)."""
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, not {type(text).__name__}")
        unk = self.unk_id
        return [self._id_of.get(ch, unk) for ch in text]

    def decode(self, ids, skip_special: bool = False) -> str:
        """Concatenate the vocabulary entries of ``ids``; with ``skip_special`` drop the special ids."""
        n = len(self.vocab)
        parts = []
        for pos, value in enumerate(ids):
            i = _as_id(value, pos, n)
            if skip_special and i in self.special_ids:
                continue
            parts.append(self.vocab[i])
        return "".join(parts)


class StreamDecoder:
    """Turn a stream of token ids into text chunks, one id at a time.

    A chat server sends text as the model produces it, but one token may carry only part of a character
    (``é`` is two byte tokens). ``step(id)`` adds the token's bytes to a pending buffer and returns the
    text that is complete so far, holding back an unfinished UTF-8 sequence; an invalid stretch becomes
    one U+FFFD at once. ``finish()`` flushes what is left, with replacement. The concatenation of all
    chunks always equals ``tokenizer.decode(all_ids)``.

    >>> d = StreamDecoder(ByteTokenizer())
    >>> [d.step(195), d.step(169), d.step(255), d.finish()]
    ['', 'é', '�', '']
    """

    def __init__(self, tokenizer):
        """``tokenizer`` must offer ``decode_bytes(ids) -> bytes``."""
        self.tokenizer = tokenizer
        self._pending = b""

    def step(self, token_id: int) -> str:
        """Add one token; return the newly completed text (possibly ``""``)."""
        self._pending += self.tokenizer.decode_bytes([token_id])
        text, used = decode_utf8_prefix(self._pending, final=False)
        self._pending = self._pending[used:]
        return text

    def finish(self) -> str:
        """End of stream: decode whatever is pending, with replacement, and reset."""
        text, _ = decode_utf8_prefix(self._pending, final=True)
        self._pending = b""
        return text

    @property
    def pending(self) -> bytes:
        """Bytes received but not yet emitted: an unfinished character that may still complete, else ``b""``."""
        return self._pending
