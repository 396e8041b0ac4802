"""Chapter 14's tables and figure (bytes2logits.lessons.tokenizer_view) show what the engine computes."""

import numpy as np
import pytest

from bytes2logits.engine.models import bpe_merge
from bytes2logits.engine.tokenizer import Tokenizer
from bytes2logits.lessons.tokenizer_view import (
    TYPE_COLOURS,
    merge_steps,
    metadata_table,
    pipeline_rows,
    short_value,
    token_type_map,
)

RANKS = {"a b": 0, "ab c": 1, "b c": 2, "c d": 3, "abc d": 4}


def test_merge_steps_start_from_characters_and_end_at_bpe_merge():
    for piece in ["abcd", "abcabc", "dcba", "bcd", "x"]:
        steps = merge_steps(piece, RANKS)
        assert steps[0] == (None, list(piece))
        assert steps[-1][1] == bpe_merge(list(piece), RANKS)
        for (_, before), (rank, after) in zip(steps, steps[1:]):
            assert "".join(after) == piece and after != before
            assert rank in RANKS.values()
        ranks = [r for r, _ in steps[1:]]
        assert ranks == sorted(set(ranks))


def test_merge_steps_shows_the_rank_at_which_each_cut_appears():
    assert merge_steps("abcd", RANKS) == [(None, ["a", "b", "c", "d"]), (0, ["ab", "c", "d"]), (1, ["abc", "d"]),
                                          (4, ["abcd"])]


def test_short_value_cuts_long_values_and_counts_arrays():
    assert short_value(np.array([3, 3, 1], dtype=np.int32)) == "[3] 3, 3, 1"
    assert short_value("line\nbreak") == "'line\\nbreak'"
    cut = short_value("y" * 100, width=12)
    assert len(cut) == 12 and cut.endswith("…")


def test_metadata_table_marks_missing_keys_and_keeps_order():
    table = metadata_table({"A": {"tokenizer.ggml.model": "gpt2", "general.name": "x"},
                            "B": {"tokenizer.ggml.scores": [0.5], "tokenizer.ggml.model": "llama"}})
    lines = table.splitlines()
    assert lines[0].split()[-2:] == ["A", "B"]
    assert [line.split()[0] for line in lines[1:]] == ["ggml.model", "ggml.scores"]
    assert "—" in lines[2] and "[1] 0.5" in lines[2] and "general" not in table


def _tiny(**extra):
    tokens = ["<unk>", "<s>", "</s>", "a", "b", "ab", "  "] + [f"<0x{b:02X}>" for b in range(256)]
    md = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
          "tokenizer.ggml.scores": [0.0, 0.0, 0.0, -1.0, -1.0, -0.5, -2.0] + [0.0] * 256,
          "tokenizer.ggml.token_type": [2, 3, 3, 1, 1, 1, 4] + [6] * 256, **extra}
    return Tokenizer.from_metadata(md)


def test_pipeline_rows_read_the_post_processor_from_the_tokenizer():
    rows = pipeline_rows({"with bos": _tiny(), "bare": _tiny(**{"tokenizer.ggml.add_bos_token": False})})
    table = {row[0]: row[1:] for row in rows}
    assert table["stage"] == ("with bos", "bare")
    assert table["post-processor"] == ("<s>", "(adds nothing)")
    assert table["added tokens"][0] == "3 control/unknown, 1 user-defined"
    assert all(cell.startswith("SentencePieceBPE(") for cell in table["model"])
    assert table["pre-tokenizer"] == ("(none)", "(none)")


def _lines(ax):
    """(x positions, colour) of each group of vertical lines drawn on ``ax``."""
    import matplotlib

    out = []
    for c in ax.collections:
        segments = c.get_segments()
        if segments:
            out.append((sorted(float(seg[0][0]) for seg in segments), matplotlib.colors.to_hex(c.get_colors()[0])))
    return sorted(out)


def test_token_type_map_shows_both_ends_of_each_vocabulary():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    types = [3, 1, 6, 6] + [1] * 10 + [4, 1, 4] + [1] * 5 + [3, 4]
    fig = token_type_map({"v": types, "short": [1, 3]}, window=4)
    left, right = fig.axes[:2]
    assert _lines(left) == sorted([([0.5], TYPE_COLOURS[3]), ([2.5, 3.5], TYPE_COLOURS[6]), ([1.5], TYPE_COLOURS[3])])
    # the last ids end at the right edge: "v" ends ... 3, 4 and the two-id vocabulary "short" ends 1, 3
    assert _lines(right) == sorted([([2.5], TYPE_COLOURS[3]), ([3.5], TYPE_COLOURS[4]), ([3.5], TYPE_COLOURS[3])])
    notes = [t.get_text() for t in right.texts]
    assert notes[0].startswith("2 control, 3 user-defined, 2 byte")
    assert "(2 of them between the two windows)" in notes[0]
    assert notes[1] == "1 control"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["normal", "control", "user-defined", "byte"]
    plt.close(fig)
