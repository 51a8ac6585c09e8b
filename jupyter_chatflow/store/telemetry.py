"""Telemetry: one structured, redacted JSON record per turn, kept in the database and exportable as JSON lines.

`turn_record` reads a turn's event stream and keeps what an operator needs (ids, model, params, token counts,
per-stage timings, safety outcomes, tool calls, how it ended) and nothing a user typed verbatim: texts are logged as
their length plus a short preview that has gone through the redactor (e.g. `safety.pii.redact`).

>>> record = turn_record(response.events(), model="SmolLM2-135M-Instruct", redact=pii.redact)
>>> Telemetry(Database()).log(record)
>>> Telemetry(Database()).export_jsonl("turns.jsonl")
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from jupyter_chatflow.events import (
    Cancelled,
    Completed,
    Event,
    Failed,
    MemoryRecalled,
    MemoryWritten,
    PrefillDone,
    SafetyDecision,
    TokenDelta,
    ToolCall,
    ToolResult,
    TurnStarted,
    Usage,
)

from .database import Database

SCHEMA = 1
"""Version of the record's layout; bump it when a field changes meaning."""
PREVIEW_CHARS = 80
STAGES = {"memory_recalled": "memory", "context_assembled": "context", "tokenized": "tokenize", "prefill": "prefill"}
"""Event type -> timing name, for events whose `latency_ms` is a pipeline stage."""

Redactor = Callable[[str], str]


def turn_record(events: Sequence[Event], *, model: str, redact: Redactor) -> dict[str, Any]:
    """The telemetry record of one turn, built from its events."""
    started = next((e for e in events if isinstance(e, TurnStarted)), None)
    terminal = events[-1] if events and isinstance(events[-1], (Completed, Cancelled, Failed)) else None
    answer = terminal.text if terminal else "".join(e.text for e in events if isinstance(e, TokenDelta))
    return {
        "schema": SCHEMA,
        "request_id": started.request_id if started else "",
        "session_id": started.session_id if started else "",
        "turn_id": events[0].turn_id if events else "",
        "model": model,
        "created": started.created if started else time.time(),
        "params": dict(started.params) if started else {},
        "features": dict(started.features) if started else {},
        **_outcome(terminal, redact),
        "user": _text_summary(started.user if started else "", redact),
        "answer": _text_summary(answer, redact),
        "tokens": _tokens(events, terminal),
        "timings_ms": _timings(events, terminal),
        "safety": [_safety(e) for e in events if isinstance(e, SafetyDecision)],
        "memory": _memory(events),
        "tools": _tools(events, redact),
        "events": len(events),
    }


def _text_summary(text: str, redact: Redactor) -> dict[str, Any]:
    # Redact the whole text before cutting it: a secret cut in half might no longer look like one.
    return {"chars": len(text), "preview": redact(text)[:PREVIEW_CHARS]}


def _outcome(terminal: Event | None, redact: Redactor) -> dict[str, Any]:
    if isinstance(terminal, Completed):
        return {"status": "completed", "finish_reason": terminal.finish_reason, "tokens_per_s": terminal.tokens_per_s}
    if isinstance(terminal, Cancelled):
        return {"status": "cancelled", "finish_reason": "cancelled"}
    if isinstance(terminal, Failed):
        error = {"type": terminal.error, "message": redact(terminal.message)[: 4 * PREVIEW_CHARS]}
        return {"status": "error", "finish_reason": "error", "error": error}
    return {"status": "unfinished", "finish_reason": ""}


