"""What the server needs of the engine: the shape of `engine/scheduler.py`'s `Scheduler` (continuous batching).

The HTTP layer only calls `Engine.submit` and iterates what it returns, from a thread of its own per request; it
reads `queued` and `active` for /metrics and the queue's limit. Tests wrap the Scheduler in this shape (to pace it).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Protocol

from jupyter_chatflow.engine.constraint import Constraint
from jupyter_chatflow.engine.generation import Step, Usage
from jupyter_chatflow.engine.sampling import SamplingParams


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
    def usage(self) -> Usage: ...

    def __iter__(self) -> Iterator[Step]: ...

    def cancel(self) -> None: ...


class Engine(Protocol):
    """Takes sequences and runs them; `submit` raises `GenerationError` for a prompt it cannot take."""

    @property
    def queued(self) -> int:
        """Sequences submitted and not yet decoding."""
        ...

    @property
    def active(self) -> int:
        """Sequences decoding now (slots in use)."""
        ...

    def submit(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams | None = None,
        constraint: Constraint | None = None,
        cancel: threading.Event | None = None,
    ) -> Stream: ...

    def close(self) -> None: ...
