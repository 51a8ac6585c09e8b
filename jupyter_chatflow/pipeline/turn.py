"""One turn of the Send pipeline, start to end, as a stream of events (see DESIGN.md, "The flow of one turn").

safety.input → memory.recall → context.assemble → tokenize → prefill/decode (→ tool call → run → resume)
→ safety.model / output → memory.write → Completed | Cancelled | Failed. (The session's title is written after
the terminal event, by `Chat`: the answer never waits for it; see `title.py`.)

`run_turn` is called on the engine's worker thread; it hands each event to `emit` (which stamps and queues
it) and never raises: any failure becomes a `Failed` event, an interrupt a `Cancelled` one.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, get_args

from jupyter_chatflow.engine.generation import Engine, Step
from jupyter_chatflow.engine.model import Model
from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.events import (
    Cancelled,
    Completed,
    Event,
    Failed,
    FinishReason,
    MemoryRecalled,
    MemoryWritten,
    TokenDelta,
    ToolCall,
    ToolResult,
    TurnStarted,
)
from jupyter_chatflow.store.memory import Memory, MemoryCommand, parse_command

from .context import Inputs, assemble
from .request import ChatRequest
from .safety import SafetyPolicy
from .stream import Round, Stage, Streamer, Totals, account
from .tools import Tool, ToolOutcome, call_message, result_message, tool_role, tools_system_prompt

DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face."
SUMMARY_TOKENS = 96


@dataclasses.dataclass(kw_only=True)
class TurnSetup:
    """What a turn needs besides the request: the model, the stores, the session's state."""

    model: Model
    session_id: str
    system: str = DEFAULT_SYSTEM
    history: Sequence[Sequence[dict[str, str]]] = ()
    memory: Memory | None = None
    tools: Sequence[Tool] = ()
    needs_title: bool = False
    """The session has no title yet: `Chat` writes one after this turn's answer."""
    policy: SafetyPolicy | None = None
    prefix: Sequence[Step] = ()
    """Tokens the answer starts with (a fork: the forked answer up to a token, then the chosen alternative)."""
    window: int | None = None
    """The context window the prompt and the answer must fit in; None: the model's."""
    queued_ms: float = 0.0
    """How long the request waited for the engine thread."""
    engine: Engine | None = None
    """What runs the generations (the chat's `Scheduler`); None: the model alone, on the turn's thread."""


