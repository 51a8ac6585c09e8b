"""A turn kept in the database while it runs: its message when it starts, what it has streamed as it streams.

A process killed mid-answer (`kill -9`, an out-of-memory kill, a power cut) used to leave no trace of the turn, not
even the user's message: the turn was stored only when it ended. Now `Sessions.begin` stores it "running" at
`TurnStarted`; its prompt (`ContextAssembled`) and then its answer, at most every `EVERY_S` seconds, follow
(`Sessions.progress`); `Chat` stores it whole at its terminal event as before. The next process to open the
database finds a running turn whose process has ended and marks it "interrupted" (`Sessions.recover`): the history
keeps it as it keeps a stopped turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from jupyter_chatflow.events import ContextAssembled, Event, TokenDelta, TurnStarted
from jupyter_chatflow.store.sessions import Sessions

EVERY_S = 1.0
"""At most one write of a running turn's answer per this many seconds (each rewrites the turn's events)."""


class TurnKeeper:
    """Keeps one running turn in `sessions` (None: an unstored chat) as its events come (`see`, under the turn's
    lock). A failed write is told once through `note` (the turn's readers hear it after its end) and the turn goes
    on: its answer is not lost from the output."""

    def __init__(self, sessions: Sessions | None, session_id: str, note: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic):  # fmt: skip
        self._sessions, self._session_id, self._note, self._clock = sessions, session_id, note, clock
        self._written = 0.0
        self._begun = False

    def see(self, log: Sequence[Event]) -> None:
        """The turn's events so far; the last one is new."""
        if self._sessions is None:
            return
        event = log[-1]
        try:
            if isinstance(event, TurnStarted):
                self._sessions.begin(event.turn_id, self._session_id, event.user, log)
                self._begun = True
            elif self._begun and (isinstance(event, ContextAssembled) or self._due(event)):
                answer = "".join(e.text for e in log if isinstance(e, TokenDelta))
                self._sessions.progress(event.turn_id, answer, log)
                self._written = self._clock()
        except Exception as error:
            self._sessions = None  # (once: the terminal event's store says what it finds)
            self._note(f"jupyter_chatflow could not keep this turn as it streamed ({error}); it is stored when it "
                       "ends, unless that fails too.")  # fmt: skip

    def _due(self, event: Event) -> bool:
        return isinstance(event, TokenDelta) and self._clock() - self._written >= EVERY_S
