"""The registry of labs: which reference objects each task is built from and how many points it is worth.

One table serves the lab build (answer cells are generated from these objects), the grading bridge (a
task's hidden suite is ``tests/hidden/<lab>/test_<task>.py``) and the reference mode of the hidden suites
(the implementation under test is the package itself).

It also says which course folder the kit's commands act on (:func:`course_root`): ``--root DIR``, else the
course folder around the current directory, else the repository the package was installed from.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LABS", "CourseRootError", "Lab", "Task", "command_root", "course_root", "find_lab", "hidden_root",
           "is_course_folder", "lab_of_notebook", "repo_root", "tool_env"]


@dataclass(frozen=True)
class Task:
    """One graded task: an answer cell (``answer_<id>``) and an autograder cell (``<id>``)."""

    id: str
    title: str
    objects: tuple[str, ...]
    points: int


@dataclass(frozen=True)
class Lab:
    """A lab notebook: ``solutions/<name>/<name>.ipynb`` (source) and ``labs/<name>/<name>.ipynb``."""

    name: str
    title: str
    chapter: str
    module: str
    tasks: tuple[Task, ...]
    # Imports and helpers shown (not graded) in the locked set-up cell.
    imports: tuple[str, ...] = ()
    given: tuple[str, ...] = ()
    extra_names: tuple[str, ...] = field(default=())
    # More reference modules, searched after ``module`` for a name (a lab built from several engine stages).
    also: tuple[str, ...] = ()
    # (name, task id): other functions of the package that do a task's work; like the task's own reference,
    # they are stubs in that lab's grading sandbox (kit/redact.py).
    also_answers: tuple[tuple[str, str], ...] = ()

    @property
    def modules(self) -> tuple[str, ...]:
        """Every reference module of the lab, ``module`` first."""
        return (self.module, *self.also)

    @property
    def number(self) -> str:
        return self.name[3:5]

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise KeyError(f"{self.name} has no task {task_id!r}; tasks: {', '.join(t.id for t in self.tasks)}")

    def reference_module(self):
        return importlib.import_module(self.module)

    def reference_object(self, name: str):
        """The reference object ``name``: from ``module``, else from the first of ``also`` that defines it."""
        for module in self.modules:
            mod = importlib.import_module(module)
            if hasattr(mod, name):
                return getattr(mod, name)
        raise AttributeError(f"{self.name}: no reference module ({', '.join(self.modules)}) defines {name!r}")

    def exported_names(self) -> list[str]:
        names = list(self.given) + list(self.extra_names)
        for t in self.tasks:
            names.extend(t.objects)
        return names

    def reference_namespace(self) -> dict:
        return {name: self.reference_object(name) for name in self.exported_names()}

    def source_notebook(self, root: Path | None = None) -> Path:
        """``solutions/<name>/<name>.ipynb`` in ``root`` (default: :func:`course_root`)."""
        return (root or course_root()) / "solutions" / self.name / f"{self.name}.ipynb"

    def release_notebook(self, root: Path | None = None) -> Path:
        """``labs/<name>/<name>.ipynb`` in ``root`` (default: :func:`course_root`)."""
        return (root or course_root()) / "labs" / self.name / f"{self.name}.ipynb"

    @property
    def total_points(self) -> int:
        return sum(t.points for t in self.tasks)


LABS: dict[str, Lab] = {
    lab.name: lab
    for lab in [
        Lab(
            name="lab01_tokenizers",
            title="Lab 01 — byte and char tokenizers, and streaming decode",
            chapter="course/01_the_model_speaks_integers.ipynb",
            module="bytes2logits.lessons.basic",
            imports=("import json", "import operator", "from pathlib import Path"),
            given=("REPLACEMENT", "_as_id"),
            tasks=(
                Task("byte_tokenizer", "A byte tokenizer", ("ByteTokenizer",), 3),
                Task("char_tokenizer", "A char tokenizer with a file format", ("CharTokenizer",), 4),
                Task("stream_decoder", "Streaming decode", ("decode_utf8_prefix", "StreamDecoder"), 3),
            ),
        ),
        Lab(
            name="lab02_words",
            title="Lab 02 — words, <unk>, and what compression costs",
            chapter="course/02_char_word_subword.ipynb",
            module="bytes2logits.lessons.granularity",
            imports=("import re", "from collections import Counter"),
            given=("UNK",),
            tasks=(
                Task("split_words", "Split into words, punctuation and whitespace", ("split_words",), 2),
                Task("word_tokenizer", "A word tokenizer with a capped vocabulary", ("WordTokenizer",), 5),
                Task("metrics", "OOV rate and characters per token", ("oov_rate", "chars_per_token"), 3),
            ),
        ),
        Lab(
            name="lab03_bpe_training",
            title="Lab 03 — training byte-level BPE",
            chapter="course/03_bpe_training.ipynb",
            module="bytes2logits.lessons.bpe",
            imports=("import heapq", "import re", "from collections import Counter, defaultdict",
                     "from collections.abc import Iterable, Sequence",
                     "from bytes2logits.lessons.bpe import build_vocab"),
            given=("PRETOKENIZE_PATTERN", "_PRETOKENIZE", "_check_special_tokens", "_split_on_specials"),
            # The merge stepper's trace is a correct (naive) trainer: wrapped as train_bpe it is not an answer.
            also_answers=(("bpe_trace", "train_bpe"),),
            tasks=(
                Task("count_pieces", "Pre-tokenize and count pieces", ("pretokenize", "count_pieces"), 2),
                Task("train_bpe", "Train BPE merges, fast", ("_merge_in_word", "_reversed_bytes", "train_bpe"), 8),
            ),
        ),
        Lab(
            name="lab04_bpe_encode",
            title="Lab 04 — encoding by merge rank",
            chapter="course/04_merge_priority.ipynb",
            module="bytes2logits.lessons.bpe",
            imports=("import re", "from collections.abc import Iterable, Mapping, Sequence",
                     "from itertools import chain"),
            given=("PRETOKENIZE_PATTERN", "_PRETOKENIZE", "_check_special_tokens"),
            # Encoding by rank, elsewhere in the package: the engine's BPE model and its merge loops, the batch
            # encoder, the chapter view's stepper. Stubs in this task's grading sandbox too.
            also_answers=tuple((name, "bpe_tokenizer") for name in (
                "bpe_merge", "_merge_by_priority", "BPE", "_BatchMerger", "FastBPETokenizer", "merge_steps")),
            tasks=(
                Task("piece_cache", "A cache that computes a missing piece once", ("_PieceCache",), 1),
                Task("bpe_tokenizer", "BPETokenizer: encode by rank, decode, specials", ("BPETokenizer",), 9),
            ),
        ),
        Lab(
            name="lab05_byte_codec",
            title="Lab 05 — the closed byte-level codec",
            chapter="course/05_byte_level_bpe.ipynb",
            module="bytes2logits.lessons.bpe",
            imports=("import re", "from collections import defaultdict",
                     "from collections.abc import Mapping, Sequence",
                     "from bytes2logits.lessons.bpe import BPETokenizer"),
            given=("_check_special_tokens",),
            # The GPT-2 file loader's own printable form of a token does the printable task's work.
            also_answers=(("_printable", "printable"),),
            tasks=(
                Task("printable", "Show byte tokens GPT-2 style", ("bytes_to_unicode", "token_to_printable"), 2),
                Task("codec", "ByteLevelCodec: validate, round trip, trusted specials", ("ByteLevelCodec",), 8),
            ),
        ),
        Lab(
            name="lab06_special_tokens",
            title="Lab 06 — special tokens: structure only from code",
            chapter="course/06_special_tokens.ipynb",
            module="bytes2logits.lessons.specials",
            imports=("import re", "from collections.abc import Iterable, Mapping, Sequence",
                     "from bytes2logits.lessons.bpe import ByteLevelCodec"),
            tasks=(
                Task("find_specials", "The earliest-longest scan", ("find_specials",), 3),
                Task("special_tokenizer", "allowed_special, structural bos/eos, decode, stop ids",
                     ("SpecialTokenizer",), 4),
                Task("chat_and_stops", "ChatML ids built structurally; cutting at a stop token",
                     ("encode_chatml", "cut_at_stop"), 3),
            ),
        ),
        Lab(
            name="lab07_chat_templates",
            title="Lab 07 — chat templates, byte for byte",
            chapter="course/07_chat_templates.ipynb",
            module="bytes2logits.lessons.templates",
            imports=("import json", "import re", "import traceback",
                     "from collections.abc import Mapping, Sequence", "from datetime import datetime",
                     "from typing import Any", "import jinja2", "from jinja2.exceptions import SecurityError",
                     "from jinja2.ext import Extension", "from jinja2.sandbox import ImmutableSandboxedEnvironment",
                     "from bytes2logits.errors import TemplateError"),
            given=("IM_START", "IM_END"),
            # The engine's own renderer does the same work (a wrapper around it renders ChatML and real
            # templates): it is absent from this lab's grading sandbox too (kit/redact.py).
            also_answers=(("ChatTemplate", "render_template"), ("_make_environment", "render_template"),
                          ("_Sandbox", "render_template"), ("_GenerationBlock", "render_template"),
                          ("_template_line", "render_template")),
            tasks=(
                Task("chatml", "ChatML, byte for byte", ("render_chatml",), 3),
                Task("render_template", "A sandboxed renderer whose errors name the line",
                     ("StrictSandbox", "GenerationBlock", "make_environment", "compile_template", "template_line",
                      "render_template"), 5),
                Task("increment", "What a multi-turn chat appends, or a refusal", ("render_increment",), 2),
            ),
        ),
        Lab(
            name="lab08_vocab_size",
            title="Lab 08 — vocabulary size: compression against parameters",
            chapter="course/08_vocabulary_size.ipynb",
            module="bytes2logits.lessons.vocabsize",
            imports=("import math", "from collections.abc import Sequence",
                     "from bytes2logits.lessons.bpe import FastBPETokenizer, build_vocab"),
            given=("_positive_int",),
            tasks=(
                Task("curve", "One training run, every size: the compression curve",
                     ("vocab_prefix", "compression_curve"), 4),
                Task("cost", "What the vocabulary costs: parameters and KV cache",
                     ("embedding_params", "embedding_fraction", "kv_cache_bytes_per_token"), 3),
                Task("choose", "Diminishing returns, and choosing V for a budget",
                     ("_check_curve", "marginal_gains", "choose_vocab_size"), 3),
            ),
        ),
        Lab(
            name="lab09_pitfalls",
            title="Lab 09 — digits, fertility and a glitch-token audit",
            chapter="course/09_pitfalls.ipynb",
            module="bytes2logits.lessons.pitfalls",
            imports=("import math", "import unicodedata", "from itertools import groupby",
                     "from collections.abc import Callable, Collection, Iterable, Mapping, Sequence",
                     "from typing import NamedTuple"),
            given=("AUDIT_CLASSES", "Fertility"),
            tasks=(
                Task("digits", "A digit-splitting pre-tokenizer step", ("split_digits",), 3),
                Task("fertility", "Fertility and fertility relative to English",
                     ("fertility", "relative_fertility"), 3),
                Task("audit", "A round-trip audit of a vocabulary", ("audit_vocab",), 4),
            ),
        ),
        Lab(
            name="lab10_image_patches",
            title="Lab 10 — image patches as tokens",
            chapter="course/10_image_patches.ipynb",
            module="bytes2logits.lessons.patches",
            imports=("import operator", "import numpy as np"),
            given=("_check_int",),
            tasks=(
                Task("patchify", "Cut an image into patches", ("patch_grid", "pad_to_multiple", "patchify"), 3),
                Task("unpatchify", "Put the patches back", ("unpatchify",), 2),
                Task("patch_embedding", "Project patches and add 2-D positions", ("PatchEmbedding",), 3),
                Task("placeholders", "Expand <image> placeholders", ("expand_placeholders",), 2),
            ),
        ),
        Lab(
            name="lab11_tokenizer_json",
            title="Lab 11 — pre-tokenizers and a tokenizer.json BPE loader",
            chapter="course/11_pretokenizers_and_tokenizer_json.ipynb",
            module="bytes2logits.engine.pretokenizers",
            also=("bytes2logits.engine.tokenizer_json",),
            imports=("from collections.abc import Mapping", "from typing import Any", "import regex",
                     "from bytes2logits.errors import TokenizerError",
                     "from bytes2logits.engine.models import BPE", "from bytes2logits.text import BYTE_TO_CHAR"),
            given=("GPT2", "split", "Span", "_fail", "_obj", "_get", "_vocab_dict", "_ordered"),
            tasks=(
                Task("split_spans", "A Split step's five behaviors", ("split_spans",), 3),
                Task("byte_level", "The ByteLevel pre-tokenizer", ("byte_level_map", "byte_level_pieces"), 3),
                Task("bpe_loader", "A BPE model section that refuses what it cannot do",
                     ("_merges", "bpe_from_spec"), 4),
            ),
        ),
        Lab(
            name="lab12_wordpiece_unigram",
            title="Lab 12 — BERT's WordPiece and Unigram's Viterbi",
            chapter="course/12_wordpiece_unigram_normalizers_decoders.ipynb",
            module="bytes2logits.engine.models",
            also=("bytes2logits.engine.normalizers", "bytes2logits.engine.pretokenizers"),
            imports=("import unicodedata", "from collections.abc import Mapping",
                     "from bytes2logits.errors import TokenizerError"),
            given=("Token", "Model", "is_bert_control", "is_chinese_char", "is_white_space",
                   "is_bert_punctuation"),
            tasks=(
                Task("bert", "BERT's normalizer and pre-tokenizer", ("bert_normalize", "bert_words"), 3),
                Task("wordpiece", "WordPiece: longest match first", ("WordPiece",), 3),
                Task("viterbi", "Unigram: the best segmentation, and its tie rule", ("viterbi",), 4),
            ),
        ),
        Lab(
            name="lab13_gguf_reader",
            title="Lab 13 — a GGUF reader that no file can fool",
            chapter="course/13_the_gguf_format.ipynb",
            module="bytes2logits.engine.gguf",
            imports=("import mmap", "import os", "import struct", "from collections.abc import Iterator, Mapping",
                     "from typing import Any", "import numpy as np", "from bytes2logits.errors import GGUFError",
                     "from bytes2logits.engine.gguf import (DEFAULT_ALIGNMENT, MAGIC, MAX_ARRAY_NESTING, MAX_DIMS,\n"
                     "    MAX_NESTED_ARRAYS, SUPPORTED_VERSIONS, GGMLType, RawTensorInfo, TensorInfo, ValueType,\n"
                     "    _SCALAR, _TENSOR_DTYPES, tensor_nbytes)"),
            given=("GGUFReader",),
            tasks=(
                Task("header", "The header, read with bounds checks", ("Cursor", "read_header"), 2),
                Task("metadata", "Typed metadata, nested arrays included",
                     ("read_value_type", "read_value", "read_array", "read_string_array", "read_metadata"), 3),
                Task("tensor_infos", "Tensor infos, and where their data lies",
                     ("read_alignment", "read_tensor_infos", "place_tensors"), 3),
                Task("views", "Tensor data as views into the file, never copies", ("tensor_array",), 2),
            ),
        ),
        Lab(
            name="lab14_gguf_tokenizer",
            title="Lab 14 — a tokenizer and a chat prompt from GGUF metadata",
            chapter="course/14_tokenizer_from_gguf.ipynb",
            module="bytes2logits.engine.tokenizer",
            also=("bytes2logits.engine.session",),
            imports=("import re", "import sys", "from collections.abc import Mapping",
                     "from bytes2logits.errors import TemplateError, TokenizerError",
                     "from bytes2logits.engine.chat import ChatTemplate",
                     "from bytes2logits.engine.gguf import GGUFReader",
                     "from bytes2logits.engine.tokenizer import SPM_SPACE, STEPS, Tokenizer, TokenType, _ASCII_SPACE"),
            given=("_BYTE_TOKEN", "tokenizer_from_gguf"),
            tasks=(
                Task("merges", "Merge ranks from tokenizer.ggml.merges", ("load_merges",), 2),
                Task("token_bytes", "What each token type decodes to, byte fallback included",
                     ("token_bytes",), 2),
                Task("specials", "The earliest-longest scan for token types 3 and 4",
                     ("special_pattern", "split_specials"), 3),
                Task("chat_prompt", "The template from the file, and prompt ids no message can forge",
                     ("chat_template_of", "message_spans", "chat_prompt_ids"), 3),
            ),
        ),
        Lab(
            name="lab15_dequantization",
            title="Lab 15 — dequantization kernels and a Q8_0 quantizer",
            chapter="course/15_quantization.ipynb",
            module="bytes2logits.engine.quants",
            imports=("import numpy as np", "from bytes2logits.errors import GGUFError",
                     "from bytes2logits.engine.gguf import GGML_BLOCK_SIZES, GGMLType",
                     "from bytes2logits.engine.quants import _CHUNK_VALUES, _F16, _F32, _U16, DEQUANTIZE_TYPES"),
            given=("_ggml_type", "_as_uint8", "_kernel", "dequantize", "_fp16_bytes", "_inverse"),
            tasks=(
                Task("legacy", "Q8_0, Q4_0 and Q4_1: one scale (and a min) per 32 values",
                     ("_half", "_nibbles", "dequant_q8_0", "dequant_q4_0", "dequant_q4_1"), 3),
                Task("q4_k", "Q4_K: super-blocks with 6-bit scales and mins",
                     ("_scale_min_k4", "_four_bit_k", "dequant_q4_k"), 3),
                Task("q6_k", "Q6_K: 6-bit quants from two bit planes", ("_crumbs", "dequant_q6_k"), 2),
                Task("quantize", "A Q8_0 quantizer, bit for bit ggml's", ("_round_half_away", "quantize_q8_0"), 2),
            ),
        ),
        Lab(
            name="lab16_forward_pass",
            title="Lab 16 — the transformer forward pass",
            chapter="course/16_the_forward_pass.ipynb",
            module="bytes2logits.engine.ops",
            also=("bytes2logits.engine.model",),
            imports=("import os", "import time", "from collections.abc import Sequence", "import numpy as np",
                     "from bytes2logits.errors import GGUFError",
                     "from bytes2logits.engine.checks import check_context, token_id_array",
                     "from bytes2logits.engine.gguf import GGUFReader",
                     "from bytes2logits.engine.quants import dequantize",
                     "from bytes2logits.engine.ops import _QUERY_BLOCK, F32, Linear, Numerics",
                     "from bytes2logits.engine.model import (ARCHITECTURES, NUMERICS, Dequantizer, Hyperparameters,\n"
                     "    WeightTransform, _Layer)"),
            # Model is given as source, not imported: its forward method then calls the notebook's `forward`
            # (an imported Model would call the package's, and `model.forward(...)` would be an answer).
            given=("_exact_linear", "exact_numerics", "Model"),
            tasks=(
                Task("norms", "RMSNorm and SwiGLU", ("rms_norm", "swiglu"), 2),
                Task("rope", "Rotary position embeddings: adjacent pairs and NEOX halves",
                     ("rope_theta", "rope_angles", "rope_pairs", "apply_rope"), 2),
                Task("attention", "Causal grouped-query attention over the KV cache", ("causal_mask", "attention"), 3),
                Task("forward", "One transformer block, then the whole forward pass",
                     ("transformer_block", "forward"), 3),
            ),
        ),
        Lab(
            name="lab17_generation",
            title="Lab 17 — the generation loop",
            chapter="course/17_generation.ipynb",
            module="bytes2logits.engine.generate",
            # Annotations stay strings (as in the engine module): Generation's refer to Sampler, defined later.
            imports=("from __future__ import annotations", "import math", "import time",
                     "from collections.abc import Iterable, Iterator, Sequence",
                     "import numpy as np", "from bytes2logits.text import decode_utf8_prefix",
                     "from bytes2logits.engine.checks import check_context, token_id_array",
                     "from bytes2logits.engine.lookup import Drafter, LookupConfig, choose_with_draft",
                     "from bytes2logits.engine.generate import _TOP_P_FIRST_TRY"),
            # Generation is given as source, not imported: its _run calls the notebook's `generation_loop` by
            # name (an imported Generation would run the package's loop), and `generate` creates it.
            given=("_real", "Generation", "generate"),
            tasks=(
                Task("stages", "The sampler's stages: softmax, repetition penalty, top-k, top-p, min-p",
                     ("softmax", "_descending_order", "_top_positions", "apply_repetition_penalty",
                      "top_k_filter", "top_p_filter", "min_p_filter"), 3),
                Task("sampler", "A seeded Sampler in llama.cpp's order", ("Sampler",), 2),
                Task("stream", "Stop strings on the byte stream, and the streaming decoder",
                     ("_held_back", "_first_stop", "TextStream"), 2),
                Task("loop", "The KV-cached generation loop", ("generation_loop",), 3),
            ),
        ),
    ]
}


def find_lab(name_or_path: str | os.PathLike) -> Lab:
    """The lab a name (``lab01``, ``lab1``, ``01`` or ``lab01_tokenizers``) or a notebook path belongs to.

    For a path, the notebook's own graded cells decide (:func:`lab_of_notebook`), then its folder's name,
    then its file name: a copy called ``my_attempt.ipynb`` in ``labs/lab02_words/`` is lab 02, and a lab 01
    notebook renamed ``lab02_mixup.ipynb`` is still lab 01.
    """
    path = Path(name_or_path)
    if path.suffix == ".ipynb" and path.is_file():
        lab = lab_of_notebook(path)
        if lab is not None:
            return lab
        for part in (path.parent.name, path.name):
            lab = _lab_named(part)
            if lab is not None:
                return lab
        raise KeyError(f"{str(name_or_path)!r} is not a lab notebook: none of its cells is a lab's graded cell, "
                       f"and neither its folder nor its name names a lab; say which with --lab (labs: "
                       f"{', '.join(LABS)})")
    lab = _lab_named(path.name)
    if lab is None:
        raise KeyError(f"no lab matches {str(name_or_path)!r}; labs: {', '.join(LABS)} (lab01 works too)")
    return lab


def _lab_named(text: str) -> Lab | None:
    """The lab whose number starts ``text`` (``lab01...``, ``Lab1``, ``01``), or whose full name it holds."""
    low = text.lower()
    for lab in LABS.values():
        if lab.name in low:
            return lab
    m = re.search(r"lab[ _-]?(\d{1,2})(?!\d)", low) or re.match(r"(\d{1,2})(?!\d)", low)
    if m:
        number = f"{int(m.group(1)):02d}"
        for lab in LABS.values():
            if lab.number == number:
                return lab
    return None


def lab_of_notebook(path: str | os.PathLike) -> Lab | None:
    """The lab whose graded cells the notebook holds (nbgrader ``grade_id`` metadata), or None.

    Every task id is unique across the course, so a notebook's answer and autograder cells name its lab
    whatever the file is called. A notebook holding cells of two labs is refused.
    """
    import json

    try:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
        ids = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.get("cells", [])}
    except (OSError, ValueError, AttributeError, TypeError):
        return None
    ids = {i.removeprefix("answer_") for i in ids if isinstance(i, str)}
    hits = [lab for lab in LABS.values() if ids & {t.id for t in lab.tasks}]
    if len(hits) > 1:
        raise KeyError(f"{Path(path).name} holds graded cells of several labs ({', '.join(h.name for h in hits)}); "
                       "grade one lab per notebook")
    return hits[0] if hits else None


class CourseRootError(RuntimeError):
    """No course folder to act on; the message says where it looked and what to do."""


#: What makes a folder a course: nbgrader's configuration and the instructor's source notebooks.
COURSE_MARKERS = ("nbgrader_config.py", "solutions")

# The installed repository the fallback of course_root() was announced for (said once per process).
_ANNOUNCED: set[Path] = set()


def is_course_folder(path: str | os.PathLike) -> bool:
    """True when ``path`` holds ``nbgrader_config.py`` and a ``solutions/`` folder."""
    path = Path(path)
    return (path / "nbgrader_config.py").is_file() and (path / "solutions").is_dir()


def repo_root() -> Path:
    """The repository the package is installed from (editable install), whatever the current folder.

    Commands act on :func:`course_root`; this is for the repository's own files (tools, fixtures) and the
    last resort of that rule.
    """
    here = Path(__file__).resolve()
    for parent in here.parents:
        if is_course_folder(parent):
            return parent
    raise CourseRootError("the package was not installed from a course repository (no folder above "
                          f"{here.parent} holds nbgrader_config.py and solutions/)")


def course_root(explicit: str | os.PathLike | None = None, *, cwd: str | os.PathLike | None = None) -> Path:
    """The course folder a command acts on. One rule for every command of the kit:

    1. ``explicit`` (a command's ``--root DIR``), or the environment's ``BYTES2LOGITS_ROOT`` (the same for a
       whole process tree), or ``BYTES2LOGITS_COURSE_ROOT`` (nbgrader's course root, exported by
       ``nbgrader_config.py`` so that the kit's code inside an nbgrader run agrees with nbgrader); it must be
       a course folder;
    2. else the first of the current folder (``cwd``) and its parents that holds ``nbgrader_config.py`` and
       ``solutions/`` — the folder bare ``nbgrader`` would use;
    3. else, for a self-paced learner running from anywhere, the repository the package is installed from,
       said once on stderr.

    Raises :class:`CourseRootError` (a ``RuntimeError``) naming the folder and what it lacks.
    """
    for value, source in ((explicit, "--root"), (os.environ.get("BYTES2LOGITS_ROOT"), "BYTES2LOGITS_ROOT"),
                          (os.environ.get("BYTES2LOGITS_COURSE_ROOT"), "BYTES2LOGITS_COURSE_ROOT")):
        if value:
            root = Path(value).expanduser().resolve()
            missing = [m for m in COURSE_MARKERS if not (root / m).exists()]
            if not root.is_dir() or missing:
                what = "does not exist" if not root.exists() else f"has no {' and no '.join(missing)}"
                raise CourseRootError(f"{source} {value}: not a course folder ({root} {what}; a course folder "
                                      "holds nbgrader_config.py and solutions/)")
            return root
    here = Path(cwd or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if is_course_folder(folder):
            return folder
    try:
        installed = repo_root()
    except CourseRootError as e:
        raise CourseRootError(f"no course folder: neither {here} nor a folder above it holds nbgrader_config.py "
                              f"and solutions/, and {e.args[0]}; run the command inside the course folder, or "
                              "give --root DIR") from None
    if installed not in _ANNOUNCED:
        _ANNOUNCED.add(installed)
        print(f"note: {here} is not inside a course folder; using the course installed with the package, "
              f"{installed} (run inside a course folder, or give --root DIR, to use another)", file=sys.stderr)
    return installed


def command_root(explicit: str | os.PathLike | None = None) -> Path:
    """:func:`course_root` for a command, exported as ``BYTES2LOGITS_ROOT``: everything the command then
    runs, in its own process (defaults such as :meth:`Lab.source_notebook`) or in a subprocess (nbgrader, the
    trusted grader), acts on the same course."""
    root = course_root(explicit)
    os.environ["BYTES2LOGITS_ROOT"] = str(root)
    return root


def hidden_root() -> Path:
    """Where the hidden suites live: ``$BYTES2LOGITS_HIDDEN_TESTS``, else ``tests/hidden`` of the course
    root (:func:`course_root`) when it has them, else those of the installed repository (a course copy that
    holds only its configuration and solutions, as an instructor's grading folder may)."""
    env = os.environ.get("BYTES2LOGITS_HIDDEN_TESTS")
    if env:
        return Path(env)
    own = course_root() / "tests" / "hidden"
    return own if own.is_dir() else repo_root() / "tests" / "hidden"


def tool_env(**extra: str) -> dict:
    """Environment for running the course's tools in a subprocess.

    nbgrader runs helper executables (``alembic``) by name, so the folder of this interpreter's scripts
    must be on PATH even when the virtual environment was not activated.
    """
    bindir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **extra}
    if bindir not in path.split(os.pathsep):
        env["PATH"] = bindir + os.pathsep + path
    return env
