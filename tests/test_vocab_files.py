"""GPT-2, cl100k and Qwen3 loaded from their published files give the same ids as the reference libraries.

The oracles are tiktoken (GPT-2 and cl100k; installed by ``make bench``, not by the course) and Hugging Face
``tokenizers`` (Qwen3's tokenizer.json; installed with the test extras). Each test skips with the reason
when its oracle is missing. No network: tiktoken is pointed at the course's own copies of the files.
"""

from __future__ import annotations

import inspect
import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bytes2logits import assets
from bytes2logits.engine.tokenizer import Tokenizer
from bytes2logits.errors import TokenizerError
from bytes2logits.lessons import vocab_files
from bytes2logits.lessons.pitfalls import udhr_samples

SEP = "\n__ggml_vocab_test__\n"


def varied_texts() -> list[str]:
    """A few hundred real texts: UDHR passages in 200 languages, Python source, numbers, whitespace edge cases."""
    rng = random.Random(9)
    samples = udhr_samples()
    texts = [samples[c].text for c in rng.sample(sorted(samples), 200)]
    import json as json_module
    import textwrap as textwrap_module

    for module in (json_module.decoder, textwrap_module, inspect):
        source = inspect.getsource(module)
        lines = source.splitlines(keepends=True)
        for start in range(0, len(lines), 40):
            texts.append("".join(lines[start:start + 40]))
    texts += ["12345+67890=80235", "In 1999, 2000 and 2024 it cost $1,234.56 (or €1.234,56).", "3.14159265358979",
              "0" * 30, "9" * 7 + " " + "1" * 11, "phone: +1 (555) 010-9999", "x = 1_000_000", "2²=4, ½, Ⅻ, ٣٤٥"]
    texts += ["", " ", "  ", "\n", " \n ", "a \n ", "x\n\n\n", "\t\tindent\n\t\t\n", "trailing   ", "  \r\n  \r\n",
              "don't I'LL we've 'S", "<|endoftext|> is text here", "👩\u200d💻 e\u0301 é ﬁ Å"]
    llama_models = Path(assets.path("llama-cpp-models"))
    raw = (llama_models / "ggml-vocab-gpt-2.gguf.inp").read_text(encoding="utf-8")
    texts += raw.split(SEP)
    return texts


@pytest.fixture(scope="module")
def texts():
    return varied_texts()