class Turn:
    """The stages of one turn; `run()` drives them in order."""

    def __init__(self, setup: TurnSetup, request: ChatRequest, emit: Callable[[Event], None], cancel: threading.Event):
        self.setup, self.request, self.emit, self.cancel = setup, request, emit, cancel
        self.started = time.perf_counter()
        self.rounds: list[Round] = []  # what each request to the model produced: the turn's usage is summed from them
        self.stages: dict[str, float] = {}  # milliseconds per `Stage`
        self.reply: str | None = None  # the answer shown instead of the streamed one (a safety layer's message)
        self.policy = turn_policy(setup.policy, request.features.safety)
        gate = self.policy.output_gate() if self._scans_output else None
        self.streamer = Streamer(setup.model, self._emit, cancel, gate, setup.engine)
        self.prefix = tuple(setup.prefix)
        self.kept = len(self.prefix)  # a fork's answer starts with these tokens: its first new one comes after
        self.first_token_ms: float | None = None

    @property
    def _scans_output(self) -> bool:
        return self.request.features.safety == "all"

    def run(self) -> None:
        """Run every stage; end with exactly one terminal event."""
        try:
            self._emit(TurnStarted(
                request_id=self.request.request_id, session_id=self.setup.session_id, user=self.request.text,
                created=time.time(), fork_of=self.request.fork_of, fork_index=self.request.fork_index,
                queued_ms=self.setup.queued_ms, **self.request.envelope(),
            ))  # fmt: skip
            self._pipeline()
        except KeyboardInterrupt:
            self.cancel.set()
            self._end_cancelled()
        except ChatflowError as error:
            self._emit(Failed(error=type(error).__name__, message=str(error), text=self.answer))
        except Exception as error:  # a bug: still a clean end, with the type named
            self._emit(Failed(error=type(error).__name__, message=f"{type(error).__name__}: {error}",
                              text=self.answer))  # fmt: skip

    def prompt_ids(self) -> list[int]:
        """The first round's prompt, built by the same stages as `run` without generating (to prewarm a draft);
        [] when the input layer blocks the text."""
        text = self._scan_input()
        if text is None:
            return []
        choice, offered = self._round_tools(0)
        return self._context(text, self._recall(text), offered, choice, [])

    def _pipeline(self) -> None:
        text = self._scan_input()
        if text is None:
            return
        command = parse_command(text) if self._memory_on else None  # the redacted text: no PII goes into memory
        snippets = self._recall(text)
        finish = self._answer(text, snippets)
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

    def _scan_input(self) -> str | None:
        """The input layer; the text the model may see, or None when blocked (the turn then ends)."""
        if self.request.features.safety == "off":
            return self.request.text
        started = time.perf_counter()
        decisions, text = self.policy.scan_input(self.request.text)
        self._time("safety_input", started)
        for decision in decisions:
            self._emit(decision)
        if text is None:
            blocked = next((d for d in decisions if d.action == "block"), None)
            reply = blocked.replacement if blocked is not None else "This request was blocked by the input scan."
            self.reply = reply
            self._complete("content_filter")
        return text

    def _recall(self, text: str) -> list:
        if not self._memory_on:
            return []
        started = time.perf_counter()
        assert self.setup.memory is not None
        snippets = self.setup.memory.recall(text, limit=3)
        elapsed = self._time("memory", started)
        self._emit(MemoryRecalled(query=text, snippets=tuple(snippets), latency_ms=elapsed))
        return snippets

    def _answer(self, text: str, snippets: list) -> str:
        """Generate, running tools the model calls, until it answers (or the round bound is reached)."""
        pending = list[dict[str, str]]()
        for round_index in range(self.request.features.max_tool_rounds + 1):
            choice, offered = self._round_tools(round_index)
            ids = self._context(text, snippets, offered, choice, pending)
            result = self._generate(ids, offered, choice, results=bool(pending))
            if result.call is None:
                return result.finish_reason
            pending += self._run_tool(result, offered)
            if self.cancel.is_set():
                return "cancelled"
        return "tool_calls_exhausted"

    def _round_tools(self, round_index: int) -> tuple[str, list[Tool]]:
        """A round's tool choice and the tools offered in it (resolved from features.tools by the caller)."""
        features = self.request.features
        choice = _choice(features.tool_choice, round_index, features.max_tool_rounds)
        return choice, list(self.setup.tools) if choice != "none" else []

    def _context(self, text: str, snippets: list, tools: list[Tool], choice: str, pending: list) -> list[int]:
        started = time.perf_counter()
        model = self.setup.model
        tools_text = tools_system_prompt(tools, tool_choice=choice, results=bool(pending))
        inputs = Inputs(system=self.request.system or self.setup.system, user=text, memory=snippets,
                        tools=tools_text, history=self.setup.history, pending=pending)  # fmt: skip
        summarize = self._summarize if self.request.features.trim == "summarize" else None
        assembled = assemble(model.tokenizer, inputs, window=self.setup.window or model.config.context_length,
                             reserved_output=self.request.params.max_tokens, summarize=summarize)  # fmt: skip
        self._time("context", started)
        self._emit(assembled.context)
        self._emit(assembled.tokenized)
        return assembled.ids

    def _generate(self, ids: list[int], tools: list[Tool], choice: str, *, results: bool = False) -> Round:
        params = self.request.params
        if results:  # the penalty counts the prompt's tokens, and an answer from a tool's result repeats them
            params = dataclasses.replace(params, repetition_penalty=1.0)
        if choice in ("auto", "none"):
            prefix, self.prefix = self.prefix, ()  # only the first round's answer starts with it
            result = self.streamer.free(ids, params, tools, prefix)
        else:
            result = self.streamer.forced(ids, params, tools, None if choice == "required" else choice)
        self.rounds.append(result)
        return result

    def _run_tool(self, result: Round, tools: list[Tool]) -> list[dict[str, str]]:
        """Vet, run and vet again one call; the messages that carry it back into the context."""
        assert result.call is not None
        name, arguments = result.call
        call_id = f"call_{uuid.uuid4().hex[:12]}"
        started = time.perf_counter()
        self._emit(ToolCall(call_id=call_id, name=name, arguments=arguments, constrained=True, decode_ms=result.call_ms,
                            tokens=result.call_tokens, forced_tokens=result.call_forced))  # fmt: skip
        verdict = self.policy.scan_tool_arguments(name, arguments) if self._scans_output else None
        if verdict is not None:
            self._emit(verdict)
        if result.call_error:
            outcome = ToolOutcome(output="", error=f"the call could not be read: {result.call_error}", latency_ms=0.0)
        else:
            outcome = _run(tools, name, arguments, blocked=verdict is not None and verdict.action == "block")
        self._emit(ToolResult(call_id=call_id, name=name, output=outcome.output, error=outcome.error,
                              latency_ms=outcome.latency_ms))  # fmt: skip
        if self._scans_output and outcome.output:
            decision, safe = self.policy.scan_tool_result(name, outcome.output)
            self._emit(decision)
            outcome = dataclasses.replace(outcome, output=safe)
        self._time("tools", started)
        call = call_message(name, arguments)
        call["content"] = result.text + call["content"]  # what the model wrote before the call stays in context
        return [call, result_message(name, outcome, role=tool_role(self.setup.model.tokenizer))]

    def _check_answer(self) -> None:
        if self.request.features.safety == "off":
            return
        self.streamer.finish()
        if self._scans_output:
            self._emit(self.policy.check_answer(self.answer))
        summary = self.streamer.summary()
        if summary is not None:
            self._emit(summary)

    def _write_memory(self, command: MemoryCommand | None) -> None:
        if command is None or self.setup.memory is None:
            return
        started = time.perf_counter()
        memory = self.setup.memory
        if command.kind == "remember":
            ids = [memory.remember(command.text, session_id=self.setup.session_id)]
        else:
            ids = memory.forget(command.text)
        self._time("memory_write", started)
        self._emit(MemoryWritten(operation=command.kind, text=command.text, memory_ids=tuple(ids)))

    # ---- endings -----------------------------------------------------------------------------------------------

    def _complete(self, finish: str) -> None:
        totals = self._totals()
        self._emit(Completed(finish_reason=_finish_reason(finish), text=self.answer, usage=totals.usage,
                             timings=totals.timings, tokens_per_s=totals.tokens_per_s))  # fmt: skip

    def _end_cancelled(self) -> None:
        self.streamer.finish()
        totals = self._totals()
        self._emit(Cancelled(text=self.answer, usage=totals.usage, timings=totals.timings))

    def _totals(self) -> Totals:
        """Usage and timings, once, at the end; the times count from Send (what the user waited: the queue too)."""
        queued = self.setup.queued_ms
        ttft = None if self.first_token_ms is None else queued + self.first_token_ms
        total = (time.perf_counter() - self.started) * 1000 + queued
        return account(self.rounds, self.stages, ttft_ms=ttft, total_ms=total)

    # ---- helpers -----------------------------------------------------------------------------------------------

    def _emit(self, event: Event) -> None:
        if self.first_token_ms is None and isinstance(event, TokenDelta) and event.index >= self.kept:
            # the first token the user sees (in a fork, the first one generated after the kept ones)
            self.first_token_ms = (time.perf_counter() - self.started) * 1000
        self.emit(event)

    def _time(self, stage: Stage, started: float) -> float:
        elapsed = (time.perf_counter() - started) * 1000
        self.stages[stage] = self.stages.get(stage, 0.0) + elapsed
        return elapsed

    def _summarize(self, messages: Sequence[dict[str, str]]) -> str:
        """A short summary of old turns by the model; a transcript too long for the window loses its oldest part."""
        model, answer = self.setup.model, SUMMARY_TOKENS
        tokenizer = model.tokenizer
        transcript = tokenizer.encode("\n".join(f"{m['role']}: {m['content']}" for m in messages))
        room = model.config.context_length - answer - len(tokenizer.apply_chat_template([_summary_request("")])) - 8
        text = tokenizer.decode(transcript[-room:]) if room > 0 else ""
        ids = tokenizer.apply_chat_template([_summary_request(text)])
        engine = self.setup.engine if self.setup.engine is not None else model
        summary = engine.submit(ids, SamplingParams(temperature=0.0, max_tokens=answer), cancel=self.cancel)
        return "".join(s.text for s in summary).strip()


def turn_policy(configured: SafetyPolicy | None, mode: str) -> SafetyPolicy:
    """The safety policy of one turn: the request picks the layers (mode); a configured policy, the guards."""
    return dataclasses.replace(configured, mode=mode) if configured else SafetyPolicy(mode=mode)


def _summary_request(transcript: str) -> dict[str, str]:
    return {"role": "user", "content": f"Summarize this conversation in two sentences:\n\n{transcript}"}


def _choice(tool_choice: str, round_index: int, max_rounds: int) -> str:
    """The first round follows the request. After a forced call (required, a name) the model answers from the
    result, the tools no longer listed (shown them again, SmolLM2-135M reviews its call as code); after a call
    it chose itself it may call again, but the last round must answer."""
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
