"""Hidden suite, lab 07 task 3: render_increment.

Expected increments and divergence points of real templates come from transformers' renderings
(``template_fixtures.json``, written by ``tools/make_template_fixtures.py``); the ChatML property is computed
here from ChatML's rule.
"""

import copy
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bytes2logits import errors

TemplateError = errors.TemplateError  # what the set-up cell imports

FIXTURES = json.loads((Path(__file__).parent / "template_fixtures.json").read_text(encoding="utf-8"))
TEMPLATES = FIXTURES["templates"]
CHATML = TEMPLATES["chatml"]["source"]
Q1 = {"role": "user", "content": "What is 2 + 2?"}
A1 = {"role": "assistant", "content": "4"}
Q2 = {"role": "user", "content": "And 3 + 3?"}


def describe(case):
    roles = lambda ms: "[" + ", ".join(m["role"] for m in ms) + "]"  # noqa: E731
    return f"template {case['template']!r}, history {roles(case['history'])} + new {roles(case['new'])}"


@pytest.mark.weight(2)
def test_increments_on_real_templates(impl):
    """Where the history's rendering is a prefix, the increment is exactly the text transformers' renderings differ by.

    Where a real template's rendering of the history is a prefix of the longer conversation's (ChatML,
    SmolLM2, Qwen2.5, Llama-3.1, Gemma-2, Mistral-Nemo, DeepSeek-R1, SmolLM3), the increment is exactly the
    text transformers' renderings differ by, even with an empty history (the whole prompt) or several new
    messages."""
    cases = [c for c in FIXTURES["increments"] if "expected" in c]
    assert len(cases) > 40
    for case in cases:
        try:
            got = impl.render_increment(TEMPLATES[case["template"]]["source"], copy.deepcopy(case["history"]),
                                        copy.deepcopy(case["new"]), **case["kwargs"])
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{describe(case)}: raised {type(exc).__name__}: "
                                 f"{str(exc).splitlines()[0][:150]}") from None
        assert type(got) is str, f"render_increment must return exactly str, got {type(got).__name__}"
        assert got == case["expected"], f"{describe(case)}: wrong increment (yours starts {got[:30]!r})"


@pytest.mark.weight(2)
def test_refuses_when_the_template_rewrites_history(impl):
    """Where the history's rendering is not a prefix, TemplateError names the character offset where they diverge.

    Where the history's rendering is not a prefix of the longer conversation's (Qwen3 drops an earlier think
    block, Phi-3.5 ends a finished conversation with EOS, Mistral-Nemo moves the system message), a TemplateError
    names the character offset where the two renderings first differ."""
    cases = [c for c in FIXTURES["increments"] if "diverge_at" in c]
    assert {c["template"] for c in cases} >= {"qwen3", "phi3.5", "mistral-nemo"}
    for case in cases:
        try:
            got = impl.render_increment(TEMPLATES[case["template"]]["source"], copy.deepcopy(case["history"]),
                                        copy.deepcopy(case["new"]), **case["kwargs"])
        except Exception as exc:  # noqa: BLE001 - checked below
            error = exc
        else:
            raise AssertionError(f"{describe(case)}: returned an increment ({str(got)[:30]!r}...) although the "
                                 "history's rendering is not a prefix of the new one")
        assert isinstance(error, TemplateError), (
            f"{describe(case)}: expected a TemplateError, got {type(error).__name__}")
        assert re.search(rf"\b{case['diverge_at']}\b", str(error)), (
            f"{describe(case)}: the error should name the character offset where the renderings diverge")


def test_template_refusals_propagate(impl):
    """When the template itself refuses the conversation, render_increment raises that TemplateError.

    When the template itself refuses the conversation (Gemma-2 has no system role), render_increment raises
    that TemplateError instead of returning anything."""
    cases = [c for c in FIXTURES["increments"] if "error" in c]
    assert cases
    for case in cases:
        with pytest.raises(TemplateError, match=re.escape(case["error"])):
            impl.render_increment(TEMPLATES[case["template"]]["source"], copy.deepcopy(case["history"]),
                                  copy.deepcopy(case["new"]), **case["kwargs"])


def test_qwen3_think_block_is_refused_but_thinking_off_history_works(impl):
    """Qwen3: a user turn after a think block is refused; with no new message the increment is the generation prompt.

    Qwen3 shows an assistant's think block only after the last user message, so adding a user turn after an
    answer is refused; before any answer (history ends with the user) the increment is just the new turns."""
    qwen3 = TEMPLATES["qwen3"]["source"]
    with pytest.raises(TemplateError):
        impl.render_increment(qwen3, [Q1, dict(A1, reasoning_content="Two plus two.")], [Q2])
    got = impl.render_increment(qwen3, [Q1], [])
    assert got == "<|im_start|>assistant\n", "no new message: the increment is only the generation prompt"


TEXT = st.lists(st.one_of(st.characters(exclude_categories=("Cs",)), st.sampled_from(
    ["\n", " ", "<|im_end|>", "<|im_start|>"])), max_size=20).map("".join)
MESSAGES = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]),
                                           "content": TEXT}), max_size=4)


def chatml(messages, generation):
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + ("<|im_start|>assistant\n" if generation else "")


@given(MESSAGES, MESSAGES)
def test_chatml_increments_rebuild_the_prompt(impl, history, new):
    """For ChatML, history's text + the increment is always the whole prompt.

    For ChatML, any history and any new messages: the increment is exactly ChatML of the new messages plus the
    generation prompt, so history's text + increment == the whole prompt."""
    got = impl.render_increment(CHATML, copy.deepcopy(history), copy.deepcopy(new))
    assert type(got) is str, "render_increment must return exactly str"
    assert got == chatml(new, True)
    assert chatml(history, False) + got == chatml(history + new, True)


def test_context_reaches_both_renderings(impl):
    """Keywords (bos_token, enable_thinking...) are passed to both renderings."""
    source = ("{{ bos_token }}{% for m in messages %}{{ m.content }}{{ sep }}{% endfor %}"
              "{% if add_generation_prompt %}>{% endif %}")
    assert impl.render_increment(source, [Q1], [Q2], bos_token="<s>", sep="|") == "And 3 + 3?|>"
    assert impl.render_increment(source, [], [Q1], bos_token="<s>", sep="|") == "<s>What is 2 + 2?|>"


@pytest.mark.weight(0.5)
def test_inputs_are_lists_and_are_not_modified(impl):
    """history and new_messages must be lists (TypeError otherwise) and are never modified.

    history and new_messages must be lists of messages (a str or a dict is a TypeError), and they are never
    modified."""
    history, new = [Q1, A1], [Q2]
    before = copy.deepcopy((history, new))
    impl.render_increment(CHATML, history, new)
    assert (history, new) == before
    with pytest.raises(TypeError):
        impl.render_increment(CHATML, "What is 2 + 2?", new)
    with pytest.raises(TypeError):
        impl.render_increment(CHATML, history, Q2)
