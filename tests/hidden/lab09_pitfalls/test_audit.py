"""Hidden suite, lab 09 task 3: audit_vocab, the round-trip audit of a vocabulary."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

CLASSES = ("special", "partial", "mismatch", "ok")

# A small vocabulary whose classes are known by construction. The encoder below writes "ab" as id 2 and
# every other character as its own id, so "ba" and "abc" never come back as their own ids.
PIECES = [
    b"a",              # 0 ok
    b"b",              # 1 ok
    b"ab",             # 2 ok
    b"ba",             # 3 mismatch: encodes as [1, 0]
    b"\xe6\x97",       # 4 partial: two thirds of 日
    b"\xa5",           # 5 partial: a lone continuation byte
    b"<s>",            # 6 special (even though its text would encode)
    b"",               # 7 mismatch: the empty text encodes as []
    b"abc",            # 8 mismatch: encodes as [2, 9]
    b"c",              # 9 ok
    b"\xff",           # 10 special, and also not UTF-8: special comes first
    "é".encode(),      # 11 mismatch: the encoder has no id for é
]
KNOWN = {"special": [6, 10], "partial": [4, 5], "mismatch": [3, 7, 8, 11], "ok": [0, 1, 2, 9]}
CHAR_IDS = {"a": 0, "b": 1, "c": 9}
# Why each id of PIECES is in its class, in words (for the feedback: the rule, never code).
WHY = {
    3: "b'ba' decodes to text that encodes as two other ids, so it is a mismatch",
    4: "b'\\xe6\\x97' is two thirds of a character, not valid UTF-8 on its own: partial (decode strictly, "
       "without errors='ignore' or 'replace')",
    5: "b'\\xa5' is a lone continuation byte, not valid UTF-8 on its own: partial (decode strictly)",
    6: "id 6 is in special_ids: special comes first, whatever its text",
    7: "the empty piece encodes as [], which is not [7]: a mismatch",
    8: "b'abc' encodes as [2, 9]: more than one id, so a mismatch, even though it starts with a real token",
    10: "id 10 is in special_ids: special comes first, before the UTF-8 check",
    11: "b'\\xc3\\xa9' (é) encodes as an id the vocabulary does not have: a mismatch",
}

# Weights: sorting ids into the right class carries most of the points; argument checks a small share.
RULE, CONCEPT, VALIDATION = 4, 2, 1


def toy_encode(text):
    ids, i = [], 0
    while i < len(text):
        if text.startswith("ab", i):
            ids.append(2)
            i += 2
        else:
            ids.append(CHAR_IDS.get(text[i], 1000 + ord(text[i])))
            i += 1
    return ids


def check_shape(result, n):
    assert type(result) is dict, "audit_vocab returns a dict"
    assert set(result) == set(CLASSES), "the four classes are the keys, even when a class is empty"
    for name in CLASSES:
        ids = result[name]
        assert type(ids) is list and all(type(i) is int for i in ids), f"{name}: a list of plain ints"
        assert ids == sorted(ids), f"{name}: ids ascending"
    assert sorted(i for name in CLASSES for i in result[name]) == list(range(n)), "every id exactly once"


def first_misplaced(result, known):
    """The smallest id whose class differs from ``known``, with the class ``result`` gave it."""
    placed = {i: name for name in CLASSES for i in result.get(name, [])}
    wrong = [i for name in CLASSES for i in known[name] if placed.get(i) != name]
    return (min(wrong), placed.get(min(wrong))) if wrong else (None, None)


@pytest.mark.weight(RULE)
def test_hand_built_vocabulary(impl):
    """Each id of a small hand-built vocabulary lands in the class it was built for."""
    result = impl.audit_vocab(PIECES, toy_encode, special_ids={6, 10})
    check_shape(result, len(PIECES))
    i, got = first_misplaced(result, KNOWN)
    assert i is None, f"your audit put id {i} in {got}: " + WHY.get(i, "check the order of the four classes")
    assert result == KNOWN


@pytest.mark.weight(RULE)
def test_encoders_that_add_tokens(impl):
    """ok means encode(text) is exactly [id]: with an encoder that adds a BOS or EOS id, no text token is ok."""
    with_bos = impl.audit_vocab(PIECES, lambda t: [50] + toy_encode(t), special_ids={6, 10})
    check_shape(with_bos, len(PIECES))
    assert with_bos["ok"] == [], ("encode adds a BOS id in front of every text, so no text encodes as exactly "
                                  "its own id: compare the whole list with [id], not whether the id is in it")
    with_eos = impl.audit_vocab(PIECES, lambda t: toy_encode(t) + [51], special_ids={6, 10})
    assert with_eos["ok"] == [], ("encode adds an EOS id after every text, so no text encodes as exactly its own "
                                  "id: compare the whole list with [id], not its first id")
    assert with_bos["partial"] == with_eos["partial"] == [4, 5]


@pytest.mark.weight(CONCEPT)
def test_without_specials(impl):
    """With no special ids, <s> is checked like any text and a lone 0xFF byte is partial."""
    result = impl.audit_vocab(PIECES, toy_encode)
    check_shape(result, len(PIECES))
    assert result["special"] == []
    assert 10 in result["partial"], "without special ids, the lone byte 0xFF (id 10) is not valid UTF-8: partial"
    assert result["partial"] == [4, 5, 10]
    assert 6 in result["mismatch"]


@pytest.mark.weight(VALIDATION)
def test_encode_may_return_any_sequence(impl):
    """encode may return a tuple or a NumPy array; only the ids matter."""
    as_tuple = impl.audit_vocab(PIECES, lambda t: tuple(toy_encode(t)), [6, 10])
    as_array = impl.audit_vocab(PIECES, lambda t: np.array(toy_encode(t), dtype=np.int64), [6, 10])
    assert as_tuple == KNOWN and as_array == KNOWN


@pytest.mark.weight(VALIDATION)
def test_not_bytes_is_an_error(impl):
    """A piece that is not bytes (here a str at id 1) is a TypeError whose message names the id."""
    with pytest.raises(TypeError) as info:
        impl.audit_vocab([b"a", "b"], toy_encode)
    assert "1" in str(info.value)


@pytest.mark.weight(CONCEPT)
def test_specials_are_not_encoded(impl):
    """Special ids are classified without ever being passed to encode."""
    seen = []

    def spy(text):
        seen.append(text)
        return toy_encode(text)

    impl.audit_vocab([b"a", b"<|im_end|>"], spy, special_ids={1})
    assert seen == ["a"]


@pytest.mark.weight(RULE)
@given(st.lists(st.binary(max_size=4), max_size=24), st.sets(st.integers(0, 30), max_size=4), st.data())
def test_random_vocabularies(impl, pieces, specials, data):
    """On random byte pieces and a random lookup-table encoder, the classes follow the definitions exactly."""
    table = {}
    for p in pieces:
        try:
            text = p.decode("utf-8")
        except UnicodeDecodeError:
            continue
        table[text] = data.draw(st.lists(st.integers(0, len(pieces) + 2), max_size=2))

    def encode(text):
        return table[text]

    result = impl.audit_vocab(pieces, encode, specials)
    check_shape(result, len(pieces))
    for i, p in enumerate(pieces):
        if i in specials:
            want = "special"
        else:
            try:
                want = "ok" if table[p.decode("utf-8")] == [i] else "mismatch"
            except UnicodeDecodeError:
                want = "partial"
        assert i in result[want]


@pytest.mark.weight(RULE)
def test_smollm2_vocabulary(impl):
    """On SmolLM2's 49 152 tokens: its control tokens are special, non-UTF-8 pieces partial, and ok means round trip."""
    import random

    from bytes2logits import assets
    from bytes2logits.engine.tokenizer import Tokenizer

    tok = Tokenizer.from_gguf(assets.path("smollm2"))
    pieces = [tok.decode_bytes([i]) for i in range(tok.vocab_size)]
    specials = [i for i in range(tok.vocab_size) if tok.is_special(i)]
    result = impl.audit_vocab(pieces, tok.encode, specials)
    check_shape(result, tok.vocab_size)
    assert result["special"] == specials
    not_utf8 = []
    for i, p in enumerate(pieces):
        try:
            p.decode("utf-8")
        except UnicodeDecodeError:
            if i not in specials:
                not_utf8.append(i)
    assert result["partial"] == not_utf8
    for i in random.Random(9).sample(result["ok"], 300):
        assert tok.encode(pieces[i].decode("utf-8")) == [i]
    for i in result["mismatch"]:
        assert tok.encode(pieces[i].decode("utf-8")) != [i]


