"""Tests for bytes2logits.lessons.templates, lab 07's reference: agreement with transformers on llama.cpp's 70 real
templates (every case of the committed fixture, and transformers itself as a live oracle), agreement with the
engine's hardened renderer, ``{% generation %}``, the error messages, and the committed fixture.

The lab's hidden suites (tests/hidden/lab07_chat_templates) also run against this module in plain pytest, on
one case per real template; the test of the full sweep here renders every case of the fixture.
"""

from __future__ import annotations

import copy
import doctest
import hashlib
import json
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import jinja2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bytes2logits import assets
from bytes2logits.engine.chat import CHATML_TEMPLATE, ChatTemplate
from bytes2logits.errors import TemplateError
from bytes2logits.lessons import templates
from bytes2logits.lessons.templates import (
    compile_template,
    make_environment,
    render_chatml,
    render_increment,
    render_template,
    template_line,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "hidden" / "lab07_chat_templates" / "template_fixtures.json"
BOS, EOS = "<|test_bos|>", "<|test_eos|>"
CONVERSATIONS = {
    "system_user": [{"role": "system", "content": "You are a helpful assistant."},
                    {"role": "user", "content": "What is 2 + 2?"}],
    "multi_turn": [{"role": "user", "content": "Hello!"}, {"role": "assistant", "content": "Hi! How can I help?"},
                   {"role": "user", "content": "Tell me a joke."}],
    "non_ascii": [{"role": "user", "content": '日本語で "こんにちは" と言って \\ 😀 — ok?'}],
}


def _templates() -> dict[str, str]:
    try:
        folder = assets.path("llama-cpp-models") / "templates"
    except assets.AssetError:
        return {}
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.jinja"))}


TEMPLATES = _templates()
CONVERSATIONS_FIXTURE = json.loads(FIXTURE.read_text(encoding="utf-8"))["conversations"]
# Templates with a {% generation %} block (training masks), found with the pattern transformers uses.
GENERATION_BLOCK = {name for name, source in TEMPLATES.items() if re.search(r"\{%-?\s*generation\s*-?%\}", source)}


def _outcome(render):
    try:
        return "ok", render()
    except Exception as exc:  # noqa: BLE001 - any failure is an outcome to compare
        return "raised", exc


@pytest.mark.skipif(not TEMPLATES, reason="llama-cpp-models asset not fetched")
@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_matches_transformers_on_real_templates(name):
    """Byte-identical to transformers on every real template and conversation, or both refuse."""
    pytest.importorskip("transformers")
    from transformers.utils.chat_template_utils import render_jinja_template

    source = TEMPLATES[name]
    # the committed fixture's sweep covers every template on four cases; these add other conversations
    for conversation, generation in (("system_user", True), ("multi_turn", False), ("non_ascii", True)):
        messages = CONVERSATIONS[conversation]
        theirs = _outcome(lambda: render_jinja_template(
            conversations=[copy.deepcopy(messages)], chat_template=source, add_generation_prompt=generation,
            bos_token=BOS, eos_token=EOS)[0][0])
        ours = _outcome(lambda: render_template(source, copy.deepcopy(messages), add_generation_prompt=generation,
                                                bos_token=BOS, eos_token=EOS))
        assert ours[0] == theirs[0], f"{conversation}: ours {ours[0]}, transformers {theirs[0]}: {ours[1]!r:.200}"
        if ours[0] == "ok":
            assert ours[1] == theirs[1], f"{conversation}, generation={generation}"
        else:
            assert isinstance(ours[1], TemplateError)


@pytest.mark.skipif(not TEMPLATES, reason="llama-cpp-models asset not fetched")
def test_agrees_with_the_engine_renderer():
    """Where the engine's hardened ChatTemplate renders, the compact renderer renders the same bytes."""
    compared = 0
    for name, source in TEMPLATES.items():
        engine = ChatTemplate(source, bos_token=BOS, eos_token=EOS, name=name)
        for messages in (CONVERSATIONS["multi_turn"],):  # transformers' test above covers the rest
            theirs = _outcome(lambda: engine.render(copy.deepcopy(messages), add_generation_prompt=True))
            ours = _outcome(lambda: render_template(source, copy.deepcopy(messages), add_generation_prompt=True,
                                                    bos_token=BOS, eos_token=EOS))
            assert ours[0] == theirs[0], f"{name}: {ours[1]!r:.200} vs {theirs[1]!r:.200}"
            if ours[0] == "ok":
                assert ours[1] == theirs[1], name
                compared += 1
    assert compared > 50


def test_fixture_is_small_and_complete():
    """The committed fixture is small and covers every kind of case the hidden suites need."""
    assert FIXTURE.stat().st_size < 400_000
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert {"qwen3", "smollm2", "llama3.1", "gemma2", "mistral-nemo"} <= set(data["templates"])
    assert any("error" in r for r in data["renders"]) and any("diverge_at" in r for r in data["increments"])
    assert {c["default_system"] is None for c in data["chatml"]} == {True, False}
    sweep = data["sweep"]
    assert sweep["count"] == len(sweep["templates"]) + len(sweep["refused"]) >= 70
    assert sum(t["generation_tag"] for t in sweep["templates"].values()) >= 2
    assert any("dates" in c for t in sweep["templates"].values() for c in t["cases"])


SWEEP = json.loads(FIXTURE.read_text(encoding="utf-8"))["sweep"]


@pytest.mark.skipif(not TEMPLATES, reason="llama-cpp-models asset not fetched")
def test_the_sweep_covers_every_template_in_the_asset():
    """The fixture's sweep names every .jinja file of llama.cpp's folder, with the sha256 of its source."""
    assert set(SWEEP["templates"]) | set(SWEEP["refused"]) == set(TEMPLATES)
    for name, entry in SWEEP["templates"].items():
        assert hashlib.sha256(TEMPLATES[name].encode("utf-8")).hexdigest() == entry["sha256"], name
    assert GENERATION_BLOCK == {n for n, t in SWEEP["templates"].items() if t["generation_tag"]}


@pytest.mark.skipif(not TEMPLATES, reason="llama-cpp-models asset not fetched")
def test_renders_every_fixture_case_of_every_real_template(capsys):
    """Every case of the sweep that transformers rendered, rendered by the reference: byte for byte (with today's
    date where the template called strftime_now); where transformers refused, the reference refuses too."""
    rendered_by_transformers, matched, failures = set(), set(), []
    for name, entry in SWEEP["templates"].items():
        ok = True
        for case in entry["cases"]:
            messages = copy.deepcopy(CONVERSATIONS_FIXTURE[case["conversation"]])
            outcome = _outcome(lambda: render_template(TEMPLATES[name], messages,
                                                       add_generation_prompt=case["add_generation_prompt"],
                                                       **copy.deepcopy(entry["context"])))
            if "error" in case:
                refused = outcome[0] == "raised" and isinstance(outcome[1], TemplateError)
                if not (refused and case["error"] in str(outcome[1])):
                    ok = False
                    failures.append(f"{name} {case['conversation']}: transformers refused; ours: {outcome!r:.120}")
                continue
            want = case["expected"]
            for format, frozen in case.get("dates", {}).items():
                want = want.replace(frozen, datetime.now().strftime(format))
            if outcome != ("ok", want):
                ok = False
                failures.append(f"{name} {case['conversation']} {case['add_generation_prompt']}: {outcome[1]!r:.120}")
        rendered_by_transformers.add(name)
        matched |= {name} if ok else set()
    with capsys.disabled():
        print(f"\nlab07 sweep: {SWEEP['count']} templates in the asset, {len(rendered_by_transformers)} rendered by "
              f"transformers ({len(SWEEP['refused'])} refused by it), {len(matched)} matched by the reference")
    assert not failures, failures[:5]
    assert matched == rendered_by_transformers


@pytest.mark.slow
def test_fixture_is_what_the_tool_writes():
    """tools/make_template_fixtures.py --check: the committed fixture equals a fresh run with transformers."""
    pytest.importorskip("transformers")
    try:
        assets.path("llama-cpp-models"), assets.path("smollm2")
    except assets.AssetError:
        pytest.skip("assets not fetched")
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "make_template_fixtures.py"), "--check"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


