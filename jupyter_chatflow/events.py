"""The typed events of one turn: every pipeline stage emits them, every view reads them.

Each event is a frozen dataclass with `type`, `sequence_number` (0, 1, 2… within a turn), `turn_id` and a
monotonic `timestamp` (seconds, `time.monotonic()`). A stage builds an event with only its own fields; the turn's
`Emitter` stamps the other three. `to_dict()` / `event_from_dict()` round-trip exactly through JSON.

Every closed set of strings is a `Literal` alias here (`EventType`, `SegmentKind`, …). The panel's TypeScript types,
`js/src/events.generated.ts`, are generated from these classes: `python -m jupyter_chatflow.frontends.panel.ts_types`.
"""

from __future__ import annotations

import dataclasses
import time
import types
import typing
from typing import Any, ClassVar, Literal, TypeVar, Union

from .engine.generation import Alternative

E = TypeVar("E", bound="Event")

EventType = Literal[
    "turn_started", "safety_decision", "memory_recalled", "context_assembled", "tokenized", "http_request",
    "http_response", "sse_frame", "prefill", "token", "tool_call", "tool_result", "memory_written", "title_generated",
    "completed", "cancelled", "error",
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
TitleSource = Literal["model", "fallback"]
"""Who wrote a session's title: the model, or the user's first words (the model's attempt was unusable)."""
FinishReason = Literal["stop", "length", "tool_calls_exhausted", "content_filter"]
"""Why a completed turn ended: a stop token or string; max_tokens or the window; the tool-round bound was reached
with the model still calling tools; a safety layer blocked the request or the answer."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Event:
    """Fields every event has; subclasses add their own."""

    type: ClassVar[EventType]
    sequence_number: int = -1
    """0, 1, 2… within a turn."""
    turn_id: str = ""
    timestamp: float = 0.0
    """Monotonic seconds (`time.monotonic()`) when the event was emitted."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, `type` first."""
        return {"type": self.type, **_encode(self)}


# ---- values carried inside events ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Span:
    """A character range [start, end) of a text, with why it was marked."""

    start: int
    end: int
    category: str
    replacement: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Segment:
    """One part of the assembled prompt."""

    kind: SegmentKind
    label: str
    """Human-readable name, e.g. "history[2] assistant"."""
    tokens: int
    text: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Trim:
    """What context assembly left out (or summarized) to fit the window, and why."""

    label: str
    tokens: int
    action: TrimAction
    reason: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class Run:
    """A run of prompt tokens [start, end) that came from `segments[segment]`."""

    segment: int
    start: int
    end: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class Snippet:
    """A memory recalled into the context."""

    memory_id: int
    text: str
    score: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class Usage:
    """The tokens of one turn, over all its rounds (a tool call and the answer from its result are two): what the
    OpenAI APIs call usage, plus the tokens the prompt cache saved. Summed once, by the turn (`pipeline/stream.py`,
    `account`); every view reads it from the terminal event."""

    prompt_tokens: int | None = 0
    """Prompt tokens the model was given, each round's prompt counted (the rounds share a beginning). None: a
    remote server answered and did not report them (llama.cpp's Python server sends no usage in a stream); this
    side cannot count them, the tokenizer and chat template being the server's."""
    completion_tokens: int | None = 0
    """Tokens the model generated: the answer, its tool calls and its stop token (which is never shown). None: a
    remote server did not report them and not every one arrived with its logprob entry (a tool call's do not on
    llama.cpp's server), so they cannot be counted here."""
    reused_tokens: int = 0
    """Of prompt_tokens, those whose keys and values the prompt cache already held (not computed again)."""
    total_tokens: int | None = dataclasses.field(init=False, default=0)
    """prompt_tokens + completion_tokens (None when either is)."""

    def __post_init__(self) -> None:
        prompt, completion = self.prompt_tokens, self.completion_tokens
        total = None if prompt is None or completion is None else prompt + completion
        object.__setattr__(self, "total_tokens", total)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        """Read `to_dict()`'s usage; total_tokens is derived, and a row stored without a count (`{}`) reads 0."""
        prompt, completion = data.get("prompt_tokens", 0), data.get("completion_tokens", 0)
        return cls(prompt_tokens=None if prompt is None else int(prompt),
                   completion_tokens=None if completion is None else int(completion),
                   reused_tokens=int(data.get("reused_tokens", 0)))  # fmt: skip


@dataclasses.dataclass(frozen=True, kw_only=True)
class Timings:
    """Milliseconds per stage of one turn (0: the stage did not run), measured once by the turn. ttft_ms and
    total_ms count from the request's submission (the wait for the engine thread, `TurnStarted.queued_ms`, included:
    what the user waited)."""

    safety_input: float = 0.0
    """The input layer's scan of the user's message."""
    memory: float = 0.0
    """Recalling memories for the context."""
    context: float = 0.0
    """Assembling and tokenizing the prompt, every round's."""
    prefill: float = 0.0
    """Every generation's prefill: the time to its first token."""
    decode: float = 0.0
    """Every generation's decode steps, XLA compiling a decode program included."""
    tools: float = 0.0
    """Running the tools the model called, with their safety checks."""
    memory_write: float = 0.0
    """Storing or forgetting what a "remember …" / "forget …" message asked."""
    ttft_ms: float | None = None
    """Time to the first token the user saw; none when no token came (a request the input layer blocked)."""
    total_ms: float = 0.0
    """Time to the terminal event."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Timings:
        """Read `to_dict()`'s timings, also a row stored before a stage left them (the title, timed in the turn
        until it was written after it) or with stages not timed (absent)."""
        return cls(**{k: v for k, v in data.items() if k in _init_fields(cls)})


def _init_fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if f.init}


# ---- the events, in pipeline order ----------------------------------------------------------------------------


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


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrefillDone(Event):
    """The prompt is in the KV cache; reused tokens came from the prompt cache."""

    type: ClassVar[Literal["prefill"]] = "prefill"
    prompt_tokens: int
    reused_tokens: int
    computed_tokens: int
    latency_ms: float
    compile_ms: float = 0.0
    """Of latency_ms, the time XLA spent compiling (or loading from its cache) programs new to the process."""
    queued_ms: float = 0.0
    """Before latency_ms: the wait for the engine's scheduler to start this prefill (`queued_for` says why)."""
    queued_for: str = ""
    """What the prefill waited for ("" when it did not wait): every row busy, another sequence's prefill, the
    running rows' decode step, or their batch's programs compiling."""
    kind: PrefillKind = "answer"
    context_tokens: int = 0
    """Of prompt_tokens, the round's assembled prompt (`ContextAssembled.prompt_tokens`); the rest are answer
    tokens after it: a fork's kept ones, or a tool call's beginning (0: not recorded, a stored older turn)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TokenDelta(Event):
    """One generated token. `text` is what became visible (after stop-string holdback and output redaction)."""

    type: ClassVar[Literal["token"]] = "token"
    index: int
    token_id: int
    """-1 in a remote turn: the Chat Completions API sends a token's bytes, not its id."""
    text: str
    logprob: float
    entropy: float
    """0 in a remote turn: a server sends at most its top 5 alternatives, not the distribution."""
    alternatives: tuple[Alternative, ...] = ()
    """In a remote turn, the server's `top_logprobs` (ids -1, sampling_prob -1: it does not send them)."""
    elapsed_ms: float = 0.0
    compile_ms: float = 0.0
    """XLA compile time since the previous token (a decode program's first call in the process), in elapsed_ms.
    A generation's first token comes out of its prefill: its compile_ms is that prefill's (`PrefillDone.compile_ms`),
    not more of it; add one of the two."""
    redacted: bool = False
    computed_at: float = 0.0
    """Monotonic seconds when the engine produced this token (`timestamp` is when it was shown: the output scan
    holds a word back until the next one); a remote turn's, when its bytes arrived. 0: not computed in this turn
    (a fork's kept token), or not recorded (a stored older turn)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToolCall(Event):
    """The model asked for a tool; the stream pauses here until the result."""

    type: ClassVar[Literal["tool_call"]] = "tool_call"
    call_id: str
    name: str
    arguments: dict[str, Any]
    constrained: bool = False
    """True when the arguments were decoded under a JSON-schema token mask."""
    decode_ms: float = 0.0
    """Time to write the call under the mask (its prefill and decode steps), ending at this event."""
    compile_ms: float = 0.0
    """Of decode_ms after the call's prefill, the time XLA spent compiling programs new to the process."""
    tokens: int = 0
    """Tokens of the call's text, `<tool_call>` (or the line after it) to `</tool_call>`."""
    forced_tokens: int = 0
    """Of those, the ones the grammar fixed (keys, punctuation, a sole tool's name), as the tokenizer spells them;
    the others are the model's choices under the mask."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToolResult(Event):
    """A tool's output or error, which goes back into the context."""

    type: ClassVar[Literal["tool_result"]] = "tool_result"
    call_id: str
    name: str
    output: str = ""
    error: str = ""
    latency_ms: float = 0.0
    """The tool's own run (checking the arguments, the call, formatting its output), ending at this event."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class MemoryWritten(Event):
    """A memory was stored or forgotten."""

    type: ClassVar[Literal["memory_written"]] = "memory_written"
    operation: MemoryOperation
    text: str
    memory_ids: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class TitleGenerated(Event):
    """The session's title, written after its first answer has ended: this event follows the turn's terminal
    event (its sequence number is the next one), so the answer never waits for the title."""

    type: ClassVar[Literal["title_generated"]] = "title_generated"
    title: str
    latency_ms: float = 0.0
    source: TitleSource = "model"
    model_title: str = ""
    """What the model wrote for a title ("" when it wrote nothing, or was not asked)."""
    rejected: str = ""
    """Why the model's title was not used (source "fallback"): "" when it was."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Completed(Event):
    """The turn ended normally (terminal)."""

    type: ClassVar[Literal["completed"]] = "completed"
    finish_reason: FinishReason
    text: str
    usage: Usage
    timings: Timings
    tokens_per_s: float = 0.0
    """Decode tokens per second after the first token, XLA compile time left out (`engine.generation.tokens_per_s`
    over every generation of the turn)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cancelled(Event):
    """The turn was stopped (Stop, Ctrl-C, Kernel → Interrupt); the partial answer is kept (terminal)."""

    type: ClassVar[Literal["cancelled"]] = "cancelled"
    text: str
    usage: Usage = dataclasses.field(default_factory=Usage)
    """What the turn had used when it stopped."""
    timings: Timings = dataclasses.field(default_factory=Timings)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Failed(Event):
    """The turn failed (terminal); `message` says what to do."""

    type: ClassVar[Literal["error"]] = "error"
    error: str
    message: str
    text: str = ""


EVENT_TYPES: dict[EventType, type[Event]] = {
    cls.type: cls
    for cls in (
        TurnStarted, SafetyDecision, MemoryRecalled, ContextAssembled, Tokenized, HttpRequest, HttpResponse,
        SseFrame, PrefillDone, TokenDelta, ToolCall, ToolResult, MemoryWritten, TitleGenerated, Completed, Cancelled,
        Failed,
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
    return _decode(cls, fields)


class Emitter:
    """Stamps a turn's events with its id, the next sequence number and the time."""

    def __init__(self, turn_id: str, clock=time.monotonic):
        self.turn_id = turn_id
        self.count = 0
        self._clock = clock

    def __call__(self, event: E) -> E:
        stamped = dataclasses.replace(event, sequence_number=self.count, turn_id=self.turn_id, timestamp=self._clock())
        self.count += 1
        return stamped


