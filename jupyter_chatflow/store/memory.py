"""Long-term memory: short facts the user asked the assistant to keep, recalled by full-text search.

Memories live in the `memories` table with an FTS5 index (see `store.py`). `recall` turns the user's message into a
safe FTS query (each content word quoted, OR-ed) and returns the best matches, ranked by bm25, as `Snippet`s for the
context's hidden memory segment. `parse_command` spots "remember that …" / "forget …" in a chat message.

>>> memory = Memory(Database())
>>> memory.remember("I prefer short answers")
1
>>> memory.recall("How short should answers be?")
[Snippet(memory_id=1, text='I prefer short answers', score=0.9...)]
"""

from __future__ import annotations

import builtins
import dataclasses
import re
import sqlite3
import time
from typing import Literal

from jupyter_chatflow.events import Snippet

from .database import Database

_STOP_WORDS = """
    a about above after again all also am an and any are as at be because been before being below between both
    but by can could did do does doing down during each few for from further had has have having he her here
    hers him his how i if in into is it its itself just me more most my no nor not now of off on once only or
    other our ours out over own please same she should so some such than that the their them then there these
    they this those through to too under until up very was we were what when where which while who whom why will
    with would you your yours remember forget tell know
"""
STOP_WORDS = frozenset(_STOP_WORDS.split())
"""Words too common to say what a message is about; left out of FTS queries."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class MemoryRecord:
    """One stored memory."""

    id: int
    text: str
    session_id: str | None
    created: float
    """Wall-clock time (Unix seconds)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class MemoryCommand:
    """A memory instruction found in a chat message."""

    kind: Literal["remember", "forget"]
    text: str
    """What to remember, or what to forget (an FTS query)."""
    span: tuple[int, int] = (0, 0)
    """Where the instruction is in the message: [start, end)."""

    def __post_init__(self) -> None:
        if self.kind not in ("remember", "forget"):
            raise ValueError(f"MemoryCommand.kind must be 'remember' or 'forget', not {self.kind!r}")


class Memory:
    """The memory store over one `Database`."""

    def __init__(self, db: Database):
        self.db = db

    def remember(self, text: str, *, session_id: str | None = None) -> int:
        """Store `text` (stripped); return its id."""
        text = text.strip()
        if not text:
            raise ValueError("Nothing to remember: pass a non-empty text")
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO memories (text, session_id, created) VALUES (?, ?, ?)", (text, session_id, time.time())
            )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def forget(self, query_or_id: int | str) -> builtins.list[int]:
        """Delete a memory by id, or every memory containing all the content words of `query`; return the ids."""
        with self.db.transaction() as conn:
            ids = _ids_to_forget(conn, query_or_id)
            conn.executemany("DELETE FROM memories WHERE id = ?", [(i,) for i in ids])
        return ids

    def list(self) -> builtins.list[MemoryRecord]:
        """Every memory, oldest first."""
        rows = self.db.query("SELECT id, text, session_id, created FROM memories ORDER BY id")
        return [MemoryRecord(**dict(row)) for row in rows]

    def clear(self) -> int:
        """Delete every memory; return how many there were."""
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM memories").rowcount

    def recall(self, query: str, *, limit: int = 3) -> builtins.list[Snippet]:
        """The memories most relevant to `query`, best first; score is -bm25 (higher is more relevant)."""
        match = fts_query(query, "OR")
        if not match or limit <= 0:
            return []
        rows = self.db.query(
            "SELECT rowid AS id, text, -bm25(memories_fts) AS score FROM memories_fts WHERE memories_fts MATCH ?"
            " ORDER BY bm25(memories_fts) LIMIT ?",
            (match, limit),
        )
        return [Snippet(memory_id=row["id"], text=row["text"], score=float(row["score"])) for row in rows]


def fts_query(text: str, operator: Literal["AND", "OR"] = "OR") -> str:
    """A safe FTS5 query for free text: its content words, each quoted, joined by `operator` ('' if none)."""
    words = [w for w in re.findall(r"[^\W_]+", text.lower()) if len(w) > 1 and w not in STOP_WORDS]
    unique = dict.fromkeys(words)  # keeps first-seen order
    return f" {operator} ".join(f'"{word}"' for word in unique)


def _ids_to_forget(conn: sqlite3.Connection, query_or_id: int | str) -> list[int]:
    """The ids `forget` means: one id, or the FTS matches (all words required: forgetting cannot be undone)."""
    if isinstance(query_or_id, int) or query_or_id.strip().isdigit():
        row = conn.execute("SELECT id FROM memories WHERE id = ?", (int(query_or_id),)).fetchone()
        return [row["id"]] if row else []
    match = fts_query(query_or_id, "AND")
    if not match:
        return []
    rows = conn.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rowid", (match,))
    return [row["rowid"] for row in rows]


# ---- memory instructions in a chat message ---------------------------------------------------------------------

# A command starts a sentence, maybe after a softener: "Also, remember that …", "Can you please forget my …".
_START = r"(?:^|(?<=[.!?:;\n])\s*)"
_LEAD = (
    r"(?:(?:also|and|oh|ok|okay|so|now|btw|by the way|hey|kindly|please)\b[,:]?\s+)*"
    r"(?:(?:can|could|would|will) you\s+(?:please\s+)?|i want you to\s+|i'd like you to\s+)?(?:please\s+)?"
)
_SUBJECT = r"(?=(?:i|i['’]m|i['’]ve|my|me|we|our|us)\b)"
# The instruction ends with its sentence, or where a second one starts ("… and remember that …").
_END = r"(?P<text>.+?)\s*(?=[.!?]+(?:\s|$)|\n|$|,?\s+(?:and|but)\s+(?:remember|forget)\b)"
_REMEMBER = re.compile(
    _START + _LEAD + r"(?:remember|memori[sz]e|keep in mind|don['’]?t forget|do not forget)"
    r"(?:\s+that\b|\s*:|\s+" + _SUBJECT + r")\s*" + _END,
    re.IGNORECASE,
)
_FORGET = re.compile(
    _START + _LEAD + r"forget(?:\s+that\b|\s+about\b|\s*:|\s+what i (?:said|told you) about\b|\s+" + _SUBJECT + r")"
    r"\s*" + _END,
    re.IGNORECASE,
)


_PATTERNS: tuple[tuple[Literal["remember", "forget"], re.Pattern[str]], ...] = (
    ("remember", _REMEMBER),
    ("forget", _FORGET),
)


def parse_command(message: str) -> MemoryCommand | None:
    """The first "remember that …" / "forget …" instruction in `message`, or None."""
    found = [(match, kind) for kind, pattern in _PATTERNS if (match := pattern.search(message))]
    if not found:
        return None
    match, kind = min(found, key=lambda pair: pair[0].start())
    text = match["text"].strip().strip("\"'“”‘’").strip()
    if not text:
        return None
    return MemoryCommand(kind=kind, text=text, span=(match.start(), match.end()))
