"""Tests for bytes2logits.engine.chat: conformance with transformers' renderer on real templates, error lines,
the sandbox and the render limits.

The oracle is ``transformers.utils.chat_template_utils.render_jinja_template`` (what
``tokenizer.apply_chat_template(..., tokenize=False)`` calls, after passing the tokenizer's special tokens
as keywords and dropping message keys whose value is None). It needs neither a tokenizer nor torch.

Run ``python tests/test_chat.py`` for a summary of the conformance counts and of which pairs raise.
"""

from __future__ import annotations

import copy
import functools
import time
from pathlib import Path

import pytest

from bytes2logits import assets
from bytes2logits.engine.chat import (
    CHATML_TEMPLATE,
    MAX_LOOP_ITERATIONS,
    ChatTemplate,
    TemplateError,
    validate_messages,
)

BOS, EOS = "<|test_bos|>", "<|test_eos|>"

# --------------------------------------------------------------------------------------------------
# Conformance: 70 llama.cpp templates x conversations, byte-identical to transformers
# --------------------------------------------------------------------------------------------------

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
SYSTEM_USER = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is 2 + 2?"},
]
MULTI_TURN = [
    {"role": "user", "content": "Hello!"},
    {"role": "assistant", "content": "Hi! How can I help?"},
    {"role": "user", "content": "Tell me a joke."},
]
USER_ONLY = [{"role": "user", "content": "Hello!"}]
TOOL_CALLING = [
    {"role": "system", "content": "You can call tools."},
    {"role": "user", "content": "What's the weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call12345", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
        ],
    },
    {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": '{"temperature": 21}'},
    {"role": "assistant", "content": "It is 21 °C in Paris."},
    {"role": "user", "content": "Thanks! And in Tokyo?"},
]
# The OpenAI wire format: no content at all (None, dropped) and the arguments as a JSON string
TOOL_CALLING_OPENAI = copy.deepcopy(TOOL_CALLING)
TOOL_CALLING_OPENAI[2]["content"] = None
TOOL_CALLING_OPENAI[2]["tool_calls"][0]["function"]["arguments"] = '{"city": "Paris"}'
NON_ASCII = [
    {"role": "system", "content": "Réponds en français 🙂"},
    {"role": "user", "content": '日本語で "こんにちは" と言って \\ 😀 — ok?'},
]

# name -> (messages, render keywords)
CONVERSATIONS = {
    "system_user_gen": (SYSTEM_USER, {"add_generation_prompt": True}),
    "system_user_nogen": (SYSTEM_USER, {"add_generation_prompt": False}),
    "multi_turn": (MULTI_TURN, {"add_generation_prompt": True}),
    "user_only": (USER_ONLY, {"add_generation_prompt": True}),
    "tools": (TOOL_CALLING, {"add_generation_prompt": True, "tools": [WEATHER_TOOL]}),
    "tools_openai_format": (TOOL_CALLING_OPENAI, {"add_generation_prompt": True, "tools": [WEATHER_TOOL]}),
    "non_ascii": (NON_ASCII, {"add_generation_prompt": True}),
    "no_thinking": (SYSTEM_USER, {"add_generation_prompt": True, "enable_thinking": False}),
    "tools_no_thinking": (TOOL_CALLING, {"add_generation_prompt": True, "tools": [WEATHER_TOOL],
                                         "enable_thinking": False}),
}


def _templates_dir() -> Path | None:
    try:
        return assets.path("llama-cpp-models") / "templates"
    except assets.AssetError:
        return None


TEMPLATES_DIR = _templates_dir()
TEMPLATE_NAMES = sorted(p.name for p in TEMPLATES_DIR.glob("*.jinja")) if TEMPLATES_DIR else []


@functools.cache
def _source(template_name: str) -> str:
    return (TEMPLATES_DIR / template_name).read_text(encoding="utf-8")


