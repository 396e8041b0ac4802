"""Write the expected renderings that lab 07's hidden suites compare against, using transformers as the oracle.

The hidden suites of lab 07 (``tests/hidden/lab07_chat_templates/``) check a learner's chat-template
renderer byte for byte on real templates. Their expected strings must come from a renderer nobody in this
project wrote, so they are produced here by Hugging Face ``transformers``
(``transformers.utils.chat_template_utils.render_jinja_template``, what
``tokenizer.apply_chat_template(..., tokenize=False)`` calls), and committed as one JSON file. The suites read
that file and never import transformers, which is not installed where labs are graded.

Inputs (no network): the real templates that ship in llama.cpp's source distribution (asset
``llama-cpp-models``, folder ``templates/``), SmolLM2's own ``tokenizer.chat_template`` read from its GGUF
(asset ``smollm2``), and the plain ChatML template as Hugging Face documents it.

The fixture holds

* ``templates``: name -> Jinja source, origin, and the model's BOS/EOS texts;
* ``conversations``: name -> messages;
* ``renders``: template x conversation x settings -> the expected text, or the refusal (``error``, and the
  template ``line`` of the ``raise_exception`` call, found by searching the source for its message);
* ``chatml``: conversation x ``add_generation_prompt`` x default system message -> the expected ChatML, from
  rendering the plain ChatML template (no default) or SmolLM2's / Qwen2.5's template (which insert one);
* ``increments``: template x (history, new messages) -> the text that turns the rendering of the history
  (without the generation prompt) into the rendering of the whole conversation (with it), or
  ``diverge_at``, the first character where the first is not a prefix of the second;
* ``sweep``: EVERY template in llama.cpp's ``models/templates/`` (file name -> sha256 of its source, the
  context it was rendered with, whether it uses ``{% generation %}``), each rendered on a few conversations
  (system, user and assistant turns, with and without the generation prompt). The sources are not copied:
  the suites read them from the asset and check the sha256. ``tools`` are passed only to a template that
  transformers cannot render without them (and firefunction-v2 gets the ``functions`` and ``datetime``
  strings it reads). A template that transformers refuses on every case is listed under ``refused`` with
  its error. ``strftime_now`` is frozen at ``SWEEP_DATE``: a case that called it lists under ``dates`` each
  format and the text it gave, which a suite replaces by today's text for that format before comparing.

Run it from the repository root with the project's environment (transformers installed)::

    python tools/make_template_fixtures.py          # writes tests/hidden/lab07_chat_templates/template_fixtures.json
    python tools/make_template_fixtures.py --check  # exit 1 if the committed file differs from a fresh run

It is deterministic: a rerun with the same transformers and jinja2 rewrites the same bytes.
"""

from __future__ import annotations

import argparse
import copy
import datetime as _datetime
import hashlib
import json
import re
import sys
from pathlib import Path

import jinja2
import transformers
import transformers.utils.chat_template_utils as chat_template_utils
from transformers.utils.chat_template_utils import render_jinja_template

from bytes2logits import assets
from bytes2logits.engine.gguf import GGUFReader

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "hidden" / "lab07_chat_templates" / "template_fixtures.json"

# The ChatML template as Hugging Face's chat-template guide writes it.
CHATML = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
QWEN25_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

# name -> (file in llama.cpp's models/templates/ or a special origin, bos_token, eos_token)
TEMPLATES = {
    "chatml": ("Hugging Face chat-template guide", "", "<|im_end|>"),
    "smollm2": ("SmolLM2-135M-Instruct GGUF tokenizer.chat_template", "<|im_start|>", "<|im_end|>"),
    "qwen2.5": ("Qwen-Qwen2.5-7B-Instruct.jinja", "", "<|im_end|>"),
    "qwen3": ("Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>"),
    "llama3.1": ("meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"),
    "mistral-nemo": ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", "</s>"),
    "gemma2": ("google-gemma-2-2b-it.jinja", "<bos>", "<eos>"),
    "smollm3": ("HuggingFaceTB-SmolLM3-3B.jinja", "", "<|im_end|>"),
    "phi3.5": ("microsoft-Phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>"),
    "deepseek-r1-qwen": ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "<｜begin▁of▁sentence｜>",
                         "<｜end▁of▁sentence｜>"),
}

