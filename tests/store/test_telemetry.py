"""Telemetry: the per-turn record built from events (redacted), stored, and exported as JSON lines."""

from __future__ import annotations

import json
import re

import pytest

from jupyter_chatflow.events import (
    Cancelled,
    Completed,
    ContextAssembled,
    Emitter,
    Failed,
    MemoryRecalled,
    MemoryWritten,
    PrefillDone,
    SafetyDecision,
    Segment,
    Snippet,
    Span,
    Timings,
    TitleGenerated,
    TokenDelta,
    Tokenized,
    ToolCall,
    ToolResult,
    TurnStarted,
    Usage,
)
from jupyter_chatflow.store.database import Database
from jupyter_chatflow.store.telemetry import PREVIEW_CHARS, Telemetry, turn_record

EMAIL = "alice@example.com"
USER = f"Mail {EMAIL} the weather in Paris. " + "Please be brief. " * 10
USAGE = Usage(prompt_tokens=40, completion_tokens=2, reused_tokens=10)


def redact(text: str) -> str:
    return re.sub(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", "[EMAIL]", text)


def turn(terminal=None):
    """A whole turn's events, with a tool call that worked, one that failed, and safety decisions on the way."""
    emit = Emitter("turn-1")
    events = [
        TurnStarted(request_id="req-1", session_id="s-1", user=USER, params={"temperature": 0.7, "max_tokens": 64},
                    features={"tools": True, "memory": True, "safety": True}, created=1700000000.0),
        SafetyDecision(layer="input", action="redact", guard="pii", categories=("PII",),
                       spans=(Span(start=5, end=22, category="PII", replacement="[EMAIL]"),), latency_ms=0.5),
        MemoryRecalled(query="weather Paris", snippets=(Snippet(memory_id=7, text="I live in Paris", score=1.2),),
                       latency_ms=1.0),
        ContextAssembled(window=2048, reserved_output=64, budget=1984, prompt_tokens=40,
                         segments=(Segment(kind="user", label="user", tokens=40, text=USER),), latency_ms=2.0),
        Tokenized(ids=tuple(range(40)), provenance=(), latency_ms=3.0),
        PrefillDone(prompt_tokens=40, reused_tokens=10, computed_tokens=30, latency_ms=50.0),
        ToolCall(call_id="c1", name="weather", arguments={"city": "Paris"}),
        ToolResult(call_id="c1", name="weather", output="sunny", latency_ms=12.0),
        ToolCall(call_id="c2", name="send_mail", arguments={"to": EMAIL}),
        ToolResult(call_id="c2", name="send_mail", error=f"cannot reach {EMAIL}", latency_ms=3.0),
        TokenDelta(index=0, token_id=5, text="Sunny", logprob=-0.1, entropy=0.3),
        SafetyDecision(layer="output", action="allow", guard="rules", latency_ms=0.25),
        TokenDelta(index=1, token_id=6, text=".", logprob=-0.2, entropy=0.1),
        SafetyDecision(layer="output", action="allow", guard="rules", latency_ms=0.25),
        MemoryWritten(operation="remember", text="I like brief answers", memory_ids=(8,)),
        TitleGenerated(title="Weather in Paris", latency_ms=20.0),
        terminal or Completed(finish_reason="stop", text="Sunny.", usage=USAGE,
                              timings=Timings(decode=30.0, ttft_ms=60.0, total_ms=120.0), tokens_per_s=66.7),
    ]  # fmt: skip
    return [emit(e) for e in events]


def test_record_has_ids_params_tokens_and_outcome():
    record = turn_record(turn(), model="tiny", redact=redact)
    assert (record["request_id"], record["session_id"], record["turn_id"]) == ("req-1", "s-1", "turn-1")
    assert (record["model"], record["created"], record["events"]) == ("tiny", 1700000000.0, 17)
    assert record["params"] == {"temperature": 0.7, "max_tokens": 64}
    assert record["features"] == {"tools": True, "memory": True, "safety": True}
    assert (record["status"], record["finish_reason"], record["tokens_per_s"]) == ("completed", "stop", 66.7)
    assert record["tokens"] == {"prompt": 40, "completion": 2, "reused": 10, "computed": 30}
    assert record["memory"] == {"recalled": [7], "written": [{"operation": "remember", "ids": [8]}]}


def test_record_times_every_stage():
    timings = turn_record(turn(), model="tiny", redact=redact)["timings_ms"]
    assert timings == {
        "safety_input": 0.5, "memory": 1.0, "context": 2.0, "tokenize": 3.0, "prefill": 50.0, "tools": 15.0,
        "safety_output": 0.5, "title": 20.0, "decode": 30.0, "ttft_ms": 60.0, "total_ms": 120.0,
    }  # fmt: skip


def test_record_keeps_safety_outcomes_and_tool_calls_without_their_text():
    record = turn_record(turn(), model="tiny", redact=redact)
    assert record["safety"][0] == {
        "layer": "input", "action": "redact", "guard": "pii", "categories": ["PII"], "spans": 1, "latency_ms": 0.5
    }  # fmt: skip
    assert [s["layer"] for s in record["safety"]] == ["input", "output", "output"]
    assert record["tools"] == [
        {"name": "weather", "ok": True, "ms": 12.0},
        {"name": "send_mail", "ok": False, "ms": 3.0, "error": "cannot reach [EMAIL]"},
    ]


def test_texts_are_logged_as_length_and_redacted_preview():
    record = turn_record(turn(), model="tiny", redact=redact)
    assert record["user"]["chars"] == len(USER)
    assert record["user"]["preview"] == redact(USER)[:PREVIEW_CHARS]
    assert record["answer"] == {"chars": 6, "preview": "Sunny."}
    dumped = json.dumps(record)
    assert EMAIL not in dumped
    assert "I live in Paris" not in dumped and "I like brief answers" not in dumped and "sunny" not in dumped


@pytest.mark.parametrize(
    ("terminal", "status"),
    [
        (Cancelled(text="Sun", usage=USAGE), "cancelled"),
        (Failed(error="GenerationError", message=f"failed for {EMAIL}; shorten the prompt", text=""), "error"),
    ],
)
def test_cancelled_and_failed_turns(terminal, status):
    record = turn_record(turn(terminal), model="tiny", redact=redact)
    assert record["status"] == status
    assert record["tokens"]["completion"] == 2  # a failed turn has no usage: counted from its token events
    if status == "error":
        assert record["error"] == {"type": "GenerationError", "message": "failed for [EMAIL]; shorten the prompt"}


def test_unfinished_or_empty_streams_still_give_a_record():
    assert turn_record(turn()[:5], model="tiny", redact=redact)["status"] == "unfinished"
    assert turn_record([], model="tiny", redact=redact)["turn_id"] == ""


def test_log_records_and_export(tmp_path):
    with Database(tmp_path / "chatflow.db") as db:
        telemetry = Telemetry(db)
        first = turn_record(turn(), model="tiny", redact=redact)
        later = {**first, "request_id": "req-2", "created": first["created"] + 60}
        assert telemetry.log(first) < telemetry.log(later)
        assert telemetry.records() == [first, later]
        assert telemetry.records(since=first["created"] + 1) == [later]
        out = tmp_path / "turns.jsonl"
        assert telemetry.export_jsonl(out) == 2
        assert [json.loads(line) for line in out.read_text().splitlines()] == [first, later]
        assert telemetry.export_jsonl(out, since=first["created"] + 61) == 0
        assert out.read_text() == ""
