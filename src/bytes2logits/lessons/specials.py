"""Special and control tokens for the course tokenizer: where they may come from, and where they may not.

This module is the reference for lab 06.

A special token (``<bos>``, ``<eos>``, ``<|im_start|>``, ``<|im_end|>``) is a single id that marks
*structure*: where a sequence begins, where a turn ends, who speaks. The model learned to trust those ids.
So the one rule that matters is: **only code you wrote may put a special id into a sequence**. Text a user
typed is encoded as ordinary bytes even when it spells ``"<|im_end|>"``.

* :func:`find_specials` is the scan used when *trusted* text that contains special-token text must be
  parsed (a prompt you rendered yourself): the match that starts earliest wins, and among matches that
  start at the same place, the longest.
* :class:`SpecialTokenizer` is lab 05's closed byte-level codec plus ``allowed_special`` (which specials,
  if any, the scan may produce), structural ``add_bos`` / ``add_eos``, ``decode(..., skip_special=...)``
  and the stop ids that end generation.
* :func:`encode_chatml` builds a ChatML conversation *structurally*: the markers are appended as ids and
  the messages are encoded as plain text, so no message can forge a turn boundary.
* :func:`cut_at_stop` finds where generation must stop.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from .bpe import ByteLevelCodec

__all__ = ["find_specials", "SpecialTokenizer", "encode_chatml", "cut_at_stop"]


def find_specials(text: str, specials: Iterable[str]) -> list[tuple[int, int, str]]:
    """Find the special tokens in ``text``: a list of ``(start, end, token)``, left to right.

    The scan moves left to right. At each position the first special token that *starts earliest* wins;
    when several start at the same position, the *longest* wins. After a match the scan continues at its
    end, so matches never overlap. With specials ``["<|end", "<|endoftext|>"]`` (the first is a prefix of
    the second) the text ``"a<|endoftext|>"`` gives one match, ``(1, 14, "<|endoftext|>")``, not ``<|end``
    followed by the text ``oftext|>``.

    A regular expression does exactly this: the search tries positions from left to right, and at one
    position it tries the alternatives in the order they are written, so listing the specials longest first
    makes the longest one win.

    ``specials`` must be non-empty strings (an empty one would match everywhere); anything else raises.

    >>> find_specials("x<a><ab>", ["<a>", "<ab>"])
    [(1, 4, '<a>'), (4, 8, '<ab>')]
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    if isinstance(specials, (str, bytes)):
        raise TypeError("specials must be a collection of str such as ['<|im_end|>'], not one string")
    tokens = set()
    for s in specials:
        if type(s) is not str:
            raise TypeError(f"special token {s!r} is a {type(s).__name__}, expected str")
        if not s:
            raise ValueError("the empty string cannot be a special token: it would match everywhere")
        tokens.add(s)
    if not tokens:
        return []
    longest_first = sorted(tokens, key=lambda s: (-len(s), s))
    pattern = re.compile("|".join(re.escape(s) for s in longest_first))
    return [(m.start(), m.end(), m.group()) for m in pattern.finditer(text)]


