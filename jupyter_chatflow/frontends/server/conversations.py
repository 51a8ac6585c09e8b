"""The server's conversations (`conversation.py` routes them): a Chat each, their latest turn's SSE frames.

A turn's frames are made on a thread as its events come (`conversation_frames`: delta-encoding v1 items with the
safety decisions and the title between them) and numbered from 1; any number of readers replay and follow them
(`TurnFrames.follow`), so a reader that comes back after a dropped connection misses nothing. An ended turn's
frames are kept KEEP_S seconds; a conversation, past MAX_CONVERSATIONS or idle for IDLE_S, is forgotten (least
recently used first) and its Chat closed; its turns stay stored, and it opens again when its id is used.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, cast

from jupyter_chatflow.engine.model import Model
from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.events import Event, SafetyDecision, TitleGenerated
from jupyter_chatflow.frontends.server.adapters import DONE, delta_v1, sse_frame
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.pipeline.response import Response as TurnResponse
from jupyter_chatflow.pipeline.tools import Toolbox, calculator
from jupyter_chatflow.store.database import Database

from .errors import APIError

ORPHAN_S = 30.0  # a turn nobody reads for this long is cancelled
KEEP_S = 600.0  # an ended turn's frames are kept this long for a late resume, then dropped
MAX_CONVERSATIONS = 64  # the least recently used beyond these are forgotten (their stored sessions stay)
IDLE_S = 900.0  # a conversation unused this long is forgotten too: its Chat's thread ends (it opens again when used)


class TurnFrames:
    """One turn's SSE frames as they are made, numbered from 1; readers replay and follow them.

    The frames are made on a thread; each reader waits on an asyncio event of its own loop, set from that thread,
    so a waiting reader holds no thread (many slow streams cannot use up the loop's thread pool)."""

    def __init__(self, response: TurnResponse):
        self.response = response
        self.frames: list[bytes] = []
        self.ended_at: float | None = None  # when the turn's last frame was made (monotonic), None while it runs
        self.unread_since: float | None = None  # when the last reader left (None while one reads)
        self._wakes: list[Callable[[], None]] = []  # one per reader: wakes it on its loop
        self._lock = threading.Lock()

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    def add(self, name: str | None, data: str) -> None:
        with self._lock:
            number = len(self.frames) + 1
            self.frames.append((f"id: {number}\n" + sse_frame(data, event=name)).encode())
            wakes = list(self._wakes)
        for wake in wakes:
            wake()

    def end(self) -> None:
        with self._lock:
            self.ended_at = time.monotonic()
            wakes = list(self._wakes)
        for wake in wakes:
            wake()

    def orphaned(self) -> bool:
        """Nobody has read this turn for ORPHAN_S seconds."""
        return self.unread_since is not None and time.monotonic() - self.unread_since > ORPHAN_S

    def expired(self) -> bool:
        """The turn ended more than KEEP_S seconds ago (its frames may go)."""
        return self.ended_at is not None and time.monotonic() - self.ended_at > KEEP_S

    async def follow(self, seen: int) -> AsyncIterator[bytes]:
        """Frames after the first `seen`, then live ones until the turn's last; a reader gone leaves the turn on."""
        woken, wake = _waker()
        self._attach(wake)
        try:
            while True:
                woken.clear()  # before looking: a frame added after the look sets it again
                with self._lock:
                    frames, ended = self.frames[seen:], self.ended
                for frame in frames:
                    yield frame
                seen += len(frames)
                if ended:
                    return
                if not frames:
                    await woken.wait()
        finally:
            self._detach(wake)

    def _attach(self, wake: Callable[[], None]) -> None:
        with self._lock:
            self._wakes.append(wake)
            self.unread_since = None

    def _detach(self, wake: Callable[[], None]) -> None:
        with self._lock:
            self._wakes.remove(wake)
            if not self._wakes:
                self.unread_since = time.monotonic()


def _waker() -> tuple[asyncio.Event, Callable[[], None]]:
    """An event of the running loop and a function any thread may call to set it (a closed loop is ignored)."""
    loop, woken = asyncio.get_running_loop(), asyncio.Event()

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: its reader is gone
            loop.call_soon_threadsafe(woken.set)

    return woken, wake


class Conversation:
    """A conversation: its owner's key id, its Chat, its latest turn."""

    def __init__(self, key: str, chat: Chat):
        self.id, self.key, self.chat = chat.session.name, key, chat
        self.turn: TurnFrames | None = None
        self.used = time.monotonic()

    @property
    def idle(self) -> bool:
        """No turn running, and none sent for IDLE_S seconds."""
        return (self.turn is None or self.turn.ended) and time.monotonic() - self.used > IDLE_S


class Conversations:
    """The server's conversations, by id (the least recently used forgotten past MAX_CONVERSATIONS)."""

    def __init__(self, database: Callable[[], Database] = Database) -> None:
        self._open: collections.OrderedDict[str, Conversation] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._database = database
        """The server's database: each conversation's owner (its turns are a session's), so that it goes on after a
        restart."""

    def get(self, conversation_id: str, key: str) -> Conversation:
        """The caller's conversation open in this process, or 404 (another key's conversation is not found
        either)."""
        with self._lock:
            self._sweep()
            found = self._open.get(conversation_id)
            if found is None or found.key != key:
                raise _not_found(conversation_id)
            self._open.move_to_end(conversation_id)
            found.used = time.monotonic()
            return found

    def reopen(self, conversation_id: str, key: str, model: Model, engine: Any) -> Conversation:
        """The caller's conversation: open here, or stored by this server before (a restart, or forgotten past
        MAX_CONVERSATIONS), opened again with its turns; 404 when there is none for `key`. Off the event loop."""
        with contextlib.suppress(APIError):
            return self.get(conversation_id, key)
        rows = self._database().query("SELECT key FROM conversations WHERE id = ?", (conversation_id,))
        if not rows or rows[0]["key"] != key:
            raise _not_found(conversation_id)
        return self._opened(key, self._chat(model, engine, conversation_id, new=False))

    def start(self, key: str, model: Model, engine: Any) -> Conversation:
        """A new conversation for `key`: a Chat on `model`, its generations on the server's `engine`."""
        with self._lock:
            self._sweep()
        chat = self._chat(model, engine, f"conv_{uuid.uuid4().hex[:24]}", new=True)
        with self._database().transaction() as conn:
            conn.execute("INSERT INTO conversations (id, key, created) VALUES (?, ?, ?)",
                         (chat.session.name, key, time.time()))  # fmt: skip
        return self._opened(key, chat)

    def cancel_all(self) -> list[TurnFrames]:
        """Cancel every turn still running (the server is stopping); returns them (each `ended` once stored)."""
        with self._lock:
            running = [c.turn for c in self._open.values() if c.turn is not None and not c.turn.ended]
        for turn in running:
            turn.response.cancel()
        return running

    def _chat(self, model: Model, engine: Any, name: str, *, new: bool) -> Chat:
        # made outside the lock (the first takes ~1.4 s), so `get` on the event loop never waits for it
        return Chat(model=model, session=name, new=new, db=self._database(), toolbox=Toolbox([calculator]),
                    scheduler=cast(Scheduler, engine))  # fmt: skip

    def _opened(self, key: str, chat: Chat) -> Conversation:
        with self._lock:
            conversation = self._open[chat.session.name] = Conversation(key, chat)
            while len(self._open) > MAX_CONVERSATIONS:
                _, forgotten = self._open.popitem(last=False)
                forgotten.chat.close()
            return conversation

    def _sweep(self) -> None:
        """Drop the frames of turns that ended more than KEEP_S ago, and forget the conversations idle for IDLE_S
        (their Chats closed: a thread each; they open again from the database when used)."""
        for conversation in list(self._open.values()):
            if conversation.turn is not None and conversation.turn.expired():
                conversation.turn = None
            if conversation.idle:
                del self._open[conversation.id]
                conversation.chat.close()


def _not_found(conversation_id: str) -> APIError:
    return APIError(404, f"No conversation {conversation_id!r} for this key: start one with POST "
                    "/v1/chatflow/conversation (without conversation_id).", param="conversation_id",
                    code="conversation_not_found")  # fmt: skip


def conversation_frames(response: TurnResponse, conversation_id: str) -> Iterator[tuple[str | None, str]]:
    """(SSE event name, data) of a turn: delta-encoding v1 items, with safety decisions and the title between
    them as they happen (a title that comes after the answer, before `[DONE]`)."""
    side: list[tuple[str, str]] = []

    def watched() -> Iterator[Event]:
        for event in response:
            side.extend(_side(event, conversation_id))
            yield event

    for index, item in enumerate(delta_v1(watched(), conversation_id=conversation_id)):
        yield from _drain(side)
        if item == DONE:
            break
        yield ("delta_encoding" if index == 0 else "delta"), _json(item)
    for event in response.after_end():
        yield from _side(event, conversation_id)
    yield None, DONE


def _side(event: Event, conversation_id: str) -> list[tuple[str, str]]:
    if isinstance(event, SafetyDecision):
        return [("safety_decision", _json(event.to_dict()))]
    if isinstance(event, TitleGenerated):
        return [("title_generation", _json({"type": "title_generation", "title": event.title,
                                            "conversation_id": conversation_id}))]  # fmt: skip
    return []


def _drain(side: list[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    while side:
        yield side.pop(0)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
