"""Chat templates: turn a list of messages into the exact prompt text a chat model was trained on.

A chat model never sees "messages". It sees one long string in which every turn is wrapped in the
model's own control tokens, for example ChatML::

    <|im_start|>user
    Hello!<|im_end|>
    <|im_start|>assistant

Every model family wraps turns differently, so the recipe ships with the model as a small program in the
`Jinja <https://jinja.palletsprojects.com>`_ template language (the GGUF key ``tokenizer.chat_template``,
or ``chat_template`` in a Hugging Face ``tokenizer_config.json``). Rendering that program with the
conversation is how the prompt is built, and getting it wrong by a single space or newline silently makes
a model worse, so this module renders templates *byte-identically* to the Hugging Face ``transformers``
library (its ``apply_chat_template(..., tokenize=False)``), which is what most templates were written and
tested against. ``tests/test_chat.py`` checks that against 70 real templates.

What ``transformers`` does, and therefore what :class:`ChatTemplate` does:

* compile with Jinja's ``ImmutableSandboxedEnvironment`` (templates come from the internet: they must not
  reach Python internals, and they must not modify the lists and dicts they are given), with
  ``trim_blocks=True`` and ``lstrip_blocks=True`` (a block tag such as ``{% if %}`` swallows the newline
  after it and the indentation before it) and the ``loopcontrols`` extension (``{% break %}``,
  ``{% continue %}``);
* a ``tojson`` filter that does *not* escape HTML characters or non-ASCII text, and accepts ``indent``,
  ``separators`` and ``sort_keys``;
* globals ``raise_exception(message)`` (templates use it to refuse conversations they cannot format),
  ``strftime_now(format)`` (today's date for system prompts), a ``dict`` that only builds dicts, and a
  ``namespace`` that refuses underscore-prefixed attribute names;
* a ``{% generation %}...{% endgeneration %}`` block tag (it marks the assistant's text for training; when
  only rendering it just outputs its body);
* the variables ``messages``, ``add_generation_prompt``, ``tools``, ``documents`` (``None`` when not
  given), ``bos_token``, ``eos_token`` and any extra keyword (e.g. ``enable_thinking=False``);
* message keys whose value is ``None`` are dropped first, inputs are rebuilt from plain JSON-like types,
  and a message's reasoning given as ``reasoning_content``, ``thinking`` or ``reasoning`` is visible under
  ``reasoning_content`` and ``thinking``.

What this module adds (it is stricter, never more lenient):

* every failure is a :class:`~bytes2logits.errors.TemplateError` that names the template, the *template*
  line and that line's text (a syntax error, ``raise_exception``, calling a missing method, a type error);
* touching Python internals (``__class__``, ``mro``, ``func_globals``, ``list.append`` ...) is refused as
  soon as the template touches them; plain Jinja would print an empty string for ``{{ x.__class__ }}``;
* rendering is bounded. Jinja's sandbox already refuses ``range()`` of more than 100,000 items
  (``range(10**9)`` fails at once with an ``OverflowError``), but nested loops over smaller ranges could
  still run for hours, so every ``{% for %}`` draws from a budget of :data:`MAX_LOOP_ITERATIONS` per render,
  a render stops after :data:`MAX_RENDER_SECONDS` seconds or :data:`MAX_OUTPUT_CHARS` characters, and ``*``
  and ``**`` refuse to build huge strings, lists or numbers. (String methods and ``~`` concatenation are
  not metered, so a determined template can still use a lot of memory; the limits stop accidents and the
  obvious bombs.)
* messages are validated before rendering (a list of dicts, each with a ``role`` and a ``content``).

Example::

    >>> t = ChatTemplate.chatml()
    >>> print(t.render([{"role": "user", "content": "Hi"}]), end="")
    <|im_start|>user
    Hi<|im_end|>
    <|im_start|>assistant
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import math
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox
import jinja2.utils
from jinja2.exceptions import SecurityError, TemplateSyntaxError, UndefinedError

from ..errors import TemplateError

__all__ = [
    "CHATML_TEMPLATE",
    "MAX_LOOP_ITERATIONS",
    "MAX_OUTPUT_CHARS",
    "MAX_RENDER_SECONDS",
    "ChatTemplate",
    "TemplateError",
    "validate_messages",
]

#: The ChatML format (used by Qwen, SmolLM2 and many others): each turn is ``<|im_start|>ROLE\n`` +
#: content + ``<|im_end|>\n``; with ``add_generation_prompt`` the prompt ends with an open assistant turn.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}"
)

#: Total ``{% for %}`` iterations one render may run (all loops together). Real templates use a few hundred.
MAX_LOOP_ITERATIONS = 1_000_000
#: Wall-clock limit for one render, checked while loops run and whenever output is produced.
MAX_RENDER_SECONDS = 10.0
#: Longest prompt one render may produce (far beyond any model's context window).
MAX_OUTPUT_CHARS = 50_000_000
#: Largest string/list that ``*`` may build, and the largest integer (in bits) that ``**`` may build.
MAX_REPEAT_LEN = 10_000_000
MAX_POWER_BITS = 100_000

# Message fields a model's reasoning ("thinking") may arrive under; transformers shows it under the first
# two names, because templates read either ``reasoning_content`` or (gpt-oss) ``thinking``.
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
# Attribute names refused on top of Jinja's own rules (which refuse anything starting with "_" and a few
# frame/code attributes): they lead from an ordinary object to types, functions or frames.
_REFUSED_ATTRIBUTES = frozenset(
    {
        "mro", "func_globals", "func_code", "func_closure", "func_defaults", "func_dict",
        "im_func", "im_self", "im_class", "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code",
        "ag_frame", "ag_code", "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "tb_frame",
        "tb_next",
    }
)
_LOOP_FILTER = "b2l_bounded_loop"  # the hidden filter every {% for %} iterable is routed through


# --------------------------------------------------------------------------------------------------
# The Jinja environment
# --------------------------------------------------------------------------------------------------


class _RenderBudget:
    """The limits of one render: loop iterations left and the wall-clock deadline."""

    def __init__(self) -> None:
        self.iterations_left = MAX_LOOP_ITERATIONS
        self.deadline = time.monotonic() + MAX_RENDER_SECONDS

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise TimeoutError(f"rendering took longer than MAX_RENDER_SECONDS ({MAX_RENDER_SECONDS} s)")


_budget: contextvars.ContextVar[_RenderBudget | None] = contextvars.ContextVar("b2l_render_budget", default=None)


@jinja2.pass_context  # pass_context also stops Jinja from evaluating it at compile time
def _bounded_loop(context: Any, iterable: Any) -> Any:
    """Yield the items of a ``{% for %}`` loop's iterable, charging each one to the render budget."""
    iterator = iter(iterable)  # a non-iterable fails here, on the template line of the loop
    budget = _budget.get()
    if budget is None:  # rendered outside ChatTemplate.render (e.g. by hand): no budget to charge
        return iterator
    return _charge(iterator, budget)


