"""Behaviour of bytes2logits.engine.tokenizer beyond fixture parity: round trips, special-token safety,
streaming, errors and speed. Parity with llama.cpp's expected ids is in test_tokenizer_parity.py."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bytes2logits import assets
from bytes2logits.engine.gguf import GGUFReader
from bytes2logits.engine.models import bpe_merge, spm_merge
from bytes2logits.engine.pretokenizers import PRE_TOKENIZERS, split
from bytes2logits.engine.tokenizer import Tokenizer, TokenType
from bytes2logits.errors import TokenizerError
from bytes2logits.lessons.basic import REPLACEMENT, StreamDecoder
from bytes2logits.text import BYTE_TO_CHAR

FAST = settings(derandomize=True, max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def vocab_path(name: str):
    return assets.path("llama-cpp-models") / f"ggml-vocab-{name}.gguf"


@pytest.fixture(scope="module")
def gpt2():
    return Tokenizer.from_gguf(vocab_path("gpt-2"))


@pytest.fixture(scope="module")
def smol():
    return Tokenizer.from_gguf(assets.path("smollm2"))


@pytest.fixture(scope="module")
def spm():
    return Tokenizer.from_gguf(vocab_path("llama-spm"))


@pytest.fixture(scope="module")
def bert():
    return Tokenizer.from_gguf(vocab_path("bert-bge"))


def tiny_metadata(**overrides):
    """A hand-made byte-level BPE vocabulary: 256 byte tokens, two merges, four control tokens."""
    byte_tokens = [BYTE_TO_CHAR[b] for b in range(256)]
    specials = ["<think>", "<think>x", "ab", "bcdef"]
    tokens = byte_tokens + ["he", "ll", "<pad4>"] + specials
    types = [TokenType.NORMAL] * (len(byte_tokens) + 2) + [TokenType.USER_DEFINED] + [TokenType.CONTROL] * 4
    md = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "gpt-2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.merges": ["h e", "l l"],
        "tokenizer.ggml.bos_token_id": 0,
        "tokenizer.ggml.eos_token_id": 0,
    }
    md.update(overrides)
    return md


# ---------------------------------------------------------------------- round trips

@FAST
@given(st.text())
def test_byte_level_round_trip_gpt2(gpt2, text):
    assert gpt2.decode_bytes(gpt2.encode(text)) == text.encode("utf-8")


@FAST
@given(st.text())
def test_byte_level_round_trip_smollm2(smol, text):
    # SmolLM2 has no token for a few bytes (0x04, 0xF1, ...); like llama.cpp those are dropped
    assume(not set(text.encode("utf-8")) & smol.missing_bytes)
    assert smol.decode_bytes(smol.encode(text)) == text.encode("utf-8")


def test_missing_byte_is_dropped_like_llama_cpp(smol):
    assert 0x04 in smol.missing_bytes
    assert smol.decode(smol.encode("a\x04b")) == "ab"


@FAST
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x2FFFF)))
def test_spm_round_trip_up_to_the_prefix_space(spm, text):
    # SentencePiece puts one "▁" in front (add_space_prefix); everything else comes back, via <0xXX> if needed
    assert spm.decode(spm.encode(text)) == (" " + text if text else "")


def test_split_keeps_every_character():
    for pre in PRE_TOKENIZERS.values():
        text = "I'm 12345 naïve   東京\r\n\t🦙 x  "
        assert "".join(split(text, pre.compiled)) == text


# ---------------------------------------------------------------------- special tokens

CONTROL_TEXTS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<repo_name>", "<file_sep>"]


@FAST
@given(st.lists(st.one_of(st.sampled_from(CONTROL_TEXTS), st.text(max_size=5)), max_size=8))
def test_user_text_never_mints_control_ids(smol, parts):
    text = "".join(parts)
    ids = smol.encode(text)
    assert not any(smol.is_special(i) for i in ids)
    assert smol.decode(ids) == text or set(text.encode()) & smol.missing_bytes


def test_allowed_special_all_and_subsets(smol):
    im_start, im_end = smol.token_to_id("<|im_start|>"), smol.token_to_id("<|im_end|>")
    text = "<|im_start|>user\nHi<|im_end|>"
    assert smol.encode(text, allowed_special="all") == [im_start, *smol.encode("user\nHi"), im_end]
    only_start = smol.encode(text, allowed_special={"<|im_start|>"})
    assert only_start[0] == im_start and im_end not in only_start
    assert smol.decode(smol.encode(text, allowed_special="all")) == text
    assert smol.decode(smol.encode(text, allowed_special="all"), skip_special=True) == "user\nHi"


def test_allowed_special_rejects_unknown_names(smol):
    with pytest.raises(TokenizerError, match="not a special token"):
        smol.encode("x", allowed_special={"<|nope|>"})
    with pytest.raises(TokenizerError, match="allowed_special"):
        smol.encode("x", allowed_special="none")


def test_earliest_then_longest_special_wins():
    tok = Tokenizer.from_metadata(tiny_metadata())
    think, think_x = tok.token_to_id("<think>"), tok.token_to_id("<think>x")
    ab, bcdef = tok.token_to_id("ab"), tok.token_to_id("bcdef")
    # same start: the longer text wins
    assert tok.encode("<think>xy", allowed_special="all")[:1] == [think_x]
    assert tok.encode("<think>y", allowed_special="all")[:1] == [think]
    # different starts: the earlier one wins even though the later one is longer
    ids = tok.encode("abcdef", allowed_special="all")
    assert ids[0] == ab and bcdef not in ids
    assert tok.decode(ids) == "abcdef"
    # an allowed subset: only "bcdef" may match, so it does
    assert tok.encode("abcdef", allowed_special={"bcdef"}) == [tok.token_to_id("a"), bcdef]


def test_user_defined_tokens_match_in_plain_text_like_llama_cpp():
    tok = Tokenizer.from_metadata(tiny_metadata())
    assert tok.encode("x<pad4>y") == [tok.token_to_id("x"), tok.token_to_id("<pad4>"), tok.token_to_id("y")]
    assert not tok.is_special(tok.token_to_id("<pad4>"))


def test_add_special_follows_the_model(smol, spm, bert):
    llama3 = Tokenizer.from_gguf(vocab_path("llama-bpe"))
    assert llama3.encode("hi", add_special=True)[0] == llama3.bos_id == 128000   # llama3 default: BOS
    assert smol.encode("hi", add_special=True) == smol.encode("hi")              # add_bos_token = false
    assert spm.encode("hi", add_special=True)[0] == spm.bos_id == 1
    assert spm.encode("", add_special=True) == [1]
    ids = bert.encode("hello world", add_special=True)
    assert (ids[0], ids[-1]) == (bert.bos_id, bert.sep_id) == (101, 102)


def test_stop_ids_mirror_llama_cpp():
    llama3 = Tokenizer.from_gguf(vocab_path("llama-bpe"))
    assert {llama3.token_to_id("<|eot_id|>"), llama3.token_to_id("<|end_of_text|>")} <= llama3.stop_ids
    assert llama3.eot_id == llama3.token_to_id("<|eot_id|>")
    qwen = Tokenizer.from_gguf(GGUFReader(vocab_path("qwen2")))
    assert {qwen.token_to_id("<|im_end|>"), qwen.token_to_id("<|endoftext|>")} <= qwen.stop_ids
    assert qwen.eot_id == qwen.token_to_id("<|im_end|>")
    assert qwen.token_to_id("<|im_start|>") not in qwen.stop_ids


# ---------------------------------------------------------------------- decoding and streaming

def test_decode_pieces(spm, bert):
    # SentencePiece: byte-fallback tokens are raw bytes, "▁" is a space
    ids = spm.encode("🦙 x")
    assert any(spm.id_to_token(i).startswith("<0x") for i in ids)
    assert spm.decode_bytes(ids) == " 🦙 x".encode()
    # WordPiece: continuation pieces join the word before them
    ids = bert.encode("unaffable tokenization")
    assert bert.decode(ids) == " unaffable tokenization"
    assert len(ids) > 2


@pytest.mark.parametrize("which", ["smol", "spm"])
def test_stream_decoder_never_emits_replacement(which, request):
    tok = request.getfixturevalue(which)
    text = "東京タワー 😶‍🌫️ 🦙🚀 naïve Привет 𝔘𝔫𝔦𝔠𝔬𝔡𝔢"
    ids = tok.encode(text)
    assert len(ids) > len(text.split())   # characters really are split across tokens
    dec = StreamDecoder(tok)
    chunks = [dec.step(i) for i in ids] + [dec.finish()]
    assert all(REPLACEMENT not in c for c in chunks)
    assert "".join(chunks) == tok.decode(ids)


def test_invalid_utf8_decodes_to_replacement(gpt2):
    lone = gpt2.token_to_id(BYTE_TO_CHAR[0xE6])  # a lead byte with no continuation
    assert gpt2.decode([lone, gpt2.token_to_id("a")]) == REPLACEMENT + "a"


# ---------------------------------------------------------------------- errors

def test_bad_ids_name_id_and_position(gpt2):
    with pytest.raises(TokenizerError, match=r"token id 99999 at position 2"):
        gpt2.decode([1, 2, 99999])
    with pytest.raises(TokenizerError, match=r"position 1 is 1.5"):
        gpt2.decode_bytes([1, 1.5])
    with pytest.raises(TokenizerError, match="position 0"):
        gpt2.id_to_token(-1)
    with pytest.raises(TokenizerError, match="not in the vocabulary"):
        gpt2.token_to_id("no such token")
    assert gpt2.token_to_id("no such token", None) is None


def test_unknown_pre_names_value_and_supported_ones():
    with pytest.raises(TokenizerError) as e:
        Tokenizer.from_metadata(tiny_metadata(**{"tokenizer.ggml.pre": "my-new-model"}))
    assert "'my-new-model'" in str(e.value) and "qwen2" in str(e.value) and "smollm" in str(e.value)


def test_missing_pre_means_default():
    md = tiny_metadata()
    del md["tokenizer.ggml.pre"]
    assert Tokenizer.from_metadata(md).pre == "default"


@pytest.mark.parametrize("overrides, key", [
    ({"tokenizer.ggml.model": "t5"}, "tokenizer.ggml.model"),
    ({"tokenizer.ggml.merges": ["h e", "l zz"]}, "tokenizer.ggml.merges[1]"),
    ({"tokenizer.ggml.merges": ["he"]}, "tokenizer.ggml.merges[0]"),
    ({"tokenizer.ggml.token_type": [1, 1, 1]}, "tokenizer.ggml.token_type"),
    ({"tokenizer.ggml.tokens": ["a", "a"], "tokenizer.ggml.token_type": None}, "tokenizer.ggml.tokens"),
    ({"tokenizer.ggml.tokens": [BYTE_TO_CHAR[b] for b in range(0x30)], "tokenizer.ggml.token_type": None,
      "tokenizer.ggml.merges": []}, "tokenizer.ggml.tokens"),
    ({"tokenizer.ggml.bos_token_id": 10**6}, "tokenizer.ggml.bos_token_id"),
])
def test_inconsistent_metadata_names_the_key(overrides, key):
    md = tiny_metadata(**overrides)
    md = {k: v for k, v in md.items() if v is not None}
    with pytest.raises(TokenizerError) as e:
        Tokenizer.from_metadata(md)
    assert key in str(e.value)


def test_spm_without_byte_tokens_is_rejected():
    md = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "▁a"],
          "tokenizer.ggml.scores": [0.0] * 4}
    with pytest.raises(TokenizerError, match=r"tokenizer.ggml.tokens lacks 256 byte-fallback"):
        Tokenizer.from_metadata(md)


def test_lone_surrogate_is_an_error(gpt2):
    with pytest.raises(TokenizerError, match="surrogate"):
        gpt2.encode("a\ud800b")


# ---------------------------------------------------------------------- the merge loops

def test_bpe_merge_lowest_rank_then_leftmost():
    ranks = {"a a": 0, "aa b": 1, "b c": 2}
    assert bpe_merge(list("aaab"), ranks) == ["aa", "a", "b"]
    assert bpe_merge(list("aabc"), ranks) == ["aab", "c"]
    assert bpe_merge(list("xyz"), ranks) == ["x", "y", "z"]  # no rule: nothing merges


def test_bpe_heap_matches_loop_on_random_words():
    rng = random.Random(0)
    alphabet = "abc"
    ranks = {}
    for r in range(30):
        left = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 2)))
        right = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 2)))
        ranks.setdefault(f"{left} {right}", r)
    for _ in range(200):
        word = [rng.choice(alphabet) for _ in range(rng.randint(49, 90))]
        heap = bpe_merge(word, ranks)  # more than 48 symbols: the heap path
        # reference: the plain loop, written out here
        syms = word[:]
        while True:
            cands = [(ranks[f"{syms[k]} {syms[k + 1]}"], k) for k in range(len(syms) - 1)
                     if f"{syms[k]} {syms[k + 1]}" in ranks]
            if not cands:
                break
            _, k = min(cands)
            syms[k:k + 2] = [syms[k] + syms[k + 1]]
        assert heap == syms


def test_spm_merge_prefers_high_scores():
    # "ab" (-0.1) beats "▁a" (-1.0); then "▁" + "ab" is the entry "▁ab"
    assert spm_merge("▁ab", {"▁a": 0, "ab": 1, "▁ab": 2}, [-1.0, -0.1, -0.5]) == ["▁ab"]
    assert spm_merge("▁ab", {"▁a": 0, "ab": 1}, [-0.1, -1.0]) == ["▁a", "b"]
    assert spm_merge("▁ab", {"▁a": 0, "ab": 1}, [-1.0, -0.1]) == ["▁", "ab"]


# ---------------------------------------------------------------------- speed

def test_encode_10k_words_is_fast(gpt2):
    rng = random.Random(1)
    letters = "abcdefghijklmnopqrstuvwxyzéü"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(10_000)]
    text = " ".join(words)
    fresh = Tokenizer.from_gguf(vocab_path("gpt-2"))  # empty piece cache
    t = time.perf_counter()
    ids = fresh.encode(text)
    elapsed = time.perf_counter() - t
    assert fresh.decode(ids) == text
    assert elapsed < 1.0, f"encoding 10k mostly distinct words took {elapsed:.2f}s"


def test_qwen2_loads_fast():
    reader = GGUFReader(vocab_path("qwen2"))
    t = time.perf_counter()
    tok = Tokenizer.from_gguf(reader)
    elapsed = time.perf_counter() - t
    assert tok.vocab_size == 151936
    assert elapsed < 2.0, f"building the Qwen2 tokenizer took {elapsed:.2f}s"


# ---------------------------------------------------------------------- the lab-sized steps (lab 14)

def test_steps_replace_the_pipelines_functions_for_one_tokenizer():
    """steps= swaps a step for one tokenizer; the class and other tokenizers keep the module's."""
    from bytes2logits.engine import tokenizer as tk

    seen = []

    def spy(text, pattern, ids, **kw):
        seen.append(text)
        return tk.split_specials(text, pattern, ids, **kw)

    tok = Tokenizer.from_metadata(tiny_metadata(), steps={"split_specials": spy})
    plain = Tokenizer.from_metadata(tiny_metadata())
    assert tok.encode("hello<think>", allowed_special="all") == plain.encode("hello<think>", allowed_special="all")
    assert seen == ["hello<think>"] and Tokenizer.split_specials is tk.split_specials
    with pytest.raises(TypeError, match="'encode' is not one of load_merges"):
        Tokenizer.from_metadata(tiny_metadata(), steps={"encode": spy})


