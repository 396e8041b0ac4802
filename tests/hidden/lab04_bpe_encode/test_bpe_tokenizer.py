"""Hidden suite, lab 04 task 2: BPETokenizer (encode by merge rank, decode, specials, errors)."""

import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st


def make_vocab(merges, specials=()):
    """Specials first, then the 256 bytes, then each new merged token once (the package's build_vocab)."""
    from bytes2logits.lessons import bpe

    return bpe.build_vocab(merges, specials)


def slow_encode(text, merges, vocab):
    """An independent encoder: per piece, repeatedly fuse the adjacent pair of lowest rank (leftmost first)."""
    rank = {}
    for r, pair in enumerate(merges):
        rank.setdefault(pair, r)
    ids_of = {}
    for i, t in sorted(vocab.items()):
        ids_of.setdefault(t, i)
    out = []
    for piece in re.findall(r"\S+|\s+", text):
        parts = [bytes([b]) for b in piece.encode()]
        while True:
            candidates = [(rank[(a, b)], i) for i, (a, b) in enumerate(zip(parts, parts[1:])) if (a, b) in rank]
            if not candidates:
                break
            _, i = min(candidates)
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        out.extend(ids_of[p] for p in parts)
    return out


def random_merges(rng, n):
    """Random merges over a small alphabet, each fusing two tokens that exist already."""
    tokens = [c.encode() for c in "abc "] + ["é".encode()[:1], "é".encode()[1:]]
    merges = []
    while len(merges) < n:
        pair = (rng.choice(tokens), rng.choice(tokens))
        if pair not in merges:
            merges.append(pair)
            tokens.append(pair[0] + pair[1])
    return merges


def ints(ids):
    assert type(ids) is list and all(type(i) is int for i in ids), "encode returns a plain list of int"
    return ids


def test_rank_order_not_left_to_right(impl):
    """The lowest-ranked merge is applied first, wherever it is: 'abc' with merges [bc, ab] is a + bc."""
    merges = [(b"b", b"c"), (b"a", b"b")]
    tok = impl.BPETokenizer(make_vocab(merges), merges)
    assert ints(tok.encode("abc")) == [97, 256]
    assert tok.encode("ab") == [257]


def test_leftmost_on_equal_rank(impl):
    """When the best pair occurs twice, the leftmost is fused first: 'aaa' is aa + a."""
    merges = [(b"a", b"a")]
    tok = impl.BPETokenizer(make_vocab(merges), merges)
    assert tok.encode("aaa") == [256, 97]
    assert tok.encode("aaaa") == [256, 256]


def test_merges_never_cross_pieces(impl):
    """Whitespace and non-whitespace runs are encoded separately."""
    merges = [(b"a", b" ")]
    tok = impl.BPETokenizer(make_vocab(merges), merges)
    assert tok.encode("a a") == [97, 32, 97]


@pytest.mark.parametrize("seed", range(8))
def test_random_merges_match_a_slow_encoder(impl, seed):
    """On random merge lists and texts the ids are exactly those of a slow rank-by-rank encoder."""
    rng = random.Random(seed)
    merges = random_merges(rng, rng.randint(1, 40))
    vocab = make_vocab(merges)
    tok = impl.BPETokenizer(vocab, merges)
    for _ in range(20):
        text = "".join(rng.choice(["a", "b", "c", " ", "é", "ab", "  "]) for _ in range(rng.randint(0, 30)))
        assert ints(tok.encode(text)) == slow_encode(text, merges, vocab)


def test_trained_merges_match_a_slow_encoder(impl):
    """With merges trained on English-like text, encoding agrees with the slow encoder and decodes back."""
    from bytes2logits.lessons.bpe import train_bpe

    text = "the quick brown fox jumps over the lazy dog; the dog sleeps.\n" * 20 + "naïve café 日本語"
    vocab, merges = train_bpe(text, 60)
    tok = impl.BPETokenizer(vocab, merges)
    sample = "the lazy fox jumps; café dogs sleep, 日本"
    assert tok.encode(sample) == slow_encode(sample, merges, vocab)
    assert tok.decode(tok.encode(sample)) == sample


def test_special_tokens(impl):
    """add_bos/add_eos wrap the ids; literal special text is ordinary bytes; decode skips specials."""
    specials = ["<bos>", "<eos>"]
    merges = [(b"h", b"i")]
    tok = impl.BPETokenizer(make_vocab(merges, specials), merges, specials)
    assert ints(tok.encode("hi", add_bos=True, add_eos=True)) == [0, 258, 1]
    ids = tok.encode("<bos>hi")
    assert 0 not in ids and 1 not in ids, "text typed by a user never becomes a special id"
    assert tok.decode([0, 258, 1]) == "hi", "decode skips special tokens"
    assert tok.decode(ids) == "<bos>hi"


def test_missing_special_is_an_error(impl):
    """add_bos without a <bos> special, or a special absent from the vocabulary, is a ValueError."""
    tok = impl.BPETokenizer(make_vocab([]), [])
    with pytest.raises(ValueError):
        tok.encode("x", add_bos=True)
    with pytest.raises(ValueError):
        impl.BPETokenizer(make_vocab([]), [], ["<bos>"])


def test_decode_errors_name_id_and_position(impl):
    """An unknown id is a ValueError and a non-int id a TypeError; both messages name the id and its position."""
    tok = impl.BPETokenizer(make_vocab([]), [])
    with pytest.raises(ValueError) as info:
        tok.decode([104, 105, 99999])
    assert "99999" in str(info.value) and "2" in str(info.value)
    with pytest.raises(TypeError) as info:
        tok.decode([104, "x"])
    assert "'x'" in str(info.value) and "1" in str(info.value)


def test_encode_rejects_bytes(impl):
    """encode takes a str; bytes are a TypeError."""
    tok = impl.BPETokenizer(make_vocab([]), [])
    with pytest.raises(TypeError):
        tok.encode(b"abc")


@given(st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=80))
def test_round_trip_any_text(impl, text):
    """decode(encode(text)) == text for any string, and the result is a list of ints."""
    from bytes2logits.lessons.bpe import train_bpe

    global _TRAINED
    try:
        tok = _TRAINED[impl]
    except (NameError, KeyError):
        vocab, merges = train_bpe("hello world, hello there! ça va? 日本語 😀😀 \n\n  " * 5, 40)
        tok = impl.BPETokenizer(vocab, merges)
        _TRAINED = {impl: tok}
    assert tok.decode(ints(tok.encode(text))) == text
