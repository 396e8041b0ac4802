"""Tests of the byte-level BPE reference (bytes2logits.lessons.bpe): training, encoding, the closed codec."""

from __future__ import annotations

import importlib.util
import random
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from bytes2logits.lessons.bpe import (
    _BATCH_MIN_PIECES,
    BPETokenizer,
    ByteLevelCodec,
    FastBPETokenizer,
    _BatchMerger,
    build_vocab,
    bytes_to_unicode,
    pretokenize,
    token_to_printable,
    train_bpe,
)
from bytes2logits.text import BYTE_TO_CHAR

# The chapter's worked example and the lab corpus (first merge ('a','t') with 8 beats ('t','h') with 6).
WORKED_EXAMPLE = " ".join(["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3)
LAB_CORPUS_AT_BEATS_TH = "the the the the the the cat cat cat sat sat mat rat ate"


def _lab03_suite():
    """The lab 03 hidden suite as a module: its independent slow trainer is the oracle here too."""
    path = Path(__file__).resolve().parent / "hidden" / "lab03_bpe_training" / "test_train_bpe.py"
    spec = importlib.util.spec_from_file_location("_lab03_train_bpe_suite", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# An independent trainer: recount every pair after every merge, words as tuples of bytes.
naive_train = _lab03_suite().slow_train


# ---------------------------------------------------------------- worked examples


def test_worked_example_first_merges_are_es_est_lo_low():
    vocab, merges = train_bpe(WORKED_EXAMPLE, 4)
    assert merges == [(b"e", b"s"), (b"es", b"t"), (b"l", b"o"), (b"lo", b"w")]
    assert [vocab[256 + i] for i in range(4)] == [b"es", b"est", b"lo", b"low"]


def test_worked_example_full_merge_list():
    # 'es' and 'st' tie at 9 (newest x6 + widest x3); b'es' < b'st' wins. Spaces are pieces of their own.
    _, merges = train_bpe(WORKED_EXAMPLE, 100)
    assert merges == [(b"e", b"s"), (b"es", b"t"), (b"l", b"o"), (b"lo", b"w"), (b"e", b"w"),
                      (b"ew", b"est"), (b"n", b"ewest"), (b"d", b"est"), (b"i", b"dest"), (b"w", b"idest"),
                      (b"e", b"r"), (b"low", b"er")]
    assert merges == naive_train(WORKED_EXAMPLE, 100)


def test_lab_corpus_first_merge_is_at_with_count_8_not_th_with_6():
    pieces = Counter(pretokenize(LAB_CORPUS_AT_BEATS_TH))
    at = sum(f * sum(1 for a, b in zip(p, p[1:]) if a + b == "at") for p, f in pieces.items())
    th = sum(f * sum(1 for a, b in zip(p, p[1:]) if a + b == "th") for p, f in pieces.items())
    assert (at, th) == (8, 6)
    _, merges = train_bpe(LAB_CORPUS_AT_BEATS_TH, 1)
    assert merges == [(b"a", b"t")]


def test_vocab_layout_specials_then_bytes_then_merges():
    vocab, merges = train_bpe(WORKED_EXAMPLE, 3, special_tokens=["<bos>", "<eos>"])
    assert vocab[0] == b"<bos>" and vocab[1] == b"<eos>"
    assert [vocab[2 + b] for b in range(256)] == [bytes([b]) for b in range(256)]
    assert [vocab[258 + i] for i in range(3)] == [a + b for a, b in merges]
    assert len(vocab) == 261


def test_stops_early_when_no_pair_is_left():
    vocab, merges = train_bpe("ab ab a", 50)
    assert merges == [(b"a", b"b")]
    assert len(vocab) == 257
    assert train_bpe("", 5) == (build_vocab([]), [])


# ---------------------------------------------------------------- against the naive trainer


def _random_corpus(seed: int, n_words: int = 300) -> str:
    rng = random.Random(seed)
    alphabet = ["a", "b", "c", "ab", "é", "ü", "字", "🦩", "\xff", "~", "A"]
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(40)]
    seps = [" ", "  ", "\n", "\t "]
    return "".join(rng.choice(words) + rng.choice(seps) for _ in range(n_words))


@pytest.mark.parametrize("seed", range(12))
def test_matches_naive_trainer_on_generated_corpora(seed):
    text = _random_corpus(seed)
    assert train_bpe(text, 60)[1] == naive_train(text, 60), "merge list differs from the naive trainer"


# ---------------------------------------------------------------- ties


def test_tie_breaks_on_raw_bytes_not_printable_remap():
    # x!, !! and !x all occur 3 times; raw bytes: b'!' (0x21) < b'x' (0x78), so ('!', '!') wins.
    assert train_bpe("x!!x x!!x x!!x", 1)[1] == [(b"!", b"!")]
    # DEL DEL (0x7f 0x7f) vs 'ÿ' = UTF-8 c3 bf, once each. Raw: 0x7f < 0xc3, so DEL DEL wins.
    # GPT-2's printable map shows 0x7f as 'ġ' (U+0121) and 0xc3 as 'Ã' (U+00C3): it would pick c3 bf.
    text = "\x7f\x7f \xff"
    _, merges = train_bpe(text, 2)
    assert merges[0] == (b"\x7f", b"\x7f")
    printable_first = min([(b"\x7f", b"\x7f"), (b"\xc3", b"\xbf")],
                          key=lambda p: (token_to_printable(p[0]), token_to_printable(p[1])))
    assert printable_first == (b"\xc3", b"\xbf"), "the example must separate raw order from printable order"
    assert merges == naive_train(text, 2)


def test_tie_between_space_pair_and_ascii_pair():
    # Two spaces (0x20 0x20) vs '!!' (0x21 0x21): equal counts; raw bytes pick the spaces, while the
    # printable remap ('ĠĠ' vs '!!') would pick '!!'.
    text = "!! !!" + "  x" + "  x"  # '!!' twice, '  ' twice
    _, merges = train_bpe(text, 1)
    assert merges == [(b" ", b" ")]
    assert token_to_printable(b"  ") > token_to_printable(b"!!")


def test_tie_independent_of_insertion_order():
    # 'zz' is seen first, 'aa' later; both occur twice: 'aa' must win.
    for text in ["zz zz aa aa", "aa aa zz zz", "zz aa zz aa"]:
        assert train_bpe(text, 1)[1] == [(b"a", b"a")]


def test_tie_compares_left_then_right():
    # ('a','bc') vs ('ab','c') cannot both exist; use ('a','z') vs ('b','a'): left byte decides.
    assert train_bpe("az ba az ba", 1)[1] == [(b"a", b"z")]
    # Same left, right decides: ('a','b') < ('a','c').
    assert train_bpe("ac ab ac ab", 1)[1] == [(b"a", b"b")]


@pytest.mark.parametrize("seed", range(4))
def test_order_independence_shuffled_lines(seed):
    lines = _random_corpus(seed + 100, 400).split("\n")
    rng = random.Random(seed)
    shuffled = lines[:]
    rng.shuffle(shuffled)
    a = train_bpe("\n".join(lines), 80)
    b = train_bpe("\n".join(reversed(lines)), 80)
    c = train_bpe("\n".join(shuffled), 80)
    assert a == b == c


# ---------------------------------------------------------------- encode / decode


@pytest.fixture(scope="module")
def trained():
    text = _random_corpus(7, 2000) + " " + WORKED_EXAMPLE + " <bos> <eos>"
    vocab, merges = train_bpe(text, 200, special_tokens=["<bos>", "<eos>"])
    return vocab, merges


def test_encode_replays_merges_by_rank():
    vocab, merges = train_bpe(WORKED_EXAMPLE, 4)
    tok = BPETokenizer(vocab, merges)
    ids = tok.encode("lowest")
    assert [vocab[i] for i in ids] == [b"low", b"est"]
    assert [vocab[i] for i in tok.encode("newer")] == [b"n", b"e", b"w", b"e", b"r"]


def test_encode_leftmost_on_equal_rank():
    vocab, merges = train_bpe("aa", 1)
    tok = BPETokenizer(vocab, merges)
    assert [vocab[i] for i in tok.encode("aaa")] == [b"aa", b"a"]


def test_bos_eos(trained):
    vocab, merges = trained
    tok = BPETokenizer(vocab, merges, ["<bos>", "<eos>"])
    ids = tok.encode("ab", add_bos=True, add_eos=True)
    assert ids[0] == 0 and ids[-1] == 1
    assert tok.decode(ids) == "ab"
    plain = BPETokenizer(vocab, merges, ["<bos>", "<eos>"], bos="<eos>")
    assert plain.encode("a", add_bos=True)[0] == 1
    with pytest.raises(ValueError, match="'<s>'"):
        BPETokenizer(vocab, merges, ["<bos>", "<eos>"], bos="<s>").encode("a", add_bos=True)


def test_specials_never_minted_from_user_text(trained):
    vocab, merges = trained
    for cls in (BPETokenizer, ByteLevelCodec):
        tok = cls(vocab, merges, ["<bos>", "<eos>"])
        ids = tok.encode("hi <bos> there<eos>")
        assert 0 not in ids and 1 not in ids
        assert tok.decode(ids) == "hi <bos> there<eos>"


def test_training_never_learns_a_special_token():
    text = "<eos> " * 50 + "<eos><eos>"
    vocab, _ = train_bpe(text, 50, special_tokens=["<eos>"])
    assert list(vocab.values()).count(b"<eos>") == 1


def test_encode_trusted_places_specials(trained):
    vocab, merges = trained
    codec = ByteLevelCodec(vocab, merges, ["<bos>", "<eos>"])
    ids = codec.encode_trusted("<bos>hi<eos>")
    assert ids[0] == 0 and ids[-1] == 1 and codec.decode(ids) == "hi"


def test_decode_errors_name_id_and_position(trained):
    vocab, merges = trained
    tok = BPETokenizer(vocab, merges, ["<bos>", "<eos>"])
    with pytest.raises(ValueError, match=r"id 99999 at position 2"):
        tok.decode([5, 6, 99999])
    with pytest.raises(ValueError, match=r"id -1 at position 0"):
        tok.decode([-1])
    with pytest.raises(TypeError, match=r"'7' at position 1"):
        tok.decode([5, "7"])


def test_cache_gives_same_ids(trained):
    vocab, merges = trained
    tok = BPETokenizer(vocab, merges)
    text = _random_corpus(3, 100)
    assert tok.encode(text) == tok.encode(text) == BPETokenizer(vocab, merges).encode(text)


@settings(derandomize=True, max_examples=200, deadline=None)
@given(st.text())
def test_round_trip_bpe_tokenizer(text):
    vocab, merges = _SMALL
    assert BPETokenizer(vocab, merges).decode(BPETokenizer(vocab, merges).encode(text)) == text


_SMALL = train_bpe(_random_corpus(11, 500) + " hello world  \n\n 字字 🦩🦩", 150, special_tokens=["<bos>", "<eos>"])
_CODEC = ByteLevelCodec(*_SMALL, special_tokens=["<bos>", "<eos>"])


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=("Cs",))) | st.sampled_from(
    ["👩‍👩‍👧‍👦", "字符 テキスト", "   \t\n\n  ", "café naïve", "<bos>", "<eos><bos>", ""]))
