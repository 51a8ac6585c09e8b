"""The inference engine: a loaded model, its compiled XLA programs, and the prefill/decode loop.

Shapes stay static so XLA compiles few programs and reuses them: each compiled model-sized program holds tens of
MiB on XLA:CPU, so there are few shapes. The KV cache has a power-of-two length of at least `MIN_CACHE` and
grows (doubles) when decoding reaches its end, prompts are prefilled in chunks of two widths, and one jitted
decode step (forward + sampler) reads the cache while a separate tiny program writes each step's keys/values
into it in place (see `programs.py`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jupyter_chatflow.errors import GenerationError
from jupyter_chatflow.model.config import ModelConfig
from jupyter_chatflow.model.transformer import KVCache, Transformer
from jupyter_chatflow.settings import SAMPLER_DEFAULTS
from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

from .constraint import Constraint
from .generation import Generation, RawStep, Usage
from .programs import Programs, release_freed_memory
from .prompt_cache import MIN_KEPT_LENGTH, PromptCache
from .sampling import Sampled, SamplingParams

PREFILL_CHUNK = 128  # the wide prefill chunk: XLA:CPU's prefill tokens/s level off from here (within ~5% of 512)
MIN_BUCKET = 16  # the narrow chunk, for a prompt's short tail (what a follow-up turn adds)
MIN_CACHE = 1024  # one cache length (one decode and two prefill programs) for most chats


def bucket(n: int, minimum: int = MIN_BUCKET) -> int:
    """The power of two at or above n (at least `minimum`)."""
    return max(minimum, 1 << (max(n, 1) - 1).bit_length())


class Model:
    """A loaded chat model: tokenizer + transformer + compiled programs.

    >>> model = load_model()
    >>> ids = model.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}])
    >>> for step in model.generate(ids, max_tokens=32, temperature=0.0):
    ...     print(step.text, end="")
    """

    def __init__(
        self, config: ModelConfig, tokenizer: Tokenizer, transformer: Transformer, *, path: Path | None = None
    ):
        self.config = config
        self.tokenizer = tokenizer
        self.path = path
        self.dtype = transformer.embed[...].dtype
        self._programs = Programs(transformer)
        self._weights = self._programs.weights  # the transformer's arrays, as the programs take them
        self.prompt_cache = PromptCache()
        self._lock = threading.Lock()
        self._anything = jax.device_put(np.ones((1, config.vocab_size), bool))  # the mask of no constraint

    def generate(
        self,
        prompt_ids: Sequence[int],
        *,
        max_tokens: int = SAMPLER_DEFAULTS["max_tokens"],
        temperature: float = SAMPLER_DEFAULTS["temperature"],
        top_k: int = SAMPLER_DEFAULTS["top_k"],
        top_p: float = SAMPLER_DEFAULTS["top_p"],
        min_p: float = SAMPLER_DEFAULTS["min_p"],
        repetition_penalty: float = SAMPLER_DEFAULTS["repetition_penalty"],
        stop: str | Sequence[str] = SAMPLER_DEFAULTS["stop"],
        seed: int | None = SAMPLER_DEFAULTS["seed"],
        ignore_eos: bool = SAMPLER_DEFAULTS["ignore_eos"],
        params: SamplingParams | None = None,
        cancel: threading.Event | None = None,
        constraint: Constraint | None = None,
    ) -> Generation:
        """Generate after `prompt_ids`, lazily: iterate the result for one `Step` per token.

        The knobs start where they change nothing (`settings.SAMPLER_DEFAULTS`: temperature 1, no filters, no
        repetition penalty), unlike a chat turn's defaults; `temperature=0.0` is plain greedy decoding.

        Pass `params` to use a ready `SamplingParams` (the keyword knobs are then ignored); set `cancel`
        (a threading.Event) from any thread to stop between two steps; pass a `constraint` to allow only the
        tokens it allows (it also ends the generation once it is done). The longest prefix of the prompt found
        in `prompt_cache` is not computed again (`generation.usage.reused_tokens`).
        """
        if params is None:
            params = SamplingParams(
                temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, repetition_penalty=repetition_penalty,
                max_tokens=max_tokens, stop=(stop,) if isinstance(stop, str) else tuple(stop), seed=seed,
                ignore_eos=ignore_eos,
            )  # fmt: skip
        prompt = self._check_prompt(prompt_ids)
        run = functools.partial(self._raw_steps, prompt, params, constraint)
        return self._generation(run, prompt, params, cancel, constraint.is_done if constraint is not None else None)

    def submit(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams | None = None,
        constraint: Constraint | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation:
        """`generate` with a `SamplingParams`, shaped as `Scheduler.submit`: code that takes either runs on both
        (this one decodes alone, on the thread that iterates; the scheduler batches with other sequences)."""
        return self.generate(prompt_ids, params=params or SamplingParams(), constraint=constraint, cancel=cancel)

    def _generation(
        self, run: Callable[[threading.Event, Usage], Iterator[RawStep]], prompt: np.ndarray, params: SamplingParams,
        cancel: threading.Event | None, done: Callable[[], bool] | None,
    ) -> Generation:  # fmt: skip
        """The `Generation` that turns `run`'s raw steps for `prompt` into Steps."""
        return Generation(
            run, self.tokenizer, prompt_tokens=len(prompt), stop=params.stop, stop_ids=self._stop_ids(params),
            cancel=cancel, done=done,
        )  # fmt: skip

    def _stop_ids(self, params: SamplingParams) -> frozenset[int]:
        """The token ids that end a generation with these params."""
        return frozenset() if params.ignore_eos else self.tokenizer.stop_ids

    def _check_prompt(self, prompt_ids: Sequence[int]) -> np.ndarray:
        prompt = np.asarray(prompt_ids, dtype=np.int32).reshape(-1)
        if prompt.size == 0:
            raise GenerationError("The prompt is empty: pass at least one token id.")
        if prompt.size >= self.config.context_length:
            raise GenerationError(
                f"The prompt has {prompt.size} tokens but the model's window is {self.config.context_length}: "
                "shorten the prompt or drop earlier turns."
            )
        if prompt.min() < 0 or prompt.max() >= self.config.vocab_size:
            raise GenerationError(f"Prompt token ids must be in [0, {self.config.vocab_size}).")
        return prompt

    def _raw_steps(
        self, prompt: np.ndarray, params: SamplingParams, constraint: Constraint | None, cancel: threading.Event,
        usage: Usage,
    ) -> Iterator[RawStep]:  # fmt: skip
        """Prefill, then decode until max_tokens, the window, the constraint's end or cancel; one RawStep each."""
        budget = self._budget(prompt, params)
        run = self._start(prompt, params)
        run.cache, usage.reused_tokens = self._take_cache(prompt, room(prompt.size))
        try:  # no lock is held across a yield: a caller may stop iterating at any step, or never come back
            self._prefill_and_sample(run, usage.reused_tokens, constraint)
            decode = self._decode_ahead if constraint is None else self._decode_constrained
            yield from decode(run, budget, cancel, constraint)
        finally:
            self._keep_cache(run.cache, run.written())

    def _budget(self, prompt: np.ndarray, params: SamplingParams) -> int:
        """How many tokens may be generated after `prompt`: max_tokens, or what is left of the window."""
        return min(params.max_tokens, self.config.context_length - prompt.size)

    def _start(self, prompt: np.ndarray, params: SamplingParams) -> _Run:
        """A generation's state before its prefill: its random key, its knobs, the tokens seen (the prompt's from
        `params.penalty_from` on: those the repetition penalty counts)."""
        seed = params.seed if params.seed is not None else int(np.random.default_rng().integers(2**31))
        seen = np.zeros((1, self.config.vocab_size), bool)
        seen[0, prompt[params.penalty_from :]] = True
        return _Run(prompt, jax.random.key(seed), params.as_array(), seen)

    def _decode_ahead(self, run: _Run, budget: int, cancel: threading.Event, _constraint) -> Iterator[RawStep]:
        """Unconstrained decoding: XLA computes step n while the host reads step n-1."""
        yield run.host(run.out)  # the first token goes out before the decode program is even dispatched
        pending = None
        for step in range(1, budget):
            if cancel.is_set():
                return
            self._decode_step(run, step, self._anything)
            if pending is not None:
                yield run.host(pending)
            pending = run.out
        if pending is not None and not cancel.is_set():
            yield run.host(pending)

    def _decode_constrained(self, run: _Run, budget: int, cancel: threading.Event, constraint) -> Iterator[RawStep]:
        """Constrained decoding, step by step: each mask depends on the token before it."""
        for step in range(1, budget + 1):
            raw = run.host(run.out)
            constraint.advance(raw.token_id)
            yield raw
            if step == budget or cancel.is_set() or constraint.is_done():
                return
            self._decode_step(run, step, self._mask(constraint))

    def _decode_step(self, run: _Run, step: int, allowed: jax.Array) -> None:
        self._feed_one(run, run.out.token, run.prompt.size + step - 1, step, allowed)
        run.fed += 1

    def _feed_one(self, run: _Run, token: Any, pos: int, step: int, allowed: jax.Array) -> None:
        """One token at `pos` through the decode program (its keys/values written), the next one sampled; a full
        cache first grows to the next length (a cache is sized for its prompt, not for max_tokens)."""
        if pos >= run.cache.length:
            run.cache = self._grow(run.cache, self._length(pos + 1))
        at = np.int32(pos)
        run.out, chunk, run.seen = self._programs.decode_step(
            self._weights, run.cache, token, at, run.seen, run.knobs, run.key, step, allowed
        )
        run.cache = self._programs.write(run.cache, chunk, at)

    def _prefill_and_sample(self, run: _Run, reused: int, constraint: Constraint | None) -> None:
        for _ in self._prefill_steps(run, reused, constraint):
            pass

    def _prefill_steps(self, run: _Run, reused: int, constraint: Constraint | None) -> Iterator[tuple[int, bool]]:
        """All chunks but the last through `forward`; the last one fused with sampling the first token (`run.out`).
        Yields (the chunk's width, whether it was the last) after each chunk, so a scheduler can decode other
        sequences in between. A single token after a cached prefix (a fork, a prompt prewarmed all but its end) is
        a decode step: that program is compiled already, where a first 16-wide prefill at this cache length would
        cost ~1 s of compiling."""
        *head, (start, tokens, size) = prefill_chunks(run.prompt, run.cache.length, reused)
        if not head and size == 1:
            self._feed_one(run, tokens[:, 0], start, 0, self._mask(constraint))
            yield 1, True
            return
        for part in head:
            run.cache = self._prefill(run.cache, [part])  # (a failure below must not leave a consumed cache behind)
            yield part[1].shape[1], False
        cache = run.cache
        hidden, chunk, _ = self._programs.forward(self._weights, cache, tokens, np.int32(start), 0)
        run.cache = self._programs.write(cache, chunk, np.int32(start))
        run.out, run.seen = self._programs.sample_after(
            self._weights, hidden, np.int32(size - 1), run.knobs, run.seen, run.key, self._mask(constraint)
        )
        yield tokens.shape[1], True

    def _mask(self, constraint: Constraint | None) -> jax.Array:
        allowed = None if constraint is None else constraint.allowed()
        return self._anything if allowed is None else jax.device_put(np.asarray(allowed, bool)[None])

    def _keep_cache(self, cache: KVCache, ids: np.ndarray) -> None:
        """Give a pass's cache to the prompt cache, and the memory freed since (caches cut or let go, a cache
        grown by copying) back to the OS: glibc keeps freed heap pages otherwise (<1 ms)."""
        if not cache.keys[0].is_deleted():  # a program that failed mid-call may have consumed it
            with self._lock:
                self.prompt_cache.put(ids, cache)
        release_freed_memory()

    def _take_cache(self, prompt: np.ndarray, needed: int) -> tuple[KVCache, int]:
        """A KV cache of its own for one pass (the prompt cache's longest matching entry, or a new one). The lock
        guards only the prompt cache: passes run side by side, each on its own cache (JAX programs are pure)."""
        with self._lock:
            return self.prompt_cache.take(prompt, self._length(needed), self._grow)

    def _shared_prefix(self, prompt: np.ndarray) -> int:
        """How many leading tokens of `prompt` the prompt cache holds now (the entry is left in place)."""
        with self._lock:
            return self.prompt_cache.longest(prompt)[1]

    def _copy_prefix(self, prompt: np.ndarray, cache: KVCache, row: int) -> tuple[KVCache, int]:
        """`cache` (a batch's, donated) with the prompt cache's longest prefix of `prompt` copied into row `row`,
        and that prefix's length (the entry stays cached: a copy, not a take)."""
        with self._lock:  # the copy is dispatched before anyone can take the entry (and donate its arrays)
            entry, reused = self.prompt_cache.longest(prompt)
            if entry is None:
                return cache, 0
            length = min(bucket(reused, MIN_KEPT_LENGTH), entry.cache.length, cache.length)
            return self._programs.write_row(cache, entry.cache, np.int32(row), length), reused

    def _length(self, needed: int) -> int:
        """The cache length for `needed` positions: a power of two, at least MIN_CACHE, at most the window's."""
        return min(bucket(needed, MIN_CACHE), bucket(self.config.context_length))

    def _grow(self, cache: KVCache | None, length: int) -> KVCache:
        """A new cache of `length` positions, holding a copy of `cache` at its start. What the prompt cache just
        freed (entries cut) goes back to the OS first: freed on other threads' heaps, glibc would not reuse it."""
        release_freed_memory()
        empty = KVCache.zeros(self.config, 1, length, self.dtype)
        return empty if cache is None else self._programs.write(empty, cache, np.int32(0))

    def prefill(self, token_ids: Sequence[int]) -> int:
        """Put a prompt (prefix) in the prompt cache without generating; returns how many tokens were computed.

        A later request starting with these ids prefills only what follows (e.g. prewarm while the user types).
        """
        ids = self._check_prompt(token_ids)
        return ids.size - self._prefill_reusing(ids)

    def _prefill(self, cache: KVCache, chunks, probe_layer: int = 0, on_chunk=None) -> KVCache:
        """Run `prefill_chunks` through, sampling nothing; `on_chunk(start, size, hidden [1, w, d], queries of
        probe_layer)` sees each."""
        for start, tokens, size in chunks:
            at = np.int32(start)
            hidden, chunk, queries = self._programs.forward(self._weights, cache, tokens, at, probe_layer)
            cache = self._programs.write(cache, chunk, at)
            if on_chunk is not None:
                on_chunk(start, size, hidden, queries)
        return cache

    def attention(self, token_ids: Sequence[int], layer: int) -> np.ndarray:
        """Attention probabilities of `layer` for all heads over the whole sequence: float16 [h, T, T].

        Recomputed on demand (nothing is stored while decoding): one chunked prefill fills the cache and keeps
        this layer's queries ([T, h, e], small), then the rows are computed a chunk at a time and copied out, so
        memory is the output plus one chunk's scores.
        """
        if not 0 <= layer < self.config.n_layers:
            raise GenerationError(f"layer must be in [0, {self.config.n_layers}), got {layer}")
        ids = self._check_prompt(token_ids)
        n, chunks = ids.size, []
        out = np.zeros((self.config.n_heads, n, n), np.float16)
        cache = self._scratch_cache(ids)
        try:
            keep = lambda start, size, _hidden, queries: chunks.append((start, size, queries))  # noqa: E731
            cache = self._prefill(cache, prefill_chunks(ids, cache.length), layer, keep)
            for start, size, queries in chunks:
                window, cap = self.config.window_of(layer), self.config.attn_softcap
                rows = self._programs.rows(queries, cache.keys[layer], np.int32(start), window, cap)
                out[:, start : start + size, :] = np.asarray(rows[0, :, :size, :n])
        finally:
            self._keep_cache(cache, ids)
        return out

    def logits(self, token_ids: Sequence[int]) -> np.ndarray:
        """Next-token logits after every position: float32 [T, V] (for tests and analysis; T is kept modest)."""
        ids, rows = self._check_prompt(token_ids), []
        cache = self._scratch_cache(ids)
        try:
            keep = lambda _start, size, hidden, _queries: rows.append(self._logits_of(hidden[:, :size]))  # noqa: E731
            cache = self._prefill(cache, prefill_chunks(ids, cache.length), on_chunk=keep)
        finally:
            self._keep_cache(cache, ids)
        return np.concatenate(rows)

    def next_logits(self, token_ids: Sequence[int]) -> np.ndarray:
        """Next-token logits after the last position only: float32 [V] (a cached prefix is not computed again)."""
        last: list[jax.Array] = []
        keep = lambda _start, size, hidden, _queries: last.append(  # noqa: E731
            jax.lax.dynamic_index_in_dim(hidden, size - 1, 1)  # [1, 1, d]
        )
        self._prefill_reusing(self._check_prompt(token_ids), keep)
        return self._logits_of(last[-1])[0]

    def _prefill_reusing(self, ids: np.ndarray, on_chunk=None) -> int:
        """Prefill `ids` after the longest cached prefix (at least one token is computed); returns its length."""
        cache, reused = self._take_cache(ids, room(ids.size))
        try:
            cache = self._prefill(cache, prefill_chunks(ids, cache.length, reused), on_chunk=on_chunk)
            jax.block_until_ready(cache)  # done when it returns: its time is its own, not the next request's
        finally:
            self._keep_cache(cache, ids)
        return reused

    def _scratch_cache(self, ids: np.ndarray) -> KVCache:
        """A cache for a pass that needs every position computed (reusing a prefix would skip some)."""
        cache, _ = self._take_cache(ids[:1], room(ids.size))  # a one-token "prompt" shares no prefix worth using
        return cache

    def _logits_of(self, hidden: jax.Array) -> np.ndarray:
        return np.asarray(self._programs.logits(self._weights, hidden))[0]


