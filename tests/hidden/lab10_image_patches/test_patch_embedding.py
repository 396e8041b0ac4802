"""Hidden suite, lab 10 task 3: PatchEmbedding (projection + row/column position tables)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

# Weights: the computation (projection, bias, and the row and column vectors in row-major order) carries most
# of the points; dtypes, sizes and argument checks are a small share.
RULE, CONCEPT, VALIDATION = 4, 2, 1


def expected(patches, weight, bias, row_table, col_table, rows, cols):
    """First principles, in float64: one einsum per patch, its row and column looked up by hand."""
    out = np.empty((rows * cols, weight.shape[1]))
    for k in range(rows * cols):
        r, c = k // cols, k % cols
        out[k] = np.einsum("i,id->d", patches[k].astype(np.float64), weight.astype(np.float64)) \
            + bias + row_table[r] + col_table[c]
    return out


def mistake(out, patches, weight, bias, row_table, col_table, rows, cols):
    """Say in words which part of the formula ``out`` misses, when it matches a plausible wrong variant."""
    proj = patches.astype(np.float64) @ weight.astype(np.float64)
    k = np.arange(rows * cols)
    right = row_table[k // cols] + col_table[k % cols]
    variants = {
        "the bias is missing": proj + right,
        "the position vectors are missing": proj + bias,
        "the positions go down the columns of the grid: patch k is at row k // cols, column k % cols":
            proj + bias + row_table[k % rows] + col_table[k // rows] if rows else proj,
        "the row table is indexed by the column and the column table by the row":
            proj + bias + row_table[k % cols] + col_table[k // cols]
            if len(row_table) >= cols and len(col_table) >= rows else proj,
    }
    for words, variant in variants.items():
        if out.shape == variant.shape and np.allclose(out, variant) and not np.allclose(out, proj + bias + right):
            return words
    return "the projection, bias, row or column vectors are not added as specified"


def small_case():
    """Integer-valued floats: every product and sum is exact, whatever order a matmul adds in."""
    rng = np.random.default_rng(10)
    weight = rng.integers(-3, 4, size=(4, 3)).astype(np.float64)
    bias = np.array([0.5, -1.0, 2.0])
    row_table = rng.integers(-9, 10, size=(3, 3)).astype(np.float64) * 10
    col_table = rng.integers(-9, 10, size=(4, 3)).astype(np.float64) * 100
    patches = rng.integers(0, 256, size=(6, 4)).astype(np.uint8)
    return patches, weight, bias, row_table, col_table


@pytest.mark.weight(RULE)
def test_hand_computed_example(impl):
    """out[k] = patches[k] @ weight + bias + row_table[r] + col_table[c], with k = r * cols + c."""
    weight = np.zeros((4, 2))
    weight[1, 0] = weight[2, 1] = 1.0  # feature 0 reads entry 1 of a patch, feature 1 reads entry 2
    rows = np.array([[0.0, 0.0], [1000.0, 0.0]])
    cols = np.array([[0.0, 0.0], [0.0, 100.0], [0.0, 200.0]])
    emb = impl.PatchEmbedding(weight, np.array([0.25, -0.5]), rows, cols)
    patches = np.arange(0.0, 48.0, 2.0).reshape(6, 4)  # patch k is [8k, 8k + 2, 8k + 4, 8k + 6]
    out = emb(patches, grid=(2, 3))
    assert type(out) is np.ndarray and out.dtype == np.float64 and out.shape == (6, 2)
    assert out.tolist() == [[2.25, 3.5], [10.25, 111.5], [18.25, 219.5],
                            [1026.25, 27.5], [1034.25, 135.5], [1042.25, 243.5]]


@pytest.mark.weight(RULE)
def test_matches_einsum_exactly(impl):
    """On integer-valued weights the output equals an einsum written out in the test, bit for bit."""
    patches, weight, bias, row_table, col_table = small_case()
    emb = impl.PatchEmbedding(weight, bias, row_table, col_table)
    for grid in [(2, 3), (3, 2)]:
        out = emb(patches, grid=grid)
        want = expected(patches, weight, bias, row_table, col_table, *grid)
        assert type(out) is np.ndarray and out.dtype == np.float64 and out.shape == want.shape
        assert np.array_equal(out, want), \
            f"a {grid[0]}x{grid[1]} grid: " + mistake(out, patches, weight, bias, row_table, col_table, *grid)


@pytest.mark.weight(RULE)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(0, 4), st.integers(0, 4), st.integers(0, 2**32 - 1))
def test_random_sizes(impl, patch_dim, d_model, rows, cols, seed):
    """For random sizes and grids that fit the tables, the output is exactly the hand computation."""
    rng = np.random.default_rng(seed)
    weight = rng.integers(-5, 6, size=(patch_dim, d_model)).astype(np.float64)
    bias = rng.integers(-5, 6, size=d_model).astype(np.float64)
    row_table = rng.integers(-50, 51, size=(rows + 2, d_model)).astype(np.float64)
    col_table = rng.integers(-50, 51, size=(cols + 1, d_model)).astype(np.float64)
    patches = rng.integers(0, 256, size=(rows * cols, patch_dim)).astype(np.int64)
    emb = impl.PatchEmbedding(weight, bias, row_table, col_table)
    out = emb(patches, grid=(rows, cols))
    assert type(out) is np.ndarray and out.dtype == np.float64 and out.shape == (rows * cols, d_model)
    assert np.array_equal(out, expected(patches, weight, bias, row_table, col_table, rows, cols))


@pytest.mark.weight(RULE)
def test_positions(impl):
    """positions(rows, cols) is row_table[r] + col_table[c] in row-major order, shape (rows * cols, d_model)."""
    _, weight, bias, row_table, col_table = small_case()
    emb = impl.PatchEmbedding(weight, bias, row_table, col_table)
    for rows, cols in [(2, 3), (3, 4), (1, 1), (0, 2)]:
        pos = emb.positions(rows, cols)
        want = np.array([row_table[k // cols] + col_table[k % cols] for k in range(rows * cols)]).reshape(-1, 3)
        assert type(pos) is np.ndarray and pos.shape == (rows * cols, 3) and pos.dtype == np.float64
        by_columns = np.array([row_table[k % rows] + col_table[k // rows] for k in range(rows * cols)]).reshape(-1, 3)
        assert not (np.array_equal(pos, by_columns) and not np.array_equal(pos, want)), \
            f"a {rows}x{cols} grid: your positions go down the columns; patch k is at row k // cols, column k % cols"
        assert np.array_equal(pos, want), \
            f"a {rows}x{cols} grid: position k must be row_table[k // cols] + col_table[k % cols]"
    with pytest.raises(ValueError):
        emb.positions(4, 1)
    with pytest.raises(ValueError):
        emb.positions(1, 5)


@pytest.mark.weight(VALIDATION)
def test_sizes_are_ints(impl):
    """patch_dim, d_model and max_grid (rows, cols) come from the arrays' shapes, as Python ints."""
    _, weight, bias, row_table, col_table = small_case()
    emb = impl.PatchEmbedding(weight, bias, row_table, col_table)
    assert emb.patch_dim == 4 and emb.d_model == 3 and emb.max_grid == (3, 4)
    assert type(emb.max_grid) is tuple and all(type(v) is int for v in (emb.patch_dim, emb.d_model, *emb.max_grid))


