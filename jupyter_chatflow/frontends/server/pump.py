"""A generation's steps as OpenAI chunks, made on a thread of its own and handed to the event loop one by one.

The engine's `Stream` blocks between steps, so a thread per request iterates it: each `Step` becomes a
`TokenDelta` event and the end a `Completed` or `Cancelled` one, and `adapters.openai_chunks` (the same encoder the
notebook's turns use) turns those into `chat.completion.chunk` objects. The loop side reads them with `async for`;
`cancel()` (a disconnected client) stops the generation before its next step. With logprobs, each token's event
waits until its text is in the answer (`ContentTokens`), so the logprobs never show a token a stop string cut.
"""

from __future__ import annotations

import asyncio
import codecs
import collections
import dataclasses
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator

from jupyter_chatflow.engine.generation import Step
from jupyter_chatflow.events import (
    Cancelled,
    Completed,
    Emitter,
    Event,
    Failed,
    FinishReason,
    TokenDelta,
    ToolCall,
    Usage,
)
from jupyter_chatflow.events import Timings as TurnTimings

from .adapters import Item, TokenBytes, openai_chunks
from .engine import Stream
from .tools import ToolStream

_END = object()


@dataclasses.dataclass
class RequestTimings:
    """What the pump measured of one request (milliseconds; the clock starts at the request's arrival)."""

    arrived: float
    first_token_s: float | None = None
    queue_ms: float | None = None
    prefill_ms: float | None = None
    decode_ms: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    gaps_s: list[float] = dataclasses.field(default_factory=list)
    """Seconds between consecutive tokens (inter-token latency)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChunkOptions:
    """How the chunks are spoken: the served model's name and the request's logprobs and usage wishes."""

    model: str
    completion_id: str
    created: int
    include_usage: bool
    logprobs: bool
    top_logprobs: int
    tokenizer: TokenBytes


class Pump:
    """Runs one stream on a thread; `async for item in pump` gets its chunks, then `"[DONE]"`."""

    def __init__(self, stream: Stream, cancel: threading.Event, options: ChunkOptions, arrived: float,
                 on_end: Callable[[RequestTimings], None]):  # fmt: skip
        self.stream = stream
        self.timings = RequestTimings(arrived=arrived, prompt_tokens=stream.usage.prompt_tokens)
        self._cancel = cancel
        self._options = options
        self._on_end = on_end
        self._loop = asyncio.get_running_loop()
        self._items: asyncio.Queue[object] = asyncio.Queue()
        self._ended, self._then = False, list[Callable[[], None]]()
        self._ended_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="chatflow-request", daemon=True)
        self._thread.start()

    def then(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the generation has ended and `on_end` has run: now if it has (any thread). A
        streamed request's log line waits for it, its client having gone before its last step."""
        with self._ended_lock:
            if not self._ended:
                self._then.append(callback)
                return
        callback()

    def cancel(self) -> None:
        """Stop the generation before its next step (any thread)."""
        self._cancel.set()
        self.stream.cancel()

    @property
    def running(self) -> bool:
        """The generation has not ended yet."""
        with self._ended_lock:
            return not self._ended

    def join(self, timeout: float | None) -> bool:
        """Wait for the generation to end and its log line to be written; whether it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    async def __aiter__(self) -> AsyncIterator[Item]:
        while True:
            item = await self._items.get()
            if item is _END:
                return
            yield item  # type: ignore[misc]

    def _run(self) -> None:
        options = self._options
        try:
            chunks = openai_chunks(
                self._events(), model=options.model, created=options.created, include_usage=options.include_usage,
                tokenizer=options.tokenizer, logprobs=options.logprobs,
            )  # fmt: skip
            for item in chunks:
                self._put(_tool_finish(item) if self._called() else item)
        finally:
            self._on_end(self.timings)  # before the end is read: the request's log line has its numbers
            with self._ended_lock:
                self._ended, callbacks = True, self._then
            for callback in callbacks:
                callback()
            self._put(_END)

    def _called(self) -> bool:
        """The answer ended in a call for the client to run (not one max_tokens cut)."""
        call = self.stream.call if isinstance(self.stream, ToolStream) else None
        return call is not None and not call.cut

    def _put(self, item: object) -> None:
        try:
            self._loop.call_soon_threadsafe(self._items.put_nowait, item)
        except RuntimeError:  # the loop is gone (the server stopped): nobody reads on
            self.cancel()

    def _events(self) -> Iterator[Event]:
        """The stream as the pipeline's events, stamped with the completion's id."""
        emit = Emitter(self._options.completion_id.removeprefix("chatcmpl-"))
        tokens = ContentTokens(self._options.tokenizer) if self._options.logprobs else None
        try:
            for step in self._timed(iter(self.stream)):
                for token, text in tokens.take(step) if tokens is not None else [(step, step.text)]:
                    yield emit(self._delta(token, text))
        except Exception as error:  # an engine failure mid-stream: the client gets an error object, then [DONE]
            yield emit(Failed(error="server_error", message=f"The generation failed: {type(error).__name__}."))
            return
        for token, text in tokens.end(self.stream.text) if tokens is not None else ():
            yield emit(self._delta(token, text))
        call = self.stream.call if isinstance(self.stream, ToolStream) else None
        if call is not None:  # (a cut one too: the client gets what was written, and finish_reason "length")
            yield emit(ToolCall(call_id=call.id, name=call.name, arguments=call.arguments, constrained=True,
                                tokens=call.tokens, forced_tokens=call.forced, arguments_text=call.arguments_text,
                                cut=call.cut, guard=call.guard))  # fmt: skip
        yield emit(self._terminal())

    def _delta(self, step: Step, text: str) -> TokenDelta:
        """The event of one token, showing `text` (its logprob entry is made of it by `openai_chunks`)."""
        alternatives = step.top_alternatives[: self._options.top_logprobs]
        return TokenDelta(index=step.index, token_id=step.token_id, text=text, logprob=step.logprob,
                          entropy=step.entropy, alternatives=alternatives, elapsed_ms=step.elapsed_ms,
                          compile_ms=step.compile_ms)  # fmt: skip

    def _timed(self, steps: Iterator[Step]) -> Iterator[Step]:
        last = None
        for step in steps:
            now = time.perf_counter()
            if last is None:
                self.timings.first_token_s = now - self.timings.arrived
            else:
                self.timings.gaps_s.append(now - last)
            last = now
            yield step

    def _terminal(self) -> Event:
        stream, timings = self.stream, self.timings
        usage = stream.usage
        timings.completion_tokens, timings.finish_reason = usage.completion_tokens, stream.finish_reason
        timings.prefill_ms, timings.decode_ms = usage.prefill_ms, usage.decode_ms
        if timings.first_token_s is not None:  # the wait before the engine began this sequence
            timings.queue_ms = max(0.0, timings.first_token_s * 1000 - usage.prefill_ms)
        counts = Usage(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                       reused_tokens=usage.reused_tokens)  # fmt: skip
        spent = TurnTimings(prefill=usage.prefill_ms, decode=usage.decode_ms)
        if stream.finish_reason == "cancelled":
            return Cancelled(text=stream.text, usage=counts, timings=spent)
        reason: FinishReason = "length" if stream.finish_reason == "length" else "stop"
        return Completed(finish_reason=reason, text=stream.text, usage=counts, timings=spent,
                         tokens_per_s=usage.decode_tokens_per_s)  # fmt: skip


@dataclasses.dataclass
class _Token:
    """A token not handed on yet: the content it carries ends at `carries` (characters); it is all in the content
    once the content reaches `needs` (None while its last character is unfinished, waiting for the next token's
    bytes: half of "é" needs the whole "é", which the token after it carries)."""

    step: Step
    carries: int
    needs: int | None


class ContentTokens:
    """The tokens whose text is in the answer's content, each with that text, for logprobs that match the content.

    A step's `text` is what it made visible, which is not always its own token's: text that could begin a stop
    string waits, and a stop string cuts the text it ends with (and the tokens that wrote it, or part of them). So
    each token's text is placed by decoding the token bytes as the engine does (the same incremental UTF-8 decoder),
    and a token is handed on once the content holds all of it, carrying the text its bytes complete. A token a stop
    string cut even in part (stop "Paris" keeps the " " of the token " Paris") is left out: its logprob is of text
    the answer does not have. So are a tool call's tokens (their text is the call, not content). Content past the
    last token handed on (that " ") goes out with the next one, or as the answer's tail.
    """

    def __init__(self, tokenizer: TokenBytes):
        self._tokenizer = tokenizer
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._made = 0  # characters the tokens so far decode to, before any cut
        self._shown = ""  # the content so far
        self._sent = 0  # characters of the content handed on with a token
        self._waiting: collections.deque[_Token] = collections.deque()

    def take(self, step: Step) -> list[tuple[Step, str]]:
        """The tokens whose text is all in the content now that `step` came, each with its text."""
        before = self._made
        text = self._utf8.decode(self._tokenizer.token_bytes(step.token_id))
        self._made += len(text)
        if text:  # the character the tokens before left unfinished is the first one decoded now
            self._finish(before + 1)
        unfinished = bool(self._utf8.getstate()[0])
        self._waiting.append(_Token(step, carries=self._made, needs=None if unfinished else self._made))
        self._shown += step.text
        return self._release(self._shown)

    def end(self, content: str) -> list[tuple[Step, str]]:
        """At the end, `content` the whole answer (with text held back for a stop string that never came, and an
        unfinished character flushed as U+FFFD): the tokens it holds; any after them had their text cut."""
        self._finish(self._made + 1)
        released = self._release(content)
        self._waiting.clear()
        return released

    def _finish(self, needs: int) -> None:
        for token in self._waiting:
            if token.needs is None:
                token.needs = needs

    def _release(self, content: str) -> list[tuple[Step, str]]:
        released = []
        while self._waiting:
            needs = self._waiting[0].needs
            if needs is None or needs > len(content):
                break
            token = self._waiting.popleft()
            released.append((token.step, content[self._sent : token.carries]))
            self._sent = token.carries
        return released


def _tool_finish(item: Item) -> Item:
    """An answer that ended in a call finishes with "tool_calls", as OpenAI's do (the events say "stop")."""
    if isinstance(item, dict) and item.get("choices") and item["choices"][0].get("finish_reason") == "stop":
        return item | {"choices": [item["choices"][0] | {"finish_reason": "tool_calls"}]}
    return item