def _charge(iterator: Any, budget: _RenderBudget) -> Any:
    for item in iterator:
        budget.iterations_left -= 1
        if budget.iterations_left < 0:
            raise OverflowError(f"template loops ran more than MAX_LOOP_ITERATIONS ({MAX_LOOP_ITERATIONS}) times")
        if budget.iterations_left % 4096 == 0:
            budget.check_time()
        yield item


def _route_loops_through_budget(tree: jinja2.nodes.Template) -> None:
    for loop in tree.find_all(jinja2.nodes.For):
        loop.iter = jinja2.nodes.Filter(loop.iter, _LOOP_FILTER, [], [], None, None, lineno=loop.iter.lineno)


class _GenerationBlock(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}``: marks assistant text for training; rendering outputs the body."""

    tags = {"generation"}

    def parse(self, parser: Any) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    @staticmethod
    def _body(caller: Any) -> str:
        return caller()


class _Undefined(jinja2.Undefined):
    """Jinja's lenient undefined (prints as ``""``), except for a value the sandbox refused to hand out:
    using that in any way raises ``SecurityError`` instead of quietly printing nothing."""

    __slots__ = ()

    def _refused(self) -> bool:
        return self._undefined_exception is SecurityError

    def __str__(self) -> str:
        if self._refused():
            self._fail_with_undefined_error()
        return super().__str__()

    def __iter__(self) -> Any:
        if self._refused():
            self._fail_with_undefined_error()
        return super().__iter__()

    def __bool__(self) -> bool:
        if self._refused():
            self._fail_with_undefined_error()
        return super().__bool__()

    def __len__(self) -> int:
        if self._refused():
            self._fail_with_undefined_error()
        return super().__len__()


class _Sandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):
    """The immutable sandbox plus: more refused attribute names, and bounded ``*`` and ``**``."""

    intercepted_binops = frozenset({"*", "**"})

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        return attr not in _REFUSED_ATTRIBUTES and super().is_safe_attribute(obj, attr, value)

    def getattr(self, obj: Any, attribute: str) -> Any:
        # Going on from a refused value (``''.__class__.__mro__``) reports the first refusal, not the last.
        _not_refused(obj)
        # Jinja refuses an internal attribute only when the object has it; refuse the *attempt* as well
        # (e.g. ``f.func_globals``, a Python 2 name), unless it is simply a key of a dict.
        if isinstance(attribute, str) and (attribute.startswith("__") or attribute in _REFUSED_ATTRIBUTES):
            if not (isinstance(obj, Mapping) and attribute in obj):
                return self.unsafe_undefined(obj, attribute)
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        _not_refused(obj)
        return super().getitem(obj, argument)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_REPEAT_LEN:
                    raise OverflowError(f"'*' would build a sequence longer than MAX_REPEAT_LEN ({MAX_REPEAT_LEN})")
        elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
            if right * math.log2(abs(left)) > MAX_POWER_BITS:
                raise OverflowError(f"'**' would build an integer of more than MAX_POWER_BITS ({MAX_POWER_BITS}) bits")
        return super().call_binop(context, operator, left, right)


def _raise_exception(message: Any) -> None:
    """The template's own way to refuse a conversation: ``{{ raise_exception('...') }}``."""
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    """``tojson`` as chat templates expect it: plain ``json.dumps``, keeping non-ASCII and ``<>&'`` as is."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format: str) -> str:
    """Today's local date/time formatted with ``datetime.strftime`` (e.g. ``"%d %b %Y"``)."""
    return datetime.now().strftime(format)


