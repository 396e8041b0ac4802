"""The package's layers, as its docstring draws them, hold in the code.

``engine`` and ``kit`` stand only on the base (``errors``, ``text``, ``assets``); ``lessons`` may also use
the engine and the kit's widgets (``kit.widgets``, ``kit.anywidgets``); nothing below imports anything above.
Every ``import`` statement counts, also one inside a function: a lazy import is still a dependency. And the
module graph has no cycles.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import bytes2logits

PACKAGE = Path(bytes2logits.__file__).parent
BASE = {"bytes2logits", "bytes2logits.errors", "bytes2logits.text", "bytes2logits.assets"}
ENTRY = {"bytes2logits.__main__"}  # the command dispatcher: it may start any layer's command


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The ``bytes2logits`` modules that the package module at ``path`` imports."""
    name = _module_name(path)
    return _imports_of_source(path, name if path.name == "__init__.py" else name.rpartition(".")[0])


def _imports_of_source(path: Path, package: str) -> set[str]:
    """The ``bytes2logits`` modules that ``path`` imports, relative imports resolved from ``package``
    (``from x import name`` counts ``x.name`` when that is a module, else ``x``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in MODULES:
                    found.add(sub)
                elif target == "bytes2logits" and alias.name in bytes2logits._EXPORTS:
                    found.add(bytes2logits._EXPORTS[alias.name])  # a top-level export is its engine module
                else:
                    found.add(target)
    return {m for m in found if m == "bytes2logits" or m.startswith("bytes2logits.")}


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
GRAPH = {name: _imports(path) for name, path in MODULES.items()}


def layer(module: str) -> str:
    if module in BASE:
        return "base"
    if module in ENTRY:
        return "entry"
    return module.split(".")[1]


ALLOWED = {
    "base": lambda m: layer(m) == "base",
    "engine": lambda m: layer(m) in ("base", "engine"),
    "kit": lambda m: layer(m) in ("base", "kit"),
    "lessons": lambda m: layer(m) in ("base", "engine", "lessons") or m in ("bytes2logits.kit.widgets",
                                                                            "bytes2logits.kit.anywidgets"),
    "entry": lambda m: True,
}


def test_every_module_has_a_layer():
    unknown = sorted(m for m in MODULES if layer(m) not in ALLOWED)
    assert not unknown, (f"{', '.join(unknown)}: not in a layer; put it in engine/, lessons/ or kit/, or add it to "
                         "BASE in this file if it belongs below them all")
    assert len([m for m in MODULES if layer(m) == "engine"]) >= 10


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    if layer(module) not in ALLOWED:
        pytest.skip("test_every_module_has_a_layer reports it")
    wrong = sorted(m for m in GRAPH[module] if m != module and not ALLOWED[layer(module)](m))
    assert not wrong, f"{module} ({layer(module)} layer) imports {', '.join(wrong)}, which it may not"


def test_no_import_cycles():
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for n in sorted(GRAPH.get(m, ())):
            if n == m or n not in GRAPH or n == "bytes2logits":
                continue  # the package's own __init__ imports nothing eagerly
            if state.get(n) == 1:
                cycle = path[path.index(n):] + [n]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if n not in state:
                visit(n)
        path.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)


def test_the_checker_sees_a_wrong_import(tmp_path):
    """The scan itself works: a relative import two levels up from the engine is found and resolved."""
    fake = PACKAGE / "engine" / "model.py"
    assert "bytes2logits.engine.ggml_numerics" in GRAPH["bytes2logits.engine.model"]
    assert "bytes2logits.errors" in _imports(fake)
    assert not ALLOWED["engine"]("bytes2logits.lessons.bpe") and not ALLOWED["kit"]("bytes2logits.lessons.bpe")
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from bytes2logits import Model\n")
    assert "bytes2logits.engine.model" in _imports_of_source(probe, "bytes2logits.kit")