def test_round_trip_byte_level_codec(text):
    ids = _CODEC.encode(text)
    assert _CODEC.decode(ids) == text
    assert 0 not in ids and 1 not in ids


def test_byte_fallback_for_unseen_unicode():
    vocab, merges = train_bpe("abc abc", 2)
    codec = ByteLevelCodec(vocab, merges)
    assert len(codec.encode("🦩")) == len("🦩".encode())


# ---------------------------------------------------------------- the batched (NumPy) encoder


def _piece_by_piece(tok: BPETokenizer, pieces) -> dict:
    return {p: tok._encode_piece(p) for p in pieces}


def test_batch_encoder_matches_piece_by_piece_on_a_novel():
    from bytes2logits import assets

    text = assets.path("botchan").read_text(encoding="utf-8")
    vocab, merges = train_bpe(text, 1500)
    tok = BPETokenizer(vocab, merges)
    pieces = sorted(set(pretokenize(text))) + ["a" * 37, " " * 64, "\n" * 9, "eeeeeee", "ﬁ🦩👩‍👩‍👧‍👦字字字"]
    batch = _BatchMerger.build(tok.merge_ranks, tok.token_to_id)
    assert batch.all_at_once  # a trained list: every occurrence of the lowest pair merges in one round
    assert batch.encode(pieces) == _piece_by_piece(tok, pieces)
    # FastBPETokenizer.encode takes the batched path on long texts and must give what BPETokenizer gives.
    assert len(set(pretokenize(text))) >= _BATCH_MIN_PIECES
    with_bos = {**vocab, len(vocab): b"<bos>"}
    fast = FastBPETokenizer(with_bos, merges, ["<bos>"], bos="<bos>")
    ids = fast.encode(text, add_bos=True)
    assert fast._batch.all_at_once and len(fast._cache) == len(set(pretokenize(text)))
    assert ids[0] == len(vocab) and ids[1:] == BPETokenizer(vocab, merges).encode(text)
    assert fast.decode(ids) == text


