"""Forced calculator calls with the real default model: the right expression, the right result, an answer that
quotes it, for arithmetic written in symbols and in words (greedy, as a user would ask); and a tool as users write
it, whose string parameter has no description."""

from __future__ import annotations

import re
import threading

import pytest

from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.events import Completed
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.pipeline.stream import Streamer
from jupyter_chatflow.pipeline.tools import Toolbox, evaluate, tool, tools_system_prompt

pytestmark = pytest.mark.slow

QUESTIONS = [
    ("What is 17*23?", 391),
    ("What is 15% of 80?", 12),
    ("What is 2 to the power of 10?", 1024),
    ("What is 144 divided by 12?", 12),
    ("What is 1234 + 5678?", 6912),
    ("What is 100 minus 37?", 63),
    ("What is 7 × 8?", 56),
    ("What is 81 ÷ 9?", 9),
    ("What is 3^4?", 81),
]


@pytest.fixture(scope="module")
def chat(real_model):
    return Chat(model=real_model, persist=False)


@pytest.mark.parametrize(("question", "value"), QUESTIONS)
def test_a_forced_calculator_call_computes_the_question_and_the_answer_quotes_it(chat, question, value):
    chat.reset()  # each question on its own
    response = chat.send(question, tools="calculator", tool_choice="required", temperature=0.0, max_tokens=48)
    call = next(e for e in response if e.type == "tool_call")
    result = next(e for e in response if e.type == "tool_result")
    answer = response.terminal()
    expression = call.arguments["expression"]
    assert call.name == "calculator" and call.constrained and not result.error, (expression, result.error)
    assert result.output == f"{expression.strip()} = {value}", f"{question!r}: the model wrote {expression!r}"
    assert isinstance(answer, Completed) and answer.finish_reason == "stop"
    assert str(value) in re.sub(r"(?<=\d),(?=\d{3})", "", answer.text), f"{question!r}: answered {answer.text!r}"
    # where the time went: the masked decode of the call, most of it fixed text; the tool's own run, no imports
    assert call.decode_ms > 0 and 0 < call.forced_tokens < call.tokens
    assert result.latency_ms < 50


@tool
def calc(expression: str) -> str:
    """Evaluate an arithmetic expression."""  # as users write a tool: no Args, so no description, no bounds
    return str(evaluate(expression))


def test_a_users_tool_with_an_undescribed_string_gets_a_call_whose_arithmetic_is_right(real_model):
    """Issue 23's reproduction through `Chat.send`: SmolLM2 writes `"17*23}}</tool_call>` and, left to the mask, ran
    on to max_tokens; the unclosed rule (`pipeline/tools/guards.py`) ends the string where it closed the call."""
    chat = Chat(model=real_model, persist=False, toolbox=Toolbox([calc]))
    response = chat.send("What is 17*23?", tools="calc", tool_choice="calc", temperature=0.0, max_tokens=48)
    call = next(e for e in response if e.type == "tool_call")
    result = next(e for e in response if e.type == "tool_result")
    assert call.arguments == {"expression": "17*23"} and not call.cut and call.tokens < 40
    assert result.output == "391" and isinstance(response.terminal(), Completed)


def test_the_round_says_which_rule_ended_the_string(real_model):
    """The round the turn makes its `ToolCall` event from carries the rule (`Round.tool_call`)."""
    events: list = []
    streamer = Streamer(real_model, events.append, threading.Event(), gate=None)
    tokenizer = real_model.tokenizer
    prompt = tokenizer.apply_chat_template([
        {"role": "system", "content": tools_system_prompt([calc], tool_choice="calc")},
        {"role": "user", "content": "What is 17*23?"},
    ])  # fmt: skip
    result = streamer.forced(prompt, SamplingParams(temperature=0.0, max_tokens=256), [calc], "calc")
    call = result.tool_call("call_1")
    assert result.call == ("calc", {"expression": "17*23"}) and result.finish_reason == "tool_calls"
    assert (call.guard, call.arguments_text, call.cut) == ("unclosed", '{"expression": "17*23"}', False)
    assert result.completion_tokens == call.tokens < 40  # not the 256 a runaway string would have used
