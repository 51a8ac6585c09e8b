"""Forced calculator calls with the real default model: the right expression, the right result, an answer that
quotes it, for arithmetic written in symbols and in words (greedy, as a user would ask)."""

from __future__ import annotations

import re

import pytest

from jupyter_chatflow.events import Completed
from jupyter_chatflow.pipeline.chat import Chat

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
