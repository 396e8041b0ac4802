"""Every module documents itself: a docstring on every public function, class and method a learner can
read, and every example in those docstrings runs and prints what it claims (doctest)."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil

import pytest

import bytes2logits

# Every module of the package, found by walking it: a new module is covered without touching this file.
MODULES = ["bytes2logits"] + sorted(
    m.name for m in pkgutil.walk_packages(bytes2logits.__path__, "bytes2logits.") if not m.name.endswith("__main__")
)


def _public(module):
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj) or inspect.isclass(obj):
            yield name, obj
            if inspect.isclass(obj):
                for mname, m in vars(obj).items():
                    if mname.startswith("_"):
                        continue
                    f = m.fget if isinstance(m, property) else getattr(m, "__func__", m)
                    if inspect.isfunction(f):
                        yield f"{name}.{mname}", f


def test_every_layer_is_walked():
    for layer in ("bytes2logits.engine.model", "bytes2logits.lessons.bpe", "bytes2logits.kit.trusted",
                  "bytes2logits.text"):
        assert layer in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_public_api_is_documented(name):
    module = importlib.import_module(name)
    assert (module.__doc__ or "").strip(), f"module {name} has no docstring"
    if name.startswith("bytes2logits.kit."):
        return  # the kit's internals are machinery for maintainers; its modules still explain themselves
    missing = [q for q, obj in _public(module) if not (inspect.getdoc(obj) or "").strip()]
    assert not missing, f"{name}: no docstring on {', '.join(missing)}"


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    """The ``>>>`` examples of the module, as ``python -m doctest`` would run them (``+SKIP`` marks the few
    that need a downloaded model)."""
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out: list[str] = []
    for test in finder.find(module, name, globs=dict(vars(module))):
        runner.run(test, out=out.append)
    failed, attempted = runner.summarize(verbose=False)
    assert failed == 0, f"{name}: {failed} of {attempted} doctest examples failed:\n" + "".join(out)