@functools.cache
def _ours(template_name: str) -> ChatTemplate | TemplateError:
    try:
        return ChatTemplate(_source(template_name), bos_token=BOS, eos_token=EOS, name=template_name)
    except TemplateError as exc:  # a template that does not compile raises on every render
        return exc


def _render_transformers(source: str, messages: list[dict], kwargs: dict) -> str:
    """What apply_chat_template(messages, tokenize=False, **kwargs) renders for a tokenizer whose special
    tokens are BOS and EOS."""
    from transformers.utils.chat_template_utils import render_jinja_template

    kwargs = dict(kwargs)
    messages = [{k: v for k, v in m.items() if v is not None} for m in messages]
    rendered, _ = render_jinja_template(
        conversations=[messages],
        tools=kwargs.pop("tools", None),
        documents=kwargs.pop("documents", None),
        chat_template=source,
        add_generation_prompt=kwargs.pop("add_generation_prompt", False),
        **{"bos_token": BOS, "eos_token": EOS, **kwargs},
    )
    return rendered[0]


def conformance_outcome(template_name: str, conversation: str) -> tuple[str, str]:
    """Render one (template, conversation) pair with both renderers.

    Returns ("identical", "") or ("both_raised", why); raises AssertionError on any mismatch.
    """
    messages, kwargs = CONVERSATIONS[conversation]
    try:
        expected, their_error = _render_transformers(_source(template_name), copy.deepcopy(messages), kwargs), None
    except Exception as exc:  # noqa: BLE001 - any failure of the oracle is an outcome to compare
        expected, their_error = None, exc
    ours = _ours(template_name)
    try:
        if isinstance(ours, TemplateError):
            raise ours
        got, our_error = ours.render(copy.deepcopy(messages), **kwargs), None
    except TemplateError as exc:
        got, our_error = None, exc
    if their_error is None and our_error is None:
        assert got == expected, f"rendering differs:\n--- ours\n{got!r}\n--- transformers\n{expected!r}"
        return "identical", ""
    assert their_error is not None, f"only ours raised: {our_error}"
    assert our_error is not None, f"only transformers raised: {type(their_error).__name__}: {their_error}"
    return "both_raised", f"{type(their_error).__name__}: {their_error}".splitlines()[0][:100]


@pytest.mark.skipif(not TEMPLATE_NAMES, reason="llama-cpp-models asset not fetched")
@pytest.mark.parametrize("conversation", list(CONVERSATIONS))
@pytest.mark.parametrize("template_name", TEMPLATE_NAMES)
def test_conformance_with_transformers(template_name, conversation):
    pytest.importorskip("transformers")
    conformance_outcome(template_name, conversation)


def test_the_templates_are_all_there():
    if not TEMPLATE_NAMES:
        pytest.skip("llama-cpp-models asset not fetched")
    assert len(TEMPLATE_NAMES) == 70


def test_chatml_template_renders_identically_too():
    pytest.importorskip("transformers")
    for messages, kwargs in CONVERSATIONS.values():
        if messages is TOOL_CALLING or messages is TOOL_CALLING_OPENAI:
            continue  # ChatML as written here concatenates content, which a tool-call message may lack
        ours = ChatTemplate(CHATML_TEMPLATE, bos_token=BOS, eos_token=EOS).render(copy.deepcopy(messages), **kwargs)
        assert ours == _render_transformers(CHATML_TEMPLATE, copy.deepcopy(messages), kwargs)


# --------------------------------------------------------------------------------------------------
# What the template sees
# --------------------------------------------------------------------------------------------------

HI = [{"role": "user", "content": "Hi"}]


def test_chatml_small_conversation():
    t = ChatTemplate.chatml()
    conversation = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert t.render(conversation) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert t.render(conversation, add_generation_prompt=False) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    )
    assert t.eos_token == "<|im_end|>" and t.name == "chatml"


