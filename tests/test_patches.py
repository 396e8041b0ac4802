"""Tests of bytes2logits.lessons.patches: patches, their inverse, the patch embedding and placeholder expansion.

The lab 10 hidden suites check the lab's contract against slow pixel loops; these tests add what the lab
does not grade: the module's doctests, agreement with an independent windowing (NumPy's
``sliding_window_view``) and with a stride-``patch`` convolution in PyTorch's weight layout, the sin-cos
tables, and the chapter's splice of patch vectors into a token sequence.
"""

from __future__ import annotations

import doctest
import math
import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import sliding_window_view

from bytes2logits.lessons import patches as patches_module
from bytes2logits.lessons.patches import (
    PatchEmbedding,
    expand_placeholders,
    pad_to_multiple,
    patch_grid,
    patchify,
    sincos_tables,
    unpatchify,
)

# The lab 10 suites' pixel loop and random images (one copy of that code).
oracle = SimpleNamespace(**runpy.run_path(str(Path(__file__).resolve().parent / "hidden" / "lab10_image_patches"
                                             / "pixel_oracle.py")))


def test_doctests():
    assert doctest.testmod(patches_module).failed == 0


def windows(image: np.ndarray, p: int) -> np.ndarray:
    """Patches from NumPy's sliding windows taken every p pixels: no reshape of the image at all."""
    img = image if image.ndim == 3 else image[:, :, None]
    win = sliding_window_view(img, (p, p, img.shape[2]))[::p, ::p, 0]  # (rows, cols, p, p, C)
    return win.reshape(win.shape[0] * win.shape[1], -1)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(1, 5), st.sampled_from([None, 1, 3]),
       st.sampled_from(oracle.DTYPES), st.integers(0, 2**32 - 1))
def test_patchify_agrees_with_sliding_windows_and_round_trips(p, rows, cols, channels, dtype, seed):
    shape = (rows * p, cols * p) + (() if channels is None else (channels,))
    image = oracle.random_image(seed, shape, dtype)
    got = patchify(image, p)
    oracle.same_array(got, windows(image, p))
    oracle.same_array(got, oracle.slow_patches(image, p))
    oracle.same_array(unpatchify(got, p, *image.shape), image)


def test_patchify_of_a_real_photo():
    import matplotlib.cbook as cbook
    import matplotlib.pyplot as plt

    photo = plt.imread(cbook.get_sample_data("grace_hopper.jpg"))
    assert photo.shape == (600, 512, 3) and photo.dtype == np.uint8
    with pytest.raises(ValueError, match="height 600 is not a multiple of patch 16 .*crop to 592 or pad to 608"):
        patchify(photo, 16)
    padded = pad_to_multiple(photo, 16)
    cut = patchify(padded, 16)
    assert cut.shape == (38 * 32, 768)
    assert np.array_equal(cut, windows(padded, 16))
    back = unpatchify(cut, 16, 608, 512, 3)
    assert np.array_equal(back[:600], photo) and not back[600:].any()


def test_patch_grid_message_and_types():
    assert patch_grid(224, 224, 16) == (14, 14)
    assert patch_grid(0, 32, 16) == (0, 2)
    want = r"width 225 is not a multiple of patch 16 \(1 pixels over\): crop to 224 or pad to 240"
    with pytest.raises(ValueError, match=want):
        patch_grid(224, 225, 16)
    with pytest.raises(TypeError, match="patch must be an int"):
        patch_grid(224, 224, 16.0)


def test_empty_images_round_trip():
    image = np.zeros((0, 8, 3), dtype=np.uint8)
    cut = patchify(image, 4)
    assert cut.shape == (0, 48)
    assert unpatchify(cut, 4, 0, 8, 3).shape == (0, 8, 3)


def test_pad_to_multiple_value_and_dtype():
    image = np.ones((3, 5, 2), dtype=np.float32)
    out = pad_to_multiple(image, 4, value=-1.0)
    assert out.shape == (4, 8, 2) and out.dtype == np.float32
    assert (out[3] == -1).all() and (out[:, 5:] == -1).all() and (out[:3, :5] == 1).all()


def test_projection_is_a_stride_patch_convolution_in_torch_layout():
    """patchify @ W equals Conv2d(kernel=stride=patch) once the (d, C, p, p) kernel is reordered to (p, p, C)."""
    rng = np.random.default_rng(0)
    p, c, d = 4, 3, 5
    image = rng.standard_normal((12, 8, c))
    kernel = rng.standard_normal((d, c, p, p))        # PyTorch's Conv2d weight layout
    win = sliding_window_view(image, (p, p, c))[::p, ::p, 0]              # (rows, cols, p, p, C)
    conv = np.einsum("rcijk,dkij->rcd", win, kernel).reshape(-1, d)       # the convolution, written out
    weight = kernel.transpose(2, 3, 1, 0).reshape(p * p * c, d)           # (p, p, C, d): channels innermost
    emb = PatchEmbedding(weight, np.zeros(d), np.zeros((3, d)), np.zeros((2, d)))
    assert np.allclose(emb(patchify(image, p), grid=(3, 2)), conv, rtol=1e-12, atol=1e-12)
    wrong = kernel.reshape(d, -1).T                                      # flattened channel-first: a silent bug
    assert not np.allclose(patchify(image, p) @ wrong, conv)


