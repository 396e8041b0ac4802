"""Hidden suite, lab 14 task 3: special_pattern and split_specials, the earliest-longest scan for special tokens."""

import random
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bytes2logits.engine.tokenizer import TokenType
from bytes2logits.kit.remote import timed

support = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("lab14_support.py"))))
STEPS = ["special_pattern", "split_specials"]
EXAMPLES = min(80, settings().max_examples)



@st.composite
def special_texts(draw, min_size=0):
    """A few special texts over a tiny alphabet, with prefixes of one another (so that matches overlap)."""
    base = draw(st.lists(st.text(alphabet="ab<|", min_size=1, max_size=4), min_size=min_size, max_size=4))
    prefixes = [t[:k] for t in base for k in draw(st.lists(st.integers(1, 3), max_size=2)) if 0 < k < len(t)]
    return sorted(set(base + prefixes))


@st.composite
def made_of(draw, texts, filler="ab<|> \n."):
    """A text made of some of ``texts`` (whole, or cut short) and filler."""
    pieces = [st.text(alphabet=filler, max_size=3)]
    if texts:
        pieces += [st.sampled_from(texts), st.sampled_from(texts).map(lambda t: t[:-1])]
    return "".join(draw(st.lists(st.one_of(*pieces), max_size=12)))


@st.composite
def scan_case(draw):
    """Special texts, some of them control, a text made of them and filler, literal spans and rstrip ids."""
    texts = draw(special_texts(min_size=1))
    text = draw(made_of(texts))
    ids = {t: 100 + i for i, t in enumerate(texts)}
    allowed = draw(st.lists(st.sampled_from(texts), unique=True, min_size=1))
    control = draw(st.lists(st.sampled_from(texts), unique=True))
    rstrip = draw(st.lists(st.sampled_from(sorted(ids.values())), unique=True, max_size=2))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=4)))
    spans = [(a, b) for a, b in zip(cuts[::2], cuts[1::2]) if a < b]
    return text, texts, ids, allowed, control, spans, rstrip


@st.composite
def search_case(draw):
    texts = draw(special_texts())
    return texts, draw(made_of(texts, filler="ab<|x")), draw(st.integers(0, 5))


@settings(max_examples=EXAMPLES)
@given(search_case())
def test_pattern_finds_the_earliest_then_longest(impl, case):
    """special_pattern(texts).search finds the earliest special text, and the longest one starting there.

    special_pattern(texts).search(text, pos) finds the earliest special text at or after pos, the longest of those
    starting there, exactly as a brute-force scan does; with no texts there is no pattern (None).
    """
    texts, text, start = case
    pattern = impl.special_pattern(texts)
    if not texts:
        assert pattern is None, "special_pattern of no texts must be None"
        return
    m = pattern.search(text, start)
    want = support.earliest_longest(text, texts, start)
    got = None if m is None else (m.start(), m.group())
    assert got == want, "the match must be the earliest special text, and the longest of those starting there"


def test_texts_are_literal(impl):
    """Special texts are matched literally: regex characters in them ([INST], a.b, (x), \\, $) mean themselves."""
    texts = ["[INST]", "<|im_end|>", "a.b", "(x)", "\\", "$", "|", "x+y"]
    text = "[I] aXb <|im_end_ [INST] (x) a.b x+y \\ $ | xxy"
    pattern = impl.special_pattern(texts)
    found, pos = [], 0
    while (m := pattern.search(text, pos)) is not None:
        found.append(m.group())
        pos = m.end()
    want, pos = [], 0
    while (hit := support.earliest_longest(text, texts, pos)) is not None:
        want.append(hit[1])
        pos = hit[0] + len(hit[1])
    assert len(want) == 8 and found == want, "special texts must be escaped: they match only themselves"


