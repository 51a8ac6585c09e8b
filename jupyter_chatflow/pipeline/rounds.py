"""One round of an answer on the local engine: free text, then (when the model opens `<tool_call>`, or from the
first token for tool_choice "required" or a name) the call written under the JSON-schema mask, all bounded by
max_tokens. The one driver of that step: the pipeline's rounds (`stream.Streamer`: `Chat.send`, `%%chat`, the
panel) and the server's `/v1/chat/completions` with tools (`frontends/server/tools.ToolStream`) both iterate it.

A `RoundDriver` yields `Step`s: the free text's steps with the text the answer shows (a call's opening held out:
`decode.AnswerText`), then the call's steps with no text. Once iteration has ended (or `close()` stopped it), its
`round` says what the round produced and what it cost: the one record both callers read their figures from. A
caller may stop iterating at any point: `close()` ends the running generation and still counts it.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any, Literal

from jupyter_chatflow.engine.generation import Engine, Generation, GenerationCounts, Step
from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.events import ToolCall
from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

from .tools import Tool
from .tools.decode import AnswerText, CallDecoder, DecodedCall, call_prompt, call_room
from .tools.guards import CallGuard

GenerationKind = Literal["answer", "tool_call"]
"""Which generation of a round has prefilled: the free answer's, or the call's under the mask."""


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
    """The round's first prefill: its prompt (with a fork's kept tokens, or a forced call's fixed beginning)."""
    prefill_compile_ms: float = 0.0
    """Of prefill_ms, XLA compiling."""
    call_prefill_ms: float = 0.0
    """A call opened mid-answer: the prefill of its fixed beginning (the round's second generation)."""
    call_prefill_compile_ms: float = 0.0
    """Of call_prefill_ms, XLA compiling."""
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

    def counts(self) -> GenerationCounts:
        """The round as one generation's counts, as a server reports a request: its prefill is the answer's (what
        the client waited for the first token); a call's prefill mid-answer is decode time (the answer had begun)."""
        return GenerationCounts(
            prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens,
            reused_tokens=self.reused_tokens, prefill_ms=self.prefill_ms,
            decode_ms=self.decode_ms + self.call_prefill_ms,
            compile_ms=self.prefill_compile_ms + self.call_prefill_compile_ms + self.decode_compile_ms,
            decode_compile_ms=self.decode_compile_ms + self.call_prefill_compile_ms,
        )  # fmt: skip


