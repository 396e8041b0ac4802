"""Chapter 18's measuring helpers (bytes2logits.lessons.speed_view), checked against what they measure.

* ``call_cost`` counts against facts it does not compute itself: the 2-D tensors of the file, the model's
  own weight arrays and its KV-cache arrays.
* ``timed_components`` changes no logit, restores the model exactly (even after an exception), and times
  what it says: the weight products land in the product components and nowhere else.
* ``blas_threads`` really changes the running library's thread count and puts it back; ``thread_comparison``
  gives the same kind of answer in-process and through its subprocess.
* ``record_calls`` / ``lookup_groups`` describe a real ``generate(lookup=...)`` run: the groups partition the
  output, and their accepted and drafted counts equal the engine's own counters.
* the plots draw the numbers they are given (read back from the figure).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from bytes2logits.engine.generate import Sampler, generate
from bytes2logits.engine.lookup import LookupConfig
from bytes2logits.engine.model import Model
from bytes2logits.lessons import speed_view as sv

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from parity_fixtures import tiny_models  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny random llama of tools/tiny_models.py (untied output head), loaded with a 128-position cache."""
    pytest.importorskip("gguf")
    path = tmp_path_factory.mktemp("speed") / "tiny-llama.gguf"
    tiny_models().write_tiny_gguf(path, "llama", seed=0)
    return Model.from_gguf(path, n_ctx=128)


# ------------------------------------------------------------------------------------------------
# best_time and call_cost
# ------------------------------------------------------------------------------------------------

def test_best_time_is_the_fastest_run():
    delays = iter([0.03, 0.005, 0.02])
    best = sv.best_time(lambda: time.sleep(next(delays)), 3)
    assert 0.005 <= best < 0.02


def test_call_cost_counts_the_files_matrices(tiny):
    infos = tiny.reader.tensors
    assert not tiny.tied_output
    # one token: every 2-D tensor but the embedding (a lookup) is multiplied once, 2 FLOPs per weight
    matrices = sum(i.n_elements for name, i in infos.items() if len(i.shape) == 2 and name != "token_embd.weight")
    one = sv.call_cost(tiny, 1, 0, last_only=True)
    assert one.matmul_flops == 2 * matrices
    # the bytes of those weights are the model's float32 arrays minus the embedding and the norm vectors
    norms = sum(i.n_elements for i in infos.values() if len(i.shape) == 1) * 4
    assert one.weight_bytes == tiny.weight_bytes - tiny.token_embd.nbytes - norms
    # the KV cache: the positions read (n_past + n) and written (n), from the cache arrays' own size
    per_position = (tiny.k_cache.nbytes + tiny.v_cache.nbytes) / tiny.n_ctx
    assert sv.call_cost(tiny, 1, 10).kv_bytes == per_position * (11 + 1)
    assert sv.call_cost(tiny, 5, 10).kv_bytes == per_position * (15 + 5)
    assert sv.call_cost(tiny, 1, 0, last_only=True, layer_bits=16).weight_bytes == one.weight_bytes / 2


def test_call_cost_attention_and_intensity(tiny):
    hp = tiny.hparams
    near, far = sv.call_cost(tiny, 1, 0), sv.call_cost(tiny, 1, 100)
    assert far.matmul_flops == near.matmul_flops
    assert far.flops - near.flops == 4 * hp.head_dim * hp.n_head * hp.n_layer * 100   # 100 more keys and values
    # all rows through the head without last_only; many tokens reuse every weight read
    assert sv.call_cost(tiny, 8, 0).matmul_flops == 8 * one_row(tiny)
    intensities = [sv.call_cost(tiny, n, 0, last_only=True).intensity for n in (1, 4, 16, 64)]
    assert all(a < b for a, b in zip(intensities, intensities[1:]))
    assert sv.call_cost(tiny, 1, 0).intensity < 0.5 < intensities[-1]   # float32: at most 2 FLOPs per 4 bytes


def one_row(model):
    return sv.call_cost(model, 1, 0).matmul_flops


# ------------------------------------------------------------------------------------------------
# timed_components and weight_products_seconds
# ------------------------------------------------------------------------------------------------

def test_timed_components_changes_nothing_and_restores(tiny):
    ids = [5, 17, 42, 99, 3]
    tiny.reset()
    expected = tiny.forward(ids)
    ops, output = tiny.ops, tiny.output
    layers = [(L.qkv, L.out, L.gate_up, L.down) for L in tiny.layers]
    with sv.timed_components(tiny) as timer:
        tiny.reset()
        got = tiny.forward(ids)
        step = tiny.forward([7], start_pos=len(ids), last_only=True)
    assert np.array_equal(got, expected)
    assert step.shape == (1, tiny.vocab_size)
    assert tiny.ops is ops and tiny.output is output and "forward" not in vars(tiny)
    assert [(L.qkv, L.out, L.gate_up, L.down) for L in tiny.layers] == layers
    assert len(timer.calls) == 2
    for row in timer.calls:
        assert all(row[c] > 0 for c in sv.COMPONENTS)
        assert row["rest"] == pytest.approx(row["total"] - sum(row[c] for c in sv.COMPONENTS))
        assert 0 < sum(row[c] for c in sv.COMPONENTS) < row["total"]
    assert timer.best()["total"] == min(r["total"] for r in timer.calls)
    assert set(timer.mean()) == set(timer.calls[0])
    timer.reset()
    with pytest.raises(ValueError):
        timer.best()