# --------------------------------------------------------------------------------------------------
# ChatML
# --------------------------------------------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
MESSAGES = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]),
                                           "content": TEXT}), min_size=1, max_size=5)


@given(MESSAGES, st.booleans())
def test_render_chatml_equals_the_chatml_template(messages, generation):
    """render_chatml and the engine rendering CHATML_TEMPLATE agree on any conversation."""
    engine = ChatTemplate(CHATML_TEMPLATE).render(copy.deepcopy(messages), add_generation_prompt=generation)
    assert render_chatml(messages, add_generation_prompt=generation) == engine


def test_render_chatml_examples():
    hi = [{"role": "user", "content": "Hi"}]
    assert render_chatml(hi) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert render_chatml(hi, False, "Be brief.") == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n")
    with pytest.raises(ValueError, match=r"message 1 has no 'content' field"):
        render_chatml([*hi, {"role": "assistant"}])
    with pytest.raises(TypeError, match=r"message 0: 'content' must be a str, got list"):
        render_chatml([{"role": "user", "content": [{"type": "text", "text": "Hi"}]}])


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


def test_error_message_format():
    """'template line N: what' on the first line, then the line's text, and the original error as cause."""
    with pytest.raises(TemplateError) as info:
        render_template("a\n  {{ messages[0].content.upper(1, 2, 3) }}  \nc", [{"role": "user", "content": "x"}])
    first, second = str(info.value).split("\n")
    assert first.startswith("template line 2: TypeError")
    assert second == "    2 | {{ messages[0].content.upper(1, 2, 3) }}"
    assert isinstance(info.value.__cause__, TypeError)


