"""Hidden suite, lab 16 task 4: transformer_block and forward, on SmolLM2 and three tiny architectures.

The models are built where the code under test runs, with the notebook's own ``Model`` class (whose
``forward`` method calls the notebook's ``forward``), and with the package's exact numerics, so that these
checks see the learner's ``forward`` and ``transformer_block`` and not their building blocks (tasks 1-3).
One check then runs the whole stack on the learner's own building blocks (``exact_numerics()``).

Targets are llama.cpp's: ``tests/fixtures/parity`` holds its float32 logits for five SmolLM2 prompts (an F32
re-export of the same Q4_1 weights, f32 KV cache) and for random-weight llama / qwen2 / qwen3 files, and
the engine meets them within 1e-3 per logit with the same top-1 and greedy tokens (``tests/test_parity.py``).
Splitting a prompt between two calls, or computing one row, must agree with one call within 1e-4: the same
arithmetic on other matrix shapes (the reference differs by less than 2e-5).
"""

import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bytes2logits.engine import gguf, quants
from bytes2logits.errors import ContextFullError

S = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("lab16_support.py"))))
F32 = np.float32
FX = S.smollm2_fixture()
PROMPTS = {p["name"]: p for p in FX["prompts"]}
N_CTX = 256
N_VOCAB = 49152
N_GREEDY = 3
SPEED_FACTOR = 3.0


PACKAGE_MASK = "__import__('bytes2logits.engine.ops', fromlist=['_']).causal_mask"


@pytest.fixture(autouse=True)
def fenced(impl, request):
    """The package's own forward and transformer_block raise while these checks run, and (except in the
    whole-stack check) the ``causal_mask`` that ``forward`` calls is the package's, so that a mistake in
    task 3 costs task 3's points, not this task's."""
    model = "bytes2logits.engine.model"
    with S.fence(impl, [(model, "forward"), (model, "transformer_block")]):
        if "whole_stack" in request.node.name:
            yield
            return
        with S.global_replaced(impl, "forward", "causal_mask", S.worker_eval(impl, PACKAGE_MASK)):
            yield


@pytest.fixture
def smollm2(impl):
    """SmolLM2 built by the notebook's Model with the package's exact numerics, once per suite."""
    return S.cached(impl, "smollm2", lambda: impl.Model.from_gguf(str(S.SMOLLM2), n_ctx=N_CTX))


@pytest.fixture
def ref_smollm2(reference):
    return S.cached(reference, "smollm2", lambda: reference.Model.from_gguf(str(S.SMOLLM2), n_ctx=N_CTX))


@pytest.fixture
def runs(impl, smollm2):
    """Every fixture prompt in one call, then N_GREEDY greedy tokens one call each (computed once)."""
    def run():
        out = {}
        for name, p in PROMPTS.items():
            ids, rows, logits = S.greedy(smollm2, p["ids"], N_GREEDY)
            out[name] = {"logits": logits, "gen": ids, "rows": rows}
        return out

    return S.cached(impl, "runs", run)


def test_smollm2_logits_match_llama_cpp(runs):
    """SmolLM2 on five chat prompts: every position's logits are within 1e-3 of llama.cpp's, with its top-1 tokens.

    Prompts of 22 to 113 tokens in one call each; llama.cpp's float32 run of the same weights, compared over
    its 64 largest logits per position; float32 [len(ids), vocab]."""
    for name, p in PROMPTS.items():
        logits = runs[name]["logits"]
        S.check_logits(logits, len(p["ids"]), N_VOCAB, f"prompt {name!r}")
        delta = S.top_delta(logits, p["top_ids"], p["top_logits"])
        assert delta <= 1e-3, f"prompt {name!r}: logits differ from llama.cpp's by up to {delta:.2g} (limit 1e-3)"
        assert np.array_equal(logits.argmax(-1), p["argmax"]), f"prompt {name!r}: a position's top-1 token differs"


