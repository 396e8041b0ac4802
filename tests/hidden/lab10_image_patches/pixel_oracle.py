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


# Layouts a learner plausibly gets instead of the specified one, each written as its own pixel loop: where
# pixel (y, x, ch) of an H x W x C image lands, as (patch number, entry in the patch vector).
def _strips(y, x, ch, p, rows, cols, width, channels):
    m = y * width + x  # the image read row by row, cut every p * p pixels: a reshape without the swap
    return m // (p * p), (m % (p * p)) * channels + ch


def _columns_inside(y, x, ch, p, rows, cols, width, channels):
    return (y // p) * cols + x // p, ((x % p) * p + y % p) * channels + ch


def _grid_by_columns(y, x, ch, p, rows, cols, width, channels):
    return (x // p) * rows + y // p, ((y % p) * p + x % p) * channels + ch


def _channels_first(y, x, ch, p, rows, cols, width, channels):
    return (y // p) * cols + x // p, ch * p * p + (y % p) * p + x % p


WRONG_LAYOUTS = {
    _strips: "each patch holds consecutive pixels of image rows (strips), not a square: the grid axes were not "
             "brought together before flattening",
    _columns_inside: "inside each patch the pixels are read column by column: the two axes inside a patch are "
                     "swapped (the spec reads row i, then column j)",
    _grid_by_columns: "the patches are numbered down the columns of the grid: patch k must be at grid row "
                      "k // cols, column k % cols (left to right, then top to bottom)",
    _channels_first: "inside each patch the channels come first: the C values of one pixel must sit next to "
                     "each other (channels innermost)",
}


def slow_layout(image: np.ndarray, p: int, where) -> np.ndarray:
    """The patches of ``image`` in the layout ``where`` describes, pixel by pixel."""
    height, width = image.shape[:2]
    channels = 1 if image.ndim == 2 else image.shape[2]
    rows, cols = height // p, width // p
    out = np.empty((rows * cols, p * p * channels), dtype=image.dtype)
    for y in range(rows * p):
        for x in range(cols * p):
            for ch in range(channels):
                k, e = where(y, x, ch, p, rows, cols, width, channels)
                out[k, e] = image[y, x] if image.ndim == 2 else image[y, x, ch]
    return out


def _equal(a, b) -> bool:
    return a.shape == b.shape and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def patch_mistake(got: np.ndarray, image: np.ndarray, p: int) -> str:
    """Name the wrong layout ``got`` (patches of ``image``) follows, or say where to look."""
    matches = [words for where, words in WRONG_LAYOUTS.items() if _equal(got, slow_layout(image, p, where))]
    if len(matches) == 1:  # on tiny grids several mistakes can give the same patches: then name none
        return matches[0]
    rows, cols = image.shape[0] // p, image.shape[1] // p
    return (f"some values are in the wrong place ({rows}x{cols} grid of {p}x{p} patches; compare with a loop "
            "over the pixels)")


def image_mistake(got: np.ndarray, patches: np.ndarray, p: int) -> str:
    """Name the wrong layout an unpatchify result follows: the one that cuts ``got`` back into ``patches``."""
    matches = [words for where, words in WRONG_LAYOUTS.items() if _equal(slow_layout(got, p, where), patches)]
    if len(matches) == 1:
        return "you put the patches back as if " + matches[0].replace("each patch holds", "each patch held")
    rows, cols = got.shape[0] // p, got.shape[1] // p
    return (f"some pixels are in the wrong place ({rows}x{cols} grid of {p}x{p} patches"
            + ("" if rows == cols else f": {rows} rows of {cols} patches, not {cols} rows of {rows}")
            + "; compare with a loop over the pixels)")


def same_array(got, want: np.ndarray, mistake=None) -> None:
    """Exactly ``want``: an ndarray (not a look-alike), same dtype, same shape, same bytes.

    ``mistake(got)`` says in words what is wrong when the values differ (see :func:`patch_mistake`)."""
    assert type(got) is np.ndarray, f"the result must be a NumPy array, not {type(got).__name__}"
    assert got.dtype == want.dtype, "the result must keep the dtype of its input"
    assert got.shape == want.shape, f"the result has shape {got.shape}, not the shape the layout gives"
    if not _equal(got, want):
        raise AssertionError(mistake(got) if mistake else
                             "some values are in the wrong place (compare with a loop over the pixels)")


def same_patches(got, image: np.ndarray, p: int) -> None:
    """``got`` is exactly the patches of ``image`` in the specified layout; if not, name the mistake."""
    same_array(got, slow_patches(image, p), lambda g: patch_mistake(g, image, p))


def same_image(got, image: np.ndarray, patches: np.ndarray, p: int) -> None:
    """``got`` is exactly ``image``, rebuilt from its ``patches``; if not, name the mistake."""
    same_array(got, image, lambda g: image_mistake(g, patches, p))


@st.composite
def images(draw):
    """An image whose sides are multiples of its patch size, and that size: any dtype, 2-D or 1 to 4 channels."""
    p = draw(st.integers(1, 5))
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    channels = draw(st.sampled_from([None, 1, 2, 3, 4]))
    shape = (rows * p, cols * p) + (() if channels is None else (channels,))
    dtype = draw(st.sampled_from(DTYPES))
    return random_image(draw(st.integers(0, 2**32 - 1)), shape, dtype), p