@settings(derandomize=True, max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="ab \n\u00e9", min_size=1, max_size=12), min_size=1, max_size=40),
       st.integers(1, 40), st.booleans())
def test_batch_encoder_matches_piece_by_piece_on_small_alphabets(words, num_merges, one_per_round):
    # A tiny alphabet makes ties, overlapping runs ("aaaa") and merges of merges common.
    corpus = " ".join(words)
    vocab, merges = train_bpe(corpus, num_merges)
    assume(merges)  # with nothing to merge there is no batched path
    tok = BPETokenizer(vocab, merges)
    batch = _BatchMerger.build(tok.merge_ranks, tok.token_to_id)
    batch.all_at_once = batch.all_at_once and not one_per_round
    pieces = sorted(set(pretokenize(corpus))) + ["aaaaaaa", "abababab", "ba" * 5 + "a"]
    assert batch.encode(pieces) == _piece_by_piece(tok, pieces)


def test_batch_encoder_one_merge_per_round_when_a_merge_makes_a_lower_ranked_pair():
    # ab+c (rank 0) is listed before a+b (rank 1): merging a+b creates the pair (ab, c) of lower rank.
    # Merging every (a, b) in one round would then skip the (ab, c) merge between them.
    merges = [(b"ab", b"c"), (b"a", b"b"), (b"c", b"a")]
    vocab = build_vocab(merges)
    tok = BPETokenizer(vocab, merges)
    batch = _BatchMerger.build(tok.merge_ranks, tok.token_to_id)
    assert not batch.all_at_once
    pieces = ["abcab", "abab", "cabc", "abcabcab"]
    assert batch.encode(pieces) == _piece_by_piece(tok, pieces)
    assert [vocab[i] for i in batch.encode(["abcab"])["abcab"]] == [b"abc", b"ab"]
    # Two merges making the same bytes, with a merge using them in between, also break the condition.
    merges = [(b"b", b"c"), (b"a", b"bc"), (b"abc", b"d"), (b"a", b"b"), (b"ab", b"c")]
    tok = BPETokenizer(build_vocab(merges), merges)
    assert not _BatchMerger.build(tok.merge_ranks, tok.token_to_id).all_at_once


