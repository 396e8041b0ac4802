"""Hidden suite, lab 10 task 1: patch_grid, pad_to_multiple and patchify (exact layout, copies, errors, speed)."""

import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bytes2logits.kit.probes import worker_eval
from bytes2logits.kit.remote import timed

# The slow pixel loop and random images, shared with the other lab 10 suite.
oracle = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("pixel_oracle.py"))))

# Weights: the layout (the concept of the task) carries most of the points, then refusing instead of
# cropping and the vectorised cut, which chapter 10 stresses; type and argument checks are a small share.
LAYOUT, CONCEPT, VALIDATION = 4, 2, 1


@pytest.mark.weight(CONCEPT)
def test_patch_grid(impl):
    """patch_grid gives (rows, cols) as two ints when both sides are multiples of the patch size."""
    for args, want in [((224, 224, 16), (14, 14)), ((336, 336, 14), (24, 24)), ((600, 512, 8), (75, 64)),
                       ((16, 48, 16), (1, 3)), ((7, 5, 1), (7, 5)), ((np.int64(32), 64, np.int32(16)), (2, 4))]:
        got = impl.patch_grid(*args)
        assert type(got) is tuple and len(got) == 2 and all(type(v) is int for v in got), \
            "patch_grid must return a tuple of two Python ints"
        assert got == want, "patch_grid gives the wrong grid"


@pytest.mark.weight(CONCEPT)
def test_patch_grid_refuses_sides_that_are_not_multiples(impl):
    """A side that is not a multiple of the patch size is a ValueError whose message names that side's size."""
    for args, side in [((600, 512, 16), "600"), ((512, 600, 16), "600"), ((225, 224, 16), "225"), ((3, 4, 2), "3")]:
        with pytest.raises(ValueError) as info:
            impl.patch_grid(*args)
        assert side in str(info.value), "the error message should name the size that does not fit"


@pytest.mark.weight(VALIDATION)
def test_patch_grid_checks_its_arguments(impl):
    """patch must be an int >= 1 (TypeError for a float or a bool, ValueError for 0); sides must be ints >= 0."""
    with pytest.raises(ValueError):
        impl.patch_grid(16, 16, 0)
    with pytest.raises(ValueError):
        impl.patch_grid(16, 16, -4)
    with pytest.raises(ValueError):
        impl.patch_grid(-16, 16, 4)
    for bad in (16.0, True, "16", None):
        with pytest.raises(TypeError):
            impl.patch_grid(32, 32, bad)
    with pytest.raises(TypeError):
        impl.patch_grid(32.0, 32, 16)


@pytest.mark.weight(LAYOUT)
def test_patchify_small_example(impl):
    """A 4x6 image in 2x2 patches: patches left to right then top to bottom, each read row by row."""
    img = np.arange(24, dtype=np.int32).reshape(4, 6)
    got = impl.patchify(img, 2)
    want = np.array([[0, 1, 6, 7], [2, 3, 8, 9], [4, 5, 10, 11],
                     [12, 13, 18, 19], [14, 15, 20, 21], [16, 17, 22, 23]], dtype=np.int32)
    oracle.same_array(got, want, lambda g: oracle.patch_mistake(g, img, 2))


@pytest.mark.weight(LAYOUT)
def test_patchify_channels_are_innermost(impl):
    """In an (H, W, C) image the C values of one pixel sit next to each other in the patch vector."""
    img = np.zeros((4, 4, 3), dtype=np.uint8)
    img[0, 1] = (1, 2, 3)       # patch 0, pixel (0, 1) -> entries 3, 4, 5
    img[3, 2] = (7, 8, 9)       # patch 3 (grid row 1, column 1), pixel (1, 0) -> entries 6, 7, 8
    got = impl.patchify(img, 2)
    want = np.zeros((4, 12), dtype=np.uint8)
    want[0, 3:6] = (1, 2, 3)
    want[3, 6:9] = (7, 8, 9)
    oracle.same_array(got, want, lambda g: oracle.patch_mistake(g, img, 2))


@pytest.mark.weight(LAYOUT)
@given(oracle.images())
def test_patchify_matches_a_pixel_loop(impl, case):
    """For random shapes and dtypes, patchify gives exactly what a loop over every pixel gives."""
    image, p = case
    before = image.copy()
    oracle.same_patches(impl.patchify(image, p), image, p)
    assert np.array_equal(image, before), "patchify must not change the image"


