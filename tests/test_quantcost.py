"""Tests of chapter 15's code: the quantization-cost sweep (lessons.quantcost), the bit probe and pictures
(lessons.quant_view), and the Model's weight_transform hook the sweep relies on.

References nobody here wrote: gguf-py's dequantize (the bit maps must be the same when it is the one
probed), gguf-py's GGML_QUANT_SIZES (bits per weight), and the file's own bytes.
"""

from __future__ import annotations

import doctest
import json

import gguf
import numpy as np
import pytest

from bytes2logits import assets
from bytes2logits.engine.gguf import GGML_BLOCK_SIZES, GGMLType, GGUFReader
from bytes2logits.engine.model import Model
from bytes2logits.engine.quants import dequantize, dequantize_tensor, quantize
from bytes2logits.lessons import quant_view, quantcost

T = GGMLType


@pytest.fixture(scope="module")
def model_path():
    return assets.path("smollm2")


@pytest.fixture(scope="module")
def reader(model_path):
    r = GGUFReader(model_path)
    yield r
    r.close()


@pytest.fixture(scope="module")
def reference_model(reader):
    return Model.from_gguf(reader, n_ctx=64)


def _gguf_dequantize(raw, t, shape):
    qtype = gguf.GGMLQuantizationType(int(t))
    return gguf.quants.dequantize(np.asarray(raw).reshape(shape[0], -1), qtype).reshape(shape)


def test_docstring_examples():
    assert doctest.testmod(quantcost).failed == 0


# ------------------------------------------------------------------------------------------ bits per weight


@pytest.mark.parametrize("t", [T.F32, T.F16, T.Q8_0, T.Q5_1, T.Q5_0, T.Q4_1, T.Q4_0,
                               T.Q6_K, T.Q5_K, T.Q4_K, T.Q3_K, T.Q2_K])
def test_bits_per_weight_agree_with_gguf_py(t):
    values, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(int(t))]
    assert quantcost.bits_per_weight(t) == 8 * size / values


# ------------------------------------------------------------------------------------------ the bit probe


def test_fields_cover_every_byte_once():
    for t, fields in quant_view.FIELDS.items():
        covered = [b for _, start, end in fields for b in range(start, end)]
        assert covered == list(range(GGML_BLOCK_SIZES[t][1])), t.name


@pytest.mark.parametrize("t", list(quant_view.FIELDS), ids=lambda t: t.name)
def test_probe_finds_the_same_map_in_gguf_py(t):
    assert quant_view.probe_bits(t) == quant_view.probe_bits(t, dequant=_gguf_dequantize)


# bits per quant and per sub-block scale, as ggml-common.h's structs define them
QUANT_BITS = {T.Q8_0: 8, T.Q4_0: 4, T.Q4_1: 4, T.Q5_0: 5, T.Q5_1: 5, T.Q2_K: 2, T.Q3_K: 3, T.Q4_K: 4,
              T.Q5_K: 5, T.Q6_K: 6}
SCALE_BITS = {T.Q2_K: 4, T.Q3_K: 6, T.Q4_K: 6, T.Q5_K: 6, T.Q6_K: 8}


@pytest.mark.parametrize("t", list(quant_view.FIELDS), ids=lambda t: t.name)
def test_probe_gives_every_value_its_bits(t):
    roles = quant_view.probe_bits(t)
    n_values = GGML_BLOCK_SIZES[t][0]
    per_number: dict = {}
    for row in roles:
        for r in row:
            per_number.setdefault((r.what, r.index), []).append(r.bit)
    quants = {k: v for k, v in per_number.items() if k[0] == "q"}
    assert sorted(i for _, i in quants) == list(range(n_values))
    assert all(sorted(v) == list(range(QUANT_BITS[t])) for v in quants.values())
    scales = [v for k, v in per_number.items() if k[0] in ("scale", "min")]
    assert all(sorted(v) == list(range(SCALE_BITS[t])) for v in scales)
    assert all(sorted(v) == list(range(16)) for k, v in per_number.items() if k[0] in ("d", "m", "dmin"))


def test_probe_knows_q4_1_nibbles_and_q4_k_scale_packing():
    q41 = quant_view.probe_bits(T.Q4_1)
    def described(byte_roles):
        return [(r.what, r.index, r.bit) for r in byte_roles]

    assert described(q41[8]) == [("q", 4, b) for b in range(4)] + [("q", 20, b) for b in range(4)]
    q4k = quant_view.probe_bits(T.Q4_K)
    # scales byte 8 (block byte 12): low nibble = bits 0..3 of sub-block 4's scale, high nibble = of its min
    assert described(q4k[12]) == [("scale", 4, b) for b in range(4)] + [("min", 4, b) for b in range(4)]
    # scales byte 0: sub-block 0's 6-bit scale, then the top 2 bits of sub-block 4's
    assert described(q4k[4]) == [("scale", 0, b) for b in range(6)] + [("scale", 4, 4), ("scale", 4, 5)]


