"""The values events carry: a marked span, a prompt segment, a trim, a provenance run, a recalled memory, a turn's
usage and timings."""

from __future__ import annotations

import dataclasses
from typing import Any

from .kinds import SegmentKind, TrimAction


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
class Head:
    """One attention head: layer and head, from 0."""

    layer: int
    head: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class Steering:
    """A vector added to the residual after `layer`: what it is (`label`), its strength (in units of the residual's
    mean length there; 0 for a vector given as it is) and its length."""

    layer: int
    label: str
    strength: float
    norm: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class Usage:
    """The tokens of one turn, over all its rounds (a tool call and the answer from its result are two): what the
    OpenAI APIs call usage, plus the tokens the prompt cache saved. Summed once, by the turn's answerer (a local
    one's rounds: `pipeline/stream.usage_of`; a server's report); every view reads it from the terminal event."""

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