def test_smollm2_greedy_tokens_match_llama_cpp(runs):
    """Greedy decoding after each prompt, one token per call, picks llama.cpp's tokens from logits within 1e-3.

    Each call passes one id with start_pos = the tokens so far (no mask) and reads the rest from the cache."""
    for name, p in PROMPTS.items():
        r = runs[name]
        assert r["gen"] == p["gen_ids"][:N_GREEDY].tolist(), f"prompt {name!r}: the greedy tokens differ"
        delta = S.top_delta(r["rows"], p["gen_top_ids"][:N_GREEDY], p["gen_top_logits"][:N_GREEDY])
        assert delta <= 1e-3, f"prompt {name!r}: the decode steps' logits differ from llama.cpp's by up to {delta:.2g}"


def test_a_prompt_split_between_calls_equals_one_call(smollm2, runs):
    """forward(ids[:k]) then forward(ids[k:], start_pos=k) gives the logits of one call, and n_past counts both.

    The KV cache holds the first part; a later call may also rewind start_pos and overwrite from there."""
    p = PROMPTS["short"]
    ids, full = p["ids"].tolist(), runs["short"]["logits"]
    first = smollm2.forward(ids[:9], 0)
    assert smollm2.n_past == 9, "after forward(ids, 0), model.n_past is len(ids)"
    second = smollm2.forward(ids[9:], 9)
    assert smollm2.n_past == len(ids), "after forward(ids, start_pos), model.n_past is start_pos + len(ids)"
    S.check_logits(second, len(ids) - 9, N_VOCAB, "the second call")
    assert np.abs(np.concatenate([first, second]) - full).max() <= 1e-4, \
        "the two calls' logits differ from one call over the whole prompt: the second must read the cached keys"
    again = smollm2.forward(ids[15:], 15)  # rewind: positions 15.. are recomputed from the cache of 0..14
    assert np.abs(again - full[15:]).max() <= 1e-4, "rewinding to start_pos=15 must overwrite positions 15 onwards"
    assert smollm2.n_past == len(ids)


def test_last_only_returns_the_last_row(smollm2, runs):
    """forward(ids, last_only=True) returns float32 [1, vocab]: the last position's logits, n_past as usual."""
    p = PROMPTS["short"]
    got = smollm2.forward(p["ids"].tolist(), 0, last_only=True)
    S.check_logits(got, 1, N_VOCAB, "last_only=True")
    assert np.abs(got[0] - runs["short"]["logits"][-1]).max() <= 1e-4, "last_only must give the last position's logits"
    assert smollm2.n_past == len(p["ids"]), "last_only changes what is returned, not what is cached"


def test_bad_ids_and_positions_are_refused(smollm2):
    """forward raises ValueError for empty or out-of-vocabulary ids and a start_pos outside 0 .. n_past.

    Before any work: model.n_past is left as it was (a start beyond n_past would leave a gap in the cache)."""
    n_past = smollm2.n_past
    for ids, start, what in (([1, 2], n_past + 1, "start_pos beyond n_past"), ([1], -1, "a negative start_pos"),
                             ([], 0, "no ids"), ([1, N_VOCAB], 0, "an id outside the vocabulary"),
                             ([-1], 0, "a negative id")):
        with pytest.raises(ValueError):
            smollm2.forward(ids, start)
        assert smollm2.n_past == n_past, f"{what}: a refused call must leave model.n_past unchanged"


def test_a_full_context_is_refused(smollm2):
    """Tokens that do not fit (start_pos + len(ids) > n_ctx) raise ContextFullError, leaving n_past as it was.

    check_context does the check; it comes before any work."""
    n_past = smollm2.n_past
    for ids, start in ((list(range(1, N_CTX + 2)), 0), (list(range(1, N_CTX - n_past + 2)), n_past)):
        with pytest.raises(ContextFullError):
            smollm2.forward(ids, start)
        assert smollm2.n_past == n_past, "a refused call must leave model.n_past unchanged"