@settings(max_examples=EXAMPLES)
@given(scan_case())
def test_split_equals_a_brute_force_scan(impl, case):
    """For any text and settings, split_specials gives exactly the fragments of a brute-force scan.

    For any text, special texts, allowed subset, control tokens, literal spans and rstrip ids, split_specials
    gives exactly the fragments a brute-force scan of the specification gives.
    """
    text, texts, ids, allowed, control, spans, rstrip = case
    got = impl.split_specials(text, impl.special_pattern(allowed), ids, control=frozenset(control),
                              literal_spans=tuple(spans), rstrip=frozenset(rstrip))
    want = support.split_oracle(text, allowed, ids, control, spans, rstrip)
    assert support.as_tuples(got) == want, "the fragments differ from an earliest-longest scan of the text"


def test_no_pattern_and_empty_text(impl):
    """Without a pattern the whole text is one plain fragment; an empty text has no fragments at all."""
    assert support.as_tuples(impl.split_specials("abc <s>", None, {"<s>": 1})) == [(0, 7, None)]
    assert list(impl.split_specials("", None, {})) == []
    assert list(impl.split_specials("", impl.special_pattern(["<s>"]), {"<s>": 1})) == []


@pytest.mark.parametrize("name", support.BYTE_LEVEL)
def test_llama_cpp_ids(impl, name):
    """With your two functions in the engine, llama.cpp's test inputs for this vocabulary get llama.cpp's ids.

    With your special_pattern and split_specials inside the engine, every input of llama.cpp's test file for this
    byte-level vocabulary encodes to llama.cpp's ids (user-defined tokens such as mpt's runs of spaces are matched
    in plain text; control tokens are not).
    """
    tok = support.learner_tokenizer(impl, name, STEPS)
    wrong = [text for text, ids in support.cases(name) if tok.encode(text) != list(ids)]
    assert not wrong, f"{name}: {len(wrong)} of {len(support.cases(name))} inputs get other ids than llama.cpp's"


CHAT = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nIs <|im_end|> a token?<|endoftext|>"
        "<|im_start|>assistant\n<reponame>x<filename>y<|im_start|>")


def test_allowed_special_settings(impl):
    """allowed_special None, "all" and a set of texts give the engine's ids on SmolLM2.

    allowed_special None (no control token), "all" (every one) and a set (only those) give the engine's ids on
    SmolLM2, on a text full of its markers.
    """
    engine = support.engine_tokenizer("smollm2")
    tok = support.learner_tokenizer(impl, "smollm2", STEPS)
    for allowed in (None, "all", {"<|im_end|>"}, {"<|im_start|>", "<filename>"}, set()):
        want = engine.encode(CHAT, allowed_special=allowed)
        assert tok.encode(CHAT, allowed_special=allowed) == want, f"allowed_special={allowed!r} gives other ids"
    plain = tok.encode(CHAT)
    assert not any(engine.is_special(i) for i in plain), "plain text must never produce a control id"


def test_user_defined_tokens_in_plain_text(impl):
    """User-defined tokens (type 4) are matched even in plain text, control tokens only when allowed.

    User-defined tokens (type 4) are matched even in plain text, control tokens only when allowed (deepseek-coder,
    command-r and Qwen2, against the engine).
    """
    texts = {
        "deepseek-coder": "<|User|>def f(x):<|EOT|> õ <｜fim▁hole｜> <|Assistant|>ÿ",
        "command-r": "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi<|END_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
        "qwen2": "<tool_call>{}</tool_call><|im_start|>[PAD151650]<|box_start|>",
    }
    for name, text in texts.items():
        engine = support.engine_tokenizer(name)
        tok = support.learner_tokenizer(impl, name, STEPS)
        for allowed in (None, "all"):
            want = engine.encode(text, allowed_special=allowed)
            assert tok.encode(text, allowed_special=allowed) == want, f"{name}, allowed_special={allowed!r}"
        assert any(engine.token_type(i) == TokenType.USER_DEFINED for i in engine.encode(text))


