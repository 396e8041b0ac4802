"""What lab 14's hidden suites share: llama.cpp's vocabularies and expected ids, tokenizers built where the
code under test runs, and small oracles.

Loaded by each suite with ``runpy`` (the suites are imported in importlib mode, without a package).

* :func:`learner_tokenizer` builds the engine's ``Tokenizer`` from a GGUF file with the implementation's own
  versions of some of the engine's steps (``load_merges``, ``token_bytes``, ``special_pattern``,
  ``split_specials``): ``Tokenizer.from_gguf(path, steps={...})``, which is what the notebook's
  ``tokenizer_from_gguf`` does with all four. For a notebook in a sandboxed worker it is built *in the
  worker* (the set-up cell imports ``Tokenizer`` there), so that only ids and bytes cross back. Each task's
  checks put in only that task's steps, so that a mistake in one task costs no points in another; with all
  four it is ``impl.tokenizer_from_gguf(path)`` itself (a given function runs in the worker, where it finds
  the learner's steps by name).
* :func:`engine_tokenizer` is the package's own Tokenizer in this process: the reference ids for inputs that
  have no llama.cpp fixture (it matches llama.cpp on all of them, ``tests/test_tokenizer_parity.py``).
* :class:`TokenizerView` hands a trusted tokenizer to the learner's chat functions without its
  ``apply_chat_template``, the engine's own answer to that task.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import mmap
import runpy
from pathlib import Path

from bytes2logits import assets
from bytes2logits.engine.gguf import Cursor, read_header, read_value, read_value_type
from bytes2logits.engine.tokenizer import STEPS, Tokenizer, TokenType
from bytes2logits.kit.labs import hidden_root, repo_root
from bytes2logits.kit.remote import RemoteImplementation

MODELS = Path(assets.path("llama-cpp-models"))
# llama.cpp's reader of its own .inp/.out files (tests/test_tokenizer_parity.py uses the same function)
llama_cpp_cases = runpy.run_path(str(repo_root() / "tools" / "make_tokenizer_json.py"))["llama_cpp_cases"]
ASCII_SPACE = " \t\n\v\f\r"  # C's isspace(): what llama.cpp's rstrip rule skips


def vocab(name: str) -> Path:
    """``ggml-vocab-<name>.gguf`` of llama.cpp's test vocabularies."""
    return MODELS / f"ggml-vocab-{name}.gguf"


def tokenizer_model(path: Path) -> str | None:
    """``tokenizer.ggml.model`` of a GGUF file, read with the engine's section functions, stopping at that key
    (the vocabulary arrays that follow it are not parsed)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        c = Cursor(mm, len(mm))
        _, _, n_kv = read_header(c)
        for _ in range(n_kv):
            key = c.string("key")
            value = read_value(c, read_value_type(c, key), key)
            if key == "tokenizer.ggml.model":
                return value
    return None


def fixture_vocabs(model: str) -> list[str]:
    """The vocabularies of family ``model`` ("gpt2", "llama") that have llama.cpp's expected ids (.inp/.out)."""
    names = []
    for path in sorted(MODELS.glob("ggml-vocab-*.gguf")):
        if Path(f"{path}.inp").is_file() and Path(f"{path}.out").is_file() and tokenizer_model(path) == model:
            names.append(path.name[len("ggml-vocab-"):-len(".gguf")])
    return names


# Every byte-level BPE vocabulary of llama.cpp's tokenizer tests, and the SentencePiece ones.
BYTE_LEVEL = fixture_vocabs("gpt2")
SENTENCEPIECE = fixture_vocabs("llama")


