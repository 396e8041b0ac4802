"""Labs 04 and 05: the points measure the concept. Wrong answers a learner could plausibly hand in lose points,
with a feedback line that names the misconception, when graded by the trusted grader (``check``)."""

import nbformat
import pytest

from bytes2logits.kit.check import grade_notebook
from bytes2logits.kit.labs import LABS

LAB04, LAB05 = LABS["lab04_bpe_encode"], LABS["lab05_byte_codec"]


def _reference_answers(lab) -> dict[str, str]:
    sol = nbformat.read(lab.source_notebook(), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"].removeprefix("answer_"): c.source for c in sol.cells
            if c.metadata.get("nbgrader", {}).get("grade_id", "").startswith("answer_")}


def _grade_copy(tmp_path, lab, changes: dict) -> dict:
    """Grade lab's release with every answer cell the reference plus a line (flagged by the similarity check,
    which does not change a score), ``changes[task]`` appended to that task's cell or, when callable,
    replacing it. Returns ``{task: TaskResult}``."""
    reference = _reference_answers(lab)
    nb = nbformat.read(lab.release_notebook(), as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if gid.startswith("answer_"):
            task = gid.removeprefix("answer_")
            change = changes.get(task)
            if callable(change):
                cell.source = change(reference[task])
            else:
                cell.source = reference[task] + "\n\n_in_my_own_words = True\n" + (f"\n\n{change}" if change else "")
    path = tmp_path / f"{lab.name}.ipynb"
    nbformat.write(nb, path)
    return {r.task: r for r in grade_notebook(path, lab)}


LIST_ORDER = '''
def _replay_in_list_order(self, piece):
    parts = [bytes([b]) for b in piece.encode("utf-8")]
    for left, right in self.merges:
        out, i = [], 0
        while i < len(parts):
            if i + 1 < len(parts) and parts[i] == left and parts[i + 1] == right:
                out.append(left + right)
                i += 2
            else:
                out.append(parts[i])
                i += 1
        parts = out
    return [self.token_to_id[p] for p in parts]


BPETokenizer._encode_piece = _replay_in_list_order
'''

UNUSED_CACHE = '''
def _encode_without_the_cache(self, text, add_bos=False, add_eos=False):
    if not isinstance(text, str):
        raise TypeError("encode takes a str")
    ids = []
    for piece in _PRETOKENIZE.findall(text):
        ids.extend(self._encode_piece(piece))
    if add_bos:
        ids.insert(0, self._special_id(self.bos, "bos"))
    if add_eos:
        ids.append(self._special_id(self.eos, "eos"))
    return ids


BPETokenizer.encode = _encode_without_the_cache
'''

TYPED_SPECIAL_IS_SPECIAL = '''
_init = BPETokenizer.__init__


def _one_table_for_all_tokens(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self.token_to_id = {}  # the first id that spells a token wins, specials included
    for i in sorted(self.vocab):
        self.token_to_id.setdefault(self.vocab[i], i)


BPETokenizer.__init__ = _one_table_for_all_tokens
'''

BARE_CODEC = '''
class ByteLevelCodec(BPETokenizer):
    def __init__(self, vocab, merges, special_tokens=(), *, bos="<bos>", eos="<eos>"):
        super().__init__(vocab, merges, special_tokens, bos=bos, eos=eos)

    def encode_trusted(self, text):
        raise NotImplementedError

    def token_repr(self, token_id):
        raise NotImplementedError
'''


def _lines(result) -> str:
    return "\n".join(result.lines)


@pytest.mark.slow
@pytest.mark.parametrize("wrong, failed_check", [
    (LIST_ORDER, "test_rank_order_not_list_order"),
    (UNUSED_CACHE, "cache"),
    (TYPED_SPECIAL_IS_SPECIAL, "test_a_merge_that_spells_a_special_is_an_ordinary_token"),
], ids=["list-order replay", "unused cache", "typed <bos> is the special id"])
def test_lab04_wrong_encoders_lose_points_with_a_line_naming_the_fault(tmp_path, wrong, failed_check):
    results = _grade_copy(tmp_path, LAB04, {"bpe_tokenizer": wrong})
    task = results["bpe_tokenizer"]
    # (The reference with one method replaced is flagged by the similarity check, for review; the score is
    # what the code earns all the same.)
    assert task.score < task.points, f"a wrong encoder scored {task.score}/{task.points}"
    # The check that names the fault (for the unused cache: any of the checks that look at the cache).
    assert any(line.startswith("x ") and failed_check in line.split(":")[0] for line in task.lines), _lines(task)
    assert results["piece_cache"].score == results["piece_cache"].points  # the cache itself is right


@pytest.mark.slow
def test_lab04_list_order_replay_fails_the_property_and_shows_the_case(tmp_path):
    task = _grade_copy(tmp_path, LAB04, {"bpe_tokenizer": LIST_ORDER})["bpe_tokenizer"]
    assert task.score <= task.points * 0.8, f"list-order replay scored {task.score}/{task.points}"
    property_line = next(line for line in task.lines if "test_any_merge_list_matches_a_rank_order_oracle" in line)
    assert "merges [" in property_line and "text '" in property_line and "got [" in property_line, property_line


@pytest.mark.slow
def test_lab05_codec_of_only_super_init_scores_at_most_half(tmp_path):
    """encode and decode come from the course's BPETokenizer: a constructor that validates nothing, with
    encode_trusted and token_repr not written, earns at most half of the codec task."""
    results = _grade_copy(tmp_path, LAB05, {"codec": lambda ref: BARE_CODEC})
    codec = results["codec"]
    assert codec.passed > 0, "the inherited round trip should still pass some checks"
    assert codec.score <= codec.points / 2, f"a bare super().__init__ codec scored {codec.score}/{codec.points}"
    assert "x test_every_byte_is_required" in _lines(codec)
    assert results["printable"].score == results["printable"].points
