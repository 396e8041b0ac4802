"""The reference is not an answer: find a submission's cells that reach the course's own code for a task.

Earlier labs' references are meant to be imported (the set-up cells do it). For the tasks being graded,
using the package's own implementation earns nothing however it is reached. The worker cannot stop that
at run time on its own (the package has to be importable there, and code that runs in a process can
undo anything done to it), so the grader reads the submitted source instead, before anything runs:

* an import of one of the lab's graded names from ``bytes2logits`` (or of a name the lab lists in
  ``Lab.also_answers``: another function of the package that does a task's work, such as the merge
  stepper's trainer in lab 03), of any name the set-up cell does not import from the lab's own reference
  modules (``FastBPETokenizer`` beside lab 04's ``BPETokenizer``), or of a ``bytes2logits`` module as a
  whole (through which any name can be reached);
* dynamic code: ``exec``, ``eval``, ``compile``, ``__import__``, ``importlib``, ``runpy``,
  ``sys.modules``, ``inspect.getsource``, or a string that names the package;
* an answer whose syntax tree is the reference's, once docstrings and comments are gone;
* a graded name reached as an attribute of something the set-up cell imports from the package
  (``Tokenizer.load_merges`` in lab 14), or an assignment to an attribute of such an object
  (``Tokenizer.__init__ = ...``, ``setattr(Tokenizer, ...)``): the grader runs those objects.

Each finding names the cell and the reason; the task is then flagged for manual grading and scores 0
until an instructor looks (``needs_manual_grade`` in nbgrader).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .labs import Lab

__all__ = ["Finding", "normalized_dump", "scan_cells"]

_DYNAMIC_NAMES = {"exec", "eval", "compile", "__import__", "importlib", "runpy", "builtins", "__builtins__"}
_DYNAMIC_ATTRS = {"modules": "sys.modules", "getsource": "inspect.getsource", "getsourcelines": "inspect.getsource",
                  "getsourcefile": "inspect.getsourcefile", "reload": "importlib.reload", "import_module": "importlib"}
_DYNAMIC_MODULES = {"importlib", "runpy", "inspect", "builtins", "imp", "pkgutil", "marshal", "pickle", "dill",
                    "ctypes"}


@dataclass(frozen=True)
class Finding:
    task: str  # the task it costs ("*" for every task of the lab)
    cell: int
    reason: str

    def line(self) -> str:
        return f"cell {self.cell}: {self.reason}"


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def normalized_dump(source: str) -> str | None:
    """The syntax tree of ``source`` without docstrings, comments or positions (None if it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    return ast.dump(_strip_docstrings(tree), annotate_fields=False, include_attributes=False)


def _graded_names(lab: Lab) -> dict[str, str]:
    names = {name: task for name, task in lab.also_answers}
    names.update({name: t.id for t in lab.tasks for name in t.objects})
    return names


def _package_imports(lab: Lab) -> set[str]:
    """The names the set-up cell imports from the course package (``Tokenizer`` in lab 14, say)."""
    names: set[str] = set()
    for line in lab.imports:
        try:
            tree = ast.parse(line)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "bytes2logits":
                names.update(alias.asname or alias.name for alias in node.names)
    return names


def _transform(source: str) -> str:
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - without IPython, or on a cell it cannot read, scan the text as it is
        return source


def scan_cells(lab: Lab, cells: list[tuple[int, str, str | None]]) -> list[Finding]:
    """Findings for ``cells``: ``(index, source, task or None)`` of every cell the submission wrote."""
    from .build import answer_source

    graded = _graded_names(lab)
    imported = _package_imports(lab)
    reference = {t.id: normalized_dump(answer_source(lab, t.id)) for t in lab.tasks}
    findings: list[Finding] = []
    for index, source, task in cells:
        src = _transform(source)
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        own = task or "*"
        if task is not None and reference.get(task) is not None and normalized_dump(src) == reference[task]:
            findings.append(Finding(task, index, "the answer is the course's reference code, copied"))
        for node in ast.walk(_strip_docstrings(tree)):
            if isinstance(node, ast.ImportFrom) and node.module and \
                    (node.module == "bytes2logits" or node.module.startswith("bytes2logits.")):
                for alias in node.names:
                    if alias.name == "*":
                        findings.append(Finding(own, index, f"`from {node.module} import *` takes the reference"))
                    elif alias.name in graded:
                        findings.append(Finding(graded[alias.name], index,
                                                f"imports `{alias.name}` from the course's reference ({node.module})"))
                    elif node.module == "bytes2logits" or f"{node.module}.{alias.name}" in lab.modules:
                        findings.append(Finding(own, index, f"imports the module {node.module}.{alias.name}, "
                                                            "which holds the reference"))
                    elif node.module in lab.modules and alias.name not in imported:
                        findings.append(Finding(own, index, f"imports `{alias.name}` from {node.module}, the module "
                                                            "that holds this lab's reference"))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    root = alias.name.split(".")[0]
                    if root == "bytes2logits":
                        findings.append(Finding(own, index,
                                                f"imports the module {alias.name}, which holds the reference"))
                    elif root in _DYNAMIC_MODULES:
                        findings.append(Finding(own, index,
                                                f"imports {alias.name} (code that reads or runs other code)"))
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in _DYNAMIC_MODULES:
                findings.append(Finding(own, index, f"imports from {node.module} (code that reads or runs other code)"))
            elif isinstance(node, ast.Name) and node.id in _DYNAMIC_NAMES:
                findings.append(Finding(own, index, f"uses {node.id} (dynamic code is not allowed in an answer)"))
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                    node.value.id in imported and node.attr in graded:
                findings.append(Finding(graded[node.attr], index, f"reaches the reference through "
                                                                  f"`{node.value.id}.{node.attr}`"))
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)) and any(
                    isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in imported
                    for t in (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target])):
                findings.append(Finding(own, index, "changes an object the set-up cell imported from the course "
                                                    "package (the grader relies on it)"))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in ("setattr", "delattr") and node.args and \
                    isinstance(node.args[0], ast.Name) and node.args[0].id in imported:
                findings.append(Finding(own, index, f"changes {node.args[0].id} with {node.func.id}, an object the "
                                                    "set-up cell imported from the course package"))
            elif isinstance(node, ast.Attribute) and node.attr in _DYNAMIC_ATTRS:
                findings.append(Finding(own, index, f"uses {_DYNAMIC_ATTRS[node.attr]} (dynamic code is not "
                                                    "allowed in an answer)"))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    ("bytes2logits" in node.value or "site-packages" in node.value):
                findings.append(Finding(own, index, "names the course package in a string (a path or module name)"))
    unique, seen = [], set()
    for f in findings:
        if (f.task, f.cell, f.reason) not in seen:
            seen.add((f.task, f.cell, f.reason))
            unique.append(f)
    return unique