def test_batch_encoder_error_and_odd_ids_fall_back_to_piece_by_piece():
    vocab, merges = train_bpe("low lower lowest " * 10, 5)
    # A merge whose token is missing from the vocabulary: encoding names it, batched or not.
    broken = {i: t for i, t in vocab.items() if t != merges[-1][0] + merges[-1][1]}
    tok = FastBPETokenizer(broken, merges)
    text = " ".join(f"low{i}" for i in range(2 * _BATCH_MIN_PIECES)) + " lowest"
    with pytest.raises(ValueError, match="has no id in the vocabulary"):
        tok.encode(text)
    assert tok._batch is False
    # Huge, sparse ids still encode (piece by piece) to the same tokens.
    far = {i * 10**12: t for i, t in vocab.items()}
    fast = FastBPETokenizer(far, merges)
    assert [far[i] for i in fast.encode(text)] == [vocab[i] for i in BPETokenizer(vocab, merges).encode(text)]
    assert fast._batch is False


# ---------------------------------------------------------------- codec validation


def test_codec_rejects_missing_byte():
    vocab, merges = train_bpe("ab ab", 1)
    del vocab[ord("q")]
    with pytest.raises(ValueError, match="0x71"):
        ByteLevelCodec(vocab, merges)


def test_codec_rejects_missing_special():
    vocab, merges = train_bpe("ab ab", 1)
    with pytest.raises(ValueError, match="<eos>"):
        ByteLevelCodec(vocab, merges, ["<eos>"])


