"""A turn answered by an OpenAI-compatible server over HTTP: `chatflow serve`, vLLM, SGLang, llama.cpp's server.

>>> chat = cf.Chat(base_url="http://127.0.0.1:8000/v1", api_key="sk-…")   # no local model is loaded
>>> chat.send("What is the capital of France?").text()

The stages that need no model run here as in a local turn: the input safety scan, memory recall, the messages
(system prompt, memory, history, the user's message), the output scan of each streamed token, the tools the
server asks for (run here, their results sent back in a next request), memory writes. The model's part is one
`POST /v1/chat/completions` per round with `stream`, `stream_options.include_usage` and `logprobs`/`top_logprobs`
(5, the most our server and OpenAI give). Instead of `context_assembled`/`tokenized`/`prefill` (counted with a
tokenizer this side does not have) the turn records the wire (`http_request`, `http_response`, `sse_frame`) and
its tokens carry what the server sends: text, logprob and top alternatives, no token ids, no entropy.

Timings are the client's: `prefill` is each request's time to its first token (network, queue and the server's
prefill together), `decode` the time from its first to its last token; tokens/s is over that span. Usage is the
server's (its last chunk's `usage`; `prompt_tokens_details.cached_tokens` as reused tokens where it sends them);
a server that sends none in a stream (llama.cpp's Python server ignores `stream_options`) leaves the prompt's
tokens `None`, "not reported", and the completion's counted from the tokens that arrived.
"""

from __future__ import annotations

import codecs
import dataclasses
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from jupyter_chatflow.engine.generation import Alternative, tokens_per_s
from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.events import (
    Event,
    HttpRequest,
    SafetyDecision,
    Timings,
    TitleGenerated,
    TokenDelta,
    ToolCall,
    Usage,
)
from jupyter_chatflow.store.memory import Memory

from .context import Inputs, plain_messages
from .request import ChatRequest
from .safety import SafetyPolicy
from .stages import TurnStages, round_choice
from .stream import Totals
from .title import _scanned, fallback_title
from .tools import Tool
from .wire import RemoteError, exchange, mask_key

if TYPE_CHECKING:
    import httpx

TOP_LOGPROBS = 5
KEY_VARIABLES = ("CHATFLOW_API_KEY", "OPENAI_API_KEY")
"""Where a remote chat finds its key when none is passed, in this order."""


