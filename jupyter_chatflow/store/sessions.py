"""Sessions and their turns, stored so a conversation continues after a kernel restart (`%%chat --session demo`).

A session has a stable id and a name; the name is unique among live sessions, so `open("demo")` in a new kernel
finds yesterday's "demo", and `open("demo", new=True)` archives it and starts a fresh one. Each turn keeps the user's
message, the answer as shown, how it ended, and its whole event log (enough to re-render every view with no kernel).

>>> sessions = Sessions(Database())
>>> demo = sessions.open("demo")
>>> sessions.add_turn(TurnRecord.from_events(response.events(), session_id=demo.id))
>>> [turn.answer for turn in sessions.turns(demo.id)]
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Sequence

from jupyter_chatflow.events import Cancelled, Completed, Event, Failed, TurnStarted, event_from_dict
from jupyter_chatflow.processes import alive

from .database import Database, StorageError

STATUSES = ("completed", "cancelled", "error", "interrupted")
"""How a stored turn ended: its terminal event (`Completed`, `Cancelled`, `Failed`), or "interrupted": the process
running it ended mid-turn (killed, crashed), and a later one found it (`Sessions.recover`)."""
RUNNING = "running"
"""A turn being answered now (`Sessions.begin`): left out of `turns` until it ends or is found interrupted."""
INTERRUPTED = "interrupted"


class SessionNotFoundError(StorageError):
    """No session with the id asked for."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class SessionRecord:
    """One conversation."""

    id: str
    name: str
    title: str = ""
    """Written by the model beside the first answer; "" until then."""
    created: float
    updated: float
    """Wall-clock time (Unix seconds) of the last turn or title change."""
    archived: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class TurnRecord:
    """One stored turn: the message, the answer as shown, how it ended, and its events."""

    id: str
    """The turn id (the events' `turn_id`)."""
    session_id: str
    user: str
    answer: str
    status: str
    """completed | cancelled | error | interrupted (`STATUSES`)."""
    seq: int = -1
    """0, 1, 2… within the session; assigned by `Sessions.add_turn`."""
    created: float = dataclasses.field(default_factory=time.time)
    events: tuple[Event, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"TurnRecord.status must be one of {', '.join(STATUSES)}, not {self.status!r}")
        object.__setattr__(self, "events", tuple(self.events))

    @classmethod
    def from_events(cls, events: Sequence[Event], *, session_id: str | None = None) -> TurnRecord:
        """The record of a finished turn, from its events (`TurnStarted` first, a terminal event, then any late
        ones such as the session's title)."""
        started = next((e for e in events if isinstance(e, TurnStarted)), None)
        last = next((e for e in reversed(events) if isinstance(e, (Completed, Cancelled, Failed))), None)
        if started is None or not isinstance(last, (Completed, Cancelled, Failed)):
            raise ValueError("A stored turn needs its TurnStarted event and a terminal event; is the turn finished?")
        status = "completed" if isinstance(last, Completed) else "cancelled" if isinstance(last, Cancelled) else "error"
        status = INTERRUPTED if isinstance(last, Failed) and last.error == INTERRUPTED else status
        return cls(
            id=started.turn_id,
            session_id=session_id or started.session_id,
            user=started.user,
            answer=last.text,
            status=status,
            created=started.created,
            events=tuple(events),
        )