def test_codec_rejects_duplicate_ids():
    vocab, merges = train_bpe("ab ab", 1, special_tokens=["<bos>"])
    vocab[9999] = b"<bos>"
    with pytest.raises(ValueError, match=r"special token '<bos>' has 2 ids \[0, 9999\]"):
        ByteLevelCodec(vocab, merges, ["<bos>"])
    vocab, merges = train_bpe("ab ab", 1)
    vocab[9999] = b"a"
    with pytest.raises(ValueError, match=r"b'a' has 2 ids \[97, 9999\]"):
        ByteLevelCodec(vocab, merges)


_SPELL_BOS = [(b"<", b"b"), (b"o", b"s"), (b"<b", b"os"), (b"<bos", b">")]


def test_a_merge_that_spells_a_special_is_an_ordinary_token():
    # Specials and ordinary tokens are separate namespaces (as in tiktoken): the merge <bos + > gets its own id.
    specials = ["<bos>", "<eos>"]
    vocab = build_vocab(_SPELL_BOS, specials)
    assert [i for i, t in vocab.items() if t == b"<bos>"] == [0, 261] and len(vocab) == 262
    for cls in (BPETokenizer, FastBPETokenizer, ByteLevelCodec):
        tok = cls(vocab, _SPELL_BOS, specials)
        assert tok.encode("<bos>") == [261], cls.__name__  # typed text: the ordinary token, never 0, no error
        assert tok.encode("<bos>", add_bos=True) == [0, 261]
        assert tok.decode(tok.encode("hi <bos>")) == "hi <bos>"
    long = " ".join(["<bos>"] + [f"w{i}" for i in range(2 * _BATCH_MIN_PIECES)])  # the NumPy batch path
    assert FastBPETokenizer(vocab, _SPELL_BOS, specials).encode(long) == BPETokenizer(vocab, _SPELL_BOS,
                                                                                      specials).encode(long)
    # The trainer never learns such a merge (it cuts special text out), so its vocabularies are unchanged.
    trained, merges = train_bpe("<bos> <b os> " * 20, 10, special_tokens=["<bos>"])
    assert list(trained.values()).count(b"<bos>") == 1 and trained == build_vocab(merges, ["<bos>"])