@functools.cache
def cases(name: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """llama.cpp's (input, expected ids) pairs for vocabulary ``name``.

    llama.cpp's ``test-tokenizer-0`` encodes each input with ``add_special=false, parse_special=false``:
    no BOS/EOS, and no control token is recognised (user-defined tokens still are). That is the engine's
    ``encode(text)`` with its defaults.
    """
    return tuple((text, tuple(ids)) for text, ids in llama_cpp_cases(vocab(name)))


@functools.cache
def engine_tokenizer(source: str) -> Tokenizer:
    """The package's own Tokenizer (reference steps), in this process; ``source`` a vocab name or "smollm2"."""
    return Tokenizer.from_gguf(assets.path("smollm2") if source == "smollm2" else vocab(source))


_BUILT: dict = {}


def learner_tokenizer(impl, source, steps):
    """``Tokenizer.from_gguf(source, steps=...)`` with ``impl``'s own functions for ``steps``, built where
    ``impl``'s code runs (in its worker for a notebook). ``source`` is a vocab name, "smollm2", or a
    metadata mapping (then ``Tokenizer.from_metadata``, never cached).

    A tokenizer built from a file is kept for the suite's other checks (if the worker dies, its handle dies
    with it, but then the task scores 0 anyway)."""
    if not isinstance(source, dict):
        key = (id(impl), source, tuple(steps))
        if key not in _BUILT:
            _BUILT[key] = (impl, _build(impl, source, steps))
        return _BUILT[key][1]
    return _build(impl, source, steps)


def _build(impl, source, steps):
    if not isinstance(source, dict) and sorted(steps) == sorted(STEPS):
        return impl.tokenizer_from_gguf(str(assets.path("smollm2") if source == "smollm2" else vocab(source)))
    functions = {name: getattr(impl, name) for name in steps}
    cls = impl.Tokenizer if isinstance(impl, RemoteImplementation) else Tokenizer
    if isinstance(source, dict):
        return cls.from_metadata(source, steps=functions)
    path = assets.path("smollm2") if source == "smollm2" else vocab(source)
    return cls.from_gguf(str(path), steps=functions)


# ------------------------------------------------------------------------------------ special tokens


def earliest_longest(text: str, texts, start: int = 0):
    """Brute force: ``(position, text)`` of the first special text in ``text`` at or after ``start``, the
    longest one where several start at that position; ``None`` when there is none."""
    for i in range(start, len(text)):
        found = [t for t in texts if text.startswith(t, i)]
        if found:
            return i, max(found, key=len)
    return None


def split_oracle(text: str, allowed, ids, control=(), literal_spans=(), rstrip=()) -> list:
    """The fragments ``split_specials`` must return, found by brute force from its specification: at each
    position the longest allowed text; a control match that overlaps a literal span is no token (look again
    one character later); ASCII whitespace after an ``rstrip`` id is skipped."""
    out, pos, i = [], 0, 0
    while True:
        hit = earliest_longest(text, allowed, i)
        if hit is None:
            break
        at, t = hit
        if t in control and any(at < e and at + len(t) > s for s, e in literal_spans):
            i = at + 1
            continue
        if at > pos:
            out.append((pos, at, None))
        out.append((at, at + len(t), ids[t]))
        pos = at + len(t)
        if ids[t] in rstrip:
            while pos < len(text) and text[pos] in ASCII_SPACE:
                pos += 1
        i = pos
    if pos < len(text):
        out.append((pos, len(text), None))
    return out


def as_tuples(fragments) -> list:
    """A split as a list of plain tuples (a learner may return lists)."""
    return [tuple(f) for f in fragments]


# ------------------------------------------------------------------------------------ chat templates


class TokenizerView:
    """A trusted tokenizer as the learner's chat functions may use it: every public attribute except
    ``apply_chat_template`` (the engine's own answer to the task); ``overrides`` replace some attributes
    (a missing or broken ``chat_template``, say)."""

    def __init__(self, tokenizer, **overrides):
        object.__setattr__(self, "_tokenizer", tokenizer)
        object.__setattr__(self, "_overrides", overrides)

    def __getattr__(self, name):
        if name.startswith("_") or name == "apply_chat_template":
            raise AttributeError(f"{name!r} is not available here: build the prompt with chat_template_of")
        overrides = object.__getattribute__(self, "_overrides")
        if name in overrides:
            return overrides[name]
        return getattr(object.__getattribute__(self, "_tokenizer"), name)

    def encode(self, *args, **kwargs):
        """The tokenizer's own encode."""
        return object.__getattribute__(self, "_tokenizer").encode(*args, **kwargs)

    def decode(self, *args, **kwargs):
        """The tokenizer's own decode."""
        return object.__getattribute__(self, "_tokenizer").decode(*args, **kwargs)


def smollm2_view(**overrides) -> TokenizerView:
    """SmolLM2's tokenizer (the engine's), as a :class:`TokenizerView`."""
    return TokenizerView(engine_tokenizer("smollm2"), **overrides)


@functools.cache
def manifest_prompts() -> tuple[dict, ...]:
    """SmolLM2's chat prompts with the text and ids llama.cpp evaluated (tests/fixtures/parity/manifest.json)."""
    data = json.loads((repo_root() / "tests" / "fixtures" / "parity" / "manifest.json").read_text(encoding="utf-8"))
    return tuple(data["smollm2"]["prompts"])


@functools.cache
def transformers_renders() -> dict:
    """Chat templates rendered by transformers' ``render_jinja_template`` (lab 07's committed fixture, written by
    tools/make_template_fixtures.py): templates, conversations and expected renders."""
    return json.loads((hidden_root() / "lab07_chat_templates" / "template_fixtures.json").read_text(encoding="utf-8"))


def template_tokenizer(source: str | None, bos: str, eos: str) -> TokenizerView:
    """A small byte-level vocabulary (the 256 byte tokens, BOS and EOS as control tokens) whose metadata carries
    ``tokenizer.chat_template = source``, built by the engine from a metadata mapping."""
    from bytes2logits.text import BYTE_TO_CHAR

    tokens = [BYTE_TO_CHAR[b] for b in range(256)]
    types = [TokenType.NORMAL] * 256
    md = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "default", "tokenizer.ggml.merges": []}
    for key, text in (("bos", bos), ("eos", eos)):
        if text and text not in tokens:
            tokens.append(text)
            types.append(TokenType.CONTROL)
        if text:
            md[f"tokenizer.ggml.{key}_token_id"] = tokens.index(text)
    md["tokenizer.ggml.tokens"] = tokens
    md["tokenizer.ggml.token_type"] = types
    if source is not None:
        md["tokenizer.chat_template"] = source
    tok = Tokenizer.from_metadata(md)
    if not bos:
        tok.bos_id = None  # a vocabulary without BOS (the family's default id would stand in otherwise)
    if not eos:
        tok.eos_id = None
    return TokenizerView(tok)


@contextlib.contextmanager
def stderr_of(impl):
    """Collect what the code under test writes to ``sys.stderr`` inside the block (in its worker for a notebook:
    the set-up cell imports ``sys`` there); yields a StringIO."""
    sink = io.StringIO()
    if isinstance(impl, RemoteImplementation):
        worker_sys = impl.sys
        saved = worker_sys.stderr
        worker_sys.stderr = sink
        try:
            yield sink
        finally:
            worker_sys.stderr = saved
    else:
        with contextlib.redirect_stderr(sink):
            yield sink