class _DictBuilder:
    """The template's ``dict``: it can build dicts (``dict(a=1)``, ``dict.fromkeys(...)``) but is not the
    ``dict`` type itself, so a template cannot use it to reach other types."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
        return dict.fromkeys(*args, **kwargs)


def _check_namespace_name(name: Any) -> None:
    if isinstance(name, str) and name.startswith("_"):
        raise SecurityError(f"a namespace attribute may not start with an underscore: {name!r}")


class _Namespace(jinja2.utils.Namespace):
    """The template's ``namespace(...)``: Jinja's, but refusing attribute names that start with ``_``."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # no named self, so namespace(self=1) works as in Jinja
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _check_namespace_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _check_namespace_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)


def _not_refused(value: Any) -> bool:
    """True, unless ``value`` is a refused access: then raise the sandbox's ``SecurityError``."""
    if isinstance(value, _Undefined) and value._refused():
        value._fail_with_undefined_error()
    return True


def _make_environment() -> _Sandbox:
    env = _Sandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_GenerationBlock, jinja2.ext.loopcontrols],
        undefined=_Undefined,
    )
    # ``x is defined`` on a value the sandbox refused is a refusal too, not a quiet ``False``.
    env.tests["defined"] = lambda value: _not_refused(value) and not isinstance(value, jinja2.Undefined)
    env.tests["undefined"] = lambda value: _not_refused(value) and isinstance(value, jinja2.Undefined)
    env.filters["tojson"] = _tojson
    env.filters[_LOOP_FILTER] = _bounded_loop
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _DictBuilder()
    env.globals["namespace"] = _Namespace
    return env


_ENVIRONMENT: list[_Sandbox] = []


def _env() -> _Sandbox:
    """The one environment every template compiles in, made at its first use (not at import)."""
    if not _ENVIRONMENT:
        _ENVIRONMENT.append(_make_environment())
    return _ENVIRONMENT[0]


# --------------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Rebuild ``value`` from plain JSON-like types, so a template only ever sees str/int/float/bool/None,
    dicts, lists and tuples (rich objects have methods the sandbox cannot judge). Anything else becomes a
    placeholder string such as ``"<ndarray>"``."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):  # str subclasses (e.g. a str Enum) lose their extra methods
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    item = getattr(value, "item", None)  # NumPy scalars
    if type(value).__module__ == "numpy" and callable(item) and getattr(value, "shape", None) == ():
        return _plain(item())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return f"<{type(value).__name__}>"


