"""The events after the answer: a memory written, the session's title, and the terminal events (completed,
cancelled, failed), one of which ends every turn."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal

from .base import Event
from .kinds import FinishReason, MemoryOperation, TitleSource
from .values import Timings, Usage


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
    """Tokens per second over the intervals between the answer's tokens as they were computed, XLA compiling left
    out: the turn's account's figure (`account.settled`; 0: no two tokens to time)."""


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
