"""`Response`: a turn's events, produced lazily and kept, so any number of consumers can replay them.

The events live in an `EventLog` that only grows. A reader keeps its own position, so an interrupt that lands
anywhere in a reader (Ctrl-C, Kernel → Interrupt) loses nothing: iterate again and every event is still there.
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from jupyter_chatflow.events import TERMINAL, Event, TitleGenerated, TokenDelta, TurnStarted, event_from_dict


class EventLog(Protocol):
    """A growing list of events."""

    def get(self, index: int) -> Event | None:
        """The event at `index`, waiting for it if needed; None once the log has ended before it."""
        ...

    def cancel(self) -> None:
        """Ask the producer to stop (it still ends the log with its terminal event)."""
        ...

    def start(self) -> None:
        """Begin producing, without waiting for anything."""
        ...

    def wait(self, timeout: float | None) -> bool:
        """Wait until the log has ended (no event follows); False if `timeout` passed first."""
        ...

    def seen(self) -> list[Event]:
        """The events produced so far (never waits, never starts anything)."""
        ...


class PulledLog:
    """An EventLog over any iterable of events, pulled on demand (the first `get` starts it)."""

    def __init__(self, events: Iterable[Event]):
        self._source: Iterator[Event] | None = iter(events)
        self._events: list[Event] = []
        self._lock = threading.Lock()

    def get(self, index: int) -> Event | None:
        with self._lock:
            while index >= len(self._events) and self._source is not None:
                event = next(self._source, None)
                if event is None:
                    self._source = None
                else:
                    self._events.append(event)
            return self._events[index] if index < len(self._events) else None

    def cancel(self) -> None:
        """Nothing to stop: a plain iterable produces on demand."""

    def start(self) -> None:
        """Nothing to start: a plain iterable produces on demand."""

    def wait(self, timeout: float | None) -> bool:
        """Pull every event (a plain iterable has no one else to produce them)."""
        self.get(sys.maxsize)
        return True

    def seen(self) -> list[Event]:
        with self._lock:
            return list(self._events)


class WrittenLog:
    """An EventLog a producer thread writes to; `start` runs once, on the first `get`."""

    def __init__(self, start: Callable[[], Any], cancel: threading.Event):
        self._events: list[Event] = []
        self.notes: list[str] = []
        """What went wrong beside the turn (its storing): warned to a reader once it has read the terminal event."""
        self._ended = False
        self._changed = threading.Condition()
        self._start: Callable[[], Any] | None = start
        self._cancel = cancel

    def append(self, event: Event) -> None:
        """Add an event (producer side): the turn's events up to its terminal one, then late ones (the title)."""
        with self._changed:
            self._events.append(event)
            self._changed.notify_all()

    def note(self, text: str) -> None:
        """Something a reader should hear once the turn has ended (producer side; before the terminal event)."""
        with self._changed:
            self.notes.append(text)

    def end(self) -> None:
        """The producer is done: no event follows (after the terminal event and any late ones)."""
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def get(self, index: int) -> Event | None:
        self.start()
        with self._changed:
            try:
                while index >= len(self._events) and not self._ended:
                    self._changed.wait()
            except KeyboardInterrupt:  # Ctrl-C while waiting for the model: stop the turn, let the caller know
                self._cancel.set()
                raise
            return self._events[index] if index < len(self._events) else None

    def cancel(self) -> None:
        self._cancel.set()

    def start(self) -> None:
        with self._changed:
            start, self._start = self._start, None
        if start is not None:
            start()

    def wait(self, timeout: float | None) -> bool:
        self.start()
        with self._changed:
            return self._changed.wait_for(lambda: self._ended, timeout)

    def seen(self) -> list[Event]:
        with self._changed:
            return list(self._events)