@pytest.mark.weight(VALIDATION)
def test_dtype_follows_the_weights(impl):
    """float32 weights give float32 output, also for uint8 patches; the other arrays are cast to that dtype."""
    patches, weight, bias, row_table, col_table = small_case()
    emb = impl.PatchEmbedding(weight.astype(np.float32), bias, row_table, col_table)
    out = emb(patches, grid=(2, 3))
    assert type(out) is np.ndarray and out.dtype == np.float32, "the output dtype must be the weights' dtype"
    assert np.allclose(out, expected(patches, weight, bias, row_table, col_table, 2, 3), rtol=1e-6)
    for name in ("weight", "bias", "row_table", "col_table"):
        assert getattr(emb, name).dtype == np.float32, f"{name} should be stored as float32"


@pytest.mark.weight(CONCEPT)
def test_inputs_are_not_modified(impl):
    """Calling the embedding changes neither the patches nor the stored weights and tables."""
    patches, weight, bias, row_table, col_table = small_case()
    copies = [a.copy() for a in (patches, weight, bias, row_table, col_table)]
    emb = impl.PatchEmbedding(weight, bias, row_table, col_table)
    emb(patches, grid=(2, 3))
    emb(patches, grid=(3, 2))
    for a, b in zip((patches, weight, bias, row_table, col_table), copies):
        assert np.array_equal(a, b)


@pytest.mark.weight(VALIDATION)
def test_constructor_names_the_wrong_shape(impl):
    """A weight that is not 2-D, or a bias or table that does not fit d_model, is a ValueError naming its shape."""
    _, weight, bias, row_table, col_table = small_case()
    bad = [((np.zeros(12), bias, row_table, col_table), "(12,)"),
           ((np.zeros((2, 2, 3)), bias, row_table, col_table), "(2, 2, 3)"),
           ((weight, np.zeros(5), row_table, col_table), "(5,)"),
           ((weight, np.zeros((1, 3)), row_table, col_table), "(1, 3)"),
           ((weight, bias, np.zeros((3, 4)), col_table), "(3, 4)"),
           ((weight, bias, row_table, np.zeros(3)), "(3,)")]
    for args, shape in bad:
        with pytest.raises(ValueError) as info:
            impl.PatchEmbedding(*args)
        assert shape in str(info.value), "the error message should show the shape that does not fit"
    with pytest.raises(TypeError):
        impl.PatchEmbedding(weight.astype(np.int64), bias, row_table, col_table)


@pytest.mark.weight(VALIDATION)
def test_call_names_the_wrong_shape(impl):
    """Patches of the wrong width, a grid that does not hold N patches, or a grid beyond the tables: ValueError."""
    patches, weight, bias, row_table, col_table = small_case()
    emb = impl.PatchEmbedding(weight, bias, row_table, col_table)
    for bad in (np.zeros((6, 5)), np.zeros((6, 4, 1)), np.zeros(24)):
        with pytest.raises(ValueError) as info:
            emb(bad, grid=(2, 3))
        assert str(bad.shape) in str(info.value), "the error message should show the shape of the patches"
    with pytest.raises(ValueError):
        emb(patches, grid=(2, 2))
    with pytest.raises(ValueError):
        emb(np.zeros((8, 4)), grid=(4, 2))
    with pytest.raises(ValueError):
        emb(np.zeros((5, 4)), grid=(1, 5))
    with pytest.raises(TypeError):
        emb(patches.tolist(), grid=(2, 3))
