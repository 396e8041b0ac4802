"""Lab 03's points measure both halves of its concept: a trainer that gets every merge right by recounting
all pairs after each merge is graded as correct but slow (at most 7/10), and is told it is not incremental."""

import nbformat
import pytest

from bytes2logits.kit.check import grade_notebook
from bytes2logits.kit.labs import LABS

LAB = LABS["lab03_bpe_training"]

# A learner's honest first trainer: exact merges, the smallest-pair tie rule, everything recounted each merge.
NAIVE_TRAINER = '''
def train_bpe(text, num_merges, special_tokens=(), *, pattern=PRETOKENIZE_PATTERN, tie_break="smallest",
              progress=False):
    if type(num_merges) is not int or num_merges < 0:
        raise ValueError(f"num_merges must be a non-negative int, got {num_merges!r}")
    if not isinstance(text, str):
        raise TypeError("text must be a str")
    if tie_break not in ("smallest", "largest"):
        raise ValueError(f"unknown tie_break {tie_break!r}")
    specials = _check_special_tokens(special_tokens)
    words = {}
    for piece, freq in count_pieces(text, specials, pattern).items():
        words[tuple(bytes([b]) for b in piece.encode("utf-8"))] = freq
    merges = []
    while len(merges) < num_merges:
        counts = Counter()
        for word, freq in words.items():
            for pair in zip(word, word[1:]):
                counts[pair] += freq
        if not counts:
            break
        if tie_break == "smallest":
            best = min(counts, key=lambda p: (-counts[p], p))
        else:
            best = max(counts, key=lambda p: (counts[p], p))
        merges.append(best)
        rewritten = {}
        for word, freq in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            rewritten[tuple(out)] = rewritten.get(tuple(out), 0) + freq
        words = rewritten
    return build_vocab(merges, specials), merges
'''


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


@pytest.mark.slow
def test_a_correct_recounting_trainer_scores_at_most_7(tmp_path):
    nb = nbformat.read(LAB.source_notebook(), as_version=4)
    # Task 1 in the learner's own words (a verbatim copy of the reference would be flagged and score 0).
    task1 = _cell(nb, "answer_count_pieces")
    task1.source = "# my own version\nchecked = True\n\n" + task1.source
    # Task 2: the helpers stay; train_bpe is the recounting trainer.
    task2 = _cell(nb, "answer_train_bpe")
    head = task2.source[: task2.source.index("def train_bpe(")]
    task2.source = head + NAIVE_TRAINER.lstrip("\n")
    copy = tmp_path / f"{LAB.name}.ipynb"
    nbformat.write(nb, copy)

    results = {r.task: r for r in grade_notebook(copy, LAB)}
    count, train = results["count_pieces"], results["train_bpe"]
    assert not count.flags and not train.flags, count.lines + train.lines
    assert count.score == count.points, count.lines
    total = count.score + train.score
    assert total <= 7, f"{total}/10: {train.lines}"
    assert train.score > 0, train.lines

    failed = [line for line in train.lines if line.startswith("x ")]
    # Correct but slow: only the speed gates fail, and their lines say why and by how much.
    assert failed and all("speed" in line for line in failed), failed
    assert any("incrementally" in line for line in failed), failed
    assert any("the limit is 10x" in line for line in failed), failed
    assert any("the words that hold its pair" in line for line in failed), failed
