"""One sequence submitted to a `Scheduler`: what the loop knows of it, and the queue its caller reads steps from.

The loop thread puts each step in the sequence's queue (`Out`), then its end (`END`, `CLOSED` when the scheduler
closed, an `OwnError` when its own work failed, or the exception of a batch that failed); the caller's thread reads
them in `Submission.steps`, which a `Generation` iterates. Nothing else is shared between the two threads but
threading.Events: the caller never holds a lock while it iterates.
"""

from __future__ import annotations

import dataclasses
import itertools
import queue
import threading
import time
from collections.abc import Iterator

import numpy as np

from jupyter_chatflow.errors import GenerationError

from .constraint import Constraint
from .generation import GenerationCounts, RawStep
from .run import SequenceState
from .sampling import SamplingParams

RELEASE_WAIT_S = 5.0  # at most this long, a caller that read its sequence's last step waits for it to be kept


@dataclasses.dataclass(frozen=True)
class Out:
    """A step for the caller, whether its constraint was complete after it, and whether it is the sequence's last
    (the loop frees its row and closes its queue next)."""

    raw: RawStep
    done: bool
    last: bool = False


@dataclasses.dataclass(frozen=True)
class OwnError:
    """What a sequence's queue carries when its own work failed (its prefill, its constraint): it alone ends."""

    error: Exception


END = object()  # the queue's last item: no more steps
CLOSED = object()  # the same, when the scheduler closed: the generation ends as cancelled
_ids = itertools.count()


@dataclasses.dataclass(eq=False)
class Submission:
    """One submitted sequence, as the loop thread sees it."""

    prompt: np.ndarray
    params: SamplingParams
    constraint: Constraint | None
    budget: int
    stop_ids: frozenset[int]
    cancel: threading.Event | None  # the caller's
    id: int = dataclasses.field(default_factory=lambda: next(_ids))
    out: queue.SimpleQueue = dataclasses.field(default_factory=queue.SimpleQueue)
    closed: threading.Event = dataclasses.field(default_factory=threading.Event)  # the caller let go
    generation_stop: threading.Event | None = None  # the Generation's own stop flag, once it is iterated
    run: SequenceState | None = None
    prefill: Iterator[tuple[int, bool]] | None = None  # (chunk width, last) per chunk run
    reused: int = 0
    row: int = -1
    done_read: bool = False  # the constraint was complete after the step the caller read last (its thread only)
    read_from: float | None = None  # perf_counter when the caller began reading (its thread)
    admitted: float | None = None  # perf_counter when its prefill began (the loop thread)
    compiled: float = 0.0  # the loop thread's compile clock at this sequence's last step (or its admission)
    waited_for: str = ""  # why it was last left in the queue at the head (the loop thread)
    released: threading.Event = dataclasses.field(default_factory=threading.Event)  # its queue is closed: its row
    # is free and its keys/values are in the prompt cache (a caller that read its last step waits for it)

    def queue_ms(self) -> float:
        """Time from the caller's first read to the start of the prefill (0 if it began reading later)."""
        if self.read_from is None or self.admitted is None:
            return 0.0
        return max(0.0, (self.admitted - self.read_from) * 1000)

    def queue_reason(self) -> str:
        """What its prefill waited for, in words ("" for a wait under a millisecond: a hand-over, not a wait)."""
        if self.queue_ms() < 1.0:
            return ""
        return self.waited_for or "the running sequences' decode step"

    def stopped(self) -> bool:
        """The caller cancelled, stopped iterating, or dropped the generation."""
        return any(e is not None and e.is_set() for e in (self.closed, self.cancel, self.generation_stop))

    def reach(self, position: int) -> int:
        """The furthest cache position it may still come to from `position`: what its budget has left."""
        return position + self.budget - (len(self.run.tokens) if self.run is not None else 0)

    # --- the loop's side --------------------------------------------------------------------------------------------

    def emit(self, raw: RawStep, clock: float) -> bool:
        """Hand a step to the caller, with the compile time since its step before (`clock`: the loop thread's
        `compile_seconds()` now); True when the sequence ends with it. The loop then gives its keys and values to
        the prompt cache and only then closes its queue (`finish`): a turn that has read to the end finds the
        prompt cache as its generation left it (`prompt_cache.clear()` right after it clears it)."""
        assert self.run is not None
        try:
            if self.constraint is not None:
                self.constraint.advance(raw.token_id)
            done = self.constraint is not None and self.constraint.is_done()
        except Exception as error:  # its constraint failed: it alone ends
            self.out.put(OwnError(error))
            return True
        compiled, self.compiled = self.compiled, clock  # (what the loop compiled meanwhile)
        raw = dataclasses.replace(raw, compile_ms=(self.compiled - compiled) * 1000)
        last = raw.token_id in self.stop_ids or len(self.run.tokens) >= self.budget or done
        self.out.put(Out(raw=raw, done=done, last=last))
        return last

    def finish(self, last: object = END) -> None:
        """Close the queue with `last` (its end, an error of its own); the caller may return now."""
        self.out.put(last)
        self.released.set()

    # --- the caller's side ------------------------------------------------------------------------------------------

    def steps(self, stop: threading.Event, usage: GenerationCounts) -> Iterator[RawStep]:
        """The raw steps, read from the queue on the caller's thread (what its `Generation` iterates)."""
        self.generation_stop, self.read_from = stop, time.perf_counter()
        last = False
        try:
            while (item := self.out.get()) is not END:
                if item is CLOSED:
                    stop.set()
                    return
                if isinstance(item, OwnError):
                    raise GenerationError(f"This sequence failed: {item.error}") from item.error
                if isinstance(item, BaseException):
                    raise GenerationError(f"The batch this sequence ran in failed: {item}") from item
                usage.reused_tokens, usage.queue_ms = self.reused, self.queue_ms()
                usage.queue_reason = self.queue_reason()
                self.done_read, last = item.done, item.last
                yield item.raw
        finally:
            self.closed.set()
            if last:  # (a caller that stops at the end-of-sequence token does not read the queue's end) it returns
                # once the loop has kept the sequence's keys/values, right after: what it does next (a follow-up,
                # `prompt_cache.clear()`) sees the prompt cache as the generation left it
                self.released.wait(RELEASE_WAIT_S)