def test_bos_eos_and_context_are_passed_through():
    t = ChatTemplate("{{ bos_token }}|{{ messages[0].content }}|{{ eos_token }}|{{ enable_thinking }}",
                     bos_token="<s>", eos_token="</s>")
    assert t.render(HI, enable_thinking=False) == "<s>|Hi|</s>|False"
    # extra context overrides the special tokens, as apply_chat_template's kwargs do
    assert t.render(HI, bos_token="[BOS]", enable_thinking=True) == "[BOS]|Hi|</s>|True"


def test_defaults_match_apply_chat_template():
    t = ChatTemplate("{{ tools is none }} {{ documents is none }} {{ add_generation_prompt }} "
                     "{{ bos_token == '' }} {{ enable_thinking is defined }}")
    assert t.render(HI) == "True True True True False"  # tools/documents are passed, as None
    assert t.render(HI, tools=[WEATHER_TOOL], documents=[{"title": "t", "text": "x"}],
                    add_generation_prompt=False) == "False False False True False"


def test_none_valued_keys_are_dropped_and_reasoning_is_aliased():
    t = ChatTemplate("{% for m in messages %}{{ m.content is defined }} {{ m.reasoning_content }} "
                     "{{ m.thinking }};{% endfor %}")
    messages = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": None, "tool_calls": [], "reasoning": "hmm"}]
    assert t.render(messages) == "True  ;False hmm hmm;"
    assert messages[1]["content"] is None  # the caller's messages are not modified


def test_tojson_keeps_non_ascii_and_html_and_takes_options():
    t = ChatTemplate("{{ messages[0] | tojson }}\n{{ messages[0] | tojson(indent=2, sort_keys=True) }}\n"
                     "{{ messages[0] | tojson(separators=(',', ':')) }}")
    out = t.render([{"role": "user", "content": "<b>é 😀</b>"}])
    assert out.split("\n")[0] == '{"role": "user", "content": "<b>é 😀</b>"}'
    assert '{\n  "content": "<b>é 😀</b>",\n  "role": "user"\n}' in out
    assert out.endswith('{"role":"user","content":"<b>é 😀</b>"}')


def test_generation_block_and_loopcontrols():
    t = ChatTemplate("{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}"
                     "{% generation %}[{{ m.content }}]{% endgeneration %}{% endfor %}")
    assert t.render([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]) == "[a]"


def test_trim_blocks_and_lstrip_blocks():
    t = ChatTemplate("{% for m in messages %}\n    {% if true %}\n{{ m.content }}\n    {% endif %}\n{% endfor %}")
    assert t.render(HI) == "Hi\n"


def test_strftime_now_and_dict_and_namespace():
    t = ChatTemplate("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}"
                     "{{ ns.n }} {{ dict(a=1) }} {{ strftime_now('%Y') | length }}")
    assert t.render(HI) == "1 {'a': 1} 4"


# --------------------------------------------------------------------------------------------------
# Errors name the template line
# --------------------------------------------------------------------------------------------------


def test_syntax_error_names_line_3():
    source = "{% for m in messages %}\n{{ m.content }}\n{% if m.role == %}x{% endif %}\n{% endfor %}\n"
    with pytest.raises(TemplateError) as info:
        ChatTemplate(source, name="broken.jinja")
    message = str(info.value)
    assert "'broken.jinja', line 3" in message and "syntax error" in message
    assert "{% if m.role == %}x{% endif %}" in message  # the line's text


def test_unknown_filter_is_a_compile_error_with_its_line():
    with pytest.raises(TemplateError, match=r"line 2: .*nosuchfilter"):
        ChatTemplate("ok\n{{ messages | nosuchfilter }}")


def test_runtime_undefined_call_names_line_5():
    source = ("{# 1 #}\n{# 2 #}\n{% for m in messages %}\n{{ m.content }}\n{{ m.content.no_such_method() }}\n"
              "{% endfor %}")
    with pytest.raises(TemplateError) as info:
        ChatTemplate(source, name="t.jinja").render(HI)
    message = str(info.value)
    assert "'t.jinja', line 5" in message and "no_such_method" in message
    assert "{{ m.content.no_such_method() }}" in message
    assert isinstance(info.value.__cause__, Exception)  # the original error is kept as the cause


