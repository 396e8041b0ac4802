"""Hidden suite, lab 01 task 2: CharTokenizer."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

SPEC = {"type": "char", "vocab": ["<unk>", "\n", " ", "a", "b"], "specials": {"unk": 0}}


def fresh(d):
    return json.loads(json.dumps(d))


@pytest.mark.weight(2)
def test_encode_known_characters(impl):
    """Each known character encodes to its index in vocab."""
    tok = impl.CharTokenizer.from_dict(fresh(SPEC))
    ids = tok.encode("ab a\nb")
    assert type(ids) is list and all(type(i) is int for i in ids), "encode() should return a list of ints"
    assert ids == [3, 4, 2, 3, 1, 4], f"encode('ab a\\nb') returned {ids} with vocab {SPEC['vocab']}"


@pytest.mark.weight(2)
def test_unknown_becomes_unk_wherever_unk_is(impl):
    """An unknown character becomes the unk id given in specials (which need not be 0)."""
    spec = {"type": "char", "vocab": ["x", "y", "?", "<unk>"], "specials": {"unk": 3}}
    tok = impl.CharTokenizer.from_dict(spec)
    ids = tok.encode("xzy")
    assert ids == [0, 3, 1], f"with specials {{'unk': 3}}, encode('xzy') returned {ids}"


@pytest.mark.weight(3)
def test_special_text_is_never_matched(impl):
    """Text that spells a special token is encoded character by character, never as the special id."""
    vocab = ["<unk>", "<eos>", "<", ">", "e", "o", "s", "\n"]
    tok = impl.CharTokenizer.from_dict({"type": "char", "vocab": vocab, "specials": {"unk": 0, "eos": 1}})
    ids = tok.encode("<eos>")
    assert 1 not in ids, "typed '<eos>' produced the special id 1: user text must never produce a special id"
    assert ids == [2, 4, 5, 6, 3]


@pytest.mark.weight(2)
def test_single_character_special_is_not_reachable_from_text(impl):
    """A special whose text is one character still never comes out of encode()."""
    vocab = ["?", "\n", "a"]
    tok = impl.CharTokenizer.from_dict({"type": "char", "vocab": vocab, "specials": {"unk": 0, "eos": 1}})
    ids = tok.encode("a\na")
    assert ids == [2, 0, 2], (f"with vocab {vocab} and specials {{'unk': 0, 'eos': 1}}, encode('a\\na') "
                              f"returned {ids}: the newline is the eos special's text, not an ordinary entry")


@pytest.mark.weight(2)
def test_decode_and_skip_special(impl):
    """decode() joins vocab entries; skip_special=True drops every id listed in specials."""
    vocab = ["<unk>", "<bos>", "<eos>", "h", "i"]
    tok = impl.CharTokenizer.from_dict({"type": "char", "vocab": vocab,
                                        "specials": {"unk": 0, "bos": 1, "eos": 2}})
    out = tok.decode([1, 3, 4, 2])
    assert out == "<bos>hi<eos>", f"decode([1, 3, 4, 2]) returned {out!r}"
    out = tok.decode([1, 3, 0, 4, 2], skip_special=True)
    assert out == "hi", f"decode([1, 3, 0, 4, 2], skip_special=True) returned {out!r} (unk is a special too)"


@pytest.mark.weight(0.5)
@pytest.mark.parametrize("bad", [5, -1, 10**6])
def test_decode_rejects_out_of_range_ids(impl, bad):
    """decode() raises ValueError for an id outside 0..len(vocab)-1, negative ids included."""
    tok = impl.CharTokenizer.from_dict(fresh(SPEC))
    with pytest.raises(ValueError) as info:
        tok.decode([3, bad])
    assert str(bad) in str(info.value), f"the error for id {bad} should name it"


@pytest.mark.weight(0.25)
@pytest.mark.parametrize("spec,field", [
    ({"type": "char", "vocab": ["<unk>", "a", "a"], "specials": {"unk": 0}}, "vocab"),
    ({"type": "char", "vocab": ["<unk>", "a"], "specials": {}}, "unk"),
    ({"type": "char", "vocab": ["<unk>", "a"], "specials": {"unk": 2}}, "unk"),
    ({"type": "char", "vocab": ["<unk>", "a"], "specials": {"unk": 0, "eos": -1}}, "eos"),
    ({"type": "word", "vocab": ["<unk>", "a"], "specials": {"unk": 0}}, "type"),
    ({"type": "char", "vocab": "abc", "specials": {"unk": 0}}, "vocab"),
    ({"type": "char", "vocab": ["<unk>", "ab"], "specials": {"unk": 0}}, "vocab"),
    ({"type": "char", "vocab": ["<unk>", "a"]}, "specials"),
])
def test_invalid_files_are_rejected_naming_the_field(impl, spec, field):
    """An invalid tokenizer dict raises ValueError whose message names the field that is wrong."""
    with pytest.raises(ValueError) as info:
        impl.CharTokenizer.from_dict(spec)
    assert field in str(info.value), f"the error for {spec} should name the field {field!r}"


def test_from_file_round_trip(impl, tmp_path):
    """from_file() reads the JSON format and gives the same tokenizer as from_dict()."""
    p = tmp_path / "tinyllm_char.json"
    p.write_text(json.dumps(SPEC), encoding="utf-8")
    tok = impl.CharTokenizer.from_file(p)
    assert tok.encode("ba b") == [4, 3, 2, 4]
    assert tok.decode(tok.encode("ba b")) == "ba b"


def test_from_file_accepts_a_string_path_and_non_ascii(impl, tmp_path):
    """from_file() accepts a str path and reads the file as UTF-8."""
    p = tmp_path / "chars.json"
    spec = {"type": "char", "vocab": ["<unk>", "é", "日", "🙂"], "specials": {"unk": 0}}
    p.write_bytes(json.dumps(spec, ensure_ascii=False).encode("utf-8"))
    tok = impl.CharTokenizer.from_file(str(p))
    assert tok.encode("é🙂日x") == [1, 3, 2, 0]


@pytest.mark.weight(2)
@given(st.lists(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=30, unique=True), st.data())
def test_round_trip_over_its_alphabet(impl, alphabet, data):
    """For any text written in the vocabulary's characters, decode(encode(text)) == text."""
    vocab = ["\x00<unk>"] + alphabet
    tok = impl.CharTokenizer.from_dict({"type": "char", "vocab": vocab, "specials": {"unk": 0}})
    text = data.draw(st.text(alphabet=alphabet, max_size=50))
    ids = tok.encode(text)
    assert all(type(i) is int and i != 0 for i in ids)
    assert tok.decode(ids) == text


@pytest.mark.weight(2)
@pytest.mark.parametrize("spec", [
    SPEC,
    {"type": "char", "vocab": ["x", "<bos>", "é", "<unk>", "🙂"], "specials": {"unk": 3, "bos": 1}},
])
def test_to_dict_is_the_file_format(impl, spec):
    """to_dict() gives the JSON structure from_dict() reads: same type, vocab and specials, JSON-serializable."""
    tok = impl.CharTokenizer.from_dict(fresh(spec))
    d = tok.to_dict()
    assert type(d) is dict, f"to_dict() returned a {type(d).__name__}, not a dict"
    try:
        text = json.dumps(d, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise AssertionError(f"to_dict() is not JSON-serializable: {e}") from None
    assert sorted(d) == ["specials", "type", "vocab"], f"to_dict() has the keys {sorted(d)}"
    assert json.loads(text) == spec, f"to_dict() of the tokenizer loaded from {spec} returned {d}"
    again = impl.CharTokenizer.from_dict(json.loads(text))
    assert again.encode("ab é🙂x") == tok.encode("ab é🙂x"), "from_dict(to_dict()) encodes differently"

