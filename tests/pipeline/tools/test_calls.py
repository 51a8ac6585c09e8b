"""The model's tool-call format: the system prompt, the streaming detector, parsing, and the messages."""

from __future__ import annotations

import json

import pytest

from jupyter_chatflow.pipeline.tools import (
    ToolCallDetector,
    ToolCallError,
    ToolError,
    ToolOutcome,
    calculator,
    call_message,
    check_tool_choice,
    parse_tool_call,
    result_message,
    tool,
    tool_role,
    tools_system_prompt,
)
from jupyter_chatflow.pipeline.tools.calls import RESULTS_INSTRUCTION, _partial_suffix


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


def test_system_prompt_lists_tools_in_the_hermes_format():
    prompt = tools_system_prompt([calculator, weather], system="You are SmolLM.")
    assert prompt.startswith("You are SmolLM.\n\n# Tools")
    listed = prompt.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()
    assert [json.loads(line)["name"] for line in listed] == ["calculator", "weather"]
    assert json.loads(listed[1]) == weather.spec()
    assert '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>' in prompt


def test_tool_choice_in_the_prompt():
    tools = [calculator, weather]
    assert tools_system_prompt(tools, tool_choice="none", system="Hi.") == "Hi."
    assert tools_system_prompt([], system="Hi.") == "Hi."
    assert tools_system_prompt(tools, tool_choice="required").endswith("Call one of these tools before you answer.")
    assert tools_system_prompt(tools, tool_choice="weather").endswith("Call the weather tool before you answer.")
    with pytest.raises(ToolError, match="auto, none, required, calculator, weather"):
        tools_system_prompt(tools, tool_choice="shell")
    # once the context carries results, the prompt asks for an answer from them (with or without the tools)
    assert tools_system_prompt(tools, tool_choice="none", system="Hi.", results=True) == f"Hi.\n\n{RESULTS_INSTRUCTION}"
    assert tools_system_prompt([], results=True) == RESULTS_INSTRUCTION
    assert tools_system_prompt(tools, results=True).endswith(f"</tool_call>\n\n{RESULTS_INSTRUCTION}")
    assert check_tool_choice("auto", []) == "auto"


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "calculator", "arguments": {"expression": "1+1"}}',
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "1+1"}}\n</tool_call>',
        '[{"name": "calculator", "arguments": {"expression": "1+1"}}]',
        '```json\n{"name": "calculator", "arguments": {"expression": "1+1"}}\n```',
        '{"name": "calculator", "arguments": "{\\"expression\\": \\"1+1\\"}"}',
        '{"name": "calculator", "parameters": {"expression": "1+1"}} and then some text',
    ],
)
def test_parse_tool_call_accepts_the_usual_shapes(text):
    assert parse_tool_call(text) == ("calculator", {"expression": "1+1"})


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('{"name": "calculator", "arguments": {"expression": ', "not valid JSON"),
        ("", "not valid JSON"),
        ('{"arguments": {}}', '"name" string'),
        ('[{"name": "a"}, {"name": "b"}]', '"name" string'),
        ('{"name": "calculator", "arguments": [1]}', "must be a JSON object, not list"),
        ('{"name": "calculator", "arguments": "1+1"}', "not a JSON object"),
    ],
)
def test_parse_tool_call_errors(text, match):
    with pytest.raises(ToolCallError, match=match):
        parse_tool_call(text)
    assert parse_tool_call('{"name": "x"}') == ("x", {})


def test_detector_splits_answer_and_call_across_chunks():
    detector = ToolCallDetector()
    chunks = ["Let me", " check. <", "tool", "_", "call", ">\n"]
    chunks += ['{"name": "weather", ', '"arguments": {"city": "Oslo"}}']
    visible = [detector.feed(c) for c in chunks]
    assert "".join(visible) == "Let me check. " and visible[1] == " check. " and visible[2] == ""
    assert detector.started and not detector.finished
    assert detector.feed("\n</tool_") == "" and not detector.finished
    assert detector.feed("call><|im_end|>") == ""
    assert detector.finished and detector.after == "<|im_end|>"
    assert detector.call() == ("weather", {"city": "Oslo"})


def test_detector_releases_text_that_was_not_a_tag():
    detector = ToolCallDetector()
    assert detector.feed("a < b and <tool") == "a < b and "
    assert detector.feed("s>") == "<tools>"
    assert detector.feed(" x <tool_c") == " x "
    assert detector.flush() == "<tool_c"
    assert not detector.started
    with pytest.raises(ToolCallError, match="no tool call"):
        detector.call()


def test_detector_whole_call_in_one_chunk_and_unclosed_call():
    detector = ToolCallDetector()
    text = 'Sure<tool_call>{"name": "calculator", "arguments": {"expression": "2"}}</tool_call>'
    assert detector.feed(text) == "Sure" and detector.finished
    unclosed = ToolCallDetector()
    unclosed.feed('<tool_call>\n{"name": "weather", "arguments": {"city": "Rome"}}')
    assert not unclosed.finished and unclosed.call() == ("weather", {"city": "Rome"})


def test_partial_suffix():
    assert _partial_suffix("abc<tool_", "<tool_call>") == 6
    assert _partial_suffix("abc", "<tool_call>") == 0
    assert _partial_suffix("<", "<tool_call>") == 1


def test_messages():
    assert call_message("weather", {"city": "Oslo"}) == {
        "role": "assistant",
        "content": '<tool_call>\n{"name": "weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
    }
    # a "tool" message is the output as it is (the template presents it); a "user" one is tagged and named
    assert result_message("weather", ToolOutcome(output="sunny")) == {"role": "tool", "content": "sunny"}
    assert result_message("weather", ToolOutcome(error="weather failed: boom"))["content"] == "weather failed: boom"
    ok = result_message("weather", ToolOutcome(output="sunny"), role="user")
    body = '{"name": "weather", "content": "sunny"}'
    assert ok == {"role": "user", "content": f"<tool_response>\n{body}\n</tool_response>"}
    failed = result_message("weather", ToolOutcome(error="weather failed: boom"), role="user")
    assert json.loads(failed["content"].split("\n")[1]) == {"name": "weather", "error": "weather failed: boom"}


def test_tool_role_follows_the_chat_template(tiny_model):
    assert tool_role(tiny_model.tokenizer) == "tool"

    class Strict:
        def render_chat_template(self, messages, add_generation_prompt=True):
            if any(m["role"] == "tool" for m in messages):
                raise ValueError("roles must alternate user/assistant")
            return ""

    class Dropping:
        def render_chat_template(self, messages, add_generation_prompt=True):
            return "".join(m["content"] for m in messages if m["role"] != "tool")

    assert tool_role(Strict()) == "user" and tool_role(Dropping()) == "user"


def test_a_full_round_renders_with_the_chat_template(tiny_model):
    tokenizer = tiny_model.tokenizer
    messages = [
        {"role": "system", "content": tools_system_prompt([calculator])},
        {"role": "user", "content": "What is 6 * 7?"},
        call_message("calculator", {"expression": "6 * 7"}),
        result_message("calculator", calculator.run({"expression": "6 * 7"}), role=tool_role(tokenizer)),
    ]
    text = tokenizer.render_chat_template(messages)
    assert "<|im_start|>tool\n6 * 7 = 42<|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
