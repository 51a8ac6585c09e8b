"""One generation round of a turn, as events: tokens through the output gate, and a tool call if the model makes one.

The engine yields `Step`s; each becomes a `TokenDelta` once the output safety gate releases its text (a gate
holds back a short tail that could still become an e-mail address or a card number, and redacts what it finds).
When the model starts a `<tool_call>`, the free-running generation is closed and the call is written again under
a JSON-schema token mask by the one tool-call decoder (`tools/decode.py`, which the server uses too), so its
arguments are valid for the tool even from a 135M model. The call's fixed beginning (`<tool_call>\n{"name":
"calculator", "arguments": {"expression":` for one tool) is prefilled with the prompt as the tokenizer spells it;
the model decodes the values (and picks a tool's name). max_tokens bounds the round's answer and its call together
(`decode.call_room`); a call it cuts is emitted as a `ToolCall` with `cut` set, and nothing runs it.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

from jupyter_chatflow.engine.generation import Engine, Generation, Step, tokens_per_s
from jupyter_chatflow.engine.model import Model
from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.events import (
    Event,
    PrefillDone,
    PrefillKind,
    SafetyDecision,
    Timings,
    TokenDelta,
    ToolCall,
    Usage,
)

from .tools import Tool
from .tools.decode import AnswerText, CallDecoder, DecodedCall, call_prompt, call_room
from .tools.guards import CallGuard

Stage = Literal["safety_input", "memory", "context", "tools", "memory_write"]
"""The stages a turn times itself (`Timings` fields); prefill and decode are its rounds'."""


@dataclasses.dataclass
class Round:
    """What one round produced: one request to the model (its prompt, then the answer or a tool call)."""

    text: str = ""
    """The answer text of this round as the model wrote it (tool call cut out; before the output gate)."""
    call: tuple[str, dict[str, Any]] | None = None
    call_error: str = ""
    """Why the call could not be read (it becomes the tool's error result)."""
    finish_reason: str = "stop"
    completion_tokens: int = 0
    decode_steps: int = 0
    """Tokens that came from decode steps (each generation's first token comes from its prefill)."""
    prompt_tokens: int = 0
    reused_tokens: int = 0
    prefill_ms: float = 0.0
    decode_ms: float = 0.0
    decode_compile_ms: float = 0.0
    """Of decode_ms, XLA compiling (a decode program's first call in the process): not decoding speed."""
    call_ms: float = 0.0
    """Time to write the call under the mask: building it, its prefill and its decode steps."""
    call_compile_ms: float = 0.0
    """Of call_ms after the call's prefill, XLA compiling (a decode program's first call in the process)."""
    call_tokens: int = 0
    """Tokens of the call (from `<tool_call>` or the line after it to `</tool_call>`)."""
    call_forced: int = 0
    """Of those, the tokens the grammar fixed (keys, punctuation, a sole tool's name): not the model's choice."""
    call_arguments: str = ""
    """The call's arguments as JSON text, as written (what was written of them, for a cut call)."""
    call_guard: CallGuard = ""
    """The string rule that ended one of the call's arguments, if one did (`tools/guards.py`)."""
    cut_name: str = ""
    """The name of a call max_tokens cut (`call` stays None: there is no call to run)."""

    def tool_call(self, call_id: str, *, cut: bool = False) -> ToolCall:
        """The round's call as an event (`cut`: max_tokens ended it before `</tool_call>`; nothing runs it)."""
        name, arguments = self.call if self.call is not None else (self.cut_name, {})
        return ToolCall(call_id=call_id, name=name, arguments=arguments, constrained=True, decode_ms=self.call_ms,
                        compile_ms=self.call_compile_ms, tokens=self.call_tokens, forced_tokens=self.call_forced,
                        arguments_text=self.call_arguments, cut=cut, guard=self.call_guard)  # fmt: skip


