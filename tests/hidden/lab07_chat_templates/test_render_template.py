"""Hidden suite, lab 07 task 2: render_template (and the sandbox, environment and line finding it uses).

Expected renderings of real templates come from transformers (``template_fixtures.json``, written by
``tools/make_template_fixtures.py``): ten curated templates on many conversations, and every template of
llama.cpp's ``models/templates/`` folder (read from the ``llama-cpp-models`` asset) on one conversation each
here (tests/test_templates.py renders all of the fixture's cases against the reference). Everything else is
computed here from Jinja's and JSON's rules.
"""

import copy
import hashlib
import json
import re
from datetime import datetime
from pathlib import Path

import jinja2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bytes2logits import assets, errors

TemplateError = errors.TemplateError  # what the set-up cell imports

FIXTURES = json.loads((Path(__file__).parent / "template_fixtures.json").read_text(encoding="utf-8"))
TEMPLATES = FIXTURES["templates"]
CONVERSATIONS = FIXTURES["conversations"]
CHATML_FAMILY = ["chatml", "smollm2", "qwen2.5", "qwen3", "smollm3"]
OTHER_FAMILIES = ["llama3.1", "mistral-nemo", "gemma2", "phi3.5", "deepseek-r1-qwen"]
HI = [{"role": "user", "content": "Hi"}]


def first_difference(got, want):
    for i, (a, b) in enumerate(zip(got, want)):
        if a != b:
            return i
    return min(len(got), len(want))


def check_renders(impl, names, conversations=None):
    cases = [c for c in FIXTURES["renders"] if c["template"] in names and "expected" in c
             and (conversations is None or c["conversation"] in conversations)]
    assert cases
    for case in cases:
        messages = copy.deepcopy(CONVERSATIONS[case["conversation"]])
        where = f"template {case['template']!r}, conversation {case['conversation']!r}, settings " + ", ".join(
            f"{k}={v!r}" for k, v in case["kwargs"].items() if k not in ("bos_token", "eos_token", "tools"))
        try:
            got = impl.render_template(TEMPLATES[case["template"]]["source"], messages, **case["kwargs"])
        except Exception as exc:  # noqa: BLE001 - reported as a failed check with its first line
            raise AssertionError(f"{where}: raised {type(exc).__name__}: {str(exc).splitlines()[0][:150]}") from None
        assert type(got) is str, f"render_template must return exactly str, got {type(got).__name__}"
        if got != case["expected"]:
            at = first_difference(got, case["expected"])
            raise AssertionError(f"{where}: your text differs from transformers' at character {at}, where yours "
                                 f"has {got[at:at + 30]!r}")


SWEEP = FIXTURES["sweep"]


def sweep_sources():
    """The real templates of llama.cpp's folder, checked against the sha256 the fixture was made from."""
    folder = assets.path(SWEEP["asset"]) / SWEEP["folder"]
    sources = {}
    for name, entry in SWEEP["templates"].items():
        source = (folder / name).read_text(encoding="utf-8")
        assert hashlib.sha256(source.encode("utf-8")).hexdigest() == entry["sha256"], f"asset template {name} changed"
        sources[name] = source
    return sources


def with_today(case):
    """transformers' expected text, with the fixture's frozen strftime_now dates replaced by today's."""
    text = case["expected"]
    for format, frozen in case.get("dates", {}).items():
        text = text.replace(frozen, datetime.now().strftime(format))
    return text


def check_sweep(impl, names, every_case=False):
    """Render each template's case (the i-th template takes its rendered cases in turn, so the suite meets
    every conversation and both settings) and fail naming how many match and the first that does not."""
    sources = sweep_sources()
    failures, checked = [], 0
    for i, name in enumerate(names):
        entry = SWEEP["templates"][name]
        rendered = [c for c in entry["cases"] if "expected" in c]
        for case in rendered if every_case else [rendered[i % len(rendered)]]:
            checked += 1
            where = (f"template {name!r}, conversation {case['conversation']!r}, "
                     f"add_generation_prompt={case['add_generation_prompt']}")
            try:
                got = impl.render_template(sources[name], copy.deepcopy(CONVERSATIONS[case["conversation"]]),
                                           add_generation_prompt=case["add_generation_prompt"],
                                           **copy.deepcopy(entry["context"]))
            except Exception as exc:  # noqa: BLE001 - reported as a failed case with its first line
                failures.append(f"{where}: raised {type(exc).__name__}: {str(exc).splitlines()[0][:150]}")
                continue
            want = with_today(case)
            if type(got) is not str or got != want:
                at = first_difference(str(got), want)
                failures.append(f"{where}: your text differs from transformers' at character {at}, where yours has "
                                f"{str(got)[at:at + 30]!r}")
    assert not failures, (f"{checked - len(failures)} of {checked} renderings match transformers; the first that "
                          f"does not: {failures[0]}")


