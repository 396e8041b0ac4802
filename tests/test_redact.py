"""The redacted package: each lab's grading sandbox sees a copy of the package without that lab's answers.

For every lab, built once per module (``trees``): the copy imports and its set-up cell runs, each graded
object is a stub that raises ``NotImplementedError`` naming its task, the reference's code for the graded
objects is nowhere in the copy's sources or byte code, and everything else is the package's own. Then the
cache: reused, rebuilt when damaged, safe under concurrent builds, and out of every sandbox's view.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import json
import marshal
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bytes2logits import assets
from bytes2logits.kit import redact, sandbox
from bytes2logits.kit.build import setup_source
from bytes2logits.kit.labs import LABS

PACKAGE = redact.package_dir()
LAB_IDS = list(LABS)
TAG = sys.implementation.cache_tag


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A cache folder of this module's own (never the user's), for every build below."""
    with pytest.MonkeyPatch.context() as mp:
        root = tmp_path_factory.mktemp("xdg-cache")
        mp.setenv("XDG_CACHE_HOME", str(root))
        yield root


@pytest.fixture(scope="module")
def built(cache) -> tuple[dict[Path, bytes], dict[str, Path]]:
    """The package's files and every lab's copy, built from them (again if the package changed meanwhile)."""
    for _ in range(3):
        files = redact._snapshot()
        trees = {name: redact.redacted_package(name) for name in LAB_IDS}
        if redact._snapshot() == files:
            break
    return files, trees


@pytest.fixture(scope="module")
def package(built) -> dict[str, bytes]:
    """The package's files the copies were built from, by path relative to the package."""
    return {rel.as_posix(): data for rel, data in built[0].items()}


@pytest.fixture(scope="module")
def trees(built) -> dict[str, Path]:
    return built[1]


@pytest.fixture(scope="module")
def plans(built) -> dict[str, list[redact.Redaction]]:
    """:func:`redact.redaction_plan` of every lab, for the same files."""
    index = redact._index(built[0])
    out = {}
    for name in LAB_IDS:
        plan = redact._plan(LABS[name], index)
        out[name] = sorted((redact.Redaction(m, n, task, d.lineno) for m, names in plan.items()
                            for n, task in names.items() for d in redact._definitions(index[m], n)),
                           key=lambda r: (r.module, r.line))
    return out


# ------------------------------------------------------------------------------------------------ helpers

def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def _source_files(root: Path) -> set[str]:
    return {f for f in _files(root) if "__pycache__" not in f.split("/")}


def _module_path(module: str) -> str:
    parts = module.split(".")[1:]
    if (PACKAGE.joinpath(*parts) / "__init__.py").is_file():
        return "/".join([*parts, "__init__.py"])
    return "/".join(parts) + ".py"


def _real(r: redact.Redaction):
    return getattr(importlib.import_module(r.module), r.name)


def _functions(obj) -> list[tuple[str, types.FunctionType]]:
    """``obj`` (a function) or every function a class defines in its body (methods, properties...)."""
    if inspect.isfunction(obj):
        return [(obj.__qualname__, inspect.unwrap(obj))]
    out = []
    for name, value in vars(obj).items():
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            out += [(f"{obj.__qualname__}.{name}", f) for f in (value.fget, value.fset, value.fdel) if f]
        elif inspect.isfunction(value):
            out.append((f"{obj.__qualname__}.{name}", inspect.unwrap(value)))
        elif inspect.isclass(value) and value.__qualname__.startswith(obj.__qualname__ + "."):
            out += _functions(value)
    return out


def _body_lines(func) -> list[str]:
    """A function's body without its docstring, as ``ast.unparse`` writes it, one stripped line each: the
    normalized syntax tree, which comments and layout do not change."""
    node = ast.parse(textwrap.dedent(inspect.getsource(func))).body[0]
    body = node.body[1:] if ast.get_docstring(node, clean=False) is not None else node.body
    return [line.strip() for stmt in body for line in ast.unparse(stmt).splitlines()]


