"""Slow, first-principles BPE code shared by the hidden suites of labs 03, 04 and 08 (loaded by path).

Nothing here is the course's reference: each function is the plainest loop that is obviously right, so the
suites compare a learner's fast code with a second, independent account of the same rule.
"""

import random
import re


def slow_pieces(text, merges, pattern=r"\S+|\s+"):
    """The token bytes of ``text``: per pre-token piece, start from its bytes and fuse the adjacent pair of
    lowest rank (the leftmost when it occurs twice) until no adjacent pair is a merge. A merge listed twice
    keeps its first rank."""
    rank = {}
    for r, pair in enumerate(merges):
        rank.setdefault(pair, r)
    out = []
    for piece in re.findall(pattern, text):
        parts = [bytes([b]) for b in piece.encode()]
        while True:
            candidates = [(rank[(a, b)], i) for i, (a, b) in enumerate(zip(parts, parts[1:])) if (a, b) in rank]
            if not candidates:
                break
            _, i = min(candidates)
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        out.extend(parts)
    return out


def random_merges(rng, n):
    """``n`` random merges over a small alphabet (with both halves of é's UTF-8), each fusing two tokens that
    exist already."""
    pool = [c.encode() for c in "abc "] + ["é".encode()[:1], "é".encode()[1:]]
    merges = []
    while len(merges) < n:
        pair = (rng.choice(pool), rng.choice(pool))
        if pair not in merges:
            merges.append(pair)
            pool.append(pair[0] + pair[1])
    return merges


def zipf_corpus(n_bytes, seed, n_words=6000, zipf=1.0):
    """About ``n_bytes`` of text: ``n_words`` words over a skewed alphabet, drawn with Zipf weights of exponent
    ``zipf``, twelve words a line."""
    rng = random.Random(seed)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    weights = [12, 9, 8, 7.5, 7, 6.7, 6.3, 6, 5.9, 4.3, 4, 2.8, 2.8, 2.4, 2.4, 2, 2, 1.9, 1.5, 1, 0.8, 0.2, 0.2,
               0.15, 0.1, 0.07]
    words = ["".join(rng.choices(letters, weights, k=rng.randint(1, 10))) for _ in range(n_words)]
    cum, total = [], 0.0
    for r in range(len(words)):
        total += 1 / (r + 1) ** zipf
        cum.append(total)
    out, size = [], 0
    while size < n_bytes:
        line = " ".join(rng.choices(words, cum_weights=cum, k=12)) + "\n"
        out.append(line)
        size += len(line)
    return "".join(out)
