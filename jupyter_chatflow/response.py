"""`Response`: a turn's events, produced lazily and kept, so any number of consumers can replay them."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

from .events import TERMINAL, Cancelled, Completed, Event, Failed, TokenDelta, TurnStarted, event_from_dict


class Response:
    """The events of one turn. Iterating starts the turn (once); iterating again replays from the start.

    >>> response = chat.send("What is the capital of France?")
    >>> for event in response:          # streams as the model generates
    ...     print(event.type)
    >>> response.text()                 # the answer as shown (waits for the end)
    """

    def __init__(self, events: Iterable[Event]):
        self._source: Iterator[Event] | None = iter(events)
        self._events: list[Event] = []
        self._lock = threading.Lock()

    @classmethod
    def from_dicts(cls, rows: Iterable[dict[str, Any]]) -> Response:
        """A finished response rebuilt from `to_dict()` rows (e.g. a stored turn)."""
        return cls([event_from_dict(row) for row in rows])

    def __iter__(self) -> Iterator[Event]:
        index = 0
        while True:
            with self._lock:
                if index >= len(self._events) and not self._pull():
                    return
                event = self._events[index]
            index += 1
            yield event

    def _pull(self) -> bool:
        """Take one more event from the source; False when it is exhausted."""
        if self._source is None:
            return False
        try:
            self._events.append(next(self._source))
            return True
        except StopIteration:
            self._source = None
            return False
        except BaseException:
            self._source = None
            raise

    def events(self) -> list[Event]:
        """All events (runs the turn to its end)."""
        return list(self)

    def text(self) -> str:
        """The answer as shown to the user (runs the turn to its end)."""
        last = self.terminal()
        if isinstance(last, (Completed, Cancelled, Failed)):
            return last.text
        return "".join(e.text for e in self if isinstance(e, TokenDelta))

    def terminal(self) -> Event | None:
        """The last event (Completed, Cancelled or Failed) once the turn has ended."""
        events = self.events()
        return events[-1] if events and isinstance(events[-1], TERMINAL) else None

    @property
    def turn_id(self) -> str:
        first = next(iter(self), None)
        return first.turn_id if first is not None else ""

    @property
    def request(self) -> TurnStarted | None:
        first = next(iter(self), None)
        return first if isinstance(first, TurnStarted) else None

    def to_dicts(self) -> list[dict[str, Any]]:
        """Every event as a JSON-ready dict (runs the turn to its end)."""
        return [event.to_dict() for event in self]

    def __repr__(self) -> str:
        state = "done" if self._source is None else "streaming"
        return f"<Response {state}, {len(self._events)} events>"
