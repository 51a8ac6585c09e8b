"""A turn answered by an OpenAI-compatible server over HTTP (`ServerAnswerer`): `chatflow serve`, vLLM, SGLang,
llama.cpp's server.

>>> chat = cf.Chat(base_url="http://127.0.0.1:8000/v1", api_key="sk-…")   # no local model is loaded
>>> chat.send("What is the capital of France?").text()

The stages that need no model run here as in a local turn: the input safety scan, memory recall, the messages
(system prompt, memory, history, the user's message), the output scan of each streamed token, the tools the
server asks for (run here, their results sent back in a next request), memory writes. The model's part is one
`POST /v1/chat/completions` per round with `stream`, `stream_options.include_usage` and `logprobs`/`top_logprobs`
(5, the most our server and OpenAI give). Instead of `context_assembled`/`tokenized`/`prefill` (counted with a
tokenizer this side does not have) the turn records the wire (`http_request`, `http_response`, `sse_frame`) and
its tokens carry what the server sends: text, logprob and top alternatives, no token ids, no entropy.

The times are the client's, read by the turn's account from the events (`account.settled`): the wire's bars, the
first token as it arrived, tokens/s over the intervals between arrivals; no prefill or decode is timed here (the
server did both). Usage is the server's (its last chunk's `usage`; `prompt_tokens_details.cached_tokens` as reused
tokens where it sends them); a server that sends none in a stream (llama.cpp's Python server ignores
`stream_options`) leaves the prompt's tokens `None`, "not reported", and the completion's counted from the tokens
that arrived.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.events import (
    Completed,
    Event,
    HttpRequest,
    TitleGenerated,
    ToolCall,
    Usage,
)

from .answerer import Abilities, TurnSide
from .context import Inputs, plain_messages
from .release import Releaser
from .remote_server import RemoteServer
from .remote_tokens import merge_call, pieces, token_of
from .request import ChatRequest
from .safety import SafetyPolicy
from .safety.policy import REMOTE_NOTE
from .title import fallback_title, scanned_title
from .tools import Tool
from .turn import round_choice
from .wire import RemoteError, exchange

if TYPE_CHECKING:
    from jupyter_chatflow.engine.model import Model

TOP_LOGPROBS = 5


@dataclasses.dataclass
class ServerRound:
    """One request's answer, read from its chunks."""

    text: str = ""
    calls: dict[int, dict[str, str]] = dataclasses.field(default_factory=dict)
    finish_reason: str = "stop"
    usage: dict[str, Any] = dataclasses.field(default_factory=dict)
    tokens: int = 0
    finished: bool = False
    """A chunk gave a finish_reason, or `[DONE]` came (or the answer was one JSON body)."""

    @property
    def counted(self) -> bool:
        """Whether `tokens` (the logprob entries that came) counts every token generated: not for a tool call (a
        server sends its tokens without entries) nor for text that came with none (a server ignoring logprobs)."""
        return not self.calls and (self.tokens > 0 or not self.text)


class ServerAnswerer:
    """Turns answered by an OpenAI-compatible server (`server`): no local model is loaded. It cannot prewarm (the
    prompt cache is the server's), fork (the server sends no token ids), show attention (the weights are there), nor
    write a title with the model (that would be another request): the session's title is the user's first words."""

    def __init__(self, server: RemoteServer):
        self.server = server

    @property
    def abilities(self) -> Abilities:
        url = self.server.base_url
        return Abilities(where=url, server=url, prewarm=False, fork=False, attention=False, title="words", window=0,
                         model_window=0)  # fmt: skip

    @property
    def model(self) -> Model:
        raise ChatflowError(f"This chat's turns go to {self.server.base_url}: it has no local model (the remote "
                            "server does not provide one).")  # fmt: skip

    @property
    def scheduler(self) -> None:
        return None

    @property
    def model_name(self) -> str:
        return self.server.model or ""

    def default_system(self) -> str:
        return ""  # the server's template decides

    def bound(self, policy: SafetyPolicy) -> SafetyPolicy:
        return policy.without_model(REMOTE_NOTE)

    def check(self, request: ChatRequest, tools: Sequence[Tool]) -> None:
        """Nothing to check here: the server says itself what it cannot do (a 400 becomes the turn's error)."""

    def prewarm(self, turn: TurnSide) -> tuple[int, int]:
        raise ChatflowError(f"{self.server.base_url} keeps its own prompt cache: a remote chat cannot prewarm.")

    def rounds(self, turn: TurnSide) -> ServerRounds:
        return ServerRounds(self.server, turn)

    def titler(self, policy: SafetyPolicy, needed: bool, emit: Callable[[TitleGenerated], None]) -> WordsTitle:
        return WordsTitle(policy, needed, emit)

    def with_model(self, model: Model) -> ServerAnswerer:
        raise ChatflowError("This chat's turns go to a server, whose model is the server's: make a new "
                            "Chat(model=…) to use another model.")  # fmt: skip