def refusal(impl, source, messages=HI, *, sandbox=False, **context):
    """Render and return the message of the TemplateError that must be raised; with ``sandbox``, check that
    it was raised from the sandbox's SecurityError."""
    try:
        got = impl.render_template(source, messages, **context)
    except Exception as exc:  # noqa: BLE001 - checked below
        error = exc
    else:
        raise AssertionError(f"rendered {str(got)[:60]!r} instead of raising a TemplateError")
    assert isinstance(error, TemplateError), (
        f"expected a TemplateError (from bytes2logits.errors) naming the line, got "
        f"{type(error).__name__}: {str(error)[:120]}")
    if sandbox:
        cause = error.__cause__
        assert isinstance(cause, jinja2.exceptions.SecurityError), (
            "the sandbox must refuse with SecurityError (override StrictSandbox.unsafe_undefined), and "
            f"render_template must raise TemplateError from it; the cause was {type(cause).__name__}")
    return str(error)


def assert_names_line(message, line):
    assert re.search(rf"\bline {line}\b", message), f"the error should name template line {line}: {message[:200]!r}"


@pytest.mark.parametrize("name", CHATML_FAMILY + OTHER_FAMILIES)
@pytest.mark.weight(0.4)
def test_real_template_byte_exact(impl, name):
    """Real templates render exactly as transformers renders them, on many conversations and settings.

    Real templates (plain ChatML, SmolLM2 from its GGUF, Qwen2.5, Qwen3 with think blocks, SmolLM3, Llama-3.1,
    Mistral-Nemo, Gemma-2, Phi-3.5, DeepSeek-R1) render exactly as transformers renders them: with and without
    the generation prompt, default system prompts, enable_thinking, multi-turn, unicode and whitespace."""
    check_renders(impl, [name], [c for c in CONVERSATIONS if c != "tools_weather"])


@pytest.mark.weight(3)
def test_every_real_template_that_transformers_renders(impl):
    """Every template in llama.cpp's models/templates/ that transformers renders renders exactly as it does.

    Every real template in llama.cpp's models/templates/ that transformers renders (Llama, Mistral, Gemma,
    Granite, DeepSeek, Kimi, GLM, gpt-oss, Command-R...), except the {% generation %} ones checked on their own,
    renders exactly as transformers renders it: strftime_now, raise_exception, tojson, loop controls,
    trim_blocks and lstrip_blocks all decide the bytes."""
    names = [n for n, t in SWEEP["templates"].items() if not t["generation_tag"]]
    assert len(names) > 60
    check_sweep(impl, names)


@pytest.mark.weight(2)
def test_generation_block_templates_render(impl):
    """Templates with {% generation %} blocks (LFM2.5, poolside Laguna) render exactly as transformers renders them.

    Templates that mark the assistant's text with {% generation %} ... {% endgeneration %} (LFM2.5, poolside
    Laguna) render exactly as transformers renders them: the tag is known, and rendering outputs its body."""
    names = [n for n, t in SWEEP["templates"].items() if t["generation_tag"]]
    assert len(names) >= 2
    check_sweep(impl, names, every_case=True)


GENERATION_CASES = [
    ("{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}<a>{{ m.content }}</a>{% endgeneration %}"
     "{% else %}<u>{{ m.content }}</u>{% endif %}{% endfor %}", "<u>Hi</u><a>Hello</a>"),
    ("{% for m in messages %}\n  {% generation %}\n[{{ m.content }}]\n  {% endgeneration %}\n{% endfor %}\n",
     "[Hi]\n[Hello]\n"),
    ("a\n  {%- generation -%}\n  b\n  {%- endgeneration -%}\n  c", "abc"),
    ("{% set x = 'out' %}{% generation %}{% set x = 'in' %}{{ x }}{% endgeneration %}{{ x }}", "inout"),
    ("{% set ns = namespace(v='a') %}{% generation %}{% set ns.v = 'b' %}{% endgeneration %}{{ ns.v }}", "b"),
]