def test_forward_runs_every_block_in_order(impl, smollm2):
    """forward calls transformer_block(model, li, x, start_pos, causal mask) for every layer in order, by name.

    It embeds the ids, passes each block's result to the next and ends with the final norm and the tied output
    head. (For this check every block is replaced by one that returns x unchanged.)"""
    with gguf.GGUFReader(S.SMOLLM2) as reader:
        info = reader.tensors["token_embd.weight"]
        table = np.asarray(reader.tensor_bytes("token_embd.weight")).reshape(info.shape[0], -1)
        norm_type = reader.tensors["output_norm.weight"].ggml_type
        norm = quants.dequantize(reader.tensor_bytes("output_norm.weight"), norm_type, (576,))
        sample = FX["sample_ids"].astype(np.int64)
        out_rows = quants.dequantize(np.ascontiguousarray(table[sample]), info.ggml_type, (sample.size, 576))

        def embed(ids):
            return quants.dequantize(np.ascontiguousarray(table[ids]), info.ggml_type, (len(ids), 576))

        calls = []

        def identity_block(model, li, x, start_pos, mask):
            calls.append((li, start_pos, None if mask is None else np.asarray(mask), np.asarray(x)))
            return x

        with S.global_replaced(impl, "forward", "transformer_block", identity_block):
            for ids, start in (([5, 17, 9000, 4, 4, 31, 2], 0), ([77, 1, 30000], 7), ([12], 10)):
                calls.clear()
                logits = smollm2.forward(ids, start)
                S.check_logits(logits, len(ids), N_VOCAB, f"{len(ids)} ids at start_pos {start}")
                assert [c[0] for c in calls] == list(range(30)), \
                    "forward must call transformer_block(model, li, x, start_pos, mask) for li = 0, 1, ..., 29"
                x0 = embed(ids)
                want_mask = S.causal_mask_oracle(len(ids), start) if len(ids) > 1 else None
                for _, pos, mask, x in calls:
                    assert pos == start, "every block gets the call's start_pos"
                    same = mask is None if want_mask is None else mask is not None and np.array_equal(mask, want_mask)
                    assert same, \
                        "every block gets causal_mask(len(ids), start_pos): None for a single token"
                    assert S.is_float32_array(x) and x.shape == x0.shape and np.array_equal(x, x0), \
                        "the first block gets the embedding rows of the ids (float32 [n, n_embd]), the next ones " \
                        "what the previous block returned"
                h = S.rms_norm64(x0, norm, 1e-5)
                want = h @ out_rows.astype(np.float64).T
                assert np.abs(logits[:, sample] - want).max() <= 1e-3, \
                    "after the blocks: the final rms_norm with output_norm, then the output head (the embedding)"
                assert smollm2.n_past == start + len(ids)


def test_transformer_block_matches_the_reference(impl, reference, smollm2, ref_smollm2):
    """transformer_block returns the reference block's residual stream and caches the same keys and values.

    Layers 0 and 17, 5 tokens at 0, 3 at 5, 1 at 8: float32 [n, n_embd], model.k_cache[li] / v_cache[li]
    written at positions start_pos .. start_pos + n - 1 and nowhere else."""
    rng = np.random.default_rng(16)
    for li in (0, 17):
        before_k, before_v = np.asarray(smollm2.k_cache[li]), np.asarray(smollm2.v_cache[li])
        for start, n in ((0, 5), (5, 3), (8, 1)):
            x = rng.standard_normal((n, 576)).astype(F32)
            mask = S.causal_mask_oracle(n, start) if n > 1 else None
            got = impl.transformer_block(smollm2, li, x.copy(), start, mask)
            want = reference.transformer_block(ref_smollm2, li, x.copy(), start, mask)
            where = f"layer {li}, {n} tokens at start_pos {start}"
            assert S.is_float32_array(got) and got.shape == x.shape, \
                f"{where}: transformer_block returns the residual stream, float32 [n, n_embd]"
            assert np.abs(got - want).max() <= 1e-4 * max(1.0, np.abs(want).max()), \
                f"{where}: the block's output differs from the reference block's"
        end = 9
        for cache, ref_cache, before, name in ((smollm2.k_cache[li], ref_smollm2.k_cache[li], before_k, "k_cache"),
                                               (smollm2.v_cache[li], ref_smollm2.v_cache[li], before_v, "v_cache")):
            cache, ref_cache = np.asarray(cache), np.asarray(ref_cache)
            assert np.abs(cache[:, :end] - ref_cache[:, :end]).max() <= 1e-4 * max(1.0, np.abs(ref_cache).max()), \
                f"layer {li}: model.{name}[li, :, start_pos:end] must hold the new tokens' " + \
                ("keys (after RoPE)" if name == "k_cache" else "values")
            assert np.array_equal(cache[:, end:], before[:, end:]), \
                f"layer {li}: transformer_block wrote to model.{name} beyond the call's positions"


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_tiny_architectures_match_llama_cpp(impl, tmp_path, arch):
    """Tiny llama, qwen2 and qwen3 models give llama.cpp's logits (within 1e-3) and its 8 greedy tokens.

    Random weights; qwen2 has q/k/v biases and NEOX RoPE, qwen3 RMSNorms each query and key head (q_norm,
    k_norm) before RoPE."""
    fx = S.tiny_fixture(arch, tmp_path)
    model = impl.Model.from_gguf(str(fx["path"]))
    ids, rows, logits = S.greedy(model, fx["ids"], len(fx["gen_ids"]))
    S.check_logits(logits, len(fx["ids"]), fx["spec"]["n_vocab"], arch)
    assert np.abs(logits - fx["logits"]).max() <= 1e-3, f"{arch}: the prompt's logits differ from llama.cpp's"
    assert ids == fx["gen_ids"].tolist(), f"{arch}: the greedy tokens differ from llama.cpp's"
    assert np.abs(rows - fx["gen_logits"]).max() <= 1e-3, f"{arch}: the decode steps' logits differ from llama.cpp's"


