"""Slow, first-principles pixel code for the lab 10 suites (not a test file; the suites load it by path).

Nothing here uses reshape or transpose: each patch is read pixel by pixel, so the suites never compare a
learner's reshapes with a second copy of the same reshapes.
"""

import numpy as np
from hypothesis import strategies as st

DTYPES = (np.uint8, np.int8, np.int16, np.uint32, np.int64, np.float16, np.float32, np.float64, np.complex64,
          np.bool_)


def slow_patches(image: np.ndarray, p: int) -> np.ndarray:
    """Walk the grid left to right, top to bottom; inside a square, row by row, pixel by pixel, channels last."""
    height, width = image.shape[:2]
    channels = 1 if image.ndim == 2 else image.shape[2]
    rows, cols = height // p, width // p
    out = np.empty((rows * cols, p * p * channels), dtype=image.dtype)
    for r in range(rows):
        for c in range(cols):
            k = r * cols + c
            for i in range(p):
                for j in range(p):
                    for ch in range(channels):
                        pixel = image[r * p + i, c * p + j] if image.ndim == 2 else image[r * p + i, c * p + j, ch]
                        out[k, (i * p + j) * channels + ch] = pixel
    return out


def random_image(seed: int, shape: tuple, dtype) -> np.ndarray:
    """Random pixels of any dtype, covering its whole range for integers (no NaN, so == is meaningful)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return (rng.standard_normal(shape) * 100).astype(dtype)


def same_array(got, want: np.ndarray) -> None:
    """Exactly ``want``: an ndarray (not a look-alike), same dtype, same shape, same bytes."""
    assert type(got) is np.ndarray, f"the result must be a NumPy array, not {type(got).__name__}"
    assert got.dtype == want.dtype, "the result must keep the dtype of its input"
    assert got.shape == want.shape, "the result has the wrong shape"
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes(), \
        "some values are in the wrong place (compare with a loop over the pixels)"


@st.composite
def images(draw):
    """An image whose sides are multiples of its patch size, and that size: any dtype, 2-D or 1 to 4 channels."""
    p = draw(st.integers(1, 5))
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    channels = draw(st.sampled_from([None, 1, 2, 3, 4]))
    shape = (rows * p, cols * p) + (() if channels is None else (channels,))
    dtype = draw(st.sampled_from(DTYPES))
    return random_image(draw(st.integers(0, 2**32 - 1)), shape, dtype), p
