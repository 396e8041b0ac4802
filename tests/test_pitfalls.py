"""Chapter 09's library side: UDHR samples, the cached fertility table, and digit splitting on real pre-tokenizers.

The lab functions themselves (split_digits, fertility, relative_fertility, audit_vocab) are checked by the
hidden suite of lab 09 run against the package (``pytest tests/hidden/lab09_pitfalls``).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bytes2logits.engine.pretokenizers import PRE_TOKENIZERS, split
from bytes2logits.lessons import pitfalls


@pytest.fixture(scope="module")
def samples():
    return pitfalls.udhr_samples()


def test_udhr_samples_cover_hundreds_of_living_languages(samples):
    assert len(samples) > 500
    assert list(samples) == sorted(samples)
    en = samples["en_Latn"]
    assert en.name == "English" and en.script == "Latn" and "human" in en.text
    assert all(len(s.text) >= 100 for s in samples.values())
    scripts = {s.script for s in samples.values()}
    assert {"Latn", "Cyrl", "Arab", "Deva", "Hans", "Ethi"} <= scripts
    assert "Egyp" not in scripts and "Xsux" not in scripts  # transliteration demos and dead scripts are left out
    assert not any(line.strip() == "" for s in samples.values() for line in s.text.split("\n"))


def test_udhr_samples_parsing(tmp_path):
    """Escapes are undone, repeated and contained lines are dropped, historical languages are left out."""
    (tmp_path / "xx_Latn.textproto").write_text(
        'id: "xx_Latn"\nlanguage: "xx"\nscript: "Latn"\nname: "Ex \\"quoted\\""\npopulation: 5\n'
        'sample_text {\n  masthead_full: "Aa"\n  styles: "It\\\'s short"\n'
        '  specimen_16: "It\\\'s short and long enough.\\nSecond line\\\\ here."\n'
        '  specimen_21: "Second line\\\\ here."\n}\n', encoding="utf-8")
    (tmp_path / "yy_Latn.textproto").write_text(
        'id: "yy_Latn"\nscript: "Latn"\nname: "Old"\nhistorical: true\n'
        'sample_text {\n  specimen_16: "Ancient words that are long enough to count."\n}\n', encoding="utf-8")
    got = pitfalls.udhr_samples(tmp_path, min_chars=10)
    assert list(got) == ["xx_Latn"]
    assert got["xx_Latn"].name == 'Ex "quoted"'
    assert got["xx_Latn"].text == "It's short and long enough.\nSecond line\\ here."
    assert pitfalls.udhr_samples(tmp_path, min_chars=1000) == {}
    with pytest.raises(FileNotFoundError):
        pitfalls.udhr_samples(tmp_path / "nothing")


def test_fertility_table_is_cached_and_recomputed_when_empty(tmp_path, monkeypatch):
    monkeypatch.setenv("BYTES2LOGITS_CACHE", str(tmp_path))
    calls = []

    def by_bytes(text):
        calls.append(text)
        return list(text.encode("utf-8"))

    texts = {"en_Latn": "hello world", "ja_Jpan": "こんにちは"}
    tokenizers = {"bytes": by_bytes, "chars": lambda t: [ord(c) for c in t]}
    cold = pitfalls.fertility_table(tokenizers, texts, progress=False)
    assert cold == {"bytes": {"en_Latn": 1.0, "ja_Jpan": 3.0}, "chars": {"en_Latn": 1.0, "ja_Jpan": 1.0}}
    files = list((tmp_path / "computed").glob("fertility-*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text()) == cold
    calls.clear()
    assert pitfalls.fertility_table(tokenizers, texts, progress=False) == cold
    assert all(c not in texts.values() for c in calls), "a warm cache encodes only the fingerprint probe"
    files[0].write_text("")
    assert pitfalls.fertility_table(tokenizers, texts, progress=False) == cold
    assert json.loads(files[0].read_text()) == cold, "an empty cache file is computed again"
    # a different tokenizer under the same name gets a different fingerprint, so it is not served stale values
    halved = {"bytes": lambda t: list(t.encode("utf-8"))[::2], "chars": lambda t: [ord(c) for c in t]}
    assert pitfalls.fertility_table(halved, texts, progress=False)["bytes"]["ja_Jpan"] == 8 / 5
    assert pitfalls.fertility_table(tokenizers, texts, cache=False, progress=False) == cold
    assert len(list((tmp_path / "computed").glob("fertility-*.json"))) == 2


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789٣²½ abc,.\n-", max_size=40))
def test_digit_rules_of_real_pre_tokenizers(text):
    """SmolLM2's pieces already isolate digits and Llama 3's group them by three: split_digits changes neither."""
    smollm = split(text, PRE_TOKENIZERS["smollm"].compiled)
    assert pitfalls.split_digits(smollm) == [p for p in smollm if p]
    llama3 = split(text, PRE_TOKENIZERS["llama3"].compiled)
    assert pitfalls.split_digits(llama3, group=3) == [p for p in llama3 if p]
    gpt2 = split(text, PRE_TOKENIZERS["gpt-2"].compiled)
    assert sum(1 for p in pitfalls.split_digits(gpt2) if p.isdigit() or p in "٣²½") == sum(
        1 for c in text if c in "0123456789٣²½")