class Response:
    """The events of one turn. Iterating starts the turn (once); iterating again replays from the start.

    >>> response = chat.send("What is the capital of France?")
    >>> for event in response:          # streams as the model generates
    ...     print(event.type)
    >>> response.text()                 # the answer as shown (waits for the end)
    """

    def __init__(self, events: Iterable[Event] | EventLog):
        self._log: EventLog = events if isinstance(events, (PulledLog, WrittenLog)) else PulledLog(events)  # type: ignore[arg-type]
        self._told = False

    @classmethod
    def from_dicts(cls, rows: Iterable[dict[str, Any]]) -> Response:
        """A finished response rebuilt from `to_dict()` rows (e.g. a stored turn)."""
        return cls([event_from_dict(row) for row in rows])

    def __iter__(self) -> Iterator[Event]:
        """The turn's events, live, through its terminal one (late events: `after_end`). A reader that stops early
        (a `break`, `next(...)`) leaves the turn running: other readers (a panel, a cell's display) may follow the
        same turn. To stop it, `cancel()` (Ctrl-C while reading does)."""
        index = 0
        while (event := self._log.get(index)) is not None:
            index += 1
            yield event
            if isinstance(event, TERMINAL):
                self._tell_notes()  # (the reader has handled the end: a warning now follows the answer)
                return

    def _tell_notes(self) -> None:
        """Warn, once per response, what went wrong beside the turn (`WrittenLog.note`: its storing)."""
        notes = getattr(self._log, "notes", [])
        if notes and not self._told:
            self._told = True
            for note in notes:
                warnings.warn(note, stacklevel=3)

    def after_end(self) -> list[Event]:
        """The events that follow the terminal one: the session's title (`TitleGenerated`) when this turn was the
        session's first and its title was not ready before the answer ended. Waits until the engine is done."""
        events, index = [], len(self.events())
        while (event := self._log.get(index)) is not None:
            index += 1
            events.append(event)
        return events

    def title(self) -> str:
        """The title this turn gave its session ("" if none): written beside the answer, it comes mid-answer or
        after the end (`after_end`); waits until the engine is done with the turn."""
        every = [*self.events(), *self.after_end()]
        return next((e.title for e in every if isinstance(e, TitleGenerated)), "")

    def cancel(self) -> None:
        """Stop the turn between two decode steps; it ends with a `Cancelled` event (safe from any thread)."""
        self._log.cancel()

    def start(self) -> None:
        """Begin the turn now without reading it (it runs on the engine thread; `Chat.watch` sees its events)."""
        self._log.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the engine is done with the turn, its late events (the title) included; False if `timeout`
        seconds passed first. Starts the turn if nothing has."""
        ended = self._log.wait(timeout)
        if ended:
            self._tell_notes()
        return ended

    def seen(self) -> list[Event]:
        """The events so far, without waiting or starting the turn."""
        return self._log.seen()

    def follow(self, handle: Callable[[Event], Any]) -> None:
        """Pass every event to `handle` once, in order, until the end. Ctrl-C (Kernel → Interrupt) on the way
        cancels the turn and reading goes on, so the `Cancelled` event with the partial answer still arrives."""
        handled = 0
        while True:
            try:
                for index, event in enumerate(self):  # after an interrupt this replays: skip what was handled
                    if index >= handled:
                        handled = index + 1
                        handle(event)
                return
            except KeyboardInterrupt:
                self.cancel()

    def events(self) -> list[Event]:
        """All events (runs the turn to its end)."""
        return list(self)

    def text(self) -> str:
        """The answer as shown to the user (runs the turn to its end)."""
        last = self.terminal()
        if last is not None:
            return last.text  # type: ignore[attr-defined]
        return "".join(e.text for e in self if isinstance(e, TokenDelta))

    def terminal(self) -> Event | None:
        """The last event (Completed, Cancelled or Failed) once the turn has ended."""
        events = self.events()
        return events[-1] if events and isinstance(events[-1], TERMINAL) else None

    @property
    def turn_id(self) -> str:
        first = self._log.get(0)
        return first.turn_id if first is not None else ""

    @property
    def request(self) -> TurnStarted | None:
        first = self._log.get(0)
        return first if isinstance(first, TurnStarted) else None

    def to_dicts(self) -> list[dict[str, Any]]:
        """Every event as a JSON-ready dict (runs the turn to its end)."""
        return [event.to_dict() for event in self]

    def __repr__(self) -> str:
        return f"<Response {len(getattr(self._log, '_events', []))} events so far>"