class WordsTitle:
    """A remote session's title: after its first completed answer, the user's first words (`remote_title`)."""

    def __init__(self, policy: SafetyPolicy, needed: bool, emit: Callable[[TitleGenerated], None]):
        self.policy, self.needed, self.emit = policy, needed, emit

    def see(self, event: Event) -> None:
        """(Nothing is written while the answer streams.)"""

    def finish(self, log: list[Event]) -> None:
        last, user = (log[-1] if log else None), prompted_user_text(log)
        completed = isinstance(last, Completed) and last.finish_reason != "content_filter"
        if not self.needed or not completed or user is None:
            return
        if (event := remote_title(user, self.policy)) is not None:
            self.emit(event)


class ServerRounds:
    """The model's part of one remote turn: one request to the server per round, its answer read from the chunks."""

    def __init__(self, server: RemoteServer, turn: TurnSide):
        self.server, self.turn = server, turn
        self.streamer = Releaser(turn.publish, turn.gate)
        self.rounds: list[ServerRound] = []

    # ---- the server's part ------------------------------------------------------------------------------------

    def answer(self, text: str, snippets: list) -> str:
        """Rounds of requests until the server answers without a tool call (or the round bound is reached)."""
        turn = self.turn
        inputs = Inputs(system=turn.system, user=text, memory=snippets, history=turn.setup.history)
        messages = [m for m in plain_messages(inputs) if m["role"] != "system" or m["content"]]
        features = turn.request.features
        for index in range(features.max_tool_rounds + 1):
            choice = round_choice(features.tool_choice, index, features.max_tool_rounds)
            result = self._request(messages, choice, index)
            if turn.cancel.is_set() or self.streamer.blocked is not None:
                return "content_filter" if self.streamer.blocked is not None else "cancelled"
            if result.finish_reason == "abort":  # SGLang's, for an answer it gave up on
                raise RemoteError(f"The server aborted the answer after {result.tokens} tokens (finish_reason "
                                  "abort): it may be shutting down or out of memory; its log says why.")  # fmt: skip
            if not result.calls:
                return result.finish_reason if result.finish_reason in ("length", "content_filter") else "stop"
            if result.finish_reason == "length":  # max_tokens cut the call: shown as written, never run (as a
                self._cut_calls(result)  # local turn's: pipeline/tools/decode.py)
                return "length"
            messages += self._run_calls(result)
        return "tool_calls_exhausted"

    def _request(self, messages: list[dict[str, Any]], choice: str, index: int) -> ServerRound:
        server, result = self.server, ServerRound()
        self.rounds.append(result)
        body = self._body(messages, choice)
        url = f"{server.base_url}/chat/completions"
        cancel = self.turn.cancel
        for item in exchange(server.client, "POST", url, server.headers(), body, cancel, round=index):
            if isinstance(item, Event):
                self.turn.publish(item)
                arrival = getattr(item, "arrival_ms", None)
            elif isinstance(item, dict):
                self._chunk(result, item, arrival or 0.0)
            elif item == "[DONE]":
                result.finished = True
            if cancel.is_set() or self.streamer.blocked is not None:
                return result
        if not result.finished and not cancel.is_set():  # cancelled: the stream was ours to end
            raise RemoteError(_unfinished(url, result))
        return result

    def _body(self, messages: list[dict[str, Any]], choice: str) -> dict[str, Any]:
        server, params, tools = self.server, self.turn.request.params, self.turn.setup.tools
        if server.model is None:
            server.model = self._served_model()
        body: dict[str, Any] = {
            "model": server.model, "messages": messages, "stream": True, "stream_options": {"include_usage": True},
            "logprobs": True, "top_logprobs": TOP_LOGPROBS, "temperature": params.temperature, "top_p": params.top_p,
            "max_tokens": params.max_tokens,
        }  # fmt: skip
        penalty = params.repetition_penalty if params.repetition_penalty != 1.0 else None
        extras = {"seed": params.seed, "stop": list(params.stop) or None, "top_k": params.top_k or None,
                  "min_p": params.min_p or None, "ignore_eos": params.ignore_eos or None,
                  "repetition_penalty": penalty}  # fmt: skip
        body |= {k: v for k, v in extras.items() if v is not None}  # vLLM's knobs only when they change something
        if tools and choice != "none":
            body["tools"] = [{"type": "function", "function": t.spec()} for t in tools]
            named = {"type": "function", "function": {"name": choice}}
            body["tool_choice"] = choice if choice in ("auto", "required") else named
        return body

    def _served_model(self) -> str:
        """The first model `GET /v1/models` lists (its request is part of the turn's wire)."""
        server = self.server
        url = f"{server.base_url}/models"
        for item in exchange(server.client, "GET", url, server.headers(stream=False), None, self.turn.cancel):
            if isinstance(item, Event):
                self.turn.publish(item)
            elif isinstance(item, dict) and item.get("data"):
                return str(item["data"][0]["id"])
        raise RemoteError(f"{url} lists no model: pass model= (the name the server serves).")

    def _chunk(self, result: ServerRound, chunk: dict[str, Any], arrival: float) -> None:
        if "error" in chunk:
            error = chunk["error"]
            raise RemoteError(f"The server failed mid-answer: {error.get('message', error)}")
        result.usage = chunk.get("usage") or result.usage
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or choice.get("message") or {}  # message: a JSON answer, not a stream
            for call in delta.get("tool_calls") or []:
                merge_call(result.calls, call)
            entries = (choice.get("logprobs") or {}).get("content") or []
            for entry, piece in pieces(delta.get("content") or "", entries):
                if entry is not None:
                    result.tokens += 1
                result.text += piece
                self.streamer.add(token_of(entry, arrival) if entry is not None else None, piece)
            result.finish_reason = choice.get("finish_reason") or result.finish_reason
            result.finished = result.finished or bool(choice.get("finish_reason"))

    def _cut_calls(self, result: ServerRound) -> None:
        """The calls a server cut at max_tokens (finish_reason "length"), as their arguments were written."""
        for call in (result.calls[k] for k in sorted(result.calls)):
            self.turn.publish(ToolCall(call_id=call["id"], name=call["name"], arguments={},
                                     arguments_text=call["arguments"], cut=True))  # fmt: skip

    def _run_calls(self, result: ServerRound) -> list[dict[str, Any]]:
        """Run each tool the server asked for; the assistant's call message and one tool message per call."""
        started = time.perf_counter()
        calls = [result.calls[k] for k in sorted(result.calls)]
        replies: list[dict[str, Any]] = []
        for call in calls:
            try:
                arguments = json.loads(call["arguments"] or "{}")
                error = "" if isinstance(arguments, dict) else "the arguments are not a JSON object"
            except ValueError as bad:
                arguments, error = {}, f"the call's arguments are not JSON: {bad}"
            event = ToolCall(call_id=call["id"], name=call["name"], arguments=arguments)
            outcome = self.turn.run_tool(event, self.turn.setup.tools, error)
            replies.append({"role": "tool", "tool_call_id": call["id"], "content": outcome.output or outcome.error})
        self.turn.timed("tools", started)
        wire_calls = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                      for c in calls]  # fmt: skip
        # content "" rather than null: OpenAI and vLLM take either, llama-cpp-python's server rejects null (a 500)
        return [{"role": "assistant", "content": result.text, "tool_calls": wire_calls}, *replies]

    # ---- endings ---------------------------------------------------------------------------------------------

    def usage(self) -> Usage:
        """The server's usage summed over the rounds, None where a round's count is unknown: the prompt's when the
        server sent no usage (its tokenizer and template count it, not this side's), the completion's when it sent
        none and not every token came with a logprob entry (`ServerRound.counted`)."""
        prompt = _summed(r.usage.get("prompt_tokens") for r in self.rounds)
        completion = _summed(_reported(r.usage, "completion_tokens", r.tokens if r.counted else None)
                             for r in self.rounds)  # fmt: skip
        cached = sum(int((r.usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0) for r in self.rounds)
        return Usage(prompt_tokens=prompt, completion_tokens=completion, reused_tokens=cached)


def _reported(usage: dict[str, Any], name: str, otherwise: int | None) -> Any:
    value = usage.get(name)
    return otherwise if value is None else value


def _summed(counts: Iterable[Any]) -> int | None:
    """The counts' sum, or None if any is unknown."""
    known = list(counts)
    return None if any(c is None for c in known) else sum(int(c) for c in known)


def _unfinished(url: str, result: ServerRound) -> str:
    """The error for a stream that ended without a finish_reason or `[DONE]` (the server's answer was 200)."""
    seen = f"after {result.tokens} tokens" if result.tokens else "before any token"
    return (
        f"{url} ended its stream {seen}, with no finish_reason and no [DONE]: the request failed on the server "
        "after it had answered 200 OK, and the server's log says why. llama.cpp's server ends a stream so for a "
        "prompt longer than its context window (--n_ctx) or a tool_choice its chat format does not support."
    )


REMOTE_TITLE = "not asked for: a remote chat makes no second request to its server to write one"


def remote_title(user: str, policy: SafetyPolicy) -> TitleGenerated | None:
    """A remote session's title: the user's first words (`title.fallback_title`), passed through the output scan
    like an answer; writing one with the model would be another request to the server, not made yet."""
    started = time.perf_counter()
    title = scanned_title(fallback_title(user), policy)
    return (
        TitleGenerated(
            title=title, source="fallback", latency_ms=(time.perf_counter() - started) * 1000, rejected=REMOTE_TITLE
        )
        if title
        else None
    )


def prompted_user_text(events: Sequence[Event]) -> str | None:
    """The user's message as a remote turn sent it (its first request's last user message), or None if it sent
    none (the input layer blocked it, or it failed before)."""
    request = next((e for e in events if isinstance(e, HttpRequest) and e.method == "POST"), None)
    messages = request.body.get("messages", []) if request is not None else []
    return next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), None)
