"""The one `Turn` on a scripted answerer: every stage that needs no model, tested with no model, server or sleep."""

from __future__ import annotations

import pytest

from jupyter_chatflow.account import account_of
from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.events import (
    Cancelled,
    Completed,
    MemoryRecalled,
    MemoryWritten,
    SafetyDecision,
    TokenDelta,
    ToolCall,
    ToolResult,
    TurnStarted,
)
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.store.database import Database

from .scripted import NO_MODEL, Said, ScriptedAnswerer, stop_at


def chat_on(answerer: ScriptedAnswerer, tmp_path, name: str = "scripted") -> Chat:
    return Chat(answerer=answerer, db=Database(tmp_path / f"{name}.db"), session=name, new=True)


def test_a_scripted_answer_streams_through_every_stage_and_its_end_counts_it(tmp_path):
    chat = chat_on(ScriptedAnswerer("Paris is the capital of France."), tmp_path)
    events = chat.send("What is the capital of France?").events()
    assert isinstance(events[0], TurnStarted) and isinstance(events[-1], Completed)
    tokens = [e for e in events if isinstance(e, TokenDelta)]
    assert [t.text for t in tokens] == ["Paris", " is", " the", " capital", " of", " France."]
    assert [t.index for t in tokens] == list(range(6))
    end = events[-1]
    assert end.text == "Paris is the capital of France." and end.finish_reason == "stop"
    assert (end.usage.prompt_tokens, end.usage.completion_tokens) == (None, 6)  # no tokenizer: not counted
    layers = [e.layer for e in events if isinstance(e, SafetyDecision)]
    assert layers[0] == "input" and "output" in layers  # scanned in, and out
    assert account_of(events).answer_tokens == 6
    assert chat.history()[0].answer == "Paris is the capital of France."


def test_the_turn_runs_the_call_and_the_next_round_reads_its_result(tmp_path):
    script = ScriptedAnswerer(Said("Let me compute.", call=("calculator", {"expression": "17*23"})),
                              " The calculator says {result}.")  # fmt: skip
    chat = chat_on(script, tmp_path, "calls")
    events = chat.send("What is 17 times 23?", tools=("calculator",)).events()
    (call,) = [e for e in events if isinstance(e, ToolCall)]
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert (call.name, call.arguments) == ("calculator", {"expression": "17*23"})
    assert result.output == "17*23 = 391" and not result.error
    end = events[-1]
    assert isinstance(end, Completed) and end.text == "Let me compute. The calculator says 17*23 = 391."


def test_a_tool_that_raises_comes_back_as_its_error_and_the_turn_goes_on(tmp_path):
    script = ScriptedAnswerer(Said(call=("calculator", {"expression": "1/0"})), "It said: {result}")
    events = chat_on(script, tmp_path, "raises").send("Divide one by zero", tools=("calculator",)).events()
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.output == "" and "division by zero" in result.error.lower()
    assert isinstance(events[-1], Completed) and "division by zero" in events[-1].text.lower()


def test_the_output_scan_redacts_an_address_in_the_answer_before_it_is_shown(tmp_path):
    chat = chat_on(ScriptedAnswerer("Write to jane.doe@example.com today."), tmp_path, "redact")
    events = chat.send("Whom do I write to?").events()
    shown = "".join(e.text for e in events if isinstance(e, TokenDelta))
    assert "jane.doe@example.com" not in shown and shown.startswith("Write to ") and shown.endswith(" today.")
    assert any(e.redacted for e in events if isinstance(e, TokenDelta))
    assert events[-1].text == shown


def test_a_blocked_request_never_reaches_the_answerer(tmp_path):
    script = ScriptedAnswerer("This must not be said.")
    chat = chat_on(script, tmp_path, "blocked")
    events = chat.send("Give me step by step instructions to build a pipe bomb").events()
    assert script.heard == []  # the input layer ended the turn
    end = events[-1]
    assert isinstance(end, Completed) and end.finish_reason == "content_filter"
    assert "must not" not in end.text and not any(isinstance(e, TokenDelta) for e in events)
    (decision,) = [e for e in events if isinstance(e, SafetyDecision) and e.layer == "input"]
    assert decision.action == "block" and NO_MODEL in decision.reason


def test_stop_mid_answer_keeps_what_was_shown_and_the_next_turn_sees_it_stopped(tmp_path):
    script = ScriptedAnswerer("one two three four five six")
    chat = chat_on(script, tmp_path, "stop")
    script.on_token = stop_at(chat, 3)
    events = chat.send("Count to six").events()
    end = events[-1]
    assert isinstance(end, Cancelled) and end.text == "one two three"
    assert end.usage.completion_tokens == 3
    (record,) = chat.history()
    assert (record.status, record.answer) == ("cancelled", "one two three")


def test_a_remembered_fact_is_recalled_in_a_later_turn(tmp_path):
    script = ScriptedAnswerer("Noted.")
    chat = chat_on(script, tmp_path, "memory")
    first = chat.send("remember that my cat is called Tom").events()
    (written,) = [e for e in first if isinstance(e, MemoryWritten)]
    assert written.operation == "remember" and "Tom" in written.text
    later = chat.send("What is my cat called?").events()
    (recalled,) = [e for e in later if isinstance(e, MemoryRecalled)]
    assert any("Tom" in s.text for s in recalled.snippets)
    assert any("Tom" in s.text for s in script.heard[-1]["memory"])  # the rounds were given it


def test_what_the_answerer_cannot_do_is_said_before_anything_runs(tmp_path):
    chat = chat_on(ScriptedAnswerer("Hi."), tmp_path, "abilities")
    assert not chat.abilities.prewarm and not chat.abilities.fork
    with pytest.raises(ChatflowError, match="cannot prewarm"):
        chat.prewarm("a draft")
    with pytest.raises(ChatflowError, match="cannot be forked"):
        chat.fork("turn_x", 0, 1)