def test_timed_components_restores_after_an_error(tiny):
    ops = tiny.ops
    with pytest.raises(ValueError):
        with sv.timed_components(tiny):
            tiny.forward([tiny.vocab_size + 5])          # an id outside the vocabulary
    assert tiny.ops is ops and "forward" not in vars(tiny) and not isinstance(tiny.layers[0].qkv, sv._Timed)


def test_weight_products_are_the_product_components(tiny):
    with sv.timed_components(tiny) as timer:
        seconds = sv.weight_products_seconds(tiny, 3, repeats=1)
        spent = dict(timer.current)                       # no forward call finished: the open record
    assert seconds > 0
    assert all(spent[c] > 0 for c in sv.WEIGHT_PRODUCTS)
    assert all(spent[c] == 0 for c in sv.COMPONENTS if c not in sv.WEIGHT_PRODUCTS)
    assert sum(spent.values()) <= seconds * 1.5 + 1e-3


def test_weight_products_passes_give_the_time_per_pass(tiny, monkeypatch):
    calls = []
    monkeypatch.setattr(sv, "best_time", lambda f, repeats: (f(), calls.append(1), 6.0)[-1])
    layers, head = sv.weight_matrices(tiny)
    counted = []
    monkeypatch.setattr(type(head), "__call__", lambda self, x: counted.append(len(x)) or x @ self.weight.T)
    assert sv.weight_products_seconds(tiny, 2, passes=3) == pytest.approx(2.0)  # 6 s for 3 passes
    assert len(calls) == 1 and len(counted) == 3 * (len(layers) + 1)


# ------------------------------------------------------------------------------------------------
# BLAS threads
# ------------------------------------------------------------------------------------------------

def _current_threads():
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        functions = sv._openblas_functions()
        return functions[1]() if functions else None
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"][0]


def test_blas_threads_sets_and_restores():
    if sv.blas_control() is None:
        pytest.skip("no way to set BLAS threads in this process (the chapter measures in subprocesses)")
    before = _current_threads()
    with sv.blas_threads(2):
        assert _current_threads() == 2
        with sv.blas_threads(1):
            assert _current_threads() == 1
        assert _current_threads() == 2
    assert _current_threads() == before
    with pytest.raises(ValueError):
        with sv.blas_threads(0):
            pass


def test_thread_comparison_in_process_and_in_a_subprocess(tiny):
    ids = list(range(10, 30))
    methods = ["subprocess"] + (["inprocess"] if sv.blas_control() else [])
    for method in methods:
        result = sv.thread_comparison(tiny, ids, (1,), repeats=1, decode_repeats=1, method=method)
        assert result["method"] == method and set(result["rows"]) == {1}
        row = result["rows"][1]
        assert 0 < row["decode_s"] < 60 and 0 < row["prefill_s"] < 60
    with pytest.raises(ValueError):
        sv.thread_comparison(tiny, ids, (1,), method="threads")


# ------------------------------------------------------------------------------------------------
# Watching prompt lookup
# ------------------------------------------------------------------------------------------------

def test_lookup_groups_by_hand():
    calls = [sv.ForwardCall([1, 2, 3], 0, 0.0),
             sv.ForwardCall([10, 11, 99], 3, 0.0),    # guess 11 right, 99 wrong: the model picked 12
             sv.ForwardCall([12, 13], 5, 0.0)]        # guess 13 right; then 14, the run's last token
    groups = sv.lookup_groups(calls, 3, [10, 11, 12, 13, 14])
    assert [(g.first, g.tokens, g.drafted, g.accepted, g.rejected) for g in groups] == [
        (0, [10], 0, 0, 0), (1, [11, 12], 2, 1, 1), (3, [13, 14], 1, 1, 0)]
    with pytest.raises(ValueError, match="not the generated token"):
        sv.lookup_groups(calls[:1] + [sv.ForwardCall([77], 3, 0.0)], 3, [10, 11])
    with pytest.raises(ValueError, match="prefill"):
        sv.lookup_groups(calls[1:], 3, [10, 11])


class _Bytes:
    """A tokenizer for ids < 256: each id is one byte; 255 stops."""

    stop_ids = frozenset({255})

    def decode_bytes(self, ids):
        return bytes(int(i) for i in ids)

    def decode(self, ids):
        return self.decode_bytes(ids).decode("latin-1")


