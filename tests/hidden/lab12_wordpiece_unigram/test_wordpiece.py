"""Hidden suite, lab 12 task 2: WordPiece on BERT's real vocabulary (oracle: HF tokenizers)."""

import json
import random

import pytest
from tokenizers import Tokenizer as HFTokenizer

from bytes2logits import assets, errors
from bytes2logits.kit.remote import timed


@pytest.fixture(scope="module")
def bert():
    path = assets.path("bert-wordpiece")
    data = json.loads(path.read_text(encoding="utf-8"))
    hf = HFTokenizer.from_file(str(path))
    hf.no_truncation()
    hf.no_padding()
    return data["model"]["vocab"], hf


def words(hf, text):
    return [w for w, _ in hf.pre_tokenizer.pre_tokenize_str(hf.normalizer.normalize_str(text))]


def test_small_vocabulary(impl):
    """Longest match first, '##' continuations, positions inside the word."""
    vocab = {"[UNK]": 0, "un": 1, "##aff": 2, "##able": 3, "u": 4, "##n": 5, "##a": 6, "##affable": 7}
    wp = impl.WordPiece(vocab, 0)
    assert wp.tokenize_spans("unaffable") == [(1, 0, 2), (7, 2, 9)], "##affable is longer than ##aff"
    assert wp.tokenize("un") == [1] and wp.tokenize("u") == [4]


def test_unknown_words(impl):
    """No cover, or too long: the whole word is one [UNK] spanning it; without an unk id, an error."""
    vocab = {"[UNK]": 0, "a": 1, "##b": 2}
    wp = impl.WordPiece(vocab, 0, max_input_chars_per_word=4)
    assert wp.tokenize_spans("abx") == [(0, 0, 3)]
    assert wp.tokenize_spans("abbbb") == [(0, 0, 5)], "5 characters > max_input_chars_per_word"
    assert wp.tokenize_spans("abbb") == [(1, 0, 1), (2, 1, 2), (2, 2, 3), (2, 3, 4)]
    assert wp.tokenize_spans("b") == [(0, 0, 1)], "'b' only exists as a continuation"
    with pytest.raises(errors.TokenizerError):
        impl.WordPiece(vocab, None).tokenize_spans("x")


def test_prefixes(impl):
    """Another continuation prefix, and a word prefix (GGUF's '▁word' spelling)."""
    vocab = {"▁un": 0, "aff": 1, "able": 2, "un": 3, "@@aff": 4}
    assert impl.WordPiece(vocab, None, continuing_subword_prefix="", word_prefix="▁").tokenize("unaffable") == [0, 1, 2]
    assert impl.WordPiece(vocab, 3, continuing_subword_prefix="@@").tokenize("unaff") == [3, 4]


def test_bert_ids_equal_hf(impl, bert):
    """BERT's 30 522-entry vocabulary: the ids of every word of UDHR and Botchan samples equal HF's."""
    from bytes2logits.lessons.pitfalls import udhr_samples

    vocab, hf = bert
    wp = impl.WordPiece(vocab, vocab["[UNK]"], continuing_subword_prefix="##", max_input_chars_per_word=100)
    rng = random.Random(5)
    texts = rng.sample(assets.botchan_text().splitlines(), 150)
    texts += [s.text for s in list(udhr_samples().values())[::15]]
    texts += ["x" * 101, "antidisestablishmentarianism", "naïve café", "中文", "don't"]
    for w in sorted({w for t in texts for w in words(hf, t)}):
        assert wp.tokenize(w) == [t.id for t in hf.model.tokenize(w)], (
            f"BERT's vocabulary: {w!r} gets other ids than Hugging Face's WordPiece")


def test_speed(impl, reference, bert):
    """200 long words (390-400 letters, max_input_chars_per_word=400) on BERT's vocabulary: at most 3x the
    reference's time. A candidate longer than the vocabulary's longest entry can never match: do not look it up."""
    vocab, hf = bert
    rng = random.Random(6)
    text = "".join(w for t in assets.botchan_text().splitlines()[:2000] for w in words(hf, t) if w.isalpha())
    ws = [text[i:i + rng.randint(390, 400)] for i in range(0, 200 * 400, 400)]

    def run(cls):
        wp = cls(vocab, vocab["[UNK]"], max_input_chars_per_word=400)
        return [wp.tokenize(w) for w in ws]

    expected, ref_time = timed(run, reference.WordPiece)
    got, t = timed(run, impl.WordPiece)
    assert got == expected, "the long words get other ids than the reference's"
    assert t <= 3 * ref_time + 0.05, f"{t:.2f} s against the reference's {ref_time:.2f} s"
