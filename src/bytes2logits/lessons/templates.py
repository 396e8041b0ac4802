"""Chat templates by hand: ChatML byte for byte, a small sandboxed Jinja renderer, and the increment that a
multi-turn chat appends to its prompt.

A chat model reads one string. The conversation ``[{"role": "user", "content": "Hi"}]`` reaches SmolLM2 as ::

    <|im_start|>user
    Hi<|im_end|>
    <|im_start|>assistant

(ChatML), and the model only answers well when every marker, role name and newline is where its training
put them. Each model family writes turns differently, so a model ships its recipe as a small program in the
Jinja template language: the GGUF key ``tokenizer.chat_template`` (``chat_template`` in a Hugging Face
``tokenizer_config.json``). This module is lab 07:

* :func:`render_chatml` writes ChatML directly, with the optional default system message that SmolLM2's
  and Qwen2.5's templates insert;
* :class:`StrictSandbox`, :class:`GenerationBlock`, :func:`make_environment`, :func:`template_line` and
  :func:`render_template` run a model's own template the way Hugging Face ``transformers`` does
  (``apply_chat_template(..., tokenize=False)``), inside Jinja's sandbox, and turn every failure into an error
  that names the template line;
* :func:`render_increment` gives the text that turns the rendering of a conversation into the rendering of
  a longer one, and refuses when the template rewrites earlier turns (Qwen3 drops old ``<think>`` blocks).
  It is the first check before a chat reuses its KV cache, not the last: the cache holds what the model
  evaluated, which is not a rendering of the history (the function's docstring says how they differ).

How this differs from :mod:`bytes2logits.engine.chat`, and why both exist
------------------------------------------------------------------
:class:`bytes2logits.engine.chat.ChatTemplate` is the engine's renderer, the one the chat command uses on
templates from anywhere. It is checked byte for byte against ``transformers`` on 70 real templates and is
hardened: it meters loop iterations, render time and output size, refuses more routes to Python internals
(``func_globals``, ``mro``...), guards the ``dict``/``namespace`` globals, copies inputs into plain JSON
types, aliases reasoning fields (``thinking``, ``reasoning`` and ``reasoning_content``, as ``transformers``
does) and validates messages field by field. That is several hundred lines. This module is what a learner
writes in an afternoon and keeps the parts that decide the *bytes*: the same sandbox class and settings
(``trim_blocks``, ``lstrip_blocks``, ``loopcontrols``, the ``{% generation %}`` tag, ``raise_exception``, a
``tojson`` that keeps non-ASCII text, ``strftime_now``, ``tools`` and ``documents`` passed as ``None``,
``bos_token``/``eos_token`` from the caller). So on ordinary conversations (no reasoning fields) it renders
exactly what ``transformers`` renders, on every one of the 70 templates in llama.cpp's ``models/templates/``
(``tests/test_templates.py`` checks each against ``transformers``). It does not bound a template's running
time: use it on templates you have read, and :class:`~bytes2logits.engine.chat.ChatTemplate` on the rest.
"""

from __future__ import annotations

import json
import re
import traceback
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..errors import TemplateError

__all__ = [
    "IM_END",
    "IM_START",
    "GenerationBlock",
    "StrictSandbox",
    "TemplateError",
    "compile_template",
    "make_environment",
    "render_chatml",
    "render_increment",
    "render_template",
    "template_line",
]

#: ChatML's turn markers. Each is one control token in SmolLM2's and Qwen's vocabularies.
IM_START, IM_END = "<|im_start|>", "<|im_end|>"