_UNPARSED: dict[str, str] = {}


def _unparsed(data: bytes) -> str:
    """A module's normalized text (``ast.unparse``, lines stripped), cached by content: most files of every
    lab's copy are the package's own."""
    key = hashlib.sha256(data).hexdigest()
    if key not in _UNPARSED:
        lines = [line.strip() for line in ast.unparse(ast.parse(data)).splitlines()]
        _UNPARSED[key] = "\n" + "\n".join(lines) + "\n"
    return _UNPARSED[key]


def _code_objects(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _identity(code: types.CodeType) -> tuple:
    """What makes two code objects the same function: byte code, the names it uses and its constants (nested
    code objects aside). ``co_code`` alone is shared by methods that only read other attributes."""
    consts = tuple(repr(c) for c in code.co_consts if not isinstance(c, types.CodeType))
    return code.co_code, code.co_names, consts


_PYC_CODES: dict[str, set[tuple]] = {}


def _pyc_codes(data: bytes) -> set[tuple]:
    key = hashlib.sha256(data).hexdigest()
    if key not in _PYC_CODES:
        _PYC_CODES[key] = {_identity(c) for c in _code_objects(marshal.loads(data[16:]))}
    return _PYC_CODES[key]


def _nontrivial(lines: list[str]) -> bool:
    """More than a one-line ``return`` of an expression: such a body may well be written the same elsewhere."""
    return len(lines) > 1 or len(lines[0]) > 40


# ------------------------------------------------------------------------------------------------ unit

def test_package_dir_is_the_installed_package():
    import bytes2logits

    assert redact.package_dir() == Path(bytes2logits.__file__).resolve().parent


def _lab():
    return LABS["lab01_tokenizers"]


def test_a_stub_keeps_signature_decorators_and_docstring():
    source = textwrap.dedent('''\
        import functools

        # The trick: a running total.
        @functools.lru_cache
        def total(xs: tuple, start: int = 0, *, scale: float = 1.0) -> float:
            """Sum ``xs`` (é), scaled."""
            # a comment on the body
            acc = start  # inline
            for x in xs:
                acc += x
            return acc * scale  # trailing


        def keep(x):
            """Not graded."""
            return x + 1  # stays
        ''').encode()
    out = redact.redact_source(source, _lab(), {"total": "byte_tokenizer"}).decode()
    namespace: dict = {}
    exec(out, namespace)
    original: dict = {}
    exec(source, original)
    total = namespace["total"]
    assert total.__doc__ == "Sum ``xs`` (é), scaled." and hasattr(total, "cache_info")
    assert inspect.signature(total.__wrapped__) == inspect.signature(original["total"].__wrapped__)
    with pytest.raises(NotImplementedError, match="task 'byte_tokenizer' of lab01_tokenizers"):
        total((1, 2))
    assert namespace["keep"](1) == 2
    assert "acc" not in out and "comment" not in out and "trick" not in out and "trailing" not in out
    assert out.endswith(source.decode().split("\n\n\n")[1])  # everything after the stub is byte-identical


def test_a_graded_class_keeps_constants_and_no_logic():
    source = textwrap.dedent('''\
        class Base:
            pass


        class Graded(Base):
            """A graded class."""

            SIZE = 256
            NAMES = ("a", "b")
            table: dict
            computed = {k: k * 2 for k in range(3)}  # logic at class level: dropped
            for _i in range(2):
                pass

            def __init__(self, n): """Set up."""; self.n = n

            @property
            def double(self):
                """Twice n."""
                return self.n * 2

            @staticmethod
            def helper(x):
                return x - 1

            class Inner:
                """Nested."""

                def go(self):
                    """Go."""
                    return 42
        ''').encode()
    out = redact.redact_source(source, _lab(), {"Graded": "char_tokenizer"}).decode()
    namespace: dict = {}
    exec(out, namespace)
    graded = namespace["Graded"]
    assert graded.__doc__ == "A graded class." and graded.__bases__ == (namespace["Base"],)
    assert graded.SIZE == 256 and graded.NAMES == ("a", "b") and graded.__annotations__ == {"table": "dict"}
    assert not hasattr(graded, "computed") and "range" not in out and "* 2" not in out and "42" not in out
    for call in (lambda: graded(1), lambda: graded.double.fget(None), lambda: graded.helper(1),
                 lambda: graded.Inner().go()):
        with pytest.raises(NotImplementedError, match=r"Graded\.\w+(\.go)? is part of task 'char_tokenizer'"):
            call()


def test_a_module_level_call_of_a_graded_function_gets_the_real_value(trees):
    text = (trees["lab05_byte_codec"] / "text.py").read_text(encoding="utf-8")
    assert "BYTE_TO_CHAR: dict[int, str] = {0: " in text and "= bytes_to_unicode()" not in text


# ------------------------------------------------------------------------------------------------ every lab

@pytest.mark.parametrize("name", LAB_IDS)
def test_the_copy_is_complete_and_compiled_for_itself(name, trees, plans, package):
    tree = trees[name]
    assert _source_files(tree) == set(package)
    changed = {_module_path(r.module) for r in plans[name]}
    assert changed, "a lab with nothing to redact"
    for rel in sorted(_source_files(tree) - changed):
        if (tree / rel).read_bytes() != package[rel]:
            _assert_only_graded_or_frozen(tree, rel, set(), package)
    # Every .pyc is the one the import system uses for its source, and checks it by hash, not by time stamp.
    pycs = {f for f in _files(tree) if "__pycache__" in f.split("/")}
    wanted = {str(Path(f).parent / "__pycache__" / f"{Path(f).stem}.{TAG}.pyc") for f in _source_files(tree)
              if f.endswith(".py")}
    assert pycs == wanted
    for pyc in pycs:
        source = (tree / pyc).parent.parent / (Path(pyc).name.split(".")[0] + ".py")
        data = (tree / pyc).read_bytes()
        assert data[:4] == importlib.util.MAGIC_NUMBER
        assert int.from_bytes(data[4:8], "little") == 0b11  # hash-based, checked against the source
        assert data[8:16] == importlib.util.source_hash(source.read_bytes())
    for path in [tree, *tree.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o755 if path.is_dir() else 0o644), path


@pytest.mark.parametrize("name", LAB_IDS)
def test_the_reference_code_of_the_graded_objects_is_nowhere_in_the_copy(name, trees, plans):
    tree = trees[name]
    sources = {rel: (tree / rel).read_bytes() for rel in _source_files(tree) if rel.endswith(".py")}
    codes: set[tuple] = set()
    for rel in _files(tree):
        if rel.endswith(".pyc"):
            codes |= _pyc_codes((tree / rel).read_bytes())
    checked = 0
    for r in plans[name]:
        for qualname, func in _functions(_real(r)):
            lines = _body_lines(func)
            if not _nontrivial(lines):
                continue
            needle = "\n" + "\n".join(lines) + "\n"
            hits = [rel for rel, data in sources.items() if needle in _unparsed(data)]
            assert hits == [], f"the body of {r.module}.{qualname} is still in {hits}"
            for code in _code_objects(func.__code__):
                # Comprehensions and lambdas inside a body are idioms any module may share; the body's own code
                # and its named inner functions are not.
                if len(code.co_code) > 40 and not code.co_name.startswith("<"):
                    assert _identity(code) not in codes, f"the byte code of {qualname} ({code.co_name}) is in a .pyc"
            checked += 1
    assert checked >= len(LABS[name].tasks)


def _assert_only_graded_or_frozen(tree: Path, rel: str, graded: set[str], package: dict[str, bytes]) -> None:
    """``rel`` in ``tree`` is the package's, statement for statement, but for the definitions ``graded``
    and module-level values that a graded function computed at import, written out as literals."""
    module = "bytes2logits." + rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    ours = ast.parse((tree / rel).read_bytes()).body
    real = ast.parse(package[rel]).body
    assert len(ours) == len(real), rel
    for a, b in zip(ours, real):
        if getattr(b, "name", None) in graded:
            assert type(a) is type(b) and a.name == b.name
            continue
        if ast.dump(a) == ast.dump(b):
            continue
        assert isinstance(a, (ast.Assign, ast.AnnAssign)), f"{rel} line {b.lineno} changed"
        target = (a.targets[0] if isinstance(a, ast.Assign) else a.target).id
        assert ast.literal_eval(a.value) == getattr(importlib.import_module(module), target)


@pytest.mark.parametrize("name", LAB_IDS)
def test_everything_else_in_a_redacted_module_is_the_package_own(name, trees, plans, package):
    """Earlier labs' references, given helpers and constants in the same modules are untouched."""
    for module in sorted({r.module for r in plans[name]}):
        graded = {r.name for r in plans[name] if r.module == module}
        _assert_only_graded_or_frozen(trees[name], _module_path(module), graded, package)


def test_no_lab_stubs_another_lab_own_reference(plans):
    """What one lab redacts is no other lab's graded code, so every earlier (and later) reference stays whole."""
    owner: dict[tuple[str, str], str] = {}
    for name, plan in plans.items():
        for r in plan:
            assert owner.setdefault((r.module, r.name), name) == name, \
                f"{r.module}.{r.name} is redacted for both {owner[(r.module, r.name)]} and {name}"


_CHECK = r'''
import importlib, importlib._bootstrap_external as bootstrap, inspect, json, sys
tree, args = sys.argv[1], json.loads(sys.stdin.read())
# Every module of the copy must load from its .pyc: note any that is compiled from source instead.
compiled, to_code = [], bootstrap.SourceLoader.source_to_code
def spy(self, data, path, **kwargs):
    if str(path).startswith(tree + "/"):
        compiled.append(str(path))
    return to_code(self, data, path, **kwargs)
bootstrap.SourceLoader.source_to_code = spy
sys.dont_write_bytecode = True
sys.path.insert(0, tree)
import bytes2logits
assert bytes2logits.__file__.startswith(tree + "/"), bytes2logits.__file__
result = {"import_errors": {}, "not_stubbed": [], "setup": None}
for module in args["modules"]:
    try:
        importlib.import_module(module)
    except BaseException as e:
        result["import_errors"][module] = repr(e)
namespace = {"__name__": "__main__"}
try:
    exec(compile(args["setup"], "<set-up cell>", "exec"), namespace)
except BaseException as e:
    result["setup"] = repr(e)
from bytes2logits.kit.labs import LABS
lab = LABS[args["lab"]]
result["given"] = []
for g in lab.given:
    try:
        lab.reference_object(g)
    except BaseException as e:
        result["given"].append(f"{g}: {e!r}")

def dummies(func):
    positional, keywords = [], {}
    for p in inspect.signature(func).parameters.values():
        if p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.kind == p.KEYWORD_ONLY:
            keywords[p.name] = None
        else:
            positional.append(None)
    return positional, keywords

def calls(obj):
    if inspect.isfunction(obj):
        yield obj.__qualname__, obj
        return
    for name, value in vars(obj).items():
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            yield from ((f"{obj.__qualname__}.{name}", f) for f in (value.fget, value.fset, value.fdel) if f)
        elif inspect.isfunction(value):
            yield f"{obj.__qualname__}.{name}", value
        elif inspect.isclass(value) and value.__qualname__.startswith(obj.__qualname__ + "."):
            yield from calls(value)
    if "__init__" in vars(obj):
        yield f"{obj.__qualname__}()", obj

checked = 0
for module, name, task in args["graded"]:
    obj = getattr(importlib.import_module(module), name)
    for label, func in calls(obj):
        positional, keywords = dummies(func.__init__ if inspect.isclass(func) else func)
        if inspect.isclass(func):
            positional = positional[1:]
        try:
            func(*positional, **keywords)
        except NotImplementedError as e:
            if f"task {task!r} of {lab.name}" not in str(e):
                result["not_stubbed"].append(f"{label}: {e}")
            checked += 1
            continue
        except BaseException as e:
            result["not_stubbed"].append(f"{label} raised {e!r}")
            continue
        result["not_stubbed"].append(f"{label} returned")
for name in (n for t in lab.tasks for n in t.objects):
    obj = lab.reference_object(name)
    if not any(True for _ in calls(obj)):
        result["not_stubbed"].append(f"{name}: nothing to call")
result["checked"] = checked
result["compiled"] = compiled
result["loaded"] = sorted(m for m, v in sys.modules.items() if (getattr(v, "__file__", None) or "").startswith(tree))
print(json.dumps(result))
'''


def _import_graph(index) -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports (anywhere in it), parents included."""
    graph = {}
    for name, mod in index.items():
        found = set()
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                target = redact._import_target(mod, node)
                found |= {f"{target}.{a.name}" if f"{target}.{a.name}" in index else target for a in node.names}
        found |= {name.rsplit(".", i)[0] for i in range(1, name.count(".") + 1)}
        graph[name] = {m.rsplit(".", i)[0] for m in found for i in range(m.count(".") + 1)} & set(index)
    return graph


@pytest.fixture(scope="module")
def checks(built, trees, plans) -> dict[str, dict]:
    """For every lab, in a fresh interpreter with the copy first on ``sys.path``: import the modules whose
    text or imports differ from the package's (the others import as the package does: the same text,
    importing the same text), run the lab's set-up cell, and call every graded object."""
    index = redact._index(built[0])
    graph = _import_graph(index)

    def run(name):
        affected = {m for m, mod in index.items() if (trees[name] / mod.path).read_bytes() != mod.source}
        while True:
            more = {m for m, deps in graph.items() if deps & affected} - affected
            if not more:
                break
            affected |= more
        args = {"lab": name, "modules": sorted(affected | {"bytes2logits.kit.worker"}),
                "setup": setup_source(LABS[name]),
                "graded": [[r.module, r.name, r.task] for r in plans[name]]}
        proc = subprocess.run([sys.executable, "-I", "-c", _CHECK, str(trees[name].parent)], input=json.dumps(args),
                              capture_output=True, text=True, timeout=600, cwd=trees[name].parent)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as pool:
        return dict(zip(LAB_IDS, pool.map(run, LAB_IDS)))


