"""Images as tokens: patches, patch embeddings and the ``<image>`` placeholder (chapter 10, lab 10).

Past its embedding lookup, a language model never handles a token id again: every layer works on rows of
``d_model`` numbers. This module makes such rows out of pixels, following the Vision Transformer (ViT),
and gives them seats in a prompt:

1. cut the image into a grid of ``patch``×``patch`` squares and flatten each one (:func:`patchify`;
   :func:`unpatchify` puts them back, exactly);
2. multiply each flattened patch by one matrix to get a ``d_model`` vector, and add a vector that says
   where the patch sits in the grid (:class:`PatchEmbedding`, with fixed tables from
   :func:`sincos_tables` or learned ones);
3. in the prompt's token ids, widen each ``<image>`` placeholder into one slot per patch
   (:func:`expand_placeholders`): the patch vectors fill those slots, the text tokens' embeddings fill
   the rest, and the model reads one mixed sequence.

**Layout.** Every function here uses the same conventions (lab 10 and its tests rely on them):

* an image is a NumPy array of shape ``(H, W)`` (one channel) or ``(H, W, C)``, of any dtype;
* the patches of an image form an array of shape ``(N, patch * patch * C)`` with ``N = rows * cols``,
  ``rows = H // patch``, ``cols = W // patch``. Patches are numbered **row-major over the grid**: patch
  ``k`` sits at grid row ``k // cols`` and grid column ``k % cols`` (left to right, then top to bottom);
* inside a patch the pixels are **row-major too, channels innermost**: entry ``(i * patch + j) * C + ch``
  of a patch vector is pixel row ``i``, pixel column ``j``, channel ``ch`` of that square. That is the
  order the memory of an ``(H, W, C)`` array already has, so NumPy can produce it with reshapes.
  (PyTorch ViTs embed patches with a ``Conv2d`` whose weight is ``(d_model, C, patch, patch)``: channel
  *first*. Their weights need a transpose to be used with these patches.)

A side that is not a multiple of ``patch`` is an error, not a silent crop: see :func:`patch_grid`.
"""

from __future__ import annotations

import operator

import numpy as np

__all__ = ["patch_grid", "pad_to_multiple", "patchify", "unpatchify", "PatchEmbedding", "sincos_tables",
           "expand_placeholders"]


