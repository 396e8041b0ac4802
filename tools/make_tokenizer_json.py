"""Build, with Hugging Face's own libraries, the ``tokenizer.json`` files that no pinned package ships.

The course's ``tokenizer.json`` loader is tested against real files. Three of them are assets as published
(``qwen3-tokenizer``, ``bert-wordpiece``, ``unigram-mon``). The others this script generates: no pinned
package ships them as ``tokenizer.json``, but their inputs are pinned assets. Every file is produced by
Hugging Face code, never written by hand, so it is what Hugging Face itself would write:

* ``gpt2``: GPT-2's byte-level BPE from the ``gpt2-bpe`` asset (OpenAI's ``encoder.json`` and ``vocab.bpe``),
  read by ``tokenizers.models.BPE.from_file`` and assembled with ``tokenizers`` the way transformers'
  ``GPT2Converter`` does and the Hub's ``openai-community/gpt2`` file is: ByteLevel pre-tokenizer without a
  prefix space, ByteLevel decoder, ByteLevel post-processor with ``trim_offsets=False``, and
  ``<|endoftext|>`` an added special token (``normalized: true``, as in the Hub's file).
* ``smollm2``: the course's chat model, from the vocabulary, merges and token types in the ``smollm2``
  asset's GGUF (read with ``gguf-py``), assembled with ``tokenizers``: pre-tokenizer
  Sequence[Digits(individual_digits), ByteLevel(no prefix space)], ByteLevel decoder and post-processor,
  and every control token (GGUF token type 3) an added special token (``normalized: false``).
* ``unigram-botchan`` and ``unigram-kyoto``: sentencepiece's own Unigram test models
  (``botchan_en_unigram_1000.model``, ``kyoto_ja_unigram_8000.model``, asset ``sentencepiece-models``),
  converted by transformers' ``convert_slow_tokenizer.SpmConverter``, the generic SentencePiece -> fast
  converter. It parses the ``.model`` protobuf itself (with ``sentencepiece``'s generated module, which needs
  ``protobuf`` >= 7.36.1) and reads only ``vocab_file`` from the slow tokenizer it is handed, so a stand-in
  object carrying that path is all it needs. These give the loader a Unigram model with a ``Precompiled``
  normalizer (the model's NFKC charsmap), a Metaspace pre-tokenizer and decoder, and no post-processor.

Files go to ``<asset cache>/computed/tokenizer-json/`` (see :func:`bytes2logits.assets.cache_dir`), named
``<name>-<key>.json``. The key is the sha256 prefix of everything the file is made from: the recipe's name and
version, the pinned sha256 of each input file and the versions of the libraries that build it. A changed input
or library therefore makes a new file, and an existing file is never rebuilt. Writes are atomic (a temporary
file in the same folder, then ``os.replace``).

Usage (the project's environment, with the test extras)::

    python tools/make_tokenizer_json.py                 # build what is missing, print the paths
    python tools/make_tokenizer_json.py gpt2 smollm2    # just these
    python tools/make_tokenizer_json.py --check         # also compare their ids with independent oracles

From Python: ``ensure(name) -> Path``. ``--check`` compares with

* ``gpt2``: llama.cpp's expected ids for GPT-2 (``ggml-vocab-gpt-2.gguf.inp/.out`` in ``llama-cpp-models``,
  which llama.cpp generates with Hugging Face's GPT-2 tokenizer); on every line of Botchan, tiktoken's own
  ``tiktoken.get_encoding("gpt2")`` (offline: its download cache is seeded with the asset's two files, which
  tiktoken checks against its own sha256 pins) and the course's ``load_gpt2()``;
* ``smollm2``: the engine's ``Tokenizer.from_gguf`` on every line of Botchan and llama.cpp's GPT-2 test inputs
  (llama.cpp ships no SmolLM2 vocabulary test), and on a ChatML prompt with its control tokens;
* ``unigram-*``: ``sentencepiece.SentencePieceProcessor(model_file=...).encode`` on every line of Botchan and on
  the Japanese UDHR samples (``udhr-samples``: ``ja_*``, each line and each clause), ids and (where no
  ``<unk>`` occurs) decoded text.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace

from bytes2logits import assets

# Bump when a recipe changes what it writes: the key changes, so a new file is built.
RECIPE_VERSION = 1

GGUF_CONTROL, GGUF_USER_DEFINED, GGUF_NORMAL = 3, 4, 1


def out_dir() -> Path:
    """Where the generated files live: ``<asset cache>/computed/tokenizer-json``."""
    return assets.cache_dir() / "computed" / "tokenizer-json"


@dataclass(frozen=True)
class Recipe:
    """How to build one file: its inputs (asset, file inside it), the libraries that build it, and the builder."""

    name: str
    inputs: tuple[tuple[str, str], ...]
    libraries: tuple[str, ...]
    build: Callable[[], object]  # -> tokenizers.Tokenizer


def _input(asset: str, rel: str) -> Path:
    folder = assets.path(asset)
    return folder / rel if folder.is_dir() else folder


# ------------------------------------------------------------------------------------------------ builders


def _build_gpt2():
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    bpe = models.BPE.from_file(str(_input("gpt2-bpe", "encoder.json")), str(_input("gpt2-bpe", "vocab.bpe")),
                               dropout=None, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False)
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=True)])
    return tok


def _gguf_tokenizer_fields(path: Path) -> tuple[list[str], list[str], list[int]]:
    from gguf import GGUFReader

    fields = GGUFReader(str(path)).fields
    model = fields["tokenizer.ggml.model"].contents()
    if model != "gpt2":
        raise ValueError(f"{path.name}: tokenizer.ggml.model is {model!r}, this recipe builds byte-level BPE only")
    return (fields["tokenizer.ggml.tokens"].contents(), fields["tokenizer.ggml.merges"].contents(),
            fields["tokenizer.ggml.token_type"].contents())


def _build_smollm2():
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    tokens, merges, types = _gguf_tokenizer_fields(_input("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    pairs = [tuple(m.split(" ")) for m in merges]  # GGUF stores each merge as "left right"
    if any(len(p) != 2 for p in pairs):
        raise ValueError("a GGUF merge is not two space-separated tokens")
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, pairs))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    unexpected = sorted({t for t in types if t not in (GGUF_NORMAL, GGUF_CONTROL, GGUF_USER_DEFINED)})
    if unexpected:
        raise ValueError(f"GGUF token types {unexpected} have no tokenizer.json counterpart in this recipe")
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, kind in zip(tokens, types) if kind == GGUF_CONTROL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False)
                    for t, kind in zip(tokens, types) if kind == GGUF_USER_DEFINED])
    return tok


def _build_spm(model_file: str):
    def build():
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")  # "PyTorch was not found" is irrelevant
        from transformers.convert_slow_tokenizer import SpmConverter

        # SpmConverter reads only ``vocab_file`` from the slow tokenizer it is given (and, if present,
        # ``add_prefix_space`` and ``legacy``, whose defaults are sentencepiece's own behaviour).
        return SpmConverter(SimpleNamespace(vocab_file=str(_input("sentencepiece-models", model_file)))).converted()

    return build


SPM_LIBRARIES = ("tokenizers", "transformers", "sentencepiece", "protobuf")

RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in [
        Recipe("gpt2", (("gpt2-bpe", "encoder.json"), ("gpt2-bpe", "vocab.bpe")), ("tokenizers",), _build_gpt2),
        Recipe("smollm2", (("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),), ("tokenizers", "gguf"), _build_smollm2),
        Recipe("unigram-botchan", (("sentencepiece-models", "botchan_en_unigram_1000.model"),), SPM_LIBRARIES,
               _build_spm("botchan_en_unigram_1000.model")),
        Recipe("unigram-kyoto", (("sentencepiece-models", "kyoto_ja_unigram_8000.model"),), SPM_LIBRARIES,
               _build_spm("kyoto_ja_unigram_8000.model")),
    ]
}


# ------------------------------------------------------------------------------------------------ the cache


def _recipe(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise KeyError(f"unknown tokenizer.json {name!r}; known: {', '.join(RECIPES)}") from None


def key(name: str) -> str:
    """The hex sha256 of what file ``name`` is made from (recipe, input pins, library versions)."""
    recipe = _recipe(name)
    # The assets' pinned sha256: fetch and verify check the cached files against them, so no hashing here.
    inputs = [[a, rel, assets.ASSETS[a].files[rel]] for a, rel in recipe.inputs]
    blob = json.dumps({"recipe": name, "version": RECIPE_VERSION, "inputs": inputs,
                       "libraries": {lib: version(lib) for lib in recipe.libraries}}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def target(name: str) -> Path:
    """Where file ``name`` is (or will be) written."""
    return out_dir() / f"{name}-{key(name)[:16]}.json"


def ensure(name: str) -> Path:
    """The path of the generated ``tokenizer.json`` for ``name``, building it first if it is missing."""
    recipe = _recipe(name)
    for a, _rel in recipe.inputs:
        assets.path(a)  # a missing asset: AssetMissingError naming the fetch command
    out = target(name)
    if out.is_file():
        return out
    text = recipe.build().to_str(pretty=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes the file private; give it a normal file's mode
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


# ------------------------------------------------------------------------------------------------ --check


def _botchan_lines() -> list[str]:
    return assets.path("botchan").read_text(encoding="utf-8").splitlines()


def llama_cpp_cases(path: str | os.PathLike) -> list[tuple[str, list[int]]]:
    """llama.cpp's (input, expected ids) pairs for a vocab-only GGUF ``path``, read from ``path.inp`` and
    ``path.out`` as its test-tokenizer-0 reads them (``tests/test_tokenizer_parity.py`` uses this too)."""
    raw = Path(f"{path}.inp").read_text(encoding="utf-8")
    sep = "\n__ggml_vocab_test__\n"
    inputs, pos = [], 0
    while pos < len(raw):  # a trailing separator does not start another input
        nxt = raw.find(sep, pos)
        if nxt < 0:
            inputs.append(raw[pos:])
            break
        inputs.append(raw[pos:nxt])
        pos = nxt + len(sep)
    lines = Path(f"{path}.out").read_text(encoding="utf-8").split("\n")
    if len(lines) < len(inputs):
        raise ValueError(f"{Path(path).name}: {len(inputs)} inputs but {len(lines)} output lines")
    return [(text, [int(x) for x in line.split()]) for text, line in zip(inputs, lines)]


def _llama_cpp_cases(vocab: str) -> list[tuple[str, list[int]]]:
    """:func:`llama_cpp_cases` of the ``llama-cpp-models`` asset's ``ggml-vocab-<vocab>.gguf``."""
    return llama_cpp_cases(assets.path("llama-cpp-models") / f"ggml-vocab-{vocab}.gguf")


