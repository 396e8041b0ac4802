"""Chapter 16's pictures (bytes2logits.lessons.forward_view) draw exactly what they are given.

The RoPE pairing is checked against the rotation itself: a unit vector along one dimension, rotated by
``apply_rope``, may only leak into the other dimension of its pair, so the pairs the diagram shows are the
ones the engine rotates together.
"""

import matplotlib
import numpy as np
import pytest

from bytes2logits.engine import ops
from bytes2logits.lessons import forward_view as fv

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


class _Decoder:
    """A stand-in tokenizer: decode([id]) looks the id up."""

    def __init__(self, pieces):
        self.pieces = pieces

    def decode(self, ids):
        assert len(ids) == 1
        return self.pieces[ids[0]]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_token_labels_show_spaces_newlines_and_tabs_and_cut_long_pieces():
    tok = _Decoder({0: " Paris", 1: "\n\n", 2: "\tx", 3: "", 4: "abcdefghijklmnop", 5: "<|im_start|>"})
    labels = fv.token_labels(tok, np.array([0, 1, 2, 3, 4, 5]), width=8)
    assert labels == ["␣Paris", "↵↵", "⇥x", "<3>", "abcdefg…", "<|im_st…"]
    assert all(len(label) <= 8 for label in labels)


@pytest.mark.parametrize("style", ["norm", "neox"])
@pytest.mark.parametrize("head_dim, rope_dim", [(8, 8), (16, 16), (64, 64), (12, 8)])
def test_pair_index_names_the_dimensions_apply_rope_mixes(style, head_dim, rope_dim):
    index = fv.pair_index(head_dim, style, rope_dim)
    assert index.shape == (head_dim,)
    assert sorted(index[index >= 0].tolist()) == sorted(list(range(rope_dim // 2)) * 2)  # each pair twice
    assert (index[rope_dim:] == -1).all()
    # rotate each unit vector to position 1, where every pair turns by a non-zero angle
    cos, sin = ops.rope_angles(2, rope_dim, 10000.0)
    for dim in range(head_dim):
        x = np.zeros((1, 1, head_dim), dtype=np.float32)
        x[0, 0, dim] = 1
        ops.apply_rope(x, cos[1:2], sin[1:2], style)
        touched = set(np.flatnonzero(np.abs(x[0, 0]) > 1e-12).tolist())
        if index[dim] < 0:
            assert touched == {dim}
        else:
            partners = set(np.flatnonzero(index == index[dim]).tolist())
            assert dim in touched and touched <= partners and len(partners) == 2
            if abs(float(sin[1, index[dim]])) > 1e-12:
                assert touched == partners


def test_pair_index_examples():
    assert fv.pair_index(8, "norm").tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert fv.pair_index(8, "neox").tolist() == [0, 1, 2, 3, 0, 1, 2, 3]


def test_rope_pairs_diagram_colours_a_cell_like_its_partner_and_unlike_the_others():
    fig = fv.rope_pairs_diagram(16)
    axes = fig.axes
    assert len(axes) == 2
    for ax, style in zip(axes, ("norm", "neox")):
        index = fv.pair_index(16, style)
        cells = sorted(ax.patches, key=lambda p: p.get_x())
        assert len(cells) == 16
        colours = [tuple(np.round(c.get_facecolor(), 6)) for c in cells]
        numbers = [t.get_text() for t in sorted(ax.texts, key=lambda t: t.get_position()[0])]
        assert numbers == [str(i) for i in index]
        for a in range(16):
            for b in range(16):
                assert (colours[a] == colours[b]) == (index[a] == index[b])


def test_attention_grid_draws_the_weights_and_blanks_the_future():
    rng = np.random.default_rng(0)
    n = 5
    patterns = []
    for _ in range(3):
        w = np.tril(rng.random((n, n)))
        patterns.append(w / w.sum(axis=1, keepdims=True))
    labels = [f"t{i}" for i in range(n)]
    fig = fv.attention_grid(patterns, labels, ["a", "b", "c"], ncols=2)
    shown = [ax for ax in fig.axes if ax.get_visible() and ax.images]
    assert [ax.get_title() for ax in shown] == ["a", "b", "c"]
    hidden = [ax for ax in fig.axes if not ax.get_visible()]
    assert len(hidden) == 1                                       # a 2 x 2 grid for 3 patterns
    future = np.triu(np.ones((n, n), bool), k=1)
    for ax, pattern in zip(shown, patterns):
        data = ax.images[0].get_array()
        assert np.array_equal(np.ma.getmaskarray(data), future)
        assert np.allclose(data.filled(np.nan)[~future], pattern[~future])
        assert [t.get_text() for t in ax.get_xticklabels()] == labels
        assert [t.get_text() for t in ax.get_yticklabels()] == labels
        assert ax.images[0].get_clim() == (0, 1)
    assert any(ax.get_label() == "<colorbar>" for ax in fig.axes)


def test_attention_grid_refuses_mismatched_inputs():
    p = np.eye(3)
    with pytest.raises(ValueError, match="titles"):
        fv.attention_grid([p, p], ["a", "b", "c"], ["one"])
    with pytest.raises(ValueError, match="shape"):
        fv.attention_grid([p], ["a", "b"], ["one"])


def test_logit_lens_plot_draws_rank_plus_one_on_an_inverted_log_axis_and_the_probabilities():
    ranks = [5000, 120, 3, 0]
    probs = [0.0, 0.01, 0.2, 0.9]
    fig = fv.logit_lens_plot(ranks, probs, " Madrid")
    left, right = fig.axes
    assert np.array_equal(left.lines[0].get_ydata(), np.array(ranks) + 1)
    assert np.array_equal(left.lines[0].get_xdata(), np.arange(4))
    assert left.get_yscale() == "log" and left.yaxis_inverted()
    assert np.allclose(right.lines[0].get_ydata(), probs)
    assert right.get_ylim() == (0, 1)
    assert "' Madrid'" in left.get_ylabel() and "' Madrid'" in right.get_ylabel()
    with pytest.raises(ValueError, match="ranks"):
        fv.logit_lens_plot([1, 2], [0.5], "x")


def test_parameter_bars_draw_each_count_with_its_share():
    counts = {"embedding": 3_000_000, "ffn": 1_000_000, "norms": 0}
    fig = fv.parameter_bars(counts)
    (ax,) = fig.axes
    widths = [bar.get_width() for bar in ax.patches]
    assert np.allclose(widths, [3.0, 1.0, 0.0])
    assert [t.get_text() for t in ax.get_yticklabels()] == list(counts)
    texts = [t.get_text() for t in ax.texts]
    assert "(75.0%)" in texts[0] and "(25.0%)" in texts[1] and "(0.0%)" in texts[2]
    assert "4.0 M parameters" in ax.get_title()
