"""A copy of the package in which the tasks being graded have no code: what a grading sandbox sees.

The grader cannot stop code running in a worker from reaching the course's reference once the reference
is importable there: a function's ``__globals__``, ``sys.modules``, the installed source or its ``.pyc``,
pickle, another module's globals all lead back to it. So for a lab's worker the reference of that lab's
tasks is simply not there. This module owns that copy:

* :func:`redacted_package` builds (once, then from a cache) a complete copy of the package tree in which
  every graded object of the lab is a stub: each task's ``objects`` and each ``Lab.also_answers`` name,
  wherever the package *defines* it: in the lab's reference modules, in the module a name is imported from
  (``text.decode_utf8_prefix`` for lab 01), and in any other module that defines a function or class of the
  same name at its top level, a copy or another version of the same answer (``engine.ggml_numerics``'
  ``rms_norm`` ... ``attention`` for lab 16, ``engine.decoders.StreamDecoder`` for lab 01; see
  :func:`redaction_plan`). A stub keeps the name, the signature, the decorators and the docstring; its
  body only raises ``NotImplementedError`` with a message naming the task. A graded class keeps its
  docstring, bases, decorators and the class attributes that are plain constants (literals, bare
  annotations); every method and property becomes such a stub. Comments inside a graded definition and the
  comment block right above it go too. Everything else is byte-identical to the package, so earlier labs'
  references, given helpers and the kit all work as before.
* A module-level statement that *calls* a graded function while the module is imported
  (``BYTE_TO_CHAR = bytes_to_unicode()`` in ``text.py``) would fail against a stub; in the copy its value is
  written out as the literal the real package computed (the data stays, the code that made it does not).
  A call whose value has no literal form stops the build with :class:`RedactError` naming the line.
* The copy is byte-compiled after its last write, with hash-checked ``.pyc`` files (valid whatever the
  files' timestamps, so a read-only mount imports as fast as the package does), and holds none of the
  package's own ``__pycache__`` nor editor leftovers (``*.orig``, ``*~``, hidden files).

**How the sandbox uses it**: the grader binds ``redacted_package(lab)`` read-only over :func:`package_dir`
in the worker's sandbox, so ``import bytes2logits`` there finds the copy at the package's own path. (The
``reference`` worker that speed gates compare against is the one that must see the real package.)

**Cache.** One build per lab and digest of the package's files (with the lab's registry entry and the
interpreter's bytecode tag), in ``$XDG_CACHE_HOME/bytes2logits-grading/redacted/<lab>-<digest12>/`` (else
``~/.cache/...``): a folder that no sandbox can read (not under the asset cache, the package, the
interpreter or the virtual environment; :func:`cache_root` refuses such a place). Each entry is built in a
temporary sibling and renamed into place, so concurrent graders never see half a tree: the loser of a race
uses the winner's entry and deletes its own. Beside the tree, ``manifest.json`` records every file's size
and SHA-256; an entry that does not match it (a truncated or edited file, a file added or lost) is rebuilt.
Folders are 0755, files 0644, and the ``bytes2logits-grading`` folder is its owner's only. Entries and kept
``.pyc`` files unused for two weeks are removed when a new entry is built.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import io
import json
import marshal
import os
import re
import shutil
import sys
import tempfile
import time
import tokenize
from dataclasses import dataclass
from pathlib import Path

from .labs import LABS, Lab

__all__ = ["Redaction", "RedactError", "cache_root", "graded_names", "overlay_for", "package_dir", "package_digest",
           "redact_source", "redacted_package", "redaction_plan", "stub_message", "task_view"]

#: Bumped when the way a tree is built changes (the cache key includes it).
FORMAT = 1
MANIFEST = "manifest.json"
_PACKAGE = "bytes2logits"
# Not copied: compiled files, and the leftovers of editors and patch tools, which may hold a module's text.
_SKIP_SUFFIXES = (".pyc", ".pyo", "~", ".orig", ".rej", ".bak", ".swp", ".swo", ".tmp")
# A temporary build folder older than this is a crashed build's and may be removed.
_STALE_SECONDS = 3600
# An entry (or a compiled file kept for reuse) not used for this long belongs to an old package: removed.
_UNUSED_SECONDS = 14 * 86400


class RedactError(RuntimeError):
    """The redacted copy cannot be built or placed (the message names the lab, module and line at fault)."""


@dataclass(frozen=True)
class Redaction:
    """One definition replaced by a stub: ``name`` defined in ``module`` (at ``line``) is part of ``task``."""

    module: str
    name: str
    task: str
    line: int


# ------------------------------------------------------------------------------------------------ places

def package_dir() -> Path:
    """The installed package folder (resolved): what a grading sandbox must not see for the graded tasks."""
    return Path(__file__).resolve().parents[1]


def cache_root() -> Path:
    """Where redacted copies are kept: ``$XDG_CACHE_HOME`` (or ``~/.cache``) ``/bytes2logits-grading/redacted``.

    Raises :class:`RedactError` if that place lies where a sandbox can read (under the asset cache, the
    package's folder, the interpreter or the virtual environment): each lab's copy holds every *other*
    lab's reference, so a sandbox that could read the cache could read the code it is grading.
    """
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    root = (base / "bytes2logits-grading").resolve() / "redacted"
    from .sandbox import _readable_paths

    for seen in _readable_paths():
        if root == seen or seen in root.parents:
            raise RedactError(f"the grading cache {root} lies inside {seen}, which grading sandboxes can read; "
                              "set XDG_CACHE_HOME to a folder outside it")
    return root


def _skipped(rel: Path) -> bool:
    return any(part == "__pycache__" or part.startswith(".") for part in rel.parts) or \
        rel.name.endswith(_SKIP_SUFFIXES) or ".py." in rel.name


def _package_files(root: Path) -> list[Path]:
    """The package's files to copy, relative to ``root``, sorted."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in files:
            rel = (Path(folder) / name).relative_to(root)
            if not _skipped(rel) and not (Path(folder) / name).is_symlink():
                out.append(rel)
    return sorted(out)


def _snapshot() -> dict[Path, bytes]:
    """The package's files (relative path -> bytes), read once: a build and its digest see the same text."""
    root = package_dir()
    return {rel: (root / rel).read_bytes() for rel in _package_files(root)}


def package_digest(files: dict[Path, bytes] | None = None) -> str:
    """SHA-256 (hex) of the package's files, the bytecode tag and this module's format: the cache key."""
    files = _snapshot() if files is None else files
    h = hashlib.sha256(f"{FORMAT}\0{sys.implementation.cache_tag}\0".encode())
    for rel in sorted(files):
        h.update(f"{rel.as_posix()}\0{len(files[rel])}\0".encode())
        h.update(files[rel])
    return h.hexdigest()


# ------------------------------------------------------------------------------------------------ the plan

_DEF_NAME = re.compile(rb"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", re.M)


class _Module:
    """One module of the package: its name, path (relative to the package), source, and syntax tree."""

    def __init__(self, name: str, path: Path, source: bytes, is_package: bool):
        self.name, self.path, self.source, self.is_package = name, path, source, is_package
        self._tree: ast.Module | None = None
        self._defined: set[str] | None = None

    @property
    def tree(self) -> ast.Module:
        """Parsed on first use: parsing every module of the package would cost more than the build."""
        if self._tree is None:
            self._tree = ast.parse(self.source, str(self.path))
        return self._tree

    def may_define(self, name: str) -> bool:
        """Whether a ``def`` or ``class`` of that name is anywhere in the text (before parsing it)."""
        if self._defined is None:
            self._defined = {m.decode() for m in _DEF_NAME.findall(self.source)}
        return name in self._defined

    def mentions(self, names) -> bool:
        words = b"|".join(re.escape(n.encode()) for n in sorted(names))
        return bool(words) and re.search(rb"\b(?:" + words + rb")\b", self.source) is not None


def _index(files: dict[Path, bytes]) -> dict[str, _Module]:
    """Every module of the package (parsed when needed), from its files."""
    out = {}
    for rel, source in sorted(files.items()):
        if rel.suffix != ".py":
            continue
        parts = (_PACKAGE, *rel.with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        out[name] = _Module(name, rel, source, is_package)
    return out


def _module_statements(body: list[ast.stmt]):
    """Statements run when a module (or class) body runs, through ``if``/``try``/``with`` blocks."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.For, ast.While)):
            yield from _module_statements(stmt.body)
            yield from _module_statements(stmt.orelse)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            yield from _module_statements(stmt.body)
            for handler in stmt.handlers:
                yield from _module_statements(handler.body)
            yield from _module_statements(stmt.orelse)
            yield from _module_statements(stmt.finalbody)
        elif isinstance(stmt, ast.With):
            yield from _module_statements(stmt.body)


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _definitions(mod: _Module, name: str) -> list[ast.stmt]:
    if not mod.may_define(name):
        return []
    return [s for s in _module_statements(mod.tree.body) if isinstance(s, _DEFS) and s.name == name]


def _import_target(mod: _Module, node: ast.ImportFrom) -> str:
    """The absolute module an ``import from`` statement of ``mod`` reads."""
    if not node.level:
        return node.module or ""
    base = mod.name.split(".")
    base = base[: len(base) - node.level + (1 if mod.is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def _resolve(index: dict[str, _Module], module: str, name: str, depth: int = 0) -> tuple[str, ast.stmt] | None:
    """Where ``name``, as ``module`` binds it, is defined: a def or class there, or one it imports."""
    mod = index.get(module)
    if mod is None or depth > 10:
        return None
    found = _definitions(mod, name)
    if found:
        return module, found[-1]
    for stmt in _module_statements(mod.tree.body):
        if isinstance(stmt, ast.ImportFrom):
            target = _import_target(mod, stmt)
            for alias in stmt.names:
                if (alias.asname or alias.name) == name and f"{target}.{alias.name}" not in index:
                    return _resolve(index, target, alias.name, depth + 1)
    return None


def _docstring(node) -> ast.Expr | None:
    body = getattr(node, "body", None)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[0]
    return None


def graded_names(lab: Lab) -> dict[str, str]:
    """Every name whose code is the work of a task of ``lab``: ``{name: task id}`` (objects, also_answers)."""
    names = {name: task for name, task in lab.also_answers}
    names.update({name: t.id for t in lab.tasks for name in t.objects})
    return names


def _plan(lab: Lab, index: dict[str, _Module]) -> dict[str, dict[str, str]]:
    """``{module: {name: task}}``: the top-level definitions of ``lab``'s graded names to stub."""
    plan: dict[str, dict[str, str]] = {}
    for name, task in graded_names(lab).items():
        found: dict[str, ast.stmt] = {}
        for module in lab.modules:
            hit = _resolve(index, module, name)
            if hit:
                found.setdefault(hit[0], hit[1])
        if not found:  # an also_answers name that lives outside the lab's modules: wherever it is defined
            found = {m: d[-1] for m, d in ((m, _definitions(mod, name)) for m, mod in index.items()) if d}
        if not found:
            raise RedactError(f"{lab.name}: no module of the package defines {name!r} (task {task!r})")
        for module, mod in index.items():  # the same name defined elsewhere: a copy, or another version of
            if module not in found and _definitions(mod, name):  # the answer (ggml_numerics' rms_norm in lab 16)
                found[module] = _definitions(mod, name)[-1]
        for module in found:
            plan.setdefault(module, {})[name] = task
    return plan


def redaction_plan(lab: Lab | str) -> list[Redaction]:
    """The definitions :func:`redacted_package` replaces by stubs for ``lab``, in module and line order."""
    lab = LABS[lab] if isinstance(lab, str) else lab
    index = _index(_snapshot())
    out = []
    for module, names in _plan(lab, index).items():
        for name, task in names.items():
            for node in _definitions(index[module], name):
                out.append(Redaction(module, name, task, node.lineno))
    return sorted(out, key=lambda r: (r.module, r.line))


def stub_message(lab: Lab, task: str, qualname: str) -> str:
    """What a stub raises: which task the object belongs to, and why the course's code is not there."""
    return (f"{qualname} is part of task {task!r} of {lab.name}, which is yours to write: the grader runs the "
            "code your notebook defines, and the course's own version of it is left out of the grading sandbox")


# ------------------------------------------------------------------------------------------------ rewriting

class _Text:
    """A module's bytes with (line, byte column) -> offset, as the ``ast`` positions count them."""

    def __init__(self, source: bytes):
        self.source = source
        self.starts = [0]
        for line in source.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def at(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def line_end(self, line: int) -> int:
        """Offset of the end of ``line``'s text, before its newline."""
        end = self.starts[line]
        while end > self.starts[line - 1] and self.source[end - 1:end] in (b"\n", b"\r"):
            end -= 1
        return end

    def line_text(self, line: int) -> bytes:
        return self.source[self.starts[line - 1]:self.line_end(line)]

    def starts_line(self, line: int, col: int) -> bool:
        return not self.line_text(line)[:col].strip()


def _is_constant(value: ast.expr | None) -> bool:
    if value is None:
        return True
    try:
        ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


class _Rewriter:
    """The edits that turn one module's graded definitions into stubs."""

    def __init__(self, text: _Text, lab: Lab, names: dict[str, str]):
        self.text, self.lab, self.names = text, lab, names
        self.edits: list[tuple[int, int, bytes]] = []
        self.spans: list[tuple[int, int]] = []  # line ranges of graded definitions, comments above included

    def stub_function(self, node, qualname: str, task: str) -> None:
        t = self.text
        doc = _docstring(node)
        last = node.body[-1]
        end = t.at(last.end_lineno, last.end_col_offset)
        rest = t.source[end:t.line_end(last.end_lineno)].strip()
        if not rest or rest.startswith(b"#"):
            end = t.line_end(last.end_lineno)
        first = node.body[0]
        message = stub_message(self.lab, task, qualname)
        statement = f"raise NotImplementedError({message!r})".encode()
        if doc is not None:
            # After the docstring: on a line of its own, or after "; " when the body shares the def's line.
            indent = t.line_text(first.lineno)[:first.col_offset]
            glue = b"\n" + indent if t.starts_line(first.lineno, first.col_offset) else b"; "
            self.edits.append((t.at(doc.end_lineno, doc.end_col_offset), end, glue + statement))
        else:
            self.edits.append((t.at(first.lineno, first.col_offset), end, statement))

    def stub_class(self, node: ast.ClassDef, qualname: str, task: str) -> None:
        t = self.text
        kept = 0
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.stub_function(stmt, f"{qualname}.{stmt.name}", task)
                kept += 1
            elif isinstance(stmt, ast.ClassDef):
                self.stub_class(stmt, f"{qualname}.{stmt.name}", task)
                kept += 1
            elif stmt is _docstring(node) or isinstance(stmt, ast.Pass) or \
                    (isinstance(stmt, ast.Assign) and _is_constant(stmt.value)) or \
                    (isinstance(stmt, ast.AnnAssign) and _is_constant(stmt.value)):
                kept += 1
            else:  # logic at class level (a computed attribute, a loop): gone
                start, end = t.at(stmt.lineno, stmt.col_offset), t.at(stmt.end_lineno, stmt.end_col_offset)
                rest = t.source[end:t.line_end(stmt.end_lineno)].strip()
                if t.starts_line(stmt.lineno, stmt.col_offset) and (not rest or rest.startswith(b"#")):
                    self.edits.append((t.starts[stmt.lineno - 1], t.starts[stmt.end_lineno], b""))
                else:
                    self.edits.append((start, end, b"pass"))
        if not kept:
            stmt = node.body[-1]
            self.edits.append((t.at(stmt.end_lineno, stmt.end_col_offset), t.at(stmt.end_lineno, stmt.end_col_offset),
                               b"\n" + t.line_text(stmt.lineno)[:stmt.col_offset] + b"pass"))

    def visit(self, tree: ast.Module) -> None:
        t = self.text
        for stmt in _module_statements(tree.body):
            if not (isinstance(stmt, _DEFS) and stmt.name in self.names):
                continue
            task = self.names[stmt.name]
            if isinstance(stmt, ast.ClassDef):
                self.stub_class(stmt, stmt.name, task)
            else:
                self.stub_function(stmt, stmt.name, task)
            top = min([stmt.lineno] + [d.lineno for d in stmt.decorator_list])
            while top > 1 and t.line_text(top - 1).strip().startswith(b"#"):
                top -= 1
            self.spans.append((top, stmt.end_lineno))

    def strip_comments(self) -> None:
        """Drop the comments inside graded definitions and the comment blocks right above them."""
        t = self.text
        try:
            tokens = list(tokenize.tokenize(io.BytesIO(t.source).readline))
        except (tokenize.TokenError, SyntaxError):  # pragma: no cover - the module parsed, so it tokenizes
            return
        for tok in tokens:
            if tok.type != tokenize.COMMENT:
                continue
            line, col = tok.start
            if not any(a <= line <= b for a, b in self.spans):
                continue
            raw = t.line_text(line)
            bcol = len(raw.decode("utf-8", "surrogateescape")[:col].encode("utf-8", "surrogateescape"))
            start = t.at(line, bcol)
            if any(a <= start < b for a, b, _ in self.edits):
                continue  # inside a body that is replaced anyway
            if not raw[:bcol].strip():
                self.edits.append((t.starts[line - 1], t.starts[line], b""))
            else:
                before = raw[:bcol]
                self.edits.append((t.at(line, len(before.rstrip())), t.line_end(line), b""))

    def apply(self) -> bytes:
        out = self.text.source
        edits = sorted(self.edits)
        for (a1, b1, _), (a2, _b2, _) in zip(edits, edits[1:]):
            if a2 < b1:
                raise RedactError(f"overlapping edits at bytes {a1} and {a2}")  # pragma: no cover
        for start, end, new in reversed(edits):
            out = out[:start] + new + out[end:]
        return out


def redact_source(source: bytes, lab: Lab, names: dict[str, str]) -> bytes:
    """``source`` (one module) with the top-level definitions ``names`` (``{name: task}``) made stubs."""
    rewriter = _Rewriter(_Text(source), lab, names)
    rewriter.visit(ast.parse(source))
    rewriter.strip_comments()
    return rewriter.apply()


# ------------------------------------------------------------------------------------------------ import time

def _import_time_nodes(body: list[ast.stmt]):
    """The expressions of a module (or class) body that run when it runs: decorators, default values, base
    classes and every other statement's expressions; not function bodies."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from stmt.decorator_list
            yield from (d for d in (*stmt.args.defaults, *stmt.args.kw_defaults) if d is not None)
        elif isinstance(stmt, ast.ClassDef):
            yield from (*stmt.decorator_list, *stmt.bases, *stmt.keywords)
            yield from _import_time_nodes(stmt.body)
        else:
            yield from _expressions(stmt)


def _expressions(node: ast.AST):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.stmt):
            yield from _import_time_nodes([child])
        elif isinstance(child, (ast.excepthandler, ast.match_case)):
            yield from _expressions(child)
        else:
            yield child


def _calls(node: ast.AST):
    """Calls in ``node`` that run with it (lambdas' bodies do not)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Lambda):
            continue
        if isinstance(n, ast.Call):
            yield n
        stack.extend(ast.iter_child_nodes(n))


def _stub_bindings(mod: _Module, stubbed: set[tuple[str, str]], index: dict[str, _Module]):
    """Names in ``mod`` bound to a stub (``{local: (module, name)}``) and to modules (``{local: module}``)."""
    funcs = {name: (mod.name, name) for m, name in stubbed if m == mod.name}
    modules: dict[str, str] = {}
    for stmt in _module_statements(mod.tree.body):
        if isinstance(stmt, ast.ImportFrom):
            target = _import_target(mod, stmt)
            for alias in stmt.names:
                local = alias.asname or alias.name
                if f"{target}.{alias.name}" in index:
                    modules[local] = f"{target}.{alias.name}"
                    continue
                hit = _resolve(index, target, alias.name)
                if hit and (hit[0], alias.name) in stubbed:
                    funcs[local] = (hit[0], alias.name)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname and alias.name in index:
                    modules[alias.asname] = alias.name
    return funcs, modules


def _names_of(stubbed: set[tuple[str, str]]) -> set[str]:
    return {name for _, name in stubbed}


def _literal(value) -> str | None:
    """``repr(value)`` when it reads back as an equal value of the same type, else None."""
    try:
        text = repr(value)
        back = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return text if type(back) is type(value) and back == value else None


def _freeze_import_time_calls(mod: _Module, source: bytes, stubbed: set[tuple[str, str]],
                              index: dict[str, _Module], lab: Lab) -> bytes:
    """``source`` with each module-level assignment that calls a stub at import time given its real value."""
    funcs, modules = _stub_bindings(mod, stubbed, index)
    if not funcs and not any((m, n) in stubbed for m in modules.values() for n in _names_of(stubbed)):
        return source
    tree = mod.tree if source is mod.source else ast.parse(source)
    text = _Text(source)
    edits = []
    for stmt in tree.body:
        hits = []
        for node in _import_time_nodes([stmt]):
            for call in _calls(node):
                f = call.func
                if isinstance(f, ast.Name) and f.id in funcs or isinstance(f, ast.Attribute) and \
                        isinstance(f.value, ast.Name) and (modules.get(f.value.id), f.attr) in stubbed:
                    hits.append(call)
        if not hits:
            continue
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else \
            stmt.target if isinstance(stmt, ast.AnnAssign) else None
        where = f"{lab.name}: {mod.path.as_posix()} line {stmt.lineno}"
        if not isinstance(target, ast.Name) or stmt.value is None:
            raise RedactError(f"{where} calls a graded function while the module is imported, and is not a plain "
                              "assignment whose value could be written out; make that call lazy")
        value = getattr(importlib.import_module(mod.name), target.id)
        literal = _literal(value)
        if literal is None:
            raise RedactError(f"{where}: {target.id} is computed by a graded function at import time and its "
                              f"value ({type(value).__name__}) has no literal form; make that call lazy")
        v = stmt.value
        edits.append((text.at(v.lineno, v.col_offset), text.at(v.end_lineno, v.end_col_offset), literal.encode()))
    for start, end, new in sorted(edits, reverse=True):
        source = source[:start] + new + source[end:]
    return source


# ------------------------------------------------------------------------------------------------ building

def _pyc(source: bytes, dfile: str) -> bytes:
    """A hash-checked ``.pyc`` of ``source`` (PEP 552): valid for that text whatever its file's time stamp."""
    code = compile(source, dfile, "exec", dont_inherit=True, optimize=0)
    return importlib.util.MAGIC_NUMBER + (0b11).to_bytes(4, "little") + importlib.util.source_hash(source) + \
        marshal.dumps(code)


def _compiled(source: bytes, dfile: str, store: Path) -> bytes:
    """:func:`_pyc` of ``source``, from ``store`` when an earlier build compiled the same text (most modules
    of a lab's copy are the package's own, the same in every lab's copy)."""
    key = hashlib.sha256(f"{FORMAT}\0{sys.implementation.cache_tag}\0{dfile}\0".encode() + source).hexdigest()
    kept = store / f"{key}.pyc"
    try:
        data = kept.read_bytes()
        if data[:16] == importlib.util.MAGIC_NUMBER + (0b11).to_bytes(4, "little") + \
                importlib.util.source_hash(source):
            marshal.loads(data[16:])
            return data
    except (OSError, ValueError, EOFError, TypeError):
        pass
    data = _pyc(source, dfile)
    fd, tmp = tempfile.mkstemp(dir=store, prefix=".", suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, kept)
    return data


def _write_tree(lab: Lab, dest: Path, files: dict[Path, bytes], store: Path) -> None:
    """A redacted copy of the package (``files``) in ``dest`` (a new folder), byte-compiled."""
    root = package_dir()
    index = _index(files)
    plan = _plan(lab, index)
    stubbed = {(m, name) for m, names in plan.items() for name in names}
    by_path = {mod.path: mod for mod in index.values()}
    for rel, data in sorted(files.items()):
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        mod = by_path.get(rel)
        if mod is not None:
            if mod.name in plan:
                data = redact_source(data, lab, plan[mod.name])
            if mod.name in plan or mod.mentions(_names_of(stubbed)):
                data = _freeze_import_time_calls(mod, data, stubbed, index, lab)
        out.write_bytes(data)
        if mod is not None:
            pyc = out.parent / "__pycache__" / f"{out.stem}.{sys.implementation.cache_tag}.pyc"
            pyc.parent.mkdir(exist_ok=True)
            try:
                pyc.write_bytes(_compiled(data, str(root / rel), store))
            except SyntaxError as e:
                raise RedactError(f"{lab.name}: the redacted {rel.as_posix()} does not compile: {e}") from None


def _file_records(tree: Path) -> dict[str, list]:
    out = {}
    for folder, dirs, files in os.walk(tree):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            data = path.read_bytes()
            out[path.relative_to(tree).as_posix()] = [len(data), hashlib.sha256(data).hexdigest()]
    return out


def _set_modes(top: Path) -> None:
    for folder, _dirs, files in os.walk(top):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(Path(folder) / name, 0o644)


def _valid(entry: Path, lab: Lab, digest: str) -> bool:
    """Whether ``entry`` holds a complete tree for ``lab`` and ``digest``, exactly as its manifest says.

    Only a missing or wrong file makes it invalid (and so replaced): any other error reading it (no
    permission, no file descriptors left) is raised, since a sandbox of another grader may be using it.
    """
    try:
        manifest = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
        if manifest.get("format") != FORMAT or manifest.get("lab") != lab.name or manifest.get("digest") != digest:
            return False
        if sorted(p.name for p in entry.iterdir()) != sorted([MANIFEST, _PACKAGE]):
            return False
        return _file_records(entry / _PACKAGE) == manifest["files"]
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, ValueError, KeyError, TypeError,
            AttributeError):
        return False
    except OSError as e:
        raise RedactError(f"{lab.name}: cannot read the redacted copy in {entry}: {e}") from None


def _remove(path: Path) -> None:
    """Delete a folder of this cache (renamed out of the way first, so no one meets it half deleted)."""
    trash = path.with_name(f".trash-{path.name}-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def _clean_stale(root: Path) -> None:
    """Remove what crashed builds left (a build folder untouched for an hour, any trash), and entries and
    compiled files unused for :data:`_UNUSED_SECONDS` (a hit refreshes its entry's manifest once a day)."""
    now = time.time()
    for p in root.iterdir():
        try:
            crashed = p.name.startswith(".build-") and now - p.stat().st_mtime > _STALE_SECONDS
            if crashed or p.name.startswith(".trash-"):
                shutil.rmtree(p, ignore_errors=True)
            elif not p.name.startswith(".") and now - (p / MANIFEST).stat().st_mtime > _UNUSED_SECONDS:
                _remove(p)
        except OSError:
            pass
    for p in (root.parent / "pyc").iterdir():
        try:
            if now - p.stat().st_mtime > _UNUSED_SECONDS:
                p.unlink()
        except OSError:
            pass


def _touch(path: Path) -> None:
    """Mark an entry as used (at most once a day: the manifest lies outside the tree a sandbox sees)."""
    try:
        if time.time() - path.stat().st_mtime > 86400:
            os.utime(path)
    except OSError:
        pass


def _prepare_root() -> Path:
    root = cache_root()
    top = root.parent
    top.mkdir(parents=True, exist_ok=True)
    os.chmod(top, 0o700)
    root.mkdir(exist_ok=True)
    (top / "pyc").mkdir(exist_ok=True)
    return root


def task_view(lab: Lab | str, task_id: str) -> Lab:
    """``lab`` reduced to one task (and the ``also_answers`` of that task): what is redacted while that task
    is graded. The other tasks' references stay, as earlier labs' do: a lab's later task may build on its
    earlier ones (lab 16's forward pass runs on the course's own building blocks, so a slip in ``rms_norm``
    costs the norms task, not the forward pass too), and each task is graded in a worker of its own."""
    import dataclasses

    lab = LABS[lab] if isinstance(lab, str) else lab
    task = lab.task(task_id)
    return dataclasses.replace(lab, tasks=(task,),
                               also_answers=tuple(a for a in lab.also_answers if a[1] == task.id))


def overlay_for(lab: Lab | str, task_id: str) -> tuple[tuple[Path, Path], ...]:
    """The sandbox overlay that grades ``task_id`` of ``lab``: its redacted copy over the package."""
    return ((redacted_package(task_view(lab, task_id)), package_dir()),)


def redacted_package(lab: Lab | str) -> Path:
    """The ``bytes2logits`` folder of a copy of the package in which ``lab``'s graded code is absent.

    Built on first use (a second or so) and kept in :func:`cache_root` under the lab's name and the
    package's digest; later calls check the copy against its manifest and return the same path. The grader
    binds it read-only over :func:`package_dir` in the worker's sandbox. Raises :class:`RedactError` if the
    copy cannot be built (the message says where).
    """
    lab = LABS[lab] if isinstance(lab, str) else lab
    files = _snapshot()
    # The package's digest covers the registry, but a Lab made elsewhere (a test's variant) must not share it.
    digest = hashlib.sha256(f"{package_digest(files)}\0{lab!r}".encode()).hexdigest()
    root = _prepare_root()
    entry = root / f"{lab.name}-{digest[:12]}"
    for _ in range(5):
        if _valid(entry, lab, digest):
            _touch(entry / MANIFEST)
            return entry / _PACKAGE
        if entry.exists():  # partial, edited or from another format: replaced
            _remove(entry)
        _clean_stale(root)
        build = Path(tempfile.mkdtemp(prefix=f".build-{entry.name}-", dir=root))
        try:
            _write_tree(lab, build / _PACKAGE, files, root.parent / "pyc")
            manifest = {"format": FORMAT, "lab": lab.name, "digest": digest,
                        "files": _file_records(build / _PACKAGE)}
            (build / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
            _set_modes(build)
            try:
                os.rename(build, entry)
            except OSError:  # another grader placed it first: theirs is used (or, if broken, replaced)
                shutil.rmtree(build, ignore_errors=True)
                continue
        except BaseException:
            shutil.rmtree(build, ignore_errors=True)
            raise
        return entry / _PACKAGE
    raise RedactError(f"{lab.name}: could not place a redacted copy of the package in {root}")
