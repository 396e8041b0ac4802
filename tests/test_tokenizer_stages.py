"""The tokenizer's stages one by one against Hugging Face ``tokenizers`` and sentencepiece, and the features
around them: streaming decoders, encode_file, offsets of a GGUF tokenizer, refusals by JSON path."""

from __future__ import annotations

import json
import random
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bytes2logits import assets
from bytes2logits.engine import normalizers as N
from bytes2logits.engine import pretokenizers as P
from bytes2logits.engine.tokenizer import Tokenizer
from bytes2logits.engine.tokenizer_json import serde_json_float
from bytes2logits.errors import TokenizerError

hf = pytest.importorskip("tokenizers", reason="HF tokenizers is the oracle of the stages")
from tokenizers import Regex  # noqa: E402
from tokenizers import normalizers as HN  # noqa: E402
from tokenizers import pre_tokenizers as HP  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import tokenizer_json_parity as parity  # noqa: E402

SETTINGS = settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
TRICKY = list("aeiouAEIOU ΣσİIΩ\u2126\u212b\u00c5ﬁ①½ \t\n\x00\x07\u200b\ufffd中文각\u1100\u1161\u11a8\u0300\u0301"
              "\u0323\u0327\u0344\u0308\u0f73\u0b47\u0b3e\u1e0b\u0345\u05b0é¸\u00a0\u2003\u00ad")
TEXT = st.one_of(st.text(st.sampled_from(TRICKY), max_size=12),
                 st.text(st.characters(exclude_categories=["Cn", "Cs"]), max_size=12))