@pytest.fixture(scope="module")
def tiktoken_encodings():
    """tiktoken's gpt2 and cl100k_base encodings, built from the course's asset files (no download)."""
    tiktoken = pytest.importorskip(
        "tiktoken", reason="tiktoken is the oracle here; it comes with the test extras (pip install -e .[test])")
    from tiktoken import load
    from tiktoken_ext import openai_public

    folder = Path(assets.path("gpt2-bpe"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(openai_public, "load_tiktoken_bpe",
                   lambda url, expected_hash=None: load.load_tiktoken_bpe(str(assets.path("cl100k")), expected_hash))
        mp.setattr(openai_public, "data_gym_to_mergeable_bpe_ranks",
                   lambda vocab_bpe_file, encoder_json_file, vocab_bpe_hash=None, encoder_json_hash=None:
                   load.data_gym_to_mergeable_bpe_ranks(str(folder / "vocab.bpe"), str(folder / "encoder.json"),
                                                        vocab_bpe_hash, encoder_json_hash))
        return {"gpt2": tiktoken.Encoding(**openai_public.gpt2()),
                "cl100k": tiktoken.Encoding(**openai_public.cl100k_base())}


@pytest.fixture(scope="module")
def ours():
    return {"gpt2": vocab_files.load_gpt2(), "cl100k": vocab_files.load_cl100k()}


@pytest.mark.parametrize("name", ["gpt2", "cl100k"])
def test_ids_match_tiktoken(name, texts, ours, tiktoken_encodings):
    assert len(texts) > 300
    theirs = tiktoken_encodings[name]
    ok = 0
    for text in texts:
        assert ours[name].encode(text) == theirs.encode_ordinary(text), f"{name}: {text[:80]!r}"
        ok += 1
    assert ok == len(texts)


@pytest.mark.parametrize("name", ["gpt2", "cl100k"])
@settings(max_examples=300, deadline=None, derandomize=True)
@given(text=st.lists(st.sampled_from(list("ab Z1234567890 \n\t\r!?'sé日👩") + ["  ", "\n\n", "'ll", "\u00a0"]),
                    max_size=20).map("".join))
def test_ids_match_tiktoken_on_edge_cases(name, text, ours, tiktoken_encodings):
    assert ours[name].encode(text) == tiktoken_encodings[name].encode_ordinary(text)


CL100K_SPECIAL_TEXTS = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>"]


def with_specials(texts: list[str]) -> list[str]:
    """Texts with special-token text put in at random places, plus near misses and neighbours."""
    rng = random.Random(100257)
    out = []
    for text in texts[::3]:
        for _ in range(rng.randint(1, 3)):
            at = rng.randint(0, len(text))
            text = text[:at] + rng.choice(CL100K_SPECIAL_TEXTS) + text[at:]
        out.append(text)
    out += ["<|endoftext|>", "<|endoftext|><|endoftext|>", "a<|fim_prefix|>b<|fim_suffix|>c<|fim_middle|>",
            " <|endofprompt|> ", "<|endoftext|", "<|endoftext|>|>", "<<|endoftext|>>", "\n<|endoftext|>\n\n",
            "<|im_start|> is not cl100k's", "<|ENDOFTEXT|>", "x" * 5 + "<|endofprompt|>" + "😀"]
    return out


def test_cl100k_has_tiktokens_special_tokens(ours, tiktoken_encodings):
    """The five specials, with tiktoken's ids, as control tokens; the vocabulary is as large as tiktoken's."""
    theirs = tiktoken_encodings["cl100k"]
    assert ours["cl100k"].special_tokens == theirs._special_tokens == vocab_files.CL100K_SPECIAL_TOKENS
    assert ours["cl100k"].vocab_size == theirs.n_vocab == 100277
    assert all(ours["cl100k"].is_special(i) for i in vocab_files.CL100K_SPECIAL_TOKENS.values())


def test_cl100k_encode_with_specials_matches_tiktoken(texts, ours, tiktoken_encodings):
    """allowed_special="all" and a subset give tiktoken's ids; not allowed, special text is ordinary text."""
    theirs, mine = tiktoken_encodings["cl100k"], ours["cl100k"]
    cases = with_specials(texts)
    assert len(cases) > 100 and sum(100257 in theirs.encode(t, allowed_special="all") for t in cases) > 50
    some = {"<|endoftext|>", "<|fim_middle|>"}
    for text in cases:
        assert mine.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all"), text[:80]
        assert mine.encode(text, allowed_special=some) == \
            theirs.encode(text, allowed_special=some, disallowed_special=()), text[:80]
        assert mine.encode(text) == theirs.encode_ordinary(text) == theirs.encode(text, disallowed_special=()), \
            text[:80]


def test_cl100k_special_text_is_never_a_special_id_unless_allowed(ours, tiktoken_encodings):
    """Not allowed, special text never becomes a special id (tiktoken's encode refuses it instead)."""
    theirs, mine = tiktoken_encodings["cl100k"], ours["cl100k"]
    specials = set(vocab_files.CL100K_SPECIAL_TOKENS.values())
    for text in CL100K_SPECIAL_TEXTS:
        with pytest.raises(ValueError, match="disallowed special token"):
            theirs.encode(text)
        assert not specials & set(mine.encode(text)) and mine.decode(mine.encode(text)) == text
    assert mine.encode("<|endoftext|><|fim_prefix|>", allowed_special={"<|fim_prefix|>"})[-1] == 100258
    with pytest.raises(TokenizerError, match="not a special token"):
        mine.encode("x", allowed_special={"<|im_end|>"})


def test_cl100k_decodes_every_special_id_as_tiktoken(ours, tiktoken_encodings):
    """decode and decode_bytes of each special id (alone, among text, skipped) agree with tiktoken."""
    theirs, mine = tiktoken_encodings["cl100k"], ours["cl100k"]
    hello = theirs.encode_ordinary("Hello")
    for text, i in vocab_files.CL100K_SPECIAL_TOKENS.items():
        assert mine.decode([i]) == theirs.decode([i]) == text
        assert mine.decode_bytes([i]) == theirs.decode_single_token_bytes(i)
        assert mine.decode([*hello, i, *hello]) == theirs.decode([*hello, i, *hello])
        assert mine.decode([*hello, i], skip_special=True) == "Hello"
        assert mine.id_to_token(i) == text and mine.token_to_id(text) == i
    for gap in (100256, 100261, 100275):  # ids tiktoken never assigned: it raises, ours decode to nothing
        with pytest.raises(KeyError):
            theirs.decode_single_token_bytes(gap)
        assert mine.decode([gap]) == "" and not mine.is_special(gap)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(text=st.lists(st.sampled_from(CL100K_SPECIAL_TEXTS + ["<|", "|>", "endoftext", "a", " ", "\n", "é", "12"]),
                     max_size=12).map("".join))
def test_cl100k_specials_match_tiktoken_on_any_mix(text, ours, tiktoken_encodings):
    theirs, mine = tiktoken_encodings["cl100k"], ours["cl100k"]
    ids = theirs.encode(text, allowed_special="all")
    assert mine.encode(text, allowed_special="all") == ids
    assert mine.decode(ids) == theirs.decode(ids) == text


def test_cl100k_merges_rebuild_every_token():
    """Every multi-byte rank is reached by exactly one derived merge, in rank order, whose parts rank lower."""
    ranks = vocab_files.read_tiktoken_ranks(assets.path("cl100k"))
    assert len(ranks) == 100256
    merges = vocab_files.merges_from_ranks(ranks)
    assert len(merges) == len(ranks) - 256
    made = [a + b for a, b in merges]
    assert [ranks[t] for t in made] == sorted(ranks[t] for t in ranks if len(t) > 1)
    assert all(ranks[a] < ranks[a + b] and ranks[b] < ranks[a + b] for a, b in merges)


def test_merges_from_ranks_follows_the_encoder_not_the_cheapest_split():
    """The merge is the encoder's last step, which can differ from the split with the lowest-ranked parts."""
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"bc": 3, b"ab": 4, b"abc": 5}
    # The encoder on "abc" joins b+c first (rank 3 < 4), so "abc" is made as a + bc, never as ab + c.
    assert vocab_files.merges_from_ranks(ranks) == [(b"b", b"c"), (b"a", b"b"), (b"a", b"bc")]
    with pytest.raises(TokenizerError, match="not the result of one merge"):
        vocab_files.merges_from_ranks({b"a": 0, b"b": 1, b"c": 2, b"abc": 3})


def test_tiktoken_ranks_must_be_dense(tmp_path):
    with pytest.raises(TokenizerError, match="0..n-1"):
        vocab_files.tiktoken_metadata({bytes([b]): b for b in range(256)} | {b"ab": 300}, pre="llama3")
    bad = tmp_path / "bad.tiktoken"
    bad.write_text("IQ== 0\nnot base64 at all\n")
    with pytest.raises(TokenizerError, match="line 2"):
        vocab_files.read_tiktoken_ranks(bad)


def test_gpt2_knows_solidgoldmagikarp():
    gpt2 = vocab_files.load_gpt2()
    assert gpt2.encode(" SolidGoldMagikarp") == [43453]
    assert gpt2.is_special(50256) and gpt2.vocab_size == 50257


@pytest.fixture(scope="module")
def qwen3():
    return vocab_files.load_qwen3()


def test_qwen3_matches_hf_tokenizers(texts, qwen3):
    hf = pytest.importorskip("tokenizers", reason="HF tokenizers is the oracle for tokenizer.json")
    theirs = hf.Tokenizer.from_file(str(assets.path("qwen3-tokenizer")))
    for text in texts:
        # HF matches special-token text anywhere; the engine only where allowed (see Tokenizer.encode)
        assert qwen3.encode(text, allowed_special="all") == theirs.encode(text, add_special_tokens=False).ids, text[:80]
    assert qwen3.encode("<|im_end|>") != [qwen3.token_to_id("<|im_end|>")], "user text never becomes a control id"


def test_qwen3_normalizes_to_nfc(qwen3):
    assert type(qwen3.normalizer).__name__ == "NFC"
    assert qwen3.encode("e\u0301") == qwen3.encode("é")
    assert qwen3.model == "BPE" and qwen3.vocab_size == 151669
    assert qwen3.token_type(qwen3.token_to_id("<think>")) == 4  # user-defined: matched in plain text
    # literal spans are positions in the text as typed: special tokens are split out before the NFC step
    marker = "<|im_end|>"
    assert qwen3.encode(marker, allowed_special="all", literal_spans=[(0, len(marker))]) == qwen3.encode(marker)


def test_tokenizer_json_refuses_what_it_cannot_do():
    """Each unsupported value is refused with the JSON path of its field."""
    data = json.loads(Path(assets.path("qwen3-tokenizer")).read_text(encoding="utf-8"))
    cases = [
        (("model", "type"), "WordLevel", "model.type"),
        (("model", "dropout"), 0.1, "model.dropout"),
        (("model", "continuing_subword_prefix"), "##", "model.continuing_subword_prefix"),
        (("normalizer",), {"type": "Precompiled"}, "normalizer.type"),
        (("pre_tokenizer", "pretokenizers"), [{"type": "Punctuation"}], r"pre_tokenizer.pretokenizers\[0\].type"),
        (("decoder",), {"type": "CTC"}, "decoder.type"),
        (("added_tokens",), [{"id": 0, "content": "!", "lstrip": True}], r"added_tokens\[0\].lstrip"),
    ]
    for path, value, field in cases:
        broken = json.loads(json.dumps(data))
        target = broken
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        with pytest.raises(TokenizerError, match=field):
            Tokenizer.from_json(broken)


def test_merges_may_be_strings_or_pairs():
    """tokenizer.json writes merges as "a b" (older files) or ["a", "b"] (newer ones); both read the same."""
    vocab = {"a": 0, "b": 1, "ab": 2}
    old = {"model": {"type": "BPE", "vocab": vocab, "merges": ["a b"]}, "pre_tokenizer": {"type": "ByteLevel"}}
    new = {"model": {"type": "BPE", "vocab": vocab, "merges": [["a", "b"]]}, "pre_tokenizer": {"type": "ByteLevel"}}
    assert Tokenizer.from_json(old).model_stage.ranks == Tokenizer.from_json(new).model_stage.ranks == {"a b": 0}
