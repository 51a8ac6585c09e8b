"""A remote answer's tokens, read from the server's chunks: text, logprob entries, tool-call deltas. They go through
the output gate as a local turn's do (`release.Releaser`)."""

from __future__ import annotations

import codecs
import time
from collections.abc import Iterator, Sequence
from typing import Any

from jupyter_chatflow.engine.generation import Alternative
from jupyter_chatflow.events import TokenDelta


def token_of(entry: dict[str, Any], arrival: float) -> TokenDelta:
    """The event a server's logprob entry becomes once released (`release.Releaser`): no token id, no entropy (a
    server sends neither); `computed_at` is when its chunk was read, what this side can know of it."""
    listed = sorted(entry.get("top_logprobs") or [], key=lambda a: -float(a["logprob"]))  # vLLM lists its pick first
    alternatives = tuple(
        Alternative(token_id=-1, text=entry_text(a), logprob=float(a["logprob"]), sampling_prob=-1.0) for a in listed
    )
    return TokenDelta(index=0, token_id=-1, text="", logprob=float(entry.get("logprob", 0.0)), entropy=0.0,
                      alternatives=alternatives, elapsed_ms=arrival, computed_at=time.monotonic())  # fmt: skip


def entry_text(entry: dict[str, Any]) -> str:
    raw = entry.get("bytes")
    return bytes(raw).decode("utf-8", "replace") if raw else str(entry.get("token", ""))


def pieces(content: str, entries: Sequence[dict[str, Any]]) -> Iterator[tuple[dict[str, Any] | None, str]]:
    """A chunk's text split over its logprob entries (one per token); text without an entry extends the latest
    token. Several entries: each gets the characters its bytes complete, if that spells the content, else the
    last one gets all of it."""
    if not entries:
        if content:
            yield None, content
        return
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    texts = [decoder.decode(bytes(e.get("bytes") or str(e.get("token", "")).encode())) for e in entries]
    if "".join(texts) != content:
        texts = [""] * (len(entries) - 1) + [content]
    yield from zip(entries, texts, strict=True)


def merge_call(calls: dict[int, dict[str, str]], delta: dict[str, Any]) -> None:
    """Add one streamed `tool_calls` delta: the first names the call, later ones extend its arguments."""
    call = calls.setdefault(int(delta.get("index", 0)), {"id": "", "name": "", "arguments": ""})
    function = delta.get("function") or {}
    call["id"] = delta.get("id") or call["id"]
    call["name"] = function.get("name") or call["name"]
    call["arguments"] += function.get("arguments") or ""
