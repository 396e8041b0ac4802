"""Hidden suite, lab 08 task 2: embedding_params, embedding_fraction, kv_cache_bytes_per_token."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

# SmolLM2-135M, as its GGUF file states it: 49152 x 576 embedding, tied head, 134 515 008 parameters in all.
SMOL_V, SMOL_D, SMOL_TOTAL = 49152, 576, 134_515_008
SMOL_OTHER = SMOL_TOTAL - SMOL_V * SMOL_D


def exact_int(value):
    assert type(value) is int, f"the count must be a plain int, got {type(value).__name__}"
    return value


@pytest.mark.weight(3)
def test_embedding_params_examples(impl):
    """A tied model pays V x d once (embedding = head); an untied one pays 2 x V x d."""
    assert exact_int(impl.embedding_params(SMOL_V, SMOL_D, tied=True)) == 28_311_552, (
        "tied (SmolLM2's 49152 x 576): the head IS the embedding matrix, so it is counted once")
    assert exact_int(impl.embedding_params(SMOL_V, SMOL_D, tied=False)) == 56_623_104, (
        "untied (49152 x 576): the output head is a second V x d matrix, counted as well as the embedding")
    assert exact_int(impl.embedding_params(1, 1, tied=True)) == 1, "tied, V = d = 1"
    assert exact_int(impl.embedding_params(128_000, 4096, tied=False)) == 1_048_576_000, (
        "untied, 128000 x 4096: embedding and head")


@pytest.mark.weight(3)
@given(st.integers(1, 300_000), st.integers(1, 10_000))
def test_embedding_params_is_linear(impl, v, d):
    """The count is V x d (tied) or 2 x V x d (untied), exactly, for any sizes."""
    tied = exact_int(impl.embedding_params(v, d, tied=True))
    untied = exact_int(impl.embedding_params(v, d, tied=False))
    assert tied == v * d, f"tied, V={v}, d={d}: one V x d matrix serves as embedding and head"
    assert untied == 2 * v * d, f"untied, V={v}, d={d}: embedding plus a head of the same shape"


def test_embedding_params_refuses_bad_arguments(impl):
    """Sizes must be positive ints (not bools or floats) and tied a bool: TypeError or ValueError otherwise."""
    for v, d in ((0, 576), (49152, 0), (-1, 576)):
        with pytest.raises(ValueError):
            impl.embedding_params(v, d, tied=True)
    for v, d in ((49152.0, 576), (49152, "576"), (True, 576), (49152, None)):
        with pytest.raises(TypeError):
            impl.embedding_params(v, d, tied=True)
    for tied in ("no", 0, 1, None):
        with pytest.raises(TypeError):
            impl.embedding_params(49152, 576, tied=tied)


@pytest.mark.weight(2)
def test_embedding_fraction_of_smollm2(impl):
    """SmolLM2's tied table is about 21% of its parameters; untied, the same table and head would be about 35%."""
    tied = impl.embedding_fraction(SMOL_V, SMOL_D, SMOL_OTHER, tied=True)
    untied = impl.embedding_fraction(SMOL_V, SMOL_D, SMOL_OTHER, tied=False)
    assert type(tied) is float and type(untied) is float, "a fraction is a float"
    assert tied == pytest.approx(28_311_552 / SMOL_TOTAL, rel=1e-12), (
        "tied: a share of the whole model, E / (E + other_params), not a ratio E / other_params")
    assert untied == pytest.approx(56_623_104 / (SMOL_TOTAL + 28_311_552), rel=1e-12), (
        "untied: E counts the embedding and the head")


@pytest.mark.weight(2)
@given(st.integers(1, 100_000), st.integers(1, 4096), st.integers(0, 10**10))
def test_embedding_fraction_properties(impl, v, d, other):
    """The fraction is E / (E + other): in (0, 1], exactly 1 with nothing else, larger untied than tied."""
    tied = impl.embedding_fraction(v, d, other, tied=True)
    untied = impl.embedding_fraction(v, d, other, tied=False)
    assert type(tied) is float
    assert tied == pytest.approx(v * d / (v * d + other), rel=1e-12), (
        f"tied, V={v}, d={d}, other_params={other}: the share of the whole, E / (E + other_params)")
    assert 0 < tied <= untied <= 1, "a share lies in (0, 1], and an untied head only adds to it"
    if other == 0:
        assert tied == 1.0 and untied == 1.0, "with other_params=0 the vocabulary is the whole model: a share of 1.0"
    else:
        assert tied < untied, (
            f"V={v}, d={d}, other_params={other}: an untied head adds a second table, so a larger share")


def test_embedding_fraction_refuses_bad_arguments(impl):
    """other_params must be an int >= 0; the sizes and tied are checked as for embedding_params."""
    with pytest.raises(ValueError):
        impl.embedding_fraction(1000, 64, -1, tied=True)
    with pytest.raises(TypeError):
        impl.embedding_fraction(1000, 64, 1.5, tied=True)
    with pytest.raises(TypeError):
        impl.embedding_fraction(1000, 64, 10, tied="yes")
    with pytest.raises(ValueError):
        impl.embedding_fraction(0, 64, 10, tied=True)


@pytest.mark.weight(3)
def test_kv_cache_of_smollm2(impl):
    """SmolLM2 (30 layers, 3 KV heads of 64) holds 2 x 30 x 3 x 64 values per token: 23040 bytes in float16."""
    got = exact_int(impl.kv_cache_bytes_per_token(30, 3, 64))
    assert got != 11_520, ("half the bytes: each layer caches a key AND a value per KV head (a factor 2), and each "
                           "value takes bytes_per_value bytes")
    assert got == 23_040, "30 layers, 3 KV heads of 64 dimensions, 2 bytes per value"


def test_kv_cache_counts_bytes(impl):
    """bytes_per_value multiplies the result: the function counts bytes, not values (float32 is twice float16)."""
    half = exact_int(impl.kv_cache_bytes_per_token(30, 3, 64))
    assert exact_int(impl.kv_cache_bytes_per_token(30, 3, 64, 4)) == 2 * half, "bytes_per_value=4 against the default 2"
    assert exact_int(impl.kv_cache_bytes_per_token(30, 3, 64, bytes_per_value=1)) * 2 == half, (
        "bytes_per_value=1 against the default 2")


@pytest.mark.weight(2)
@given(st.integers(1, 128), st.integers(1, 64), st.integers(1, 256), st.sampled_from([1, 2, 4]))
def test_kv_cache_formula(impl, layers, heads, dim, nbytes):
    """Key and value, per layer, per KV head, per dimension, per byte: the product, times 2."""
    assert exact_int(impl.kv_cache_bytes_per_token(layers, heads, dim, nbytes)) == 2 * layers * heads * dim * nbytes, (
        f"n_layer={layers}, n_head_kv={heads}, head_dim={dim}, bytes_per_value={nbytes}")


def test_kv_cache_refuses_bad_arguments(impl):
    """Every count must be a positive int: 0 or negative is a ValueError, a float or bool a TypeError."""
    with pytest.raises(ValueError):
        impl.kv_cache_bytes_per_token(0, 3, 64)
    with pytest.raises(ValueError):
        impl.kv_cache_bytes_per_token(30, 3, 64, 0)
    with pytest.raises(TypeError):
        impl.kv_cache_bytes_per_token(30, 3.0, 64)
    with pytest.raises(TypeError):
        impl.kv_cache_bytes_per_token(30, 3, 64, True)
