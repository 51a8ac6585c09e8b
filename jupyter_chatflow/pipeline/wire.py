"""The HTTP side of a remote turn: one request to an OpenAI-compatible server, seen as the wire carries it.

`exchange` sends a request and yields what happened, in order: an `HttpRequest` event (headers with the key
masked), an `HttpResponse` event (status, headers, the server's request id), then for a stream one `SseFrame` per
server-sent event (its bytes and arrival time) each followed by its parsed JSON data. An error status, a refused
connection or a timeout raises `RemoteError` with a message that names the fix.

Raw httpx streaming rather than the `openai` client: the views need the frames' bytes and the response's headers,
which that client parses away. Stopping (`cancel`) shuts the socket down, so a read waiting on a silent server
returns at once and the server sees the client go (ours frees the sequence's row before its next step).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.events import HttpRequest, HttpResponse, SseFrame

if TYPE_CHECKING:
    import httpx

ERROR_BODY_CHARS = 2000
ERROR_MESSAGE_CHARS = 600
"""An error's message in a `RemoteError` at most (llama-cpp-python's 500 for a malformed message runs to 3 kB)."""
KEPT_HEADERS = ("content-type", "x-request-id", "retry-after", "x-idempotent-replay", "server", "date")
"""Response headers an `HttpResponse` keeps besides every `x-ratelimit-*` one (not the transport's)."""


class RemoteError(ChatflowError):
    """The server could not be reached or answered with an error; the message says what to do."""

    def __init__(self, message: str, *, status: int = 0, retry_after: float | None = None):
        super().__init__(message)
        self.status, self.retry_after = status, retry_after


def mask_key(key: str) -> str:
    """A key as the views may show it: `sk-…abcd` (its last four characters only when it is long enough that they
    give little away, its `sk-` style prefix only when it has one)."""
    head = key[: key.index("-") + 1] if "-" in key[:6] else ""
    tail = key[-4:] if len(key) >= 16 else ""
    return f"{head}…{tail}"


def shown_headers(headers: dict[str, str]) -> dict[str, str]:
    """Request headers for an event: the Authorization value masked."""
    shown = dict(headers)
    auth = shown.get("Authorization", "")
    if auth:
        scheme, _, key = auth.partition(" ")
        shown["Authorization"] = f"{scheme} {mask_key(key)}"
    return shown


def exchange(client: httpx.Client, method: str, url: str, headers: dict[str, str], body: dict[str, Any] | None,
             cancel: threading.Event, *, round: int = 0) -> Iterator[Any]:  # fmt: skip
    """Send one request; yield its events and, for a stream, each frame's JSON data after its `SseFrame`
    ("[DONE]" as the string). A JSON answer is yielded whole after the `HttpResponse`."""
    import httpx

    yield HttpRequest(method=method, url=url, headers=shown_headers(headers), body=body or {}, round=round)
    started = time.perf_counter()
    request = client.build_request(method, url, headers=headers, json=body)
    try:
        response = client.send(request, stream=True)
    except httpx.ConnectError as error:
        raise RemoteError(f"Could not connect to {url} ({error}): is `chatflow serve` (or another OpenAI-compatible "
                          f"server) running there? Start it, or pass the right base_url=.") from None  # fmt: skip
    except httpx.TimeoutException:
        raise RemoteError(f"{url} did not answer in time: is the server overloaded, or the URL wrong?") from None
    try:
        yield _response_event(response, started, round)
        if response.status_code >= 400:
            raise _status_error(response, url)
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            yield json.loads(response.read())
            return
        for frame in _frames(response, started, cancel, round):
            yield frame
            data = _data(frame.text)
            if data is not None:
                yield data if data == "[DONE]" else json.loads(data)
    finally:
        response.close()


def _response_event(response: httpx.Response, started: float, round: int) -> HttpResponse:
    kept = {k: v for k, v in response.headers.items() if k in KEPT_HEADERS or k.startswith("x-ratelimit-")}
    body = "" if response.status_code < 400 else response.read().decode("utf-8", "replace")[:ERROR_BODY_CHARS]
    return HttpResponse(
        status=response.status_code, reason=response.reason_phrase, headers=kept, body=body, round=round,
        request_id=response.headers.get("x-request-id", ""), elapsed_ms=(time.perf_counter() - started) * 1000,
    )  # fmt: skip


def _frames(response: httpx.Response, started: float, cancel: threading.Event, round: int) -> Iterator[SseFrame]:
    """The body as SSE frames, each ending at a blank line; a last unfinished piece is a frame too."""
    import httpx

    pending, index = b"", 0
    with _closed_on(cancel, response):
        try:
            for chunk in response.iter_raw():
                arrived = (time.perf_counter() - started) * 1000
                pending += chunk
                while (end := _frame_end(pending)) > 0:
                    raw, pending = pending[:end], pending[end:]
                    yield SseFrame(index=index, bytes=len(raw), arrival_ms=arrived, text=raw.decode("utf-8", "replace"),
                                   round=round)  # fmt: skip
                    index += 1
                if cancel.is_set():
                    return
        except (httpx.TransportError, OSError):
            if cancel.is_set():
                return  # our own shutdown of the socket
            raise RemoteError(f"The connection to {response.url} broke mid-stream: retry.") from None
    if pending and not cancel.is_set():
        arrived = (time.perf_counter() - started) * 1000
        yield SseFrame(index=index, bytes=len(pending), arrival_ms=arrived, text=pending.decode("utf-8", "replace"),
                       round=round)  # fmt: skip


def _frame_end(data: bytes) -> int:
    """Where the first complete frame ends (after its blank line), or 0."""
    ends = [i + len(sep) for sep in (b"\n\n", b"\r\n\r\n", b"\r\r") if (i := data.find(sep)) >= 0]
    return min(ends) if ends else 0


def _data(frame: str) -> str | None:
    """The frame's data (its `data:` lines joined), or None for a comment or keep-alive."""
    lines = [line[5:].removeprefix(" ") for line in frame.splitlines() if line.startswith("data:")]
    return "\n".join(lines) if lines else None


@contextlib.contextmanager
def _closed_on(cancel: threading.Event, response: httpx.Response) -> Iterator[None]:
    """While the body is read: on `cancel`, shut the socket down (a read waiting for a silent server returns)."""
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.05):
            if cancel.is_set():
                _shutdown(response)
                return

    watcher = threading.Thread(target=watch, name="chatflow-wire-cancel", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def _shutdown(response: httpx.Response) -> None:
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _status_error(response: httpx.Response, url: str) -> RemoteError:
    """The error for a status >= 400, naming the fix for the usual ones."""
    status, message = response.status_code, _error_message(response)
    retry = _retry_after(response)
    wait = f" Retry after {retry:g} s (Retry-After)." if retry is not None else ""
    hints = {
        401: "the server refused the key: pass api_key= (or --api-key, or set CHATFLOW_API_KEY) with a key it accepts.",
        403: "the key may not do this: check its permissions on the server.",
        404: "check base_url (it should end in /v1) and the model name (model=; GET /v1/models lists them).",
        413: "the request is too large: shorten the conversation.",
        429: f"past the server's rate or token limit.{wait}",
        503: f"the server is busy or still loading its model.{wait or ' Retry shortly.'}",
    }
    hint = hints.get(status, "see the server's message.")
    return RemoteError(f"{url} answered {status} {response.reason_phrase}: {message} ({hint})", status=status,
                       retry_after=retry)  # fmt: skip


def _error_message(response: httpx.Response) -> str:
    text = response.read().decode("utf-8", "replace")
    try:
        body = json.loads(text)
        error = body.get("error") or body  # OpenAI's {"error": {...}}; SGLang's and older vLLM's are flat
    except (ValueError, AttributeError):
        return text[:200] or "(no body)"
    message = str((error.get("message") if isinstance(error, dict) else error) or text[:200])
    cut = f"{message[:ERROR_MESSAGE_CHARS]}… (cut: more in the HttpResponse event's body)"
    return message if len(message) <= ERROR_MESSAGE_CHARS else cut


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["retry-after"])
    except (KeyError, ValueError):
        return None
