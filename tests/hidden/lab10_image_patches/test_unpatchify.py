"""Hidden suite, lab 10 task 2: unpatchify, the exact inverse of patchify."""

import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given

from bytes2logits.kit.probes import worker_eval

# The slow pixel loop and random images, shared with the other lab 10 suite.
oracle = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("pixel_oracle.py"))))

# Weights: putting every pixel back (the task's concept) carries most of the points; checks of arguments a
# small share.
INVERSE, CONCEPT, VALIDATION = 4, 2, 1


@pytest.mark.weight(INVERSE)
def test_small_example(impl):
    """Six 2x2 patches in row-major grid order go back into a 4x6 image (2 rows of 3 patches)."""
    patches = np.array([[0, 1, 6, 7], [2, 3, 8, 9], [4, 5, 10, 11],
                        [12, 13, 18, 19], [14, 15, 20, 21], [16, 17, 22, 23]], dtype=np.int64)
    oracle.same_image(impl.unpatchify(patches, 2, 4, 6), np.arange(24, dtype=np.int64).reshape(4, 6), patches, 2)


@pytest.mark.weight(INVERSE)
def test_not_square(impl):
    """Images with more columns than rows of patches, or more rows than columns, go back exactly."""
    for shape, p in [((4, 12, 3), 2), ((12, 4, 3), 2), ((3, 15), 3), ((10, 4, 2), 2)]:
        image = oracle.random_image(sum(shape), shape, np.int32)
        patches = oracle.slow_patches(image, p)
        channels = None if image.ndim == 2 else image.shape[2]
        oracle.same_image(impl.unpatchify(patches, p, shape[0], shape[1], channels), image, patches, p)


@pytest.mark.weight(INVERSE)
@given(oracle.images())
def test_inverts_patches_built_pixel_by_pixel(impl, case):
    """unpatchify rebuilds any image from patches made by a pixel loop: same shape, dtype and bits."""
    image, p = case
    patches = oracle.slow_patches(image, p)
    channels = None if image.ndim == 2 else image.shape[2]
    oracle.same_image(impl.unpatchify(patches, p, image.shape[0], image.shape[1], channels), image, patches, p)


@pytest.mark.weight(CONCEPT)
@given(oracle.images())
def test_round_trip(impl, case):
    """unpatchify(patchify(x, p), p, H, W[, C]) is exactly x, for random shapes and dtypes."""
    image, p = case
    channels = None if image.ndim == 2 else image.shape[2]
    oracle.same_array(impl.unpatchify(impl.patchify(image, p), p, image.shape[0], image.shape[1], channels), image)


@pytest.mark.weight(CONCEPT)
def test_channels_argument_chooses_the_layout(impl):
    """channels=None gives (H, W); channels=1 gives (H, W, 1) from the same patches."""
    patches = np.arange(16, dtype=np.uint8).reshape(4, 4)
    flat = impl.unpatchify(patches, 2, 4, 4)
    deep = impl.unpatchify(patches, 2, 4, 4, 1)
    assert type(flat) is np.ndarray and flat.shape == (4, 4)
    assert type(deep) is np.ndarray and deep.shape == (4, 4, 1)
    assert np.array_equal(flat, deep[:, :, 0])
    assert flat[1, 2].item() == 6 and flat[2, 1].item() == 9, \
        "pixel (1, 2) is entry 2 of patch 1, pixel (2, 1) is entry 1 of patch 2"


# Run where the learner's code runs (the grading worker): an array that crosses the pipe is always a copy.
SHARES = "lambda f, x, *args: bool(np.shares_memory(f(x, *args), x))"


@pytest.mark.weight(CONCEPT)
def test_returns_a_new_array(impl):
    """The image never shares memory with the patches, even for a grid one patch wide."""
    probe = worker_eval(impl, SHARES)
    for patches, p, h, w, c in [(np.ones((2, 48)), 4, 8, 4, 3), (np.ones((1, 16)), 4, 4, 4, None),
                                (np.ones((6, 2)), 1, 2, 3, 2), (np.ones((3, 16)), 4, 12, 4, None)]:
        assert not probe(impl.unpatchify, patches, p, h, w, c), \
            f"the {h}x{w} image shares memory with its patches (a view, not a new array)"


@pytest.mark.weight(VALIDATION)
def test_refuses_patches_of_the_wrong_shape(impl):
    """A patch array that does not fit (H, W, C) is a ValueError whose message shows the patches' shape."""
    for shape, args in [((5, 768), (16, 48, 32, 3)), ((6, 700), (16, 48, 32, 3)), ((6, 256), (16, 48, 32, 3)),
                        ((6, 768), (16, 48, 32)), ((6, 3, 256), (16, 48, 32, 3)), ((6,), (1, 2, 3))]:
        with pytest.raises(ValueError) as info:
            impl.unpatchify(np.zeros(shape), *args)
        assert str(shape) in str(info.value), "the error message should show the shape of the patches it got"


@pytest.mark.weight(VALIDATION)
def test_refuses_bad_arguments(impl):
    """Sides that are not multiples of patch and channels < 1 are ValueErrors; a list of patches is a TypeError."""
    with pytest.raises(ValueError):
        impl.unpatchify(np.zeros((6, 768)), 16, 50, 32, 3)
    with pytest.raises(ValueError):
        impl.unpatchify(np.zeros((6, 0)), 16, 48, 32, 0)
    with pytest.raises(ValueError):
        impl.unpatchify(np.zeros((6, 768)), 0, 48, 32, 3)
    with pytest.raises(TypeError):
        impl.unpatchify(np.zeros((6, 768)), 16, 48, 32, 3.0)
    with pytest.raises(TypeError):
        impl.unpatchify([[0] * 4] * 4, 2, 4, 4)