def test_tokenizer_from_gguf_takes_the_steps_of_its_own_namespace():
    """Defined in another namespace (a lab notebook), tokenizer_from_gguf uses that namespace's steps."""
    import inspect

    from bytes2logits.engine import tokenizer as tk

    calls = []
    namespace = {"Tokenizer": Tokenizer, "STEPS": tk.STEPS,
                 "load_merges": lambda merges, t2i: calls.append(len(merges)) or tk.load_merges(merges, t2i)}
    exec(inspect.getsource(tk.tokenizer_from_gguf), namespace)
    tok = namespace["tokenizer_from_gguf"](vocab_path("gpt-2"))
    assert calls and tok.encode("Hello world") == tk.tokenizer_from_gguf(vocab_path("gpt-2")).encode("Hello world")


def test_load_merges_keeps_the_first_rank_and_names_bad_entries():
    from bytes2logits.engine.tokenizer import load_merges

    t2i = {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4}
    assert load_merges(["a b", "b c", "a b"], t2i) == {"a b": 0, "b c": 1}
    for bad, what in [(["a b", "a  b"], "merges[1]"), (["a b", "a x"], "merges[1]"), (["a b", 3], "merges[1] is int"),
                      (["ab"], "merges[0]")]:
        with pytest.raises(TokenizerError, match=what.replace("[", r"\[")):
            load_merges(bad, t2i)
    with pytest.raises(TokenizerError, match="missing or not a list"):
        load_merges(None, t2i)


