"""`POST /v1/chatflow/conversation`: one turn of the whole pipeline, streamed as ChatGPT's web client receives it.

The turn (context assembly, the safety layers, tools, the session's title) runs in a `Chat` on the server's
scheduler, one Chat per conversation. Its events go out as SSE in the "delta_encoding v1" patch format
(`adapters.delta_v1`: an `add` of the message, `append`s of text, bare `{"v": …}` continuations, a closing
`patch`), with the pipeline's safety decisions (`event: safety_decision`) and the title (`event:
title_generation`) as events of their own, then `data: [DONE]`. Every frame carries its number as `id:` (1, 2, …).

A dropped connection does not stop the turn: `GET /v1/chatflow/conversation/{id}/stream` with `Last-Event-ID: n`
replays the frames after n and follows the rest live, so no token is lost or repeated. A turn that nobody reads for
`ORPHAN_S` seconds is cancelled (its slot is freed). Conversations belong to the key that made them; memory (a
store all keys would share) is off here.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

from fastapi import Request
from sse_starlette import EventSourceResponse
from starlette.responses import Response

from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.events import Event, SafetyDecision, TitleGenerated
from jupyter_chatflow.frontends.adapters import DONE, delta_v1, sse_frame
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.pipeline.request import RequestError
from jupyter_chatflow.pipeline.response import Response as TurnResponse
from jupyter_chatflow.pipeline.tools import Toolbox, calculator
from jupyter_chatflow.store.database import Database

from .errors import APIError, bad_request

if TYPE_CHECKING:
    from .state import ServerState

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

    def start(self, key: str, state: ServerState) -> Conversation:
        model, engine = state.host.require()
        with self._lock:
            self._db = self._db or Database()
            chat = Chat(model=model, session=f"conv_{uuid.uuid4().hex[:24]}", new=True, db=self._db,
                        toolbox=Toolbox([calculator]), scheduler=cast(Scheduler, engine))  # fmt: skip
            conversation = self._open[chat.session.name] = Conversation(key, chat)
            while len(self._open) > MAX_CONVERSATIONS:
                self._open.popitem(last=False)
            return conversation


async def conversation_turn(request: Request, state: ServerState, data: dict[str, Any], key: str) -> Response:
    """Send the message in the conversation (a new one without `conversation_id`) and stream the turn."""
    message, options = _message(data), _options(data)
    conversations: Conversations = state.conversations
    given = data.get("conversation_id")
    conversation = conversations.get(given, key) if given is not None else conversations.start(key, state)
    try:
        response = conversation.chat.send(message, **options)
    except RequestError as error:
        raise bad_request(str(error), param="options") from None
    turn = conversation.turn = TurnFrames(response)
    record = request.state.record

    def spent(terminal: Event) -> None:  # the turn's tokens count against the key's limit and go in the log line
        usage = getattr(terminal, "usage", None)
        if usage is not None:
            state.limiter.spend_tokens(key, usage.prompt_tokens + usage.completion_tokens)
            state.metrics.count_tokens(usage.prompt_tokens, usage.completion_tokens)
            record.prompt_tokens, record.completion_tokens = usage.prompt_tokens, usage.completion_tokens
        record.finish_reason = getattr(terminal, "finish_reason", terminal.type)

    thread = threading.Thread(target=_produce, args=(turn, conversation.id, spent), name="chatflow-conversation",
                              daemon=True)  # fmt: skip
    thread.start()
    return _stream(turn, 0, conversation.id, state)


def resume(request: Request, state: ServerState, conversation_id: str, key: str) -> Response:
    """The conversation's latest turn again, from the frame after `Last-Event-ID` (from the start without it)."""
    conversation = state.conversations.get(conversation_id, key)
    if conversation.turn is None:
        raise APIError(404, "This conversation has no turn to stream yet.", code="no_turn")
    last = request.headers.get("last-event-id", "0").strip() or "0"
    if not last.isdigit() or int(last) > len(conversation.turn.frames):
        raise bad_request(f"Last-Event-ID must be a frame number this turn has sent (1 to "
                          f"{len(conversation.turn.frames)}); got {last!r}.", param="Last-Event-ID")  # fmt: skip
    return _stream(conversation.turn, int(last), conversation_id, state)


def _stream(turn: TurnFrames, seen: int, conversation_id: str, state: ServerState) -> Response:
    headers = {"x-conversation-id": conversation_id}
    return EventSourceResponse(turn.follow(seen), ping=state.config.keepalive_s, sep="\n", headers=headers)


def _produce(turn: TurnFrames, conversation_id: str, spent: Callable[[Event], None]) -> None:
    """On a thread: the turn's frames as its events come; an orphaned turn is cancelled."""
    try:
        for name, data in conversation_frames(turn.response, conversation_id):
            turn.add(name, data)
            if turn.orphaned():
                turn.response.cancel()
        terminal = turn.response.terminal()
        if terminal is not None:
            spent(terminal)
    finally:
        turn.end()


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


def _message(data: dict[str, Any]) -> str:
    message = data.get("message")
    if not isinstance(message, str) or not message.strip():
        raise bad_request("Give message: the user's text (a non-empty string).", param="message")
    return message


def _options(data: dict[str, Any]) -> dict[str, Any]:
    """`Chat.send`'s keywords; memory is off (one store for every key), `session` is the conversation's."""
    options = data.get("options", {})
    if not isinstance(options, dict):
        raise bad_request("options must be an object of Chat.send's keywords (temperature, max_tokens, …).",
                          param="options")  # fmt: skip
    for name in ("memory", "session"):
        if name in options and not (name == "memory" and options[name] is False):
            raise bad_request(f"options.{name} is not offered here: {_WHY[name]}", param=f"options.{name}")
    return {**options, "memory": False}


_WHY = {
    "memory": "this server keeps one memory store, which every key would share.",
    "session": "the conversation is the session; continue it with conversation_id.",
}
