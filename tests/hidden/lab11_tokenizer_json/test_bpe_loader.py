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


def test_small_model(impl):
    """Both merge spellings, ranks by position, the vocabulary in id order, no unknown token."""
    model, tokens, unk = impl.bpe_from_spec(spec())
    assert tokens == ["a", "b", "ab", "abb", "a b", "c"] and unk is None
    assert model.tokenize("abba") == [3, 0]
    assert model.tokenize("cab") == [5, 2]


def test_first_of_two_equal_merges_wins(impl):
    """A merge listed twice keeps its first (lowest) rank."""
    ranks = impl.bpe_from_spec(spec(merges=["a b", "ab b", "a b"]))[0].ranks
    assert ranks == {"a b": 0, "ab b": 1}


def test_tokens_with_a_space_use_another_separator(impl):
    """A merge whose token holds a space (possible in the list form) cannot be keyed with ' ' in between."""
    vocab = {"a": 0, " ": 1, "a ": 2, "a a": 3}
    model, _, _ = impl.bpe_from_spec({"type": "BPE", "vocab": vocab, "merges": [["a", " "], ["a ", "a"]]})
    assert model.sep != " " and model.tokenize("a a") == [3]


def test_unk_and_flags(impl):
    """unk_token gives unk_id; fuse_unk, byte_fallback and ignore_merges reach the model."""
    vocab = dict(VOCAB, **{"<unk>": 6})
    model, _, unk = impl.bpe_from_spec(spec(vocab=vocab, unk_token="<unk>", fuse_unk=True, ignore_merges=True))
    assert unk == 6 and model.unk_id == 6 and model.fuse_unk is True and model.ignore_merges is True
    assert model.tokenize("xyab") == [6, 2], "unknown characters fused into one <unk>"


@pytest.mark.parametrize("field, value", [
    ("dropout", 0.1), ("continuing_subword_prefix", "##"), ("end_of_word_suffix", "</w>"),
    ("unk_token", "<unk>"), ("fuse_unk", "yes"), ("byte_fallback", 1), ("merges", "a b"),
])
def test_refusals_name_the_field(impl, field, value):
    """Each unsupported or malformed setting raises errors.TokenizerError naming model.<field>."""
    with pytest.raises(errors.TokenizerError, match=rf"model\.{field}"):
        impl.bpe_from_spec(spec(**{field: value}))


@pytest.mark.parametrize("merge", ["a c", "a b c", ["a"], "ab ab", 3])
def test_bad_merges_name_their_index(impl, merge):
    """A merge that is not two vocabulary tokens whose join is in the vocabulary is refused, by index."""
    with pytest.raises(errors.TokenizerError, match=r"model\.merges\[2\]"):
        impl.bpe_from_spec(spec(merges=["a b", ["ab", "b"], merge]))


def test_error_paths_use_the_given_path(impl):
    """The path argument prefixes every error (a model section inside something else)."""
    with pytest.raises(errors.TokenizerError, match=r"outer\.model\.dropout"):
        impl.bpe_from_spec(spec(dropout=0.5), "outer.model")


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
        assert model.tokenize(piece) == [t.id for t in hf.model.tokenize(piece)], piece
