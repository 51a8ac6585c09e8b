"""A loaded chat model: its tokenizer and its `Runner`, with batch-1 generation and the passes that sample nothing.

`Model.generate` runs one sequence on the calling thread: the runner's prefill, then one decode step per token (the
one-row decode program a scheduler's single row runs too), the next step dispatched before the host reads the
last. `logits`, `next_logits` and `attention` recompute a sequence on demand; `prefill` puts a prompt in the prompt
cache. Many sequences at once go through `Scheduler` (scheduler.py), on the same runner.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import jax
import numpy as np

from jupyter_chatflow.errors import GenerationError
from jupyter_chatflow.model.config import ModelConfig
from jupyter_chatflow.model.transformer import Transformer
from jupyter_chatflow.settings import SAMPLER_DEFAULTS
from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

from . import inside
from .chunks import MIN_BUCKET, MIN_CACHE, PREFILL_CHUNK, bucket, prefill_chunks, room
from .constraint import Constraint
from .generation import Generation, GenerationCounts, RawStep
from .intervention import Direction, Intervention, Steer
from .programs import release_freed_memory
from .prompt_cache import PromptCache
from .run import SequenceState, raw_step
from .runner import Runner
from .sampling import SamplingParams

__all__ = [  # (the shapes' names, re-exported from chunks.py, which defines them)
    "MIN_BUCKET", "MIN_CACHE", "PREFILL_CHUNK", "Model", "bucket", "prefill_chunks", "raw_step", "room",
]  # fmt: skip

RawSteps = Callable[[threading.Event, GenerationCounts], Iterator[RawStep]]


class Model:
    """A loaded chat model: tokenizer + runner (compiled programs, weights, prompt cache).

    >>> model = load_model()
    >>> ids = model.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}])
    >>> for step in model.generate(ids, max_tokens=32, temperature=0.0):
    ...     print(step.text, end="")

    It is an `Engine` too (`submit`), one that runs each generation alone on the thread that iterates it.
    """

    def __init__(
        self, config: ModelConfig, tokenizer: Tokenizer, transformer: Transformer, *, path: Path | None = None,
        mesh: jax.sharding.Mesh | None = None, weights_format: str = "float",
    ):  # fmt: skip
        self.config = config
        self.tokenizer = tokenizer
        self.path = path
        self.weights_format = weights_format
        """How the weights are held: "float" (dequantized to `dtype`), "as-file" (the GGUF's own blocks) or "int8"."""
        self.devices = 1 if mesh is None else mesh.size
        """How many devices the weights and caches are spread over (`load_model(devices=N)`, engine/mesh.py)."""
        self.mesh = mesh
        self.intervention: Intervention | None = None
        """What `intervened` changed in this model (None: the model as its file has it)."""
        self.runner = Runner(config, transformer, mesh)
        """What runs the transformer (`runner.py`): `model.runner.release_programs()` lets go of the compiled
        programs and the prompt cache."""
        self.dtype = self.runner.dtype
        self._active = 0
        self._counting = threading.Lock()

    @property
    def prompt_cache(self) -> PromptCache:
        """The runner's prompt cache: KV caches kept after each generation, keyed by the ids they hold."""
        return self.runner.prompt_cache

    @prompt_cache.setter
    def prompt_cache(self, cache: PromptCache) -> None:
        self.runner.prompt_cache = cache

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
        prompt = self.runner.check_prompt(prompt_ids)
        run = functools.partial(self._raw_steps, prompt, params, constraint)
        return self.generation(run, prompt, params, cancel, constraint.is_done if constraint is not None else None)

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

    @property
    def queued(self) -> int:
        """Always 0: a generation starts on the thread that iterates it, without a queue."""
        return 0

    @property
    def active(self) -> int:
        """Generations being iterated now (each on its own thread)."""
        return self._active

    def close(self) -> None:
        """Nothing to stop: each generation runs on its caller's thread (an `Engine` method)."""

    def generation(
        self, run: RawSteps, prompt: np.ndarray, params: SamplingParams, cancel: threading.Event | None,
        done: Callable[[], bool] | None,
    ) -> Generation:  # fmt: skip
        """The `Generation` that turns `run`'s raw steps for `prompt` into Steps (text, stop strings and stop tokens
        as `params` says); `done()` tells when a constraint is complete. `Scheduler.submit` makes its own with it."""
        stop_ids = frozenset() if params.ignore_eos else self.tokenizer.stop_ids
        return Generation(
            run, self.tokenizer, prompt_tokens=len(prompt), stop=params.stop, stop_ids=stop_ids, cancel=cancel,
            done=done,
        )  # fmt: skip

    def _raw_steps(
        self, prompt: np.ndarray, params: SamplingParams, constraint: Constraint | None, cancel: threading.Event,
        usage: GenerationCounts,
    ) -> Iterator[RawStep]:  # fmt: skip
        """Prefill, then decode until max_tokens, the window, the constraint's end or cancel; one RawStep each."""
        runner = self.runner
        budget = runner.budget(prompt, params)
        run = runner.start(prompt, params)
        usage.reused_tokens = runner.take_cache(run)
        self._count(+1)
        try:  # no lock is held across a yield: a caller may stop iterating at any step, or never come back
            for _ in runner.prefill(run, usage.reused_tokens, constraint):
                pass
            decode = self._decode_ahead if constraint is None else self._decode_constrained
            yield from decode(run, budget, cancel, constraint)
        finally:
            self._count(-1)
            runner.release(run)

    def _count(self, change: int) -> None:
        with self._counting:
            self._active += change

    def _decode_ahead(self, run: SequenceState, budget: int, cancel: threading.Event, _constraint) -> Iterator[RawStep]:
        """Unconstrained decoding: XLA computes step n while the host reads step n-1."""
        yield run.host(run.out)  # the first token goes out before the decode program is even dispatched
        pending = None
        for step in range(1, budget):
            if cancel.is_set():
                return
            self.runner.decode(run, step)
            if pending is not None:
                yield run.host(pending)
            pending = run.out
        if pending is not None and not cancel.is_set():
            yield run.host(pending)

    def _decode_constrained(
        self, run: SequenceState, budget: int, cancel: threading.Event, constraint
    ) -> Iterator[RawStep]:
        """Constrained decoding, step by step: each mask depends on the token before it."""
        for step in range(1, budget + 1):
            raw = run.host(run.out)
            constraint.advance(raw.token_id)
            yield raw
            if step == budget or cancel.is_set() or constraint.is_done():
                return
            self.runner.decode(run, step, self.runner.mask(constraint))

    def prefill(self, token_ids: Sequence[int]) -> int:
        """Put a prompt (prefix) in the prompt cache without generating; returns how many tokens were computed.

        A later request starting with these ids prefills only what follows (e.g. prewarm while the user types).
        """
        ids = self.runner.check_prompt(token_ids)
        return ids.size - self._prefill_reusing(ids)

    def attention(self, token_ids: Sequence[int], layer: int) -> np.ndarray:
        """Attention probabilities of `layer` for all heads over the whole sequence: float16 [h, T, T].

        Recomputed on demand (nothing is stored while decoding): one chunked prefill fills the cache and keeps
        this layer's queries ([T, h, e], small), then the rows are computed a chunk at a time and copied out, so
        memory is the output plus one chunk's scores.
        """
        if not 0 <= layer < self.config.n_layers:
            raise GenerationError(f"layer must be in [0, {self.config.n_layers}), got {layer}")
        ids = self.runner.check_prompt(token_ids)
        n, chunks = ids.size, []
        out = np.zeros((self.config.n_heads, n, n), np.float16)
        cache = self.runner.scratch_cache(ids)
        try:
            keep = lambda start, size, _hidden, queries: chunks.append((start, size, queries))  # noqa: E731
            cache = self.runner.forward(cache, prefill_chunks(ids, cache.length), layer, keep)
            for start, size, queries in chunks:
                rows = self.runner.attention_rows(queries, cache, layer, start)  # [1, h, w, T]
                out[:, start : start + size, :] = np.asarray(rows[0, :, :size, :n])
        finally:
            self.runner.keep(cache, ids)
        return out

    def logits(
        self, token_ids: Sequence[int], *, ablate_heads: Mapping[int, Sequence[int]] | None = None,
        steer: Mapping[int, np.ndarray] | None = None,
    ) -> np.ndarray:  # fmt: skip
        """Next-token logits after every position: float32 [T, V] (for tests and analysis; T is kept modest).

        `ablate_heads={layer: [heads]}`: those heads' outputs zeroed before the layer's output projection;
        `steer={layer: v}`: `v` (the model's width, or a `Direction` times a strength) added to the residual after
        that layer: the logits of `intervened(ablate_heads, steer)`, on the same compiled programs."""
        if ablate_heads or steer:
            return self.intervened(ablate_heads, steer).logits(token_ids)
        ids, rows = self.runner.check_prompt(token_ids), []
        cache = self.runner.scratch_cache(ids)
        try:
            keep = lambda _start, size, hidden, _queries: rows.append(self.runner.logits_of(hidden[:, :size]))  # noqa: E731
            cache = self.runner.forward(cache, prefill_chunks(ids, cache.length), on_chunk=keep)
        finally:
            self.runner.keep(cache, ids)
        return np.concatenate(rows)

    def intervened(
        self,
        ablate_heads: Mapping[int, Sequence[int]] | None = None,
        steer: Mapping[int, np.ndarray | Steer] | None = None,
    ) -> Model:
        """This model with attention heads knocked out (`ablate_heads={layer: [heads]}`: their outputs zeroed before
        the layer's output projection) and vectors added to the residual after layers (`steer={layer: v}`, `v` of
        the model's width or a `Direction` times a strength). It shares this model's weights and compiled programs
        (nothing is copied or compiled) and has a prompt cache of its own; `intervention` says what changed."""
        intervention = Intervention.of(self.config, ablate_heads, steer)
        keep, add = intervention.arrays(self.config)
        transformer = self.runner.transformer.intervened(keep, add)
        other = Model(self.config, self.tokenizer, transformer, path=self.path, mesh=self.mesh,
                      weights_format=self.weights_format)  # fmt: skip
        other.intervention = intervention
        return other

    def direction(self, layer: int, toward: str | Sequence[str], away: str | Sequence[str]) -> Direction:
        """The direction from `away` to `toward` in the residual stream after layer `layer` (0 to the model's
        layers less one, as `steer` and `ablate_heads` count them): the difference of the mean states over each
        side's texts' tokens, of length 1, with the median length of those states (`Direction.scale`).
        `model.intervened(steer={layer: direction * 4})` steers along it."""
        last = self.config.n_layers - 1
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer <= last:
            raise GenerationError(f"layer must be 0 to {last} (the model's layers, from 0), got {layer!r}")
        sides = [[toward] if isinstance(toward, str) else list(toward), [away] if isinstance(away, str) else list(away)]
        if not all(sides[0]) or not all(sides[1]) or not sides[0] or not sides[1]:
            raise GenerationError("direction needs at least one non-empty text on each side")
        toward_states, away_states = (np.concatenate([self._states_after(t, layer) for t in side]) for side in sides)
        return Direction.between(toward_states, away_states, layer, f"{_quoted(sides[0])} − {_quoted(sides[1])}")

    def _states_after(self, text: str, layer: int) -> np.ndarray:
        """The residual after layer `layer` (from 0) at each token of `text` (encoded as it is, without a template):
        [t, d]."""
        ids = self.tokenizer.encode(text)
        if not ids or len(ids) > PREFILL_CHUNK:
            raise GenerationError(f"each text of a direction is 1 to {PREFILL_CHUNK} tokens; one has {len(ids)}")
        return self.runner.layer_states(ids, (layer + 1,))[0]  # (layer_states counts the embedding as 0)

    def lens(
        self, token_ids: Sequence[int], k: int = 5, track: Sequence[int] | Sequence[Sequence[int]] | None = None
    ) -> inside.Lens:
        """The logit lens: what the model would predict after each position had it stopped after each layer. Row 0
        reads the embeddings, row i the residual after layer i, each through the final norm and output head (soft
        caps included); the last row is the model's own output. `.top_ids` and `.top_logprobs`: [n_layers + 1, T,
        k]. `track`: ids to follow through the layers however low they rank, the same at every position ([m]) or
        each position's own ([T, m]); `.tracked_logprobs` and `.tracked_ranks` (0: the top one) are [n_layers + 1,
        T, m]."""
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= self.config.vocab_size:
            raise GenerationError(f"k must be a whole number from 1 to the vocabulary's {self.config.vocab_size}")
        ids = self.runner.check_prompt(token_ids)
        follow = inside.tracked(track, ids.size, self.config.vocab_size)
        top_ids, top_logprobs, logprobs, ranks = self.runner.lens(ids, k, follow)
        return inside.Lens(top_ids=top_ids, top_logprobs=top_logprobs, tracked_ids=follow, tracked_logprobs=logprobs,
                           tracked_ranks=ranks)  # fmt: skip

    def attribution(
        self, token_ids: Sequence[int], target_id: int, *, method: inside.Method = "grad_x_input", steps: int = 32,
        contrast_id: int | None = None, progress: Callable[[int, int], None] | None = None,
    ) -> np.ndarray:  # fmt: skip
        """How much each position of `token_ids` made `target_id` the next token: float32 [T], per position the sum
        over the hidden dimension of (d log p(target) / d e_i) * e_i, e_i the vector fed to the first layer.
        `method="integrated_gradients"` averages the gradient over `steps` points from a zero input (its values add
        up to log p(target | ids) - log p(target | zeros)), calling `progress(done, steps)` as it goes;
        `contrast_id`: attribute log p(target) - log p(contrast), "why this rather than that"."""
        ids = self.runner.check_prompt(token_ids).tolist()
        try:
            return inside.attribution(self.runner.transformer, ids, target_id, method=method, steps=steps,
                                      contrast_id=contrast_id, progress=progress, kept=self.runner.looks)  # fmt: skip
        finally:
            release_freed_memory()  # (the backward pass's buffers: glibc kept ~0.5 GiB of them on the default model)

    def next_logits(self, token_ids: Sequence[int]) -> np.ndarray:
        """Next-token logits after the last position only: float32 [V] (a cached prefix is not computed again)."""
        last: list[jax.Array] = []
        keep = lambda _start, size, hidden, _queries: last.append(  # noqa: E731
            jax.lax.dynamic_index_in_dim(hidden, size - 1, 1)  # [1, 1, d]
        )
        self._prefill_reusing(self.runner.check_prompt(token_ids), keep)
        return self.runner.logits_of(last[-1])[0]

    def _prefill_reusing(self, ids: np.ndarray, on_chunk=None) -> int:
        """Prefill `ids` after the longest cached prefix (at least one token is computed); returns its length."""
        cache, reused = self.runner.reusing_cache(ids)
        try:
            cache = self.runner.forward(cache, prefill_chunks(ids, cache.length, reused), on_chunk=on_chunk)
            jax.block_until_ready(cache)  # done when it returns: its time is its own, not the next request's
        finally:
            self.runner.keep(cache, ids)
        return reused


def _quoted(texts: Sequence[str]) -> str:
    """Texts as a label says them: "a" or "a" + "b" (each cut to 40 characters, at a word)."""
    return " + ".join(f'"{_cut(t)}"' for t in texts[:3]) + (f" + {len(texts) - 3} more" if len(texts) > 3 else "")


def _cut(text: str, at: int = 40) -> str:
    if len(text) <= at:
        return text
    head = text[:at].rsplit(" ", 1)[0] or text[:at]
    return head + "…"
