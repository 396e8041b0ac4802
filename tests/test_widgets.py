"""The chapter views are pure functions; the widgets only wire them up."""

import json
import re

import pytest
import traitlets

from bytes2logits.kit.anywidgets import static_html, utf8_explorer
from bytes2logits.kit.widgets import stream_rows, utf8_rows, utf8_table_html
from bytes2logits.lessons.basic import ByteTokenizer, StreamDecoder


def test_utf8_rows():
    rows = utf8_rows("aé🙂")
    assert [r["code point"] for r in rows] == ["U+0061", "U+00E9", "U+1F642"]
    assert [r["ids"] for r in rows] == [[97], [0xC3, 0xA9], [0xF0, 0x9F, 0x99, 0x82]]
    assert rows[1]["bytes"] == "c3 a9"


def test_table_escapes_html_and_counts():
    page = utf8_table_html("<b>")
    assert "&lt;" in page and "font-size:1.3em'><</td>" not in page
    assert "3 code point(s) &rarr; 3 byte id(s)" in page


def test_explorer_names_what_is_typed():
    w = utf8_explorer("a")
    assert w.names == {"U+0061": "LATIN SMALL LETTER A"}
    w.text = "é\x07"  # what the browser sets as you type; Python names each code point (controls have none)
    assert w.names == {"U+00E9": "LATIN SMALL LETTER E WITH ACUTE", "U+0007": "<unnamed>"}
    page = _static_part(w)
    assert "c3 a9" in page  # the no-JavaScript view is the Python table of the current text


def test_stream_rows_concatenate_to_text():
    tok = ByteTokenizer()
    rows = stream_rows(tok, tok.encode("é🙂"), StreamDecoder)
    assert "".join(r["emitted"] for r in rows) == "é🙂"
    assert rows[0]["pending"] == "c3" and rows[0]["emitted"] == ""


# -- the BPE merge stepper (chapter 03) -------------------------------------------------------------------------
from bytes2logits.lessons.bpe import train_bpe  # noqa: E402
from bytes2logits.lessons.merge_stepper import bpe_trace, merge_stepper, step_html  # noqa: E402

WORKED = " ".join(["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3)


def test_trace_learns_what_train_bpe_learns():
    """The step-by-step replay and the fast trainer agree merge for merge."""
    import random

    rng = random.Random(1)
    corpora = [WORKED, "the the the cat sat on the mat\n\n", "aaaa bbb aaaa  ab ab\tba"]
    corpora += [" ".join(rng.choice(["ab", "ba", "abc", "é", "日本", "  "]) for _ in range(40)) for _ in range(5)]
    for text in corpora:
        steps = bpe_trace(text, 30)
        traced = [s.winner for s in steps if s.winner is not None]
        assert traced == train_bpe(text, 30)[1], text


def test_trace_records_counts_ties_and_the_end():
    steps = bpe_trace(WORKED, 4)
    first = steps[0]
    assert first.tied == ((b"e", b"s"), (b"s", b"t")) and first.winner == (b"e", b"s")
    assert first.counts[(b"e", b"s")] == 9 and first.words["newest"] == tuple(bytes([c]) for c in b"newest")
    assert steps[1].words["newest"] == (b"n", b"e", b"w", b"es", b"t")
    assert [s.merges for s in steps][-1] == ((b"e", b"s"), (b"es", b"t"), (b"l", b"o"))
    short = bpe_trace("ab", 5)
    assert [s.winner for s in short] == [(b"a", b"b"), None]


def test_step_html_marks_winner_and_ties_and_escapes():
    page = step_html(bpe_trace(WORKED, 1)[0])
    assert "merged" in page and "tie, loses" in page and "es" in page
    page = step_html(bpe_trace("<b> <b> <b>", 1)[0])
    assert "&lt;" in page and "<code><</code>" not in page, "corpus text must be HTML-escaped"


def test_merge_stepper_frames_are_the_trace():
    w = merge_stepper(WORKED, num_merges=4)
    assert w.frames == [step_html(s, 8) for s in bpe_trace(WORKED, 4)]
    assert w.step == 0 and "step 2" in w.frames[1] and "es</code> + <code>t" in w.frames[1]
    w.step = 3
    with pytest.raises(traitlets.TraitError, match=r"step must be in 0\.\.3"):
        w.step = 4
    assert w.step == 3


def _static_part(widget) -> str:
    bundle = widget._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "application/vnd.jupyter.widget-view+json" in data  # JupyterLab's (kernel) view comes first
    return data["text/html"]


def test_widgets_carry_their_state_for_pages_without_a_kernel():
    w = merge_stepper(WORKED + " </script><!-- x", num_merges=3)
    page = _static_part(w)
    m = re.fullmatch(r'<div class="b2l-anywidget" data-module="merge_stepper"><script type="application/json" '
                     r'class="b2l-state">(.*?)</script><div class="b2l-fallback">(.*)</div></div>', page, re.S)
    assert m, page[:300]
    assert "</" not in m.group(1) and "<!--" not in m.group(1)  # cannot end the script element early
    assert json.loads(m.group(1)) == {"frames": w.frames, "step": 0}
    assert w.frames[0] in m.group(2)
    with pytest.raises(ValueError, match="identifier"):
        static_html("../x", {})


def test_encode_steps_follow_rank_and_match_the_tokenizer():
    """Replaying merges by rank on a piece ends in the same tokens the BPE tokenizer produces."""
    from bytes2logits.lessons.bpe import BPETokenizer, build_vocab
    from bytes2logits.lessons.merge_stepper import encode_steps

    _, merges = train_bpe(WORKED, 12)
    trail = encode_steps("lowest", merges)
    assert trail[0] == (tuple(bytes([c]) for c in b"lowest"), None)
    ranks = [r for _, r in trail[1:]]
    assert trail[-1][0] == (b"low", b"est") and sorted(ranks) == ranks, "lowest rank first"
    tok = BPETokenizer(build_vocab(merges), merges)
    for word in ["lowest", "newer", "wider", "slowest", "é"]:
        final = encode_steps(word, merges)[-1][0]
        assert [tok.decode([i]) for i in tok.encode(word)] == [t.decode("utf-8", "replace") for t in final]


def test_token_strip_marks_specials_and_escapes():
    from bytes2logits.kit.widgets import token_strip_html

    out = token_strip_html(["<|im_start|>", "user", "\n<b>", " x"], special={0}, title="a & b")
    assert out.count("<span") == 4 and "a &amp; b" in out
    assert "&lt;|im_start|&gt;" in out and "↵&lt;b&gt;" in out and "␣x" in out
    assert out.index("#1f2937") < out.index("user"), "the special token is drawn dark"
    assert out.count("#1f2937") == 1
