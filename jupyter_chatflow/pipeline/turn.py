"""One turn of the Send pipeline on the local model, start to end, as a stream of events (see DESIGN.md, "The flow
of one turn").

safety.input → memory.recall → context.assemble → tokenize → prefill/decode (→ tool call → run → resume)
→ safety.model / output → memory.write → Completed | Cancelled | Failed. (The session's title is written beside
the answer, by `Chat`'s `TitleTask`: the answer never waits for it; see `title_task.py`.) The stages that need
no model are `stages.TurnStages`' (a remote turn shares them); this module adds the model's: context, tokens,
generation.

`Turn.run` is called on the engine's worker thread; it hands each event to `emit` (which stamps and queues
it) and never raises: any failure becomes a `Failed` event, an interrupt a `Cancelled` one.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Sequence

from jupyter_chatflow.engine.generation import Engine, Step
from jupyter_chatflow.engine.model import Model
from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.events import Event
from jupyter_chatflow.store.memory import Memory

from .context import Inputs, assemble
from .request import ChatRequest
from .safety import SafetyPolicy
from .stages import TurnStages, round_choice, turn_policy
from .stream import Round, Streamer, Totals, account
from .tools import Tool, call_message, result_message, tool_role, tools_system_prompt

__all__ = ["DEFAULT_SYSTEM", "Turn", "TurnSetup", "default_system", "turn_policy"]

DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face."


def default_system(chat_template: str) -> str:
    """The system prompt of a chat that sets none: SmolLM2's, the one its template writes into a conversation that
    has none (said here so that every view shows it), for a model whose template carries it; "" for any other, whose
    template then writes its own default (Qwen: "You are Qwen, created by Alibaba Cloud…") or none (Gemma has no
    system role): telling Gemma or Qwen it is SmolLM made them say so."""
    return DEFAULT_SYSTEM if DEFAULT_SYSTEM.rstrip(".") in chat_template else ""


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
    """The session has no title yet: `Chat` writes one beside this turn's answer."""
    policy: SafetyPolicy | None = None
    prefix: Sequence[Step] = ()
    """Tokens the answer starts with (a fork: the forked answer up to a token, then the chosen alternative)."""
    window: int | None = None
    """The context window the prompt and the answer must fit in; None: the model's."""
    queued_ms: float = 0.0
    """How long the request waited for the engine thread."""
    engine: Engine | None = None
    """What runs the generations (the chat's `Scheduler`); None: the model alone, on the turn's thread."""


class Turn(TurnStages):
    """The stages of one turn on the local model; `run()` drives them in order."""

    streamer: Streamer

    def __init__(self, setup: TurnSetup, request: ChatRequest, emit: Callable[[Event], None], cancel: threading.Event):
        super().__init__(setup, request, emit, cancel)
        self.setup: TurnSetup = setup
        self.policy = self.policy.with_model(setup.model)  # (a chat's policy is bound to it already)
        self.rounds: list[Round] = []  # what each request to the model produced: the turn's usage is summed from them
        gate = self.policy.output_gate() if self._scans_output else None
        self.streamer = Streamer(setup.model, self._emit, cancel, gate, setup.engine)
        self.prefix = tuple(setup.prefix)
        self.kept = len(self.prefix)  # a fork's answer starts with these tokens: its first new one comes after

    def prompt_ids(self) -> list[int]:
        """The first round's prompt, built by the same stages as `run` without generating (to prewarm a draft);
        [] when the input layer blocks the text."""
        text = self._scan_input()
        if text is None:
            return []
        choice, offered = self._round_tools(0)
        return self._context(text, self._recall(text), offered, choice, [])

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
        choice = round_choice(features.tool_choice, round_index, features.max_tool_rounds)
        return choice, list(self.setup.tools) if choice != "none" else []

    def _context(self, text: str, snippets: list, tools: list[Tool], choice: str, pending: list) -> list[int]:
        started = time.perf_counter()
        model = self.setup.model
        tools_text = tools_system_prompt(tools, tool_choice=choice, results=bool(pending))
        inputs = Inputs(system=self.system, user=text, memory=snippets,
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
        if results:  # an answer from a tool's result repeats its digits and words: no penalty
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
        call = result.tool_call(call_id)  # (with the arguments as written and the string rule that ended one)
        error = f"the call could not be read: {result.call_error}" if result.call_error else ""
        outcome = self._vetted_run(call, tools, error)
        self._time("tools", started)
        message = call_message(name, arguments)
        message["content"] = result.text + message["content"]  # what the model wrote before the call stays in context
        return [message, result_message(name, outcome, role=tool_role(self.setup.model.tokenizer))]

    def _totals(self) -> Totals:
        """Usage and timings, once, at the end; the times count from Send (what the user waited: the queue too)."""
        queued = self.setup.queued_ms
        ttft = None if self.first_token_ms is None else queued + self.first_token_ms
        total = (time.perf_counter() - self.started) * 1000 + queued
        return account(self.rounds, self.stages, ttft_ms=ttft, total_ms=total)

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


def _summary_request(transcript: str) -> dict[str, str]:
    return {"role": "user", "content": f"Summarize this conversation in two sentences:\n\n{transcript}"}
