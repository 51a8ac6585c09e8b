"""The events of the stages before the model: the request, the safety layers' verdicts, memory, the context, the
tokens, and a remote turn's HTTP exchange (which stands where a local turn prefills)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal

from .base import Event
from .kinds import SafetyAction, SafetyLayer, TrimStrategy
from .values import Run, Segment, Snippet, Span, Trim


@dataclasses.dataclass(frozen=True, kw_only=True)
class TurnStarted(Event):
    """The validated request envelope: what was asked, with which knobs and features."""

    type: ClassVar[Literal["turn_started"]] = "turn_started"
    request_id: str
    session_id: str
    user: str
    params: dict[str, Any]
    features: dict[str, Any]
    created: float
    """Wall-clock time (Unix seconds)."""
    fork_of: str = ""
    """The turn this one regenerates from one of its tokens ("" for a new message)."""
    fork_index: int = -1
    """That token's index in the forked turn's answer: the answer up to it is kept, it is replaced."""
    queued_ms: float = 0.0
    """How long the request waited for the engine thread (behind other turns, a title, a prewarm) before it began."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class SafetyDecision(Event):
    """One safety layer's verdict on a text."""

    type: ClassVar[Literal["safety_decision"]] = "safety_decision"
    layer: SafetyLayer
    action: SafetyAction
    guard: str
    categories: tuple[str, ...] = ()
    scores: dict[str, float] = dataclasses.field(default_factory=dict)
    spans: tuple[Span, ...] = ()
    reason: str = ""
    latency_ms: float = 0.0
    compile_ms: float = 0.0
    """Of latency_ms, XLA compiling programs new to the process on the way (a guard that runs the model: the intent
    probe's pass, the model guard's), measured on the thread that ran it."""
    replacement: str = ""
    """For block: the text shown instead."""
    subject: str = ""
    """What the layer read, where it reads two things: a tool's "arguments" or its "result" ("" otherwise)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class MemoryRecalled(Event):
    """Memories found relevant to the user's message and put into the context."""

    type: ClassVar[Literal["memory_recalled"]] = "memory_recalled"
    query: str
    snippets: tuple[Snippet, ...]
    latency_ms: float = 0.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class ContextAssembled(Event):
    """The prompt's segments, the token budget, and what was trimmed to fit it."""

    type: ClassVar[Literal["context_assembled"]] = "context_assembled"
    window: int
    reserved_output: int
    budget: int
    prompt_tokens: int
    segments: tuple[Segment, ...]
    trimmed: tuple[Trim, ...] = ()
    strategy: TrimStrategy = "drop"
    latency_ms: float = 0.0

    @property
    def user_text(self) -> str | None:
        """The user's message as it went into the prompt (after input redaction): its `user` segment."""
        return next((s.text for s in self.segments if s.kind == "user"), None)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Tokenized(Event):
    """The exact prompt ids and where every one came from (runs over `ContextAssembled.segments`)."""

    type: ClassVar[Literal["tokenized"]] = "tokenized"
    ids: tuple[int, ...]
    provenance: tuple[Run, ...]
    latency_ms: float = 0.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class HttpRequest(Event):
    """A request a remote turn sent to an OpenAI-compatible server, as it went on the wire (the key masked)."""

    type: ClassVar[Literal["http_request"]] = "http_request"
    method: str
    url: str
    headers: dict[str, str]
    """The request's headers; `Authorization` shows the key masked (`Bearer sk-…abcd`), never the key."""
    body: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The JSON body ({} for a GET)."""
    round: int = 0
    """Which request of the turn: a tool call's result goes back in the next one."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class HttpResponse(Event):
    """The status line and headers of the server's answer to the latest `HttpRequest`."""

    type: ClassVar[Literal["http_response"]] = "http_response"
    status: int
    reason: str
    headers: dict[str, str]
    request_id: str = ""
    """The server's `x-request-id` ("" when it sends none)."""
    elapsed_ms: float = 0.0
    """Milliseconds from sending the request to its response's headers."""
    body: str = ""
    """An error's body (its first 2,000 characters); "" for a stream, whose body comes as `SseFrame`s."""
    round: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class SseFrame(Event):
    """One server-sent event of a streamed response, as its bytes arrived (a `: ping` comment is a frame too)."""

    type: ClassVar[Literal["sse_frame"]] = "sse_frame"
    index: int
    """0, 1, 2… within the response."""
    bytes: int
    """The frame's size on the wire, its closing blank line included: the frames of a response add up to its body."""
    arrival_ms: float
    """Milliseconds from sending the request to the arrival of the frame's last byte."""
    text: str
    round: int = 0