def validate_messages(messages: Any) -> list[dict]:
    """Check a conversation and return it the way templates receive it.

    A conversation is a non-empty list of dicts. Each needs a ``"role"`` (a non-empty string) and a
    ``"content"``: a string, or a list of content parts (dicts such as ``{"type": "text", "text": ...}``).
    An assistant message that only calls tools may leave ``content`` out (or ``None``) if it has
    ``"tool_calls"``. Keys whose value is ``None`` are dropped (APIs like OpenAI's send ``content=None``,
    which many templates would print as ``None``), exactly as ``transformers`` does.

    Raises :class:`TemplateError` naming the message index and the field that is wrong.
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, (list, tuple)):
        raise TemplateError(f"messages must be a list of dicts, got {type(messages).__name__}")
    if not messages:
        raise TemplateError("messages is empty: a conversation needs at least one message")
    cleaned = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TemplateError(f"message {i} must be a dict with 'role' and 'content', got {type(message).__name__}")
        message = {k: v for k, v in message.items() if v is not None}
        role = message.get("role")
        if role is None:
            raise TemplateError(f"message {i} has no 'role' field")
        if not isinstance(role, str) or not role:
            raise TemplateError(f"message {i}: field 'role' must be a non-empty string, got {role!r}")
        if "content" not in message:
            if "tool_calls" not in message:
                raise TemplateError(f"message {i} ({role}) has no 'content' field (only a message with "
                                    "'tool_calls' may leave it out)")
        else:
            content = message["content"]
            if isinstance(content, (list, tuple)):
                for j, part in enumerate(content):
                    if not isinstance(part, Mapping):
                        raise TemplateError(f"message {i}: field 'content' part {j} must be a dict, "
                                            f"got {type(part).__name__}")
            elif not isinstance(content, str):
                raise TemplateError(f"message {i}: field 'content' must be a string or a list of parts, "
                                    f"got {type(content).__name__}")
        cleaned.append(message)
    return cleaned


def _alias_reasoning(message: dict) -> dict:
    """Make a message's reasoning readable as both ``reasoning_content`` and ``thinking``."""
    reasoning = next((message[k] for k in _REASONING_FIELDS if message.get(k) is not None), None)
    if reasoning is None:
        return message
    return {"thinking": reasoning, **message, "reasoning_content": reasoning}


# --------------------------------------------------------------------------------------------------
# Errors with template line numbers
# --------------------------------------------------------------------------------------------------


def _template_line(exc: BaseException, template: jinja2.Template, filename: str) -> int | None:
    """The template line where ``exc`` happened: the innermost traceback frame that runs this template.

    Jinja compiles a template to Python code and keeps a table from Python lines to template lines
    (``Template.get_corresponding_lineno``). When a render fails, Jinja rewrites the traceback: frames of
    the compiled code are replaced by fake frames whose file is the template's filename and whose line
    number already *is* the template line. Both kinds are handled, so this works whichever Jinja did.
    """
    line = None
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_globals.get("__jinja_template__") is template:  # raw compiled-template frame
            line = template.get_corresponding_lineno(tb.tb_lineno)
        elif frame.f_code.co_filename == filename:  # frame rewritten by jinja2.debug
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SecurityError):
        return f"refused by the sandbox: {exc}"
    if type(exc) is UndefinedError:
        return f"undefined: {exc}"
    if type(exc) is jinja2.exceptions.TemplateError:  # raise_exception(...) from the template itself
        return f"the template raised an error: {exc}"
    return f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------------------------------
# The template
# --------------------------------------------------------------------------------------------------