def _hf_aligned(normalizer, text):
    """HF's normalized text and, per character, the original span (read through a one-char-per-token model)."""
    tok = hf.Tokenizer(hf.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = HP.Split("", "isolated")
    tok.normalizer = normalizer
    return normalizer.normalize_str(text), tok.encode(text).offsets


NORMALIZERS = [
    (HN.NFC(), N.NFC()), (HN.NFKC(), N.NFKC()), (HN.NFD(), N.NFD()), (HN.NFKD(), N.NFKD()),
    (HN.Lowercase(), N.Lowercase()), (HN.BertNormalizer(), N.BertNormalizer()),
    (HN.BertNormalizer(lowercase=False, strip_accents=True), N.BertNormalizer(lowercase=False, strip_accents=True)),
    (HN.Sequence([HN.NFKC(), HN.Lowercase()]), N.NormalizerSequence([N.NFKC(), N.Lowercase()])),
    (HN.Replace(" ", "▁"), N.Replace(" ", "▁")), (HN.Replace("a", "xyz"), N.Replace("a", "xyz")),
    (HN.Replace(Regex(r"\p{Zs}"), " "), N.Replace(r"\p{Zs}", " ", is_regex=True)),
    (HN.Replace(Regex("[\u00ad\u200b]"), ""), N.Replace("[\u00ad\u200b]", "", is_regex=True)),
    (HN.Prepend("▁"), N.Prepend("▁")), (HN.StripAccents(), N.StripAccents()),
]


@SETTINGS
@given(TEXT, st.integers(0, len(NORMALIZERS) - 1))
def test_normalizers_and_their_alignment_equal_hf(text, k):
    """Text and per-character alignment equal HF's (BERT: except characters their Unicode tables disagree on)."""
    theirs, ours = NORMALIZERS[k]
    if isinstance(ours, (N.BertNormalizer, N.StripAccents)) and any(
            not c.isascii() and ours.normalize("a" + c) != theirs.normalize_str("a" + c) for c in text):
        return  # a mark or letter that Python's Unicode 14 tables and HF's classify differently
    want, spans = _hf_aligned(theirs, text)
    got, align = ours.normalize_aligned(text, [(i, i + 1) for i in range(len(text))])
    assert ours.normalize(text) == want
    assert (got, align) == (want, spans)


BEHAVIORS = dict(zip(["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"], P.BEHAVIORS))
PRE = [(HP.Split(Regex(r"[-\s]"), b, invert=inv), P.Split(r"[-\s]", B, inv)) for b, B in BEHAVIORS.items()
       for inv in (False, True)]
PRE += [(HP.Digits(individual_digits=x), P.Digits(x)) for x in (True, False)]
PRE += [(HP.BertPreTokenizer(), P.BertPreTokenizer()), (HP.WhitespaceSplit(), P.WhitespaceSplit())]
PRE += [(HP.ByteLevel(add_prefix_space=a, use_regex=u), P.ByteLevel(a, u))
        for a in (False, True) for u in (False, True)]
PRE += [(HP.Metaspace(prepend_scheme=s, split=sp), P.Metaspace(prepend_scheme=s, split=sp))
        for s in ("always", "first", "never") for sp in (True, False)]
PRE += [(HP.Sequence([HP.Digits(individual_digits=True), HP.ByteLevel(add_prefix_space=False)]),
         P.PreTokenizerSequence([P.Digits(True), P.ByteLevel(False)]))]


@SETTINGS
@given(st.one_of(st.text(st.sampled_from(list("ab -\t\n12٣é中!?.,'sS▁\u00a0\u3000\u0301😀")), max_size=14),
                 st.text(st.characters(exclude_categories=["Cn", "Cs"]), max_size=10)),
       st.integers(0, len(PRE) - 1))
def test_pre_tokenizers_equal_hf(text, k):
    """Pieces and their original spans equal HF's; the fast path gives the same pieces."""
    theirs, ours = PRE[k]
    want = theirs.pre_tokenize_str(text)
    got = [(p, (al[0][0], al[-1][1])) for p, al in ours.split_aligned(text, [(i, i + 1) for i in range(len(text))])]
    assert got == want
    assert ours.split(text) == [p for p, _ in want]


@pytest.fixture(scope="module")
def loaded():
    return {name: parity.load(name)[0] for name in parity.FILES}


@SETTINGS
@given(st.data())
def test_streaming_chunks_concatenate_to_decode(loaded, data):
    """For every decoder family (ByteLevel, WordPiece, Metaspace + ByteFallback) and any ids, even ones that
    split characters: the chunks of stream() concatenate to decode(ids)."""
    name = data.draw(st.sampled_from(sorted(loaded)))
    tok = loaded[name]
    ids = data.draw(st.lists(st.integers(0, tok.vocab_size - 1), max_size=12))
    skip = data.draw(st.booleans())
    stream = tok.stream(skip_special=skip)
    assert "".join([stream.step(i) for i in ids] + [stream.flush()]) == tok.decode(ids, skip_special=skip)


def test_streams_hold_back_only_what_is_incomplete(loaded):
    """An emoji split over byte-level tokens, and a byte-fallback run, come out once complete; other text at once."""
    for name in ("qwen3", "unigram-mon"):
        tok = loaded[name]
        ids = tok.encode("ok 🦜 done")
        stream = tok.stream()
        chunks = [stream.step(i) for i in ids]
        assert "".join(chunks[:2]).strip() == "ok", "text before the emoji comes out at once"
        tokens = [tok.id_to_token(i) for i in ids]
        waiting = [t for t, c in zip(tokens, chunks) if c == "" and t != "▁"]
        assert waiting and all(t.startswith("<0x") or "ðŁ" in t or len(t) == 1 for t in waiting), tokens
        assert sum("🦜" in c for c in chunks) == 1, "the emoji comes out once, whole"
        assert stream.flush() == ""


def test_gguf_tokenizer_offsets_equal_hf_on_smollm2():
    """SmolLM2 read from its GGUF gives the ids and offsets HF gives for the tokenizer.json HF writes from it."""
    gguf = Tokenizer.from_gguf(assets.path("smollm2"))
    _, theirs = parity.load("smollm2")
    theirs.encode_special_tokens = True
    for text in random.Random(4).sample(assets.botchan_text().splitlines(), 200) + ["a  b\n\n 2024 😀 é"]:
        e = theirs.encode(text, add_special_tokens=False)
        assert gguf.encode(text, return_offsets=True) == (e.ids, e.offsets), text


def _peak_bytes(tok, path) -> tuple[int, int]:
    """(lines, peak traced bytes) of encoding ``path`` line by line."""
    tracemalloc.start()
    count = sum(1 for _ in tok.encode_file(path, progress=False))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return count, peak


def test_encode_file_memory_does_not_grow_with_the_file(tmp_path):
    """Encoding a file 8x larger needs about the same peak memory: lines are read and encoded one at a time."""
    tok = Tokenizer.from_file(assets.path("qwen3-tokenizer"))
    lines = [line + "\n" for line in assets.botchan_text().split("\n")[:400]]
    tok.encode("".join(lines))  # fill the piece cache, so that only the file's own cost is measured
    small, big = tmp_path / "small.txt", tmp_path / "big.txt"
    small.write_text("".join(lines) * 2, encoding="utf-8")
    big.write_text("".join(lines) * 16, encoding="utf-8")
    n_small, peak_small = _peak_bytes(tok, small)
    n_big, peak_big = _peak_bytes(tok, big)
    assert (n_small, n_big) == (2 * len(lines), 16 * len(lines))
    assert peak_big < 1.5 * peak_small + 100_000, f"{peak_small} B for {small.stat().st_size} B, {peak_big} B for 8x"
    for line, ids in zip(lines, tok.encode_file(small)):
        assert ids == tok.encode(line)


def test_encode_file_shows_progress_on_long_files(tmp_path, capsys, monkeypatch):
    """Over PROGRESS_BYTES (10 MB) a progress bar in bytes appears by default; smaller files are quiet unless
    asked. (The threshold is lowered here to keep the test fast.)"""
    from bytes2logits.engine import tokenizer as tokenizer_module

    assert tokenizer_module.PROGRESS_BYTES == 10_000_000
    monkeypatch.setattr(tokenizer_module, "PROGRESS_BYTES", 10_000)
    tok = Tokenizer.from_file(assets.path("bert-wordpiece"))
    path = tmp_path / "long.txt"
    path.write_text("one two three four five six seven eight nine ten\n" * 400, encoding="utf-8")
    assert sum(1 for _ in tok.encode_file(path)) == 400
    assert "encode long.txt" in capsys.readouterr().err
    short = tmp_path / "short.txt"
    short.write_text("a b\n" * 10, encoding="utf-8")
    list(tok.encode_file(short))
    assert capsys.readouterr().err == ""
    list(tok.encode_file(short, progress=True))
    assert "encode short.txt" in capsys.readouterr().err


def test_encode_iterable_and_its_errors(tmp_path):
    tok = Tokenizer.from_file(assets.path("bert-wordpiece"))
    assert list(tok.encode_iterable(["a b", "c"])) == [tok.encode("a b"), tok.encode("c")]
    with pytest.raises(TypeError):
        list(tok.encode_iterable("a str is not an iterable of texts"))
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\n\xff\xfe\n")
    with pytest.raises(UnicodeDecodeError):
        list(tok.encode_file(bad))


def test_unigram_viterbi_equals_sentencepiece():
    """The engine's Unigram model built from sentencepiece's own Botchan model gives sentencepiece's ids."""
    spm = pytest.importorskip("sentencepiece")
    from bytes2logits.engine.models import Unigram

    model_file = assets.path("sentencepiece-models") / "botchan_en_unigram_1000.model"
    sp = spm.SentencePieceProcessor(model_file=str(model_file))
    pieces = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    model = Unigram(pieces, sp.unk_id())
    model.exclude([sp.id_to_piece(i) for i in range(sp.get_piece_size()) if sp.is_control(i)])
    same = total = 0
    for line in assets.botchan_text().splitlines():
        text = " ".join(line.split())  # sentencepiece's normalizer folds whitespace; ASCII lines only
        if not text or not text.isascii():
            continue
        words = ("▁" + text.replace(" ", "▁")).replace("▁", " ▁").split(" ")
        ids = [i for w in words if w for i in model.tokenize(w)]
        total += 1
        same += ids == sp.encode(text)
    assert total > 3000 and same == total


REFUSALS = [
    (("version",), "2.0", r"version"),
    (("model", "type"), "WordLevel", r"model\.type"),
    (("model", "dropout"), 0.1, r"model\.dropout"),
    (("model", "end_of_word_suffix"), "</w>", r"model\.end_of_word_suffix"),
    (("model", "merges"), ["a"], r"model\.merges\[0\]"),
    (("normalizer",), {"type": "Precompiled", "precompiled_charsmap": ""}, r"normalizer\.type"),
    (("normalizer",), {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Nmt"}]},
     r"normalizer\.normalizers\[1\]\.type"),
    (("pre_tokenizer",), {"type": "Split", "pattern": {"Regex": "("}, "behavior": "Isolated"},
     r"pre_tokenizer\.pattern\.Regex"),
    (("pre_tokenizer",), {"type": "Metaspace", "prepend_scheme": "sometimes"}, r"pre_tokenizer\.prepend_scheme"),
    (("post_processor",), {"type": "RobertaProcessing"}, r"post_processor\.type"),
    (("decoder",), {"type": "CTC"}, r"decoder\.type"),
    (("added_tokens",), [{"id": 0, "content": "x", "single_word": True}], r"added_tokens\[0\]\.single_word"),
    (("added_tokens",), [{"id": 0, "content": "x", "normalized": True}], r"added_tokens\[0\]\.normalized"),
    (("surprise",), 1, r"surprise"),
]


@pytest.mark.parametrize("where, value, field", REFUSALS, ids=[f for _, _, f in REFUSALS])
def test_refusals_name_the_json_path(where, value, field):
    """Each value outside the supported subset is a TokenizerError whose message starts with its JSON path."""
    data = json.loads(assets.path("qwen3-tokenizer").read_text(encoding="utf-8"))
    target = data
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    with pytest.raises(TokenizerError, match=rf"^tokenizer\.json: {field}"):
        Tokenizer.from_json(data)


def test_numbers_are_read_as_serde_json_reads_them():
    """HF reads 10654038311011167e-15 with two roundings; so do we (and plain floats elsewhere stay exact)."""
    assert serde_json_float("-10.654038311011167") == -10.654038311011169 != float("-10.654038311011167")
    assert serde_json_float("0.5") == 0.5 and serde_json_float("-1e-05") == -1e-05 and serde_json_float("3") == 3.0
    assert serde_json_float("18446744073709551616.5") == 1.8446744073709552e19
