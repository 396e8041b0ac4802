"""The similarity check (kit/similarity.py): what normalisation forgets, and that the calibrated threshold
separates edited copies of every reference from the blank stubs and from the honest solutions.

The edits are those of ``tools/similarity_threshold.py``, which measured the threshold; this file asserts what
that tool prints.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import sys
from pathlib import Path

import pytest

from bytes2logits.kit import similarity as sim
from bytes2logits.kit.build import answer_source
from bytes2logits.kit.labs import LABS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import similarity_threshold as tool  # noqa: E402

HONEST = Path(__file__).resolve().parent / "fixtures" / "honest"
HASH = 0x0D9A3525856352A0  # blake2b(digest_size=8) of "def\x1fV\x1f(\x1f)"

SAMPLE = '''
def total_cost(items, rate=0.2):
    """Sum the prices, plus tax."""
    subtotal = 0
    for name, price in items:  # every line item
        if price < 0:
            raise ValueError(f"item {name!r} has a negative price")
        subtotal += price
    return round(subtotal * (1 + rate), 2)
'''

# The same code: other names, layout, quotes, comments, docstring, parentheses and a trailing comma.
DISGUISED = """
def f(xs, r = 0.2,) :
    # no docstring here
    acc = 0 ; # running sum
    for (n, p) in xs:
        if (p < 0): raise ValueError(f'item {n!r} has a negative price')
        acc += p
    '''A string statement is not code.'''
    return round(
        acc * (1 + r),
        2,
    )
