"""Hidden suite, lab 14 task 2: token_bytes, what each token type stands for when decoding."""

import random
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

from bytes2logits.engine.decoders import byte_level_bytes
from bytes2logits.engine.tokenizer import TokenType

support = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("lab14_support.py"))))


@pytest.mark.parametrize("name", support.BYTE_LEVEL)
def test_llama_cpp_ids_decode_to_their_input(impl, name):
    """llama.cpp's ids decode back to their input, byte for byte, with your token_bytes in the engine.

    With your token_bytes inside the engine, llama.cpp's expected ids for every input of its test file (this
    byte-level vocabulary) decode back to that input, byte for byte (decode_bytes) and as text (decode).
    """
    tok = support.learner_tokenizer(impl, name, ["token_bytes"])
    for text, ids in support.cases(name):
        got = tok.decode_bytes(list(ids))
        assert type(got) is bytes and got == text.encode("utf-8"), (
            f"{name}: llama.cpp's ids for an input of {len(text)} characters decode to other bytes")
        assert tok.decode(list(ids)) == text, f"{name}: decode gives another text than llama.cpp's input"


@pytest.mark.parametrize("name", support.SENTENCEPIECE)
def test_sentencepiece_byte_fallback(impl, name):
    """A SentencePiece vocabulary's ids, byte-fallback tokens included, decode as llama.cpp's pieces do.

    A SentencePiece vocabulary (llama-spm, phi-3): llama.cpp's ids, byte-fallback tokens <0xXX> included, decode
    to the input with the space SentencePiece puts in front, as llama.cpp's pieces do.
    """
    engine = support.engine_tokenizer(name)
    fallback = {i for _, ids in support.cases(name) for i in ids if engine.token_type(i) == TokenType.BYTE}
    assert len(fallback) > 20  # the fixture exercises byte fallback (emoji, CJK, accents)
    tok = support.learner_tokenizer(impl, name, ["token_bytes"])
    for text, ids in support.cases(name):
        want = (" " + text).encode("utf-8") if text else b""
        assert engine.decode_bytes(list(ids)) == want  # the reference agrees
        assert tok.decode_bytes(list(ids)) == want, (
            f"{name}: llama.cpp's ids for an input of {len(text)} characters decode to other bytes")


def test_byte_tokens(impl):
    """A BYTE token <0xXX> stands for the single byte 0xXX, for all 256 values (and is bytes, not str or int)."""
    for b in range(256):
        got = impl.token_bytes(f"<0x{b:02X}>", TokenType.BYTE)
        assert type(got) is bytes, f"token_bytes must return bytes, not {type(got).__name__}"
        assert got == bytes([b]), f"<0x{b:02X}> must be the one byte 0x{b:02X}"
    assert impl.token_bytes("<0xZZ>", TokenType.BYTE) == b"<0xZZ>", "a BYTE text that is not <0xXX> is its UTF-8"


def test_control_unknown_and_user_defined_are_their_text(impl):
    """CONTROL, UNKNOWN and USER_DEFINED tokens are their text as UTF-8, never read through normal_bytes.

    CONTROL, UNKNOWN and USER_DEFINED tokens of real vocabularies are their text as UTF-8, never read through
    normal_bytes (deepseek-coder's user-defined 'õ' is two bytes of UTF-8, not the byte 0xF5).
    """
    samples = []
    for name in ("smollm2", "deepseek-coder", "command-r", "mpt", "llama-spm", "phi-3"):
        tok = support.engine_tokenizer(name)
        for i, kind in enumerate(tok._types):  # the engine's table, after llama.cpp's fix-ups
            if kind in (TokenType.CONTROL, TokenType.UNKNOWN, TokenType.USER_DEFINED):
                samples.append((tok.id_to_token(i), kind))
    picked = random.Random(14).sample(samples, 300) + [s for s in samples if len(s[0]) == 1]
    for text, kind in picked:
        got = impl.token_bytes(text, kind, byte_level_bytes)
        assert got == text.encode("utf-8"), f"a token of type {kind} must decode to its text {text!r} as UTF-8"


def test_normal_tokens(impl):
    """NORMAL tokens use normal_bytes when given, and otherwise read '▁' as a space.

    NORMAL tokens use normal_bytes when it is given (byte-level: 'Ġ' is a space) and otherwise read '▁' as a
    space, as the engine decodes SmolLM2's and Llama 2's vocabularies.
    """
    rng = random.Random(1)
    smol = support.engine_tokenizer("smollm2")
    for i in rng.sample(range(smol.vocab_size), 300):
        if smol.token_type(i) == TokenType.NORMAL:
            got = impl.token_bytes(smol.id_to_token(i), TokenType.NORMAL, byte_level_bytes)
            assert got == smol.decode_bytes([i]), f"SmolLM2 token {i} decodes to other bytes"
    spm = support.engine_tokenizer("llama-spm")
    for i in rng.sample(range(spm.vocab_size), 300):
        if spm.token_type(i) == TokenType.NORMAL:
            got = impl.token_bytes(spm.id_to_token(i), TokenType.NORMAL)
            assert got == spm.decode_bytes([i]), f"without normal_bytes, Llama 2 token {i} decodes to other bytes"


def test_unused_and_undefined_are_nothing(impl):
    """UNUSED (5) and UNDEFINED (0) tokens stand for no bytes at all."""
    for text in ("<unused0>", "[PAD151650]", "hello", "<0x41>", "▁x"):
        for kind in (TokenType.UNUSED, TokenType.UNDEFINED):
            got = impl.token_bytes(text, kind, byte_level_bytes)
            assert got == b"" and type(got) is bytes, f"a token of type {kind} must decode to b''"


def test_user_defined_tokens_round_trip(impl):
    """Text holding user-defined tokens decodes back to itself with your token_bytes.

    Text holding user-defined tokens (deepseek-coder's accented letters and <|User|>, command-r's turn tokens)
    encodes to those ids and decodes back to the same text with your token_bytes.
    """
    for name, text in (("deepseek-coder", "<|User|> õ÷Á ýÀÿ and øú <|Assistant|>þü"),
                       ("command-r", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi there<|END_OF_TURN_TOKEN|>")):
        engine = support.engine_tokenizer(name)
        ids = engine.encode(text)
        assert sum(engine.token_type(i) == TokenType.USER_DEFINED for i in ids) >= 2
        tok = support.learner_tokenizer(impl, name, ["token_bytes"])
        assert tok.decode(ids) == text, f"{name}: user-defined tokens must decode to their literal text"


def test_smollm2_chat_prompts_decode(impl):
    """The ids llama.cpp evaluated for SmolLM2's chat prompts (control tokens included) decode to the prompt text."""
    tok = support.learner_tokenizer(impl, "smollm2", ["token_bytes"])
    for prompt in support.manifest_prompts():
        assert tok.decode(prompt["ids"]) == prompt["text"], f"prompt {prompt['name']!r} decodes to another text"
