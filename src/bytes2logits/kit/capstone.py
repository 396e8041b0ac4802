"""The capstone: SmolLM2 chats through the learner's own answers to labs 13 to 17.

Each engine lab's notebook defines one stage of the engine, and its given code calls the learner's
functions by name (docs/architecture.md, "Engine labs"). This module runs those notebooks and plugs the
stages together, with no code of the package's engine in the path:

=====  =======================================  =========================================================
lab    names taken from the notebook            role
=====  =======================================  =========================================================
13     ``GGUFReader``                           parse the file: metadata, tensor table, zero-copy views
14     ``tokenizer_from_gguf``,                 the tokenizer and the chat prompt from the file's metadata
       ``chat_prompt_ids``
15     ``dequantize``                           the Q4_1 and Q8_0 weights to float32
16     ``Model``, ``exact_numerics``            the forward pass (``Model.forward`` calls the learner's
                                                ``forward``, which calls their block, attention, RoPE ...)
17     ``generate``, ``Sampler``                the KV-cached generation loop, sampling, stops, streaming
=====  =======================================  =========================================================

:func:`load_labs` runs each notebook's code cells in a fresh namespace, visible checks included (the hidden
block of an instructor's copy is left out), and raises :class:`LabProblem` naming the first lab that is
missing, unfinished or failing its own checks. :func:`assemble` builds a :class:`YourEngine` from them.

This is the learner's own code in the learner's own kernel, so nothing here is sandboxed: grading is done by
``make check``. Here the question is only "does my engine run, and what does it say?".
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .labs import course_root

__all__ = ["CAPSTONE_LABS", "LabProblem", "YourEngine", "assemble", "lab_notebook", "load_labs"]

#: the lab notebooks the capstone needs, with the names it takes from each
CAPSTONE_LABS: dict[str, tuple[str, ...]] = {
    "lab13_gguf_reader": ("GGUFReader",),
    "lab14_gguf_tokenizer": ("tokenizer_from_gguf", "chat_prompt_ids"),
    "lab15_dequantization": ("dequantize",),
    "lab16_forward_pass": ("Model", "exact_numerics"),
    "lab17_generation": ("generate", "Sampler"),
}

_HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[^\n]*\n?", re.S | re.M)


class LabProblem(RuntimeError):
    """A lab the capstone needs is missing, unfinished or failing; ``lab`` and ``task`` say which."""

    def __init__(self, lab: str, message: str, task: str | None = None):
        super().__init__(message)
        self.lab, self.task = lab, task


def lab_notebook(lab: str, where: str = "labs", root: Path | None = None) -> Path:
    """The notebook of ``lab`` in ``where``: ``"labs"`` (your copies) or ``"solutions"`` (the instructor's)."""
    if where not in ("labs", "solutions"):
        raise ValueError(f"where must be 'labs' or 'solutions', not {where!r}")
    return (root or course_root()) / where / lab / f"{lab}.ipynb"


def _cells(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    cells = []
    for cell in nb.get("cells", []):
        src = cell.get("source", "")
        cells.append({"type": cell.get("cell_type"), "source": "".join(src) if isinstance(src, list) else src,
                      "meta": cell.get("metadata", {}).get("nbgrader", {})})
    return cells


def _task_of(meta: Mapping) -> str | None:
    gid = meta.get("grade_id") or ""
    return gid[len("answer_"):] if gid.startswith("answer_") else gid or None


def _load_one(lab: str, path: Path, progress=None) -> dict:
    number = lab[3:5]
    if not path.is_file():
        raise LabProblem(lab, f"lab {number} is missing: no notebook at {path}")
    try:
        cells = _cells(path)
    except (OSError, ValueError) as e:
        raise LabProblem(lab, f"lab {number}: {path} is not a readable notebook ({e})") from None
    namespace: dict = {"__name__": f"capstone_{lab}"}
    for k, cell in enumerate(cells):
        if cell["type"] != "code" or not cell["source"].strip():
            continue
        source = _HIDDEN.sub("", cell["source"])
        task = _task_of(cell["meta"])
        where = f"task {task!r}" if task and task != "setup" else f"cell {k}"
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the labs' own prints would bury the answer
                exec(compile(source, f"<{lab} cell {k}>", "exec"), namespace)
        except NotImplementedError:
            raise LabProblem(lab, f"lab {number} is not finished: {where} still raises NotImplementedError "
                                  f"({path})", task) from None
        except Exception as e:  # the learner's code: any exception is a finding, reported by name
            kind = "its visible checks fail" if cell["meta"].get("grade") else "it raises"
            detail = f"{type(e).__name__}: {e}".strip()
            raise LabProblem(lab, f"lab {number}, {where}: {kind}: {detail[:300]} ({path})", task) from None
        if progress is not None:
            progress()
    missing = [n for n in CAPSTONE_LABS.get(lab, ()) if n not in namespace]
    if missing:
        raise LabProblem(lab, f"lab {number} defines no {', '.join(missing)} ({path})")
    return namespace


def load_labs(where: str | Mapping[str, str | Path] = "labs", *, root: Path | None = None,
              progress: bool = True) -> dict[str, dict]:
    """Run the capstone's lab notebooks; ``{lab name: namespace}``.

    ``where`` is ``"labs"`` (your copies, the default), ``"solutions"``, or ``{lab name: notebook path}`` for
    notebooks kept elsewhere (a lab not in the mapping is taken from ``labs/``). Raises :class:`LabProblem` for
    the first lab, in course order, that is missing, still has a ``NotImplementedError`` or fails a check.
    """
    paths = {}
    for lab in CAPSTONE_LABS:
        if isinstance(where, Mapping):
            paths[lab] = Path(where[lab]) if lab in where else lab_notebook(lab, "labs", root)
        else:
            paths[lab] = lab_notebook(lab, where, root)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        total = sum(1 for p in paths.values() if p.is_file() for c in _cells(p) if c["type"] == "code")
        bar = tqdm(total=total, desc="running your labs", unit="cell", leave=False)
    try:
        return {lab: _load_one(lab, path, bar.update if bar else None) for lab, path in paths.items()}
    finally:
        if bar is not None:
            bar.close()


@dataclass
class YourEngine:
    """SmolLM2 (or another llama-architecture GGUF) running on the learner's labs 13 to 17.

    ``reader``, ``tokenizer`` and ``model`` are the objects the labs' code built; ``labs`` holds each lab's
    namespace. :meth:`chat` streams an answer; :meth:`greedy_ids` is what the capstone's test compares
    with llama.cpp.
    """

    reader: object
    tokenizer: object
    model: object
    labs: dict[str, dict] = field(repr=False)
    load_seconds: float = 0.0
    history: list[dict] = field(default_factory=list)

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        """Your lab 14 ``chat_prompt_ids``: the file's template rendered and encoded."""
        return list(self.labs["lab14_gguf_tokenizer"]["chat_prompt_ids"](self.tokenizer, messages))

    def stream(self, messages: list[dict], *, max_tokens: int = 128, sampler=None) -> Iterator[str]:
        """Your lab 17 ``generate`` on the prompt of ``messages``: text pieces as they become safe to show.

        Greedy by default (your ``Sampler`` at temperature 0), so the answer is reproducible. The model's
        KV cache starts from position 0 each time: the whole conversation is the prompt.
        """
        ns = self.labs["lab17_generation"]
        sampler = sampler if sampler is not None else ns["Sampler"](temperature=0.0)
        return ns["generate"](self.model, self.tokenizer, self.prompt_ids(messages), sampler=sampler,
                              max_tokens=max_tokens)

    def greedy_ids(self, messages: list[dict], max_tokens: int = 32) -> list[int]:
        """The ids your engine generates greedily for ``messages`` (the end-of-turn token included)."""
        gen = self.stream(messages, max_tokens=max_tokens)
        for _ in gen:
            pass
        return list(gen.tokens)

    def chat(self, text: str, *, max_tokens: int = 128, show: bool = True) -> str:
        """Send ``text`` as the next user turn, stream the answer (printed when ``show``) and return it."""
        self.history.append({"role": "user", "content": text})
        pieces = []
        for piece in self.stream(self.history, max_tokens=max_tokens):
            pieces.append(piece)
            if show:
                print(piece, end="", flush=True)
        if show:
            print()
        answer = "".join(pieces)
        self.history.append({"role": "assistant", "content": answer})
        return answer

    def reset(self) -> None:
        """Start a new conversation."""
        self.history.clear()


def assemble(model_path: str | Path | None = None, *, where: str | Mapping[str, str | Path] = "labs",
             n_ctx: int = 1024, root: Path | None = None, progress: bool = True) -> YourEngine:
    """Run labs 13 to 17 (:func:`load_labs`) and build an engine from them, on SmolLM2 by default.

    The stages meet only through the names each lab defines: lab 13's ``GGUFReader(path)``; lab 14's
    ``tokenizer_from_gguf(reader)``; lab 16's ``Model(reader, numerics=exact_numerics(),
    dequantizer=dequantize)`` with lab 15's ``dequantize``. A stage that raises while loading the model is
    reported as a :class:`LabProblem` naming its lab.
    """
    if model_path is None:
        from .. import assets

        model_path = assets.path("smollm2")
    labs = load_labs(where, root=root, progress=progress)
    t0 = time.perf_counter()
    reader = _stage("lab13_gguf_reader", "reading the file",
                    lambda: labs["lab13_gguf_reader"]["GGUFReader"](str(model_path)))
    tokenizer = _stage("lab14_gguf_tokenizer", "building the tokenizer",
                       lambda: labs["lab14_gguf_tokenizer"]["tokenizer_from_gguf"](reader))
    ns16 = labs["lab16_forward_pass"]
    yours = labs["lab15_dequantization"]["dequantize"]

    def dequantize(raw, ggml_type, shape):
        try:
            return yours(raw, ggml_type, shape)
        except Exception as e:  # the learner's code
            name = getattr(ggml_type, "name", ggml_type)
            raise LabProblem("lab15_dequantization", f"lab 15's dequantize failed on a {name} tensor of shape "
                                                     f"{tuple(shape)}: {type(e).__name__}: {e}"[:400]) from None

    model = _stage("lab16_forward_pass", "loading the model",
                   lambda: ns16["Model"](reader, n_ctx=n_ctx, numerics=ns16["exact_numerics"](),
                                         dequantizer=dequantize, progress=progress))
    return YourEngine(reader, tokenizer, model, labs, time.perf_counter() - t0)


def _stage(lab: str, what: str, build):
    try:
        return build()
    except LabProblem:
        raise
    except Exception as e:  # the learner's code
        detail = f"{type(e).__name__}: {e}".strip()
        raise LabProblem(lab, f"lab {lab[3:5]} failed while {what}: {detail[:300]}") from None