@pytest.mark.slow
@pytest.mark.parametrize("name", LAB_IDS)
def test_the_copy_imports_runs_its_set_up_cell_and_every_graded_object_raises(name, checks, trees, plans):
    result = checks[name]
    assert result["import_errors"] == {}
    assert result["compiled"] == [], "compiled from source: the .pyc files were not used"
    assert set(result["loaded"]) >= {r.module for r in plans[name]} | {"bytes2logits.kit.worker"}
    entry = trees[name].parent
    assert redact._valid(entry, LABS[name], json.loads((entry / redact.MANIFEST).read_text())["digest"])
    assert result["setup"] is None, f"the set-up cell fails: {result['setup']}"
    assert result["given"] == []
    assert result["not_stubbed"] == []
    assert result["checked"] >= sum(len(t.objects) for t in LABS[name].tasks)


# ------------------------------------------------------------------------------------------------ the cache

def test_the_cache_is_out_of_every_sandbox_view(monkeypatch):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    root = redact.cache_root()
    for seen in sandbox._readable_paths():
        assert root != seen and seen not in root.parents, f"{root} is inside {seen}, which a sandbox reads"
    assert PACKAGE not in root.parents


@pytest.mark.parametrize("inside", [lambda: assets.cache_dir(), lambda: Path(sys.prefix), lambda: PACKAGE.parent])
def test_a_cache_where_a_sandbox_can_read_is_refused(inside, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(inside() / "xdg"))
    with pytest.raises(redact.RedactError, match="grading sandboxes can read"):
        redact.cache_root()


