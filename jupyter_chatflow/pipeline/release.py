"""The answer's tokens through the output gate, released as `TokenDelta`s: the one step that turns gated output
into the stream the views read, for a local answer (its engine's steps) and a server's (its chunks) alike.

A gate holds back a short tail that could still become an e-mail address or a card number, and redacts what it
finds; without one (safety "input" or "off") every token is released as it comes, also one whose text waits
(half a UTF-8 character). The gate names tokens by position; each position keeps the `TokenDelta` it becomes
(`token`: everything but its index, text and redaction, which the release fills in).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from jupyter_chatflow.events import Event, SafetyDecision, TokenDelta


class Releaser:
    """One answer's tokens through `gate` (None: not scanned) to `emit`; `shown` is the answer as released."""

    def __init__(self, emit: Callable[[Event], None], gate: Any | None):
        self.emit, self.gate = emit, gate
        self.shown = ""
        self.blocked: SafetyDecision | None = None
        self._tokens: list[TokenDelta] = []
        self._index = 0  # TokenDelta.index across the turn's rounds: one per event

    def add(self, token: TokenDelta | None, text: str) -> None:
        """A new token with its visible text, or (None) more text of the latest one: a character its bytes
        finished, or the text a generation held back to its end."""
        if token is None and not text:
            return
        if token is not None:
            self._tokens.append(token)
        elif not self._tokens:  # (text before any token: a server's chunk without a logprob entry)
            self._tokens.append(TokenDelta(index=0, token_id=-1, text="", logprob=0.0, entropy=0.0,
                                           computed_at=time.monotonic()))  # fmt: skip
        last = len(self._tokens) - 1
        self._release(self.gate.feed(last, text) if self.gate is not None else [(last, text, False)])

    def finish(self) -> None:
        """At the end of the answer: release what the gate still holds."""
        if self.gate is not None and self.blocked is None:
            self._release(self.gate.close())

    def summary(self) -> SafetyDecision | None:
        """The output layer's verdict on the whole answer (None when the output is not scanned)."""
        return self.gate.summary() if self.gate is not None else None

    def _release(self, items: Sequence[Any]) -> None:
        for item in items:
            if isinstance(item, SafetyDecision):
                self.emit(item)
                self.blocked = item if item.action == "block" else self.blocked
                continue
            position, text, redacted = item if isinstance(item, tuple) else (item.index, item.text, item.redacted)
            self.shown += text
            self.emit(dataclasses.replace(self._tokens[position], index=self._index, text=text, redacted=redacted))
            self._index += 1
