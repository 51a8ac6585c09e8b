"""One turn of the Send pipeline, start to end, as a stream of events (see DESIGN.md, "The flow of one turn"),
whoever answers it.

safety.input → memory.recall → the answerer's rounds (context, tokens, generation → tool call → run → resume)
→ safety.model / output → memory.write → Completed | Cancelled | Failed. The rounds are the `Answerer`'s
(`answerer.py`: the local engine or a server); everything else is here, once: the request's envelope, the input
scan, memory recall and writes, vetting and running a tool call, the checks of the finished answer, the terminal
event and its totals. (The session's title is written beside the answer by the answerer's `Titler`: the answer
never waits for it.)

`Turn.run` is called on the chat's worker thread; it hands each event to `emit` (which stamps and queues it) and
never raises: any failure becomes a `Failed` event, an interrupt a `Cancelled` one.

A turn's system prompt is `Turn.system`: the request's or the chat's, and on a care turn (the input decision
names S11 and lets the text go on: `safety.care`) the supportive instruction after it, so a local and a remote turn
both send it and the context view shows it.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, get_args

from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.events import (
    Cancelled,
    Completed,
    Event,
    Failed,
    FinishReason,
    MemoryRecalled,
    MemoryWritten,
    SafetyDecision,
    Timings,
    ToolCall,
    ToolResult,
    TurnStarted,
)
from jupyter_chatflow.store.memory import MemoryCommand, parse_command

from .answerer import TurnSetup
from .request import ChatRequest
from .safety import SafetyPolicy, care
from .stream import Stage
from .tools import Tool, ToolOutcome

if TYPE_CHECKING:
    from .answerer import Answerer


class Turn:
    """The stages of one turn; `run()` drives them in order and ends with exactly one terminal event."""

    def __init__(self, answerer: Answerer, setup: TurnSetup, request: ChatRequest, emit: Callable[[Event], None],
                 cancel: threading.Event):  # fmt: skip
        self.setup, self.request, self.emit, self.cancel = setup, request, emit, cancel
        self.started = time.perf_counter()
        self.stages: dict[str, float] = {}  # milliseconds per `Stage`
        self.reply: str | None = None  # the answer shown instead of the streamed one (a safety layer's message)
        self.policy = answerer.bound(turn_policy(setup.policy, request.features.safety))
        self.input_decisions: list[SafetyDecision] = []  # the input layer's, once `scan_input` has run
        self.gate = self.policy.output_gate() if self._scans_output else None
        self.rounds = answerer.rounds(self)
        self.streamer = self.rounds.streamer

    @property
    def system(self) -> str:
        """This turn's system prompt: the request's or the chat's, and the supportive instruction on a care turn."""
        return care.system_prompt(self.request.system or self.setup.system, self.input_decisions)

    @property
    def _scans_output(self) -> bool:
        return self.request.features.safety == "all"

    def run(self) -> None:
        """Run every stage; end with exactly one terminal event."""
        try:
            self.publish(TurnStarted(
                request_id=self.request.request_id, session_id=self.setup.session_id, user=self.request.text,
                created=time.time(), fork_of=self.request.fork_of, fork_index=self.request.fork_index,
                queued_ms=self.setup.queued_ms, **self.request.envelope(),
            ))  # fmt: skip
            if self.setup.intervened is not None:
                self.publish(self.setup.intervened)
            self._pipeline()
        except KeyboardInterrupt:
            self.cancel.set()
            self._end_cancelled()
        except ChatflowError as error:
            self.publish(Failed(error=type(error).__name__, message=str(error), text=self.answer))
        except Exception as error:  # a bug: still a clean end, with the type named
            self.publish(Failed(error=type(error).__name__, message=f"{type(error).__name__}: {error}",
                              text=self.answer))  # fmt: skip

    def _pipeline(self) -> None:
        text = self.scan_input()
        if text is None:
            return
        command = parse_command(text) if self._memory_on else None  # the redacted text: no PII goes into memory
        snippets = self.recall(text)
        finish = self.rounds.answer(text, snippets)
        if self.cancel.is_set():
            return self._end_cancelled()
        if self.streamer.blocked is not None:  # the output layer stopped the answer: show its message instead
            self.reply = self.streamer.blocked.replacement or "[blocked by the output safety layer]"
        if finish != "content_filter":
            self._check_answer()
            self._write_memory(command)
        self._complete(finish)

    @property
    def answer(self) -> str:
        """The answer as the views show it: what the streamer released, unless a safety layer replaced it."""
        return self.streamer.shown if self.reply is None else self.reply

    @property
    def _memory_on(self) -> bool:
        return self.request.features.memory and self.setup.memory is not None

    # ---- stages ------------------------------------------------------------------------------------------------

    def scan_input(self) -> str | None:
        """The input layer; the text the model may see, or None when blocked (the turn then ends)."""
        if self.request.features.safety == "off":
            return self.request.text
        started = time.perf_counter()
        decisions, text = self.policy.scan_input(self.request.text)
        self.input_decisions = decisions
        self.timed("safety_input", started)
        for decision in decisions:
            self.publish(decision)
        if text is None:
            blocked = next((d for d in decisions if d.action == "block"), None)
            reply = blocked.replacement if blocked is not None else "This request was blocked by the input scan."
            self.reply = reply
            self._complete("content_filter")
        return text

    def recall(self, text: str) -> list:
        if not self._memory_on:
            return []
        started = time.perf_counter()
        assert self.setup.memory is not None
        snippets = self.setup.memory.recall(text, limit=3)
        elapsed = self.timed("memory", started)
        self.publish(MemoryRecalled(query=text, snippets=tuple(snippets), latency_ms=elapsed))
        return snippets

    def run_tool(self, call: ToolCall, tools: Sequence[Tool], error: str = "") -> ToolOutcome:
        """Emit the call; vet its arguments, run it (or report `error`, why it could not be read), vet its result;
        the outcome that goes back to the model."""
        self.publish(call)
        name, arguments = call.name, call.arguments
        verdict = self.policy.scan_tool_arguments(name, arguments) if self._scans_output else None
        if verdict is not None:
            self.publish(verdict)
        if error:
            outcome = ToolOutcome(output="", error=error, latency_ms=0.0)
        else:
            outcome = _run(tools, name, arguments, blocked=verdict is not None and verdict.action == "block")
        self.publish(ToolResult(call_id=call.call_id, name=name, output=outcome.output, error=outcome.error,
                              latency_ms=outcome.latency_ms))  # fmt: skip
        if self._scans_output and outcome.output:
            decision, safe = self.policy.scan_tool_result(name, outcome.output)
            self.publish(decision)
            outcome = dataclasses.replace(outcome, output=safe)
        return outcome

    def _check_answer(self) -> None:
        if self.request.features.safety == "off":
            return
        self.streamer.finish()
        if self._scans_output:
            self.publish(self.policy.check_answer(self.answer))
        summary = self.streamer.summary()
        if summary is not None:
            self.publish(summary)

    def _write_memory(self, command: MemoryCommand | None) -> None:
        if command is None or self.setup.memory is None:
            return
        started = time.perf_counter()
        memory = self.setup.memory
        if command.kind == "remember":
            ids = [memory.remember(command.text, session_id=self.setup.session_id)]
        else:
            ids = memory.forget(command.text)
        self.timed("memory_write", started)
        self.publish(MemoryWritten(operation=command.kind, text=command.text, memory_ids=tuple(ids)))

    # ---- endings -----------------------------------------------------------------------------------------------

    def _timings(self) -> Timings:
        """The stages the turn timed itself and the time to its end, counted from Send (the queue too). The time to
        the first token, prefill, decode and tokens/s are the account's, from the events (`account.settled`)."""
        return Timings(**self.stages, total_ms=(time.perf_counter() - self.started) * 1000 + self.setup.queued_ms)

    def _complete(self, finish: str) -> None:
        self.publish(Completed(finish_reason=_finish_reason(finish), text=self.answer, usage=self.rounds.usage(),
                               timings=self._timings()))  # fmt: skip

    def _end_cancelled(self) -> None:
        self.streamer.finish()
        self.publish(Cancelled(text=self.answer, usage=self.rounds.usage(), timings=self._timings()))

    # ---- what the answerer's rounds use (`answerer.TurnSide`) ---------------------------------------------

    def publish(self, event: Event) -> None:
        """Hand `event` on."""
        self.emit(event)

    def timed(self, stage: Stage, started: float) -> float:
        """Add the time since `started` to `stage`; the milliseconds."""
        elapsed = (time.perf_counter() - started) * 1000
        self.stages[stage] = self.stages.get(stage, 0.0) + elapsed
        return elapsed