class ChatTemplate:
    """A compiled chat template, ready to render conversations into prompt text.

    ``source`` is the Jinja template (e.g. the GGUF metadata ``tokenizer.chat_template``). It is compiled
    once, here, so a broken template fails at construction with a :class:`TemplateError` naming the line.
    ``bos_token`` and ``eos_token`` are the model's special-token *strings* (templates often print
    ``bos_token`` at the start); ``name`` (e.g. the model or file name) appears in every error message.

    >>> t = ChatTemplate("{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\\n{% endfor %}",
    ...                  bos_token="<s>", name="toy")
    >>> t.render([{"role": "user", "content": "Hi"}])
    '<s>[user] Hi\\n'
    """

    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = "", name: str | None = None):
        if not isinstance(source, str):
            raise TemplateError(f"a chat template is a string of Jinja source, got {type(source).__name__}")
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.name = name
        self._label = f"chat template {name!r}" if name else "chat template"
        self._filename = f"<chat template {name}>" if name else "<chat template>"
        # Jinja counts lines on \r\n, \r and \n alike; do the same so line numbers point at the right text
        self._lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        env = _env()
        try:
            tree = env.parse(source, name=name, filename=self._filename)
            _route_loops_through_budget(tree)
            code = env.compile(tree, name=name, filename=self._filename)
        except TemplateSyntaxError as exc:
            raise self._error(exc.lineno, f"syntax error: {exc.message}") from exc
        self._template = env.template_class.from_code(env, code, env.make_globals(None), None)

    @classmethod
    def chatml(cls, *, bos_token: str = "", eos_token: str = "<|im_end|>", name: str = "chatml") -> ChatTemplate:
        """A :class:`ChatTemplate` for :data:`CHATML_TEMPLATE`, the format SmolLM2 and Qwen use."""
        return cls(CHATML_TEMPLATE, bos_token=bos_token, eos_token=eos_token, name=name)

    def __repr__(self) -> str:
        return f"ChatTemplate(name={self.name!r}, {len(self._lines)} lines)"

    def _error(self, line: int | None, what: str) -> TemplateError:
        if line is None or not 1 <= line <= len(self._lines):
            return TemplateError(f"{self._label}: {what}")
        return TemplateError(f"{self._label}, line {line}: {what}\n    {line} | {self._lines[line - 1].strip()}")

    def render(self, messages: Any, *, add_generation_prompt: bool = True, tools: Any = None,
               documents: Any = None, **context: Any) -> str:
        """Render a conversation into prompt text, exactly as ``transformers`` would.

        ``messages`` is a list of ``{"role": ..., "content": ...}`` dicts (see :func:`validate_messages`).
        ``add_generation_prompt=True`` (the default here, because this engine renders prompts in order to
        generate) ends the prompt with the header of a new assistant turn, e.g. ``<|im_start|>assistant\\n``.
        ``tools`` is a list of JSON-schema dicts describing functions the model may call and ``documents`` a
        list of dicts for retrieval; both reach the template as ``None`` when not given. Any other keyword
        (``enable_thinking=False``, ``date_string=...``) becomes a template variable, and may also override
        ``bos_token``/``eos_token``.

        The template sees exactly what ``tokenizer.apply_chat_template(messages, tools=tools,
        documents=documents, add_generation_prompt=..., tokenize=False, **context)`` would pass it.

        Raises :class:`TemplateError` (naming the template line) if the inputs are invalid, if the
        template fails or refuses (``raise_exception``), touches Python internals, or exceeds the limits.
        """
        chat = [_alias_reasoning(_plain(m)) for m in validate_messages(messages)]
        if tools is not None:
            if isinstance(tools, (str, Mapping)) or not isinstance(tools, (list, tuple)):
                raise TemplateError(f"tools must be a list of JSON-schema dicts, got {type(tools).__name__}")
            for i, tool in enumerate(tools):
                if not isinstance(tool, Mapping):
                    raise TemplateError(f"tool {i} must be a JSON-schema dict, got {type(tool).__name__}")
        if documents is not None:
            if isinstance(documents, (str, Mapping)) or not isinstance(documents, (list, tuple)):
                raise TemplateError(f"documents must be a list of dicts, got {type(documents).__name__}")
            for i, doc in enumerate(documents):
                if not isinstance(doc, Mapping):
                    raise TemplateError(f"document {i} must be a dict (with 'title' and 'text'), "
                                        f"got {type(doc).__name__}")
        variables = _plain({"bos_token": self.bos_token, "eos_token": self.eos_token, **context})
        variables.update(messages=chat, tools=_plain(tools), documents=_plain(documents),
                         add_generation_prompt=add_generation_prompt)
        return self._run(variables)

    def _run(self, variables: dict) -> str:
        budget = _RenderBudget()
        token = _budget.set(budget)
        pieces: list[str] = []
        size = 0
        try:
            for piece in self._template.generate(variables):
                pieces.append(piece)
                size += len(piece)
                if size > MAX_OUTPUT_CHARS:
                    raise OverflowError(f"the prompt grew past MAX_OUTPUT_CHARS ({MAX_OUTPUT_CHARS}) characters")
                budget.check_time()
        except Exception as exc:
            line = _template_line(exc, self._template, self._filename)
            raise self._error(line, _describe(exc)) from exc
        finally:
            _budget.reset(token)
        return "".join(pieces)