def test_your_whole_stack_matches_llama_cpp(impl, tmp_path, smollm2):
    """With exact_numerics(), your building blocks inside your forward, SmolLM2 and tiny qwen2/qwen3 match llama.cpp.

    Logits within 1e-3 and the same greedy tokens, with your rms_norm, swiglu, rope_angles, apply_rope and
    attention."""
    numerics = impl.exact_numerics()
    for arch in ("qwen2", "qwen3"):
        fx = S.tiny_fixture(arch, tmp_path)
        model = impl.Model.from_gguf(str(fx["path"]), numerics=numerics)
        ids, _, logits = S.greedy(model, fx["ids"], 4)
        S.check_logits(logits, len(fx["ids"]), fx["spec"]["n_vocab"], arch)
        assert np.abs(logits - fx["logits"]).max() <= 1e-3, f"{arch} with your building blocks: the logits differ"
        assert ids == fx["gen_ids"][:4].tolist(), f"{arch} with your building blocks: the greedy tokens differ"
    with S.own_numerics(smollm2, numerics):
        p = PROMPTS["default_system"]
        ids, _, logits = S.greedy(smollm2, p["ids"], 2)
        S.check_logits(logits, len(p["ids"]), N_VOCAB, "SmolLM2 with your building blocks")
        delta = S.top_delta(logits, p["top_ids"], p["top_logits"])
        assert delta <= 1e-3, f"SmolLM2 with your building blocks: logits off by up to {delta:.2g}"
        assert ids == p["gen_ids"][:2].tolist(), "SmolLM2 with your building blocks: the greedy tokens differ"


def test_speed(impl, reference, smollm2, ref_smollm2):
    """forward on a 64-token prompt takes at most 3x the reference's time, measured in the same run.

    Whole matrices per layer: no Python loop over tokens or heads."""
    # Each timed pair runs 64 random ids of its own (a prompt no other call saw, nor a prefix of one: a memo of
    # earlier logits has nothing to answer from), and each timed result must be the reference's logits for the
    # same ids, within the 1e-3 the checks above allow against llama.cpp.
    prompts = [np.random.default_rng([16, i]).integers(0, N_VOCAB, 64).tolist() for i in range(5)]

    def same_logits(i, got, want):
        S.check_logits(got, 64, N_VOCAB, "a timed 64-token forward")
        assert np.abs(got - want).max() <= 1e-3, "a timed 64-token forward: the logits differ from the reference's"

    best_ref, best, ok = S.race(lambda i: smollm2.forward(prompts[i], 0), lambda i: ref_smollm2.forward(prompts[i], 0),
                                SPEED_FACTOR, slack=0.05, pairs=len(prompts), check=same_logits)
    print(f"speed: {best:.3f} s against the reference's {best_ref:.3f} s ({best / best_ref:.2f}x)")
    assert ok, (f"a 64-token forward took {best:.2f} s, {best / best_ref:.1f}x the reference's {best_ref:.2f} s "
                f"(limit {SPEED_FACTOR:g}x)")