def test_long_lines_are_shortened_in_the_message():
    source = "{{ raise_exception('no') }}" + " " * 300 + "{{ 1 }}"
    with pytest.raises(TemplateError) as info:
        render_template(source, [])
    assert str(info.value).endswith(" ...") and len(str(info.value)) < 300


def test_template_line_and_compile():
    with pytest.raises(jinja2.TemplateSyntaxError) as info:
        compile_template("x\ny\n{% for %}")
    assert template_line(info.value) == 3
    assert template_line(ValueError("not from a template")) is None
    env = make_environment()
    assert env.trim_blocks and env.lstrip_blocks and "tojson" in env.filters
    assert {"raise_exception", "strftime_now"} <= set(env.globals)
    assert {type(e) for e in env.extensions.values()} >= {jinja2.ext.LoopControlExtension, templates.GenerationBlock}


def test_sandbox_refusal_is_immediate():
    """Reading a refused attribute raises at once, even where plain Jinja would print ''."""
    assert jinja2.sandbox.ImmutableSandboxedEnvironment().from_string("{{ ''.__class__ }}").render() == ""
    with pytest.raises(TemplateError, match=r"line 1: refused by the sandbox: .*'__class__' of a str"):
        render_template("{{ ''.__class__ }}", [])


def test_increment_refusal_names_offset_line_and_both_texts():
    think_last = ("{% for m in messages %}{{ '<|im_start|>' + m.role + '\n' }}"
                  "{% if m.role == 'assistant' and loop.last %}{{ '<think></think>' }}{% endif %}"
                  "{{ m.content + '<|im_end|>\n' }}{% endfor %}"
                  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    with pytest.raises(TemplateError) as info:
        render_increment(think_last, history, [{"role": "user", "content": "r"}])
    message = str(info.value)
    at = len("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n")
    assert f"character {at} (line 4 of the history's rendering)" in message
    assert "'<think></think>a<|im_end|>\\n'" in message and "'a<|im_end|>\\n<|im_start|>user\\nr" in message


def test_docstring_examples():
    assert doctest.testmod(templates).failed == 0
