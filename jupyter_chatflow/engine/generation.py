"""What `Model.generate` yields: one `Step` per generated token, text made whole and stop strings applied."""

from __future__ import annotations

import dataclasses
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from jupyter_chatflow.model.compile_clock import compile_seconds
from jupyter_chatflow.tokenizer.tokenizer import StreamDecoder, Tokenizer

if TYPE_CHECKING:
    from .constraint import Constraint
    from .sampling import SamplingParams


@dataclasses.dataclass(frozen=True, kw_only=True)
class Alternative:
    """A token the sampler could have picked at a step."""

    token_id: int
    text: str
    logprob: float
    """log p under the model (temperature 1, before any filter)."""
    sampling_prob: float
    """The probability the sampler gave it after penalty, temperature, top-k, top-p and min-p (0 = cut away)."""
    penalized: bool = False
    """The repetition penalty lowered it: it occurs in the prompt or the answer so far (False where the penalty is
    off, and in a remote turn: a server does not say)."""
    penalized_logprob: float | None = None
    """log p after the repetition penalty alone (temperature 1, before any filter): between `logprob` and
    `sampling_prob`, what the penalty did. None: not known (a remote turn, a turn recorded before this field)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RawStep:
    """The engine's output for one position, as host values."""

    token_id: int
    logprob: float
    entropy: float
    top_ids: np.ndarray
    top_logprobs: np.ndarray
    top_sampling_probs: np.ndarray
    top_penalized: np.ndarray | None = None
    """Whether the repetition penalty lowered each of top_ids; None: not reported (the alternatives say False)."""
    top_penalized_logprobs: np.ndarray | None = None
    """Their logprobs after the penalty alone; None: not reported (the alternatives say None)."""
    compile_ms: float | None = None
    """XLA compile time since the step before, when another thread computed this one (a scheduler's loop: the
    compile clock is per thread); None: the reading thread's clock tells."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Step:
    """One generated token and the text it made visible."""

    index: int
    token_id: int
    text: str
    """Text this step made visible: whole UTF-8 characters only, stop strings held back until resolved."""
    logprob: float
    entropy: float
    top_alternatives: tuple[Alternative, ...]
    elapsed_ms: float
    """Milliseconds since `generate` was called (the first step's value is the time to first token)."""
    compile_ms: float = 0.0
    """Of the time since the previous step (for the first one: the prefill), the milliseconds XLA spent tracing
    and compiling programs new to this process (or loading them from the persistent cache)."""


def tokens_per_s(steps: int, decode_ms: float, compile_ms: float = 0.0) -> float:
    """Decoding speed: `steps` decode steps in `decode_ms`, of which `compile_ms` went to XLA compiling a program new
    to the process (seconds on a first call, not decoding speed). The one formula every tokens/s in the package uses;
    0 when nothing was decoded."""
    decoding_ms = decode_ms - compile_ms
    return steps / (decoding_ms / 1000) if steps > 0 and decoding_ms > 0 else 0.0


@dataclasses.dataclass
class GenerationCounts:
    """Token counts and timings of one generation, filled in as it runs: the source numbers a turn's `Usage` and
    `Timings` (events) are summed from (named apart from them: issue 35's one name, one thing)."""

    prompt_tokens: int
    completion_tokens: int = 0
    reused_tokens: int = 0
    """Leading prompt tokens whose keys/values came from the prompt cache (not computed again)."""
    queue_ms: float = 0.0
    """Time from the first read to the start of the prefill: waiting for a scheduler to start it (else 0)."""
    queue_reason: str = ""
    """What the prefill waited for, in words ("" when it started at once): see `Scheduler`'s `_admit`."""
    prefill_ms: float = 0.0
    """Time from the start of the prefill to the first token (which the prefill's logits give)."""
    decode_ms: float = 0.0
    """Time from the first token to the last: the decode steps."""
    compile_ms: float = 0.0
    """XLA compile time inside prefill_ms + decode_ms (a program's first call in the process)."""
    decode_compile_ms: float = 0.0
    """Of compile_ms, the part inside decode_ms (a decode program's first call)."""

    @property
    def decode_steps(self) -> int:
        """Tokens that came from decode steps: every one after the first (which comes out of the prefill)."""
        return max(self.completion_tokens - 1, 0)

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens per second after the first one, XLA compile time left out (`tokens_per_s`)."""
        return tokens_per_s(self.decode_steps, self.decode_ms, self.decode_compile_ms)

    def count(self, index: int, elapsed_ms: float, compile_ms: float) -> None:
        """Step `index` came out `elapsed_ms` after the start, `compile_ms` of XLA compiling since the one before."""
        self.completion_tokens = index + 1
        self.compile_ms += compile_ms
        if index == 0:
            self.prefill_ms = elapsed_ms - self.queue_ms
        else:
            self.decode_ms = elapsed_ms - self.queue_ms - self.prefill_ms
            self.decode_compile_ms += compile_ms


class Generation:
    """A running generation: iterate it once for `Step`s; `finish_reason` and `usage` are set when it ends.

    finish_reason is "stop" (a stop token or stop string), "length" (max_tokens or the window) or
    "cancelled" (`cancel()` or the event passed to `generate` was set, or the caller stopped iterating: a `break`
    or a dropped iterator ends the generation and gives its KV cache back to the prompt cache at once).
    """

    def __init__(
        self,
        raw_steps: Callable[[threading.Event, GenerationCounts], Iterator[RawStep]],
        tokenizer: Tokenizer,
        *,
        prompt_tokens: int,
        stop: tuple[str, ...],
        stop_ids: frozenset[int] | None = None,
        cancel: threading.Event | None = None,
        done: Callable[[], bool] | None = None,
    ):
        self.usage = GenerationCounts(prompt_tokens=prompt_tokens)
        self.finish_reason: str | None = None
        self.text = ""
        self._cancel = _Stop(cancel)
        self._raw_steps = raw_steps
        self._tokenizer = tokenizer
        self._stop = tuple(s for s in stop if s)
        self._stop_ids = tokenizer.stop_ids if stop_ids is None else stop_ids
        self._iterator: weakref.ref[Iterator[Step]] | None = None  # weak: dropping it must end the generation
        self._done = done

    def cancel(self) -> None:
        """Stop before the next step; safe to call from any thread."""
        self._cancel.set()

    def __iter__(self) -> Iterator[Step]:
        """The steps; while the first iterator lives, the same one (the caller may stop at any step: when its
        iterator is dropped or closed, the generation ends and a later `iter()` yields nothing more)."""
        iterator = self._iterator() if self._iterator is not None else None
        if iterator is None:
            if self._iterator is not None:
                return iter(())
            iterator = self._run()
            self._iterator = weakref.ref(iterator)
        return iterator

    def _run(self) -> Iterator[Step]:
        try:
            yield from self._steps()
        finally:  # an exception (KeyboardInterrupt, an engine error) or close() ended it early
            if self.finish_reason is None:
                self._cancel.set()  # this generation only: the caller's event is theirs to set
                self.finish_reason = "cancelled"

    def _steps(self) -> Iterator[Step]:
        started = time.perf_counter()
        decoder, pending = StreamDecoder(self._tokenizer), ""
        compiled = compile_seconds()
        for index, raw in enumerate(self._raw_steps(self._cancel, self.usage)):
            elapsed = (time.perf_counter() - started) * 1000
            now = compile_seconds()
            compile_ms, compiled = (now - compiled) * 1000 if raw.compile_ms is None else raw.compile_ms, now
            self.usage.count(index, elapsed, compile_ms)
            if raw.token_id in self._stop_ids:
                self.finish_reason = "stop"
                break
            pending += decoder.push(raw.token_id)
            shown, pending, stopped = self._release(pending)
            self.text += shown
            yield self._step(index, raw, shown, elapsed, compile_ms)
            if stopped:
                self.finish_reason = "stop"
                return
            if self._done is not None and self._done():  # the constraint is complete
                self.finish_reason = "stop"
                break
        if self.finish_reason is None:
            self.finish_reason = "cancelled" if self._cancel.is_set() else "length"
        tail, _, _ = self._release(pending + decoder.flush(), final=True)
        self.text += tail

    def _release(self, pending: str, final: bool = False) -> tuple[str, str, bool]:
        """Split pending text into (shown now, held back, hit a stop string)."""
        reach = max((len(s) for s in self._stop), default=0)  # shown text a stop string could still touch
        window = (self.text[-reach:] if reach else "") + pending
        hits = [window.find(s) for s in self._stop if s in window]
        if hits:
            cut = min(hits) - (len(window) - len(pending))
            return pending[: max(cut, 0)], "", True
        if final:
            return pending, "", False
        hold = max((n for s in self._stop for n in range(len(s) - 1, 0, -1) if pending.endswith(s[:n])), default=0)
        return pending[: len(pending) - hold], pending[len(pending) - hold :], False

    def _step(self, index: int, raw: RawStep, text: str, elapsed_ms: float, compile_ms: float) -> Step:
        return Step(
            index=index,
            token_id=raw.token_id,
            text=text,
            logprob=raw.logprob,
            entropy=raw.entropy,
            top_alternatives=self._alternatives(raw),
            elapsed_ms=elapsed_ms,
            compile_ms=compile_ms,
        )

    def _alternatives(self, raw: RawStep) -> tuple[Alternative, ...]:
        """The step's top tokens as `Alternative`s, with what the penalty did to each where the engine said."""
        n = len(raw.top_ids)
        flags = raw.top_penalized if raw.top_penalized is not None else np.zeros(n, bool)
        after = raw.top_penalized_logprobs if raw.top_penalized_logprobs is not None else [None] * n
        return tuple(
            Alternative(
                token_id=int(token),
                text=self._tokenizer.piece(int(token)),
                logprob=float(logprob),
                sampling_prob=float(prob),
                penalized=bool(flag),
                penalized_logprob=None if penalized is None else float(penalized),
            )
            for token, logprob, prob, flag, penalized in zip(
                raw.top_ids, raw.top_logprobs, raw.top_sampling_probs, flags, after, strict=True
            )
        )


class _Stop(threading.Event):
    """This generation's stop flag; also raised while the caller's event is (which stopping here leaves alone)."""

    def __init__(self, caller: threading.Event | None):
        super().__init__()
        self._caller = caller

    def is_set(self) -> bool:
        return super().is_set() or (self._caller is not None and self._caller.is_set())


class Engine(Protocol):
    """What runs generations, for the pipeline and the server alike: `Model` (each alone, on the thread that
    iterates it) or `Scheduler` (batched with others on a thread of its own). `submit` raises `GenerationError` for
    a prompt it cannot take; what it returns is iterated once, from any thread."""

    @property
    def queued(self) -> int:
        """Sequences submitted and not yet decoding (always 0 for `Model`: it never queues)."""
        ...

    @property
    def active(self) -> int:
        """Sequences decoding now."""
        ...

    def submit(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams | None = None,
        constraint: Constraint | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation: ...

    def close(self) -> None:
        """Stop taking sequences; the unfinished ones end as cancelled (nothing to stop for `Model`)."""
        ...