class RoundDriver:
    """One round on `engine`: iterate it for its steps; `round` holds the result once iteration has ended.

    `choice`: "auto" (free text; a call once the model opens one), "none" (free text, no call), "required" or a
    tool's name (the call from the first token). `prefix`: steps the answer starts with (a fork's kept tokens):
    yielded first, then generation continues after them. `on_prefill(generation, kind)`: a generation's first token
    is out (its prompt is in the KV cache).
    """

    def __init__(
        self, engine: Engine, tokenizer: Tokenizer, vocab_size: int, prompt: Sequence[int], params: SamplingParams,
        tools: Sequence[Tool], choice: str = "auto", *, prefix: Sequence[Step] = (),
        cancel: threading.Event | None = None, on_prefill: Callable[[Generation, GenerationKind], None] | None = None,
    ):  # fmt: skip
        self.engine, self.tokenizer, self.vocab_size = engine, tokenizer, vocab_size
        self.prompt, self.params, self.tools, self.choice = list(prompt), params, list(tools), choice
        self.prefix, self.on_prefill = tuple(prefix), on_prefill
        self.cancel_event = cancel if cancel is not None else threading.Event()
        self.round = Round(prompt_tokens=len(self.prompt), completion_tokens=len(self.prefix))
        self.tail = ""
        """Free text the answer held back until its generation ended (a stop string's prefix, "<tool"): shown
        after the last step."""
        self.decoded: DecodedCall | None = None
        """The call as written (complete, cut or cancelled); None when the round made none."""
        self.calling = False
        """The steps now yielded are the call's (under the mask): they carry no text."""
        self._steps: Iterator[Step] | None = None

    @property
    def forced(self) -> bool:
        return self.choice not in ("auto", "none")

    def __iter__(self) -> Iterator[Step]:
        self._steps = self._run()
        return self._steps

    def close(self) -> None:
        """Stop here (the caller stops reading): the running generation ends and is counted."""
        if self._steps is not None:
            close = getattr(self._steps, "close", None)
            if close is not None:
                close()

    def cancel(self) -> None:
        """Stop from any thread (before the next step, also while waiting for a slot)."""
        self.cancel_event.set()

    def _run(self) -> Iterator[Step]:
        if not self.forced:
            called = yield from self._free()
            if not called:
                return
        yield from self._call()

    def _free(self) -> Generator[Step, None, bool]:
        """Free text; True when the model opened a call (decoded next, under the mask)."""
        result, answer = self.round, AnswerText(tools=bool(self.tools) and self.choice != "none")
        for step in self.prefix:
            result.text += (shown := answer.shown(step.text, generated=False))
            yield dataclasses.replace(step, text=shown)
        if self.prefix and self.prefix[-1].token_id in self.tokenizer.stop_ids:  # a fork that chose to end there
            return False
        room = dataclasses.replace(self.params, max_tokens=max(self.params.max_tokens - len(self.prefix), 1))
        generation = self._submit([*self.prompt, *(s.token_id for s in self.prefix)], room)
        stepped = False
        try:
            for step in generation:
                if step.index == 0:
                    self._prefilled(generation, "answer")
                stepped = True
                result.text += (shown := answer.shown(step.text))
                yield dataclasses.replace(step, text=shown)
                if answer.called:
                    break
        finally:
            _close(generation)
            if not stepped and generation.usage.prompt_tokens:  # the first token was a stop token: a prefill
                self._prefilled(generation, "answer")
            self._count(generation)
        if answer.called:
            return True
        self.tail = answer.tail(generation.text)
        result.text += self.tail
        result.finish_reason = generation.finish_reason or "stop"
        return False

    def _call(self) -> Iterator[Step]:
        """The call under the mask, within what max_tokens leaves after the answer's text (`decode.call_room`)."""
        result, started = self.round, time.perf_counter()
        only = self.choice if self.forced and self.choice != "required" else None
        ids = self.prompt if self.forced else call_prompt(self.prompt, result.text, self.tokenizer)
        decoder = CallDecoder(
            self.tokenizer, self.tools, only=only, include_open=self.forced, vocab_size=self.vocab_size,
            room=call_room(self.params.max_tokens, result.completion_tokens), seed=self.params.seed,
        )  # fmt: skip
        # the fixed beginning (`<tool_call>\n{"name": …`) is prefilled as the tokenizer spells it; a call with
        # nothing to choose, or no room left, has nothing to decode
        finish = "cancelled" if self.cancel_event.is_set() else None
        if finish is None and decoder.params is not None:
            self.calling = True
            generation = self._submit([*ids, *decoder.fixed], decoder.params, decoder.constraint)
            try:
                for step in generation:
                    if step.index == 0:
                        self._prefilled(generation, "tool_call")
                    yield dataclasses.replace(step, text="")
            finally:
                _close(generation)
                self._count(generation, counted=False)
                result.call_compile_ms = generation.usage.decode_compile_ms
            finish = generation.finish_reason
        self._called(decoder.finish(finish), (time.perf_counter() - started) * 1000)

    def _called(self, call: DecodedCall, ms: float) -> None:
        """Put the written call into the round: one to run, one max_tokens cut, or none (cancelled)."""
        result, self.decoded = self.round, call
        # every token of the call is the model's output, whether prefilled (fixed), sampled under the mask, or a
        # fixed run that ended it (taken at once, no step): as OpenAI counts a call's tokens in completion_tokens
        result.completion_tokens += call.tokens
        if call.status == "cancelled":
            result.finish_reason = "cancelled"
            return
        result.call_ms, result.call_tokens, result.call_forced = ms, call.tokens, call.forced
        result.call_arguments, result.call_guard = call.arguments_text, call.guard
        if call.status != "cut":
            result.call, result.call_error, result.finish_reason = (call.name, call.arguments), call.error, "tool_calls"
            return
        # (a call cut before its name is whole is no call: the round just ends at max_tokens)
        result.cut_name, result.finish_reason = call.name, "length"

    def _submit(self, ids: list[int], params: SamplingParams, constraint: Any = None) -> Generation:
        return self.engine.submit(ids, params, constraint, self.cancel_event)

    def _prefilled(self, generation: Generation, kind: GenerationKind) -> None:
        usage, result = generation.usage, self.round
        if kind == "tool_call" and not self.forced:  # the call opened mid-answer: the round's second prefill
            result.call_prefill_ms += usage.prefill_ms
            result.call_prefill_compile_ms += usage.compile_ms
        else:  # the round's prompt: its reuse is the round's
            result.reused_tokens = min(usage.reused_tokens, result.prompt_tokens)
            result.prefill_ms += usage.prefill_ms
            result.prefill_compile_ms += usage.compile_ms
        if self.on_prefill is not None:
            self.on_prefill(generation, kind)

    def _count(self, generation: Generation, counted: bool = True) -> None:
        """Add a generation's time to the round; its tokens too unless the call counts them (`counted`)."""
        usage = generation.usage
        self.round.completion_tokens += usage.completion_tokens if counted else 0
        self.round.decode_steps += usage.decode_steps
        self.round.decode_ms += usage.decode_ms
        self.round.decode_compile_ms += usage.decode_compile_ms


def _close(generation: Generation) -> None:
    iterator: Iterator[Step] = iter(generation)
    close = getattr(iterator, "close", None)
    if close is not None:
        close()