def _japanese_lines() -> list[str]:
    """The Japanese UDHR samples (``ja_Jpan``, ``ja_Hira``, ``ja_Kana``): each line, then each clause of it."""
    import re

    from bytes2logits.lessons.pitfalls import udhr_samples

    samples = udhr_samples()
    lines = [line for code in sorted(samples) if code.startswith("ja_") for line in samples[code].text.split("\n")]
    clauses = [c for line in lines for c in re.split(r"(?<=[、。])", line) if c]
    return list(dict.fromkeys(lines + clauses))


def _agreement(label: str, texts, same: Callable[[str], bool], results: list[tuple[str, int, int]]) -> None:
    """Count the texts on which ``same`` holds; print the first few where it does not."""
    texts = list(texts)
    bad = [t for t in texts if not same(t)]
    results.append((label, len(texts) - len(bad), len(texts)))
    for t in bad[:3]:
        print(f"    differs on {t[:70]!r}", flush=True)


# Where tiktoken_ext.openai_public.gpt2() reads GPT-2's files from (tiktoken pins their sha256).
GPT2_URLS = {
    "vocab.bpe": "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe",
    "encoder.json": "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/encoder.json",
}


def _tiktoken_gpt2():
    """tiktoken's own ``gpt2`` encoding, offline: its download cache is seeded with the ``gpt2-bpe`` files.

    tiktoken checks each cached file against its pinned sha256 (and would try the network on a mismatch,
    which fails here), so this also shows the asset holds exactly OpenAI's files.
    """
    import shutil

    import tiktoken

    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    with tempfile.TemporaryDirectory() as cache:
        for rel, url in GPT2_URLS.items():
            shutil.copyfile(_input("gpt2-bpe", rel), Path(cache) / hashlib.sha1(url.encode()).hexdigest())
        os.environ["TIKTOKEN_CACHE_DIR"] = cache
        try:
            return tiktoken.get_encoding("gpt2")
        finally:
            if old is None:
                del os.environ["TIKTOKEN_CACHE_DIR"]
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = old