def turn_policy(configured: SafetyPolicy | None, mode: str) -> SafetyPolicy:
    """The safety policy of one turn: the request picks the layers (mode); a configured policy, the guards."""
    return dataclasses.replace(configured, mode=mode) if configured else SafetyPolicy(mode=mode)


def round_choice(tool_choice: str, round_index: int, max_rounds: int) -> str:
    """The tool choice of a round. The first round follows the request. After a forced call (required, a name) the
    model answers from the result, the tools no longer listed (shown them again, SmolLM2-135M reviews its call as
    code); after a call it chose itself it may call again, but the last round must answer."""
    if round_index == 0:
        return tool_choice
    return "auto" if tool_choice == "auto" and round_index < max_rounds else "none"  # after a forced call: answer


def _run(tools: Sequence[Tool], name: str, arguments: dict[str, Any], *, blocked: bool) -> ToolOutcome:
    tool = next((t for t in tools if t.name == name), None)
    if blocked:
        return ToolOutcome(output="", error="the tool safety layer blocked these arguments", latency_ms=0.0)
    if tool is None:
        return ToolOutcome(output="", error=f"no tool named {name!r}", latency_ms=0.0)
    return tool.run(arguments)


FINISH_REASONS: tuple[FinishReason, ...] = get_args(FinishReason)


def _finish_reason(finish: str) -> FinishReason:
    """`finish` as a completed turn reports it (a round's "cancelled" ends the turn as Cancelled, not here)."""
    for known in FINISH_REASONS:
        if finish == known:
            return known
    raise AssertionError(f"A completed turn's finish reason must be one of {FINISH_REASONS}, got {finish!r}.")