def test_probe_detects_a_kernel_that_swaps_nibbles():
    def wrong(raw, t, shape):
        blocks = np.array(raw, dtype=np.uint8).reshape(shape[0], -1)
        blocks[:, 4:] = (blocks[:, 4:] >> 4) | (blocks[:, 4:] << 4)  # swap the nibbles of every quant byte
        return dequantize(blocks.reshape(-1), t, shape)

    assert quant_view.probe_bits(T.Q4_1, dequant=wrong) != quant_view.probe_bits(T.Q4_1)


def test_pictures_draw(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs = [quant_view.block_layouts(["Q8_0", "Q4_1", "Q4_K", "Q6_K"]),
            quant_view.bit_map(T.Q6_K, byte_ranges=[(0, 2), (208, 210)]),
            quant_view.error_histograms({"a": np.linspace(-0.5, 0.5, 50), "b": np.linspace(-1, 0.5, 50)}),
            quant_view.decode_bounds({"F32": 20.0, "Q4_1": 120.0}, measured={"engine": 10.0})]
    result = {"n_positions": 3, "types": {n: {"bits_per_weight": b, "mean_kl": k, "top1": a}
                                          for n, b, k, a in [("Q8_0", 8.5, 1e-3, 0.99), ("Q4_0", 4.5, 0.3, 0.7)]}}
    figs.append(quant_view.cost_curves(result, reference_type="Q4_1"))
    for k, fig in enumerate(figs):
        fig.savefig(tmp_path / f"{k}.png")
        plt.close(fig)
    assert len(list(tmp_path.glob("*.png"))) == len(figs)


# ------------------------------------------------------------------------------------------ the transform


def test_requantize_leaves_float_tensors_alone_and_counts_changes(reader):
    stats: dict = {}
    transform = quantcost.requantize("Q4_0", stats)
    norm = dequantize_tensor(reader, "blk.0.attn_norm.weight")
    assert transform("blk.0.attn_norm.weight", T.F32, norm) is norm
    w = dequantize_tensor(reader, "blk.0.attn_k.weight")
    y = transform("blk.0.attn_k.weight", T.Q4_1, w)
    assert np.array_equal(y, dequantize(quantize(w, T.Q4_0), T.Q4_0, w.shape))
    assert stats == {"Q4_1": {"n": w.size, "changed": int(np.count_nonzero(y != w))}}
    assert 0 < stats["Q4_1"]["changed"] < w.size


def test_q4_1_weights_land_on_themselves(reader):
    """The file's Q4_1 blocks use q = 0 and q = 15, so quantizing their values to Q4_1 again gives the same
    bytes, and the same floats."""
    name = "blk.3.ffn_gate.weight"
    w = dequantize_tensor(reader, name)
    assert np.array_equal(quantize(w, T.Q4_1), reader.tensor_bytes(name))
    stats: dict = {}
    assert np.array_equal(quantcost.requantize("Q4_1", stats)(name, T.Q4_1, w), w)
    assert stats["Q4_1"]["changed"] == 0


def test_f16_transform_rounds_to_half_precision():
    w = np.array([[1 / 3] * 32], dtype=np.float32)
    y = quantcost.requantize("F16")("x", T.Q8_0, w)
    assert y.dtype == np.float32 and np.all(y == np.float32(np.float16(1 / 3)))


def test_requantize_refuses_an_unsupported_type():
    with pytest.raises(ValueError, match="Q6_K"):
        quantcost.requantize("Q6_K")


# ------------------------------------------------------------------------------------------ KL and top-1


def test_next_token_agreement_against_a_direct_formula():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 40)).astype(np.float32) * 3
    b = a + rng.standard_normal((5, 40)).astype(np.float32) * 0.5
    kl, same = quantcost.next_token_agreement(a, b)
    p = np.exp(a.astype(np.float64)) / np.exp(a.astype(np.float64)).sum(1, keepdims=True)
    q = np.exp(b.astype(np.float64)) / np.exp(b.astype(np.float64)).sum(1, keepdims=True)
    np.testing.assert_allclose(kl, (p * np.log(p / q)).sum(1), rtol=1e-9, atol=1e-12)
    assert np.all(kl > 0)
    assert same.tolist() == (a.argmax(1) == b.argmax(1)).tolist()
    with pytest.raises(ValueError):
        quantcost.next_token_agreement(a, b[:, :39])


def test_kl_is_not_symmetric_and_ignores_a_constant_shift():
    a = np.array([[4.0, 0.0, 0.0]], dtype=np.float32)
    b = np.array([[1.0, 0.0, 0.0]], dtype=np.float32)
    assert quantcost.next_token_agreement(a, b)[0][0] != pytest.approx(quantcost.next_token_agreement(b, a)[0][0])
    assert quantcost.next_token_agreement(a, a + 100)[0][0] == pytest.approx(0.0, abs=1e-12)