# Qwen3 ids whose own text does not encode back to them, for two reasons the test works out below:
# NFC changes the text (a letter spelled with a combining mark, Greek oxia forms, CJK compatibility
# ideographs), or Qwen3's pre-tokenizer cuts it (fullwidth digits, Arabic and Hebrew marks, Thai vowel
# marks, a variation selector, a literal "<s>" that is not a control token in Qwen3).
QWEN3_CANDIDATES = [132515, 146474, 150619, 147457, 149365, 151138,
                    77150, 80091, 126012, 126940, 134071, 128090, 139305, 142999, 128245, 119349]


@pytest.mark.weight(RULE)
def test_qwen3_vocabulary_has_mismatches(impl):
    """Part of Qwen3's vocabulary: text that NFC changes or the pre-tokenizer cuts is mismatch, <think> is ok."""
    import random
    import unicodedata

    from bytes2logits.engine.pretokenizers import PRE_TOKENIZERS, split
    from bytes2logits.engine.tokenizer import TokenType
    from bytes2logits.lessons import vocab_files

    tok = vocab_files.load_qwen3()
    assert type(tok.normalizer).__name__ == "NFC", "test premise: Qwen3 normalizes its input to NFC"
    pattern = PRE_TOKENIZERS["qwen2"].compiled  # Qwen3's Split regex is Qwen2's
    rng = random.Random(9)
    tail = range(tok.vocab_size - 40, tok.vocab_size)
    specials = [i for i in tail if tok.is_special(i)]
    # Added tokens such as "<think>" are not control tokens: encode matches them in plain text, before the
    # pre-tokenizer could cut them, so they come back as themselves.
    user_defined = [i for i in tail if tok.token_type(i) == TokenType.USER_DEFINED]
    assert user_defined, "test premise: Qwen3 has added tokens such as <think>"
    user_texts = [tok.decode_bytes([i]).decode("utf-8") for i in user_defined]
    ids = sorted(set(QWEN3_CANDIDATES) | set(specials) | set(user_defined)
                 | set(rng.sample(range(tok.vocab_size), 250)))
    rng.shuffle(ids)

    # Expected class of each id, from first principles rather than from any audit:
    # * decode(encode(x)) == NFC(x), so if NFC(x) != x no id list that decodes to x, [id] included, can come out;
    # * merges never cross a pre-token boundary and each piece costs >= 1 token, so a text the pre-tokenizer
    #   cuts into 2+ pieces encodes to 2+ ids;
    # * anything else (added tokens included) is ok exactly when encode(text) == [id] (the definition).
    want, reasons = {}, {"nfc": 0, "cut": 0}
    for i in ids:
        piece = tok.decode_bytes([i])
        if tok.is_special(i):
            want[i] = "special"
            continue
        try:
            text = piece.decode("utf-8")
        except UnicodeDecodeError:
            want[i] = "partial"
            continue
        if unicodedata.normalize("NFC", text) != text:
            want[i], reasons["nfc"] = "mismatch", reasons["nfc"] + 1
        elif not any(u in text for u in user_texts) and len(split(text, pattern)) > 1:
            assert len(tok.encode(text)) > 1, f"test premise: {text!r} is cut, so it needs 2+ ids"
            want[i], reasons["cut"] = "mismatch", reasons["cut"] + 1
        else:
            want[i] = "ok" if tok.encode(text) == [i] else "mismatch"
    assert reasons["nfc"] >= 6 and reasons["cut"] >= 10, f"test premise: the candidates were chosen for this {reasons}"
    assert {"special", "partial", "ok"} <= set(want.values())
    assert all(want[i] == "ok" for i in user_defined), "test premise: added tokens encode as themselves"

    # The audit sees a small vocabulary: position k stands for Qwen3 id ids[k].
    position = {real: k for k, real in enumerate(ids)}
    pieces = [tok.decode_bytes([i]) for i in ids]

    def encode(text):
        return [position.get(real, -1 - real) for real in tok.encode(text)]

    result = impl.audit_vocab(pieces, encode, {position[i] for i in specials})
    check_shape(result, len(ids))
    for name in CLASSES:
        got = {ids[k] for k in result[name]}
        expected = {i for i in ids if want[i] == name}
        assert got == expected, (f"{name}: wrongly included {sorted(got - expected)[:5]}, "
                                 f"missing {sorted(expected - got)[:5]}")