class Streamer:
    """Runs rounds for one turn; `emit` receives each event (unstamped) as soon as it exists. Generations run on
    `engine` (a chat's `Scheduler`, batched with its title and prewarms), or on the model alone."""

    def __init__(
        self, model: Model, emit: Callable[[Event], None], cancel: threading.Event, gate: Any | None,
        engine: Engine | None = None,
    ):  # fmt: skip
        self.model, self.emit, self.cancel, self.gate = model, emit, cancel, gate
        self.engine: Engine = engine if engine is not None else model
        self.index = 0  # TokenDelta.index across the turn's rounds
        self.shown = ""  # the answer as released to the views
        self.blocked: SafetyDecision | None = None
        self._steps: list[Step] = []  # every step of the turn's rounds; the gate names them by position
        self._computed: list[float] = []  # when each came out of the engine (monotonic; 0: a fork's kept step)

    def free(
        self, ids: Sequence[int], params: SamplingParams, tools: Sequence[Tool], prefix: Sequence[Step] = ()
    ) -> Round:
        """Generate freely; stop early at a tool call (when `tools`) and decode it under the mask.

        `prefix`: steps the answer starts with (a fork); they are shown first, then generation continues after them.
        """
        result = Round(prompt_tokens=len(ids), completion_tokens=len(prefix))
        answer = AnswerText(tools=bool(tools))
        for step in prefix:
            self._show(result, step, answer.shown(step.text, generated=False), computed_at=0.0)
        if prefix and prefix[-1].token_id in self.model.tokenizer.stop_ids:  # a fork that chose to end the answer
            return result
        # the penalty counts the answer (a fork's kept tokens too), not the prompt: see SamplingParams.penalty_from
        room = dataclasses.replace(params, max_tokens=max(params.max_tokens - len(prefix), 1), penalty_from=len(ids))
        generation = self.engine.submit([*ids, *(s.token_id for s in prefix)], room, cancel=self.cancel)
        stepped = False  # whether any step came
        for step in generation:
            if step.index == 0:
                self._prefilled(result, generation, "answer", len(ids))
            stepped = True
            self._show(result, step, answer.shown(step.text))
            if self.blocked is not None or answer.called:
                break
        _close(generation)
        if not stepped and generation.usage.prompt_tokens:  # the first token was a stop token: no step, but a prefill
            self._prefilled(result, generation, "answer", len(ids))
        self._count(result, generation)
        if answer.called and self.blocked is None:
            return self._call(result, call_prompt(ids, result.text, self.model.tokenizer), params, tools)
        if self.blocked is None:  # text held back until the end: a stop-string prefix, a partial "<tool_call"
            self._show(result, None, answer.tail(generation.text))
        result.finish_reason = "content_filter" if self.blocked else (generation.finish_reason or "stop")
        return result

    def forced(self, ids: Sequence[int], params: SamplingParams, tools: Sequence[Tool], only: str | None) -> Round:
        """tool_choice required / a name: the answer starts with a call, decoded under the mask."""
        return self._call(Round(prompt_tokens=len(ids)), list(ids), params, tools, only=only, include_open=True)

    def _call(self, result: Round, ids, params, tools, only=None, include_open=False) -> Round:
        started = time.perf_counter()
        decoder = CallDecoder(
            self.model.tokenizer, tools, only=only, include_open=include_open, vocab_size=self.model.config.vocab_size,
            room=call_room(params.max_tokens, result.completion_tokens), seed=params.seed,
        )  # fmt: skip
        # the fixed beginning (`<tool_call>\n{"name": …`) is prefilled as the tokenizer spells it; a call with
        # nothing to choose, or no room left, has nothing to decode
        finish = None if decoder.params is None else self._decode_call(result, [*ids, *decoder.fixed], decoder)
        call = decoder.finish(finish)
        # every token of the call is the model's output, whether prefilled (fixed), sampled under the mask, or a
        # fixed run that ended it (taken at once, no step): as OpenAI counts a call's tokens in completion_tokens
        result.completion_tokens += call.tokens
        if call.status == "cancelled":
            result.finish_reason = "cancelled"
            return result
        self._called(result, call, (time.perf_counter() - started) * 1000)
        return result

    def _called(self, result: Round, call: DecodedCall, ms: float) -> None:
        """Put a written call into the round: one to run, or one max_tokens cut (emitted here, never run)."""
        result.call_ms, result.call_tokens, result.call_forced = ms, call.tokens, call.forced
        result.call_arguments, result.call_guard = call.arguments_text, call.guard
        if call.status != "cut":
            result.call, result.call_error, result.finish_reason = (call.name, call.arguments), call.error, "tool_calls"
            return
        result.cut_name, result.finish_reason = call.name, "length"
        if call.name:  # (a call cut before its name is whole is no call: the round just ends at max_tokens)
            self.emit(result.tool_call(f"call_{uuid.uuid4().hex[:12]}", cut=True))

    def _decode_call(self, result: Round, ids: list[int], decoder: CallDecoder) -> str | None:
        """Decode the rest of a call under its mask after `ids` (the prompt and the call's fixed beginning); the
        generation's finish_reason."""
        assert decoder.params is not None
        generation = self.engine.submit(ids, decoder.params, decoder.constraint, self.cancel)
        for step in generation:
            if step.index == 0:
                self._prefilled(result, generation, "tool_call", result.prompt_tokens)
        self._count(result, generation, counted=False)
        result.call_compile_ms = generation.usage.decode_compile_ms
        return generation.finish_reason

    def _show(self, result: Round, step: Step | None, text: str, computed_at: float | None = None) -> None:
        """Pass a step's visible text through the gate; emit a TokenDelta for each token it releases.
        `computed_at`: when the engine produced the step (default: now, as it was just read)."""
        result.text += text
        if step is not None:
            self._steps.append(step)
            self._computed.append(time.monotonic() if computed_at is None else computed_at)
        last = len(self._steps) - 1  # text flushed at the end belongs to the last step
        if self.gate is None:  # every token gets its event, also one whose text waits (half a UTF-8 character)
            self._release([(last, text, False)] if last >= 0 and (text or step is not None) else [])
        else:
            self._release(self.gate.feed(last, text))

    def finish(self) -> None:
        """At the end of the turn: release what the gate still holds."""
        if self.gate is not None and self.blocked is None:
            self._release(self.gate.close())

    def summary(self) -> SafetyDecision | None:
        """The output layer's verdict on the whole answer (None when the output is not scanned)."""
        return self.gate.summary() if self.gate is not None else None

    def _release(self, items) -> None:
        for item in items:
            if isinstance(item, SafetyDecision):
                self.emit(item)
                if item.action == "block":
                    self.blocked = item
            elif isinstance(item, tuple):
                self._delta(item[0], item[1], item[2])
            else:
                self._delta(item.index, item.text, item.redacted)

    def _delta(self, position: int, text: str, redacted: bool) -> None:
        step = self._steps[position]
        self.shown += text
        self.emit(
            TokenDelta(
                index=self.index, token_id=step.token_id, text=text, logprob=step.logprob, entropy=step.entropy,
                alternatives=step.top_alternatives, elapsed_ms=step.elapsed_ms, compile_ms=step.compile_ms,
                redacted=redacted, computed_at=self._computed[position],
            )
        )  # fmt: skip
        self.index += 1

    def _prefilled(self, result: Round, generation: Generation, kind: PrefillKind, context: int) -> None:
        """The first token of a generation is out: its prompt (with a fork's prefix tokens, or a call's beginning)
        is in the KV cache; `context` of its tokens are the round's assembled prompt."""
        usage = generation.usage
        if result.prefill_ms == 0.0:  # the round's first generation: its prompt is the round's prompt
            result.reused_tokens = min(usage.reused_tokens, result.prompt_tokens)
        result.prefill_ms += usage.prefill_ms
        computed = usage.prompt_tokens - usage.reused_tokens
        self.emit(PrefillDone(prompt_tokens=usage.prompt_tokens, reused_tokens=usage.reused_tokens,
                              computed_tokens=computed, latency_ms=usage.prefill_ms,
                              compile_ms=usage.compile_ms, queued_ms=usage.queue_ms, queued_for=usage.queue_reason,
                              kind=kind, context_tokens=context))  # fmt: skip  # (compile_ms: the prefill's)

    def _count(self, result: Round, generation: Generation, counted: bool = True) -> None:
        """Add a generation's time to the round; its tokens too unless the caller counts them (`counted`)."""
        usage = generation.usage
        result.completion_tokens += usage.completion_tokens if counted else 0
        result.decode_steps += usage.decode_steps
        result.decode_ms += usage.decode_ms
        result.decode_compile_ms += usage.decode_compile_ms


