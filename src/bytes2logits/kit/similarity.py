"""How much of the course's reference code for a task a submission holds: a similarity measure, for review.

The grader runs a learner's code where the course's reference is absent, so importing it earns nothing.
What remains is pasting it: copying the reference's source from the package or a chapter into an answer
cell, perhaps with the names changed and the layout redone. This module measures that, in the manner of
MOSS, and :func:`findings` flags such an answer for an instructor's manual review, never a score on its own.

**Normalisation** (:func:`normalize`). The cell goes through IPython's cell transform when IPython is
importable (magics become Python), is parsed, loses every string statement that stands alone (docstrings at
the start of a module, class or function body, and any other bare string) and is laid out again by
``ast.unparse``, so layout, line breaks, parentheses, trailing commas, quote style, string prefixes,
comments and number spelling (``0x10``, ``1_000``) are gone before a token is read. (A cell that does not
parse is read as written, comments, ``NL`` and docstrings skipped at the token level.) Then :mod:`tokenize`:
``INDENT``/``DEDENT`` are dropped (``NEWLINE`` stays, but not right after a ``:``); every identifier that is
not a keyword or an unshadowed builtin (``len``, ``ValueError``; a local named ``id`` is an identifier)
becomes one placeholder, ``V``, and attribute and keyword-argument names become ``A``; keywords and
operators stay; a literal stays with its value (``S:<text>`` for a string, the f-string's text with ``{}``
for each expression, ``B:`` for bytes, ``N:<number>``).

Keeping literal *values* departs from MOSS on purpose, by measurement (``tools/similarity_threshold.py``,
``--kinds-only`` for the alternative). With every literal a bare ``S``/``N``, the honest independent
solutions of the fixtures score up to 0.71 (lab08 ``choose``) and edited copies go down to 0.67 (lab13
``header``): they overlap. The docstrings specify each task so closely that an honest answer has the
reference's control flow, checks and calls; what it does not share is its prose (the error messages) and
some constants, and renaming, reformatting and the other edits below leave both untouched. The price: a
copier who rewords the messages lowers the score (the tool's ``reword*`` column, for information: 0.64 at
the lowest when every string of 12 characters or more is rewritten).

**Fingerprints** (:func:`fingerprints`). Every run of ``K`` consecutive normalised tokens (a k-gram) is
hashed with BLAKE2b (stable across processes, unlike ``hash()``), and the hashes are winnowed with a window
of ``W`` k-grams: each window keeps its minimum (the rightmost of equal ones), as in Schleimer, Wilkerson and
Aiken, "Winnowing: local algorithms for document fingerprinting" (SIGMOD 2003). Any stretch of at least
``K + W - 1 = 19`` tokens that two sources share is guaranteed to give a fingerprint of both; none shorter
than ``K`` can. The reference's fingerprints are looked up among *all* k-grams of the answer, so a copied
stretch counts however the answer's surroundings shift its windows.

* ``K = 10`` tokens is about one line of code (``V = V . A ( V , S:utf-8 )`` is 10). Shorter k-grams are the
  idioms any two solutions of a task share; longer ones are cut more often by a copier's edits (a dead
  statement destroys the ``K - 1`` k-grams across it). Measured with ``W = 10``: K = 8 lets honest answers
  reach 0.67 with edited copies as low as 0.67, K = 12 narrows the gap between them to 0.08; K = 10 leaves
  0.12 (``--sweep``).
* ``W = 10``: a body of n tokens keeps about ``2 n / (W + 1)`` fingerprints, one per five or six tokens;
  the guaranteed length ``K + W - 1`` stays under two lines. W = 6, 8 and 12 (with the minimum scaled to
  keep the same length) leave gaps of 0.15, 0.14 and 0.11: no real difference.

**What is compared** (:func:`similarity`). Every learner receives the scaffold: the set-up cell, each task's
stub (signatures, docstrings, ``raise NotImplementedError()``) and the visible checks. Every k-gram of the
scaffold is removed from the reference's fingerprints, so only what the reference adds beyond the release
counts. The score is the share of those fingerprints that the answer holds, in ``[0, 1]``. A reference that
adds fewer than ``MIN_FINGERPRINTS`` is too short to judge (``None``, never flagged): below 30, honest
answers reach 0.71 (lab04 ``piece_cache``, a two-line body everyone writes alike) and edited copies drop to
0.29 (15 of the 53 tasks are that short).

**Threshold.** Measured by ``tools/similarity_threshold.py`` (rerun it after changing anything here) on every
task of every lab: honest independent solutions (``tests/fixtures/honest/<lab>.json``), programmatic edits
of the reference (every local renamed, laid out again, comments removed and added, blank lines removed and
added, quotes swapped, definitions and methods in reverse order, a dead statement at the start of every
function and in the middle of long ones, a for loop turned into a while loop; each alone and all combined)
and the blank stub. Last run (all 17 fixtures present), over the 38 judged tasks:

==========================  ==========================  ==========================
lab                         max honest                  min edited
==========================  ==========================  ==========================
lab01_tokenizers            0.47 char_tokenizer         0.81 char_tokenizer
lab02_words                 0.30 word_tokenizer         0.72 word_tokenizer
lab03_bpe_training          0.28 train_bpe              0.92 train_bpe
lab04_bpe_encode            0.14 bpe_tokenizer          0.89 bpe_tokenizer
lab05_byte_codec            0.23 codec                  0.92 codec
lab06_special_tokens        0.60 chat_and_stops         0.79 special_tokenizer
lab07_chat_templates        0.52 chatml                 0.72 render_template
lab08_vocab_size            0.51 choose                 0.83 curve
lab09_pitfalls              0.21 fertility              0.77 fertility
lab10_image_patches         0.42 patch_embedding        0.75 patch_embedding
lab11_tokenizer_json        0.38 bpe_loader             0.86 bpe_loader
lab12_wordpiece_unigram     0.49 viterbi                0.77 bert
lab13_gguf_reader           0.42 header                 0.74 header
lab14_gguf_tokenizer        0.25 chat_prompt            0.84 merges
lab15_dequantization        0.58 legacy                 0.79 legacy
lab16_forward_pass          0.53 forward                0.85 attention
lab17_generation            0.48 sampler                0.78 stream
==========================  ==========================  ==========================

Overall: honest at most 0.60 (lab06 chat_and_stops), edited copies at least 0.72 (lab02 word_tokenizer,
lab07 render_template; each edit alone: 0.77 at the lowest), so ``THRESHOLD = 0.66`` sits in the middle,
0.06 from each. Every blank stub scores 0. One task is left out of those figures and is never flagged
(``NOT_JUDGED``): lab16's ``rope``, whose honest solution scores 0.71, above the threshold (its edited
copies: 0.78 at the lowest); its docstrings fix each numpy step, so an independent solution is the
reference with other names. The margin is thin: a flag is a reason to look, no more; rerun the tool when
fixtures or references change.
"""

