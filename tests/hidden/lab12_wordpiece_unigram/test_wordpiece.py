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


def spans_case(wp, word, settings=""):
    got = wp.tokenize_spans(word)
    return got, f"{word!r}{settings}: your tokens are {got!r}"


@pytest.mark.weight(2)
def test_longest_match_first(impl):
    """At each position the LONGEST vocabulary entry wins; positions are inside the word."""
    vocab = {"[UNK]": 0, "un": 1, "##aff": 2, "##able": 3, "u": 4, "##n": 5, "##a": 6, "##affable": 7}
    wp = impl.WordPiece(vocab, 0)
    got, said = spans_case(wp, "unaffable", " (the vocabulary has '##aff' and '##affable')")
    assert got == [(1, 0, 2), (7, 2, 9)], said
    for word, ids in [("un", [1]), ("u", [4])]:
        assert wp.tokenize(word) == ids, f"{word!r} is itself an entry: one token"


@pytest.mark.weight(2)
def test_no_prefix_on_the_first_piece(impl):
    """The first piece is looked up WITHOUT '##' (only later pieces carry it): '##a' cannot start a word."""
    vocab = {"[UNK]": 0, "a": 1, "##a": 2, "##b": 3}
    wp = impl.WordPiece(vocab, 0)
    for word, want in [("ab", [(1, 0, 1), (3, 1, 2)]), ("aa", [(1, 0, 1), (2, 1, 2)]), ("b", [(0, 0, 1)])]:
        got, said = spans_case(wp, word, " with the vocabulary a, ##a, ##b")
        assert got == want, said


@pytest.mark.weight(2)
def test_no_cover_is_one_unk_for_the_whole_word(impl):
    """A word with a position no entry covers is ONE [UNK] spanning the whole word, not an [UNK] per character."""
    vocab = {"[UNK]": 0, "a": 1, "##b": 2}
    wp = impl.WordPiece(vocab, 0)
    for word in ["abx", "xab", "abxb"]:
        got, said = spans_case(wp, word, " (x has no entry)")
        assert got == [(0, 0, len(word))], said


@pytest.mark.weight(2)
def test_too_long_is_one_unk(impl):
    """A word of MORE than max_input_chars_per_word characters is one [UNK]; a word of exactly that many is not."""
    vocab = {"[UNK]": 0, "a": 1, "##a": 3, "##b": 2}
    wp = impl.WordPiece(vocab, 0, max_input_chars_per_word=4)
    got, said = spans_case(wp, "abbbb", " with max_input_chars_per_word=4")
    assert got == [(0, 0, 5)], said
    got, said = spans_case(wp, "abbb", " with max_input_chars_per_word=4")
    assert (0, 0, 4) not in got, said


def test_length_counts_characters(impl):
    """max_input_chars_per_word counts characters, not UTF-8 bytes: 'éééé' has 4 (and 8 bytes)."""
    vocab = {"[UNK]": 0, "é": 1, "##é": 2}
    got, said = spans_case(impl.WordPiece(vocab, 0, max_input_chars_per_word=5), "éééé",
                           " with max_input_chars_per_word=5")
    assert (0, 0, 4) not in got, said


def test_without_unk_id_an_error(impl):
    """With unk_id None, a word that would be [UNK] raises TokenizerError (never an empty or None token)."""
    with pytest.raises(errors.TokenizerError):
        impl.WordPiece({"a": 1, "##b": 2}, None).tokenize_spans("x")


def test_empty_word(impl):
    """An empty word has no tokens."""
    assert impl.WordPiece({"[UNK]": 0, "a": 1}, 0).tokenize_spans("") == [], "'' must give []"


def test_continuing_prefix(impl):
    """continuing_subword_prefix is the prefix of every later piece: '@@' instead of '##' when given."""
    vocab = {"un": 3, "@@aff": 4, "##aff": 5}
    got, said = spans_case(impl.WordPiece(vocab, None, continuing_subword_prefix="@@"), "unaff",
                           " with continuing_subword_prefix='@@'")
    assert got == [(3, 0, 2), (4, 2, 5)], said


def test_word_prefix(impl):
    """word_prefix goes in front of the first piece (GGUF's '▁word' spelling): '▁un' starts 'unaffable'."""
    vocab = {"▁un": 0, "aff": 1, "able": 2, "un": 3}
    got, said = spans_case(impl.WordPiece(vocab, None, continuing_subword_prefix="", word_prefix="▁"), "unaffable",
                           " with word_prefix='▁' and continuing_subword_prefix=''")
    assert got == [(0, 0, 2), (1, 2, 5), (2, 5, 9)], said


@pytest.mark.weight(3)
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
        got = wp.tokenize(w)
        assert got == [t.id for t in hf.model.tokenize(w)], (
            f"BERT's vocabulary: {w[:40]!r} gets other ids than Hugging Face's WordPiece: yours are {got[:12]!r}")


def test_speed(impl, reference, bert):
    """200 long words on BERT's vocabulary: at most 3x the reference's time (look up no candidate longer than all)."""
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
