"""Hidden suite, lab 11 task 3: bpe_from_spec, the BPE model section of tokenizer.json."""

import json
import random

import pytest
from tokenizers import Tokenizer as HFTokenizer

from bytes2logits import assets, errors

VOCAB = {"a": 0, "b": 1, "ab": 2, "abb": 3, "a b": 4, "c": 5}


def spec(**fields):
    return {"type": "BPE", "vocab": dict(VOCAB), "merges": ["a b", ["ab", "b"]], **fields}


@pytest.fixture(scope="module")
def qwen3():
    data = json.loads(assets.path("qwen3-tokenizer").read_text(encoding="utf-8"))
    hf = HFTokenizer.from_file(str(assets.path("qwen3-tokenizer")))
    return data, hf


def hf_ids(data, text):
    """Hugging Face's ids for one pre-tokenized piece under the model section ``data``."""
    merges = [m.split(" ") if isinstance(m, str) else m for m in data["merges"]]  # HF takes one spelling per file
    hf = HFTokenizer.from_str(json.dumps({"version": "1.0", "model": dict(data, merges=merges)}))
    return [t.id for t in hf.model.tokenize(text)]


@pytest.mark.weight(3)
def test_small_model(impl):
    """Both merge spellings, ranks by position, the vocabulary in id order, no unknown token."""
    model, tokens, unk = impl.bpe_from_spec(spec())
    assert tokens == ["a", "b", "ab", "abb", "a b", "c"], "tokens: the vocabulary as a list indexed by id"
    assert unk is None, "without unk_token the unknown id is None"
    for text in ["abba", "cab", "ababb"]:
        got = model.tokenize(text)
        assert got == hf_ids(spec(), text), (
            f"merges ['a b', ['ab', 'b']]: {text!r} gives the ids {got!r} (rank = position in the list)")


def test_a_merge_listed_twice_keeps_its_later_rank(impl):
    """As Hugging Face does: a merge listed twice keeps its later rank (so 'b c' now comes first in 'abc')."""
    vocab = {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4}
    data = {"type": "BPE", "vocab": vocab, "merges": ["a b", "b c", "a b"]}
    model, _, _ = impl.bpe_from_spec(data)
    got = model.tokenize("abc")
    assert got == hf_ids(data, "abc"), f"merges ['a b', 'b c', 'a b'] on 'abc': your ids are {got!r}"


def test_tokens_with_a_space_use_another_separator(impl):
    """A merge whose token holds a space (possible in the list form) cannot be keyed with ' ' in between."""
    vocab = {"a": 0, " ": 1, "a ": 2, "a a": 3}
    model, _, _ = impl.bpe_from_spec({"type": "BPE", "vocab": vocab, "merges": [["a", " "], ["a ", "a"]]})
    assert model.sep != " ", "merges [['a', ' '], ['a ', 'a']]: with sep ' ' the key 'a  a' is ambiguous"
    assert model.tokenize("a a") == [3], "merges [['a', ' '], ['a ', 'a']] must turn 'a a' into the token 'a a'"


UNK_VOCAB = dict(VOCAB, **{"<unk>": 6})


def test_unk_token(impl):
    """unk_token names the unknown token: its id is returned, and the model uses it for unknown characters."""
    model, _, unk = impl.bpe_from_spec(spec(vocab=UNK_VOCAB, unk_token="<unk>"))
    assert unk == 6, "unk_token '<unk>' has the id 6: bpe_from_spec must return it"
    got = model.tokenize("xab")
    assert got == hf_ids(spec(vocab=UNK_VOCAB, unk_token="<unk>"), "xab"), f"'xab' with unk_token '<unk>': {got!r}"


def test_fuse_unk(impl):
    """fuse_unk reaches the model: with it, a run of unknown characters is one unknown token, without it one each."""
    for fuse in (True, False):
        data = spec(vocab=UNK_VOCAB, unk_token="<unk>", fuse_unk=fuse)
        model, _, _ = impl.bpe_from_spec(data)
        got = model.tokenize("xyab")
        assert got == hf_ids(data, "xyab"), f"'xyab' with fuse_unk={fuse}: your ids are {got!r}"


def test_byte_fallback(impl):
    """byte_fallback reaches the model: an unknown character becomes its <0xNN> byte tokens, not the unknown one."""
    vocab = dict(UNK_VOCAB, **{"<0x78>": 7, "<0xC3>": 8, "<0xA9>": 9})
    for fallback in (True, False):
        data = spec(vocab=vocab, unk_token="<unk>", byte_fallback=fallback)
        model, _, _ = impl.bpe_from_spec(data)
        for text in ["xab", "é"]:
            got = model.tokenize(text)
            assert got == hf_ids(data, text), f"{text!r} with byte_fallback={fallback}: your ids are {got!r}"