def test_codec_allows_a_special_second_id_only_when_a_merge_makes_it():
    specials = ["<bos>"]
    vocab = build_vocab(_SPELL_BOS, specials)
    ByteLevelCodec(vocab, _SPELL_BOS, specials)  # 0 is the special, 260 the merge's ordinary token
    with pytest.raises(ValueError, match=r"special token '<bos>' has 3 ids \[0, 260, 9999\]"):
        ByteLevelCodec({**vocab, 9999: b"<bos>"}, _SPELL_BOS, specials)
    with pytest.raises(ValueError, match=r"special token '<bos>' has 2 ids \[0, 260\]"):
        ByteLevelCodec(vocab, _SPELL_BOS[:3], specials)  # no merge makes <bos> any more


def test_encode_by_rank_not_list_order():
    # (ab, c) has rank 0 but can only apply once the rank-1 merge a+b has made ab: "abc" is one token.
    merges = [(b"ab", b"c"), (b"a", b"b")]
    vocab = build_vocab(merges)
    tok = BPETokenizer(vocab, merges)
    assert [vocab[i] for i in tok.encode("abc")] == [b"abc"]
    assert [vocab[i] for i in tok.encode("ab c")] == [b"ab", b" ", b"c"]


def test_codec_rejects_wrong_types():
    vocab, merges = train_bpe("ab ab", 1)
    vocab[True] = vocab.pop(1)  # True == 1 but is not an int id
    with pytest.raises(ValueError, match="bool"):
        ByteLevelCodec(vocab, merges)
    vocab, merges = train_bpe("ab ab", 1)
    vocab[97] = "a"
    with pytest.raises(ValueError, match="str"):
        ByteLevelCodec(vocab, merges)


def test_bad_special_tokens():
    with pytest.raises(ValueError, match="twice"):
        train_bpe("ab", 1, special_tokens=["<x>", "<x>"])
    with pytest.raises(ValueError, match="collide"):
        train_bpe("ab", 1, special_tokens=["a"])
    with pytest.raises(TypeError):
        train_bpe("ab", 1, special_tokens="<x>")


def test_bytes_to_unicode_is_gpt2_map():
    # HF tokenizers' ByteLevel pre-tokenizer applies GPT-2's map; feed it every byte that valid UTF-8 has.
    from tokenizers import pre_tokenizers

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    table = bytes_to_unicode()
    assert set(table.values()) == set(pre_tokenizers.ByteLevel.alphabet())
    seen = set()
    for c in map(chr, [*range(0x80), *range(0x80, 0x800, 7), 0x7FF, *range(0x800, 0x10000, 61), 0xFFFF,
                       *range(0x10000, 0x110000, 4099), 0x10FFFF]):
        if 0xD800 <= ord(c) < 0xE000:
            continue
        (shown, _), = byte_level.pre_tokenize_str(c)
        assert shown == "".join(table[b] for b in c.encode()), c
        seen.update(c.encode())
    assert len(seen) == 256 - 13  # C0, C1 and F5..FF never occur in UTF-8: printable, so they map to themselves
    assert all(table[b] == chr(b) for b in set(range(256)) - seen)
    assert table == BYTE_TO_CHAR and table is not bytes_to_unicode()  # a fresh dict: callers may mutate it
    assert table[0x20] == "Ġ" and table[0x0A] == "Ċ" and table[ord("a")] == "a"
    assert len(set(table.values())) == 256
    assert token_to_printable(b" the") == "Ġthe"


# ---------------------------------------------------------------- speed (ratio, never absolute)


def test_incremental_trainer_much_faster_than_naive():
    text = _random_corpus(5, 20000)
    start = time.perf_counter()
    ours = train_bpe(text, 150)[1]
    t_ours = time.perf_counter() - start
    start = time.perf_counter()
    naive = naive_train(text, 150)
    t_naive = time.perf_counter() - start
    assert ours == naive
    assert t_ours * 3 < t_naive, f"train_bpe {t_ours:.3f}s vs naive {t_naive:.3f}s: not incremental?"