def room(prompt_size: int) -> int:
    """Cache positions a prompt needs: its own, plus room for the zero padding of its last prefill chunk."""
    return prompt_size + max(PREFILL_CHUNK // 2, MIN_BUCKET)


def prefill_chunks(prompt: np.ndarray, cache_length: int, first: int = 0) -> Iterator[tuple[int, np.ndarray, int]]:
    """Split prompt[first:] into zero-padded chunks: (start, tokens [1, width], real size).

    Two widths, so two prefill programs per cache length: a wide chunk while more than half of one is left,
    else narrow ones (four narrow chunks cost less than one wide on XLA:CPU). A chunk never passes the cache's
    end: a cache of `room(prompt.size)` positions or more leaves space for the padding.
    """
    wide, narrow = PREFILL_CHUNK, min(MIN_BUCKET, PREFILL_CHUNK)
    start = first
    while start < prompt.size:
        width = wide if prompt.size - start > wide // 2 and start + wide <= cache_length else narrow
        chunk = prompt[start : start + min(width, cache_length - start)]
        tokens = np.zeros((1, min(width, cache_length - start)), np.int32)
        tokens[0, : chunk.size] = chunk
        yield start, tokens, chunk.size
        start += chunk.size


class _Run:
    """The state of one generation while it runs."""

    def __init__(self, prompt: np.ndarray, key: jax.Array, knobs: jax.Array, seen: np.ndarray):
        self.prompt, self.key, self.knobs = prompt, key, knobs
        self.seen: np.ndarray | jax.Array = seen  # [1, V] the tokens seen (on the device once sampled)
        self.cache: KVCache
        self.out: Sampled
        self.fed = 0  # generated tokens whose keys/values are in the cache
        self.tokens: list[int] = []  # generated tokens read back so far

    def host(self, out: Sampled) -> RawStep:
        raw = _to_host(out)
        self.tokens.append(raw.token_id)
        return raw

    def written(self) -> np.ndarray:
        """The ids whose keys/values the cache holds, in position order."""
        return np.concatenate([self.prompt, np.asarray(self.tokens[: self.fed], np.int32)])


def _to_host(out: Sampled) -> RawStep:
    return raw_step(jax.device_get(out), 0)


def raw_step(host: Sampled, row: int) -> RawStep:
    """Row `row` of a sampler's output, already read back to the host."""
    return RawStep(
        token_id=int(host.token[row]),
        logprob=float(host.logprob[row]),
        entropy=float(host.entropy[row]),
        top_ids=np.asarray(host.top_ids[row]),
        top_logprobs=np.asarray(host.top_logprobs[row]),
        top_sampling_probs=np.asarray(host.top_sampling_probs[row]),
        top_penalized=np.asarray(host.top_penalized[row]),
        top_penalized_logprobs=np.asarray(host.top_penalized_logprobs[row]),
    )
