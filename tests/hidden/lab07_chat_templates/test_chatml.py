"""Hidden suite, lab 07 task 1: render_chatml, byte for byte.

Expected texts come from two places nobody in this course wrote: transformers' renderings of the plain ChatML
template and of SmolLM2's and Qwen2.5's real templates (``template_fixtures.json``, written by
``tools/make_template_fixtures.py``), and ChatML's rule spelled out below for random conversations.
"""

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

FIXTURES = json.loads((Path(__file__).parent / "template_fixtures.json").read_text(encoding="utf-8"))
CONVERSATIONS = FIXTURES["conversations"]
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
QWEN25_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def chatml_by_rule(messages, add_generation_prompt, default_system=None):
    """ChatML from its definition: one <|im_start|>ROLE\\nCONTENT<|im_end|>\\n block per turn."""
    turns = [(m["role"], m["content"]) for m in messages]
    if default_system is not None and turns[0][0] != "system":
        turns = [("system", default_system)] + turns
    text = "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in turns)
    return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def first_difference(got, want):
    for i, (a, b) in enumerate(zip(got, want)):
        if a != b:
            return i
    return min(len(got), len(want))


def check_cases(impl, default_system):
    cases = [c for c in FIXTURES["chatml"] if c["default_system"] == default_system]
    assert cases
    for case in cases:
        messages = copy.deepcopy(CONVERSATIONS[case["conversation"]])
        got = impl.render_chatml(messages, add_generation_prompt=case["add_generation_prompt"],
                                 default_system=default_system)
        assert type(got) is str, f"render_chatml must return a str, got {type(got).__name__}"
        if got != case["expected"]:
            at = first_difference(got, case["expected"])
            raise AssertionError(
                f"conversation {case['conversation']!r}, add_generation_prompt={case['add_generation_prompt']}: "
                f"your text differs from transformers' at character {at}, where yours has {got[at:at + 25]!r}")


@pytest.mark.weight(2)
def test_plain_chatml_matches_transformers(impl):
    """render_chatml gives exactly transformers' rendering of the ChatML template.

    Without a default system message, render_chatml gives exactly transformers' ChatML rendering
    (multi-turn, unicode, leading/trailing whitespace kept, with and without the generation prompt)."""
    check_cases(impl, None)


def test_smollm2_default_system_matches_its_template(impl):
    """With SmolLM2's default system message, render_chatml gives exactly what SmolLM2's own template renders."""
    check_cases(impl, SMOLLM2_SYSTEM)


def test_qwen25_default_system_matches_its_template(impl):
    """With Qwen2.5's default system message, render_chatml gives exactly what Qwen2.5's own template renders."""
    check_cases(impl, QWEN25_SYSTEM)


@pytest.mark.weight(2)
def test_generation_prompt_is_the_open_assistant_turn(impl):
    """The generation prompt is exactly '<|im_start|>assistant\\n', and it is on by default.

    add_generation_prompt=True appends exactly '<|im_start|>assistant\\n' to the finished conversation,
    and it is on by default."""
    messages = [{"role": "user", "content": "Hi"}]
    closed = impl.render_chatml(messages, add_generation_prompt=False)
    assert closed == "<|im_start|>user\nHi<|im_end|>\n"
    assert impl.render_chatml(messages, add_generation_prompt=True) == closed + "<|im_start|>assistant\n"
    assert impl.render_chatml(messages) == closed + "<|im_start|>assistant\n", "the generation prompt is on by default"


def test_default_system_only_when_the_first_message_is_not_system(impl):
    """The default system message goes first only when the conversation does not start with a system message.

    The default system message is inserted first only if the conversation does not start with a system
    message; a system message later in the conversation does not prevent it and stays where it is."""
    own = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert impl.render_chatml(own, default_system="DEFAULT") == chatml_by_rule(own, True)
    late = [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}, {"role": "user", "content": "c"}]
    assert impl.render_chatml(late, default_system="DEFAULT") == chatml_by_rule(late, True, "DEFAULT")
    assert impl.render_chatml(late, default_system="") == chatml_by_rule(late, True, ""), \
        "an empty default system message is still a system message (only None means no default)"