def render_chatml(messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True,
                  default_system: str | None = None) -> str:
    """Render a conversation in ChatML, byte for byte.

    Each message becomes ``<|im_start|>`` + role + ``"\\n"`` + content + ``<|im_end|>`` + ``"\\n"``; nothing
    is stripped or added, so the content's own spaces and newlines survive. With ``add_generation_prompt``
    the text ends with ``<|im_start|>assistant\\n``: an assistant turn that is open, so the model's next
    token is the first token of its answer. Without it the text ends after the last ``<|im_end|>\\n`` (a
    finished conversation, e.g. a training example).

    ``default_system``: when given and the first message is not a system message, a system message with
    this content is rendered first. SmolLM2's template does this with "You are a helpful AI assistant named
    SmolLM, trained by Hugging Face", Qwen2.5's with "You are Qwen, created by Alibaba Cloud. You are a
    helpful assistant."

    Raises ``TypeError`` if ``messages`` is not a list of dicts or a role, content or ``default_system`` is
    not a ``str``, and ``ValueError`` if the list is empty, a message has no ``"role"`` or ``"content"``, or a
    role is empty. Each message names the index of the message at fault.

    >>> render_chatml([{"role": "user", "content": "Hi"}])
    '<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n'
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise TypeError(f"messages must be a list of dicts, got {type(messages).__name__}")
    if not messages:
        raise ValueError("messages is empty: a conversation needs at least one message")
    if default_system is not None and not isinstance(default_system, str):
        raise TypeError(f"default_system must be a str or None, got {type(default_system).__name__}")
    turns = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TypeError(f"message {i} must be a dict with 'role' and 'content', "
                            f"got {type(message).__name__}")
        for field in ("role", "content"):
            if field not in message:
                raise ValueError(f"message {i} has no {field!r} field")
            if not isinstance(message[field], str):
                raise TypeError(f"message {i}: {field!r} must be a str, got {type(message[field]).__name__}")
        if not message["role"]:
            raise ValueError(f"message {i}: 'role' is empty")
        turns.append((message["role"], message["content"]))
    if default_system is not None and turns[0][0] != "system":
        turns.insert(0, ("system", default_system))
    parts = []
    for role, content in turns:
        parts += [IM_START, role, "\n", content, IM_END, "\n"]
    if add_generation_prompt:
        parts += [IM_START, "assistant", "\n"]
    return "".join(parts)  # join copies the characters: the result is a plain str even for str subclasses


class StrictSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox, except that a refused access fails at once.

    A chat template comes from the internet, so it runs in ``ImmutableSandboxedEnvironment``: attributes
    that start with ``_`` (``''.__class__``, the first step of every escape to Python internals) and methods
    that modify a list or dict (``messages.append``) are refused. Plain Jinja "refuses" by handing back an
    undefined value that prints as ``""``, so ``{{ ''.__class__ }}`` renders silently. Here the refusal is
    a ``SecurityError`` raised where the template tried, so the error can name that line.
    """

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        """Called by the sandbox for every refused attribute: raise instead of returning an undefined."""
        raise SecurityError(f"access to attribute {attribute!r} of a {type(obj).__name__} object is refused")


class GenerationBlock(Extension):
    """The ``{% generation %}...{% endgeneration %}`` tag, as ``transformers`` defines it: rendering outputs
    the body unchanged.

    The tag marks text the *assistant* wrote. ``transformers`` records the character span of every block
    it renders and, with ``apply_chat_template(..., return_assistant_tokens_mask=True)``, turns those spans
    into a mask over the tokens: 1 for the tokens of the assistant's answers, 0 for the rest. Fine-tuning
    uses that mask so the loss counts only the answers, not the prompts. LFM2.5's and poolside Laguna's
    templates wrap each assistant turn in the tag. Jinja does not know it, so an environment without this
    extension refuses those templates with a syntax error, although they render fine.

    The body becomes a *call block*: the body is a small macro that :meth:`_render_body` calls, exactly as
    ``transformers``' ``AssistantTracker`` does. So, as there, a ``{% set %}`` inside the block stays
    inside it (a ``namespace`` attribute set inside it is seen after it), which decides the bytes of
    templates that set variables in the block.
    """

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        """Called when the parser meets ``{% generation %}``: read the body up to ``{% endgeneration %}`` and
        return a call block whose output is what :meth:`_render_body` returns, on the tag's line."""
        lineno = next(parser.stream).lineno  # the token "generation" itself
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller: Any) -> str:
        """Render the block: ``caller()`` renders its body. (``transformers`` also notes the span here.)"""
        return caller()


