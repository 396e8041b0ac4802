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
    assert model.tokenize("abba") == [3, 0], "'a b' (rank 0) then 'ab b' (rank 1): abb + a"
    assert model.tokenize("cab") == [5, 2]


def test_a_merge_listed_twice_keeps_its_later_rank(impl):
    """As Hugging Face does: a merge listed twice keeps its later rank (so 'b c' now comes first in 'abc')."""
    vocab = {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4}
    data = {"type": "BPE", "vocab": vocab, "merges": ["a b", "b c", "a b"]}
    model, _, _ = impl.bpe_from_spec(data)
    hf = HFTokenizer.from_str(json.dumps({"version": "1.0", "model": data}))
    assert model.tokenize("abc") == [t.id for t in hf.model.tokenize("abc")], "the later rank of 'a b' counts"


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


REFUSED = [("dropout", 0.1), ("continuing_subword_prefix", "##"), ("end_of_word_suffix", "</w>"),
           ("unk_token", "<unk>"), ("fuse_unk", "yes"), ("byte_fallback", 1), ("merges", "a b")]


def _refusal(impl, data):
    """The message of the TokenizerError bpe_from_spec raises on ``data`` (None if it raises nothing)."""
    try:
        impl.bpe_from_spec(data)
    except errors.TokenizerError as e:
        return str(e)
    return None


def test_refusals_name_the_field(impl):
    """Unsupported settings and wrongly typed flags raise TokenizerError naming model.<field>."""
    for field, value in REFUSED:
        message = _refusal(impl, spec(**{field: value}))
        assert message is not None, f"{field} = {value!r} must be refused with a TokenizerError"
        assert f"model.{field}" in message, f"the error for {field} = {value!r} must name model.{field}"


def test_bad_merges_name_their_index(impl):
    """A merge that is not two vocabulary tokens whose join is in the vocabulary is refused, naming its index."""
    for merge in ["a c", "a b c", ["a"], "ab ab", 3]:
        message = _refusal(impl, spec(merges=["a b", ["ab", "b"], merge]))
        assert message is not None, f"the merge {merge!r} must be refused with a TokenizerError"
        assert "model.merges[2]" in message, f"the error for the merge {merge!r} must name model.merges[2]"


def test_error_paths_use_the_given_path(impl):
    """The path argument prefixes every error (a model section inside something else)."""
    try:
        impl.bpe_from_spec(spec(dropout=0.5), "outer.model")
    except errors.TokenizerError as e:
        assert "outer.model.dropout" in str(e), "with path='outer.model' the error names outer.model.dropout"
    else:
        raise AssertionError("dropout = 0.5 must be refused")


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
        assert model.tokenize(piece) == [t.id for t in hf.model.tokenize(piece)], (
            f"Qwen3's merges give other ids than Hugging Face for the piece {piece!r}")