def test_literal_spans_keep_marker_text_as_text(impl):
    """A control token inside a literal span (a user's message) stays plain text.

    A control token inside a literal span (a user's message) stays plain text; outside the span, and user-defined
    tokens anywhere, are still tokens; the ids around the span do not change.
    """
    engine = support.engine_tokenizer("smollm2")
    tok = support.learner_tokenizer(impl, "smollm2", STEPS)
    start = CHAT.index("Is ")
    end = CHAT.index("<|endoftext|>") + len("<|endoftext|>")
    rng = random.Random(3)
    spans_list = [[(start, end)], [(start, start + 5)], [(0, 3)], [(start, end), (len(CHAT) - 4, len(CHAT))]]
    spans_list += [[tuple(sorted(rng.sample(range(len(CHAT) + 1), 2)))] for _ in range(20)]
    for spans in spans_list:
        want = engine.encode(CHAT, allowed_special="all", literal_spans=spans)
        assert tok.encode(CHAT, allowed_special="all", literal_spans=spans) == want, f"literal_spans={spans}"


def test_phi3_right_strip(impl):
    """Phi-3's rule: ASCII whitespace right after its special tokens belongs to the token (the engine's ids)."""
    engine = support.engine_tokenizer("phi-3")
    tok = support.learner_tokenizer(impl, "phi-3", STEPS)
    text = "<|user|>\n  Hello<|end|>\n\t <|assistant|> Hi<|end|>x<s> y"
    for allowed in ("all", None):
        want = engine.encode(text, allowed_special=allowed)
        assert tok.encode(text, allowed_special=allowed) == want, f"allowed_special={allowed!r}"


def transcript(n_chars: int, seed: int = 0) -> str:
    """A ChatML chat transcript of about ``n_chars`` characters, some of it marker-like punctuation."""
    rng = random.Random(seed)
    words = "the model reads integers and every token is an id in a table of rows <b> | > < x".split()
    parts, size = [], 0
    while size < n_chars:
        body = " ".join(rng.choice(words) for _ in range(rng.randint(40, 400)))
        parts.append(f"<|im_start|>{rng.choice(['user', 'assistant', 'system'])}\n{body}<|im_end|>\n")
        size += len(parts[-1])
    return "".join(parts)


def test_speed(impl, reference):
    """Splitting 400 KB of chat transcript takes at most 5x the reference's time (plus 0.1 s).

    400 KB of chat transcript with SmolLM2's 17 control tokens: at most 5x the reference's time (plus 0.1 s, which
    also covers sending the text and the fragments). One regex search per token is enough; trying every special
    text at every character, or searching for each text again after every token, is not.
    """
    engine = support.engine_tokenizer("smollm2")
    ids = dict(engine.special_tokens)
    control = frozenset(ids)
    ref_pattern, pattern = reference.special_pattern(list(ids)), impl.special_pattern(list(ids))
    ref_times = []

    def attempt(seed: int, ref_runs: int) -> float:
        """Your time on a transcript of its own (the retry's too: a memo of an earlier answer cannot help),
        after the reference's on the same one; every timed answer is checked."""
        text = transcript(400_000, seed)
        for _ in range(ref_runs):
            expected, seconds = timed(reference.split_specials, text, ref_pattern, ids, control=control)
            ref_times.append(seconds)
        got, seconds = timed(impl.split_specials, text, pattern, ids, control=control)
        assert support.as_tuples(got) == support.as_tuples(expected), "the fragments of the long transcript are wrong"
        return seconds

    t = attempt(0, 2)
    limit = 5 * min(ref_times) + 0.1
    if limit < t < 3 * limit:  # one retry, in case the machine was busy
        t = min(t, attempt(1, 1))
        limit = 5 * min(ref_times) + 0.1
    assert t <= limit, f"{t:.2f} s against the reference's {min(ref_times):.2f} s (one search per token is enough)"


def test_all_four_steps_together(impl):
    """With all four of your steps, SmolLM2's chat prompts encode to llama.cpp's ids and decode back.

    tokenizer_from_gguf with all four of your steps: SmolLM2's chat prompts (markers allowed) give the ids
    llama.cpp evaluated, and decode back to the prompt text.
    """
    steps = ["load_merges", "token_bytes", "special_pattern", "split_specials"]
    tok = support.learner_tokenizer(impl, "smollm2", steps)
    for prompt in support.manifest_prompts():
        ids = tok.encode(prompt["text"], allowed_special="all")
        assert ids == prompt["ids"], f"prompt {prompt['name']!r}: other ids than llama.cpp's"
        assert tok.decode(ids) == prompt["text"]