def test_generation_block_is_a_call_block(impl):
    """{% generation %} outputs its body as a call block, as transformers' does.

    {% generation %} renders its body unchanged, with trim_blocks/lstrip_blocks and whitespace control as for
    any block tag; as in transformers the body is a call block, so a {% set %} inside it stays inside (a namespace
    attribute does not), and an error inside it or a missing {% endgeneration %} names its line."""
    chat = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    for source, want in GENERATION_CASES:
        try:
            got = impl.render_template(source, copy.deepcopy(chat))
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{source!r:.90}: raised {type(exc).__name__}: {str(exc).splitlines()[0][:120]}") \
                from None
        assert got == want, f"{source!r:.90}: rendered {got!r:.60}"
    assert_names_line(refusal(impl, "x\n{% generation %}\n{{ raise_exception('no') }}\n{% endgeneration %}"), 3)
    assert_names_line(refusal(impl, "x\n{% generation %}\nabc\n"), 3)


def test_tools_render_with_tojson(impl):
    """Templates that list tools render them exactly as transformers does (tojson keeps non-ASCII, <>&).

    Templates that list tools (Qwen2.5, Qwen3, Llama-3.1) render them exactly as transformers does: tojson
    keeps non-ASCII text and <>& as they are and honours indent=4."""
    check_renders(impl, ["qwen2.5", "qwen3", "llama3.1"], ["tools_weather"])


def test_real_template_refusals_name_the_line(impl):
    """A real template's raise_exception refusal is a TemplateError with its message and the line of the call.

    Where a real template refuses a conversation with raise_exception (Gemma-2 has no system role), the
    error is a TemplateError with the template's own message and the line of the raise_exception call."""
    cases = [c for c in FIXTURES["renders"] if "error" in c]
    assert cases
    for case in cases:
        message = refusal(impl, TEMPLATES[case["template"]]["source"],
                          copy.deepcopy(CONVERSATIONS[case["conversation"]]), **case["kwargs"])
        assert case["error"] in message, "the error should include the template's own message"
        assert_names_line(message, case["line"])


@pytest.mark.weight(2)
def test_trim_blocks_and_lstrip_blocks(impl):
    """Block tags on lines of their own leave no indentation and no newline behind (trim_blocks, lstrip_blocks).

    Block tags on lines of their own leave no indentation and no newline behind (trim_blocks, lstrip_blocks),
    while {{ expressions }} keep the newline after them."""
    source = ("{% for m in messages %}\n"
              "    {% if m.role == 'user' %}\n"
              "U: {{ m.content }}\n"
              "    {% else %}\n"
              "A: {{ m.content }}\n"
              "    {% endif %}\n"
              "{% endfor %}\n"
              "  {% if add_generation_prompt %}\n"
              "A:\n"
              "  {% endif %}\n")
    messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    assert impl.render_template(source, messages) == "U: x\nA: y\n"
    assert impl.render_template(source, messages, add_generation_prompt=True) == "U: x\nA: y\nA:\n"


def test_context_variables(impl):
    """The template sees messages, add_generation_prompt, tools, documents and every keyword of the call.

    The template sees messages, add_generation_prompt (False by default), tools and documents (None unless
    given), bos_token/eos_token and any other keyword of the call."""
    source = ("{{ bos_token }}|{{ messages[0].content }}|{{ eos_token }}|{{ add_generation_prompt }}|"
              "{{ tools is none }}|{{ documents is none }}|{{ enable_thinking }}|{{ date_string is defined }}")
    got = impl.render_template(source, HI, bos_token="<s>", eos_token="</s>", enable_thinking=False)
    assert got == "<s>|Hi|</s>|False|True|True|False|False"
    got = impl.render_template(source, HI, add_generation_prompt=True, tools=[{"name": "f"}], documents=[])
    assert got == "|Hi||True|False|False||False"


