"""Measure the similarity check's threshold (``bytes2logits.kit.similarity``) on every task of every lab.

For each task it prints the similarity to the task's reference, as the grader computes it
(``similarity.task_scores``), of

* (a) an honest, independent solution: ``tests/fixtures/honest/<lab>.json`` (grade_id -> source of each
  answer cell; every cell of the file is a cell the "learner" wrote). A lab without the file (or with one
  that is not valid JSON yet) is reported as missing;
* (b) programmatic edits of the reference, each alone and all combined: every local variable renamed,
  reformatted (``ast.unparse``), comments removed and one added to every statement, blank lines removed and
  added, quote styles swapped, top-level definitions and methods in reverse order, dead statements inserted
  (one at the start of every function body, one more in the middle of bodies of four statements or more),
  and the first for loop turned into a while loop. A column marked ``*`` (``reword``: every string of 12
  characters or more rewritten) is shown for information and not used to choose the threshold;
* (c) the blank stub of the release (must be 0, or too short to judge).

A task whose reference adds fewer than ``MIN_FINGERPRINTS`` fingerprints to the scaffold shows ``short``:
it is never judged, nor is a task in ``NOT_JUDGED``. The summary gives, per lab, the highest honest score
and the lowest edited score over judged tasks, the figures over all labs, whether ``THRESHOLD`` lies
between them, and the tasks whose honest score reaches the threshold (they belong in ``NOT_JUDGED``). The
exit status is 1 when an honest solution would be flagged, an edit missed, or a stub scores.

    python tools/similarity_threshold.py               # the table and summary with the module's settings
    python tools/similarity_threshold.py --lab lab01_tokenizers
    python tools/similarity_threshold.py --kinds-only  # literals as S/B/N only (MOSS), for comparison
    python tools/similarity_threshold.py --sweep       # summary only, for a grid of K and W
    python tools/similarity_threshold.py --min 1 --threshold 0.5   # other settings, e.g. every task
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import sys
import tokenize
from collections.abc import Callable
from pathlib import Path

from bytes2logits.kit import similarity as sim
from bytes2logits.kit.build import answer_source
from bytes2logits.kit.labs import LABS, Lab

ROOT = Path(__file__).resolve().parents[1]
HONEST = ROOT / "tests" / "fixtures" / "honest"


# --- programmatic edits of a source: each returns valid Python that a copier could have written ---------------

def _tokens(src: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(src).readline))


def _replace_spans(src: str, edits: list[tuple[tuple[int, int], tuple[int, int], str]]) -> str:
    """Replace ``(start, end, text)`` spans (tokenize positions: 1-based rows, 0-based columns) in ``src``."""
    lines = src.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def at(pos: tuple[int, int]) -> int:
        return offsets[pos[0] - 1] + pos[1]

    out = src
    for start, end, text in sorted(edits, key=lambda e: at(e[0]), reverse=True):
        out = out[:at(start)] + text + out[at(end):]
    return out


def rename_locals(src: str) -> str:
    """Rename every parameter and local variable of every function (attributes and globals keep their names)."""
    tree = ast.parse(src)
    top = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    top |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    local: set[str] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            local.update(a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg))
            for node in ast.walk(fn):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    local.add(node.id)
                elif isinstance(node, ast.ExceptHandler) and node.name:
                    local.add(node.name)
    local -= top
    names = {name: f"q{i}z" for i, name in enumerate(sorted(local))}
    toks = _tokens(src)
    edits = [(t.start, t.end, names[t.string]) for i, t in enumerate(toks)
             if t.type == tokenize.NAME and t.string in names and not (i and toks[i - 1].string == ".")]
    return _replace_spans(src, edits)


def reformat(src: str) -> str:
    """Lay the code out again (``ast.unparse``: its own spacing, parentheses, quotes; comments gone)."""
    return ast.unparse(ast.parse(src))


def recomment(src: str) -> str:
    """Remove every comment, then add one at the end of every statement."""
    edits = [(t.start, t.end, "") for t in _tokens(src) if t.type == tokenize.COMMENT]
    src = _replace_spans(src, edits)
    edits = [(t.start, t.start, "  # step") for t in _tokens(src) if t.type == tokenize.NEWLINE and t.string]
    return _replace_spans(src, edits)


def reblank(src: str) -> str:
    """Remove every blank line between statements, then add one after every other statement."""
    toks = _tokens(src)
    rows = {t.start[0] for t in toks if t.type == tokenize.NL and not t.line.strip()}
    lines = [line for i, line in enumerate(src.splitlines(keepends=True), 1) if i not in rows]
    src = "".join(lines)
    ends = [t.start for t in _tokens(src) if t.type == tokenize.NEWLINE and t.string]
    return _replace_spans(src, [(pos, pos, "\n") for pos in ends[::2]])


def swap_quotes(src: str) -> str:
    """Write every one-line string literal with the other quote character where its text allows it."""
    edits = []
    toks = _tokens(src)
    fstart = getattr(tokenize, "FSTRING_START", None)
    stack: list[tokenize.TokenInfo] = []
    for t in toks:
        if t.type == tokenize.STRING:
            prefix = t.string[: len(t.string) - len(t.string.lstrip("rRbBuUfF"))]
            body = t.string[len(prefix):]
            if body[:3] in ('"""', "'''") or len(body) < 2:
                continue
            q = body[0]
            other = "'" if q == '"' else '"'
            if other not in body[1:-1] and "\\" not in body:
                edits.append((t.start, t.end, prefix + other + body[1:-1] + other))
        elif fstart is not None and t.type == fstart:
            stack.append(t)
        elif fstart is not None and t.type == tokenize.FSTRING_END and stack:
            begin = stack.pop()
            q = begin.string[-1]
            text = begin.line if begin.start[0] == t.end[0] else ""
            inner = text[begin.end[1]:t.start[1]]
            other = "'" if q == '"' else '"'
            if text and q in "'\"" and begin.string[-3:] not in ('"""', "'''") and other not in inner \
                    and "\\" not in inner and not stack:
                edits.append((begin.start, begin.end, begin.string[:-1] + other))
                edits.append((t.start, t.end, other))
    return _replace_spans(src, edits)