"""


def test_normalize_forgets_names_layout_quotes_comments_and_docstrings():
    assert sim.normalize(SAMPLE) == sim.normalize(DISGUISED)
    assert sim.fingerprints(SAMPLE) == sim.fingerprints(DISGUISED)
    assert sim.kgram_hashes(sim.normalize(SAMPLE)) == sim.kgram_hashes(sim.normalize(DISGUISED))


def test_normalize_keeps_keywords_operators_builtins_and_literal_values():
    tokens = sim.normalize(SAMPLE)
    for kept in ("def", "for", "in", "if", "raise", "return", "ValueError", "round", "<", "+=", "*"):
        assert kept in tokens
    assert "S:item {} has a negative price" in tokens and "N:0.2" in tokens
    assert not {"total_cost", "subtotal", "price", "name"} & set(tokens)
    assert sim.normalize("x = 0x10 + 1_000") == sim.normalize("y = 16 + 1000")
    # a local that shadows a builtin is a name like any other; other code, other tokens
    assert sim.normalize("id = 3\nprint(id)") == sim.normalize("key = 3\nprint(key)")
    assert sim.normalize("x = a + b") != sim.normalize("x = a - b")
    assert sim.normalize("raise ValueError('one message')") != sim.normalize("raise ValueError('another')")


def test_normalize_reads_cells_that_do_not_parse_and_ipython_magics():
    broken = 'def f(x):\n    """Doc."""\n    return x +\n'
    assert sim.normalize(broken)[:6] == ["def", "V", "(", "V", ")", ":"]
    assert "S:Doc." not in sim.normalize(broken)
    assert sim.normalize("%time y = 1\n")  # IPython's transform makes it Python; it does not raise
    # a cell magic's body is code, not the string IPython's transform passes to the magic
    assert sim.normalize("%%time\n" + SAMPLE) == sim.normalize(SAMPLE)


def test_hashes_are_stable_and_winnowing_keeps_window_minima():
    assert sim.kgram_hashes(["def", "V", "(", ")"], 4) == [HASH]  # BLAKE2b: the same in every process
    assert len(sim.kgram_hashes(list("abcdefghijkl"), 10)) == 3
    assert sim.winnow([5, 3, 9, 1, 7], 2) == {3, 1}
    assert sim.winnow([4, 2], 5) == {2}
    assert sim.winnow([], 3) == set()


def test_similarity_of_a_reference_to_itself_and_to_its_stub():
    lab = LABS["lab01_tokenizers"]
    ref, stub = answer_source(lab, "char_tokenizer"), sim.stub_source(lab, "char_tokenizer")
    assert sim.similarity(ref, ref, stub) == 1.0
    assert sim.similarity(stub, ref, stub) == 0.0
    assert sim.similarity(DISGUISED, ref, stub) == 0.0
    # a reference that adds a handful of fingerprints to its stub cannot be judged
    assert sim.similarity(SAMPLE, SAMPLE, "") is None
    assert sim.similarity(SAMPLE, SAMPLE, "", minimum=1) == 1.0


def _tasks():
    return [(lab, task.id) for lab in LABS.values() for task in lab.tasks]


@pytest.mark.parametrize("lab", LABS.values(), ids=lambda lab: lab.name)
def test_release_stub_is_what_the_solution_markers_make(lab):
    for task in lab.tasks:
        assert sim.stub_source(lab, task.id) == sim._derived_stub(lab, task.id)


@pytest.mark.parametrize("lab", LABS.values(), ids=lambda lab: lab.name)
def test_every_reference_scores_one_against_itself_and_its_stub_zero(lab):
    stubs = [(i, sim.stub_source(lab, t.id), t.id) for i, t in enumerate(lab.tasks)]
    copies = [(i, answer_source(lab, t.id), t.id) for i, t in enumerate(lab.tasks)]
    blank, copied = sim.task_scores(lab, stubs), sim.task_scores(lab, copies)
    for task in lab.tasks:
        short = blank[task.id].fingerprints < sim.MIN_FINGERPRINTS
        assert (blank[task.id].score is None) == short
        assert (copied[task.id].score is None) == short
        if not short:
            assert copied[task.id].score == 1.0, task.id
            assert blank[task.id].score == 0.0, task.id
            assert copied[task.id].cell == lab.tasks.index(task)
    assert sim.findings(lab, stubs) == []


def test_most_tasks_are_judged():
    judged = [t for lab, t in _tasks() if sim._lab_references(lab, None, sim.K, sim.W)[t] and
              len(sim._lab_references(lab, None, sim.K, sim.W)[t]) >= sim.MIN_FINGERPRINTS]
    assert len(judged) >= 35, "a change made most tasks too short to judge; rerun tools/similarity_threshold.py"


@pytest.mark.parametrize("lab", LABS.values(), ids=lambda lab: lab.name)
def test_every_edit_of_every_judged_reference_reaches_the_threshold(lab):
    for task in lab.tasks:
        ref = answer_source(lab, task.id)
        for name, edit in tool.ALL_EDITS.items():
            edited = edit(ref)
            ast.parse(edited)  # an edit a copier could make: still Python
            if name not in ("reorder", "for_while", "quotes"):  # these need several defs, a loop, a string
                assert edited != ref, (task.id, name)
            ts = sim.task_scores(lab, [(7, edited, task.id)])[task.id]
            if ts.score is None:
                continue
            assert ts.score >= sim.THRESHOLD, f"{lab.name}:{task.id}: edit {name!r} scores {ts.score:.2f}"
            if ts.not_judged:
                continue
            [finding] = [f for f in sim.findings(lab, [(7, edited, task.id)]) if f.task == task.id]
            assert finding.cell == 7


def _honest_cells(lab):
    return tool.honest_cells(lab, HONEST)


@pytest.mark.parametrize("lab", LABS.values(), ids=lambda lab: lab.name)
def test_honest_solutions_stay_below_the_threshold(lab):
    path = HONEST / f"{lab.name}.json"
    if lab.name == "lab01_tokenizers":
        assert path.is_file(), "lab01's honest fixture is the calibration's minimum"
    if not path.is_file():
        pytest.skip(f"no honest fixture {path.name}")
    cells = _honest_cells(lab)
    assert cells is not None, f"{path} is not valid JSON"
    assert {t for _, _, t in cells} - {None} <= {t.id for t in lab.tasks}
    scores = sim.task_scores(lab, cells)
    for task in lab.tasks:
        ts = scores[task.id]
        if ts.score is not None and not ts.not_judged:
            assert ts.score < sim.THRESHOLD, f"{lab.name}:{task.id}: an honest solution scores {ts.score:.2f}"
    assert sim.findings(lab, cells) == []


def test_not_judged_tasks_exist_and_are_explained():
    for (lab_name, task_id), why in sim.NOT_JUDGED.items():
        LABS[lab_name].task(task_id)
        assert why


def test_findings_shape():
    lab = LABS["lab02_words"]
    ref = answer_source(lab, "word_tokenizer")
    cells = [(3, "print('hello')", None), (5, sim.stub_source(lab, "split_words"), "split_words"),
             (8, tool.combined(ref), "word_tokenizer")]
    [finding] = sim.findings(lab, cells)
    assert isinstance(finding, sim.SimilarityFinding) and dataclasses.is_dataclass(finding)
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.score = 0  # type: ignore[misc]
    assert (finding.task, finding.cell) == ("word_tokenizer", 8)
    assert sim.THRESHOLD <= finding.score <= 1
    assert finding.reason.startswith(f"{int(finding.score * 100)}% of the reference's own code for this task "
                                     "(word_tokenizer) appears in this answer")
    assert finding.reason.endswith("(similarity check; an instructor will review it)")
    assert finding.line() == f"cell 8: {finding.reason}"
    # above the threshold only when asked for less
    assert sim.findings(lab, cells, threshold=1.01) == []


def test_findings_see_a_copy_split_or_put_in_another_tasks_cell():
    lab = LABS["lab02_words"]
    ref = answer_source(lab, "word_tokenizer")
    tree = ast.parse(ref)
    cls = tree.body[0]
    half = len(cls.body) // 2
    first = ast.unparse(ast.ClassDef(cls.name, [], [], cls.body[:half], []))
    second = ast.unparse(ast.ClassDef(cls.name + "Extra", [], [], cls.body[half:], []))
    [split] = sim.findings(lab, [(2, first, "word_tokenizer"), (4, second, None)])
    assert split.cell in (2, 4) and ("and cell" in split.reason)
    [moved] = sim.findings(lab, [(2, sim.stub_source(lab, "word_tokenizer"), "word_tokenizer"),
                                 (6, ref, "split_words")])
    assert (moved.task, moved.cell, moved.score) == ("word_tokenizer", 6, 1.0)


def test_honest_fixture_files_are_grade_id_to_source():
    for path in sorted(HONEST.glob("*.json")):
        lab = LABS[path.stem]
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            pytest.fail(f"{path.name} is not valid JSON")
        ids = {f"answer_{t.id}" for t in lab.tasks}
        assert set(data) <= ids | {t.id for t in lab.tasks}, path.name
