"""Hidden suite, lab 14 task 1: load_merges, the merge ranks of a byte-level BPE vocabulary."""

import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

from bytes2logits import assets, errors
from bytes2logits.engine import gguf
from bytes2logits.text import BYTE_TO_CHAR

support = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("lab14_support.py"))))


def first_ranks(merges):
    """llama.cpp's table: each merge's first position in the list."""
    ranks = {}
    for i, m in enumerate(merges):
        ranks.setdefault(m, i)
    return ranks


@pytest.mark.parametrize("source", ["smollm2", "gpt-2"])
def test_ranks_of_a_real_vocabulary(impl, source):
    """On a real vocabulary (SmolLM2, GPT-2) the table is a dict holding every merge with its position as rank."""
    path = assets.path("smollm2") if source == "smollm2" else support.vocab(source)
    md = gguf.GGUFReader(path).metadata
    merges = md["tokenizer.ggml.merges"]
    token_to_id = {t: i for i, t in enumerate(md["tokenizer.ggml.tokens"])}
    ranks = impl.load_merges(merges, token_to_id)
    assert type(ranks) is dict, f"load_merges must return a dict, not {type(ranks).__name__}"
    assert all(type(r) is int for r in ranks.values()), "every rank must be an int"
    assert ranks == first_ranks(merges), f"{source}: some ranks differ from the merges' positions in the list"


@pytest.mark.parametrize("name", support.BYTE_LEVEL)
def test_llama_cpp_ids(impl, name):
    """With your load_merges in the engine, llama.cpp's test inputs for this vocabulary get llama.cpp's ids.

    With your load_merges inside the engine, every input of llama.cpp's test file for this byte-level vocabulary
    encodes to the ids llama.cpp expects (add_special and parse_special off, as its test-tokenizer-0 runs them).
    """
    tok = support.learner_tokenizer(impl, name, ["load_merges"])
    wrong = [text for text, ids in support.cases(name) if tok.encode(text) != list(ids)]
    assert not wrong, f"{name}: {len(wrong)} of {len(support.cases(name))} inputs get other ids than llama.cpp's"


def small_vocab(extra):
    """A byte-level vocabulary (all 256 byte characters) plus ``extra`` entries, as GGUF metadata."""
    tokens = [BYTE_TO_CHAR[b] for b in range(256)] + list(extra)
    return tokens, {t: i for i, t in enumerate(tokens)}


def test_a_merge_listed_twice_keeps_its_first_rank(impl):
    """A merge listed twice keeps the rank of its first occurrence, as llama.cpp's table does ('b c' wins in 'abc')."""
    tokens, t2i = small_vocab(["ab", "bc"])
    merges = ["b c", "a b", "b c"]
    ranks = impl.load_merges(merges, t2i)
    assert ranks == first_ranks(merges), "a repeated merge must keep its first rank"
    md = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.merges": merges}
    tok = support.learner_tokenizer(impl, md, ["load_merges"])
    assert tok.encode("abc") == [t2i["a"], t2i["bc"]], "with the first rank, 'b c' (rank 0) is merged before 'a b'"


def test_duplicates_on_a_real_list(impl):
    """SmolLM2's merges with some of them repeated further down: every merge keeps its first position."""
    md = gguf.GGUFReader(assets.path("smollm2")).metadata
    merges = list(md["tokenizer.ggml.merges"][:3000])
    merges = merges[:2000] + merges[100:200] + merges[2000:] + merges[:5]
    token_to_id = {t: i for i, t in enumerate(md["tokenizer.ggml.tokens"])}
    assert impl.load_merges(merges, token_to_id) == first_ranks(merges), "a repeated merge keeps its first rank"


BAD = ["Ġt", "Ġ t he", "Ġ  t", " Ġt", "Ġt ", "Ġ zzzz", "zzzz t", 42, None, ("Ġ", "t")]


def _refusal(impl, merges, t2i):
    """The message of the TokenizerError load_merges raises (None when it raises none)."""
    try:
        impl.load_merges(merges, t2i)
    except errors.TokenizerError as e:
        return str(e)
    return None


def test_malformed_merges_are_refused_naming_the_entry(impl):
    """A malformed merge entry raises TokenizerError naming tokenizer.ggml.merges[i].

    An entry that is not two vocabulary entries separated by one space (or not a str) raises TokenizerError naming
    tokenizer.ggml.merges[i]; merges that are not a list raise one naming tokenizer.ggml.merges.
    """
    md = gguf.GGUFReader(assets.path("smollm2")).metadata
    good = list(md["tokenizer.ggml.merges"][:500])
    ids = {t: i for i, t in enumerate(md["tokenizer.ggml.tokens"])}
    # the entries these merges use, and a few more: enough to tell a real entry from a fake one
    t2i = {t: ids[t] for m in good + ["Ġt", "Ġ Ġ"] for t in m.split(" ")}
    for k, bad in enumerate(BAD):
        at = 37 * k + 3
        message = _refusal(impl, good[:at] + [bad] + good[at:], t2i)
        assert message is not None, f"the entry {bad!r} must be refused with a TokenizerError"
        assert f"tokenizer.ggml.merges[{at}]" in message, f"the error for {bad!r} must name tokenizer.ggml.merges[{at}]"
    for merges in (None, "Ġ t"):
        message = _refusal(impl, merges, t2i)
        assert message is not None and "tokenizer.ggml.merges" in message, (
            f"merges given as {type(merges).__name__} must be refused with a TokenizerError naming the key")