def test_ignore_merges(impl):
    """ignore_merges reaches the model: with it, a piece that is a vocabulary entry is one token, merges or not."""
    vocab = {"a": 0, "b": 1, "ab": 2, "ba": 3, "bab": 4}
    for ignore in (True, False):
        data = {"type": "BPE", "vocab": vocab, "merges": ["a b"], "ignore_merges": ignore}
        model, _, _ = impl.bpe_from_spec(data)
        for text in ["ba", "bab"]:
            got = model.tokenize(text)
            assert got == hf_ids(data, text), f"{text!r} (no merge makes it), ignore_merges={ignore}: ids {got!r}"


UNSUPPORTED = [("dropout", 0.1), ("continuing_subword_prefix", "##"), ("end_of_word_suffix", "</w>"),
               ("unk_token", "<unk>")]
MISTYPED = [("fuse_unk", "yes"), ("byte_fallback", 1), ("ignore_merges", "true"), ("merges", "a b")]


def _refusal(impl, data, path=None):
    """The message of the TokenizerError bpe_from_spec raises on ``data`` (None if it raises nothing)."""
    try:
        impl.bpe_from_spec(data) if path is None else impl.bpe_from_spec(data, path)
    except errors.TokenizerError as e:
        return str(e)
    return None


def refused(impl, field, value, data):
    message = _refusal(impl, data)
    assert message is not None, f"{field} = {value!r} must be refused with a TokenizerError"
    assert f"model.{field}" in message, f"the error for {field} = {value!r} must name model.{field}"


@pytest.mark.weight(3)
def test_unsupported_settings_are_refused(impl):
    """What the model cannot honour (dropout, a subword prefix or suffix, an absent unk_token): refused, by field."""
    for field, value in UNSUPPORTED:
        refused(impl, field, value, spec(**{field: value}))


@pytest.mark.weight(0.5)
def test_flags_must_have_their_type(impl):
    """fuse_unk, byte_fallback and ignore_merges must be booleans, merges a list: anything else is refused."""
    for field, value in MISTYPED:
        refused(impl, field, value, spec(**{field: value}))


def test_malformed_merges_name_their_index(impl):
    """A merge that is neither 'left right' nor a list of exactly two strings is refused, naming model.merges[i]."""
    for merge in ["a b c", ["a"], ["a", "b", "c"], ["a", 5], 3]:
        message = _refusal(impl, spec(merges=["a b", ["ab", "b"], merge]))
        assert message is not None, f"the merge {merge!r} must be refused with a TokenizerError"
        assert "model.merges[2]" in message, f"the error for the merge {merge!r} must name model.merges[2]"


def test_merges_outside_the_vocabulary_name_their_index(impl):
    """Both halves of a merge AND their join must be vocabulary entries; else it is refused, naming model.merges[i]."""
    for merge, missing in [("a x", "x"), ("a c", "ac"), ("ab ab", "abab")]:
        message = _refusal(impl, spec(merges=["a b", ["ab", "b"], merge]))
        assert message is not None, (
            f"the merge {merge!r} must be refused with a TokenizerError: {missing!r} is not in the vocabulary")
        assert "model.merges[2]" in message, f"the error for the merge {merge!r} must name model.merges[2]"


def test_a_string_merge_has_exactly_one_space(impl):
    """A merge string is two tokens separated by ONE space, as Hugging Face reads it: 'a  b' is refused."""
    vocab = {"a": 0, "b": 1, " b": 2, "ab": 3, "a b": 4}
    for merge in ["a  b", " a b", "a b "]:
        message = _refusal(impl, {"type": "BPE", "vocab": vocab, "merges": [merge]})
        assert message is not None and "model.merges[0]" in message, (
            f"the merge {merge!r} must be refused with a TokenizerError naming model.merges[0]")


@pytest.mark.weight(0.5)
def test_error_paths_use_the_given_path(impl):
    """The path argument prefixes every error (a model section inside something else)."""
    message = _refusal(impl, spec(dropout=0.5), "outer.model")
    assert message is not None, "dropout = 0.5 must be refused"
    assert "outer.model.dropout" in message, "with path='outer.model' the error must name outer.model.dropout"


@pytest.mark.weight(3)
def test_qwen3_ids_equal_hf(impl, qwen3):
    """Qwen3's real model section: every piece of 300 Botchan lines gets Hugging Face's ids."""
    data, hf = qwen3
    model, tokens, unk = impl.bpe_from_spec(data["model"])
    assert len(tokens) == len(data["model"]["vocab"]) and unk is None
    rng = random.Random(3)
    lines = rng.sample(assets.botchan_text().splitlines(), 300) + ["naïve café 中文 2024 😀"]
    pieces = sorted({p for line in lines
                     for p, _ in hf.pre_tokenizer.pre_tokenize_str(hf.normalizer.normalize_str(line))})
    for piece in pieces:
        got = model.tokenize(piece)
        assert got == [t.id for t in hf.model.tokenize(piece)], (
            f"Qwen3's merges give other ids than Hugging Face for the piece {piece!r}: yours are {got!r}")