@dataclasses.dataclass(frozen=True, kw_only=True)
class Totals:
    """What a whole turn used and how long it took: its terminal event carries these."""

    usage: Usage
    timings: Timings
    tokens_per_s: float


def account(rounds: Sequence[Round], stages: Mapping[str, float], *, ttft_ms: float | None, total_ms: float) -> Totals:
    """A turn's totals, summed once from its rounds and the other stages it timed (`Stage` → ms).

    Tokens/s is over every generation's decode steps with XLA compiling left out (`tokens_per_s`): the first token
    of each generation comes out of its prefill, so n tokens in one generation are n - 1 steps.
    """
    decode_ms = sum(r.decode_ms for r in rounds)
    usage = Usage(
        prompt_tokens=sum(r.prompt_tokens for r in rounds),
        completion_tokens=sum(r.completion_tokens for r in rounds),
        reused_tokens=sum(r.reused_tokens for r in rounds),
    )
    prefill_ms = sum(r.prefill_ms for r in rounds)
    timings = Timings(**stages, prefill=prefill_ms, decode=decode_ms, ttft_ms=ttft_ms, total_ms=total_ms)
    steps, compile_ms = sum(r.decode_steps for r in rounds), sum(r.decode_compile_ms for r in rounds)
    return Totals(usage=usage, timings=timings, tokens_per_s=tokens_per_s(steps, decode_ms, compile_ms))


def _close(generation: Generation) -> None:
    iterator: Iterator[Step] = iter(generation)
    close = getattr(iterator, "close", None)
    if close is not None:
        close()
