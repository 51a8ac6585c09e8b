"""The server's conversations (`conversation.py` routes them): a Chat each, their latest turn's SSE frames.

A turn's frames are made on a thread as its events come (`conversation_frames`: delta-encoding v1 items with the
safety decisions and the title between them) and numbered from 1; any number of readers replay and follow them
(`TurnFrames.follow`), so a reader that comes back after a dropped connection misses nothing.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

from jupyter_chatflow.engine.model import Model
from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.events import Event, SafetyDecision, TitleGenerated
from jupyter_chatflow.frontends.adapters import DONE, delta_v1, sse_frame
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.pipeline.response import Response as TurnResponse
from jupyter_chatflow.pipeline.tools import Toolbox, calculator
from jupyter_chatflow.store.database import Database

from .errors import APIError

ORPHAN_S = 30.0  # a turn nobody reads for this long is cancelled
MAX_CONVERSATIONS = 256  # the least recently used beyond these are forgotten (their stored sessions stay)
WAIT_S = 1.0  # a reader's longest wait for the next frame before it looks again (keep-alive pings go meanwhile)


class TurnFrames:
    """One turn's SSE frames as they are made, numbered from 1; readers replay and follow them."""

    def __init__(self, response: TurnResponse):
        self.response = response
        self.frames: list[bytes] = []
        self.ended = False
        self.readers = 0
        self.unread_since: float | None = None  # when the last reader left (None while one reads)
        self._changed = threading.Condition()

    def add(self, name: str | None, data: str) -> None:
        with self._changed:
            number = len(self.frames) + 1
            self.frames.append((f"id: {number}\n" + sse_frame(data, event=name)).encode())
            self._changed.notify_all()

    def end(self) -> None:
        with self._changed:
            self.ended = True
            self._changed.notify_all()

    def orphaned(self) -> bool:
        """Nobody has read this turn for ORPHAN_S seconds."""
        return self.unread_since is not None and time.monotonic() - self.unread_since > ORPHAN_S

    def _after(self, seen: int) -> tuple[list[bytes], bool]:
        """The frames after the first `seen` (waiting up to WAIT_S for one), and whether the turn has ended."""
        with self._changed:
            self._changed.wait_for(lambda: len(self.frames) > seen or self.ended, timeout=WAIT_S)
            return self.frames[seen:], self.ended

    async def follow(self, seen: int) -> AsyncIterator[bytes]:
        """Frames after the first `seen`, then live ones until the turn's last; a reader gone leaves the turn on."""
        self._attach(+1)
        try:
            while True:
                frames, ended = await asyncio.to_thread(self._after, seen)
                for frame in frames:
                    yield frame
                seen += len(frames)
                if ended:
                    return
        finally:
            self._attach(-1)

    def _attach(self, change: int) -> None:
        with self._changed:
            self.readers += change
            self.unread_since = None if self.readers else time.monotonic()


class Conversation:
    """A conversation: its owner's key id, its Chat, its latest turn."""

    def __init__(self, key: str, chat: Chat):
        self.id, self.key, self.chat = chat.session.name, key, chat
        self.turn: TurnFrames | None = None


class Conversations:
    """The server's conversations, by id (the least recently used forgotten past MAX_CONVERSATIONS)."""

    def __init__(self) -> None:
        self._open: collections.OrderedDict[str, Conversation] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._db: Database | None = None

    def get(self, conversation_id: str, key: str) -> Conversation:
        """The caller's conversation, or 404 (another key's conversation is not found either)."""
        with self._lock:
            found = self._open.get(conversation_id)
            if found is None or found.key != key:
                raise APIError(404, f"No conversation {conversation_id!r} for this key: start one with POST "
                               "/v1/chatflow/conversation (without conversation_id).", param="conversation_id",
                               code="conversation_not_found")  # fmt: skip
            self._open.move_to_end(conversation_id)
            return found

    def start(self, key: str, model: Model, engine: Any) -> Conversation:
        """A new conversation for `key`: a Chat on `model`, its generations on the server's `engine`."""
        with self._lock:
            self._db = self._db or Database()
            chat = Chat(model=model, session=f"conv_{uuid.uuid4().hex[:24]}", new=True, db=self._db,
                        toolbox=Toolbox([calculator]), scheduler=cast(Scheduler, engine))  # fmt: skip
            conversation = self._open[chat.session.name] = Conversation(key, chat)
            while len(self._open) > MAX_CONVERSATIONS:
                self._open.popitem(last=False)
            return conversation


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