@pytest.mark.weight(CONCEPT)
def test_patchify_real_sizes(impl):
    """A 224x224 RGB image in 16x16 patches gives 196 rows of 768 values; 336x336 at 14 gives 576 rows of 588."""
    for side, p, n, dim in [(224, 16, 196, 768), (336, 14, 576, 588)]:
        image = oracle.random_image(side, (side, side, 3), np.uint8)
        got = impl.patchify(image, p)
        assert type(got) is np.ndarray and got.shape == (n, dim) and got.dtype == np.uint8
        k = 17  # spot-check one patch against the image directly
        r, c = divmod(k, side // p)
        assert np.array_equal(got[k], image[r * p:(r + 1) * p, c * p:(c + 1) * p].ravel()), \
            "a patch does not hold the pixels of its square"


@pytest.mark.weight(CONCEPT)
def test_patchify_views_and_strided_inputs(impl):
    """Sliced, transposed and Fortran-ordered images are cut by their pixel coordinates, not their memory."""
    big = oracle.random_image(7, (20, 30, 3), np.float32)
    for image in (big[2:14, 3:27], big[::2, ::3], big.transpose(1, 0, 2), np.asfortranarray(big), big[:, :, 1]):
        oracle.same_patches(impl.patchify(image, 2), image, 2)


# Speed gate. Calibrated here (2 shared cores, a 1024x1024 RGB uint8 image at patch 4, 65,536 patches): the
# reference's reshape, swap, copy takes ~3 ms, and so does cutting with sliding_window_view; a Python loop
# over the patches takes ~0.13-0.25 s (about 50x), a loop over the pixels several seconds. When the code runs
# in the grading worker, moving the 3 MB image there and the patches back costs ~20 ms on both sides, which
# would hide a 50x loop inside a 7x ratio. So the cost of the trip is measured in the same run (the
# reference's pad_to_multiple on the same image: the same bytes there and back, almost no work) and taken
# off both times. A learner passes when their patchify's own time is below SPEED_FACTOR times the
# reference's, or SPEED_FLOOR seconds if that is more (so a very fast reference cannot fail a vectorised
# answer). Each attempt times both sides on an image of its own (a memo of an earlier answer has nothing to
# answer from), and each timed result must be the reference's patches of that image, bit for bit.
SPEED_FACTOR = 20
SPEED_FLOOR = 0.05


@pytest.mark.weight(LAYOUT + 2)
def test_patchify_has_no_python_loop(impl, reference):
    """patchify is vectorised (no loop over patches or pixels): at most 20x the reference's time on a large image.

    The image: 1024x1024 RGB, cut into 65,536 patches of 4x4."""
    images = [oracle.random_image(1024 + attempt, (1024, 1024, 3), np.uint8) for attempt in range(2)]
    trip = min(timed(reference.pad_to_multiple, images[0], 4)[1] for _ in range(3))
    ref_times = []
    for attempt, image in enumerate(images):
        for _ in range(3 if attempt == 0 else 1):
            expected, seconds = timed(reference.patchify, image, 4)
            ref_times.append(max(seconds - trip, 0.0))
        budget = max(SPEED_FACTOR * min(ref_times), SPEED_FLOOR)
        got, elapsed = timed(impl.patchify, image, 4)
        elapsed = max(elapsed - trip, 0.0)
        oracle.same_array(got, expected)
        if elapsed <= budget:
            break
    assert elapsed <= budget, (f"patchify took {elapsed * 1e3:.0f} ms against the reference's "
                               f"{min(ref_times) * 1e3:.0f} ms (limit {budget * 1e3:.0f} ms): a Python loop over "
                               "patches or pixels is too slow; cut with array reshapes (chapter 10, section 2)")


# Run where the learner's code runs (the grading worker): an array that crosses the pipe is always a copy.
WRITE_THROUGH = ("lambda f, x, p: (lambda out: (bool(np.shares_memory(out, x)), out.__setitem__(Ellipsis, 0), "
                 "bool(x.any()))[::2])(f(x, p))")


@pytest.mark.weight(CONCEPT)
def test_patchify_returns_a_new_array(impl):
    """The patches never share memory with the image, even for a grid one patch wide or patch size 1."""
    probe = worker_eval(impl, WRITE_THROUGH)
    for shape, p in [((8, 4, 3), 4), ((4, 4), 4), ((3, 5, 2), 1), ((6, 6), 3), ((4, 8), 4)]:
        image = oracle.random_image(1, shape, np.int16)
        shares, still_there = probe(impl.patchify, image, p)
        assert not shares, f"the patches of a {shape} image at patch {p} share memory with the image (a view)"
        assert still_there, "writing into the patches changed the image"


@pytest.mark.weight(LAYOUT)
def test_patchify_refuses_to_crop(impl):
    """patchify refuses a side that is not a multiple of patch (a ValueError naming it): it never crops silently."""
    for shape, p, side in [((600, 512, 3), 16, "600"), ((512, 600, 3), 16, "600"), ((4, 6), 4, "6"),
                           ((5, 4), 2, "5")]:
        with pytest.raises(ValueError) as info:
            impl.patchify(np.zeros(shape, dtype=np.uint8), p)
        assert side in str(info.value), f"a {shape} image at patch {p}: the error message should name {side}"


@pytest.mark.weight(VALIDATION)
def test_patchify_refuses_bad_input(impl):
    """Not an array: TypeError. Not 2-D or 3-D, or patch < 1: ValueError; a float patch: TypeError."""
    with pytest.raises(TypeError):
        impl.patchify([[1, 2], [3, 4]], 2)
    for shape in [(4,), (2, 2, 2, 2), (4, 4, 0)]:
        with pytest.raises(ValueError):
            impl.patchify(np.zeros(shape), 2)
    with pytest.raises(ValueError):
        impl.patchify(np.zeros((4, 4)), 0)
    with pytest.raises(TypeError):
        impl.patchify(np.zeros((4, 4)), 2.0)


@pytest.mark.weight(LAYOUT)
@given(st.integers(1, 9), st.integers(1, 9), st.sampled_from([None, 1, 3]), st.integers(1, 5),
       st.sampled_from([np.uint8, np.float32, np.bool_]))
def test_pad_to_multiple(impl, height, width, channels, p, dtype):
    """Padding goes to the bottom and right, up to the next multiples; the pixels keep their place and dtype."""
    shape = (height, width) + (() if channels is None else (channels,))
    image = oracle.random_image(height * 100 + width, shape, dtype)
    value = True if dtype is np.bool_ else 5
    out = impl.pad_to_multiple(image, p, value)
    assert type(out) is np.ndarray and out.dtype == image.dtype, "the padded image keeps the dtype"
    want_h, want_w = -(-height // p) * p, -(-width // p) * p
    assert out.shape == (want_h, want_w) + shape[2:], "each side goes up to the next multiple of patch, no further"
    assert np.array_equal(out[:height, :width], image), "the original pixels must stay at their coordinates"
    pad = np.ones(out.shape, dtype=bool)
    pad[:height, :width] = False
    assert (out[pad] == np.asarray(value, dtype=dtype)).all(), "every added pixel must have the padding value"


@pytest.mark.weight(CONCEPT)
def test_pad_to_multiple_defaults(impl):
    """The default padding value is 0 and goes below and to the right; an exact fit is returned as a new copy."""
    image = np.full((600, 512, 3), 200, dtype=np.uint8)
    out = impl.pad_to_multiple(image, 16)
    assert out.shape == (608, 512, 3) and out.dtype == np.uint8
    assert out[600:].max() == 0 and (out[:600] == 200).all(), "rows 600 to 607 are the padding, with value 0"
    probe = worker_eval(impl, WRITE_THROUGH)
    for shape, p in [((592, 512, 3), 16), ((6, 4), 2), ((5, 3), 4)]:
        shares, still_there = probe(impl.pad_to_multiple, np.full(shape, 7, dtype=np.uint8), p)
        assert not shares and still_there, f"pad_to_multiple of a {shape} image at {p} must return a new array"


@pytest.mark.weight(VALIDATION)
def test_pad_to_multiple_errors(impl):
    """A non-array is a TypeError; an array that is not 2-D or 3-D, or patch < 1, is a ValueError."""
    image = np.full((600, 512, 3), 200, dtype=np.uint8)
    with pytest.raises(TypeError):
        impl.pad_to_multiple([[1, 2]], 2)
    with pytest.raises(ValueError):
        impl.pad_to_multiple(np.zeros((2, 2, 2, 2)), 2)
    with pytest.raises(ValueError):
        impl.pad_to_multiple(image, 0)