def make_environment() -> StrictSandbox:
    """A :class:`StrictSandbox` set up as ``transformers`` sets up its chat-template environment.

    * ``trim_blocks=True`` and ``lstrip_blocks=True``: a block tag such as ``{% if %}`` on a line of its own
      swallows its indentation and the newline after it, so indenting a template does not add spaces;
    * the ``loopcontrols`` extension (``{% break %}`` and ``{% continue %}``) and :class:`GenerationBlock`
      (``{% generation %}``, which marks the assistant's text for a training mask);
    * ``raise_exception(message)``: a template's way of refusing a conversation it cannot format (Gemma's
      refuses a system message);
    * a ``tojson`` filter that is plain ``json.dumps``: unlike Jinja's own, it keeps non-ASCII text and
      ``<>&'`` as they are, and takes ``indent``, ``separators`` and ``sort_keys``;
    * ``strftime_now(format)``: today's date, which some templates write into the system prompt.
    """
    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format: str) -> str:
        return datetime.now().strftime(format)

    env = StrictSandbox(trim_blocks=True, lstrip_blocks=True,
                        extensions=["jinja2.ext.loopcontrols", GenerationBlock])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def compile_template(source: str) -> jinja2.Template:
    """Compile Jinja ``source`` in a fresh :func:`make_environment`: parse it, turn it into Python code and
    load that code. A syntax error raises ``jinja2.TemplateSyntaxError``, whose ``lineno`` is the line.

    Compiling a real template takes milliseconds, so :func:`render_template` simply compiles on every call;
    :class:`bytes2logits.engine.chat.ChatTemplate` compiles once and renders many times.
    """
    return make_environment().from_string(source)


def template_line(exc: BaseException) -> int | None:
    """The template line where ``exc`` happened, or ``None`` when it did not happen inside the template.

    A syntax error carries the line as ``exc.lineno``. For an error while rendering, Jinja rewrites the
    traceback so that every frame of the template's compiled code has the file name ``"<template>"`` and
    the *template's* line number; the innermost such frame is where it happened (inside a macro, that is
    the macro's line, not the line that called it).
    """
    if isinstance(exc, jinja2.TemplateSyntaxError):
        return exc.lineno
    frames = traceback.extract_tb(exc.__traceback__)
    lines = [frame.lineno for frame in frames if frame.filename == "<template>"]
    return lines[-1] if lines else None


def render_template(template: str, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = False,
                    **context: Any) -> str:
    """Render ``messages`` with the Jinja chat ``template``, exactly as ``transformers`` does.

    The template sees ``messages``, ``add_generation_prompt``, ``tools`` and ``documents`` (``None`` unless
    given) and every keyword in ``context``: the model's special-token texts (``bos_token="<s>"``,
    ``eos_token="</s>"``) and switches such as ``enable_thinking=False``. ``add_generation_prompt`` is
    ``False`` by default, as in ``transformers``.

    Every failure raises :class:`~bytes2logits.errors.TemplateError` (a ``ValueError``) whose message starts
    with the template line, e.g. ``template line 3: syntax error: ...``, followed by that line's text, and
    keeps the original exception as ``__cause__``: a syntax error, the template's own
    ``raise_exception("...")`` (its message is included), a runtime error such as calling a method that
    does not exist, and an access the sandbox refuses (``{{ ''.__class__.__mro__ }}``). A ``template`` that
    is not a ``str`` raises ``TypeError``, and so does ``messages`` unless it is a list of dicts (naming the
    message index).
    """
    if not isinstance(template, str):
        raise TypeError(f"template must be a str of Jinja source, got {type(template).__name__}")
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise TypeError(f"messages must be a list of dicts, got {type(messages).__name__}")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TypeError(f"message {i} must be a dict, got {type(message).__name__}")
    variables = {"tools": None, "documents": None, **context,
                 "messages": list(messages), "add_generation_prompt": add_generation_prompt}
    try:
        return compile_template(template).render(variables)
    except Exception as exc:
        if isinstance(exc, jinja2.TemplateSyntaxError):
            what = f"syntax error: {exc.message}"
        elif isinstance(exc, SecurityError):
            what = f"refused by the sandbox: {exc}"
        elif type(exc) is jinja2.exceptions.TemplateError:  # the template called raise_exception(...)
            what = f"the template refused: {exc}"
        else:
            what = f"{type(exc).__name__}: {exc}"
        line = template_line(exc)
        if line is None:
            raise TemplateError(f"chat template: {what}") from exc
        text = re.split(r"\r\n|\r|\n", template)[line - 1].strip()  # Jinja counts lines the same way
        text = text if len(text) <= 200 else text[:200] + " ..."
        raise TemplateError(f"template line {line}: {what}\n    {line} | {text}") from exc


