"""`Relay`: a chat's events on their way to a panel, handed on in batches every ~40 ms.

The chat calls `push` with every event of every turn (`Chat.watch`), on the engine thread, whoever sent the turn:
the panel's own, another panel's, `%%chat`'s, a script's. `push` only queues, so the engine never waits for a
panel. A thread of the relay's own hands what arrived since the last batch to `handle`, in order, every ~40 ms
(one comm message per batch, not one per token); it runs while events come and ends when they stop, so an idle
panel holds no thread, and a panel that is gone is not kept alive by one.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterable

from jupyter_chatflow.events import Event, TokenDelta, Tokenized
from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

FLUSH_EVERY_S = 0.04


def token_pieces(tokenizer: Tokenizer, events: Iterable[Event], known: set[int] | None = None) -> dict:
    """{id: [readable piece, hex bytes]} for every prompt id, generated id and alternative in `events` (not in
    `known`, which is updated)."""
    known = set() if known is None else known
    ids: list[int] = []
    for event in events:
        if isinstance(event, Tokenized):
            ids += event.ids
        elif isinstance(event, TokenDelta):
            ids += [event.token_id, *(a.token_id for a in event.alternatives)]
    fresh = sorted(set(ids) - known)
    known.update(fresh)
    return {str(i): [tokenizer.piece(i), tokenizer.token_bytes(i).hex()] for i in fresh}


class Relay:
    """Queues events from any thread; hands them to `handle(batch)` in order, every `every` seconds, from one
    thread at a time."""

    def __init__(self, handle: Callable[[list[Event]], object], every: float = FLUSH_EVERY_S):
        self._handle, self._every = handle, every
        self._queue: list[Event] = []
        self._pushed = self._handled = 0
        self._running = False
        self._changed = threading.Condition()
        self.batches = 0

    def push(self, event: Event) -> None:
        """Queue one event (never blocks on the panel)."""
        with self._changed:
            self._queue.append(event)
            self._pushed += 1
            if not self._running:
                self._running = True
                threading.Thread(target=self._run, name="chatflow-relay", daemon=True).start()

    def sync(self, timeout: float | None = None) -> bool:
        """Wait until every event pushed before this call has been handled; False if `timeout` passed first."""
        with self._changed:
            target = self._pushed
            return self._changed.wait_for(lambda: self._handled >= target, timeout)

    def _run(self) -> None:
        while True:
            time.sleep(self._every)
            with self._changed:
                batch, self._queue = self._queue, []
                if not batch:
                    self._running = False
                    return
            self._hand_on(batch)

    def _hand_on(self, batch: list[Event]) -> None:
        try:
            self._handle(batch)
            self.batches += 1
        except Exception as error:  # the front end went away, or a view's bug: the turn runs on and is stored
            warnings.warn(f"jupyter_chatflow could not show events in the panel: {error!r}", stacklevel=1)
        finally:
            with self._changed:
                self._handled += len(batch)
                self._changed.notify_all()