ROLES = st.one_of(st.sampled_from(["system", "user", "assistant", "tool"]),
                  st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=1, max_size=8))
TEXT = st.lists(st.one_of(st.characters(exclude_categories=("Cs",)), st.sampled_from(
    ["\n", " ", "\t", "\r\n", "<|im_start|>", "<|im_end|>", "{{", "%}"])), max_size=30).map("".join)
CONVERSATION = st.lists(st.fixed_dictionaries({"role": ROLES, "content": TEXT}), min_size=1, max_size=6)


@given(CONVERSATION, st.booleans(), st.one_of(st.none(), TEXT))
@pytest.mark.weight(2)
def test_any_conversation_follows_the_chatml_rule(impl, messages, generation, default_system):
    """Every message is exactly <|im_start|>ROLE\\nCONTENT<|im_end|>\\n: nothing stripped, escaped or added.

    For any roles and contents (newlines, tabs, unicode, even marker text inside a message), the output is
    exactly one <|im_start|>ROLE\\nCONTENT<|im_end|>\\n block per message: nothing stripped, escaped or added."""
    got = impl.render_chatml(copy.deepcopy(messages), add_generation_prompt=generation, default_system=default_system)
    assert type(got) is str, "render_chatml must return a plain str"
    assert got == chatml_by_rule(messages, generation, default_system)


@pytest.mark.weight(0.5)
def test_result_is_a_plain_str_even_for_str_subclasses(impl):
    """render_chatml returns exactly a str, even for str subclasses in the input.

    The result is exactly a str (not a subclass that could fake equality), even when a content or the
    default system message is a str subclass."""

    class Sneaky(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    messages = [{"role": "user", "content": Sneaky("Hi")}]
    got = impl.render_chatml(messages, default_system=Sneaky("S"))
    assert type(got) is str, f"render_chatml must return exactly str, got {type(got).__name__}"
    assert str.__eq__(got, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


@pytest.mark.weight(0.5)
def test_messages_are_not_modified(impl):
    """render_chatml never changes the caller's list or dicts (inserting the default system message included)."""
    messages = [{"role": "user", "content": "Hi", "name": "x"}, {"role": "assistant", "content": "Hello"}]
    before = copy.deepcopy(messages)
    impl.render_chatml(messages, default_system="S")
    impl.render_chatml(messages, add_generation_prompt=False)
    assert messages == before and len(messages) == 2


BAD_INPUTS = [
    ("hello", TypeError, None),
    ({"role": "user", "content": "x"}, TypeError, None),
    ([{"role": "user", "content": "a"}, "b"], TypeError, "1"),
    ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, {"content": "c"}], ValueError, "2"),
    ([{"role": "user"}], ValueError, "0"),
    ([{"role": "user", "content": "a"}, {"role": "assistant", "content": None}], TypeError, "1"),
    ([{"role": "user", "content": ["a"]}], TypeError, "0"),
    ([{"role": 7, "content": "a"}], TypeError, "0"),
    ([{"role": "", "content": "a"}], ValueError, "0"),
    ([], ValueError, None),
]


@pytest.mark.weight(0.5)
def test_bad_input_is_refused_naming_the_message(impl):
    """Bad input raises the TypeError or ValueError the task names, with the index of the message at fault.

    A non-list, a non-dict message, a missing or non-str role/content or an empty role raises TypeError or
    ValueError (as the task says) naming the index of the message at fault; an empty list is a ValueError."""
    import re

    for bad, kind, index in BAD_INPUTS:
        try:
            impl.render_chatml(bad)
        except kind as exc:
            if index is not None:
                assert re.search(rf"\b{index}\b", str(exc)), f"for {bad!r:.60} the error should name message {index}"
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"for {bad!r:.60} expected {kind.__name__}, got {type(exc).__name__}") from None
        else:
            raise AssertionError(f"{bad!r:.60} must be refused with {kind.__name__}")


@pytest.mark.weight(0.5)
def test_default_system_must_be_a_str(impl):
    """default_system must be a str or None: anything else is a TypeError."""
    with pytest.raises(TypeError):
        impl.render_chatml([{"role": "user", "content": "a"}], default_system=42)
