"""The typed events of one turn: every pipeline stage emits them, every view reads them.

Each event is a frozen dataclass with `type`, `sequence_number` (0, 1, 2… within a turn), `turn_id` and a
monotonic `timestamp` (seconds, `time.monotonic()`). A stage builds an event with only its own fields; the turn's
`Emitter` stamps the other three. `to_dict()` / `event_from_dict()` round-trip exactly through JSON.

Every closed set of strings is a `Literal` alias (`kinds`: `EventType`, `SegmentKind`, …). The panel's TypeScript
types, `js/src/events.generated.ts`, are generated from these classes and aliases:
`python -m jupyter_chatflow.frontends.panel.ts_types`.

The package, in pipeline order: `kinds` (the aliases), `base` (`Event`, `Emitter`, the JSON codec), `values` (what
events carry: spans, segments, usage, timings), `stages` (the request and the stages before the model: safety,
memory, context, tokens, a remote turn's HTTP), `generation` (prefill, tokens, tool calls and results), `ends`
(memory written, the title, the terminal events), `registry` (`EVENT_TYPES`, `TERMINAL`, `event_from_dict`).
"""

from __future__ import annotations

from jupyter_chatflow.engine.generation import Alternative

from .base import Emitter, Event
from .ends import Cancelled, Completed, Failed, MemoryWritten, TitleGenerated
from .generation import Intervened, PrefillDone, TokenDelta, ToolCall, ToolResult
from .kinds import (
    CallGuard,
    EventType,
    FinishReason,
    MemoryOperation,
    PrefillKind,
    SafetyAction,
    SafetyLayer,
    SegmentKind,
    TitleSource,
    TrimAction,
    TrimStrategy,
)
from .registry import EVENT_TYPES, TERMINAL, event_from_dict
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
from .values import Head, Run, Segment, Snippet, Span, Steering, Timings, Trim, Usage

__all__ = [
    "EVENT_TYPES", "TERMINAL", "Alternative", "CallGuard", "Cancelled", "Completed", "ContextAssembled", "Emitter",
    "Event", "EventType", "Failed", "FinishReason", "Head", "HttpRequest", "HttpResponse", "Intervened",
    "MemoryOperation", "MemoryRecalled", "MemoryWritten", "PrefillDone", "PrefillKind", "Run", "SafetyAction",
    "SafetyDecision", "SafetyLayer", "Segment", "SegmentKind", "Snippet", "Span", "SseFrame", "Steering", "Timings",
    "TitleGenerated", "TitleSource", "TokenDelta", "Tokenized", "ToolCall", "ToolResult", "Trim", "TrimAction",
    "TrimStrategy", "TurnStarted", "Usage", "event_from_dict",
]  # fmt: skip
