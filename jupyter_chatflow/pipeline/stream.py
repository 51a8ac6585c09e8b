"""A local turn's rounds as events: each round driven by the one round driver (`rounds.RoundDriver`, which the
server's tool requests use too), its tokens released through the output gate (`release.Releaser`, which a remote
turn uses too), a `PrefillDone` for each generation's prefill.

When the model starts a `<tool_call>`, the free-running generation is closed and the call is written again under
a JSON-schema token mask (`tools/decode.py`), so its arguments are valid for the tool even from a 135M model. The
call's fixed beginning (`<tool_call>\n{"name": "calculator", "arguments": {"expression":` for one tool) is
prefilled with the prompt as the tokenizer spells it; the model decodes the values (and picks a tool's name).
max_tokens bounds the round's answer and its call together (`decode.call_room`); a call it cuts is emitted as a
`ToolCall` with `cut` set, and nothing runs it.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Literal

from jupyter_chatflow.engine.generation import Engine, Generation, Step
from jupyter_chatflow.engine.model import Model
from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.events import (
    Event,
    PrefillDone,
    PrefillKind,
    TokenDelta,
    Usage,
)

from .release import Releaser
from .rounds import Round, RoundDriver
from .tools import Tool

Stage = Literal["safety_input", "memory", "context", "tools", "memory_write"]
"""The stages a turn times itself (`Timings` fields); prefill and decode are its rounds'."""


class Streamer(Releaser):
    """Runs a turn's rounds on the local engine (`rounds.RoundDriver`) and releases their tokens through the output
    gate (`release.Releaser`); `emit` receives each event (unstamped) as soon as it exists. Generations run on
    `engine` (a chat's `Scheduler`, batched with its title and prewarms), or on the model alone."""

    def __init__(
        self, model: Model, emit: Callable[[Event], None], cancel: threading.Event, gate: Any | None,
        engine: Engine | None = None,
    ):  # fmt: skip
        super().__init__(emit, gate)
        self.model, self.cancel = model, cancel
        self.engine: Engine = engine if engine is not None else model

    def free(
        self, ids: Sequence[int], params: SamplingParams, tools: Sequence[Tool], prefix: Sequence[Step] = ()
    ) -> Round:
        """Generate freely; stop early at a tool call (when `tools`) and decode it under the mask.

        `prefix`: steps the answer starts with (a fork); they are shown first, then generation continues after them.
        """
        # the penalty counts the answer (a fork's kept tokens too), not the prompt: see SamplingParams.penalty_from
        room = dataclasses.replace(params, penalty_from=len(ids))
        return self._round(ids, room, tools, "auto" if tools else "none", prefix)

    def forced(self, ids: Sequence[int], params: SamplingParams, tools: Sequence[Tool], only: str | None) -> Round:
        """tool_choice required / a name: the answer starts with a call, decoded under the mask."""
        return self._round(ids, params, tools, only or "required")

    def _round(
        self, ids: Sequence[int], params: SamplingParams, tools: Sequence[Tool], choice: str,
        prefix: Sequence[Step] = (),
    ) -> Round:  # fmt: skip
        driver = RoundDriver(self.engine, self.model.tokenizer, self.model.config.vocab_size, ids, params, tools,
                             choice, prefix=prefix, cancel=self.cancel,
                             on_prefill=lambda made, kind: self._prefilled(made, kind, len(ids)))  # fmt: skip
        for position, step in enumerate(driver):
            if driver.calling:  # the call's steps: its ToolCall event says what they wrote
                continue
            kept = position < len(prefix)  # a fork's kept token: not computed in this turn
            self.add(_token(step, computed_at=0.0 if kept else time.monotonic()), step.text)
            if self.blocked is not None:
                driver.close()
                break
        result = driver.round
        if self.blocked is not None:
            result.finish_reason = "content_filter"
            return result
        self.add(None, driver.tail)  # text held back until the end: a stop-string prefix, a partial "<tool_call"
        if result.cut_name:  # max_tokens cut the call once its name was whole: shown as written, never run
            self.emit(result.tool_call(f"call_{uuid.uuid4().hex[:12]}", cut=True))
        return result

    def _prefilled(self, generation: Generation, kind: PrefillKind, context: int) -> None:
        """The first token of a generation is out: its prompt (with a fork's prefix tokens, or a call's beginning)
        is in the KV cache; `context` of its tokens are the round's assembled prompt."""
        usage = generation.usage
        computed = usage.prompt_tokens - usage.reused_tokens
        self.emit(PrefillDone(prompt_tokens=usage.prompt_tokens, reused_tokens=usage.reused_tokens,
                              computed_tokens=computed, latency_ms=usage.prefill_ms,
                              compile_ms=usage.compile_ms, queued_ms=usage.queue_ms, queued_for=usage.queue_reason,
                              kind=kind, context_tokens=context))  # fmt: skip  # (compile_ms: the prefill's)


def _token(step: Step, computed_at: float) -> TokenDelta:
    """The event a step becomes once released (its index, text and redaction filled in then)."""
    return TokenDelta(index=0, token_id=step.token_id, text="", logprob=step.logprob, entropy=step.entropy,
                      alternatives=step.top_alternatives, elapsed_ms=step.elapsed_ms, compile_ms=step.compile_ms,
                      computed_at=computed_at)  # fmt: skip


def usage_of(rounds: Sequence[Round]) -> Usage:
    """A local turn's usage, summed once from its rounds (the times are the account's: `account.settled`)."""
    return Usage(
        prompt_tokens=sum(r.prompt_tokens for r in rounds),
        completion_tokens=sum(r.completion_tokens for r in rounds),
        reused_tokens=sum(r.reused_tokens for r in rounds),
    )