SYSTEM = {"role": "system", "content": "You are a pirate. Answer in one sentence."}
Q1 = {"role": "user", "content": "What is 2 + 2?"}
A1 = {"role": "assistant", "content": "2 + 2 = 4."}
Q2 = {"role": "user", "content": "And 3 + 3?"}
CONVERSATIONS = {
    "user_only": [{"role": "user", "content": "Hello!"}],
    "system_user": [SYSTEM, Q1],
    "multi_turn": [Q1, A1, Q2],
    "system_multi_turn": [SYSTEM, Q1, A1, Q2],
    "training_example": [Q1, A1],
    "whitespace_unicode": [
        {"role": "user", "content": "  Bonjour !\n\n日本語で — 😀 <b>&amp;</b> \"quoted\" \\ "},
        {"role": "assistant", "content": "\n  Sure: «ok»  \n"},
        {"role": "user", "content": "\tand a tab\r\n"},
    ],
    "think_inline": [Q1, {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\n4"}, Q2],
    "reasoning_field": [Q1, {"role": "assistant", "content": "4", "reasoning_content": "Two plus two is four."}],
}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current temperature in °C for a city, e.g. Zürich.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city <name> & country"}},
            "required": ["city"],
        },
    },
}
# extra settings per template, on top of add_generation_prompt True/False for every conversation
EXTRA = {
    "qwen3": [{"enable_thinking": False}],
    "smollm3": [{"enable_thinking": False}],
    "deepseek-r1-qwen": [{"enable_thinking": True}],
}
TOOL_TEMPLATES = ["qwen2.5", "qwen3", "llama3.1"]
# SmolLM3's default system prompt is 1.7 KB: render it on fewer conversations to keep the file small
ONLY = {"smollm3": ["user_only", "system_user", "multi_turn", "think_inline"]}
TOOL_CONVERSATION = "tools_weather"
CONVERSATIONS[TOOL_CONVERSATION] = [{"role": "user", "content": "How warm is it in Zürich?"}]

