"""The local engine as a turn's answerer: context assembly, tokens and generation on this process's model.

`LocalAnswerer` holds the model, the scheduler its generations run on (a chat's, batched with its title and
prewarms) and the window; per turn, `LocalRounds` assembles each round's context (system prompt, memory, tools,
history, trimmed to the window), tokenizes it and drives the round (`stream.Streamer` over `rounds.RoundDriver`),
running the tools the model calls through the turn. It can do everything a front end may ask: prewarm a draft,
fork an answer, show attention, write the session's title beside the first answer (`title_task.TitleTask`).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Sequence

from jupyter_chatflow.engine.model import Model
from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.events import Event, TitleGenerated, Usage

from .answerer import Abilities, TurnSide
from .chat_model import shared_scheduler
from .context import Inputs, assemble
from .request import ChatRequest, RequestError
from .safety import SafetyPolicy
from .stream import Round, Streamer, usage_of
from .title import write_title
from .title_task import TitleTask
from .tools import Tool, call_message, result_message, tool_role, tools_system_prompt
from .tools.decode import forced_call_problem
from .turn import round_choice

__all__ = ["DEFAULT_SYSTEM", "LocalAnswerer", "LocalRounds", "default_system"]

DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face."


def default_system(chat_template: str) -> str:
    """The system prompt of a chat that sets none: SmolLM2's, the one its template writes into a conversation that
    has none (said here so that every view shows it), for a model whose template carries it; "" for any other, whose
    template then writes its own default (Qwen: "You are Qwen, created by Alibaba Cloud…") or none (Gemma has no
    system role): telling Gemma or Qwen it is SmolLM made them say so."""
    return DEFAULT_SYSTEM if DEFAULT_SYSTEM.rstrip(".") in chat_template else ""


class LocalAnswerer:
    """Turns answered by `model` on this machine; generations run on `scheduler` (the one every chat on the model
    shares, or one passed in: a server's), in `window` tokens (the model's, or fewer to see trimming early)."""

    def __init__(self, model: Model, scheduler: Scheduler | None = None, window: int | None = None):
        self._model, self._own = model, scheduler is None  # (a scheduler passed in stays with its model)
        self._scheduler = scheduler or shared_scheduler(model)
        self._asked = window
        self.window = _window(window, model.config.context_length)

    @property
    def abilities(self) -> Abilities:
        config = self._model.config
        return Abilities(where=config.name, server="", prewarm=True, fork=True, attention=True, title="model",
                         window=self.window, model_window=config.context_length)  # fmt: skip

    @property
    def model(self) -> Model:
        return self._model

    @property
    def scheduler(self) -> Scheduler:
        return self._scheduler

    @property
    def model_name(self) -> str:
        return self._model.config.name

    def default_system(self) -> str:
        return default_system(self._model.tokenizer.chat_template)

    def bound(self, policy: SafetyPolicy) -> SafetyPolicy:
        return policy.with_model(self._model)

    def check(self, request: ChatRequest, tools: Sequence[Tool]) -> None:
        model, choice = self._model, request.features.tool_choice
        problem = forced_call_problem(model.tokenizer, tools, choice=choice, max_tokens=request.params.max_tokens,
                                      vocab_size=model.config.vocab_size)  # fmt: skip
        if problem:
            raise RequestError(problem)

    def rounds(self, turn: TurnSide) -> LocalRounds:
        return LocalRounds(self, turn)

    def titler(self, policy: SafetyPolicy, needed: bool, emit: Callable[[TitleGenerated], None]) -> ModelTitle:
        write = lambda user, answer, cancel: write_title(self._model, user, answer, policy, cancel, self._scheduler)  # noqa: E731
        return ModelTitle(TitleTask(write, emit) if needed else None)

    def with_model(self, model: Model) -> LocalAnswerer:
        """This answerer on `model` (the old model's scheduler rests: it goes once nothing else holds it)."""
        if not self._own:
            raise ChatflowError("This chat's turns run on a scheduler passed in: make a new Chat(model=…) to use "
                                "another model.")  # fmt: skip
        window = model.config.context_length
        asked = None if self._asked is None else min(self._asked, window)
        if self._scheduler.model is not model:
            self._scheduler.rest()  # the old model goes once nothing else holds it (it held 1.3 GB 30 s longer)
        return LocalAnswerer(model, None, asked)

    def prewarm(self, turn: TurnSide) -> tuple[int, int]:
        """Put `turn`'s first prompt into the prompt cache: its stages up to the prompt ids (built as its run builds
        them, no events kept), then their prefill, a one-token generation; (prompt tokens, tokens computed)."""
        ids = LocalRounds(self, turn).prompt_ids()
        if not ids or turn.cancel.is_set():
            return len(ids), 0
        prefill = self._scheduler.submit(ids, SamplingParams(temperature=0.0, max_tokens=1), cancel=turn.cancel)
        list(prefill)
        return len(ids), 0 if prefill.finish_reason == "cancelled" else len(ids) - prefill.usage.reused_tokens


class ModelTitle:
    """The session's title written by the model beside the first answer (`TitleTask`), or nothing to write."""

    def __init__(self, task: TitleTask | None):
        self.task = task

    def see(self, event: Event) -> None:
        if self.task is not None:
            self.task.see(event)

    def finish(self, log: list[Event]) -> None:
        if self.task is not None and log:
            self.task.finish(log[-1])


class LocalRounds:
    """The model's part of one local turn: each round's context, tokens and generation."""

    def __init__(self, answerer: LocalAnswerer, turn: TurnSide):
        self.answerer, self.turn = answerer, turn
        self.model = answerer.model
        self.streamer = Streamer(self.model, turn.publish, turn.cancel, turn.gate, answerer.scheduler)
        self.rounds: list[Round] = []  # what each request to the model produced: the turn's usage is summed from them
        self.prefix = tuple(turn.setup.prefix)

    def prompt_ids(self) -> list[int]:
        """The first round's prompt, built by the same stages as `answer` without generating; [] when the input
        layer blocks the text."""
        turn = self.turn
        text = turn.scan_input()
        if text is None:
            return []
        choice, offered = self._round_tools(0)
        return self._context(text, turn.recall(text), offered, choice, [])

    def answer(self, text: str, snippets: list) -> str:
        """Generate, running tools the model calls, until it answers (or the round bound is reached)."""
        pending = list[dict[str, str]]()
        for round_index in range(self.turn.request.features.max_tool_rounds + 1):
            choice, offered = self._round_tools(round_index)
            ids = self._context(text, snippets, offered, choice, pending)
            result = self._generate(ids, offered, choice, results=bool(pending))
            if result.call is None:
                return result.finish_reason
            pending += self._run_tool(result, offered)
            if self.turn.cancel.is_set():
                return "cancelled"
        return "tool_calls_exhausted"

    def usage(self) -> Usage:
        return usage_of(self.rounds)

    def _round_tools(self, round_index: int) -> tuple[str, list[Tool]]:
        """A round's tool choice and the tools offered in it (resolved from features.tools by the caller)."""
        features = self.turn.request.features
        choice = round_choice(features.tool_choice, round_index, features.max_tool_rounds)
        return choice, list(self.turn.setup.tools) if choice != "none" else []

    def _context(self, text: str, snippets: list, tools: list[Tool], choice: str, pending: list) -> list[int]:
        started, turn, model = time.perf_counter(), self.turn, self.model
        tools_text = tools_system_prompt(tools, tool_choice=choice, results=bool(pending))
        inputs = Inputs(system=turn.system, user=text, memory=snippets,
                        tools=tools_text, history=turn.setup.history, pending=pending)  # fmt: skip
        summarize = self._summarize if turn.request.features.trim == "summarize" else None
        assembled = assemble(model.tokenizer, inputs, window=self.answerer.window,
                             reserved_output=turn.request.params.max_tokens, summarize=summarize)  # fmt: skip
        turn.timed("context", started)
        turn.publish(assembled.context)
        turn.publish(assembled.tokenized)
        return assembled.ids

    def _generate(self, ids: list[int], tools: list[Tool], choice: str, *, results: bool = False) -> Round:
        params = self.turn.request.params
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
        started = time.perf_counter()
        call = result.tool_call(f"call_{uuid.uuid4().hex[:12]}")  # (with the arguments as written and its guard)
        error = f"the call could not be read: {result.call_error}" if result.call_error else ""
        outcome = self.turn.run_tool(call, tools, error)
        self.turn.timed("tools", started)
        message = call_message(name, arguments)
        message["content"] = result.text + message["content"]  # what the model wrote before the call stays in context
        return [message, result_message(name, outcome, role=tool_role(self.model.tokenizer))]

    def _summarize(self, messages: Sequence[dict[str, str]]) -> str:
        """A short summary of old turns by the model; a transcript too long for the window loses its oldest part."""
        model, answer = self.model, SUMMARY_TOKENS
        tokenizer = model.tokenizer
        transcript = tokenizer.encode("\n".join(f"{m['role']}: {m['content']}" for m in messages))
        room = model.config.context_length - answer - len(tokenizer.apply_chat_template([_summary_request("")])) - 8
        text = tokenizer.decode(transcript[-room:]) if room > 0 else ""
        ids = tokenizer.apply_chat_template([_summary_request(text)])
        params = SamplingParams(temperature=0.0, max_tokens=answer)
        summary = self.answerer.scheduler.submit(ids, params, cancel=self.turn.cancel)
        return "".join(s.text for s in summary).strip()


SUMMARY_TOKENS = 96


def _summary_request(transcript: str) -> dict[str, str]:
    return {"role": "user", "content": f"Summarize this conversation in two sentences:\n\n{transcript}"}


def _window(asked: int | None, model_window: int) -> int:
    if asked is None:
        return model_window
    if isinstance(asked, bool) or not isinstance(asked, int) or not 16 <= asked <= model_window:
        raise RequestError(f"context_window must be a whole number from 16 to the model's window ({model_window}), "
                           f"got {asked!r}")  # fmt: skip
    return asked
