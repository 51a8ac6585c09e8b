"""The whole pipeline with the real default model: an answer, a follow-up from the prompt cache, a tool call."""

from __future__ import annotations

import pytest

from jupyter_chatflow.events import Completed
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.pipeline.tools import evaluate
from jupyter_chatflow.store.database import Database

pytestmark = pytest.mark.slow


@pytest.fixture
def chat(real_model, tmp_path):
    return Chat(model=real_model, db=Database(tmp_path / "real.db"), session="real")


def test_answer_then_follow_up_reuses_the_conversation(chat):
    # the session-wide model's prompt cache may hold earlier tests' long entries: they are cut to their ids'
    # length, so the title's branching prompt gets a copy and the conversation's entry stays for the follow-up
    first = chat.send("What is the capital of France?", temperature=0.0, max_tokens=24)
    assert "Paris" in first.text() and isinstance(first.terminal(), Completed)
    title = first.title()  # written after the answer ended
    assert 2 <= len(title.split()) <= 6 and chat.title == title
    assert any(word in title for word in ("France", "Paris", "Capital")), title
    second = chat.send("And of Germany?", temperature=0.0, max_tokens=24)
    prefill = next(e for e in second if e.type == "prefill")
    assert "Berlin" in second.text()
    assert prefill.reused_tokens >= first.terminal().usage.prompt_tokens  # the whole first prompt, and more


def test_forced_calculator_call_gives_the_model_the_result(chat):
    response = chat.send("What is 17 * 23?", tools="calculator", tool_choice="calculator", temperature=0.0,
                         max_tokens=40)  # fmt: skip
    call = next(e for e in response if e.type == "tool_call")
    result = next(e for e in response if e.type == "tool_result")
    assert call.name == "calculator" and not result.error
    assert float(result.output.rsplit(" = ", 1)[1]) == pytest.approx(float(evaluate(call.arguments["expression"])))
    assert isinstance(response.terminal(), Completed) and response.text()