class Sessions:
    """The sessions and turns in one `Database`."""

    def __init__(self, db: Database):
        self.db = db

    def open(self, name: str, *, new: bool = False) -> SessionRecord:
        """The live session called `name`, created if there is none; `new=True` archives it and starts afresh."""
        if not name.strip():
            raise ValueError("A session needs a name, e.g. Sessions.open('demo')")
        with self.db.transaction() as conn:
            if new:
                conn.execute("UPDATE sessions SET archived = 1 WHERE name = ? AND archived = 0", (name,))
            row = conn.execute("SELECT * FROM sessions WHERE name = ? AND archived = 0", (name,)).fetchone()
            if row is None:
                now = time.time()
                conn.execute(
                    "INSERT INTO sessions (id, name, created, updated) VALUES (?, ?, ?, ?)",
                    (uuid.uuid4().hex, name, now, now),
                )
                row = conn.execute("SELECT * FROM sessions WHERE name = ? AND archived = 0", (name,)).fetchone()
        return _session(row)

    def unstored(self, name: str) -> SessionRecord:
        """A session of a chat that stores nothing (`Chat(persist=False)`): a record, never written."""
        now = time.time()
        return SessionRecord(id=uuid.uuid4().hex, name=name, created=now, updated=now)

    def get(self, session_id: str) -> SessionRecord:
        """The session with this id (live or archived)."""
        rows = self.db.query("SELECT * FROM sessions WHERE id = ?", (session_id,))
        if not rows:
            raise SessionNotFoundError(f"No session {session_id!r}; Sessions.list() shows the ones there are")
        return _session(rows[0])

    def list(self, *, archived: bool = False) -> builtins.list[SessionRecord]:
        """Live sessions (and archived ones too if `archived`), most recently updated first."""
        where = "" if archived else "WHERE archived = 0"
        rows = self.db.query(f"SELECT * FROM sessions {where} ORDER BY updated DESC, created DESC")
        return [_session(row) for row in rows]

    def set_title(self, session_id: str, title: str) -> None:
        """Store the session's title (the model writes it beside the first answer)."""
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "UPDATE sessions SET title = ?, updated = ? WHERE id = ?", (title.strip(), time.time(), session_id)
            )
        if cursor.rowcount == 0:
            raise SessionNotFoundError(f"No session {session_id!r} to title; open it first with Sessions.open(name)")

    def begin(self, turn_id: str, session_id: str, user: str, events: Sequence[Event]) -> None:
        """Store a turn as it starts ("running", owned by this process): the user's message is kept whatever
        happens to the process next. `progress` keeps its answer up to date; `add_turn` stores it when it ends."""
        with self.db.transaction() as conn:
            (seq,) = conn.execute(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM turns WHERE session_id = ?", (session_id,)
            ).fetchone()
            conn.execute(
                "INSERT INTO turns (id, session_id, seq, user, answer, status, created, events, owner)"
                " VALUES (?, ?, ?, ?, '', ?, ?, ?, ?)",
                (turn_id, session_id, seq, user, RUNNING, time.time(), _json(events), owner()),
            )

    def progress(self, turn_id: str, answer: str, events: Sequence[Event]) -> None:
        """What a running turn has streamed so far (what is kept if its process dies now)."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE turns SET answer = ?, events = ? WHERE id = ? AND status = ?",
                (answer, _json(events), turn_id, RUNNING),
            )

    def recover(self) -> builtins.list[str]:
        """Mark "interrupted" the running turns whose process has ended (one of this machine whose pid is gone),
        each with what it had streamed and a `Failed` event saying so; returns their ids. Turns of live processes,
        and of other machines (whose processes cannot be seen from here), are left running."""
        found = []
        with self.db.transaction() as conn:
            for row in conn.execute("SELECT id, answer, events, owner FROM turns WHERE status = ?", (RUNNING,)):
                if _alive(row["owner"]):
                    continue
                events = _events(row["events"])
                last = events[-1] if events else None
                ended = Failed(
                    error=INTERRUPTED, text=row["answer"], sequence_number=len(events), turn_id=row["id"],
                    timestamp=last.timestamp if last is not None else 0.0,
                    message="The process answering this turn ended before the turn did (it was killed, or its "
                    "machine stopped); the message and the answer as far as it had streamed are kept.",
                )  # fmt: skip
                conn.execute(
                    "UPDATE turns SET status = ?, events = ? WHERE id = ?",
                    (INTERRUPTED, _json([*events, ended]), row["id"]),
                )
                found.append(row["id"])
        return found

    def add_turn(self, turn: TurnRecord) -> TurnRecord:
        """Append a turn to its session, atomically (or finish the running one `begin` stored); returns it with its
        `seq`."""
        with self.db.transaction() as conn:
            running = conn.execute("SELECT seq FROM turns WHERE id = ? AND status = ?", (turn.id, RUNNING)).fetchone()
            if running is not None:
                stored = dataclasses.replace(turn, seq=running["seq"])
                conn.execute(
                    "UPDATE turns SET answer = ?, status = ?, events = ? WHERE id = ?",
                    (stored.answer, stored.status, _json(stored.events), stored.id),
                )
                conn.execute("UPDATE sessions SET updated = ? WHERE id = ?", (time.time(), turn.session_id))
                return stored
            (seq,) = conn.execute(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM turns WHERE session_id = ?", (turn.session_id,)
            ).fetchone()
            stored = dataclasses.replace(turn, seq=seq)
            try:
                conn.execute(
                    "INSERT INTO turns (id, session_id, seq, user, answer, status, created, events)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (stored.id, stored.session_id, seq, stored.user, stored.answer, stored.status, stored.created,
                     _json(stored.events)),
                )  # fmt: skip
            except sqlite3.IntegrityError as error:
                raise StorageError(
                    f"Cannot store turn {turn.id!r} in session {turn.session_id!r} ({error}): open the session "
                    "with Sessions.open(name) first, and give each turn a new id"
                ) from error
            conn.execute("UPDATE sessions SET updated = ? WHERE id = ?", (time.time(), turn.session_id))
        return stored

    def add_event(self, turn_id: str, event: Event) -> bool:
        """Append one event to a stored turn's log (a late event: the session's title); False when the turn is no
        longer stored (the session was reset in the meantime)."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT events FROM turns WHERE id = ?", (turn_id,)).fetchone()
            if row is not None:
                events = [*json.loads(row["events"]), event.to_dict()]
                conn.execute("UPDATE turns SET events = ? WHERE id = ?", (json.dumps(events), turn_id))
        return row is not None

    def turns(self, session_id: str) -> builtins.list[TurnRecord]:
        """The session's turns in order."""
        rows = self.db.query(
            "SELECT * FROM turns WHERE session_id = ? AND status != ? ORDER BY seq", (session_id, RUNNING)
        )
        return [_turn(row) for row in rows]

    def reset(self, session_id: str) -> int:
        """Delete the session's turns (it stays, with its name); return how many there were."""
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM turns WHERE session_id = ?", (session_id,)).rowcount

    def events(self, turn_id: str) -> builtins.list[Event]:
        """A stored turn's events (`Response(events)` replays them)."""
        rows = self.db.query("SELECT events FROM turns WHERE id = ?", (turn_id,))
        if not rows:
            raise StorageError(f"No stored turn {turn_id!r}; Sessions.turns(session_id) lists a session's turns")
        return _events(rows[0]["events"])


def owner() -> str:
    """This process, as `begin` stores the one that runs a turn: host and pid (read now: a forked child is not its
    parent)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(stored: str) -> bool:
    """Whether the process `stored` names may still be running: this one, one of another machine (which cannot be
    seen from here), or a live pid of this machine."""
    host, _, pid = stored.rpartition(":")
    if stored == owner() or host != socket.gethostname() or not pid.isdigit():
        return True
    return alive(int(pid))


def _session(row: sqlite3.Row) -> SessionRecord:
    return SessionRecord(**{**dict(row), "archived": bool(row["archived"])})


def _turn(row: sqlite3.Row) -> TurnRecord:
    fields = {k: row[k] for k in row.keys() if k != "owner"}  # noqa: SIM118 (a Row iterates its values)
    return TurnRecord(**{**fields, "events": _events(row["events"])})


def _json(events: Sequence[Event]) -> str:
    """A turn's events as stored: a JSON list of `Event.to_dict()` rows."""
    return json.dumps([event.to_dict() for event in events])


def _events(stored: str) -> builtins.list[Event]:
    return [event_from_dict(row) for row in json.loads(stored)]