def test_the_cache_is_reused(trees, built):
    if redact._snapshot() != built[0]:
        pytest.skip("the package was edited while these tests ran: its copies are rebuilt, as they should be")
    path = trees["lab02_words"]
    manifest = path.parent / redact.MANIFEST
    before = manifest.stat().st_ino, manifest.stat().st_mtime_ns
    start = time.perf_counter()
    again = redact.redacted_package("lab02_words")
    assert again == path and time.perf_counter() - start < 2
    assert (manifest.stat().st_ino, manifest.stat().st_mtime_ns) == before
    assert stat.S_IMODE(path.parent.parent.parent.stat().st_mode) == 0o700  # bytes2logits-grading
    assert not [p for p in path.parent.parent.iterdir() if p.name.startswith((".build-", ".trash-"))]


@pytest.fixture
def own_cache(tmp_path, monkeypatch, trees, cache):
    """An empty cache of the test's own, but for the compiled files kept for reuse (a quicker build)."""
    shutil.copytree(cache / "bytes2logits-grading" / "pyc", tmp_path / "bytes2logits-grading" / "pyc")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("damage", ["truncate", "edit", "extra", "missing", "no-manifest", "partial"])
def test_a_damaged_or_partial_entry_is_rebuilt(damage, own_cache):
    path = redact.redacted_package("lab02_words")
    good = {rel: (path / rel).read_bytes() for rel in _files(path)}
    target = path / "lessons" / "granularity.py"
    if damage == "truncate":
        target.write_bytes(target.read_bytes()[:100])
    elif damage == "edit":
        (path / "lessons" / "basic.py").write_bytes((PACKAGE / "lessons" / "granularity.py").read_bytes())
    elif damage == "extra":
        (path / "lessons" / "copied.py").write_bytes((PACKAGE / "lessons" / "granularity.py").read_bytes())
    elif damage == "missing":
        next((path / "lessons" / "__pycache__").iterdir()).unlink()
    elif damage == "no-manifest":
        (path.parent / redact.MANIFEST).unlink()
    else:  # a folder someone left half-written under the final name
        (path.parent / redact.MANIFEST).unlink()
        for p in sorted(path.rglob("*"), reverse=True):
            if p.is_file() and p.name > "m":
                p.unlink()
    rebuilt = redact.redacted_package("lab02_words")
    assert rebuilt == path
    assert {rel: (rebuilt / rel).read_bytes() for rel in _files(rebuilt)} == good


_RACE = r'''
import sys
from bytes2logits.kit import redact
print(redact.redacted_package("lab09_pitfalls"))
'''


def test_concurrent_builds_agree(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    procs = [subprocess.Popen([sys.executable, "-c", _RACE], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(3)]
    paths = {p.communicate(timeout=300)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(paths) == 1
    entry = Path(paths.pop()).parent
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]  # no build or trash folder left over
    assert redact._valid(entry, LABS["lab09_pitfalls"], json.loads((entry / redact.MANIFEST).read_text())["digest"])


def test_a_variant_of_a_lab_gets_an_entry_of_its_own(own_cache, trees):
    variant = dataclasses.replace(LABS["lab02_words"], also_answers=(("WordTokenizer", "metrics"),))
    path = redact.redacted_package(variant)
    assert path != redact.redacted_package("lab02_words")
    assert "task 'metrics'" in (path / "lessons" / "granularity.py").read_text()