class _Script:
    """A model whose row for position p makes ``sequence[p + 1]`` the clear favourite (any input)."""

    def __init__(self, sequence, n_ctx=256):
        self.sequence, self.n_ctx, self.vocab_size, self.n_past = list(sequence), n_ctx, 256, 0

    def forward(self, ids, start_pos=0, *, last_only=False):
        positions = range(start_pos, start_pos + len(ids))
        rows = []
        for p in positions:
            row = np.full(self.vocab_size, -5.0, dtype=np.float32)
            row[self.sequence[min(p + 1, len(self.sequence) - 1)]] = 10.0
            rows.append(row)
        self.n_past = start_pos + len(ids)
        return np.array(rows[-1:] if last_only else rows)


def test_record_calls_explains_a_lookup_run():
    verse = [ord(c) for c in "the fog rolled in from the sea; "]
    prompt = verse * 2 + [ord(c) for c in "then "]
    sequence = prompt + verse * 2 + [ord(c) for c in "at last it cleared."] + [255]
    model = _Script(sequence)
    plain = generate(model, _Bytes(), prompt, sampler=Sampler.greedy(), max_tokens=120)
    list(plain)
    model.n_past = 0
    config = LookupConfig(draft=5, ngram=(2, 3), min_accepted=0)
    with sv.record_calls(model) as calls:
        run = generate(model, _Bytes(), prompt, sampler=Sampler.greedy(), max_tokens=120, lookup=config)
        list(run)
    assert "forward" not in vars(model)
    assert run.tokens == plain.tokens and run.accepted > 10
    assert len(calls) == run.forward_calls and calls[0].start_pos == 0 and len(calls[0].ids) == len(prompt)
    groups = sv.lookup_groups(calls, len(prompt), run.tokens)
    assert [t for g in groups for t in g.tokens] == run.tokens          # a partition of the output, in order
    assert [g.first for g in groups] == list(np.cumsum([0] + [len(g.tokens) for g in groups[:-1]]))
    assert sum(g.accepted for g in groups) == run.accepted
    assert sum(g.drafted for g in groups) == run.drafted
    page = sv.lookup_html(groups, _Bytes())
    assert page.count("background:#bbf7d0") == run.accepted
    assert page.count("✗") == sum(1 for g in groups if g.rejected)


def test_recorders_keep_the_last_only_signature(tiny):
    """generate() asks for the last row only when forward takes ``last_only``; the wrappers must keep it."""
    import inspect

    for watch in (sv.record_calls, sv.timed_components):
        with watch(tiny):
            assert "last_only" in inspect.signature(tiny.forward).parameters
    tiny.reset()
    with sv.record_calls(tiny) as calls:
        run = generate(tiny, _Bytes(), [5, 6, 7, 8], sampler=Sampler.greedy(), max_tokens=3, stop_ids=[])
        list(run)
    assert [len(c.ids) for c in calls] == [4, 1, 1]


# ------------------------------------------------------------------------------------------------
# Pictures
# ------------------------------------------------------------------------------------------------

def test_roofline_draws_both_ceilings_and_the_points():
    import matplotlib.pyplot as plt

    points = {"decode": (0.5, 6.0), "prefill": (100.0, 80.0)}
    fig = sv.roofline(120.0, 15.0, points, marks={"q4": 2.7})
    ax = fig.axes[0]
    x, y = ax.lines[0].get_data()
    assert np.allclose(y, np.minimum(120.0, x * 15.0))
    drawn = {line.get_label(): (line.get_xdata()[0], line.get_ydata()[0]) for line in ax.lines[1:]
             if line.get_label() in points}
    assert drawn == points
    assert any(np.allclose(line.get_xdata(), 2.7) for line in ax.lines)        # the mark
    assert any(np.allclose(line.get_xdata(), 120.0 / 15.0) for line in ax.lines)   # the ridge
    plt.close(fig)


def test_profile_bars_are_shares_of_each_total():
    import matplotlib.pyplot as plt

    a = dict.fromkeys(sv.COMPONENTS, 0.001) | {"rest": 0.002, "total": 0.011}
    b = dict.fromkeys(sv.COMPONENTS, 0.01) | {"gate_up": 0.5, "rest": 0.0, "total": 0.58}
    fig = sv.profile_bars({"a": a, "b": b})
    ax = fig.axes[0]
    for row in (0, 1):
        widths = [p.get_width() for p in ax.patches if abs(p.get_y() + p.get_height() / 2 - row) < 1e-9]
        assert sum(widths) == pytest.approx(1.0)
    plt.close(fig)


def test_verify_cost_bars_and_line():
    import matplotlib.pyplot as plt

    fig = sv.verify_cost([1, 2, 9], [0.05, 0.12, 0.2])
    ax = fig.axes[0]
    assert [round(p.get_height(), 6) for p in ax.patches] == [50.0, 120.0, 200.0]
    assert np.allclose(ax.lines[0].get_ydata(), [50.0, 100.0, 450.0])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "9"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["n decode steps of 1 token each", "one call of n tokens"]
    assert ax.get_xlabel().startswith("tokens in the call, n")
    plt.close(fig)
    with pytest.raises(ValueError):
        sv.verify_cost([2, 4], [0.1, 0.2])