def _start_line(node: ast.stmt) -> int:
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])


def _reverse(lines: list[str], stmts: list[ast.stmt]) -> list[str]:
    """Put the blocks of ``stmts`` (siblings, in order) in reverse order in their own slots."""
    blocks = [lines[_start_line(s) - 1:s.end_lineno] for s in stmts]
    out = list(lines)
    for slot, block in reversed(list(zip(stmts, reversed(blocks)))):
        out[_start_line(slot) - 1:slot.end_lineno] = block
    return out


def reorder(src: str) -> str:
    """Reverse the order of the methods of every class, then of the top-level definitions."""
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    lines = src.splitlines()
    tree = ast.parse(src)
    for cls in sorted((n for n in tree.body if isinstance(n, ast.ClassDef)), key=lambda n: -n.lineno):
        methods = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if len(methods) > 1:
            lines = _reverse(lines, methods)
    src = "\n".join(lines)
    tree = ast.parse(src)
    top = [n for n in tree.body if isinstance(n, defs)]
    if len(top) > 1:
        src = "\n".join(_reverse(src.splitlines(), top))
    return src


def _body_without_docstring(fn) -> list[ast.stmt]:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return body


def dead_statements(src: str) -> str:
    """Insert ``_unused = 0`` at the start of every function body, and one more before the middle statement of
    a body of four statements or more."""
    tree = ast.parse(src)
    lines = src.splitlines()
    where: dict[int, str] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = _body_without_docstring(fn)
        picks = [body[0]] if body else []
        if len(body) >= 4:
            picks.append(body[len(body) // 2])
        for stmt in picks:
            line = lines[_start_line(stmt) - 1]
            if stmt.lineno == fn.lineno or line[:stmt.col_offset].strip():
                continue  # on the def line, or after another statement on its line
            where[_start_line(stmt)] = line[:stmt.col_offset]
    for row in sorted(where, reverse=True):
        lines.insert(row - 1, where[row] + "_unused = 0")
    return "\n".join(lines)


def for_to_while(src: str) -> str:
    """Turn the first for loop of a function (with no ``else``) into ``while True`` over ``next(iterator)``."""
    tree = ast.parse(src)
    loops = sorted((n for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                    for n in ast.walk(fn) if isinstance(n, ast.For) and not n.orelse
                    and n.body[0].lineno > n.iter.end_lineno), key=lambda n: (n.lineno, n.col_offset))
    if not loops:
        return src
    loop = loops[0]
    lines = src.splitlines()
    ind = lines[loop.lineno - 1][:loop.col_offset]
    body_ind = lines[loop.body[0].lineno - 1][:loop.body[0].col_offset]
    step = body_ind[len(ind):] or "    "
    new = [f"{ind}_items = iter({ast.unparse(loop.iter)})", f"{ind}while True:", f"{body_ind}try:",
           f"{body_ind}{step}{ast.unparse(loop.target)} = next(_items)", f"{body_ind}except StopIteration:",
           f"{body_ind}{step}break"]
    lines[loop.lineno - 1:loop.iter.end_lineno] = new
    return "\n".join(lines)


EDITS: dict[str, Callable[[str], str]] = {
    "rename": rename_locals,
    "reformat": reformat,
    "comments": recomment,
    "blank_lines": reblank,
    "quotes": swap_quotes,
    "reorder": reorder,
    "dead_code": dead_statements,
    "for_while": for_to_while,
}


def combined(src: str) -> str:
    """Every edit, one after the other."""
    for name in ("rename", "for_while", "dead_code", "reorder", "reformat", "quotes", "comments", "blank_lines"):
        src = EDITS[name](src)
    return src


ALL_EDITS: dict[str, Callable[[str], str]] = {**EDITS, "combined": combined}


class _Reword(ast.NodeTransformer):
    def visit_Constant(self, node):  # noqa: N802 - ast.NodeTransformer's naming
        if isinstance(node.value, str) and len(node.value) >= 12:
            return ast.copy_location(ast.Constant(node.value.upper() if node.value != node.value.upper()
                                                  else node.value.lower()), node)
        return node

    def visit_JoinedStr(self, node):  # noqa: N802
        text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
        if len(text) >= 12:
            node.values = [ast.Constant(v.value.upper()) if isinstance(v, ast.Constant) else v for v in node.values]
        return node


def reword(src: str) -> str:
    """Every string of 12 characters or more (error messages, mostly) in other words (here: upper case).
    For information only: the measure keeps string values, so this edit lowers the score on purpose."""
    return ast.unparse(_Reword().visit(ast.parse(src)))


#: Edits shown but not used to choose the threshold (what the measure does not claim to see through).
INFORMATIONAL: dict[str, Callable[[str], str]] = {"reword": reword}


# --- measurement -------------------------------------------------------------------------------------------

def honest_cells(lab: Lab, directory: Path = HONEST) -> list[tuple[int, str, str | None]] | None:
    """The honest solution of ``lab`` as written cells (``None`` when the fixture file is absent or unreadable)."""
    path = directory / f"{lab.name}.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:  # a file still being written
        print(f"warning: {path} is not valid JSON ({e}); lab treated as without an honest fixture", file=sys.stderr)
        return None
    tasks = {t.id for t in lab.tasks}
    cells = []
    for index, (grade_id, source) in enumerate(data.items()):
        task = grade_id.removeprefix("answer_")
        cells.append((index, source, task if task in tasks else None))
    return cells


def measure(lab: Lab, *, k: int = sim.K, w: int = sim.W, minimum: int = sim.MIN_FINGERPRINTS) -> dict:
    """Per task: fingerprints beyond the scaffold, and the honest, stub and edited scores."""
    honest = honest_cells(lab)
    honest_scores = sim.task_scores(lab, honest, k=k, w=w, minimum=minimum) if honest is not None else {}
    stubs = [(i, sim.stub_source(lab, t.id), t.id) for i, t in enumerate(lab.tasks)]
    stub_scores = sim.task_scores(lab, stubs, k=k, w=w, minimum=minimum)
    rows = {}
    for i, task in enumerate(lab.tasks):
        ref = answer_source(lab, task.id)
        edited = {name: sim.task_scores(lab, [(i, edit(ref), task.id)], k=k, w=w, minimum=minimum)[task.id].score
                  for name, edit in {**ALL_EDITS, **INFORMATIONAL}.items()}
        answered = honest is not None and any(t == task.id for _, _, t in honest)
        ts = stub_scores[task.id]
        rows[task.id] = {
            "fingerprints": ts.fingerprints,
            "judged": ts.score is not None and not ts.not_judged,
            "not_judged": ts.not_judged,
            "honest": honest_scores[task.id].score if answered else None,
            "honest_present": answered,
            "stub": ts.score,
            "edits": {n: v for n, v in edited.items() if n in ALL_EDITS},
            "info": {n: v for n, v in edited.items() if n in INFORMATIONAL},
        }
    return {"honest_file": honest is not None, "tasks": rows}


def _fmt(x: float | None) -> str:
    return "short" if x is None else f"{x:.2f}"


def summarize(results: dict[str, dict], threshold: float = sim.THRESHOLD) -> dict:
    """Per lab and overall: the highest honest and the lowest edited score over judged tasks; the tasks long
    enough to judge whose honest score reaches ``threshold`` or their own lowest edited score (they belong in
    ``similarity.NOT_JUDGED``); and the tasks listed there, with their figures."""
    per_lab, all_honest, all_edit, overlaps, listed = {}, [], [], [], []
    for name, res in results.items():
        judged = {t: r for t, r in res["tasks"].items() if r["judged"]}
        honest = [(r["honest"], t) for t, r in judged.items() if r["honest_present"]]
        edits = [(min(r["edits"].values()), t) for t, r in judged.items()]
        per_lab[name] = {"max_honest": max(honest) if honest else None, "min_edit": min(edits) if edits else None,
                         "honest_file": res["honest_file"]}
        all_honest += [(s, f"{name}:{t}") for s, t in honest]
        all_edit += [(s, f"{name}:{t}") for s, t in edits]
        for t, r in res["tasks"].items():
            if r["stub"] is None:
                continue  # too short to judge
            low = min(r["edits"].values())
            if r["not_judged"]:
                listed.append(f"{name}:{t} (honest {_fmt(r['honest'])}, min edited {low:.2f})")
            if r["honest_present"] and r["honest"] >= min(threshold, low):
                overlaps.append(f"{name}:{t}")
    return {"labs": per_lab, "max_honest": max(all_honest) if all_honest else None,
            "min_edit": min(all_edit) if all_edit else None, "overlaps": overlaps, "not_judged": listed,
            "judged": sum(r["judged"] for res in results.values() for r in res["tasks"].values())}


def report(results: dict[str, dict], k: int, w: int, minimum: int, threshold: float) -> int:
    """Print the table and the summary; return how many checks fail (an honest answer flagged, an edit
    missed, a stub that scores)."""
    names = list(ALL_EDITS) + [f"{n}*" for n in INFORMATIONAL]
    head = f"{'task':<22} {'fp':>4} {'honest':>6} {'stub':>5} " + " ".join(f"{n[:9]:>9}" for n in names)
    bad = 0
    for lab_name, res in results.items():
        print(f"\n{lab_name}" + ("" if res["honest_file"] else "   (no honest fixture)"))
        print(head)
        for task_id, r in res["tasks"].items():
            honest = _fmt(r["honest"]) if r["honest_present"] else "-"
            cells = " ".join(f"{_fmt(v):>9}" for v in [*r["edits"].values(), *r["info"].values()])
            flag = f"  (not judged: {r['not_judged']})" if r["not_judged"] else ""
            if r["judged"]:
                if r["honest_present"] and r["honest"] >= threshold:
                    flag, bad = "  << honest flagged", bad + 1
                if min(r["edits"].values()) < threshold:
                    flag, bad = flag + "  << edit missed", bad + 1
            if r["stub"]:
                flag, bad = flag + "  << stub scores", bad + 1
            print(f"{task_id:<22} {r['fingerprints']:>4} {honest:>6} {_fmt(r['stub']):>5} {cells}{flag}")
    s = summarize(results, threshold)
    print(f"\nfp: the reference's fingerprints beyond the scaffold (short: fewer than {minimum}, not judged); "
          "*: for information, not used for the threshold")
    print(f"K={k} W={w} MIN_FINGERPRINTS={minimum} THRESHOLD={threshold}; judged tasks: {s['judged']}")
    print(f"{'lab':<26} {'max honest':<30} {'min edited':<30}")
    for lab_name, row in s["labs"].items():
        mh = "no fixture" if not row["honest_file"] else \
            ("-" if row["max_honest"] is None else f"{row['max_honest'][0]:.2f} {row['max_honest'][1]}")
        me = "-" if row["min_edit"] is None else f"{row['min_edit'][0]:.2f} {row['min_edit'][1]}"
        print(f"{lab_name:<26} {mh:<30} {me:<30}")
    present = [n for n, row in s["labs"].items() if row["honest_file"]]
    missing = [n for n, row in s["labs"].items() if not row["honest_file"]]
    print(f"honest fixtures present: {len(present)}/{len(results)}" + (f"; missing: {', '.join(missing)}"
                                                                        if missing else ""))
    mh, me = s["max_honest"], s["min_edit"]
    print(f"overall: max honest {_fmt(mh[0]) if mh else '-'} ({mh[1] if mh else 'no fixtures'}), "
          f"min edited {_fmt(me[0]) if me else '-'} ({me[1] if me else '-'}); THRESHOLD {threshold} "
          + ("lies between them" if (not mh or mh[0] < threshold) and (not me or me[0] >= threshold)
             else "DOES NOT separate them"))
    print("honest at or above THRESHOLD or its lowest edit (such a task belongs in similarity.NOT_JUDGED): "
          + (", ".join(s["overlaps"]) or "none"))
    print("listed in similarity.NOT_JUDGED, never flagged: " + (", ".join(s["not_judged"]) or "none"))
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab", action="append", help="only this lab (repeatable)")
    parser.add_argument("--k", type=int, default=sim.K)
    parser.add_argument("--w", type=int, default=sim.W)
    parser.add_argument("--min", type=int, default=sim.MIN_FINGERPRINTS, dest="minimum")
    parser.add_argument("--threshold", type=float, default=sim.THRESHOLD)
    parser.add_argument("--kinds-only", action="store_true",
                        help="literals as their kinds only (S, B, N), as MOSS does: the measure's alternative")
    parser.add_argument("--sweep", action="store_true",
                        help="summary only, for K in 8..12 and W in 6..12 (the minimum scaled to each W)")
    args = parser.parse_args(argv)
    labs = [LABS[n] for n in args.lab] if args.lab else list(LABS.values())
    if args.kinds_only:
        sim._LITERAL_VALUES = False
    if args.sweep:
        print(f"{'K':>3} {'W':>3} {'min':>4} {'judged':>6}  {'max honest':<36} {'min edited':<36} "
              "honest >= threshold or edit")
        for k in (8, 10, 12):
            for w in (6, 8, 10, 12):
                minimum = round(args.minimum * (sim.W + 1) / (w + 1))
                s = summarize({lab.name: measure(lab, k=k, w=w, minimum=minimum) for lab in labs}, args.threshold)
                mh, me = s["max_honest"] or (0.0, "-"), s["min_edit"] or (1.0, "-")
                print(f"{k:>3} {w:>3} {minimum:>4} {s['judged']:>6}  {mh[0]:.2f} {mh[1]:<31} {me[0]:.2f} {me[1]:<31} "
                      f"{', '.join(s['overlaps']) or '-'}", flush=True)
        return 0
    results = {lab.name: measure(lab, k=args.k, w=args.w, minimum=args.minimum) for lab in labs}
    return 1 if report(results, args.k, args.w, args.minimum, args.threshold) else 0


if __name__ == "__main__":
    sys.exit(main())