def test_tojson_filter(impl):
    """tojson is json.dumps: non-ASCII text and <>&' stay as they are, and indent, separators and sort_keys work."""
    value = {"b": "<é & 😀 'q'>", "a": [1, 2.5, None, True]}
    messages = [{"role": "user", "content": value}]
    assert impl.render_template("{{ messages[0].content | tojson }}", messages) == json.dumps(value, ensure_ascii=False)
    assert impl.render_template("{{ messages[0].content | tojson(indent=2, sort_keys=True) }}", messages) == \
        json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)
    assert impl.render_template("{{ messages[0].content | tojson(separators=(',', ':')) }}", messages) == \
        json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_loop_controls_and_namespace(impl):
    """{% break %} and {% continue %} work (the loopcontrols extension), and so does namespace()."""
    source = ("{% set ns = namespace(n=0) %}{% for m in messages %}{% if m.role == 'skip' %}{% continue %}{% endif %}"
              "{% if m.role == 'stop' %}{% break %}{% endif %}{% set ns.n = ns.n + 1 %}[{{ m.content }}]{% endfor %}"
              "{{ ns.n }}")
    roles = ["user", "skip", "assistant", "stop", "user"]
    messages = [{"role": r, "content": str(i)} for i, r in enumerate(roles)]
    assert impl.render_template(source, messages) == "[0][2]2"


SYNTAX_ERRORS = [
    ("{% if messages %}\n{{ messages[0].content }}\n{% if x == %}y{% endif %}\n{% endif %}", 3),
    ("{% for m in messages %}\n{{ m.content }}\n{% endfor %}\n\n\n{% endif %}", 6),
    ("a\r\nb\r\n{{ 1 + }}\r\n", 3),
    ("{{ messages | no_such_filter }}", 1),
    ("line 1\n{% for m in messages %}{{ m.content }}", 2),
]
RUNTIME_ERRORS = [
    ("{# one #}\n{# two #}\n{% for m in messages %}\n{{ m.content }}\n{{ m.content.no_such_method() }}\n"
     "{% endfor %}", 5),
    ("{% macro f(x) %}\n{{ x + 1 }}\n{% endmacro %}\n{{ f('a') }}", 2),
    ("ok\n{{ 1 // (messages | length - 1) }}", 2),
    ("{% for m in messages %}\n{% for c in m.content %}{% endfor %}{% endfor %}\n{{ range(10**9) | list }}", 3),
]


@pytest.mark.weight(2)
def test_syntax_error_names_the_line(impl):
    """A syntax error raises TemplateError naming the template line, with its text, raised from Jinja's error.

    A template with a syntax error (or an unknown filter, or an unclosed block) raises TemplateError naming the
    template line, with that line's text, and keeps Jinja's error as __cause__."""
    for source, line in SYNTAX_ERRORS:
        with pytest.raises(Exception) as info:
            impl.render_template(source, HI)
        assert isinstance(info.value, TemplateError), f"expected a TemplateError, got {type(info.value).__name__}"
        message = str(info.value)
        assert_names_line(message, line)
        text = re.split(r"\r\n|\r|\n", source)[line - 1].strip()
        if text:
            assert text in message, "the error should show the text of the line"
        assert info.value.__cause__ is not None, "raise TemplateError(...) from the original exception"


@pytest.mark.weight(2)
def test_runtime_error_names_the_line(impl):
    """An error while rendering raises TemplateError naming the template line where it happened.

    An error while rendering (a missing method, a type error inside a macro, a division by zero, a range that
    is too large) raises TemplateError naming the template line where it happened."""
    for source, line in RUNTIME_ERRORS:
        assert_names_line(refusal(impl, source), line)


def test_raise_exception_names_line_and_message(impl):
    """raise_exception('...') in a template raises TemplateError with the template's message and its line."""
    source = ("{% for m in messages %}\n"
              "  {% if m.role not in ['user', 'assistant'] %}\n"
              "    {{ raise_exception('Only user and assistant roles are supported, got ' + m.role) }}\n"
              "  {% endif %}\n"
              "{% endfor %}")
    assert impl.render_template(source, HI) == "", \
        "a conversation the template accepts renders as '' here: its block tags leave no whitespace behind"
    message = refusal(impl, source, [{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}])
    assert "Only user and assistant roles are supported, got tool" in message
    assert_names_line(message, 3)