def _check_gpt2(tok, results) -> None:
    from bytes2logits.lessons.vocab_files import load_gpt2

    def ids(text: str) -> list[int]:
        return tok.encode(text).ids

    cases = _llama_cpp_cases("gpt-2")
    expected = dict(cases)
    _agreement("llama.cpp ggml-vocab-gpt-2 expected ids", expected, lambda t: ids(t) == expected[t], results)
    lines = _botchan_lines()
    enc = _tiktoken_gpt2()
    _agreement("tiktoken gpt2 encode_ordinary, Botchan lines", lines, lambda t: ids(t) == enc.encode_ordinary(t),
               results)
    engine = load_gpt2()
    _agreement("bytes2logits load_gpt2().encode, Botchan lines", lines, lambda t: ids(t) == engine.encode(t), results)
    _agreement("<|endoftext|> parsed as the special token (tiktoken allowed_special='all')",
               ["Hello<|endoftext|> world", "<|endoftext|>"],
               lambda t: ids(t) == enc.encode(t, allowed_special="all"), results)
    _agreement("decode(encode(line)) == line, Botchan lines", lines, lambda t: tok.decode(ids(t)) == t, results)


def _check_smollm2(tok, results) -> None:
    from bytes2logits.engine.tokenizer import Tokenizer

    engine = Tokenizer.from_gguf(assets.path("smollm2"))

    def ids(text: str) -> list[int]:
        return tok.encode(text).ids

    lines = _botchan_lines()
    _agreement("engine Tokenizer.from_gguf().encode, Botchan lines", lines, lambda t: ids(t) == engine.encode(t),
               results)
    _agreement("engine Tokenizer.from_gguf().encode, llama.cpp gpt-2 test inputs",
               [t for t, _ in _llama_cpp_cases("gpt-2")], lambda t: ids(t) == engine.encode(t), results)
    chat = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    _agreement("engine encode(allowed_special='all'), ChatML prompt with control tokens", [chat],
               lambda t: ids(t) == engine.encode(t, allowed_special="all"), results)
    _agreement("decode(encode(line)) == line, Botchan lines", lines, lambda t: tok.decode(ids(t)) == t, results)


