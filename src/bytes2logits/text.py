"""Low-level text helpers that both the engine and the lessons stand on.

* :func:`bytes_to_unicode` and :data:`BYTE_TO_CHAR` / :data:`CHAR_TO_BYTE`: GPT-2's byte <-> printable
  character map, which byte-level BPE vocabularies are written in (a space is ``"Ġ"``).
* :func:`decode_utf8_prefix`: an incremental UTF-8 decoder with the "maximal subpart" replacement rule,
  for streaming text out of token bytes (chapter 01 explains every line of it).

Nothing here imports any other part of the package.
"""

from __future__ import annotations

__all__ = ["REPLACEMENT", "bytes_to_unicode", "BYTE_TO_CHAR", "CHAR_TO_BYTE", "decode_utf8_prefix"]

REPLACEMENT = "\ufffd"  # U+FFFD REPLACEMENT CHARACTER, shown as �


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable byte -> character map, as a new ``dict[int, str]`` on every call.

    The 188 bytes that are already printable Latin-1 characters (``!``..``~``, ``¡``..``¬``, ``®``..``ÿ``)
    stand for themselves; the other 68 (control characters, space, DEL, NBSP, soft hyphen) are given the
    code points 256, 257, ... in byte order, so a space shows as ``"Ġ"`` (U+0120) and a newline as ``"Ċ"``
    (U+010A). It is for *display* only: tie-breaking and all comparisons use the raw bytes.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + shifted)
            shifted += 1
    return dict(sorted(table.items()))


#: byte value -> the printable character byte-level BPE vocabularies use for it; also a ``str.translate``
#: table: ``raw.decode("latin-1").translate(BYTE_TO_CHAR)`` writes the bytes ``raw`` GPT-2 style
BYTE_TO_CHAR: dict[int, str] = bytes_to_unicode()
#: the inverse of :data:`BYTE_TO_CHAR`
CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in BYTE_TO_CHAR.items()}


def decode_utf8_prefix(buf: bytes, final: bool) -> tuple[str, int]:
    """Decode as much of ``buf`` as can be decided now; return ``(text, bytes_consumed)``.

    UTF-8 writes a code point in 1 to 4 bytes. The first byte says how many follow:

    ======== ============ ===========================================================
    lead     length       allowed second byte (the rest are always 80..BF)
    ======== ============ ===========================================================
    00..7F   1            —
    C2..DF   2            80..BF
    E0       3            A0..BF  (smaller would be an "overlong" encoding)
    E1..EC   3            80..BF
    ED       3            80..9F  (A0..BF would encode a UTF-16 surrogate)
    EE..EF   3            80..BF
    F0       4            90..BF  (overlong otherwise)
    F1..F3   4            80..BF
    F4       4            80..8F  (beyond U+10FFFF otherwise)
    80..C1, F5..FF        never a valid lead byte
    ======== ============ ===========================================================

    Scanning left to right, a sequence is either complete (emit the character), broken by a byte that may
    not come next (emit one U+FFFD for the bytes read so far — the *maximal subpart* — and go on from the
    offending byte), or cut off by the end of ``buf``. A cut-off sequence is held back (not consumed) when
    more bytes may still arrive (``final=False``), and becomes one U+FFFD when ``final=True``.
    """
    out: list[str] = []
    i, n = 0, len(buf)
    start = 0  # start of the current run of plain, valid bytes
    while i < n:
        b = buf[i]
        if b < 0x80:
            i += 1
            continue
        if 0xC2 <= b <= 0xDF:
            length, lo, hi = 2, 0x80, 0xBF
        elif b == 0xE0:
            length, lo, hi = 3, 0xA0, 0xBF
        elif b == 0xED:
            length, lo, hi = 3, 0x80, 0x9F
        elif 0xE1 <= b <= 0xEF:
            length, lo, hi = 3, 0x80, 0xBF
        elif b == 0xF0:
            length, lo, hi = 4, 0x90, 0xBF
        elif b == 0xF4:
            length, lo, hi = 4, 0x80, 0x8F
        elif 0xF1 <= b <= 0xF3:
            length, lo, hi = 4, 0x80, 0xBF
        else:  # a continuation byte or a byte that never appears in UTF-8
            out.append(buf[start:i].decode("utf-8"))
            out.append(REPLACEMENT)
            i += 1
            start = i
            continue
        k = 1
        while k < length and i + k < n:
            c = buf[i + k]
            if not ((lo <= c <= hi) if k == 1 else (0x80 <= c <= 0xBF)):
                break
            k += 1
        if k == length:  # complete and valid
            i += length
            continue
        if i + k >= n and not final:  # cut off by the end: wait for more bytes
            break
        out.append(buf[start:i].decode("utf-8"))
        out.append(REPLACEMENT)  # one U+FFFD for the maximal subpart buf[i:i+k]
        i += k
        start = i
    out.append(buf[start:i].decode("utf-8"))
    return "".join(out), i