ESCAPES = [
    "''.__class__",
    "''.__class__.__mro__",
    "''.__class__.__mro__[1].__subclasses__()",
    "messages.__class__",
    "messages[0].__class__.__base__",
    "raise_exception.__globals__",
    "cycler.__init__.__globals__",
    "lipsum.__globals__['os']",
    "(messages | attr('__class__'))",
    "messages['__class__']",
]
MODIFICATIONS = [
    "{{ messages.append({'role': 'user', 'content': 'injected'}) }}",
    "{{ messages.pop() }}",
    "{% set _ = messages[0].update({'role': 'system'}) %}",
    "{{ messages[0].clear() }}",
]


@pytest.mark.weight(3)
def test_sandbox_escape_attempts_are_refused_loudly(impl):
    """Reaching Python internals (__class__, __globals__...) is a TemplateError from a SecurityError, naming the line.

    Reaching Python internals (__class__, __mro__, __globals__, ...) raises TemplateError naming the line,
    raised from the sandbox's SecurityError, instead of rendering (or silently printing an empty string)."""
    for expression in ESCAPES:
        try:
            message = refusal(impl, "fine\n{{ " + expression + " }}", sandbox=True)
        except AssertionError as exc:
            raise AssertionError(f"{{{{ {expression} }}}}: {str(exc).splitlines()[0][:150]}") from None
        assert_names_line(message, 2)


@pytest.mark.weight(2)
def test_templates_cannot_modify_the_messages(impl):
    """A template that modifies the messages (append, pop, update, clear) is refused by the sandbox, naming the line.

    A template that tries to modify the messages (append, pop, update, clear) is refused with a TemplateError
    naming the line (raised from the sandbox's SecurityError), and the caller's messages are unchanged."""
    for statement in MODIFICATIONS:
        messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
        before = copy.deepcopy(messages)
        message = refusal(impl, "a\nb\n" + statement, messages, sandbox=True)
        assert_names_line(message, 3)
        assert messages == before, f"{statement} changed the messages"


@pytest.mark.weight(0.5)
def test_bad_arguments_are_type_errors(impl):
    """A template that is not a str, or messages that are not a list of dicts, raise TypeError."""
    with pytest.raises(TypeError):
        impl.render_template(None, HI)
    with pytest.raises(TypeError):
        impl.render_template(b"{{ 1 }}", HI)
    with pytest.raises(TypeError):
        impl.render_template("{{ 1 }}", "Hi")
    with pytest.raises(TypeError):
        impl.render_template("{{ 1 }}", {"role": "user", "content": "Hi"})
    with pytest.raises(TypeError) as info:
        impl.render_template("{{ 1 }}", [{"role": "user", "content": "a"}, "b"])
    assert re.search(r"\b1\b", str(info.value)), "the error should name message 1"


@pytest.mark.weight(0.5)
def test_result_is_exactly_str(impl):
    """render_template returns exactly a str (never a subclass or a Markup object)."""
    got = impl.render_template("{{ messages[0].content }}<&>", [{"role": "user", "content": "<b>"}])
    assert type(got) is str and str.__eq__(got, "<b><&>"), "no HTML escaping, and a plain str"


SMOLLM2 = TEMPLATES["smollm2"]["source"]
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
TEXT = st.lists(st.one_of(st.characters(exclude_categories=("Cs",)), st.sampled_from(
    ["\n", "  ", "\t", "<|im_end|>", "{{ x }}", "{% if %}", "'", '"', "\\"])), max_size=25).map("".join)
CONVERSATION = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]),
                                               "content": TEXT}), min_size=1, max_size=5)


@given(CONVERSATION, st.booleans())
def test_smollm2_template_on_any_conversation(impl, messages, generation):
    """SmolLM2's template renders any conversation as ChatML with its default system message, byte for byte.

    SmolLM2's template renders any conversation as ChatML with its default system message, byte for byte:
    message text is data, never template code, and nothing is escaped or stripped."""
    turns = [(m["role"], m["content"]) for m in messages]
    if turns[0][0] != "system":
        turns.insert(0, ("system", SMOLLM2_SYSTEM))
    want = "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in turns)
    want += "<|im_start|>assistant\n" if generation else ""
    got = impl.render_template(SMOLLM2, copy.deepcopy(messages), add_generation_prompt=generation)
    assert type(got) is str and got == want