def render_increment(template: str, history: Sequence[Mapping[str, Any]],
                     new_messages: Sequence[Mapping[str, Any]], **context: Any) -> str:
    """The text that turns the rendering of ``history`` into the rendering of ``history + new_messages``,
    ready for the model's answer.

    A chat keeps the tokens it has already evaluated (the KV cache) and would like to feed the model only
    what is new. The first condition for that is about the template: the rendering of ``history`` (without
    the generation prompt: it ends after the last turn) must be a *prefix* of the rendering of
    ``history + new_messages`` with the generation prompt; the increment is what follows that prefix. An
    empty ``history`` renders as ``""``, so the increment is then the whole prompt. ``context`` goes to
    :func:`render_template` for both renderings.

    Some templates rewrite earlier turns when a new one arrives: Qwen3 keeps an assistant's ``<think>``
    block only after the last user message, and Mistral's puts the system message into the last user turn.
    Then the history's text is not a prefix, and this raises :class:`~bytes2logits.errors.TemplateError`
    naming the character offset where the two renderings first differ and showing both texts from there,
    instead of returning a wrong increment.

    The check is necessary, not sufficient, because the cache does not hold a rendering of ``history``: it
    holds the previous prompt *with* its generation prompt, then the answer's tokens as they were sampled.

    * The stop token that ended the answer (``<|im_end|>``) was sampled but never fed back, and the
      ``"\\n"`` ChatML writes after it was never seen: both must be fed before the increment.
    * A template that rewrites every past turn alike passes the check while the cache disagrees with both
      renderings: DeepSeek-R1's deletes the reasoning up to ``</think>`` from every assistant message, the
      one just generated included, so the increment is clean yet the cache still holds the reasoning.
    * A text prefix need not be a token prefix: the ids sampled for an answer need not be the ids its text
      tokenizes to, and BPE can merge characters across the point where two texts are joined.

    So an engine compares token ids with the ids in its cache and rewinds to the first difference, as
    :class:`bytes2logits.engine.session.ChatSession` does. ``history`` and ``new_messages`` must be lists
    (``TypeError``).
    """
    for name, value in (("history", history), ("new_messages", new_messages)):
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            raise TypeError(f"{name} must be a list of message dicts, got {type(value).__name__}")
    before = render_template(template, history, add_generation_prompt=False, **context) if history else ""
    after = render_template(template, [*history, *new_messages], add_generation_prompt=True, **context)
    if after.startswith(before):
        return after[len(before):]
    at = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b), min(len(before), len(after)))
    line = before.count("\n", 0, at) + 1
    raise TemplateError(
        f"the history's rendering is not a prefix of the new conversation's: they diverge at character {at} "
        f"(line {line} of the history's rendering), where the history has {before[at:at + 40]!r} but the new "
        f"conversation has {after[at:at + 40]!r}; the template rewrites earlier turns, so the prompt must be "
        "evaluated again from that point"
    )
