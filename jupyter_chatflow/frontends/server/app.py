"""The FastAPI app: routes, and the middleware every request passes (request id, body size, its log line).

Auth: /v1/* and /tokenize need a key when the server has keys; /health and /metrics never do (probes and
scrapers; they show no request's content). Rate limits apply to /v1/chat/completions and to starting a
conversation turn (conversation.py); idempotency keys to /v1/chat/completions.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jupyter_chatflow.store.database import StorageError

from . import log
from .completions import chat_completions
from .config import ServerConfig
from .conversation import conversation_turn, resume
from .errors import APIError, bad_request, server_error
from .host import ModelHost
from .idempotency import HEADER, Answer, Claim
from .log import RequestRecord
from .metrics import CONTENT_TYPE
from .pump import Pump
from .requests import check_model, parse_json, parse_messages
from .state import ServerState
from .tools import parse_tools, prompt_messages

CLIENT_ID_HEADER = "x-client-request-id"
SHUTDOWN_S = 10.0
"""How long a stopping server waits for the generations it cancels to end and be stored."""


def create_app(host: ModelHost, config: ServerConfig | None = None) -> FastAPI:
    """The server's ASGI app over `host`'s model (serve it with uvicorn)."""
    state = ServerState(host, config or ServerConfig())

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        idle = threading.Event()
        threading.Thread(target=state.release_when_idle, args=(idle,), name="chatflow-idle-release",
                         daemon=True).start()  # fmt: skip
        yield
        idle.set()
        # stopping (SIGTERM, Ctrl-C): uvicorn has stopped accepting and closed the streams; what still generates
        # is cancelled and stored, within a bound
        stopped = await asyncio.to_thread(state.drain, SHUTDOWN_S)
        if stopped:
            log.LOGGER.warning("stopped %d generation(s) in flight; their turns are stored as cancelled", stopped)

    app = FastAPI(title="chatflow", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.chatflow = state
    _routes(app, state)
    app.add_exception_handler(APIError, _api_error)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(StorageError, _storage_error)  # type: ignore[arg-type]
    app.add_middleware(RequestMiddleware, state=state)
    return app


def _routes(app: FastAPI, state: ServerState) -> None:
    @app.get("/health")
    def health() -> Response:
        ready = state.host.status == "ready"
        body = {"status": state.host.status} | ({"error": state.host.error} if state.host.error else {})
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(state.metrics.exposition(), media_type=CONTENT_TYPE)

    @app.get("/v1/models")
    def models(request: Request) -> Response:
        _authorize(request, state)
        model, _ = state.host.require()
        card = {"id": state.host.name, "object": "model", "created": state.host.created, "owned_by": "chatflow",
                "max_model_len": model.config.context_length}  # fmt: skip
        return JSONResponse({"object": "list", "data": [card]})

    @app.post("/tokenize")
    async def tokenize(request: Request) -> Response:
        _authorize(request, state)
        data = parse_json(await _body(request, state))
        model, _ = state.host.require()
        if "model" in data:
            check_model(data, state.host.name)
        ids = _tokens(model.tokenizer, data)
        return JSONResponse({"tokens": ids, "count": len(ids), "max_model_len": model.config.context_length})

    @app.post("/v1/chat/completions")
    async def completions(request: Request) -> Response:
        key = _authorize(request, state)
        state.host.require()  # a 503 while the model loads does not count against the key's limits
        request.state.headers.update(state.limiter.admit(key))
        data = parse_json(await _body(request, state))
        request.state.claim = None
        idempotency_key = request.headers.get(HEADER)
        if idempotency_key is not None:
            held = await state.answers.claim(key, idempotency_key, data)
            if isinstance(held, Answer):
                request.state.headers["x-idempotent-replay"] = "true"
                return Response(held.body, status_code=held.status, media_type=held.media_type)
            request.state.claim = held
        return await chat_completions(request, state, data)

    @app.post("/v1/chatflow/conversation")
    async def conversation(request: Request) -> Response:
        key = _authorize(request, state)
        state.host.require()
        request.state.headers.update(state.limiter.admit(key))
        return await conversation_turn(request, state, parse_json(await _body(request, state)), key)

    @app.get("/v1/chatflow/conversation/{conversation_id}/stream")
    def conversation_stream(conversation_id: str, request: Request) -> Response:
        return resume(request, state, conversation_id, _authorize(request, state))


def _authorize(request: Request, state: ServerState) -> str:
    key = state.keys.check(request.headers.get("authorization"))
    request.state.record.key_id = key
    return key


async def _body(request: Request, state: ServerState) -> bytes:
    """The body, or 413 past the limit (a body sent without Content-Length is measured as it is read)."""
    body = b""
    async for part in request.stream():
        body += part
        if len(body) > state.config.max_body_bytes:
            raise _too_large(state.config.max_body_bytes)
    return body


def _too_large(limit: int) -> APIError:
    return APIError(413, f"The request body is larger than this server takes ({limit} bytes).",
                    code="request_too_large")  # fmt: skip


def _tokens(tokenizer: Any, data: dict[str, Any]) -> list[int]:
    """/tokenize: `prompt` as user text, or `messages` (and `tools`) through the chat template, as a completion
    would make its prompt; both is a 400 (which one was meant cannot be told)."""
    if data.get("prompt") is not None and data.get("messages") is not None:
        raise bad_request("Give prompt or messages, not both: prompt counts plain text, messages a chat through "
                          "the chat template.", param="prompt")  # fmt: skip
    if isinstance(data.get("prompt"), str):
        return list(tokenizer.encode(data["prompt"]))
    if "messages" in data:
        messages = prompt_messages(parse_messages(data["messages"]), parse_tools(data), tokenizer)
        return list(tokenizer.apply_chat_template(messages))
    raise APIError(400, "Give prompt (a string) or messages (a list of {role, content}).", param="prompt")


class RequestMiddleware:
    """Gives each request its id (the client's X-Client-Request-Id if it sent one) and record, adds the id and the
    rate-limit headers to the answer, refuses a declared oversize body, and writes the request's log line."""

    def __init__(self, app: ASGIApp, state: ServerState):
        self.app = app
        self.chatflow = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        request_id = _request_id(headers.get(CLIENT_ID_HEADER))
        record = RequestRecord(request_id=request_id, method=scope["method"], path=scope["path"])
        extra: dict[str, str] = {}
        started: list[bool] = []
        scope.setdefault("state", {}).update(record=record, headers=extra, claim=None)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                started.append(True)
                record.status = message["status"]
                present = {k.decode("latin-1").lower() for k, _ in message.get("headers", [])}
                added = {"x-request-id": request_id} | extra
                message["headers"] = [
                    *message.get("headers", []),
                    *((k.encode(), v.encode()) for k, v in added.items() if k.lower() not in present),
                ]
            await send(message)

        try:
            if int(headers.get("content-length") or 0) > self.chatflow.config.max_body_bytes:
                await _too_large(self.chatflow.config.max_body_bytes).response()(scope, receive, send_with_headers)
            else:
                await self.app(scope, receive, send_with_headers)
        except Exception:
            log.LOGGER.exception("unexpected error in %s %s", scope["method"], scope["path"])
            if started:
                raise
            record.error = "internal_error"
            error = server_error("Internal error; the server goes on. Retry, or report it with the x-request-id.")
            await error.response()(scope, receive, send_with_headers)
        finally:
            claim: Claim | None = scope["state"].get("claim")
            if claim is not None:
                claim.release()  # stored if it succeeded; otherwise a retry runs again
            self.chatflow.metrics.requests.labels(route=_route(scope["path"]), status=str(record.status)).inc()
            pump: Pump | None = scope["state"].get("pump")
            if pump is None:
                log.write(record)
            else:  # a stream whose client left ends at its generation's next step: the line waits for its numbers
                pump.then(lambda: log.write(record))


def _request_id(client: str | None) -> str:
    """The client's id if it is printable ASCII of at most 512 characters, else a new one."""
    if client and len(client) <= 512 and client.isascii() and client.isprintable():
        return client
    return f"req_{uuid.uuid4().hex}"


def _route(path: str) -> str:
    """The metrics label of a path: known routes as they are, anything else as "other" (bounded labels)."""
    known = {"/health", "/metrics", "/v1/models", "/tokenize", "/v1/chat/completions", "/v1/chatflow/conversation"}
    if path.startswith("/v1/chatflow/conversation/") and path.endswith("/stream"):
        return "/v1/chatflow/conversation/{id}/stream"
    return path if path in known else "other"


async def _api_error(request: Request, error: APIError) -> Response:
    request.state.record.error = error.code or error.type
    return error.response()


async def _http_error(request: Request, error: HTTPException) -> Response:
    code = "not_found" if error.status_code == 404 else None
    message = f"{request.method} {request.url.path}: {error.detail}"
    return await _api_error(request, APIError(error.status_code, message, code=code))


async def _storage_error(request: Request, error: StorageError) -> Response:
    """The database (conversations, idempotency) cannot be written: a full or read-only disk says so, and the fix."""
    return await _api_error(request, APIError(503, str(error), type="server_error", code="storage_unavailable"))


async def _validation_error(request: Request, error: RequestValidationError) -> Response:
    return await _api_error(request, APIError(400, str(error)))
