"""Adapters: one turn's event stream re-spoken in the wire formats other clients already understand.

Each adapter is a pure generator over an iterable of events (a `Response`, a list, a live generator): it pulls one
event, yields what that event means in the target format, and only then pulls the next, so output streams as the
model generates.

- `openai_chunks`: OpenAI Chat Completions streaming (`chat.completion.chunk` objects, then `"[DONE]"`).
- `delta_v1` / `delta_v1_sse`: the ChatGPT web backend's "delta_encoding v1" JSON-patch stream; `apply_delta_v1`
  replays such a stream into the final document.
- `sse` / `sse_frame` / `parse_sse`: Server-Sent Events framing; `event_lines`: JSON lines of the raw events.

>>> for frame in sse(openai_chunks(response, model="chatflow", tokenizer=chat.model.tokenizer)):
...     wfile.write(frame.encode())
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import time
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from jupyter_chatflow.events import (
    TERMINAL,
    Cancelled,
    Completed,
    Event,
    Failed,
    TokenDelta,
    ToolCall,
    TurnStarted,
    Usage,
)

Item = dict[str, Any] | str
"""One adapter output: a JSON object, or a bare string such as "[DONE]"."""


class TokenBytes(Protocol):
    """What the logprobs need of a tokenizer: the raw bytes of a token (`Tokenizer` has it)."""

    def token_bytes(self, token_id: int) -> bytes: ...


DONE = "[DONE]"
PARTS0 = "/message/content/parts/0"
_OPENAI_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls_exhausted": "tool_calls",
    "content_filter": "content_filter",
}
_V1_FINISH = {"length": "max_tokens"}
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


# ---- shared bookkeeping ----------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Tally:
    """What an adapter has seen of the turn so far: the text streamed and the calls numbered (the token counts
    come from the terminal event's `Usage`)."""

    texts: list[str] = dataclasses.field(default_factory=list)
    tool_calls: int = 0

    def see(self, event: Event) -> None:
        """Take one event into account."""
        if isinstance(event, TokenDelta):
            self.texts.append(event.text)
        elif isinstance(event, ToolCall):
            self.tool_calls += 1

    def tail(self, final: str) -> str | None:
        """What `final` adds after the streamed text ("" if nothing), or None if it does not extend it."""
        streamed = "".join(self.texts)
        return final[len(streamed) :] if final.startswith(streamed) else None


def _open(events: Iterable[Event]) -> tuple[Event | None, Iterator[Event]]:
    """The first event (None for an empty stream) and an iterator over all events, the first included."""
    stream = iter(events)
    first = next(stream, None)
    return first, (itertools.chain([first], stream) if first is not None else stream)


def _unterminated() -> Failed:
    return Failed(error="incomplete", message="The turn's event stream ended without a terminal event.")


# ---- OpenAI Chat Completions ----------------------------------------------------------------------------------


def openai_chunks(
    events: Iterable[Event],
    *,
    model: str,
    created: int | None = None,
    include_usage: bool = False,
    tokenizer: TokenBytes | None = None,
    logprobs: bool | None = None,
) -> Iterator[Item]:
    """The turn as OpenAI `chat.completion.chunk` objects, ending with `"[DONE]"`.

    `created` defaults to the turn's start (Unix seconds). A `Cancelled` turn finishes with "stop" (its partial text
    is the answer); a `Failed` one yields `{"error": {...}}` instead of a finish chunk. `ToolResult` has no form in
    this API (the tool already ran here) and is left out.

    `logprobs` (default: when a `tokenizer` is given, which they need) adds one entry per generated token, as OpenAI
    does: `token` is the token's own bytes decoded with U+FFFD for an unfinished UTF-8 character, `bytes` those raw
    bytes (join them to rebuild a character split over tokens), `top_logprobs` the same for the alternatives. A
    token whose text waits for the next one (half a character) comes in a chunk with empty content and its entry;
    text settled later for the same token (a `TokenDelta` with its token id and time again) adds none. A token the
    output scan redacted shows the replacement, never its bytes or alternatives.
    """
    if logprobs and tokenizer is None:
        raise ValueError("logprobs need the tokenizer for the tokens' bytes: openai_chunks(..., tokenizer=...)")
    first, stream = _open(events)
    if first is None:
        return
    when = created if created is not None else _created(first)
    head = {"id": f"chatcmpl-{first.turn_id}", "object": "chat.completion.chunk", "created": when, "model": model}
    head |= {"system_fingerprint": None} | ({"usage": None} if include_usage else {})
    yield _chunk(head, {"role": "assistant", "content": "", "refusal": None})
    tally = _Tally()
    entries = _LogprobEntries(tokenizer) if tokenizer is not None and logprobs is not False else None
    for event in stream:
        tally.see(event)
        if isinstance(event, TERMINAL):
            yield from _openai_end(head, event, tally, include_usage)
            return
        yield from _openai_body(head, event, tally, entries)
    yield from _openai_end(head, _unterminated(), tally, include_usage)


def _created(first: Event) -> int:
    return int(first.created) if isinstance(first, TurnStarted) else int(time.time())


def _chunk(head: dict[str, Any], delta: dict[str, Any], **choice: Any) -> dict[str, Any]:
    """One chunk with a single choice (index 0)."""
    return head | {"choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None} | choice]}


def _openai_body(head: dict[str, Any], event: Event, tally: _Tally, entries: _LogprobEntries | None) -> Iterator[Item]:
    if isinstance(event, TokenDelta):
        content = entries.of(event) if entries is not None else None
        if event.text or content:
            logprobs = {"content": content, "refusal": None} if content else None
            yield _chunk(head, {"content": event.text}, logprobs=logprobs)
    elif isinstance(event, ToolCall):  # a cut call: what was written of its arguments, as OpenAI sends it
        arguments = event.arguments_text if event.cut else json.dumps(event.arguments, ensure_ascii=False)
        call = {"index": tally.tool_calls - 1, "id": event.call_id, "type": "function"}
        yield _chunk(head, {"tool_calls": [call | {"function": {"name": event.name, "arguments": arguments}}]})


class _LogprobEntries:
    """OpenAI `logprobs.content` entries, one per generated token (see `openai_chunks`)."""

    def __init__(self, tokenizer: TokenBytes):
        self._tokenizer = tokenizer
        self._last: tuple[int, float] | None = None  # (token id, time) of the latest TokenDelta

    def of(self, event: TokenDelta) -> list[dict[str, Any]]:
        """The entry for this event's token ([] when the event only settles more text of the same token)."""
        step = (event.token_id, event.elapsed_ms)
        if step == self._last:
            return []
        self._last = step
        if event.redacted:  # the scan hid this token: only what was shown, no bytes, no alternatives
            return [_entry(event.text.encode("utf-8"), event.logprob) | {"top_logprobs": []}]
        top = [_entry(self._tokenizer.token_bytes(a.token_id), a.logprob) for a in event.alternatives]
        return [_entry(self._tokenizer.token_bytes(event.token_id), event.logprob) | {"top_logprobs": top}]


def _entry(raw: bytes, logprob: float) -> dict[str, Any]:
    return {"token": raw.decode("utf-8", errors="replace"), "logprob": logprob, "bytes": list(raw)}


def _openai_end(head: dict[str, Any], terminal: Event, tally: _Tally, include_usage: bool) -> Iterator[Item]:
    if isinstance(terminal, (Completed, Cancelled)):
        yield from _openai_finish(head, terminal, tally, include_usage)
    elif isinstance(terminal, Failed):
        kind = terminal.error or "server_error"
        yield {"error": {"message": terminal.message, "type": kind, "param": None, "code": None}}
    yield DONE


def _openai_finish(
    head: dict[str, Any], terminal: Completed | Cancelled, tally: _Tally, include_usage: bool
) -> Iterator[Item]:
    tail = tally.tail(terminal.text)
    if tail:  # text the terminal event settled that no TokenDelta carried (e.g. a flushed holdback)
        yield _chunk(head, {"content": tail})
    reason = _OPENAI_FINISH.get(terminal.finish_reason, "stop") if isinstance(terminal, Completed) else "stop"
    yield _chunk(head, {}, finish_reason=reason)
    if include_usage:
        yield head | {"choices": [], "usage": _usage(terminal.usage)}


def _usage(usage: Usage) -> dict[str, int | None]:
    """OpenAI's usage object: the turn's counts as its terminal event reports them."""
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens}  # fmt: skip


# ---- ChatGPT web "delta_encoding v1" ---------------------------------------------------------------------------


def delta_v1(events: Iterable[Event], *, conversation_id: str | None = None) -> Iterator[Item]:
    """The turn as the ChatGPT web backend's "delta_encoding v1" patch stream.

    Yields `"v1"` (sent as event `delta_encoding`), an `add` of the message skeleton, the first text as an `append`
    to /message/content/parts/0 and later texts as bare `{"v": ...}` (same path and op), one closing `patch`
    (status, end_turn, finish_details), then `"[DONE]"`. `conversation_id` defaults to the turn's session id.
    Completed → "finished_successfully" (a length stop: finish "max_tokens", end_turn false); Cancelled →
    "finished_partial_completion" / "interrupted"; Failed → "finished_with_error" plus the message at /error.
    Tool calls and results are not shown: the web stream puts them in messages of their own.
    """
    first, stream = _open(events)
    if first is None:
        return
    if conversation_id is None and isinstance(first, TurnStarted):
        conversation_id = first.session_id
    yield "v1"
    yield {"p": "", "o": "add", "v": {"message": _skeleton(first), "conversation_id": conversation_id}, "c": 0}
    tally, appending = _Tally(), False
    for event in stream:
        tally.see(event)
        if isinstance(event, TERMINAL):
            yield from _v1_end(event, tally)
            return
        if isinstance(event, TokenDelta) and event.text:
            yield {"v": event.text} if appending else {"p": PARTS0, "o": "append", "v": event.text}
            appending = True
    yield from _v1_end(_unterminated(), tally)


def _skeleton(first: Event) -> dict[str, Any]:
    """The assistant message as the stream opens: empty text, in progress."""
    return {
        "id": first.turn_id,
        "author": {"role": "assistant", "name": None, "metadata": {}},
        "create_time": first.created if isinstance(first, TurnStarted) else None,
        "update_time": None,
        "content": {"content_type": "text", "parts": [""]},
        "status": "in_progress",
        "end_turn": None,
        "weight": 1.0,
        "metadata": {},
        "recipient": "all",
    }


def _v1_end(terminal: Event, tally: _Tally) -> Iterator[Item]:
    status, finish, end_turn = _v1_outcome(terminal)
    ops = [
        *_v1_text_ops(terminal, tally),
        {"p": "/message/status", "o": "replace", "v": status},
        {"p": "/message/end_turn", "o": "replace", "v": end_turn},
        {"p": "/message/metadata", "o": "append", "v": {"is_complete": True, "finish_details": {"type": finish}}},
    ]
    if isinstance(terminal, Failed):
        ops.append({"p": "/error", "o": "add", "v": terminal.message})
    yield {"p": "", "o": "patch", "v": ops}
    yield DONE


def _v1_text_ops(terminal: Event, tally: _Tally) -> list[dict[str, Any]]:
    """Bring parts[0] to the terminal event's text: append what is missing, or replace it if it was revised."""
    final = getattr(terminal, "text", "")
    if isinstance(terminal, Failed) and not final:  # a failure that does not say what was shown keeps the stream's
        return []
    tail = tally.tail(final)
    if tail is None:
        return [{"p": PARTS0, "o": "replace", "v": final}]
    return [{"p": PARTS0, "o": "append", "v": tail}] if tail else []


def _v1_outcome(terminal: Event) -> tuple[str, str, bool]:
    """(status, finish_details type, end_turn); a length stop leaves the turn open, as "Continue generating" does."""
    if isinstance(terminal, Completed):
        reason = terminal.finish_reason
        return "finished_successfully", _V1_FINISH.get(reason, reason), reason != "length"
    if isinstance(terminal, Cancelled):
        return "finished_partial_completion", "interrupted", True
    return "finished_with_error", "error", True


def delta_v1_sse(events: Iterable[Event], *, conversation_id: str | None = None) -> Iterator[str]:
    """`delta_v1` framed as the web backend sends it: `delta_encoding`, then `delta` events, then `[DONE]`."""
    for index, item in enumerate(delta_v1(events, conversation_id=conversation_id)):
        if index == 0:
            yield sse_frame(json.dumps(item), event="delta_encoding")
        elif isinstance(item, str):
            yield sse_frame(item)
        else:
            yield sse_frame(json.dumps(item, ensure_ascii=False), event="delta")


def apply_delta_v1(items: Iterable[Any]) -> dict[str, Any]:
    """Replay a "delta_encoding v1" stream (items or their parsed SSE data) into the final root document.

    The result is `{"message": {...}, "conversation_id": ..., ...}`; bare strings ("v1", "[DONE]") are skipped.
    """
    root: dict[str, Any] = {"": {}}
    path, op = None, None
    for item in items:
        if isinstance(item, str):
            continue
        if "o" in item:
            path, op = item.get("p", ""), item["o"]
        if op is None:
            raise ValueError(f"Bare patch {item!r} has no earlier patch to take its path and op from")
        _apply(root, path or "", op, item["v"])
    return root[""]


def _apply(root: dict[str, Any], path: str, op: str, value: Any) -> None:
    """Apply one op at a JSON pointer; `root[""]` holds the document."""
    *parents, key = [""] + [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]
    container: Any = root
    for token in parents:
        container = container[int(token) if isinstance(container, list) else token]
    index: Any = int(key) if isinstance(container, list) else key
    if op in ("add", "replace"):
        container[index] = value
    elif op == "append":
        container[index] = _appended(container[index], value)
    elif op == "truncate":
        container[index] = container[index][:value]
    elif op == "remove":
        del container[index]
    elif op == "patch":
        for sub in value:
            _apply(root, path + sub.get("p", ""), sub["o"], sub["v"])
    else:
        raise ValueError(f"Unknown delta op {op!r}; known: add, replace, append, truncate, remove, patch")


def _appended(current: Any, value: Any) -> Any:
    """`append`: concatenate text, extend a list by one, merge into a dict."""
    if isinstance(current, list):
        return [*current, value]
    if isinstance(current, dict):
        return current | value
    return current + value


# ---- SSE and JSON lines ----------------------------------------------------------------------------------------


def sse(items: Iterable[Any], *, event: str | None = None) -> Iterator[str]:
    """Frame each item as one Server-Sent Event: strings go as they are, anything else as compact JSON.

    `event` names every event except the `[DONE]` sentinel, which is always a bare `data: [DONE]`.
    """
    for item in items:
        if isinstance(item, str):
            yield sse_frame(item, event=None if item == DONE else event)
        else:
            yield sse_frame(json.dumps(item, ensure_ascii=False, separators=(",", ":")), event=event)


def sse_frame(data: str, *, event: str | None = None) -> str:
    """One SSE event: an optional `event:` line, one `data:` line per line of `data`, a blank line."""
    if event is not None and _LINE_BREAK.search(event):
        raise ValueError(f"An SSE event name cannot contain a line break: {event!r}")
    head = f"event: {event}\n" if event is not None else ""
    return head + "".join(f"data: {line}\n" for line in _LINE_BREAK.split(data)) + "\n"


def parse_sse(text: str) -> list[tuple[str | None, str]]:
    """The (event name or None, data) of each complete event in an SSE text, per the WHATWG parsing rules."""
    parsed: list[tuple[str | None, str]] = []
    name: str | None = None
    data: list[str] = []
    for line in _LINE_BREAK.split(text):
        if not line:
            if data:
                parsed.append((name or None, "\n".join(data)))
            name, data = None, []
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    return parsed


def event_lines(events: Iterable[Event]) -> Iterator[str]:
    """Each event's `to_dict()` as one line of JSON (newline included): what `chatflow chat --json` prints."""
    for event in events:
        yield json.dumps(event.to_dict(), ensure_ascii=False) + "\n"