class RemoteServer:
    """Where a chat's turns go: an OpenAI-compatible server's base URL, the key and the model it serves.

    `base_url` is the API's root, as the `openai` client takes it (`http://host:8000/v1`; a bare
    `http://host:8000` gets `/v1`). Without `api_key`, `$CHATFLOW_API_KEY` or `$OPENAI_API_KEY` is used (our server
    asks for none on loopback). Without `model`, the first one `GET /v1/models` lists."""

    def __init__(self, base_url: str, api_key: str | None = None, model: str | None = None, timeout: float = 60.0):
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ChatflowError(f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {base_url!r}")
        root = base_url.rstrip("/")
        self.base_url = root if root.split("://", 1)[1].count("/") else f"{root}/v1"
        self.model = model
        self.timeout = timeout
        self._key = (
            api_key if api_key is not None else next((os.environ[v] for v in KEY_VARIABLES if os.environ.get(v)), None)
        )
        self._client: httpx.Client | None = None

    def __repr__(self) -> str:
        key = mask_key(self._key) if self._key else None
        return f"RemoteServer({self.base_url!r}, api_key={key!r}, model={self.model!r})"

    @property
    def client(self) -> httpx.Client:
        """One connection pool for the chat's requests (made on first use)."""
        import httpx

        if self._client is None:
            self._client = httpx.Client(timeout=httpx.Timeout(self.timeout, connect=5.0))
        return self._client

    def headers(self, *, stream: bool = True) -> dict[str, str]:
        """The request headers; the key goes only here, never into an event (see `wire.shown_headers`)."""
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream" if stream else "application/json"}
        return headers | ({"Authorization": f"Bearer {self._key}"} if self._key else {})

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


@dataclasses.dataclass(kw_only=True)
class RemoteSetup:
    """What a remote turn needs besides the request: the server and the session's state."""

    server: RemoteServer
    session_id: str
    system: str = ""
    """The system prompt ("": none, the server's chat template decides)."""
    history: Sequence[Sequence[dict[str, str]]] = ()
    memory: Memory | None = None
    tools: Sequence[Tool] = ()
    policy: SafetyPolicy | None = None
    queued_ms: float = 0.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Token:
    """What the server said of one generated token."""

    logprob: float = 0.0
    alternatives: tuple[Alternative, ...] = ()
    elapsed_ms: float = 0.0
    arrived_at: float = dataclasses.field(default_factory=time.monotonic)
    """Monotonic seconds when its chunk was read (`TokenDelta.computed_at`: what this side can know of it)."""


@dataclasses.dataclass
class Round:
    """One request's answer, read from its chunks."""

    text: str = ""
    calls: dict[int, dict[str, str]] = dataclasses.field(default_factory=dict)
    finish_reason: str = "stop"
    usage: dict[str, Any] = dataclasses.field(default_factory=dict)
    tokens: int = 0
    first_ms: float | None = None
    last_ms: float = 0.0
    finished: bool = False
    """A chunk gave a finish_reason, or `[DONE]` came (or the answer was one JSON body)."""

    @property
    def counted(self) -> bool:
        """Whether `tokens` (the logprob entries that came) counts every token generated: not for a tool call (a
        server sends its tokens without entries) nor for text that came with none (a server ignoring logprobs)."""
        return not self.calls and (self.tokens > 0 or not self.text)


class RemoteTurn(TurnStages):
    """The stages of one remote turn (`stages.TurnStages`: the ones that need no model), the answer from the server."""

    streamer: RemoteText

    def __init__(self, setup: RemoteSetup, request: ChatRequest, emit: Callable[[Event], None],
                 cancel: threading.Event):  # fmt: skip
        super().__init__(setup, request, emit, cancel)
        self.setup: RemoteSetup = setup
        self.streamer = RemoteText(self._emit, self.policy.output_gate() if self._scans_output else None)
        self.rounds: list[Round] = []

    # ---- the server's part ------------------------------------------------------------------------------------

    def _answer(self, text: str, snippets: list) -> str:
        """Rounds of requests until the server answers without a tool call (or the round bound is reached)."""
        inputs = Inputs(system=self.request.system or self.setup.system, user=text, memory=snippets,
                        history=self.setup.history)  # fmt: skip
        messages = [m for m in plain_messages(inputs) if m["role"] != "system" or m["content"]]
        features = self.request.features
        for index in range(features.max_tool_rounds + 1):
            choice = round_choice(features.tool_choice, index, features.max_tool_rounds)
            result = self._request(messages, choice, index)
            if self.cancel.is_set() or self.streamer.blocked is not None:
                return "content_filter" if self.streamer.blocked is not None else "cancelled"
            if result.finish_reason == "abort":  # SGLang's, for an answer it gave up on
                raise RemoteError(f"The server aborted the answer after {result.tokens} tokens (finish_reason "
                                  "abort): it may be shutting down or out of memory; its log says why.")  # fmt: skip
            if not result.calls:
                return result.finish_reason if result.finish_reason in ("length", "content_filter") else "stop"
            messages += self._run_calls(result)
        return "tool_calls_exhausted"

    def _request(self, messages: list[dict[str, Any]], choice: str, index: int) -> Round:
        server, result = self.setup.server, Round()
        self.rounds.append(result)
        body = self._body(messages, choice)
        url = f"{server.base_url}/chat/completions"
        for item in exchange(server.client, "POST", url, server.headers(), body, self.cancel, round=index):
            if isinstance(item, Event):
                self._emit(item)
                arrival = getattr(item, "arrival_ms", None)
            elif isinstance(item, dict):
                self._chunk(result, item, arrival or 0.0)
            elif item == "[DONE]":
                result.finished = True
            if self.cancel.is_set() or self.streamer.blocked is not None:
                return result
        if not result.finished and not self.cancel.is_set():  # cancelled: the stream was ours to end
            raise RemoteError(_unfinished(url, result))
        return result

    def _body(self, messages: list[dict[str, Any]], choice: str) -> dict[str, Any]:
        server, params = self.setup.server, self.request.params
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
        if self.setup.tools and choice != "none":
            body["tools"] = [{"type": "function", "function": t.spec()} for t in self.setup.tools]
            named = {"type": "function", "function": {"name": choice}}
            body["tool_choice"] = choice if choice in ("auto", "required") else named
        return body

    def _served_model(self) -> str:
        """The first model `GET /v1/models` lists (its request is part of the turn's wire)."""
        server = self.setup.server
        url = f"{server.base_url}/models"
        for item in exchange(server.client, "GET", url, server.headers(stream=False), None, self.cancel):
            if isinstance(item, Event):
                self._emit(item)
            elif isinstance(item, dict) and item.get("data"):
                return str(item["data"][0]["id"])
        raise RemoteError(f"{url} lists no model: pass model= (the name the server serves).")

    def _chunk(self, result: Round, chunk: dict[str, Any], arrival: float) -> None:
        if "error" in chunk:
            error = chunk["error"]
            raise RemoteError(f"The server failed mid-answer: {error.get('message', error)}")
        result.usage = chunk.get("usage") or result.usage
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or choice.get("message") or {}  # message: a JSON answer, not a stream
            for call in delta.get("tool_calls") or []:
                _merge_call(result.calls, call)
            entries = (choice.get("logprobs") or {}).get("content") or []
            for entry, piece in _pieces(delta.get("content") or "", entries):
                if entry is not None:
                    result.tokens += 1
                    result.first_ms = arrival if result.first_ms is None else result.first_ms
                    result.last_ms = arrival
                result.text += piece
                self.streamer.add(_token(entry, arrival) if entry is not None else None, piece)
            result.finish_reason = choice.get("finish_reason") or result.finish_reason
            result.finished = result.finished or bool(choice.get("finish_reason"))

    def _run_calls(self, result: Round) -> list[dict[str, Any]]:
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
            outcome = self._vetted_run(event, self.setup.tools, error)
            replies.append({"role": "tool", "tool_call_id": call["id"], "content": outcome.output or outcome.error})
        self._time("tools", started)
        wire_calls = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                      for c in calls]  # fmt: skip
        # content "" rather than null: OpenAI and vLLM take either, llama-cpp-python's server rejects null (a 500)
        return [{"role": "assistant", "content": result.text, "tool_calls": wire_calls}, *replies]

    # ---- endings ---------------------------------------------------------------------------------------------

    def _totals(self) -> Totals:
        """The server's usage summed over the rounds, None where a round's count is unknown: the prompt's when the
        server sent no usage (its tokenizer and template count it, not this side's), the completion's when it sent
        none and not every token came with a logprob entry (`Round.counted`); the client's times."""
        prompt = _summed(r.usage.get("prompt_tokens") for r in self.rounds)
        completion = _summed(_reported(r.usage, "completion_tokens", r.tokens if r.counted else None)
                             for r in self.rounds)  # fmt: skip
        cached = sum(int((r.usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0) for r in self.rounds)
        timed = [r for r in self.rounds if r.first_ms is not None]
        decode = sum(r.last_ms - (r.first_ms or 0.0) for r in timed)
        queued = self.setup.queued_ms
        timings = Timings(**self.stages, prefill=sum(r.first_ms or 0.0 for r in timed), decode=decode,
                          ttft_ms=None if self.first_token_ms is None else queued + self.first_token_ms,
                          total_ms=(time.perf_counter() - self.started) * 1000 + queued)  # fmt: skip
        usage = Usage(prompt_tokens=prompt, completion_tokens=completion, reused_tokens=cached)
        return Totals(usage=usage, timings=timings, tokens_per_s=tokens_per_s(sum(r.tokens - 1 for r in timed), decode))


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


def _reported(usage: dict[str, Any], name: str, otherwise: int | None) -> Any:
    value = usage.get(name)
    return otherwise if value is None else value


def _summed(counts: Iterable[Any]) -> int | None:
    """The counts' sum, or None if any is unknown."""
    known = list(counts)
    return None if any(c is None for c in known) else sum(int(c) for c in known)


def _unfinished(url: str, result: Round) -> str:
    """The error for a stream that ended without a finish_reason or `[DONE]` (the server's answer was 200)."""
    seen = f"after {result.tokens} tokens" if result.tokens else "before any token"
    return (
        f"{url} ended its stream {seen}, with no finish_reason and no [DONE]: the request failed on the server "
        "after it had answered 200 OK, and the server's log says why. llama.cpp's server ends a stream so for a "
        "prompt longer than its context window (--n_ctx) or a tool_choice its chat format does not support."
    )


def _token(entry: dict[str, Any], arrival: float) -> Token:
    listed = sorted(entry.get("top_logprobs") or [], key=lambda a: -float(a["logprob"]))  # vLLM lists its pick first
    alternatives = tuple(
        Alternative(token_id=-1, text=_entry_text(a), logprob=float(a["logprob"]), sampling_prob=-1.0) for a in listed
    )
    return Token(logprob=float(entry.get("logprob", 0.0)), alternatives=alternatives, elapsed_ms=arrival)


def _entry_text(entry: dict[str, Any]) -> str:
    raw = entry.get("bytes")
    return bytes(raw).decode("utf-8", "replace") if raw else str(entry.get("token", ""))


def _pieces(content: str, entries: Sequence[dict[str, Any]]) -> Iterator[tuple[dict[str, Any] | None, str]]:
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


def _merge_call(calls: dict[int, dict[str, str]], delta: dict[str, Any]) -> None:
    """Add one streamed `tool_calls` delta: the first names the call, later ones extend its arguments."""
    call = calls.setdefault(int(delta.get("index", 0)), {"id": "", "name": "", "arguments": ""})
    function = delta.get("function") or {}
    call["id"] = delta.get("id") or call["id"]
    call["name"] = function.get("name") or call["name"]
    call["arguments"] += function.get("arguments") or ""


REMOTE_TITLE = "not asked for: a remote chat makes no second request to its server to write one"


def remote_title(user: str, policy: SafetyPolicy) -> TitleGenerated | None:
    """A remote session's title: the user's first words (`title.fallback_title`), passed through the output scan
    like an answer; writing one with the model would be another request to the server, not made yet."""
    started = time.perf_counter()
    title = _scanned(fallback_title(user), policy)
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