def test_runtime_error_in_a_macro_names_the_macro_line_and_crlf_counts_once():
    source = "{% macro f(x) %}\r\n{{ x + 1 }}\r\n{% endmacro %}\r\n{{ f('a') }}"
    with pytest.raises(TemplateError, match=r"^chat template, line 2: TypeError.*\n.*\{\{ x \+ 1 \}\}"):
        ChatTemplate(source).render(HI)


def test_raise_exception_names_its_line_and_message():
    source = ("{% if messages[0].role != 'system' %}\n  {{ raise_exception('a system message is required') }}\n"
              "{% endif %}")
    with pytest.raises(TemplateError, match=r"line 2: the template raised an error: a system message is required"):
        ChatTemplate(source, name="strict").render(HI)


def test_line_mapping_works_on_raw_and_rewritten_tracebacks():
    # Jinja normally rewrites tracebacks (jinja2.debug) into fake frames that carry the template line; a
    # traceback that was not rewritten has frames of the compiled Python code, mapped through the template's
    # debug info. Both must give the same template line.
    from bytes2logits.engine import chat

    t = ChatTemplate("a\nb\n{{ messages[0].content.nope() }}")
    template = t._template
    try:  # not rewritten: call the compiled render function directly
        "".join(template.root_render_func(template.new_context({"messages": HI})))
    except Exception as exc:  # noqa: BLE001
        assert chat._template_line(exc, template, t._filename) == 3
    else:
        raise AssertionError("expected an error")
    with pytest.raises(TemplateError, match="line 3"):  # rewritten, via Template.generate
        t.render(HI)


def test_recursive_loops_and_undefined_iterables_still_work():
    t = ChatTemplate("{% for n in messages[0].content recursive %}{{ n.name }}({{ loop(n.kids) }}){% endfor %}"
                     "{% for x in not_given %}never{% else %}!{% endfor %}")
    tree = [{"type": "tree", "name": "a", "kids": [{"name": "b", "kids": []}]}]
    assert t.render([{"role": "user", "content": tree}]) == "a(b())!"


@pytest.mark.parametrize("expression", [
    "''.__class__",
    "''.__class__.__mro__[1].__subclasses__()",
    "messages.__class__",
    "raise_exception.__globals__",
    "raise_exception.func_globals",
    "namespace.mro()",
    "messages.append(1)",
    "messages[0].update(role='system')",
    "namespace(__init__=1)",
    "dict.__call__.__globals__",
])
def test_sandbox_refuses_python_internals(expression):
    with pytest.raises(TemplateError, match=r"line 2: refused by the sandbox"):
        ChatTemplate("ok\n{% if " + expression + " %}yes{% endif %}{{ " + expression + " }}").render(HI)


@pytest.mark.parametrize("source", ["{{ ''.__class__.__mro__ }}", "{{ ''.__class__['__mro__'] }}",
                                    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
                                    "{% if messages.__class__ is defined %}x{% endif %}",
                                    "{% if ''.__class__ is undefined %}x{% endif %}"])
def test_sandbox_names_the_first_refused_access(source):
    with pytest.raises(TemplateError, match=r"__class__") as info:
        ChatTemplate(source).render(HI)
    first_line = str(info.value).splitlines()[0]
    assert "__class__" in first_line and "__mro__" not in first_line and "_Undefined" not in first_line


def test_defined_still_works_for_ordinary_values():
    t = ChatTemplate("{{ x is defined }} {{ nothing is defined }} {{ nothing is undefined }} {{ messages is defined }}")
    assert t.render(HI, x=1) == "True False True True"


