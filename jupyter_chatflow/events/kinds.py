"""Every closed set of strings the events use, as a `Literal` alias (the panel's TypeScript has each as a union)."""

from __future__ import annotations

from typing import Literal

EventType = Literal[
    "turn_started", "safety_decision", "memory_recalled", "context_assembled", "tokenized", "http_request",
    "http_response", "sse_frame", "intervened", "prefill", "token", "tool_call", "tool_result", "memory_written",
    "title_generated", "completed", "cancelled", "error",
]  # fmt: skip
"""Every event's `type`, in pipeline order (a remote turn's `http_*` and `sse_frame` stand where a local one
prefills: see `pipeline/remote.py`)."""
SegmentKind = Literal["system", "memory", "tools", "history", "user", "tool", "generated", "template"]
"""Where a prompt segment came from: `tool` is a tool's result and `generated` the model's earlier text of this
turn (its tool calls), both fed back in a later round; `template` is the chat template's own tokens."""
TrimAction = Literal["dropped", "summarized"]
"""What context assembly did with a part that did not fit: left it out, or replaced it with a summary."""
TrimStrategy = Literal["drop", "summarize"]
"""How context assembly makes history fit: leave the oldest out, or replace it with the model's summary."""
SafetyLayer = Literal["input", "model", "output", "tool"]
"""What a safety layer reads: the user's message; the finished answer; each streamed chunk; a tool's arguments or
result (`pipeline/safety/policy.py`)."""
SafetyAction = Literal["allow", "flag", "redact", "block"]
"""What a safety layer did, weakest to strongest: let the text through; label it; cut spans out; stop it."""
MemoryOperation = Literal["remember", "forget"]
"""What a "remember …" or "forget …" message did to the memory store."""
PrefillKind = Literal["answer", "tool_call"]
"""What a prefill was for: a round's answer (its prompt; a fork's, with the kept answer after it), or a tool call
decoded under the JSON-schema mask (its prompt, the answer so far, and the call's beginning the grammar fixed)."""
CallGuard = Literal["", "unclosed", "repeat"]
"""The rule that ended a tool call's string argument the model did not end itself (`pipeline/tools/guards.py`):
none; the model wrote the call's end (`}}</tool_call>`) inside the string, which then ends before it; the string
repeated one piece of text over its last 48 characters, and was closed at the next token."""
TitleSource = Literal["model", "fallback"]
"""Who wrote a session's title: the model, or the user's first words (the model's attempt was unusable)."""
FinishReason = Literal["stop", "length", "tool_calls_exhausted", "content_filter"]
"""Why a completed turn ended: a stop token or string; max_tokens or the window; the tool-round bound was reached
with the model still calling tools; a safety layer blocked the request or the answer."""