def _check_int(value, name: str, minimum: int) -> int:
    """``value`` as a Python int, checked: an integer (not a bool, not a float), at least ``minimum``."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an int, not {type(value).__name__} ({value!r})")
    value = operator.index(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def patch_grid(height: int, width: int, patch: int) -> tuple[int, int]:
    """The grid ``(rows, cols)`` of ``patch``×``patch`` squares that tiles a ``height``×``width`` image.

    Both sides must be multiples of ``patch``; otherwise the ``ValueError`` says which side, by how much,
    and the two honest fixes: crop to the multiple below, or pad to the one above (:func:`pad_to_multiple`).
    Refusing is a choice. A ViT's stride-``patch`` convolution silently drops the last ``H % patch`` rows
    and ``W % patch`` columns of pixels; here nothing disappears unless the caller crops on purpose.

    >>> patch_grid(224, 224, 16)
    (14, 14)
    >>> patch_grid(600, 512, 16)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: image height 600 is not a multiple of patch 16 (8 pixels over): crop to 592 or pad to 608 ...
    """
    patch = _check_int(patch, "patch", 1)
    height = _check_int(height, "height", 0)
    width = _check_int(width, "width", 0)
    for name, side in (("height", height), ("width", width)):
        over = side % patch
        if over:
            raise ValueError(f"image {name} {side} is not a multiple of patch {patch} ({over} pixels over): "
                             f"crop to {side - over} or pad to {side - over + patch} (pad_to_multiple)")
    return height // patch, width // patch


def pad_to_multiple(image: np.ndarray, patch: int, value=0) -> np.ndarray:
    """Pad the bottom and right edges of ``image`` with ``value`` until both sides are multiples of ``patch``.

    Padding only at the bottom and right keeps every original pixel at its coordinates, so patch
    ``(r, c)`` of the padded image covers the same pixels as before, and ``padded[:H, :W]`` is the original
    again. The result is always a new array of the same dtype (even when no padding was needed). The cost:
    the last row and column of patches are partly ``value``, and they are tokens the model pays for.

    >>> pad_to_multiple(np.ones((3, 5), dtype=np.uint8), 4)
    array([[1, 1, 1, 1, 1, 0, 0, 0],
           [1, 1, 1, 1, 1, 0, 0, 0],
           [1, 1, 1, 1, 1, 0, 0, 0],
           [0, 0, 0, 0, 0, 0, 0, 0]], dtype=uint8)
    """
    patch = _check_int(patch, "patch", 1)
    if not isinstance(image, np.ndarray):
        raise TypeError(f"image must be a NumPy array, not {type(image).__name__}")
    if image.ndim not in (2, 3):
        raise ValueError(f"image must have shape (H, W) or (H, W, C), got shape {image.shape}")
    extra = [(0, -side % patch) for side in image.shape[:2]] + [(0, 0)] * (image.ndim - 2)
    return np.pad(image, extra, mode="constant", constant_values=value)


def patchify(image: np.ndarray, patch: int) -> np.ndarray:
    """Cut an image into its ``patch``×``patch`` squares: ``(H, W[, C])`` -> ``(N, patch * patch * C)``.

    Patch ``k`` is the square at grid row ``k // cols``, column ``k % cols``; its entry
    ``(i * patch + j) * C + ch`` is the square's pixel ``(i, j)``, channel ``ch`` (row-major, channels
    innermost). A 2-D image counts as ``C = 1``. The dtype is kept, and the result is a new array: writing
    into it never changes ``image``. Sides that are not multiples of ``patch`` raise the ``ValueError`` of
    :func:`patch_grid`.

    No Python loop: a loop runs once per patch (or pixel) in the interpreter, while a few whole-array
    NumPy operations run once, in C. The idea, worked through in chapter 10, section 2: splitting each side
    of the image into (which patch, where inside it) only renames axes and moves nothing; the patches come
    out as squares only once the two grid axes are next to each other, ahead of the two inside-the-patch
    axes. Flattening without that reordering gives horizontal strips, with the right shape and no error.
    The reordering is the one step that really moves data; make sure the result owns its memory (NumPy
    can hand back a view of ``image`` for a grid one patch wide).

    >>> img = np.arange(16).reshape(4, 4)
    >>> patchify(img, 2)
    array([[ 0,  1,  4,  5],
           [ 2,  3,  6,  7],
           [ 8,  9, 12, 13],
           [10, 11, 14, 15]])
    """
    if not isinstance(image, np.ndarray):
        raise TypeError(f"image must be a NumPy array, not {type(image).__name__}")
    if image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] == 0):
        raise ValueError(f"image must have shape (H, W) or (H, W, C) with C >= 1, got shape {image.shape}")
    rows, cols = patch_grid(image.shape[0], image.shape[1], patch)
    channels = image.shape[2] if image.ndim == 3 else 1
    grid = image.reshape(rows, patch, cols, patch, channels).swapaxes(1, 2)
    return grid.copy().reshape(rows * cols, patch * patch * channels)


def unpatchify(patches: np.ndarray, patch: int, height: int, width: int,
               channels: int | None = None) -> np.ndarray:
    """Put patches back into an image: the exact inverse of :func:`patchify`.

    ``channels=None`` rebuilds a 2-D ``(height, width)`` image; an int ``C`` rebuilds ``(height, width, C)``
    (``C = 1`` gives ``(height, width, 1)``: both layouts have the same patches, so the caller says which
    one it wants). For every image ``x``::

        unpatchify(patchify(x, p), p, *x.shape)  # returns an array equal to x: same shape, dtype, bits

    ``patches`` must have exactly the shape that image would produce,
    ``((height // patch) * (width // patch), patch * patch * C)``; the ``ValueError`` names both shapes.
    Think of it as :func:`patchify` run backwards, each step undone in the reverse order.
    """
    rows, cols = patch_grid(height, width, patch)
    c = 1 if channels is None else _check_int(channels, "channels", 1)
    if not isinstance(patches, np.ndarray):
        raise TypeError(f"patches must be a NumPy array, not {type(patches).__name__}")
    want = (rows * cols, patch * patch * c)
    if patches.shape != want:
        size = f"{height}x{width}" + ("" if channels is None else f"x{c}")
        raise ValueError(f"patches have shape {patches.shape}, but a {size} image cut into {patch}x{patch} "
                         f"patches has shape {want}")
    shape = (height, width) if channels is None else (height, width, c)
    return patches.reshape(rows, cols, patch, patch, c).swapaxes(1, 2).copy().reshape(shape)


class PatchEmbedding:
    """Flattened patches -> ``d_model`` vectors: a linear projection plus a 2-D position embedding.

    For patch ``k`` at grid row ``r`` and column ``c`` (row-major, ``k = r * cols + c``)::

        out[k] = patches[k] @ weight + bias + row_table[r] + col_table[c]

    ============  ========================  ==========================================================
    array         shape                     role
    ============  ========================  ==========================================================
    ``weight``    ``(patch_dim, d_model)``  the projection, ``patch_dim = patch * patch * C``
    ``bias``      ``(d_model,)``            added to every patch
    ``row_table`` ``(max_rows, d_model)``   one vector per grid row
    ``col_table`` ``(max_cols, d_model)``   one vector per grid column
    ============  ========================  ==========================================================

    The projection alone is what a ViT's ``Conv2d(C, d_model, kernel_size=patch, stride=patch)`` computes,
    written as one matrix product. It sees each patch on its own, and attention is blind to order, so
    without the position vectors a shuffled image would give the same set of vectors. A row vector plus a
    column vector gives each patch its 2-D place with ``max_rows + max_cols`` vectors instead of one per
    cell, and the patch below any patch differs from it by the same kind of step. The tables can be
    learned or fixed (:func:`sincos_tables`). Their sizes bound the grids this embedding accepts: a model
    whose tables were learned for 14×14 grids has no vector for row 20.

    All four arrays are converted to ``weight``'s floating dtype, which is also the output dtype.
    Constructing or calling with an array of the wrong shape raises ``ValueError`` naming that shape.

    >>> emb = PatchEmbedding(np.eye(4, 2), np.zeros(2), np.array([[0., 0.], [10., 10.]]), np.zeros((2, 2)))
    >>> emb(np.arange(8.0).reshape(2, 4), grid=(2, 1))
    array([[ 0.,  1.],
           [14., 15.]])
    """

    def __init__(self, weight, bias, row_table, col_table):
        """Check and keep the four arrays (see the class docstring for their shapes)."""
        weight = np.asarray(weight)
        if not np.issubdtype(weight.dtype, np.floating):
            raise TypeError(f"weight must have a floating dtype (e.g. float32), not {weight.dtype}")
        if weight.ndim != 2:
            raise ValueError(f"weight must have shape (patch_dim, d_model), got shape {weight.shape}")
        d_model = weight.shape[1]
        bias = np.asarray(bias, dtype=weight.dtype)
        if bias.shape != (d_model,):
            raise ValueError(f"bias has shape {bias.shape}; weight {weight.shape} needs ({d_model},)")
        tables = []
        for name, table in (("row_table", row_table), ("col_table", col_table)):
            table = np.asarray(table, dtype=weight.dtype)
            if table.ndim != 2 or table.shape[1] != d_model:
                raise ValueError(f"{name} has shape {table.shape}; weight {weight.shape} needs "
                                 f"(n, {d_model})")
            tables.append(table)
        self.weight, self.bias = weight, bias
        self.row_table, self.col_table = tables

    @property
    def patch_dim(self) -> int:
        """Length of one flattened patch, ``patch * patch * C``: the rows of ``weight``."""
        return self.weight.shape[0]

    @property
    def d_model(self) -> int:
        """Width of the vectors it makes: the columns of ``weight``."""
        return self.weight.shape[1]

    @property
    def max_grid(self) -> tuple[int, int]:
        """The largest grid ``(rows, cols)`` the position tables cover."""
        return self.row_table.shape[0], self.col_table.shape[0]

    def positions(self, rows: int, cols: int) -> np.ndarray:
        """The position vectors of a ``rows``×``cols`` grid in row-major order: ``(rows * cols, d_model)``.

        Entry ``r * cols + c`` is ``row_table[r] + col_table[c]``; broadcasting a ``(rows, 1, d)`` slice
        against a ``(1, cols, d)`` slice builds the whole grid at once.
        """
        rows, cols = _check_int(rows, "rows", 0), _check_int(cols, "cols", 0)
        max_rows, max_cols = self.max_grid
        if rows > max_rows or cols > max_cols:
            raise ValueError(f"a {rows}x{cols} grid does not fit the position tables "
                             f"({max_rows} rows x {max_cols} columns)")
        grid = self.row_table[:rows, None, :] + self.col_table[None, :cols, :]
        return grid.reshape(rows * cols, self.d_model)

    def __call__(self, patches: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
        """Embed one image's patches, laid out as ``grid = (rows, cols)``, into ``(N, d_model)``.

        ``patches`` may have any numeric dtype (``uint8`` pixels too); it is converted to the weights'
        dtype first. ``N`` must equal ``rows * cols``: the grid is not guessed from ``N`` (196 patches
        could be 14×14 or 7×28).
        """
        if not isinstance(patches, np.ndarray):
            raise TypeError(f"patches must be a NumPy array, not {type(patches).__name__}")
        if patches.ndim != 2 or patches.shape[1] != self.patch_dim:
            raise ValueError(f"patches have shape {patches.shape}; this embedding takes "
                             f"(N, {self.patch_dim})")
        if not isinstance(grid, tuple) or len(grid) != 2:
            raise TypeError(f"grid must be a tuple (rows, cols), not {grid!r}")
        rows, cols = _check_int(grid[0], "rows", 0), _check_int(grid[1], "cols", 0)
        if rows * cols != patches.shape[0]:
            raise ValueError(f"grid {rows}x{cols} holds {rows * cols} patches, but patches has shape "
                             f"{patches.shape}")
        x = patches.astype(self.weight.dtype, copy=False)
        return x @ self.weight + self.bias + self.positions(rows, cols)


def sincos_tables(max_rows: int, max_cols: int, d_model: int,
                  base: float = 10000.0) -> tuple[np.ndarray, np.ndarray]:
    """Fixed 2-D sin-cos position tables for :class:`PatchEmbedding`: ``(row_table, col_table)``, float64.

    The original Transformer codes a 1-D position ``p`` with sines and cosines of geometrically spaced
    frequencies. Here the first half of the ``d_model`` features codes the grid row and the second half
    the grid column, each with ``q = d_model // 4`` frequencies ``w_i = base ** (-i / q)``::

        code(p) = [sin(p w_0), ..., sin(p w_{q-1}), cos(p w_0), ..., cos(p w_{q-1})]  # d_model / 2 numbers
        row_table[r] = [code(r), 0, ..., 0]      col_table[c] = [0, ..., 0, code(c)]

    so ``row_table[r] + col_table[c]`` is ``code(r)`` followed by ``code(c)``: two patches in the same row
    share the first half exactly, two in the same column the second half. (MAE's 2-D sin-cos embedding is
    built this way, up to which half holds the row.) ``d_model`` must be a multiple of 4.
    """
    max_rows, max_cols = _check_int(max_rows, "max_rows", 0), _check_int(max_cols, "max_cols", 0)
    d_model = _check_int(d_model, "d_model", 4)
    if d_model % 4:
        raise ValueError(f"d_model must be a multiple of 4 (sin and cos, for rows and for columns), "
                         f"got {d_model}")
    q = d_model // 4
    freqs = base ** (-np.arange(q) / q)

    def code(n: int) -> np.ndarray:
        angles = np.arange(n)[:, None] * freqs[None, :]
        return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)

    half = d_model // 2
    row_table = np.zeros((max_rows, d_model))
    col_table = np.zeros((max_cols, d_model))
    row_table[:, :half] = code(max_rows)
    col_table[:, half:] = code(max_cols)
    return row_table, col_table


def expand_placeholders(ids, placeholder_id: int, counts) -> tuple[list[int], list[range]]:
    """Make room for images in a token-id sequence: each ``placeholder_id`` becomes one slot per patch.

    A multimodal prompt is tokenized with one ``<image>`` id where each image goes. Before the model runs,
    every one of them is widened to as many copies as its image has patch vectors, so that the id list and
    the sequence of vectors have the same length: the attention mask and the KV cache hold one entry per
    patch, and so does the position counter of a model with 1-D positions (Qwen2-VL's M-RoPE instead
    gives patches (row, column) positions). ``counts`` is one int (every image has that many patches) or a
    sequence of ints, one per placeholder in order of appearance (images of different sizes).

    Returns ``(expanded, slots)``: the new ids (a list of Python ints: the text ids in their order, each
    placeholder replaced by its copies), and a list with one ``range`` per image, the positions in
    ``expanded`` that image's patch vectors fill::

        vectors = table[text ids]; vectors[slots[i]] = patch_vectors_of_image[i]

    >>> expand_placeholders([1, 9, 2, 9, 3], 9, [2, 3])
    ([1, 9, 9, 2, 9, 9, 9, 3], [range(1, 3), range(4, 7)])

    A ``counts`` sequence whose length is not the number of placeholders raises ``ValueError`` naming
    both numbers, and so do a count below 1 and a negative id. A non-integer id or count (a float, a
    ``bool``) raises ``TypeError``. The count check also catches expanding the same prompt twice: it
    then holds one placeholder per patch, not one per image.
    """
    placeholder_id = _check_int(placeholder_id, "placeholder_id", 0)
    seq = [_check_int(i, f"token id at position {pos}", 0) for pos, i in enumerate(ids)]
    where = [pos for pos, i in enumerate(seq) if i == placeholder_id]
    if isinstance(counts, bool) or hasattr(counts, "__index__"):
        counts = [counts] * len(where)
    else:
        counts = list(counts)
        if len(counts) != len(where):
            raise ValueError(f"ids hold {len(where)} placeholder(s) {placeholder_id} but counts has "
                             f"{len(counts)} entries: give one count per image")
    counts = [_check_int(k, f"count of image {n}", 1) for n, k in enumerate(counts, start=1)]
    expanded: list[int] = []
    slots: list[range] = []
    start = 0
    for pos, k in zip(where, counts):
        expanded.extend(seq[start:pos])
        slots.append(range(len(expanded), len(expanded) + k))
        expanded.extend([placeholder_id] * k)
        start = pos + 1
    expanded.extend(seq[start:])
    return expanded, slots
