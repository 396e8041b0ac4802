"""Decoders: token strings back to text (stage 6 of 6), all at once or as a stream.

A decoder undoes what the earlier stages did to the text: the byte-level map (``"Ġworld"`` -> ``" world"``),
SentencePiece's visible space (``"▁world"``), WordPiece's continuation mark (``"##ing"``), byte-fallback
tokens (``"<0xE2>"``). The names follow Hugging Face ``tokenizers``; each decoder maps a list of token
strings to a list of strings, and a ``Sequence`` runs them in order (``decode_chain``).

Streaming (:class:`StreamDecoder`) gives the text of each new token as it arrives, and the chunks always
concatenate to the text of ``decode(ids)``. Three things must be held back to keep that promise: the bytes
of a character split over tokens (a byte-level emoji, or ``<0xE2>`` ``<0x82>`` ``<0xAC>``), because a
character is only known when its last byte arrives; and nothing else, because the other decoders here work
on one token at a time and only need to know whether a token is the first one (Metaspace drops the space
in front of the first word, WordPiece writes no space before it).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Sequence

from ..text import CHAR_TO_BYTE

__all__ = ["Decoder", "ByteLevelDecoder", "ByteFallback", "Fuse", "ReplaceDecoder", "Strip", "MetaspaceDecoder",
           "WordPieceDecoder", "DecoderSequence", "StreamDecoder", "byte_level_bytes"]

_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def byte_level_bytes(token: str) -> bytes:
    """The bytes a byte-level token stands for (a character outside the byte map stands for itself)."""
    try:
        return bytes(CHAR_TO_BYTE[c] for c in token)
    except KeyError:
        return b"".join(bytes([CHAR_TO_BYTE[c]]) if c in CHAR_TO_BYTE else c.encode("utf-8") for c in token)


class Decoder:
    """The interface: ``decode_chain(tokens, first)`` maps token strings to strings.

    ``first`` says that ``tokens[0]`` is the first token of the whole output (a stream decodes a few tokens
    at a time). :attr:`per_token` is True when each output depends on one token only (and on whether it is
    the first), which is what lets a stream emit text at once.
    """

    per_token = True

    def decode_chain(self, tokens: list[str], first: bool = True) -> list[str]:
        """Token strings -> strings; subclasses implement this."""
        raise NotImplementedError

    def decode(self, tokens: list[str]) -> str:
        """The text of a whole list of tokens."""
        return "".join(self.decode_chain(list(tokens), True))

    def __repr__(self) -> str:
        """The class name and its settings, as in ``tokenizer.json``."""
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_") and k != "per_token")
        return f"{type(self).__name__}({fields})"


class ByteLevelDecoder(Decoder):
    """Every character back to its byte, then UTF-8 (an invalid stretch becomes U+FFFD)."""

    per_token = False

    def decode_chain(self, tokens: list[str], first: bool = True) -> list[str]:
        """One string: the bytes of all tokens, decoded."""
        return [b"".join(map(byte_level_bytes, tokens)).decode("utf-8", errors="replace")]


class ByteFallback(Decoder):
    """Runs of ``<0xXX>`` tokens become the text of their bytes; if the run is not valid UTF-8, one U+FFFD
    per byte (what ``tokenizers`` writes).

    A stream can still emit at every token that is not a byte token: it holds byte tokens back until the
    run ends, so a run is never split between two batches (see :class:`StreamDecoder`).
    """

    def decode_chain(self, tokens: list[str], first: bool = True) -> list[str]:
        """Byte runs joined into text; other tokens unchanged."""
        out: list[str] = []
        run: list[int] = []

        def close() -> None:
            if run:
                try:
                    out.append(bytes(run).decode("utf-8"))
                except UnicodeDecodeError:
                    out.extend("\ufffd" for _ in run)
                run.clear()

        for t in tokens:
            m = _BYTE_TOKEN.fullmatch(t) if len(t) == 6 else None
            if m:
                run.append(int(m.group(1), 16))
            else:
                close()
                out.append(t)
        close()
        return out


class Fuse(Decoder):
    """All strings joined into one.

    Joining is the same in pieces or at once, so a stream may fuse each batch on its own; only a
    :class:`Strip` after it must then know whether its batch starts the output (see
    :class:`DecoderSequence`).
    """

    def decode_chain(self, tokens: list[str], first: bool = True) -> list[str]:
        """``["".join(tokens)]``."""
        return ["".join(tokens)]


class ReplaceDecoder(Decoder):
    """Replace a literal string in every token (``"▁"`` -> ``" "``)."""

    def __init__(self, pattern: str, content: str):
        """``pattern``: the literal text to find; ``content``: its replacement."""
        self.pattern = pattern
        self.content = content

    def decode_chain(self, tokens: list[str], first: bool = True) -> list[str]:
        """Each token with the pattern replaced."""
        return [t.replace(self.pattern, self.content) for t in tokens]


class Strip(Decoder):
    """Remove up to ``start`` copies of ``content`` from the front of every token, ``stop`` from the end."""

    def __init__(self, content: str = " ", start: int = 0, stop: int = 0):
        """``content``: the character to strip; ``start``/``stop``: how many at most on each side."""
        self.content = content
        self.start = start
        self.stop = stop
        self.per_token = stop == 0

    def decode_chain(self, tokens: list[str], first: bool = True) -> list[str]:
        """Each token stripped."""
        out = []
        for t in tokens:
            a = 0
            while a < self.start and t[a:a + 1] == self.content:
                a += 1
            b = len(t)
            while len(t) - b < self.stop and b > a and t[b - 1] == self.content:
                b -= 1
            out.append(t[a:b])
        return out


class MetaspaceDecoder(Decoder):
    """``"▁"`` back to a space; the space in front of the first token is dropped (unless the pre-tokenizer
    never adds one: ``prepend_scheme="never"``)."""

    def __init__(self, replacement: str = "\u2581", prepend_scheme: str = "always"):
        """The settings of tokenizer.json's ``Metaspace`` decoder."""
        self.replacement = replacement
        self.prepend_scheme = prepend_scheme

    def decode_chain(self, tokens: list[str], first: bool = True) -> list[str]:
        """Each token with its replacement characters turned back into spaces."""
        out = []
        for k, t in enumerate(tokens):
            t = t.replace(self.replacement, " ")
            if first and k == 0 and self.prepend_scheme != "never" and t.startswith(" "):
                t = t[1:]
            out.append(t)
        return out