def _tokens(events: Sequence[Event], terminal: Event | None) -> dict[str, int | None]:
    """The turn's `Usage` as its terminal event reports it; a failed or unfinished turn reports none, so what its
    events show stands in: the first prefill's prompt and one token per token event."""
    if isinstance(terminal, (Completed, Cancelled)):
        usage = terminal.usage
    else:
        prefill = next((e for e in events if isinstance(e, PrefillDone)), None)
        completion = sum(1 for e in events if isinstance(e, TokenDelta))
        usage = Usage(prompt_tokens=prefill.prompt_tokens if prefill else 0, completion_tokens=completion,
                      reused_tokens=prefill.reused_tokens if prefill else 0)  # fmt: skip
    return {
        "prompt": usage.prompt_tokens,
        "completion": usage.completion_tokens,
        "reused": usage.reused_tokens,
        "computed": None if usage.prompt_tokens is None else usage.prompt_tokens - usage.reused_tokens,  # remote
    }


def _timings(events: Sequence[Event], terminal: Event | None) -> dict[str, float]:
    """Milliseconds per stage: the events' latencies (stages the turn does not time itself, such as tokenizing, the
    output scans and the title written after it), then the stages the terminal event's `Timings` measured on top."""
    timings: dict[str, float] = {}
    for event in events:
        name = _stage(event)
        latency = getattr(event, "latency_ms", None)
        if name and latency is not None:
            timings[name] = round(timings.get(name, 0.0) + float(latency), 3)
    if isinstance(terminal, (Completed, Cancelled)):
        timings.update({k: v for k, v in dataclasses.asdict(terminal.timings).items() if v})  # 0/None: not run
    return timings


def _stage(event: Event) -> str:
    if isinstance(event, SafetyDecision):
        return f"safety_{event.layer}"
    if isinstance(event, ToolResult):
        return "tools"
    return STAGES.get(event.type, "title" if event.type == "title_generated" else "")


def _safety(decision: SafetyDecision) -> dict[str, Any]:
    """A safety layer's outcome: never its spans' text or the replacement shown."""
    return {
        "layer": decision.layer,
        "action": decision.action,
        "guard": decision.guard,
        "categories": list(decision.categories),
        "spans": len(decision.spans),
        "latency_ms": decision.latency_ms,
    }


def _memory(events: Sequence[Event]) -> dict[str, Any]:
    recalled = [s.memory_id for e in events if isinstance(e, MemoryRecalled) for s in e.snippets]
    written = [{"operation": e.operation, "ids": list(e.memory_ids)} for e in events if isinstance(e, MemoryWritten)]
    return {"recalled": recalled, "written": written}


def _tools(events: Sequence[Event], redact: Redactor) -> list[dict[str, Any]]:
    results = {e.call_id: e for e in events if isinstance(e, ToolResult)}
    calls = []
    for call in (e for e in events if isinstance(e, ToolCall)):
        result = results.get(call.call_id)
        entry: dict[str, Any] = {"name": call.name, "ok": result is not None and not result.error}
        entry["ms"] = result.latency_ms if result else None
        if result is not None and result.error:
            entry["error"] = redact(result.error)[:PREVIEW_CHARS]
        calls.append(entry)
    return calls


class Telemetry:
    """The request log in one `Database`."""

    def __init__(self, db: Database):
        self.db = db

    def log(self, record: dict[str, Any]) -> int:
        """Store a `turn_record`; return its row id."""
        line = json.dumps(record, ensure_ascii=False)
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO requests (request_id, turn_id, created, record) VALUES (?, ?, ?, ?)",
                (record.get("request_id", ""), record.get("turn_id", ""), record.get("created", time.time()), line),
            )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def records(self, since: float | None = None) -> list[dict[str, Any]]:
        """The stored records in the order logged, only those created at or after `since` (Unix seconds) if given."""
        rows = self.db.query(
            "SELECT record FROM requests WHERE created >= ? ORDER BY id", (float("-inf") if since is None else since,)
        )
        return [json.loads(row["record"]) for row in rows]

    def export_jsonl(self, path: str | Path, *, since: float | None = None) -> int:
        """Write the records to `path`, one JSON object per line; return how many."""
        records = self.records(since)
        with open(path, "w", encoding="utf-8") as file:
            for record in records:
                file.write(json.dumps(record, ensure_ascii=False) + "\n")
        return len(records)