# ---- JSON codec: dataclasses <-> plain dicts, guided by the type hints ----------------------------------------


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    return value


T = TypeVar("T")


def _decode(cls: type[T], data: dict[str, Any]) -> T:
    hints = _hints(cls)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    unknown = set(data) - {f.name for f in fields}
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    missing = {f.name: _empty(hints[f.name]) for f in fields if f.name not in data and _required(f)}
    return cls(**{k: _decode_value(hints[k], v) for k, v in data.items()}, **missing)


def _required(field: dataclasses.Field) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def _empty(hint: Any) -> Any:
    """The empty value of a field's type, for a stored row older than the field."""
    origin = typing.get_origin(hint) or hint
    if origin in (Union, types.UnionType):
        return None if type(None) in typing.get_args(hint) else _empty(typing.get_args(hint)[0])
    if origin is Literal:
        return typing.get_args(hint)[0]
    if isinstance(origin, type) and dataclasses.is_dataclass(origin):
        return _decode(origin, {})
    return origin() if origin in (int, float, str, bool, tuple, list, dict) else None


def _decode_value(hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return None if value is None else _decode_value(options[0], value)
    if origin is tuple:
        (item, *_) = typing.get_args(hint)
        return tuple(_decode_value(item, v) for v in value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        reader = getattr(hint, "from_dict", None)  # a value that reads its older layouts itself (Usage, Timings)
        return reader(value) if reader is not None else _decode(hint, value)
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]
