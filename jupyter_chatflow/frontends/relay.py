"""`Relay`: a live turn's events to the panel, in batches every ~40 ms, from a thread of its own.

One thread reads the `Response` as the engine writes it; another sends what arrived since the last batch. Every
event sent is kept, so a view that reloads mid-stream asks for the events after its last sequence number
(`resend`) and loses nothing. Token ids go with their readable pieces and bytes (`token_pieces`). The turn ends
(`on_end`) at its terminal event; events that follow it (the session's title, written after the answer) are
still read and sent, as the next sequence numbers of the same turn.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from jupyter_chatflow.pipeline.response import Response
from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

FLUSH_EVERY_S = 0.04


def token_pieces(tokenizer: Tokenizer, events: Iterable[dict[str, Any]], known: set[int] | None = None) -> dict:
    """{id: [readable piece, hex bytes]} for every prompt id, generated id and alternative in `events` (not in
    `known`, which is updated)."""
    known = set() if known is None else known
    ids: list[int] = []
    for event in events:
        if event["type"] == "tokenized":
            ids += event["ids"]
        elif event["type"] == "token":
            ids += [event["token_id"], *(a["token_id"] for a in event["alternatives"])]
    fresh = sorted(set(ids) - known)
    known.update(fresh)
    return {str(i): [tokenizer.piece(i), tokenizer.token_bytes(i).hex()] for i in fresh}


class Relay:
    """Streams one turn's events to `send` in batches; `on_start(turn_id)` first, `on_end(turn)` after the
    terminal event, `on_late(rows)` after events that followed it (the title)."""

    def __init__(
        self,
        response: Response,
        tokenizer: Tokenizer,
        *,
        send: Callable[[dict[str, Any]], Any],
        on_start: Callable[[str], Any],
        on_end: Callable[[dict[str, Any]], Any],
        on_late: Callable[[list[dict[str, Any]]], Any] = lambda rows: None,
        every: float = FLUSH_EVERY_S,
    ):
        self._response, self._tokenizer, self._send = response, tokenizer, send
        self._on_start, self._on_end, self._on_late, self._every = on_start, on_end, on_late, every
        self._rows: list[dict[str, Any]] = []
        self._sent = 0
        self._known: set[int] = set()
        self._lock = threading.Lock()
        self._answered = threading.Event()  # the terminal event was read
        self._read_all = threading.Event()  # ... and every late one
        self._ended = threading.Event()  # on_end was called
        self._finished = threading.Event()  # ... and the late events went out
        self.turn_id = ""
        self.batches = 0

    @property
    def done(self) -> bool:
        """The turn has ended (its terminal event went out; late events may follow)."""
        return self._ended.is_set()

    def start(self) -> None:
        threading.Thread(target=self._read, name="chatflow-relay-read", daemon=True).start()
        threading.Thread(target=self._flush_loop, name="chatflow-relay-send", daemon=True).start()

    def join(self, timeout: float | None = None) -> None:
        """Wait until every event went out, the late ones (the title) included."""
        self._finished.wait(timeout)

    def dicts(self) -> list[dict[str, Any]]:
        """The events so far."""
        with self._lock:
            return list(self._rows)

    def resend(self, after: int) -> None:
        """Send again every event already sent with a sequence number above `after` (a view that reloaded)."""
        with self._lock:
            rows = [r for r in self._rows[: self._sent] if r["sequence_number"] > after]
        if rows:
            self._emit(rows, token_pieces(self._tokenizer, rows))

    def _read(self) -> None:
        try:
            for event in self._response:
                self._keep(event.to_dict())
            self._answered.set()
            for event in self._response.after_end():
                self._keep(event.to_dict())
        finally:
            self._answered.set()
            self._read_all.set()

    def _keep(self, row: dict[str, Any]) -> None:
        if not self.turn_id:  # the view learns of the live turn before any of its events
            self.turn_id = row["turn_id"]
            self._on_start(self.turn_id)
        with self._lock:
            self._rows.append(row)

    def _flush_loop(self) -> None:
        try:
            self._flush_until(self._answered)
            rows = self.dicts()
            turn = {"turn_id": self.turn_id, "events": rows, "pieces": token_pieces(self._tokenizer, rows)}
            self._on_end(turn)
            self._ended.set()
            self._flush_until(self._read_all)
            late = self.dicts()[len(rows) :]
            if late:
                self._on_late(late)
        finally:
            self._ended.set()
            self._finished.set()

    def _flush_until(self, done: threading.Event) -> None:
        while not done.wait(self._every):
            self._flush()
        self._flush()

    def _flush(self) -> None:
        with self._lock:
            rows, self._sent = self._rows[self._sent :], len(self._rows)
        if rows:
            self._emit(rows, token_pieces(self._tokenizer, rows, self._known))

    def _emit(self, rows: list[dict[str, Any]], pieces: dict) -> None:
        try:
            self._send({"type": "events", "turn_id": self.turn_id, "events": rows, "pieces": pieces})
            self.batches += 1
        except Exception as error:  # the front end went away: the turn still runs to its end and is stored
            warnings.warn(f"jupyter_chatflow could not send events to the panel: {error}", stacklevel=1)