# (history conversation or literal list, new messages) for render_increment
INCREMENTS = [
    ("training_example", [Q2]),
    ([SYSTEM, Q1, A1], [Q2]),
    ([], [Q1]),
    ([Q1], [A1, Q2]),
    ([SYSTEM, Q1], [A1, Q2]),
    ("think_inline_history", [Q2]),
    ("whitespace_unicode", [A1, Q2]),
]
THINK_HISTORY = [Q1, {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\n4"}]

# The sweep over every real template: (conversation, add_generation_prompt) cases, the special-token texts
# (placeholders: llama.cpp's folder holds templates, not their tokens), and the frozen date of strftime_now.
SWEEP_CASES = [("user_only", True), ("system_multi_turn", True),
               ("system_multi_turn", False), ("training_example", False)]
SWEEP_SPECIAL = {"bos_token": "<|test_bos|>", "eos_token": "<|test_eos|>"}
SWEEP_CONTEXT = {  # variables a template reads that are not transformers' standard ones
    "fireworks-ai-llama-3-firefunction-v2.jinja": {"functions": json.dumps([WEATHER_TOOL["function"]], indent=2),
                                                   "datetime": "1999-12-31"},
}
SWEEP_DATE = (1999, 12, 31, 12, 0, 0)
GENERATION_TAG = re.compile(r"\{%-?\s*generation\s*-?%\}")  # the test transformers uses for the tag


class _FrozenClock(_datetime.datetime):
    """transformers' strftime_now calls ``datetime.now().strftime(format)``: answer with SWEEP_DATE, and note
    each format asked for, so that a suite can put today's date in its place."""

    used: dict[str, str] = {}

    @classmethod
    def now(cls, tz=None):  # noqa: ARG003 - same signature as datetime.now
        return cls(*SWEEP_DATE)

    def strftime(self, format):  # noqa: A002 - datetime's own parameter name
        text = super().strftime(format)
        _FrozenClock.used[format] = text
        return text


def template_sources() -> dict[str, str]:
    folder = assets.path("llama-cpp-models") / "templates"
    sources = {}
    for name, (origin, _, _) in TEMPLATES.items():
        if name == "chatml":
            sources[name] = CHATML
        elif name == "smollm2":
            with GGUFReader(assets.path("smollm2")) as reader:
                sources[name] = reader.metadata["tokenizer.chat_template"]
        else:
            sources[name] = (folder / origin).read_text(encoding="utf-8")
    assert SMOLLM2_SYSTEM in sources["smollm2"] and QWEN25_SYSTEM in sources["qwen2.5"]
    return sources


def oracle(source: str, messages: list[dict], kwargs: dict) -> str:
    """What transformers renders (apply_chat_template(messages, tokenize=False, **kwargs) without a tokenizer)."""
    kwargs = dict(kwargs)
    rendered, _ = render_jinja_template(
        conversations=[copy.deepcopy(messages)],
        tools=kwargs.pop("tools", None),
        documents=kwargs.pop("documents", None),
        chat_template=source,
        add_generation_prompt=kwargs.pop("add_generation_prompt", False),
        **kwargs,
    )
    return rendered[0]


def refusal(source: str, exc: Exception) -> dict:
    """An expected refusal: the message, and the line of the raise_exception call that carries it."""
    message = str(exc)
    lines = [n for n, text in enumerate(source.replace("\r\n", "\n").split("\n"), 1) if message in text]
    entry = {"error": message}
    if type(exc) is jinja2.exceptions.TemplateError and len(lines) == 1:  # raised by raise_exception(...)
        entry["line"] = lines[0]
    return entry


def sweep() -> dict:
    """Every real template in llama.cpp's folder, rendered by transformers on SWEEP_CASES."""
    folder = assets.path("llama-cpp-models") / "templates"
    templates, refused = {}, {}
    for path in sorted(folder.glob("*.jinja")):
        source = path.read_text(encoding="utf-8")
        context = {**SWEEP_SPECIAL, **SWEEP_CONTEXT.get(path.name, {})}
        for extra in ({}, {"tools": [WEATHER_TOOL]}):  # tools only where the template cannot do without them
            cases = []
            for conversation, generation in SWEEP_CASES:
                kwargs = {**context, **extra, "add_generation_prompt": generation}
                entry = {"conversation": conversation, "add_generation_prompt": generation}
                _FrozenClock.used = {}
                try:
                    entry["expected"] = oracle(source, CONVERSATIONS[conversation], kwargs)
                except Exception as exc:  # noqa: BLE001 - a refusal is an expected outcome too
                    entry.update(refusal(source, exc))
                if _FrozenClock.used:
                    entry["dates"] = dict(sorted(_FrozenClock.used.items()))
                cases.append(entry)
            if any("expected" in c for c in cases):
                break
        else:
            refused[path.name] = cases[0]["error"]
            continue
        templates[path.name] = {
            "sha256": hashlib.sha256(source.encode("utf-8")).hexdigest(),
            "context": {**context, **extra},
            "generation_tag": bool(GENERATION_TAG.search(source)),
            "cases": cases,
        }
    return {"asset": "llama-cpp-models", "folder": "templates", "date": _datetime.date(*SWEEP_DATE[:3]).isoformat(),
            "count": len(templates) + len(refused), "templates": templates, "refused": refused}


def first_difference(a: str, b: str) -> int:
    """The first index where ``a`` and ``b`` differ (the shorter one's length if one is a prefix of the other)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def build() -> dict:
    chat_template_utils.datetime = _FrozenClock  # every strftime_now below answers with SWEEP_DATE
    sources = template_sources()
    special = {name: {"bos_token": bos, "eos_token": eos} for name, (_, bos, eos) in TEMPLATES.items()}
    renders = []
    for name, source in sources.items():
        settings = [{"add_generation_prompt": g} for g in (True, False)]
        settings += [{"add_generation_prompt": True, **extra} for extra in EXTRA.get(name, [])]
        conversations = [c for c in ONLY.get(name, CONVERSATIONS) if c != TOOL_CONVERSATION]
        cases = [(c, s) for c in conversations for s in settings]
        if name in TOOL_TEMPLATES:
            cases.append((TOOL_CONVERSATION, {"add_generation_prompt": True, "tools": [WEATHER_TOOL]}))
        for conversation, setting in cases:
            kwargs = {**special[name], **setting}
            entry = {"template": name, "conversation": conversation, "kwargs": kwargs}
            try:
                entry["expected"] = oracle(source, CONVERSATIONS[conversation], kwargs)
            except Exception as exc:  # noqa: BLE001 - a refusal is an expected outcome too
                entry.update(refusal(source, exc))
            renders.append(entry)

    chatml = []
    for conversation, messages in CONVERSATIONS.items():
        for generation in (True, False):
            for default, oracle_template in ((None, "chatml"), (SMOLLM2_SYSTEM, "smollm2"), (QWEN25_SYSTEM, "qwen2.5")):
                chatml.append({
                    "conversation": conversation, "add_generation_prompt": generation, "default_system": default,
                    "oracle_template": oracle_template,
                    "expected": oracle(sources[oracle_template], messages,
                                       {**special[oracle_template], "add_generation_prompt": generation}),
                })

    increments = []
    for name, source in sources.items():
        for history, new in INCREMENTS:
            history = THINK_HISTORY if history == "think_inline_history" else history
            history = CONVERSATIONS[history] if isinstance(history, str) else history
            entry = {"template": name, "history": history, "new": new, "kwargs": special[name]}
            try:
                before = oracle(source, history, {**special[name], "add_generation_prompt": False}) if history else ""
                after = oracle(source, history + new, {**special[name], "add_generation_prompt": True})
            except Exception as exc:  # noqa: BLE001
                entry.update(refusal(source, exc))
            else:
                if after.startswith(before):
                    entry["expected"] = after[len(before):]
                else:
                    entry["diverge_at"] = first_difference(before, after)
            increments.append(entry)

    return {
        "about": "Expected chat-template renderings for lab 07, written by tools/make_template_fixtures.py with "
                 "transformers' render_jinja_template as the oracle. Do not edit by hand.",
        "oracle": {"transformers": transformers.__version__, "jinja2": jinja2.__version__},
        "templates": {name: {"source": sources[name], "origin": TEMPLATES[name][0], **special[name]}
                      for name in TEMPLATES},
        "conversations": CONVERSATIONS,
        "renders": renders,
        "chatml": chatml,
        "increments": increments,
        "sweep": sweep(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    args = parser.parse_args(argv)
    text = json.dumps(build(), ensure_ascii=False, indent=1) + "\n"
    if args.check:
        same = OUT.is_file() and OUT.read_text(encoding="utf-8") == text
        print(f"{OUT.relative_to(ROOT)}: {'up to date' if same else 'DIFFERS from a fresh run'}")
        return 0 if same else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    data = json.loads(text)
    refusals = sum("error" in r for r in data["renders"])
    diverging = sum("diverge_at" in r for r in data["increments"])
    swept = data["sweep"]
    print(f"wrote {OUT.relative_to(ROOT)} ({len(text.encode()) / 1024:.0f} KB): {len(data['renders'])} renders "
          f"({refusals} refusals), {len(data['chatml'])} ChatML cases, {len(data['increments'])} increments "
          f"({diverging} not a prefix); sweep: {swept['count']} templates in the asset, {len(swept['templates'])} "
          f"rendered by transformers ({sum(len(t['cases']) for t in swept['templates'].values())} cases), "
          f"{len(swept['refused'])} refused by it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