# --------------------------------------------------------------------------------------------------
# Rendering is bounded
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source, match", [
    ("{% for i in range(10**9) %}x{% endfor %}", "MAX_RANGE"),  # jinja2's sandbox: at most 100,000 items
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "MAX_LOOP_ITERATIONS"),
    ("{% for i in range(100000) %}{% for c in 'x' * 100000 %}{% endfor %}{% endfor %}", "MAX_LOOP_ITERATIONS"),
    ("{{ 'x' * 10**9 }}", "MAX_REPEAT_LEN"),
    ("{{ [0] * 10**9 }}", "MAX_REPEAT_LEN"),
    ("{{ 10 ** 10 ** 10 }}", r"(MAX_POWER_BITS|\d)"),  # Jinja's ** is left-associative: (10**10)**10
    ("{{ 7 ** 10000000 }}", "MAX_POWER_BITS"),
])
def test_bombs_fail_fast(source, match):
    start = time.perf_counter()
    try:
        out = ChatTemplate(source).render(HI)
    except TemplateError as exc:
        assert __import__("re").search(match, str(exc)), exc
    else:
        assert len(out) < 200, "only the left-associative power may render, and it is small"
    assert time.perf_counter() - start < 5


def test_loop_budget_is_per_render_and_real_work_fits():
    t = ChatTemplate("{% for i in range(100000) %}{% for j in range(5) %}{% endfor %}{% endfor %}ok")
    assert MAX_LOOP_ITERATIONS >= 600_000
    assert t.render(HI) == "ok" and t.render(HI) == "ok"  # the budget starts afresh each time


# --------------------------------------------------------------------------------------------------
# Messages are validated
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("messages, match", [
    ("hello", r"messages must be a list of dicts, got str"),
    ({"role": "user", "content": "x"}, r"messages must be a list of dicts, got dict"),
    ([], r"messages is empty"),
    ([{"role": "user", "content": "a"}, "b"], r"message 1 must be a dict"),
    ([{"role": "user", "content": "a"}, {"content": "b"}], r"message 1 has no 'role'"),
    ([{"role": "", "content": "a"}], r"message 0: field 'role' must be a non-empty string"),
    ([{"role": 3, "content": "a"}], r"message 0: field 'role'"),
    ([{"role": "user", "content": "a"}, {"role": "assistant"}], r"message 1 \(assistant\) has no 'content'"),
    ([{"role": "user", "content": None}], r"message 0 \(user\) has no 'content'"),
    ([{"role": "user", "content": 42}], r"message 0: field 'content' must be a string or a list"),
    ([{"role": "user", "content": ["a"]}], r"message 0: field 'content' part 0 must be a dict"),
])
def test_bad_messages_name_the_index_and_field(messages, match):
    with pytest.raises(TemplateError, match=match):
        ChatTemplate.chatml().render(messages)


def test_valid_messages_pass_validation():
    parts = [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
             {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {}}}]}]
    assert validate_messages(parts) == parts


@pytest.mark.parametrize("kwargs, match", [
    ({"tools": {"name": "f"}}, "tools must be a list"),
    ({"tools": ["f"]}, "tool 0 must be a JSON-schema dict"),
    ({"documents": "text"}, "documents must be a list"),
    ({"documents": [1]}, "document 0 must be a dict"),
])
def test_bad_tools_and_documents(kwargs, match):
    with pytest.raises(TemplateError, match=match):
        ChatTemplate.chatml().render(HI, **kwargs)


def test_docstring_examples():
    import doctest

    from bytes2logits.engine import chat

    assert doctest.testmod(chat).failed == 0


def test_source_must_be_a_string():
    with pytest.raises(TemplateError, match="string of Jinja source"):
        ChatTemplate(None)


if __name__ == "__main__":  # summary: python tests/test_chat.py
    counts: dict[str, int] = {}
    start = time.perf_counter()
    for name in TEMPLATE_NAMES:
        for conv in CONVERSATIONS:
            try:
                outcome, why = conformance_outcome(name, conv)
            except AssertionError as exc:
                outcome, why = "MISMATCH", str(exc)[:300]
            counts[outcome] = counts.get(outcome, 0) + 1
            if outcome != "identical":
                print(f"{outcome:12} {name} / {conv}: {why}")
    print(counts, f"{time.perf_counter() - start:.1f} s")
