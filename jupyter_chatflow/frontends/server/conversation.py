"""`POST /v1/chatflow/conversation`: one turn of the whole pipeline, streamed as ChatGPT's web client receives it.

The turn (context assembly, the safety layers, tools, the session's title) runs in a `Chat` on the server's
scheduler, one Chat per conversation. Its events go out as SSE in the "delta_encoding v1" patch format
(`adapters.delta_v1`: an `add` of the message, `append`s of text, bare `{"v": …}` continuations, a closing
`patch`), with the pipeline's safety decisions (`event: safety_decision`) and the title (`event:
title_generation`) as events of their own, then `data: [DONE]`. Every frame carries its number as `id:` (1, 2, …).

A dropped connection does not stop the turn: `GET /v1/chatflow/conversation/{id}/stream` with `Last-Event-ID: n`
replays the frames after n and follows the rest live, so no token is lost or repeated. A turn that nobody reads
for `conversations.ORPHAN_S` seconds is cancelled (its slot is freed); an ended turn stays resumable for
`conversations.KEEP_S` seconds. One turn at a time per conversation (a second send while one runs is a 409).
Conversations belong to the key that made them; memory (a store all keys would share) is off here.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable
from typing import Any

from fastapi import Request
from sse_starlette import EventSourceResponse
from starlette.responses import Response

from jupyter_chatflow.events import Event
from jupyter_chatflow.pipeline.request import RequestError
from jupyter_chatflow.pipeline.tools import ToolError

from .conversations import KEEP_S, Conversations, TurnFrames, conversation_frames
from .errors import APIError, bad_request
from .state import ServerState


async def conversation_turn(request: Request, state: ServerState, data: dict[str, Any], key: str) -> Response:
    """Send the message in the conversation (a new one without `conversation_id`) and stream the turn."""
    message, options = _message(data), _options(data)
    conversations: Conversations = state.conversations
    given = data.get("conversation_id")
    if given is not None and not isinstance(given, str):
        raise bad_request("conversation_id must be the id (a string) a turn's x-conversation-id header gave.",
                          param="conversation_id")  # fmt: skip
    if given is not None:
        conversation = await asyncio.to_thread(conversations.reopen, given, key, *state.host.require())
        if conversation.turn is not None and not conversation.turn.ended:  # (no await between this and the send)
            raise APIError(409, f"Conversation {given!r} has a turn running: read it with GET "
                           f"/v1/chatflow/conversation/{given}/stream, then send.", param="conversation_id",
                           code="turn_running")  # fmt: skip
    else:
        # off the loop: the first Chat imports jsonschema (its toolbox) and builds the safety lexicon: ~1.4 s
        conversation = await asyncio.to_thread(conversations.start, key, *state.host.require())
    try:
        response = conversation.chat.send(message, **options)
    except RequestError as error:
        raise bad_request(str(error), param=_option_named(str(error), options)) from None
    except ToolError as error:  # options.tools naming a tool this server's chats do not have
        raise bad_request(str(error), param="options.tools") from None
    turn = conversation.turn = TurnFrames(response)
    record = request.state.record

    def spent(terminal: Event) -> None:  # the turn's tokens count against the key's limit and go in the log line
        state.generated += 1
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
        raise APIError(404, f"Conversation {conversation_id!r} has no turn to stream: none yet, or the last one "
                       f"ended over {KEEP_S:.0f} s ago.", code="no_turn")  # fmt: skip
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


def _option_named(message: str, options: dict[str, Any]) -> str:
    """`options.NAME` for the option a RequestError's message is about ("temperature must be …", "Unknown
    option(s) NAME …"), else `options`."""
    for name in options:
        if re.match(rf"(Unknown option\(s\) )?{re.escape(name)}\b", message):
            return f"options.{name}"
    return "options"


_WHY = {
    "memory": "this server keeps one memory store, which every key would share.",
    "session": "the conversation is the session; continue it with conversation_id.",
}