def wordpiece_cleanup(text: str) -> str:
    """BERT's clean-up of decoded text: no space before ``. ? ! ,`` and in English contractions."""
    return (text.replace(" .", ".").replace(" ?", "?").replace(" !", "!").replace(" ,", ",")
            .replace(" ' ", "'").replace(" n't", "n't").replace(" 'm", "'m").replace(" do not", " don't")
            .replace(" 's", "'s").replace(" 've", "'ve").replace(" 're", "'re"))


class WordPieceDecoder(Decoder):
    """WordPiece: a token starting with ``prefix`` (``"##"``) joins the previous one; the others get a space
    in front (except the first). ``cleanup`` applies :func:`wordpiece_cleanup` to every token."""

    def __init__(self, prefix: str = "##", cleanup: bool = True):
        """The settings of tokenizer.json's ``WordPiece`` decoder."""
        self.prefix = prefix
        self.cleanup = cleanup

    def decode_chain(self, tokens: list[str], first: bool = True) -> list[str]:
        """Each token joined or spaced, then cleaned up."""
        out = []
        for k, t in enumerate(tokens):
            if not (first and k == 0):
                t = t.replace(self.prefix, "", 1) if t.startswith(self.prefix) else " " + t
            out.append(wordpiece_cleanup(t) if self.cleanup else t)
        return out


class DecoderSequence(Decoder):
    """Decoders run one after another."""

    def __init__(self, decoders: Sequence[Decoder]):
        """``decoders``: first to last."""
        self.decoders = list(decoders)
        fused = [isinstance(d, Fuse) for d in self.decoders]
        # after a Fuse, a Replace of several characters could match across two batches of a stream
        spans_batches = any(isinstance(d, ReplaceDecoder) and len(d.pattern) > 1 and any(fused[:k])
                            for k, d in enumerate(self.decoders))
        self.per_token = all(d.per_token for d in self.decoders) and not spans_batches

    def decode_chain(self, tokens: list[str], first: bool = True) -> list[str]:
        """Each decoder's output is the next one's input.

        After a :class:`Fuse` there is one string for the whole output, so a :class:`Strip` of its front only
        applies to the batch that starts the output.
        """
        fused = False
        for d in self.decoders:
            if fused and isinstance(d, Strip) and not first:
                d = Strip(d.content, 0, d.stop)
            tokens = d.decode_chain(tokens, first)
            fused = fused or isinstance(d, Fuse)
        return tokens


class StreamDecoder:
    """Text chunk by chunk, as token ids arrive; the chunks concatenate to ``tokenizer.decode(ids)``.

    Get one from :meth:`Tokenizer.stream <bytes2logits.engine.tokenizer.Tokenizer.stream>`. ``step(id)``
    returns the new text (possibly ``""`` while a character is incomplete); ``flush()`` returns what is
    still held back at the end (an incomplete character becomes U+FFFD there, as in ``decode``).

    Two modes, chosen by the tokenizer: *bytes* (each token is a byte string, as llama.cpp decodes; an
    incremental UTF-8 decoder holds back a split character), or *chain* (a tokenizer.json decoder: tokens
    are buffered while the last one is a byte token ``<0xXX>`` or the decoder needs the whole output, then
    decoded together).
    """

    def __init__(self, tokenizer, skip_special: bool = False):
        """Decode for ``tokenizer``; ``skip_special`` as in ``decode``."""
        self._tok = tokenizer
        self._skip = skip_special
        self._decoder = tokenizer.decoder
        self._bytes_mode = self._decoder is None
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending: list[str] = []
        self._first = True

    def step(self, token_id: int) -> str:
        """The text that ``token_id`` completes."""
        tok = self._tok
        i = tok._check_id(token_id, 0)
        if self._skip and tok.is_special(i):
            return ""
        if self._bytes_mode:
            return self._utf8.decode(tok._piece(i))
        dec = self._decoder
        self._pending.append(tok._tokens[i])
        if not dec.per_token or _BYTE_TOKEN.fullmatch(self._pending[-1]):
            return ""
        return self._emit()

    def _emit(self) -> str:
        text = "".join(self._decoder.decode_chain(self._pending, self._first))
        if self._pending:
            self._first = False
        self._pending = []
        return text

    def flush(self) -> str:
        """What is left at the end of the stream."""
        if self._bytes_mode:
            return self._utf8.decode(b"", final=True)
        return self._emit()
