"""Parity with llama.cpp: every vocab fixture's expected ids, one test per vocab file.

llama.cpp ships vocab-only GGUF files with ``.inp`` (inputs separated by ``\\n__ggml_vocab_test__\\n``) and
``.out`` (one line of expected ids per input). Its ``test-tokenizer-0`` encodes each input with
``add_special=false, parse_special=false``, which here is ``encode(text)`` with the defaults. Vocab files
of a model type we do not implement are reported as skipped with the reason; the table of results is
printed at the end of the module (run with ``-rs`` to see skip reasons too).

SmolLM2 has no fixture. Its ids are checked against an independent oracle: HF ``tokenizers`` (installed
with transformers) built from the same GGUF vocabulary and merges with SmolLM2's pre-tokenizer
(individual digits, then GPT-2 byte-level), plus hand-checked properties.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bytes2logits import assets
from bytes2logits.engine.gguf import GGUFReader
from bytes2logits.engine.tokenizer import SUPPORTED_MODELS, Tokenizer
from bytes2logits.errors import TokenizerError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from make_tokenizer_json import llama_cpp_cases  # noqa: E402  (the reader of llama.cpp's .inp/.out files)

try:
    MODELS = Path(assets.path("llama-cpp-models"))
except Exception:  # pragma: no cover - assets not downloaded
    MODELS = None

VOCABS = sorted(MODELS.glob("ggml-vocab-*.gguf")) if MODELS else []
ROWS: list[tuple[str, str, str, str, str]] = []


def read_fixture(path: Path) -> list[tuple[str, list[int]]]:
    """The (input, expected ids) pairs of a vocab file, read the way test-tokenizer-0 reads them."""
    return llama_cpp_cases(path)


@pytest.fixture(scope="module", autouse=True)
def parity_table(request):
    """Print the parity table (vocab, type, pre, inputs, matched) once the module's tests have run."""
    yield
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    if reporter is None or not ROWS:
        return
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():  # teardown output is captured otherwise
        reporter.write_line("")
        reporter.write_line(f"{'vocab':<22} {'type':<7} {'pre':<15} {'inputs':>6} {'matched':>8}")
        for row in sorted(ROWS):
            reporter.write_line(f"{row[0]:<22} {row[1]:<7} {row[2]:<15} {row[3]:>6} {row[4]:>8}")


@pytest.mark.parametrize("vocab", VOCABS, ids=lambda p: p.name[len("ggml-vocab-"):-len(".gguf")])
def test_vocab_matches_llama_cpp(vocab: Path):
    name = vocab.name[len("ggml-vocab-"):-len(".gguf")]
    reader = GGUFReader(vocab)
    model = reader.get("tokenizer.ggml.model")
    pre = reader.get("tokenizer.ggml.pre", "(missing)")
    has_fixture = Path(str(vocab) + ".inp").exists()
    if model not in SUPPORTED_MODELS:
        # Not implemented (Unigram/t5, gemma4): refused with an error that names the type, never guessed.
        with pytest.raises(TokenizerError, match=repr(model)):
            Tokenizer.from_gguf(reader)
        ROWS.append((name, model, pre, "-", "refused"))
        return
    tok = Tokenizer.from_gguf(reader)
    if not has_fixture:
        # no expected ids: at least it loads, and (byte-level BPE) decodes its own encoding exactly
        text = "Hello world! 2024 naïve 東京 🦙\n\tx  y"
        ids = tok.encode(text)
        if model == "gpt2":
            assert tok.decode(ids) == text
        ROWS.append((name, model, pre, "-", "no .out"))
        return
    cases = read_fixture(vocab)
    failures = [(text, expected, tok.encode(text)) for text, expected in cases
                if tok.encode(text) != expected]
    ROWS.append((name, model, pre, str(len(cases)), str(len(cases) - len(failures))))
    assert not failures, "\n".join(f"{t!r}: expected {e[:20]} got {g[:20]}" for t, e, g in failures[:5])


# ---------------------------------------------------------------------- SmolLM2 (the course model)

@pytest.fixture(scope="module")
def smol():
    return Tokenizer.from_gguf(assets.path("smollm2"))


@pytest.fixture(scope="module")
def smol_oracle():
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers

    md = GGUFReader(assets.path("smollm2")).metadata
    vocab = {t: i for i, t in enumerate(md["tokenizer.ggml.tokens"])}
    merges = [tuple(m.split(" ")) for m in md["tokenizer.ggml.merges"]]
    hf = tokenizers.Tokenizer(models.BPE(vocab, merges))
    hf.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    return hf


SMOL_TEXTS = [
    "Hello world", " Hello World!", "I've been 'told he's there, 'RE you sure?", "2024-05-17: 3.14159",
    "    indented\n\n\tcode()  ", "naïve café, Привет мир, 東京タワー, 🦙🚀 😶‍🌫️", "<|im_end|> is plain text",
    "x" * 300, "- " * 200, "a\r\nb\u00a0c\u2028d",
]


def test_smollm2_metadata(smol):
    assert smol.model == "gpt2" and smol.pre == "smollm"
    assert smol.vocab_size == 49152
    assert (smol.bos_token, smol.eos_token) == ("<|im_start|>", "<|im_end|>")
    assert smol.add_bos is False
    assert smol.eos_id in smol.stop_ids and smol.token_to_id("<|endoftext|>") in smol.stop_ids
    assert "<|im_start|>" in (smol.chat_template or "")


def test_smollm2_matches_hf_tokenizers(smol, smol_oracle):
    texts = SMOL_TEXTS + [text for text, _ in read_fixture(MODELS / "ggml-vocab-gpt-2.gguf")]
    for text in texts:
        assert smol.encode(text) == smol_oracle.encode(text).ids, text


def test_smollm2_hand_checked(smol):
    # whole common words are single tokens, the space travels with the word
    assert [smol.id_to_token(i) for i in smol.encode("Hello world")] == ["Hello", "Ġworld"]
    # the smollm pre-tokenizer puts every digit in its own piece
    assert [smol.decode([i]) for i in smol.encode("2024")] == ["2", "0", "2", "4"]
    # a templated prompt parses its markers; the same text from a user does not
    templ = "<|im_start|>user\nhi<|im_end|>\n"
    assert smol.encode(templ, allowed_special="all")[0] == smol.token_to_id("<|im_start|>")
    assert not set(smol.encode(templ)) & {smol.bos_id, smol.eos_id}
    for text in SMOL_TEXTS:
        assert smol.decode(smol.encode(text)) == text