from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import io
import json
import keyword
import tokenize
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .labs import Lab

__all__ = ["K", "MIN_FINGERPRINTS", "NOT_JUDGED", "THRESHOLD", "W", "SimilarityFinding", "TaskScore", "findings",
           "fingerprints", "kgram_hashes", "normalize", "opaque_findings", "reference_fingerprints",
           "scaffold_sources", "similarity", "stub_source", "task_scores", "winnow"]

#: Tokens per k-gram (see the module docstring).
K = 10
#: Winnowing window, in k-grams.
W = 10
#: A task whose reference adds fewer fingerprints than this beyond the scaffold is too short to judge.
MIN_FINGERPRINTS = 30
#: Flag a task at or above this share of the reference's own fingerprints.
THRESHOLD = 0.66
#: (lab, task) -> why it is never flagged: an honest solution measured at or above ``THRESHOLD``.
NOT_JUDGED: dict[tuple[str, str], str] = {
    ("lab16_forward_pass", "rope"): "its docstrings fix every numpy step: an independent solution scored 0.71",
}

# Literals as their values (the measure); False gives MOSS's kinds only (S, B, N), for the calibration tool's
# comparison (tools/similarity_threshold.py --kinds-only).
_LITERAL_VALUES = True

_BUILTINS = frozenset(dir(builtins))
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+: an f-string is a token sequence
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)
_SKIP = {tokenize.ENCODING, tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
_CLOSERS = {")", "]", "}"}
_NEWLINE = "⏎"

_MANAGER = None


def _transform(source: str) -> str:
    """IPython's cell transform (magics and ``!`` lines become Python), or the text as it is."""
    global _MANAGER
    try:
        if _MANAGER is None:
            from IPython.core.inputtransformer2 import TransformerManager

            _MANAGER = TransformerManager()
        return _MANAGER.transform_cell(source)
    except Exception:  # noqa: BLE001 - without IPython, or on a cell it cannot read, use the text as it is
        return source


def _is_bare_string(stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and \
        isinstance(stmt.value.value, str | bytes)


def _canonical_source(source: str) -> str:
    """``source`` without its bare string statements, laid out by ``ast.unparse`` (unchanged if it does not
    parse)."""
    try:
        tree = ast.parse(source)
        for node in ast.walk(tree):
            for field in ("body", "orelse", "finalbody"):
                stmts = getattr(node, field, None)
                if isinstance(stmts, list) and any(_is_bare_string(s) for s in stmts):
                    setattr(node, field, [s for s in stmts if not _is_bare_string(s)] or
                            ([] if isinstance(node, ast.Module) else [ast.Pass()]))
        return ast.unparse(tree)
    except Exception:  # noqa: BLE001 - a cell that does not parse (or unparse) is read as it is written
        return source


def _facts(source: str) -> tuple[set[str], set[tuple[int, int]], dict[tuple[int, int], str]] | None:
    """What tokens alone do not tell, from the syntax tree: the names ``source`` binds (a builtin's name bound
    there is a variable), where its keyword-argument names start, and the token of each string literal by
    where it starts (tokenize's positions). ``None`` when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    lines = source.splitlines()

    def position(node) -> tuple[int, int]:  # ast counts columns in UTF-8 bytes, tokenize in characters
        line = lines[node.lineno - 1] if node.lineno <= len(lines) else ""
        if line.isascii():
            return node.lineno, node.col_offset
        return node.lineno, len(line.encode("utf-8")[:node.col_offset].decode("utf-8", "ignore"))

    bound: set[str] = set()
    keywords: set[tuple[int, int]] = set()
    literals: dict[tuple[int, int], str] = {}
    for node in ast.walk(tree):  # breadth first: an f-string comes before the strings inside it
        if isinstance(node, ast.keyword) and node.arg is not None:
            keywords.add(position(node))
        elif isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and
                                                 isinstance(node.value, str | bytes)):
            literals.setdefault(position(node), _literal_token(node))
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    return bound, keywords, literals


def _string_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The bare string statements (docstrings) of a cell that does not parse, found by tokens: string
    literals that make up a whole logical line."""
    spans, start_of_line, current = [], True, None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in (tokenize.NL, tokenize.COMMENT, tokenize.ENCODING):
                continue
            if tok.type == tokenize.STRING and (start_of_line or current):
                current = (current[0] if current else tok.start, tok.end)
            elif tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER) and current:
                spans.append(current)
            else:
                current = None
            start_of_line = tok.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
            if start_of_line:
                current = None
    except (tokenize.TokenError, SyntaxError):
        pass
    return spans


def _literal_token(node) -> str:
    """The token of a string literal node: ``S:`` or ``B:`` and its text, an f-string's expressions as
    ``{}`` (``S`` or ``B`` alone without ``_LITERAL_VALUES``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, bytes):
        return "B:" + node.value.decode("latin-1") if _LITERAL_VALUES else "B"
    if not _LITERAL_VALUES:
        return "S"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return "S:" + node.value
    if isinstance(node, ast.JoinedStr):
        return "S:" + "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return "S"


def _literal(text: str) -> str:
    """The token of the string literal(s) written as ``text`` (adjacent literals are one)."""
    try:
        return _literal_token(ast.parse("(" + text + "\n)", mode="eval").body)
    except (SyntaxError, ValueError):
        return "S"


def _python(source: str) -> str:
    """``source`` as it is when it parses, else through IPython's cell transform (magics become Python). The
    body of a cell magic (``%%time``) is read as the code it is, not as the string the transform makes it."""
    try:
        ast.parse(source)
        return source
    except (SyntaxError, ValueError):
        pass
    stripped = source.lstrip()
    if stripped.startswith("%%"):
        return _python(stripped.partition("\n")[2])
    return _transform(source)


def _lex(source: str) -> list[str]:
    """The normalised tokens of ``source`` (see the module docstring)."""
    source = _canonical_source(_python(source))
    facts = _facts(source)
    bound, keywords, literals = facts or (set(), set(), {})
    spans = _string_spans(source) if facts is None else []
    offsets = [0]
    for line in source.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))

    def at(pos: tuple[int, int]) -> int:
        return offsets[pos[0] - 1] + pos[1] if pos[0] - 1 < len(offsets) else len(source)

    out: list[str] = []
    depth = 0  # inside an f-string's tokens (Python 3.12+)
    run: list = []  # start and end of adjacent string literals, not yet emitted

    def emit(tok: str) -> None:
        if tok == _NEWLINE and (not out or out[-1] in (_NEWLINE, ":")):
            return
        if tok in _CLOSERS and out and out[-1] == ",":
            out.pop()  # a trailing comma
        out.append(tok)

    def flush() -> None:
        if run:
            emit(literals.get(run[0]) or _literal(source[at(run[0]):at(run[1])]))
            run.clear()

    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            kind, text = tok.type, tok.string
            if depth:
                depth += (kind == _FSTRING_START) - (kind == _FSTRING_END)
                if not depth:
                    run[1] = tok.end
                continue
            if kind in _SKIP or any(a <= tok.start < b for a, b in spans):
                continue
            if kind == tokenize.STRING or kind == _FSTRING_START:
                run[:] = [run[0] if run else tok.start, tok.end]
                depth = int(kind == _FSTRING_START)
                continue
            flush()
            if kind == tokenize.NAME:
                if keyword.iskeyword(text) or (text in _BUILTINS and text not in bound):
                    emit(text)
                elif (out and out[-1] == ".") or tok.start in keywords:
                    emit("A")
                else:
                    emit("V")
            elif kind == tokenize.NUMBER:
                emit("N:" + text if _LITERAL_VALUES else "N")
            elif kind == tokenize.NEWLINE or (kind == tokenize.OP and text == ";"):
                emit(_NEWLINE)
            elif text.strip():
                emit(text)
    except (tokenize.TokenError, SyntaxError):
        pass  # a cell that does not tokenize to its end: what came before still counts
    flush()
    emit(_NEWLINE)
    return out


@functools.lru_cache(maxsize=4096)
def _tokens(source: str) -> tuple[str, ...]:
    return tuple(_lex(source))


def normalize(source: str) -> list[str]:
    """The normalised token stream of Python ``source``: the same after renaming, a new layout, other quotes,
    comments or docstrings (see the module docstring).

    >>> normalize("total = len(xs)  # count\\nprint('n', total, sep=None)")
    ['V', '=', 'len', '(', 'V', ')', '⏎', 'print', '(', 'S:n', ',', 'V', ',', 'A', '=', 'None', ')', '⏎']
    >>> normalize('def f(a):\\n    "Doc."\\n    return a.b + 1') == normalize("def g(x): return (x.y+1)")
    True
    """
    return list(_tokens(source))


def _hash(gram: Sequence[str]) -> int:
    data = "\x1f".join(gram).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def kgram_hashes(tokens: Sequence[str], k: int = K) -> list[int]:
    """The stable hash of every run of ``k`` consecutive tokens, in order (one, of them all, if fewer)."""
    if not tokens:
        return []
    if len(tokens) < k:
        return [_hash(tokens)]
    return [_hash(tokens[i:i + k]) for i in range(len(tokens) - k + 1)]


def winnow(hashes: Sequence[int], w: int = W) -> set[int]:
    """Winnowing: the minimum hash of every window of ``w`` consecutive hashes (of them all, if fewer).

    >>> sorted(winnow([77, 74, 42, 17, 98, 50, 17, 98, 8, 88, 67, 39, 77, 74, 42, 17, 98], 4))
    [8, 17, 39]
    """
    if not hashes:
        return set()
    if len(hashes) <= w:
        return {min(hashes)}
    return {min(hashes[start:start + w]) for start in range(len(hashes) - w + 1)}


def _sources(source: str | Iterable[str]) -> list[str]:
    return [source] if isinstance(source, str) else list(source)


def _all_grams(source: str | Iterable[str], k: int) -> set[int]:
    grams: set[int] = set()
    for text in _sources(source):
        grams.update(kgram_hashes(_tokens(text), k))
    return grams


def fingerprints(source: str | Iterable[str], *, k: int = K, w: int = W) -> set[int]:
    """The winnowed fingerprints of ``source``: one cell, or several, each fingerprinted on its own."""
    found: set[int] = set()
    for text in _sources(source):
        found |= winnow(kgram_hashes(_tokens(text), k), w)
    return found


def reference_fingerprints(reference_source: str, stub_source: str | Iterable[str], *, k: int = K,
                           w: int = W) -> frozenset[int]:
    """The reference's fingerprints that no k-gram of the scaffold (one cell or several) has: what the
    reference adds to what every learner receives."""
    return frozenset(fingerprints(reference_source, k=k, w=w) - _all_grams(stub_source, k))


def _score(own: frozenset[int], found: set[int], minimum: int) -> float | None:
    if len(own) < minimum:
        return None
    return len(own & found) / len(own)


def similarity(answer_source: str | Iterable[str], reference_source: str, stub_source: str | Iterable[str], *,
               k: int = K, w: int = W, minimum: int = MIN_FINGERPRINTS) -> float | None:
    """The share, in ``[0, 1]``, of the reference's fingerprints beyond the stub that occur in the answer.

    ``answer_source`` and ``stub_source`` are one cell's source or several cells' (each tokenised alone).
    ``None`` when the reference adds fewer than ``minimum`` fingerprints to the stub: too short to judge.
    """
    return _score(reference_fingerprints(reference_source, stub_source, k=k, w=w), _all_grams(answer_source, k),
                  minimum)


def _notebook_cells(path: Path) -> list[tuple[str | None, str]]:
    """``(grade_id or None, source)`` of every code cell of a notebook (read as JSON)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        cells.append((cell.get("metadata", {}).get("nbgrader", {}).get("grade_id"), source))
    return cells


def _derived_stub(lab: Lab, task_id: str) -> str:
    """The stub of a task's answer cell as nbgrader writes it: each solution region becomes its code stub."""
    from .build import BEGIN, END, answer_source

    out, inside = [], False
    for line in answer_source(lab, task_id).splitlines():
        if line.strip() == BEGIN:
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            out += [indent + "# YOUR CODE HERE", indent + "raise NotImplementedError()"]
        elif line.strip() == END:
            inside = False
        elif not inside:
            out.append(line)
    return "\n".join(out)


def stub_source(lab: Lab, task_id: str, root: Path | None = None) -> str:
    """The release's answer cell of ``task_id`` (grade_id ``answer_<task>`` of ``labs/<lab>/<lab>.ipynb``), or
    the same stub made from the reference's solution markers when the course has no release folder."""
    path = lab.release_notebook(root)
    if path.is_file():
        for grade_id, source in _notebook_cells(path):
            if grade_id == f"answer_{task_id}":
                return source
    return _derived_stub(lab, task_id)


def scaffold_sources(lab: Lab, root: Path | None = None) -> list[str]:
    """Every code cell a learner receives in the release (set-up, stubs, visible checks): the scaffold whose
    k-grams no answer is blamed for. Without a release folder: the set-up cell and the stubs."""
    path = lab.release_notebook(root)
    if path.is_file():
        return [source for _, source in _notebook_cells(path)]
    from .build import setup_source

    return [setup_source(lab), *(_derived_stub(lab, t.id) for t in lab.tasks)]


@functools.lru_cache(maxsize=64)
def _lab_references(lab: Lab, root: Path | None, k: int, w: int) -> dict[str, frozenset[int]]:
    from .build import answer_source

    scaffold = scaffold_sources(lab, root)
    return {t.id: reference_fingerprints(answer_source(lab, t.id), scaffold, k=k, w=w) for t in lab.tasks}


@dataclass(frozen=True)
class TaskScore:
    """How much of one task's reference the learner's cells hold (see :func:`task_scores`)."""

    task: str
    score: float | None  # None: too short to judge
    cell: int | None  # the cell holding the most of the reference's own fingerprints (None: none holds any)
    others: tuple[int, ...]  # the other cells, of the same place, that hold some
    fingerprints: int  # how many fingerprints the reference adds to the scaffold
    not_judged: str | None = None  # why the task is never flagged, whatever its score (NOT_JUDGED)


def task_scores(lab: Lab, written_cells: Iterable[tuple[int, str, str | None]], *, root: Path | None = None,
                k: int = K, w: int = W, minimum: int = MIN_FINGERPRINTS) -> dict[str, TaskScore]:
    """Per task of ``lab``, the share of its reference's own fingerprints that the learner's cells hold.

    ``written_cells`` are ``(cell index, source, task id or None)``. The places looked at: the task's own
    answer cells together with the cells that belong to no task (helpers may sit in an extra cell), and each
    other task's cell alone (a copy put in the wrong cell). The best place gives the score; other tasks'
    cells are not pooled, so the idioms that several honest answers share do not add up.
    """
    cells = [(index, task, _all_grams(source, k)) for index, source, task in written_cells]
    result = {}
    for task_id, own in _lab_references(lab, root, k, w).items():
        base = [c for c in cells if c[1] in (task_id, None)]
        best = None
        for place in [base] + [[c] for c in cells if c[1] not in (task_id, None)]:
            found: set[int] = set()
            for _, _, grams in place:
                found |= grams & own
            holders = sorted(((len(own & grams), task == task_id, -index), index) for index, task, grams in place
                             if own & grams)
            here = (_score(own, found, minimum), holders[-1][1] if holders else None,
                    tuple(sorted(index for _, index in holders[:-1])))
            if best is None or (here[0] or 0) > (best[0] or 0):
                best = here
        score, cell, others = best if best is not None else (_score(own, set(), minimum), None, ())
        result[task_id] = TaskScore(task_id, score, cell, others, len(own), NOT_JUDGED.get((lab.name, task_id)))
    return result


@dataclass(frozen=True)
class SimilarityFinding:
    """A task whose answer holds at least ``THRESHOLD`` of the reference's own code: for manual review."""

    task: str
    cell: int
    reason: str
    score: float

    def line(self) -> str:
        """``cell N: reason``: the line the learner's feedback and the gradebook's flag carry."""
        return f"cell {self.cell}: {self.reason}"


def findings(lab: Lab, written_cells: Iterable[tuple[int, str, str | None]], *, root: Path | None = None,
             threshold: float | None = None) -> list[SimilarityFinding]:
    """One finding per task of ``lab`` that scores at or above ``threshold`` (default ``THRESHOLD``).

    ``written_cells`` are ``(cell index, source, task id or None)`` of the cells the learner wrote, as
    :func:`bytes2logits.kit.notebook.submission_cells` gives them. Tasks too short to judge, and those in
    ``NOT_JUDGED``, are never flagged.
    """
    limit = THRESHOLD if threshold is None else threshold
    found = []
    for ts in task_scores(lab, list(written_cells), root=root).values():
        if ts.score is None or ts.cell is None or ts.not_judged or ts.score < limit:
            continue
        where = "this answer"
        if ts.others:
            where += f" and cell{'s' if len(ts.others) > 1 else ''} {', '.join(map(str, ts.others))}"
        reason = (f"{int(ts.score * 100)}% of the reference's own code for this task ({ts.task}) appears in "
                  f"{where} (similarity check; an instructor will review it)")
        found.append(SimilarityFinding(ts.task, ts.cell, reason, round(ts.score, 3)))
    return found


# Calls that run code built at run time: what the similarity check cannot read (a pasted reference, compressed
# and exec'd, scores nothing here). A learner's answer has no need of them, so they go to a person too.
_OPAQUE_CALLS = {"exec", "eval", "compile", "__import__"}


def opaque_findings(lab: Lab, written_cells: Iterable[tuple[int, str, str | None]]) -> list[SimilarityFinding]:
    """Cells that run code they build at run time (``exec``/``eval``/``compile``/``__import__`` of something
    other than a literal): the similarity check cannot read that code, so the task is flagged for review.
    A cell tied to no task flags every task of the lab. The score is not touched."""
    found = []
    for index, source, task in written_cells:
        try:
            tree = ast.parse(_transform(source))
        except SyntaxError:
            continue
        hits = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                fn = node.func
                # exec(...), builtins.exec(...); re.compile(...) is a regular expression, not code
                name = fn.id if isinstance(fn, ast.Name) else \
                    fn.attr if isinstance(fn, ast.Attribute) and fn.attr in ("exec", "eval", "__import__") else ""
                literal = bool(node.args) and isinstance(node.args[0], ast.Constant)
                if name in _OPAQUE_CALLS and not literal:
                    hits.add(name)
        if not hits:
            continue
        reason = (f"runs code it builds at run time ({', '.join(sorted(hits))}), which the similarity check "
                  "cannot read (an instructor will review it)")
        for t in ([task] if task else [t.id for t in lab.tasks]):
            found.append(SimilarityFinding(t, index, reason, 1.0))
    return found