def test_token_bytes_by_type():
    from bytes2logits.engine.tokenizer import token_bytes

    assert token_bytes("<0x0A>", TokenType.BYTE) == b"\n"
    assert token_bytes("<|im_end|>", TokenType.CONTROL) == b"<|im_end|>"
    assert token_bytes("\u2581de", TokenType.NORMAL) == b" de"
    assert token_bytes("\u0120de", TokenType.NORMAL, lambda t: t.replace("\u0120", " ").encode()) == b" de"
    assert token_bytes("<unused0>", TokenType.UNUSED) == b""


def test_split_specials_earliest_then_longest_and_literal_spans():
    from bytes2logits.engine.tokenizer import special_pattern, split_specials

    ids = {"<a>": 1, "<a><b>": 2, "<b>": 3}
    p = special_pattern(ids)
    assert split_specials("x<a><b>y<b>", p, ids) == [(0, 1, None), (1, 7, 2), (7, 8, None), (8, 11, 3)]
    # a control match that overlaps untrusted text is not a token; a later one is
    got = split_specials("<a><b>", p, ids, control=set(ids), literal_spans=[(0, 2)])
    assert got == [(0, 3, None), (3, 6, 3)]
    assert special_pattern([]) is None and split_specials("", None, {}) == []


def test_chat_prompt_ids_are_llama_cpps(smol):
    """The manifest's prompts: the ids llama.cpp evaluated, from the template in the file."""
    import json
    from pathlib import Path

    from bytes2logits.engine.session import chat_prompt_ids

    manifest = json.loads((Path(__file__).parent / "fixtures/parity/manifest.json").read_text())
    prompts = manifest["smollm2"]["prompts"]
    assert prompts
    for p in prompts:
        assert chat_prompt_ids(smol, p["messages"]) == p["ids"], p["name"]


def test_template_variables_reach_the_span_search():
    """chat_prompt_ids(..., flag=...) renders the placeholder copy with the same variables (else a message
    holding marker text would be refused for a harmless conversation)."""
    from bytes2logits.engine.session import chat_prompt_ids

    template = "{% if flag %}<think>{% endif %}{% for m in messages %}ab{{ m.content }}bcdef{% endfor %}"
    tok = Tokenizer.from_metadata(tiny_metadata(**{"tokenizer.chat_template": template}))
    ids = chat_prompt_ids(tok, [{"role": "user", "content": "he<think>ll"}], flag=True)
    think, ab = tok.token_to_id("<think>"), tok.token_to_id("ab")
    assert ids[:2] == [think, ab] and ids.count(think) == 1, "the typed <think> stays text; the template's is a token"
