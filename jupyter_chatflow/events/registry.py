"""Every event class by its `type`, the terminal ones, and rebuilding an event from its `to_dict()`."""

from __future__ import annotations

from typing import Any

from .base import Event, decode
from .ends import Cancelled, Completed, Failed, MemoryWritten, TitleGenerated
from .generation import Intervened, PrefillDone, TokenDelta, ToolCall, ToolResult
from .kinds import EventType
from .stages import (
    ContextAssembled,
    HttpRequest,
    HttpResponse,
    MemoryRecalled,
    SafetyDecision,
    SseFrame,
    Tokenized,
    TurnStarted,
)

EVENT_TYPES: dict[EventType, type[Event]] = {
    cls.type: cls
    for cls in (
        TurnStarted, SafetyDecision, MemoryRecalled, ContextAssembled, Tokenized, HttpRequest, HttpResponse,
        SseFrame, Intervened, PrefillDone, TokenDelta, ToolCall, ToolResult, MemoryWritten, TitleGenerated, Completed,
        Cancelled, Failed,
    )
}  # fmt: skip
TERMINAL = (Completed, Cancelled, Failed)


def event_from_dict(data: dict[str, Any]) -> Event:
    """Rebuild an event from `to_dict()` output (or its JSON). A row stored before one of the event's fields
    existed reads that field as its default, or as its type's empty value (0, "", False, an empty list)."""
    fields = dict(data)
    cls = EVENT_TYPES.get(fields.pop("type", ""))
    if cls is None:
        raise ValueError(f"Unknown event type {data.get('type')!r}; known: {', '.join(EVENT_TYPES)}")
    return decode(cls, fields)
