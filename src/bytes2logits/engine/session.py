"""A multi-turn chat on top of the engine: template → tokens → KV cache → generation, turn after turn.

Each turn the whole conversation is rendered again with the model's own chat template and tokenized. The
ids that are already in the KV cache (the longest common prefix with what was evaluated last turn) are not
evaluated again: only the new tail goes through the model, starting at the first position that differs.
That is how a chat stays fast as its history grows, and it stays correct when re-tokenizing the
assistant's answer gives slightly different ids than the ones it sampled: the cache is rewound to the first
difference.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from ..errors import TokenizerError
from .checks import check_context
from .tokenizer import chat_template_of

__all__ = ["ChatSession", "chat_prompt_ids", "common_prefix_length", "message_spans"]


def message_spans(tokenizer, messages: list[dict], text: str, **context) -> list[tuple[int, int]]:
    """Where the messages' own text sits in the rendered prompt ``text``, for the messages that need it.

    Only a message whose content contains the text of a control token (``<|im_end|>``, ``<|im_start|>``…)
    needs protecting. To find it, the conversation is rendered again with a unique placeholder instead
    of each content; replacing the placeholders by the contents must give ``text`` back, and then the
    placeholders' positions are the contents' spans. A template that rewrites message text (so the
    check fails) while a message carries marker text is refused with a :class:`TokenizerError`.
    ``context`` holds the template variables ``text`` was rendered with (``tools=``,
    ``enable_thinking=False``): the placeholder copy must be rendered with the same ones.
    """
    markers = tuple(tokenizer.special_tokens)
    risky = [i for i, m in enumerate(messages)
             if isinstance(m.get("content"), str) and any(t in m["content"] for t in markers)]
    if not risky:
        return []
    holders = {i: f"\ue000{i}\ue001" for i in risky}
    stand_in = [dict(m, content=holders[i]) if i in holders else m for i, m in enumerate(messages)]
    skeleton = chat_template_of(tokenizer).render(stand_in, add_generation_prompt=True, **context)
    spans, rebuilt, pos = [], [], 0
    for i in risky:
        at = skeleton.find(holders[i], pos)
        if at < 0:
            break
        rebuilt.append(skeleton[pos:at])
        start = sum(map(len, rebuilt))
        rebuilt.append(messages[i]["content"])
        spans.append((start, start + len(messages[i]["content"])))
        pos = at + len(holders[i])
    rebuilt.append(skeleton[pos:])
    if len(spans) != len(risky) or "".join(rebuilt) != text:
        i = risky[0]
        found = next(t for t in markers if t in messages[i]["content"])
        raise TokenizerError(
            f"message {i} ({messages[i].get('role')}) contains the control-token text {found!r}, and this chat "
            f"template changes message text before inserting it, so it cannot be kept as plain text: remove it"
        )
    return spans


def chat_prompt_ids(tokenizer, messages: list[dict], **context) -> list[int]:
    """The ids of a chat prompt: the model's own template, rendered, then encoded the safe way.

    1. render ``messages`` with :func:`~bytes2logits.engine.tokenizer.chat_template_of` (the GGUF's
       ``tokenizer.chat_template``, in the sandbox), ending in the assistant's opener;
    2. find where the messages' own text sits in the prompt (:func:`message_spans`);
    3. encode with every control token allowed (the template's markers become single ids) except inside
       those spans, where marker text a user typed stays ordinary text.

    ``context`` reaches the template (``tools=...``, ``enable_thinking=False``). These are the ids
    llama.cpp evaluates for the same conversation.
    """
    text = chat_template_of(tokenizer).render(messages, add_generation_prompt=True, **context)
    spans = message_spans(tokenizer, messages, text, **context)
    return tokenizer.encode(text, allowed_special="all", literal_spans=spans)


def common_prefix_length(a, b) -> int:
    """Length of the longest common prefix of two id sequences."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@dataclass
class ChatSession:
    """A conversation with a model: keeps the messages and which ids are already in the KV cache.

    >>> chat = ChatSession(model, tokenizer, system="You are brief.")     # doctest: +SKIP
    >>> for piece in chat.send("What is the capital of France?"):        # doctest: +SKIP
    ...     print(piece, end="")
    The capital of France is Paris.
    """

    model: object
    tokenizer: object
    system: str | None = None
    sampler: object = None
    max_tokens: int = 512
    stop_strings: tuple[str, ...] = ()
    messages: list[dict] = field(default_factory=list)
    cached_ids: list[int] = field(default_factory=list)
    last: object = None  # the last Generation (stats, stop reason)
    last_prompt_tokens: int = 0
    last_new_tokens: int = 0
    #: prompt-lookup decoding for every answer: None/0 (off), a draft length, or a LookupConfig
    lookup: object = field(default=None, kw_only=True)
    # model.cache_writes when this session's last answer ended: if it changed, another caller has used the
    # model since, and its KV cache no longer holds cached_ids
    _cache_mark: object = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        from ..errors import TokenizerError

        if self.model.vocab_size != self.tokenizer.vocab_size:
            raise TokenizerError(
                f"the model's token_embd.weight has {self.model.vocab_size} rows but tokenizer.ggml.tokens has "
                f"{self.tokenizer.vocab_size} entries: this tokenizer does not belong to this model"
            )
        if self.system:
            self.messages.append({"role": "system", "content": self.system})
        from .lookup import LookupConfig

        self.lookup = LookupConfig.of(self.lookup)  # a bad value fails here, not at the first answer

    def reset(self) -> None:
        """Start over: drop the history (but keep the system prompt) and the cached ids."""
        self.messages = [m for m in self.messages[:1] if m["role"] == "system"]
        self.cached_ids = []
        self.model.reset()
        self._cache_mark = getattr(self.model, "cache_writes", None)

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        """Render ``messages`` with the chat template (ending in the assistant opener) and tokenize them.

        The markers the *template* writes become control tokens; marker text inside a *message*
        (a user typing ``<|im_end|>``) stays plain text, so nobody can close their turn and open a fake
        system turn. See :func:`message_spans`.
        """
        return chat_prompt_ids(self.tokenizer, messages)

    def send(self, text: str):
        """Add a user message and yield the answer's text as it is generated.

        The answer is added to the history when generation ends (also when the caller stops iterating early,
        e.g. on Ctrl-C, in which case the partial answer is kept).
        """
        from .generate import generate

        messages = self.messages + [{"role": "user", "content": text}]
        ids = self.prompt_ids(messages)
        # the prompt, and room for at least one answer token
        check_context(0, len(ids) + 1, self.model.n_ctx, "Start a new conversation or use a larger context (--n-ctx).")
        if getattr(self.model, "cache_writes", None) != self._cache_mark:
            self.cached_ids = []  # someone else ran the model since our last answer: its cache is not ours
        keep = min(common_prefix_length(ids, self.cached_ids), self.model.n_past, len(ids) - 1)
        new = ids[keep:]
        self.last_prompt_tokens, self.last_new_tokens = len(ids), len(new)
        gen = generate(self.model, self.tokenizer, new, start_pos=keep, sampler=self.sampler, history=ids[:keep],
                       max_tokens=self.max_tokens, stop_strings=self.stop_strings, lookup=self.lookup)
        self.last = gen
        self.messages = messages
        pieces: list[str] = []
        try:
            for piece in gen:
                pieces.append(piece)
                yield piece
        finally:
            answer = "".join(pieces)
            self.messages = messages + [{"role": "assistant", "content": answer}]
            # The model knows how many positions hold valid keys/values; they are the prompt's ids followed by
            # the generated ids that were fed back (the last sampled one never is).
            self.cached_ids = (ids + list(gen.tokens))[: self.model.n_past]
            self._cache_mark = getattr(self.model, "cache_writes", None)

    def ask(self, text: str) -> str:
        """Send a message and return the whole answer."""
        return "".join(self.send(text))


def print_stats(session: ChatSession, file=None) -> None:
    """Print the speeds of the last turn (what ``chat --verbose`` shows) to ``file`` (default: standard error)."""
    g = session.last
    if g is None:
        return
    file = sys.stderr if file is None else file  # looked up now: a redirected sys.stderr is honoured
    spec = ""
    if g.lookup is not None:
        spec = (f"; lookup: {g.accepted}/{g.drafted} drafted tokens accepted ({g.acceptance_rate:.0%}), "
                f"{g.forward_calls} forward calls")
    print(
        f"\n[prompt {session.last_prompt_tokens} tokens, {session.last_new_tokens} evaluated "
        f"({g.prefill_tokens_per_second:.1f} tok/s prefill); {len(g.tokens)} generated "
        f"({g.decode_tokens_per_second:.1f} tok/s decode){spec}; stop: {g.stop_reason}]",
        file=file,
    )
