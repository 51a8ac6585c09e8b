"""The runner: one model's compiled programs, its weights and its prompt cache, behind documented primitives.

Everything that runs the transformer goes through a `Runner` (`model.runner`); nothing else touches the programs.
One sequence, as `Model.generate` drives it:

    run = runner.start(prompt, params)               # its state: random key, knobs, the tokens seen
    reused = runner.take_cache(run)                  # its KV cache: the prompt cache's longest prefix, or a new one
    for width, last in runner.prefill(run, reused):  # one chunk per iteration ([1, 128] or [1, 16] tokens)
        pass                                         # (a scheduler decodes other rows in between)
    first = run.host(run.out)                        # the token the prefill sampled
    runner.decode(run, step=1)                       # token [1] at its position: keys/values written, next sampled
    runner.release(run)                              # its keys/values to the prompt cache

Many sequences, as `Scheduler` drives them: `batch()` (rows decoded together: `Batch.join`, `step`, `read`,
`free`, `resize`), `prefill_group(runs)` (short prompts prefilled as one chunk), `shared_prefix` and
`copy_prefix` (the prompt cache's longest prefix of a prompt, measured or copied into a row), `keep` (a cache to
the prompt cache). Passes that sample nothing (`Model.logits`, `attention`): `scratch_cache`, `reusing_cache`,
`forward`; `hidden_states` and `layer_states` (one or several layers' states of a short text, for a classifier
over them). Programs: `decode_ready` and `warm` (a batch shape compiled before it is needed), and
`release_programs` (every compiled program and cached prefix let go: what a notebook calls when a chapter is done).

The prompt cache is shared by every thread that runs sequences (a scheduler's loop, `Model.generate` callers);
the runner's lock guards it, never a program call (JAX programs are pure: each pass runs on a cache of its own).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import numpy as np

from jupyter_chatflow.errors import GenerationError
from jupyter_chatflow.model.config import ModelConfig
from jupyter_chatflow.model.transformer import KVCache, Transformer

from . import inside, prefill_group
from . import mesh as meshes
from .batch import Batch
from .chunks import MIN_BUCKET, PREFILL_CHUNK, bucket, cache_length, prefill_chunks, room
from .constraint import Constraint
from .generation import RawStep
from .programs import Programs, release_all, release_freed_memory
from .prompt_cache import MIN_KEPT_LENGTH, PromptCache
from .run import SequenceState
from .sampling import SamplingParams
from .stored import keep_until_exit

_log = logging.getLogger(__name__)
OnChunk = Callable[[int, int, jax.Array, jax.Array], None]
"""on_chunk(start, real size, hidden [1, w, d], the probed layer's queries [1, h, w, e]) after each prefill chunk."""
LENS_ROWS = 128
"""Residuals the logit lens reads at a time: one program for every layer, position and length ([128, V] float32
logits: 24 MiB on the default model)."""


class Runner:
    """One model's compiled programs, weights and prompt cache, and the primitives that run sequences on them."""

    def __init__(self, config: ModelConfig, transformer: Transformer, mesh: jax.sharding.Mesh | None = None):
        self.config = config
        self.dtype = transformer.dtype
        self.transformer = transformer
        """The model the programs run (its arrays are the programs' weights: `weight_bytes`)."""
        self.mesh = mesh
        """The device mesh the weights and caches are spread over (`engine/mesh.py`); None: one device."""
        self.cache_sharding = meshes.cache_sharding(config, mesh)
        on_cpu_mesh = mesh is not None and mesh.devices.flat[0].platform == "cpu"
        self._programs = Programs(transformer, one_at_a_time=on_cpu_mesh)
        self._weights = self._programs.weights  # the transformer's arrays, as the programs take them
        self.looks = inside.KeptPrograms()
        """Attribution's programs of the latest input width (`inside.attribution`), let go with the others."""
        self.prompt_cache = PromptCache()
        """Caches kept after each pass, keyed by the ids they hold: a prompt starting with one is not computed again."""
        self._lock = threading.Lock()
        self._anything = jax.device_put(np.ones((1, config.vocab_size), bool))  # the mask of no constraint

    @property
    def weight_bytes(self) -> int:
        """Memory of the weights the programs read."""
        return sum(w.nbytes for w in self._weights)

    # --- one sequence ---------------------------------------------------------------------------------------------

    def check_prompt(self, prompt_ids: Sequence[int]) -> np.ndarray:
        """The prompt as int32 [T], or GenerationError saying what is wrong with it."""
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

    def budget(self, prompt: np.ndarray, params: SamplingParams) -> int:
        """How many tokens may be generated after `prompt`: max_tokens, or what is left of the window."""
        return min(params.max_tokens, self.config.context_length - prompt.size)

    def start(self, prompt: np.ndarray, params: SamplingParams) -> SequenceState:
        """A sequence's state before its prefill: its random key, its knobs, the tokens seen (the prompt's from
        `params.penalty_from` on: those the repetition penalty counts). No cache yet."""
        seed = params.seed if params.seed is not None else int(np.random.default_rng().integers(2**31))
        seen = np.zeros((1, self.config.vocab_size), bool)
        seen[0, prompt[params.penalty_from :]] = True
        return SequenceState(prompt, seed, params.as_array(), seen)

    def take_cache(self, run: SequenceState) -> int:
        """Give `run` a KV cache of its own (the prompt cache's longest prefix of its prompt, or a new one); returns
        how many leading prompt tokens it holds already (not computed again)."""
        run.cache, reused = self._take(run.prompt, room(run.prompt.size))
        return reused

    def prefill(
        self, run: SequenceState, reused: int, constraint: Constraint | None = None
    ) -> Iterator[tuple[int, bool]]:
        """Prefill `run`'s prompt after its first `reused` tokens, one chunk per iteration, yielding (the chunk's
        width, whether it was the last); the last chunk also samples the first token into `run.out` (under the
        constraint's mask). A single token after a cached prefix (a fork, a prompt prewarmed all but its end) is a
        decode step: that program is compiled already, where a first 16-wide prefill would cost ~1 s of compiling."""
        *head, (start, tokens, size) = prefill_chunks(run.prompt, run.cache.length, reused)
        if not head and size == 1:
            self._feed(run, tokens[:, 0], start, 0, self.mask(constraint))
            yield 1, True
            return
        for part in head:
            run.cache = self.forward(run.cache, [part])  # (a failure below must not leave a consumed cache behind)
            yield part[1].shape[1], False
        cache = run.cache
        hidden, chunk, _ = self._programs.forward(self._weights, cache, tokens, np.int32(start), 0)
        run.cache = self._programs.write(cache, chunk, np.int32(start))
        run.out, run.seen = self._programs.sample_after(
            self._weights, hidden, np.int32(size - 1), run.knobs, run.seen, run.key_data[0], self.mask(constraint)
        )
        yield tokens.shape[1], True

    def decode(self, run: SequenceState, step: int, allowed: jax.Array | None = None) -> None:
        """Decode step `step` (1, 2, …) of `run`: its last sampled token (`run.out`, still on the device) through the
        one-row decode program, its keys/values written, the next token sampled into `run.out` among `allowed`
        ([1, V], from `mask`; None: any). The host is not waited for: the next step can be dispatched first."""
        self._feed(run, run.out.token, run.prompt.size + step - 1, step, self._anything if allowed is None else allowed)
        run.fed += 1

    def _feed(self, run: SequenceState, token: Any, pos: int, step: int, allowed: jax.Array) -> None:
        """token [1] at `pos` through `decode_rows` (a batch of one row), the next one sampled; a full cache first
        grows to the next length (a cache is sized for its prompt, not for max_tokens)."""
        if pos >= run.cache.length:
            run.cache = self._grow(run.cache, cache_length(pos + 1, self.config.context_length))
        at = np.array([pos], np.int32)
        run.out, chunk, run.seen = self._programs.decode_rows(
            self._weights, run.cache, token, at, run.seen, run.row_knobs, run.key_data, np.array([step], np.int32),
            allowed,
        )  # fmt: skip
        run.cache = self._programs.write(run.cache, chunk, at)
        self._programs.decoded(1, run.cache.length)  # (a scheduler's single row of this length needs no compile)

    def mask(self, constraint: Constraint | None) -> jax.Array:
        """The constraint's mask of allowed tokens now, [1, V] on the device (all True without one)."""
        allowed = None if constraint is None else constraint.allowed()
        return self._anything if allowed is None else jax.device_put(np.asarray(allowed, bool)[None])

    def release(self, run: SequenceState) -> None:
        """`run` is done: the keys/values it wrote go to the prompt cache (`keep`)."""
        self.keep(run.cache, run.written())

    def keep(self, cache: KVCache, ids: np.ndarray) -> None:
        """Give a cache holding `ids` to the prompt cache, and the memory freed since (caches cut or let go, a cache
        grown by copying) back to the OS: glibc keeps freed heap pages otherwise (<1 ms)."""
        if not cache.keys[0].is_deleted():  # a program that failed mid-call may have consumed it
            with self._lock:
                self.prompt_cache.put(ids, cache)
        release_freed_memory()

    def shared_prefix(self, prompt: np.ndarray) -> int:
        """How many leading tokens of `prompt` the prompt cache holds now (the entry is left in place)."""
        with self._lock:
            return self.prompt_cache.longest(prompt)[1]

    def copy_prefix(self, prompt: np.ndarray, cache: KVCache, row: int) -> tuple[KVCache, int]:
        """`cache` (a batch's, donated) with the prompt cache's longest prefix of `prompt` copied into row `row`,
        and that prefix's length (the entry stays cached: a copy, not a take)."""
        with self._lock:  # the copy is dispatched before anyone can take the entry (and donate its arrays)
            entry, reused = self.prompt_cache.longest(prompt)
            if entry is None:
                return cache, 0
            length = min(bucket(reused, MIN_KEPT_LENGTH), entry.cache.length, cache.length)
            return self._programs.write_row(cache, entry.cache, np.int32(row), length), reused

    def _take(self, prompt: np.ndarray, needed: int) -> tuple[KVCache, int]:
        """A cache of its own for one pass, and the prefix of `prompt` it holds. The lock guards only the prompt
        cache: passes run side by side, each on its own cache."""
        with self._lock:
            return self.prompt_cache.take(prompt, cache_length(needed, self.config.context_length), self._grow)

    def _grow(self, cache: KVCache | None, length: int) -> KVCache:
        """A new cache of `length` positions, holding a copy of `cache` at its start. What the prompt cache just
        freed (entries cut) goes back to the OS first: freed on other threads' heaps, glibc would not reuse it."""
        release_freed_memory()
        empty = self.empty_cache(1, length)
        return empty if cache is None else self._programs.write(empty, cache, np.int32(0))

    def empty_cache(self, rows: int, length: int) -> KVCache:
        """A cache of `rows` rows of `length` positions, zeros, placed as the mesh places caches (if any)."""
        return KVCache.zeros(self.config, rows, length, self.dtype, self.cache_sharding)

    # --- passes that sample nothing ---------------------------------------------------------------------------------

    def scratch_cache(self, ids: np.ndarray) -> KVCache:
        """A cache for a pass over `ids` that needs every position computed (reusing a prefix would skip some)."""
        cache, _ = self._take(ids[:1], room(ids.size))  # a one-token "prompt" shares no prefix worth using
        return cache

    def reusing_cache(self, ids: np.ndarray) -> tuple[KVCache, int]:
        """A cache for a pass over `ids` holding the prompt cache's longest prefix of them, and its length."""
        return self._take(ids, room(ids.size))

    def forward(
        self, cache: KVCache, chunks: Sequence[tuple[int, np.ndarray, int]] | Iterator[tuple[int, np.ndarray, int]],
        probe_layer: int = 0, on_chunk: OnChunk | None = None,
    ) -> KVCache:  # fmt: skip
        """Run `chunks` ((start, tokens [1, w], size), from `prefill_chunks`) through every layer into `cache`
        (donated; the filled cache is returned), sampling nothing; `on_chunk` sees each."""
        for start, tokens, size in chunks:
            at = np.int32(start)
            hidden, chunk, queries = self._programs.forward(self._weights, cache, tokens, at, probe_layer)
            cache = self._programs.write(cache, chunk, at)
            if on_chunk is not None:
                on_chunk(start, size, hidden, queries)
        return cache

    def lens(self, ids: np.ndarray, k: int, track: np.ndarray) -> tuple[np.ndarray, ...]:
        """The logit lens over `ids` on the serving path: the residual before the first layer and after each, at
        every position (the prefill's chunks and layer programs, over a scratch cache), read through the final norm
        and the output head `LENS_ROWS` residuals at a time. Returns the top-k ids (int32) and log-probabilities
        (float32), [n_layers + 1, T, k], and the log-probabilities and ranks of the ids `track` [T, m] holds for
        each position, [n_layers + 1, T, m]. Compiles only the reading program, once per k and m (the residuals
        cross to the host between the two: slicing and stacking them on the device would compile a small program
        per length)."""
        cache, chunks = self.scratch_cache(ids), []
        for start, tokens, size in prefill_chunks(ids, cache.length):  # (the cache is kept nowhere after)
            at, stream = np.int32(start), list[jax.Array]()
            _hidden, chunk, _ = self._programs.forward(self._weights, cache, tokens, at, 0, stream)
            cache = self._programs.write(cache, chunk, at)
            chunks.append(np.stack([np.asarray(x, np.float32)[0, :size] for x in stream]))  # [L + 1, size, d]
        layers = self.config.n_layers + 1
        rows = np.concatenate(chunks, axis=1).reshape(-1, self.config.dim)  # [(L + 1) * T, d], layer-major
        tracked = np.tile(np.asarray(track, np.int32), (layers, 1))  # [(L + 1) * T, m]
        block = np.zeros((LENS_ROWS, self.config.dim), np.float32)
        block_track = np.zeros((LENS_ROWS, tracked.shape[1]), np.int32)
        m, total = tracked.shape[1], rows.shape[0]
        out = (
            np.empty((total, k), np.int32),
            np.empty((total, k), np.float32),
            np.empty((total, m), np.float32),
            np.empty((total, m), np.int32),
        )  # fmt: skip  (filled in place: no second copy of a large k's)
        for first in range(0, total, LENS_ROWS):
            n = min(LENS_ROWS, total - first)
            block[:n], block[n:] = rows[first : first + n], 0.0
            block_track[:n], block_track[n:] = tracked[first : first + n], 0
            for into, got in zip(out, self._programs.lens_top(self._weights, block, block_track, k), strict=True):
                into[first : first + n] = np.asarray(got)[:n]
        return tuple(array.reshape(layers, ids.size, -1) for array in out)

    def logits_of(self, hidden: jax.Array) -> np.ndarray:
        """Vocabulary logits [s, V] of one row's hidden states [1, s, d]."""
        return np.asarray(self._programs.logits(self._weights, hidden))[0]

    def attention_rows(self, queries: jax.Array, cache: KVCache, layer: int, start: int) -> jax.Array:
        """float16 attention probabilities [1, h, w, T] of a chunk's queries [1, h, w, e] (at `start`) of `layer`
        over the keys `cache` holds."""
        window, cap = self.config.window_of(layer), self.config.attn_softcap
        return self._programs.rows(queries, cache.keys[layer], np.int32(start), window, cap)

    def hidden_states(self, ids: Sequence[int], layer: int, width: int | None = None) -> np.ndarray:
        """The hidden states [t, d] after the first `layer` layers for the tokens `ids` at positions 0.. (features
        for a classifier over the model's own states), kept nowhere: one chunk zero-padded to `width` (default the
        prefill chunk that holds them: the chat's programs) over an empty cache of the first length."""
        return self.layer_states(ids, (layer,), width)[0]

    def layer_states(self, ids: Sequence[int], layers: Sequence[int], width: int | None = None) -> np.ndarray:
        """`hidden_states` after each of `layers` from one pass (as deep as the deepest): [len(layers), t, d]."""
        width = width or (PREFILL_CHUNK if len(ids) > MIN_BUCKET else MIN_BUCKET)
        if not 0 < len(ids) <= width:
            raise GenerationError(f"hidden_states takes 1 to {width} tokens; got {len(ids)}")
        if not layers or not all(0 <= n <= self.config.n_layers for n in layers):
            raise GenerationError(f"layers are 0 to {self.config.n_layers} (0: the embedding); got {list(layers)}")
        tokens = np.zeros((1, width), np.int32)
        tokens[0, : len(ids)] = ids
        start, length = np.int32(0), cache_length(width, self.config.context_length)
        shape = (1, self.config.n_kv_heads, length, self.config.head_dim)
        empty = jax.device_put(np.zeros(shape, self.dtype))  # (read by nothing; made without a program)
        x, cos, sin = self._programs.embed_chunk(self._weights, tokens, start)  # x [1, width, d]
        kept = {0: x} if 0 in layers else {}
        for i in range(max(layers)):
            x, _keys, _values, _queries = self._programs.layer(i, x, cos, sin, empty, empty, start)
            if i + 1 in layers:
                kept[i + 1] = x
        return np.stack([np.asarray(kept[n], np.float32)[0, : len(ids)] for n in layers])  # (no slicing program)

    # --- many sequences ---------------------------------------------------------------------------------------------

    def batch(self) -> Batch:
        """An empty batch of rows on this runner's programs (`Batch.resize` gives it rows)."""
        return Batch(self._programs, self.empty_cache, self.config)

    def fits_group(self, prompt: np.ndarray) -> bool:
        """Whether `prompt` can be prefilled in a group (`prefill_group.fits`)."""
        return prefill_group.fits(prompt, self.shared_prefix(prompt))

    def prefill_group(self, runs: Sequence[SequenceState]) -> list[tuple[RawStep, int] | None]:
        """Prefill several started runs as one chunk (`prefill_group.prefill`): per run, (its first token, the
        prefix reused) with `run.cache` set, or None where it must be prefilled alone."""
        return prefill_group.prefill(self, self._programs, runs)

    # --- programs ---------------------------------------------------------------------------------------------------

    def decode_ready(self, rows: int, length: int) -> bool:
        """Whether a batch of `rows` x `length` decodes without compiling first."""
        return self._programs.decode_ready(rows, length)

    def has_decoded(self) -> bool:
        """Whether this model's programs have decoded in this process (a turn ran: a cell's, a panel's, a chat's), so
        its next turn is not a first one; `release_programs()` makes it cold again."""
        return self._programs.has_decoded()

    def warm(self, rows: int, length: int) -> None:
        """Compile (or load from the persistent XLA cache) the decode programs of a batch of `rows` x `length` on
        this thread, each run once on ones, taking no lock (a scheduler calls it beside a decoding batch)."""
        self._programs.warm(rows, length, self.config, self.dtype, self.cache_sharding)

    def warm_in_background(self, rows: int, length: int, done: Callable[[bool], None]) -> threading.Thread:
        """`warm` on a thread of its own (returned, started); `done(compiled)` is called on it at the end (False: the
        compile failed, and the batch's first step will compile the programs on its own thread instead)."""

        def compile_them() -> None:
            try:
                self.warm(rows, length)
            except Exception:
                _log.debug("compiling the decode programs of %d x %d rows failed", rows, length, exc_info=True)
                done(False)
            else:
                done(True)

        thread = keep_until_exit(threading.Thread(target=compile_them, name="chatflow-warm", daemon=True))
        thread.start()
        return thread

    def release_programs(self) -> None:
        """Let go of every compiled program (this process's: `jax.clear_caches()`) and every prompt cache entry,
        and give that memory back to the OS: ~50-80 MiB per decode program compiled. The next generation compiles
        what it needs again (or loads it from the persistent XLA cache, ~1 s for the default model). For a
        notebook chapter that is done (`model.runner.release_programs()`); a generation running meanwhile is not
        disturbed, only slowed by the compile it then needs."""
        with self._lock:
            self.prompt_cache.clear()
        self.looks.clear()
        release_all()