# ------------------------------------------------------------------------------------------ the Model hook


def test_weight_transform_sees_every_tensor_and_changes_the_logits(reader, reference_model):
    seen = {}

    def record(name, stored, w):
        seen[name] = (stored, w.shape, w.dtype)
        return w

    ids = quantcost.prompt_ids(reader, quantcost.CONVERSATIONS[:1])[0][:12]
    reference_model.reset()
    plain = reference_model.forward(ids)
    same = Model.from_gguf(reader, n_ctx=16, weight_transform=record).forward(ids)
    assert np.array_equal(plain, same)
    assert set(seen) == set(reader.tensors)
    assert all(s == (reader.tensors[n].ggml_type, reader.tensors[n].shape, np.float32) for n, s in seen.items())
    coarse = Model.from_gguf(reader, n_ctx=16, weight_transform=quantcost.requantize("Q4_0")).forward(ids)
    assert not np.array_equal(plain, coarse)


def test_weight_transform_is_checked(reader):
    with pytest.raises(ValueError, match="expected float32"):
        Model.from_gguf(reader, n_ctx=8, weight_transform=lambda name, t, w: w[:1])
    with pytest.raises(ValueError, match="expected float32"):
        Model.from_gguf(reader, n_ctx=8, weight_transform=lambda name, t, w: w.astype(np.float64))
    with pytest.raises(ValueError, match="numerics='exact'"):
        Model.from_gguf(reader, n_ctx=8, numerics="ggml", weight_transform=lambda name, t, w: w)


# ------------------------------------------------------------------------------------------ the sweep and its cache


def test_sweep_measures_and_caches(model_path, reference_model, tmp_path, monkeypatch):
    monkeypatch.setenv("BYTES2LOGITS_CACHE", str(tmp_path))
    chats = [({"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello."})]
    first = quantcost.quantization_cost(model_path, types=("Q8_0",), conversations=chats, progress=False,
                                        reference=reference_model)
    assert first["cached"] is False
    assert first["model_sha256"] == quantcost.file_sha256(model_path)
    row = first["types"]["Q8_0"]
    assert row["weights"]["Q8_0"]["changed"] == 0               # the embedding is Q8_0 already
    assert 0.99 < row["weights"]["Q4_1"]["changed"] <= 1.0      # the layers move to the Q8_0 grid
    assert row["weights"]["all"]["n"] == sum(i.n_elements for i in GGUFReader(model_path).tensors.values()
                                             if i.ggml_type != T.F32)
    assert 0 < row["mean_kl"] < 0.05 and row["median_kl"] <= row["max_kl"] and 0.5 < row["top1"] <= 1
    files = list((tmp_path / "computed").glob("quantcost-*.json"))
    assert len(files) == 1 and quantcost.SWEEP_VERSION in files[0].name and first["model_sha256"][:16] in files[0].name

    again = quantcost.quantization_cost(model_path, types=("Q8_0",), conversations=chats, progress=False)
    assert again["cached"] is True and again["types"] == first["types"]

    files[0].write_text("{not json", encoding="utf-8")              # a damaged cache is computed again
    third = quantcost.quantization_cost(model_path, types=("Q8_0",), conversations=chats, progress=False)
    assert third["cached"] is False and third["types"]["Q8_0"]["mean_kl"] == pytest.approx(row["mean_kl"], rel=1e-6)
    assert json.loads(files[0].read_text(encoding="utf-8"))["types"]["Q8_0"]["top1"] == row["top1"]


def test_cache_key_follows_version_types_and_prompts(monkeypatch, tmp_path):
    monkeypatch.setenv("BYTES2LOGITS_CACHE", str(tmp_path))
    base = quantcost._cache_path("ab" * 32, ["Q8_0"], [[1, 2, 3]])
    assert base != quantcost._cache_path("ab" * 32, ["Q4_0"], [[1, 2, 3]])
    assert base != quantcost._cache_path("ab" * 32, ["Q8_0"], [[1, 2, 4]])
    assert base != quantcost._cache_path("cd" * 32, ["Q8_0"], [[1, 2, 3]])
    monkeypatch.setattr(quantcost, "SWEEP_VERSION", "quantcost-test")
    assert base != quantcost._cache_path("ab" * 32, ["Q8_0"], [[1, 2, 3]])


def test_reference_model_must_match(model_path, reference_model, tmp_path, monkeypatch):
    monkeypatch.setenv("BYTES2LOGITS_CACHE", str(tmp_path))
    long_chat = [({"role": "user", "content": "Tell me a long story about a cat. " * 12},)]
    with pytest.raises(ValueError, match="n_ctx"):
        quantcost.quantization_cost(model_path, types=("Q8_0",), conversations=long_chat, progress=False,
                                    reference=reference_model)
    with pytest.raises(ValueError, match="Q4_0"):
        quantcost.quantization_cost(model_path, types=("Q6_K",), progress=False)
