"""A remote answer's tokens: read from the server's chunks (text, logprob entries, tool-call deltas) and released
through the output gate as `TokenDelta`s, as a local turn releases its own."""

from __future__ import annotations

import codecs
import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from jupyter_chatflow.engine.generation import Alternative
from jupyter_chatflow.events import Event, SafetyDecision, TokenDelta


@dataclasses.dataclass(frozen=True, kw_only=True)
class Token:
    """What the server said of one generated token."""

    logprob: float = 0.0
    alternatives: tuple[Alternative, ...] = ()
    elapsed_ms: float = 0.0
    arrived_at: float = dataclasses.field(default_factory=time.monotonic)
    """Monotonic seconds when its chunk was read (`TokenDelta.computed_at`: what this side can know of it)."""


class RemoteText:
    """A remote answer's tokens through the output gate (when it scans), released as `TokenDelta`s."""

    def __init__(self, emit: Callable[[Event], None], gate: Any | None):
        self.emit, self.gate = emit, gate
        self.shown = ""
        self.blocked: SafetyDecision | None = None
        self._tokens: list[Token] = []
        self._index = 0  # TokenDelta.index: one per event, as a local turn counts them

    def add(self, token: Token | None, text: str) -> None:
        """A new token with its text, or (None) more text of the latest one (a character its bytes finished)."""
        if token is not None or not self._tokens:
            self._tokens.append(token or Token())
        last = len(self._tokens) - 1
        self._release(self.gate.feed(last, text) if self.gate is not None else [(last, text, False)])

    def finish(self) -> None:
        if self.gate is not None and self.blocked is None:
            self._release(self.gate.close())

    def summary(self) -> SafetyDecision | None:
        return self.gate.summary() if self.gate is not None else None

    def _release(self, items: Sequence[Any]) -> None:
        for item in items:
            if isinstance(item, SafetyDecision):
                self.emit(item)
                self.blocked = item if item.action == "block" else self.blocked
                continue
            index, text, redacted = item if isinstance(item, tuple) else (item.index, item.text, item.redacted)
            token = self._tokens[index]
            self.shown += text
            self.emit(TokenDelta(index=self._index, token_id=-1, text=text, logprob=token.logprob, entropy=0.0,
                                 alternatives=token.alternatives, elapsed_ms=token.elapsed_ms,
                                 redacted=redacted, computed_at=token.arrived_at))  # fmt: skip
            self._index += 1


def token_of(entry: dict[str, Any], arrival: float) -> Token:
    listed = sorted(entry.get("top_logprobs") or [], key=lambda a: -float(a["logprob"]))  # vLLM lists its pick first
    alternatives = tuple(
        Alternative(token_id=-1, text=entry_text(a), logprob=float(a["logprob"]), sampling_prob=-1.0) for a in listed
    )
    return Token(logprob=float(entry.get("logprob", 0.0)), alternatives=alternatives, elapsed_ms=arrival)


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