def test_embedding_without_positions_cannot_tell_a_shuffled_image():
    rng = np.random.default_rng(1)
    cut = rng.standard_normal((6, 12))
    perm = rng.permutation(6)
    d = 4
    flat = PatchEmbedding(rng.standard_normal((12, d)), np.zeros(d), np.zeros((2, d)), np.zeros((3, d)))
    a, b = flat(cut, grid=(2, 3)), flat(cut[perm], grid=(2, 3))
    assert np.allclose(a[perm], b)
    with_pos = PatchEmbedding(flat.weight, flat.bias, *sincos_tables(2, 3, d))
    assert not np.allclose(with_pos(cut, grid=(2, 3))[perm], with_pos(cut[perm], grid=(2, 3)))


def test_embedding_casts_to_the_weight_dtype():
    weight = np.ones((3, 4), dtype=np.float32)
    emb = PatchEmbedding(weight, [1, 2, 3, 4], *sincos_tables(2, 2, 4))
    assert emb.bias.dtype == emb.row_table.dtype == np.float32
    out = emb(np.full((4, 3), 255, dtype=np.uint8), grid=(2, 2))
    assert out.dtype == np.float32 and out.shape == (4, 4)
    with pytest.raises(TypeError, match="floating dtype"):
        PatchEmbedding(np.ones((3, 4), dtype=np.int32), np.zeros(4), np.zeros((1, 4)), np.zeros((1, 4)))
    with pytest.raises(ValueError, match=r"grid 2x2 holds 4 patches, but patches has shape \(3, 3\)"):
        emb(np.zeros((3, 3)), grid=(2, 2))
    with pytest.raises(ValueError, match=r"a 3x1 grid does not fit the position tables \(2 rows x 2 columns\)"):
        emb(np.zeros((3, 3)), grid=(3, 1))


def test_sincos_tables_formula():
    rows, cols, d = 5, 7, 12
    row_table, col_table = sincos_tables(rows, cols, d)
    assert row_table.shape == (rows, d) and col_table.shape == (cols, d) and row_table.dtype == np.float64
    q, half = d // 4, d // 2
    assert not row_table[:, half:].any() and not col_table[:, :half].any()
    for r in range(rows):
        for c in range(cols):
            freqs = [10000.0 ** (-i / q) for i in range(q)]
            want = ([math.sin(r * w) for w in freqs] + [math.cos(r * w) for w in freqs]
                    + [math.sin(c * w) for w in freqs] + [math.cos(c * w) for w in freqs])
            assert np.allclose(row_table[r] + col_table[c], want, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="multiple of 4"):
        sincos_tables(2, 2, 10)


def test_sincos_similarity_depends_on_the_offset_only():
    """code(p) . code(p + k) = sum_i cos(k w_i): the same for every p, largest at k = 0."""
    row_table, _ = sincos_tables(20, 1, 32)
    dots = row_table @ row_table.T
    for k in range(5):
        assert np.allclose(np.diag(dots, k), np.diag(dots, k)[0])
    assert np.argmax(dots[7]) == 7


def test_expand_and_splice_like_the_chapter():
    """Text embeddings and patch vectors end up interleaved in prompt order."""
    image_id, d = 50, 3
    table = np.arange(50 * d, dtype=np.float64).reshape(50, d)
    ids = [1, 2, image_id, 3, image_id, 4]
    images = [np.full((4, d), -1.0), np.full((2, d), -2.0)]
    expanded, slots = expand_placeholders(ids, image_id, [len(v) for v in images])
    assert expanded == [1, 2] + [image_id] * 4 + [3] + [image_id] * 2 + [4]
    seq = np.empty((len(expanded), d))
    text = np.array(expanded) != image_id
    seq[text] = table[np.array(expanded)[text]]
    for slot, vectors in zip(slots, images):
        seq[slot] = vectors
    assert seq[:, 0].tolist() == [3, 6, -1, -1, -1, -1, 9, -2, -2, 12]


def test_expand_error_messages():
    with pytest.raises(ValueError, match=r"ids hold 2 placeholder\(s\) 9 but counts has 1 entries"):
        expand_placeholders([9, 1, 9], 9, [3])
    with pytest.raises(ValueError, match="count of image 2 must be >= 1, got 0"):
        expand_placeholders([9, 1, 9], 9, [3, 0])
    with pytest.raises(TypeError, match=r"token id at position 1 must be an int, not float \(2.0\)"):
        expand_placeholders([9, 2.0], 9, 1)
    with pytest.raises(ValueError, match="token id at position 0 must be >= 0, got -1"):
        expand_placeholders([-1, 9], 9, 1)
