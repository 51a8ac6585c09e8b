"""Idempotency keys: a POST retried with the same `Idempotency-Key` and body gets the stored answer, not a new one.

Keys are per API key. A retry that arrives while the first attempt still runs waits for it; an attempt that
failed or was cut off stores nothing, so its retry runs again. The same key with another body is a 400; bodies
are compared as JSON, so a client that serializes the same request with other spacing or key order is not refused.
Answers are kept in memory and, given a database, in it too (table `idempotency`): a retry after the server
restarted gets the answer it stored before. All calls come from the event loop's thread.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.store.database import Database

from .errors import bad_request
from .log import LOGGER

HEADER = "Idempotency-Key"
MAX_ENTRIES = 1000


@dataclasses.dataclass(frozen=True)
class Answer:
    """A finished response as sent: status, media type, body (the SSE frames of a stream, joined)."""

    status: int
    media_type: str
    body: bytes


@dataclasses.dataclass
class _Entry:
    digest: str
    created: float
    settled: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    answer: Answer | None = None


class Claim:
    """One attempt's hold on a key: `store` its answer, or `release` it for a retry."""

    def __init__(self, store: IdempotencyStore, slot: tuple[str, str], entry: _Entry):
        self._store, self._slot, self._entry = store, slot, entry

    async def store(self, answer: Answer) -> None:
        """Keep `answer` for retries: in memory at once (a retry waiting on this attempt gets it), then in the
        database on a worker thread (a SQLite write, with its fsync, must not hold the event loop)."""
        self._entry.answer = answer
        self._entry.settled.set()
        await asyncio.to_thread(self._store.persist, self._slot, self._entry.digest, answer)

    def release(self) -> None:
        if self._entry.answer is None:
            self._store._entries.pop(self._slot, None)
            self._entry.settled.set()


class IdempotencyStore:
    """Answers by (key id, Idempotency-Key), kept `ttl_s` seconds, the newest `MAX_ENTRIES`."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic,
                 database: Callable[[], Database] | None = None):  # fmt: skip
        self.ttl_s = ttl_s
        self._clock = clock
        self._entries: collections.OrderedDict[tuple[str, str], _Entry] = collections.OrderedDict()
        self._database = database
        """Where answers outlive the process (opened on first use), or None: memory only."""

    async def claim(self, key_id: str, idempotency_key: str, body: dict[str, Any]) -> Answer | Claim:
        """The stored answer for this key and (parsed) body, or a `Claim` to produce it (waiting for an attempt
        underway)."""
        if not idempotency_key or len(idempotency_key) > 255:
            raise bad_request(f"{HEADER} must be 1 to 255 characters.", param=HEADER)
        slot, digest = (key_id, idempotency_key), body_digest(body)
        while True:
            self._expire()
            entry = self._entries.get(slot) or await self._from_database(slot)
            if entry is None:
                entry = self._entries[slot] = _Entry(digest, self._clock())
                return Claim(self, slot, entry)
            if entry.digest != digest:
                raise _reused()
            if entry.answer is not None:
                return entry.answer
            await entry.settled.wait()  # the first attempt is still running

    def persist(self, slot: tuple[str, str], digest: str, answer: Answer) -> None:
        """Keep `answer` in the database too (expired ones go); a database that cannot be written is logged, and
        the answer is kept in memory still."""
        if self._database is None:
            return
        now = time.time()
        try:
            with self._database().transaction() as conn:
                conn.execute("DELETE FROM idempotency WHERE created < ?", (now - self.ttl_s,))
                conn.execute(
                    "INSERT OR REPLACE INTO idempotency (key, idempotency_key, digest, status, media_type, body,"
                    " created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (*slot, digest, answer.status, answer.media_type, answer.body, now),
                )
        except ChatflowError as error:
            LOGGER.warning("could not keep an idempotent answer in the database: %s", error)

    async def _from_database(self, slot: tuple[str, str]) -> _Entry | None:
        """The entry of an answer stored before this process started (kept in the database), or of an attempt another
        request began meanwhile; None when there is neither."""
        kept = await asyncio.to_thread(self._kept, slot) if self._database is not None else None
        entry = self._entries.get(slot)  # (another attempt may have claimed it meanwhile)
        if entry is None and kept is not None:
            entry = self._entries[slot] = _Entry(kept[0], self._clock(), answer=kept[1])
            entry.settled.set()
        return entry

    def _kept(self, slot: tuple[str, str]) -> tuple[str, Answer] | None:
        """(digest, answer) stored for `slot` in the database within `ttl_s`, or None."""
        assert self._database is not None
        rows = self._database().query(
            "SELECT digest, status, media_type, body FROM idempotency WHERE key = ? AND idempotency_key = ?"
            " AND created >= ?",
            (*slot, time.time() - self.ttl_s),
        )
        if not rows:
            return None
        row = rows[0]
        return row["digest"], Answer(row["status"], row["media_type"], bytes(row["body"]))

    def _expire(self) -> None:
        now = self._clock()
        while self._entries:
            entry = next(iter(self._entries.values()))
            if now - entry.created < self.ttl_s and len(self._entries) <= MAX_ENTRIES:
                break
            self._entries.popitem(last=False)


def _reused() -> Exception:
    return bad_request(f"This {HEADER} was used with another request body: use a new key for a new request.",
                       param=HEADER, code="idempotency_key_reused")  # fmt: skip


def body_digest(body: dict[str, Any]) -> str:
    """A hash of the body's JSON in one canonical form (sorted keys, no spaces): the same request whatever the
    client's serializer did with whitespace and key order."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))  # ASCII: a lone surrogate encodes too
    return hashlib.sha256(canonical.encode()).hexdigest()
