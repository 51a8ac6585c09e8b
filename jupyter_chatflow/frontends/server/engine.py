"""What the server needs of the engine, and today's engine: `Model.generate`, one generation at a time.

The HTTP layer only calls `Engine.submit` and iterates what it returns, from a thread of its own per request; it
reads `queued` and `active` for /metrics and the queue's limit. The engine's continuous-batching scheduler
(`engine/scheduler.py`: `Scheduler(model, max_batch)`) has this shape, so it replaces `SerialEngine` without a change
here.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterator, Sequence
from typing import Protocol

from jupyter_chatflow.engine.constraint import Constraint
from jupyter_chatflow.engine.generation import Generation, Step, Usage
from jupyter_chatflow.engine.model import Model
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


class SerialEngine:
    """`Model.generate`, one generation at a time in arrival order; the others wait (`queued`)."""

    def __init__(self, model: Model, max_batch: int = 1):
        self.model = model
        self.max_batch = max_batch  # what a batching engine would take; this one always runs one
        self._turns = threading.Condition()
        self._waiting: collections.deque[_Turn] = collections.deque()
        self._running: _Turn | None = None

    @property
    def queued(self) -> int:
        return len(self._waiting)

    @property
    def active(self) -> int:
        return int(self._running is not None)

    def submit(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams | None = None,
        constraint: Constraint | None = None,
        cancel: threading.Event | None = None,
    ) -> Stream:
        generation = self.model.generate(prompt_ids, params=params or SamplingParams(), constraint=constraint,
                                         cancel=cancel)  # fmt: skip
        turn = _Turn(self, generation, cancel)
        with self._turns:
            self._waiting.append(turn)
        return turn

    def close(self) -> None:
        """Nothing to stop: generations run on their callers' threads."""

    def _wait_for(self, turn: _Turn) -> bool:
        """Block until `turn` may run (True) or was cancelled while waiting (False)."""
        with self._turns:
            while not turn.stopping():
                if self._running is None and self._waiting and self._waiting[0] is turn:
                    self._waiting.popleft()
                    self._running = turn
                    return True
                self._turns.wait(timeout=0.05)  # a caller's cancel event is set without a notify
            self._forget(turn)
            return False

    def _forget(self, turn: _Turn) -> None:
        """Take a cancelled turn out of the line (it may never be iterated)."""
        with self._turns:
            if turn in self._waiting:
                self._waiting.remove(turn)
                self._turns.notify_all()

    def _done(self, turn: _Turn) -> None:
        with self._turns:
            if self._running is turn:
                self._running = None
            self._turns.notify_all()


class _Turn:
    """A generation that waits for its turn on the model before its first step."""

    def __init__(self, engine: SerialEngine, generation: Generation, cancel: threading.Event | None):
        self._engine = engine
        self._generation = generation
        self._cancel = cancel
        self._cancelled = threading.Event()
        self._started = False

    @property
    def finish_reason(self) -> str | None:
        if not self._started and self.stopping():  # cancelled before it ran
            return "cancelled"
        return self._generation.finish_reason

    @property
    def text(self) -> str:
        return self._generation.text

    @property
    def usage(self) -> Usage:
        return self._generation.usage

    def stopping(self) -> bool:
        return self._cancelled.is_set() or (self._cancel is not None and self._cancel.is_set())

    def cancel(self) -> None:
        self._cancelled.set()
        self._generation.cancel()
        self._engine._forget(self)

    def __iter__(self) -> Iterator[Step]:
        if not self._engine._wait_for(self):
            return
        self._started = True
        try:
            yield from self._generation
        finally:
            self._engine._done(self)