def _check_spm(model_file: str):
    def check(tok, results) -> None:
        import sentencepiece

        sp = sentencepiece.SentencePieceProcessor(model_file=str(_input("sentencepiece-models", model_file)))

        def ids(text: str) -> list[int]:
            return tok.encode(text).ids

        corpora = {"Botchan lines": _botchan_lines(), "Japanese UDHR lines and clauses": _japanese_lines()}
        for label, lines in corpora.items():
            _agreement(f"sentencepiece encode, {label}", lines, lambda t: ids(t) == sp.encode(t), results)
            known = [t for t in lines if sp.unk_id() not in sp.encode(t)]
            _agreement(f"sentencepiece decode, {label} without <unk>", known,
                       lambda t: tok.decode(ids(t)) == sp.decode(sp.encode(t)), results)

    return check


CHECKS = {"gpt2": _check_gpt2, "smollm2": _check_smollm2,
          "unigram-botchan": _check_spm("botchan_en_unigram_1000.model"),
          "unigram-kyoto": _check_spm("kyoto_ja_unigram_8000.model")}


def check(name: str) -> list[tuple[str, int, int]]:
    """Compare file ``name`` (loaded with ``tokenizers``) with its oracles: ``[(what, agreed, total)]``."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(ensure(name)))
    results: list[tuple[str, int, int]] = []
    CHECKS[name](tok, results)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"default: all of {', '.join(RECIPES)}")
    parser.add_argument("--check", action="store_true", help="compare each file's ids with independent oracles")
    args = parser.parse_args(argv)
    failed = False
    for name in args.names or list(RECIPES):
        try:
            path = ensure(name)
        except (KeyError, assets.AssetError) as e:
            print(f"error: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
            return 1
        print(path, flush=True)
        if args.check:
            for what, agreed, total in check(name):
                failed |= agreed != total
                print(f"  {'ok  ' if agreed == total else 'FAIL'} {name}: {what}: {agreed}/{total}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
