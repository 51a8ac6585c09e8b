"""What the server needs of the engine: `Engine` (the package's one protocol, `engine/generation.py`: `Scheduler`
batches, `Model` runs alone) and `Stream`, what the server reads from a submitted sequence or its own wrappers.

The HTTP layer only calls `Engine.submit` and iterates what it returns, from a thread of its own per request; it
reads `queued` and `active` for /metrics and the queue's limit. Tests wrap the Scheduler in this shape (to pace it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from jupyter_chatflow.engine.generation import Engine, GenerationCounts, Step

__all__ = ["Engine", "Stream"]


class Stream(Protocol):
    """One submitted sequence, as `Generation` is: iterate it once for `Step`s (blocking until each is ready).

    `finish_reason` ("stop", "length", "cancelled"), `text` and `usage` are final once iteration has ended;
    `cancel()` (any thread) ends it before its next step, also while it waits for a slot.
    """

    @property
    def finish_reason(self) -> str | None: ...

    @property
    def text(self) -> str: ...

    @property
    def usage(self) -> GenerationCounts: ...

    def __iter__(self) -> Iterator[Step]: ...

    def cancel(self) -> None: ...
