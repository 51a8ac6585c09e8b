"""When the session's title is written: beside the answer, as ChatGPT's web client receives it mid-answer.

A `TitleTask` watches a turn's events. Once the answer has begun (its first token shown for a long message; its
first line or `ANSWER_CHARS` characters for a short one, which the title prompt quotes), it starts writing the title
on a thread of its own; the generation runs on the chat's scheduler in the same decode steps as the answer. Not
sooner: started at the answer's prefill, the title's batch of two (its decode programs loaded, 0.7 s of one core)
and its prefill shared two cores with the answer's first decode step, and a fresh process's first token came later. The
title event goes out when it is ready: mid-answer for a long answer, after the end for a short one. A turn that
does not complete (stopped, blocked by a safety layer, failed) cancels a title not yet written.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable

from jupyter_chatflow.events import Completed, ContextAssembled, Event, TitleGenerated, TokenDelta

from .title import SHORT_MESSAGE

ANSWER_CHARS = 80  # of the answer, at most, that a short message's title prompt waits for (or its first line)

Write = Callable[[str, str, threading.Event], "TitleGenerated | None"]


class TitleTask:
    """Writes one turn's title beside its answer: `see` each event of the turn, then `finish` with the last one."""

    def __init__(self, write: Write, deliver: Callable[[TitleGenerated], None]):
        self._write, self._deliver = write, deliver
        self._user: str | None = None  # the user's message as the model saw it (after input redaction)
        self._answer = ""
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None

    def see(self, event: Event) -> None:
        """A turn event (on the turn's thread): the user's message, the answer so far; start when it is time."""
        if isinstance(event, ContextAssembled):
            self._user = event.user_text
        elif isinstance(event, TokenDelta):
            self._answer += event.text
        if self._thread is None and self._user is not None and self._ready(event):
            self._start()

    def finish(self, last: Event) -> None:
        """The turn ended with `last`: a completed answer gets its title (started now if the answer was too
        short to start it); otherwise a title not yet out is cancelled. Returns once the title is out (or not)."""
        completed = isinstance(last, Completed) and last.finish_reason != "content_filter"
        if not completed:
            self._cancel.set()
        elif self._thread is None and self._user is not None:
            self._start()
        if self._thread is not None:
            self._thread.join()

    def _ready(self, event: Event) -> bool:
        assert self._user is not None
        if len(self._user.strip()) >= SHORT_MESSAGE:  # the prompt does not quote the answer: start at once...
            return isinstance(event, TokenDelta)  # ...once the answer shows its first token (see `TitleTask`)
        return "\n" in self._answer.strip() or len(self._answer) >= ANSWER_CHARS

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="chatflow-title", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self._user is not None
        try:
            event = self._write(self._user, self._answer, self._cancel)
            if event is not None and not self._cancel.is_set():
                self._deliver(event)
        except Exception as error:  # the answer goes on; a failing title must not vanish silently
            warnings.warn(f"jupyter_chatflow could not write the session's title ({error!r}).", stacklevel=1)
