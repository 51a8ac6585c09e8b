"""`POST /v1/chat/completions`: the plain model, as vLLM serves it (chat template + sampler; no safety, memory or
tools pipeline: that is `/v1/chatflow/conversation`'s), streamed as SSE or answered whole.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from jupyter_chatflow.engine.model import Model
from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.errors import GenerationError

from .adapters import DONE, Item, sse
from .engine import Engine, Stream
from .errors import APIError, bad_request
from .formats import SchemaStream, response_schema, schema_constraint
from .idempotency import Answer, Claim
from .pump import ChunkOptions, Pump
from .requests import CompletionRequest, parse_chat
from .state import ServerState
from .tools import Tools, ToolStream, check_tools, parse_tools, prompt_messages


async def chat_completions(request: Request, state: ServerState, data: dict[str, Any]) -> Response:
    """Run one chat completion; the caller has checked the key, the limits and the idempotency key."""
    record = request.state.record
    model, engine = state.host.require()
    window = model.config.context_length
    chat, tools, schema = parse_chat(data, state.host.name, window), parse_tools(data), response_schema(data)
    record.model, record.stream = chat.model, chat.stream
    prompt = model.tokenizer.apply_chat_template(prompt_messages(chat.messages, tools, model.tokenizer))
    if len(prompt) >= model.config.context_length:
        raise bad_request(f"The prompt has {len(prompt)} tokens but the model's window is "
                          f"{model.config.context_length}: shorten the conversation.", param="messages",
                          code="context_length_exceeded")  # fmt: skip
    params = chat.params
    if not chat.max_tokens_given:  # OpenAI's default: as long as the window allows
        params = dataclasses.replace(params, max_tokens=max(1, model.config.context_length - len(prompt)))
    if tools is not None:
        check_tools(tools, model.tokenizer, model.config.vocab_size, params.max_tokens)
    if engine.queued >= state.config.max_queue:
        raise APIError(503, f"The server is busy: {engine.queued} requests are queued. Retry shortly.",
                       type="server_error", code="queue_full", headers={"Retry-After": "1"})  # fmt: skip
    cancel = threading.Event()
    try:
        stream = _submit(engine, model, prompt, params, tools, schema, cancel)
    except GenerationError as error:
        raise bad_request(str(error), param="messages") from None
    options = ChunkOptions(
        model=chat.model, completion_id=f"chatcmpl-{uuid.uuid4().hex[:24]}", created=int(time.time()),
        include_usage=chat.include_usage or not chat.stream, logprobs=chat.logprobs, top_logprobs=chat.top_logprobs,
        tokenizer=model.tokenizer,
    )  # fmt: skip
    pump = request.state.pump = Pump(stream, cancel, options, record.started, lambda t: state.finished(record, t))
    state.pumps.add(pump)
    if chat.stream:
        return _streamed(pump, state, request)
    return await _whole(pump, chat, request)


def _submit(engine: Engine, model: Model, prompt: list[int], params: SamplingParams, tools: Tools | None,
            schema: dict[str, Any] | None, cancel: threading.Event) -> Stream:  # fmt: skip
    """The answer's stream: free, ending in a tool call, or under a JSON schema's mask."""
    if tools is not None:
        return ToolStream(engine, model.tokenizer, prompt, params, tools, model.config.vocab_size)
    if schema is None:
        return engine.submit(prompt, params, cancel=cancel)
    constraint = schema_constraint(model.tokenizer, schema, model.config.vocab_size)
    return SchemaStream(engine.submit(prompt, params, constraint=constraint, cancel=cancel), constraint)


def _streamed(pump: Pump, state: ServerState, request: Request) -> Response:
    frames = _frames(pump, request.state.claim)
    return EventSourceResponse(frames, ping=state.config.keepalive_s, sep="\n")


async def _frames(pump: Pump, claim: Claim | None) -> AsyncIterator[bytes]:
    """SSE frames of the chunks; a client gone (the task cancelled) cancels the generation."""
    sent: list[bytes] = []
    try:
        async for item in pump:
            frame = "".join(sse([item])).encode()
            sent.append(frame)
            yield frame
    finally:
        pump.cancel()
    if claim is not None and sent and sent[-1] == b"data: " + DONE.encode() + b"\n\n":
        await claim.store(Answer(200, "text/event-stream", b"".join(sent)))


async def _whole(pump: Pump, chat: CompletionRequest, request: Request) -> Response:
    """Collect the chunks into one `chat.completion`; a client that disconnects meanwhile cancels it."""
    gone = asyncio.ensure_future(_disconnect(request))
    gone.add_done_callback(lambda task: None if task.cancelled() else pump.cancel())
    try:
        items = [item async for item in pump]
    finally:
        gone.cancel()
    if gone.done() and not gone.cancelled():
        return Response(status_code=499)  # the client went away: nobody reads this
    body = completion(items, chat.logprobs)
    if "error" in body:
        raise APIError(500, body["error"]["message"], type="server_error", code="generation_failed")
    response = JSONResponse(body)
    if request.state.claim is not None:  # the bytes sent, so a replay is byte for byte the same answer
        await request.state.claim.store(Answer(200, "application/json", bytes(response.body)))
    return response


async def _disconnect(request: Request) -> None:
    """Return when the client goes away (the body is read, so the next message is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def completion(items: list[Item], logprobs: bool = False) -> dict[str, Any]:
    """A `chat.completion` object from the chunks of one choice (the last chunk carries usage)."""
    chunks = [i for i in items if isinstance(i, dict)]
    errors = [c for c in chunks if "error" in c]
    if errors:
        return errors[0]
    head = chunks[0]
    text: list[str] = []
    entries: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    finish = None
    for chunk in chunks:
        for choice in chunk["choices"]:
            text.append(choice["delta"].get("content") or "")
            calls.extend({k: v for k, v in c.items() if k != "index"} for c in choice["delta"].get("tool_calls", []))
            if choice.get("logprobs"):
                entries.extend(choice["logprobs"]["content"])
            finish = choice.get("finish_reason") or finish
    content = "".join(text)
    message: dict[str, Any] = {"role": "assistant", "content": content or (None if calls else ""), "refusal": None}
    if calls:
        message["tool_calls"] = calls
    shown = {"content": entries, "refusal": None} if logprobs else None
    return {
        "id": head["id"], "object": "chat.completion", "created": head["created"], "model": head["model"],
        "choices": [{"index": 0, "message": message, "logprobs": shown, "finish_reason": finish}],
        "usage": chunks[-1].get("usage"), "system_fingerprint": None,
    }  # fmt: skip
