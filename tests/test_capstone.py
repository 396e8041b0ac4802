"""The capstone: SmolLM2 chatting through labs 13-17 (their solution notebooks) gives llama.cpp's answer.

The engine assembled by :mod:`bytes2logits.kit.capstone` runs no code of the package's engine in its path:
the reader, tokenizer, kernels, forward pass and generation loop are the notebooks' own (given code and
answers). With the instructor's solutions in place of a learner's answers it must reproduce llama.cpp's
float32 greedy ids, id for id; with a lab missing or unfinished it must say which.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from bytes2logits.kit import capstone
from bytes2logits.kit.labs import repo_root

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parity_fixtures import load_smollm2_fixture  # noqa: E402

pytestmark = pytest.mark.slow

EXACT = load_smollm2_fixture("exact")


@pytest.fixture(scope="module")
def engine():
    return capstone.assemble(where="solutions", n_ctx=256, progress=False)


@pytest.mark.parametrize("k", [1, 3], ids=lambda k: EXACT["prompts"][k]["name"])
def test_solutions_chat_like_llama_cpp(engine, k):
    """The prompt ids llama.cpp evaluated, then its greedy continuation, id for id."""
    p = EXACT["prompts"][k]
    assert engine.prompt_ids(p["messages"]) == p["ids"].tolist()
    n = 12
    ours = engine.greedy_ids(p["messages"], max_tokens=n)
    want = p["gen_ids"].tolist()[:n]
    assert ours == want[: len(ours)]  # llama.cpp's run does not stop at <|im_end|>: ours may stop early
    assert len(ours) == n or ours[-1] in engine.tokenizer.stop_ids


def test_chat_streams_and_remembers(engine, capsys):
    """chat() prints the streamed answer, returns it, and keeps the conversation for the next turn."""
    engine.reset()
    answer = engine.chat("What is the capital of France?", max_tokens=8)
    out = capsys.readouterr().out
    assert answer and answer in out
    assert [m["role"] for m in engine.history] == ["user", "assistant"]
    engine.reset()
    assert engine.history == []


def _course_copy(tmp_path: Path, unfinished: str | None = None, missing: str | None = None) -> Path:
    """The capstone's solution notebooks under tmp_path/solutions, one replaced by its blank release."""
    root = tmp_path / "course"
    for lab in capstone.CAPSTONE_LABS:
        dest = root / "solutions" / lab / f"{lab}.ipynb"
        dest.parent.mkdir(parents=True)
        if lab == missing:
            continue
        src = capstone.lab_notebook(lab, "labs" if lab == unfinished else "solutions")
        shutil.copy(src, dest)
    return root


def test_a_missing_lab_is_named(tmp_path):
    root = _course_copy(tmp_path, missing="lab16_forward_pass")
    with pytest.raises(capstone.LabProblem) as info:
        capstone.load_labs("solutions", root=root, progress=False)
    assert info.value.lab == "lab16_forward_pass"
    assert "lab 16 is missing" in str(info.value)


def test_an_unfinished_lab_is_named_with_its_task(tmp_path):
    root = _course_copy(tmp_path, unfinished="lab15_dequantization")
    with pytest.raises(capstone.LabProblem) as info:
        capstone.load_labs("solutions", root=root, progress=False)
    assert info.value.lab == "lab15_dequantization"
    assert "lab 15 is not finished" in str(info.value) and info.value.task


def test_the_hidden_block_of_a_solution_is_not_run():
    """An instructor's copy runs its visible checks only (the hidden block would grade, slowly)."""
    cell = "x = 1\nassert x == 1\n### BEGIN HIDDEN TESTS\nraise SystemExit\n### END HIDDEN TESTS\n"
    assert capstone._HIDDEN.sub("", cell) == "x = 1\nassert x == 1\n"
    assert repo_root().is_dir()