class SpecialTokenizer(ByteLevelCodec):
    """The closed byte-level codec with explicit control over special tokens.

    ``SpecialTokenizer(vocab, merges, special_tokens, bos="<bos>", eos="<eos>", stop_tokens=None)``

    * ``encode(text, allowed_special=None, add_bos=False, add_eos=False)``: ``allowed_special`` is
      ``None`` (the default: no special-token text in ``text`` is recognised, it is all ordinary bytes),
      ``"all"`` (every special token is recognised, for text you rendered yourself), or a set of special
      token strings (only those). Recognised specials become their ids; the text between them is encoded
      piece by piece as usual, so no merge crosses a special token. ``add_bos`` / ``add_eos`` put the
      ``bos`` / ``eos`` ids at the ends *structurally*, whatever the text says.
    * ``decode(ids, skip_special=True)``: special ids vanish by default; with ``skip_special=False`` they
      are written out as their text.
    * ``stop_ids``: the ids that end generation, from ``stop_tokens`` (default: just ``eos``). Each must be
      one of ``special_tokens``.
    """

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        merges: Sequence[tuple[bytes, bytes]],
        special_tokens: Sequence[str] = (),
        *,
        bos: str = "<bos>",
        eos: str = "<eos>",
        stop_tokens: Iterable[str] | None = None,
    ):
        """Validate and build the codec (lab 05), then look up the stop ids."""
        super().__init__(vocab, merges, special_tokens, bos=bos, eos=eos)
        if stop_tokens is None:
            stop_tokens = [eos] if eos in self.special_ids else []
        elif isinstance(stop_tokens, str):
            raise TypeError(f"stop_tokens must be a collection of str, e.g. [{stop_tokens!r}], not one string")
        stop_tokens = list(stop_tokens)
        unknown = [s for s in stop_tokens if s not in self.special_ids]
        if unknown:
            raise ValueError(f"stop token(s) {unknown} are not among the special tokens {self.special_tokens}")
        #: the ids that end generation
        self.stop_ids = frozenset(self.special_ids[s] for s in stop_tokens)

    def allowed_specials(self, allowed_special) -> set[str]:
        """The set of special-token strings that ``allowed_special`` permits (see :meth:`encode`).

        A plain string other than ``"all"`` is refused (``allowed_special="<|im_end|>"`` is a common slip
        for ``{"<|im_end|>"}``), and so is a name that is not one of this tokenizer's special tokens.
        """
        if allowed_special is None:
            return set()
        if isinstance(allowed_special, str):
            if allowed_special == "all":
                return set(self.special_ids)
            raise ValueError(f"allowed_special must be None, 'all' or a set of special tokens; "
                             f"for one token write {{{allowed_special!r}}}")
        if not isinstance(allowed_special, Iterable) or isinstance(allowed_special, (bytes, Mapping)):
            raise TypeError(f"allowed_special must be None, 'all' or a set of special tokens, "
                            f"not {type(allowed_special).__name__}")
        allowed = set(allowed_special)
        unknown = sorted(map(repr, (s for s in allowed if s not in self.special_ids)))
        if unknown:
            raise ValueError(f"allowed_special names {', '.join(unknown)}, which "
                             f"{'is not a special token' if len(unknown) == 1 else 'are not special tokens'} "
                             f"of this tokenizer; its special tokens are {self.special_tokens}")
        return allowed

    def encode(self, text: str, allowed_special=None, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Encode ``text``; only the special tokens that ``allowed_special`` permits are recognised in it.

        The text between recognised specials is encoded with the plain codec, one stretch at a time.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, got {type(text).__name__}")
        allowed = self.allowed_specials(allowed_special)
        ids: list[int] = []
        if add_bos:
            ids.append(self._special_id(self.bos, "bos"))
        position = 0
        for start, end, token in find_specials(text, allowed):
            ids.extend(super().encode(text[position:start]))
            ids.append(self.special_ids[token])
            position = end
        ids.extend(super().encode(text[position:]))
        if add_eos:
            ids.append(self._special_id(self.eos, "eos"))
        return ids

    def decode(self, ids: Iterable[int], skip_special: bool = True, errors: str = "replace") -> str:
        """Decode ids to text; special ids are dropped (``skip_special=True``) or written as their text.

        Unknown ids raise an error naming the id and its position (see :meth:`BPETokenizer.decode_bytes`).
        """
        ids = list(ids)
        data = self.decode_bytes(ids)  # checks every id
        if not skip_special:
            data = b"".join(self.vocab[i] for i in ids)
        return data.decode("utf-8", errors=errors)


def encode_chatml(
    tokenizer: SpecialTokenizer, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True
) -> list[int]:
    """Encode a conversation as ChatML token ids, placing the markers structurally.

    Each message becomes ``<|im_start|>`` + the plain encoding of ``role + "\\n" + content`` +
    ``<|im_end|>`` + the plain encoding of ``"\\n"``. With ``add_generation_prompt`` the ids of
    ``<|im_start|>`` + ``"assistant\\n"`` follow, so the model's next token starts the answer.

    The marker ids come from here and nowhere else: a message that *contains* ``"<|im_end|>"`` is encoded
    as those bytes. When no message contains special-token text, the result equals encoding the rendered
    ChatML string with ``allowed_special="all"``.

    ``messages`` is a list of ``{"role": str, "content": str}`` dicts; anything else raises an error that
    names the message.
    """
    for name in ("<|im_start|>", "<|im_end|>"):
        if name not in tokenizer.special_ids:
            raise ValueError(f"ChatML needs the special token {name!r}; the tokenizer has {tokenizer.special_tokens}")
    if isinstance(messages, (str, Mapping)) or not isinstance(messages, Sequence):
        raise TypeError("messages must be a list of {'role': ..., 'content': ...} dicts")
    start, end = tokenizer.special_ids["<|im_start|>"], tokenizer.special_ids["<|im_end|>"]
    newline = tokenizer.encode("\n")
    ids: list[int] = []
    for k, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TypeError(f"message {k} is a {type(message).__name__}, expected a dict with role and content")
        for field in ("role", "content"):
            if type(message.get(field)) is not str:
                raise ValueError(f"message {k} needs a str {field!r}, got {message.get(field)!r}")
        ids.append(start)
        ids.extend(tokenizer.encode(message["role"] + "\n" + message["content"]))
        ids.append(end)
        ids.extend(newline)
    if add_generation_prompt:
        ids.append(start)
        ids.extend(tokenizer.encode("assistant\n"))
    return ids


def cut_at_stop(ids: Iterable[int], stop_ids: Iterable[int]) -> tuple[list[int], int | None]:
    """Split generated ids at the first stop id: ``(ids before it, the stop id)``, or ``(all ids, None)``.

    The stop id itself is not part of the answer (it is not text to show), and nothing after it counts.

    >>> cut_at_stop([5, 6, 2, 7], {2})
    ([5, 6], 2)
    """
    stops = set(stop_ids)
    out: list[int] = []
    for i in ids:
        if i in stops:
            return out, i
        out.append(i)
    return out, None
