"""The compiled XLA programs of one model: prefill (layer by layer), decode, cache write, logits, attention rows.

Each is a pure function of the model's state and plain arrays; `Programs` jits them with the model's graph
structure closed over and takes the state as a flat list of arrays. (Passing the NNX GraphDef as a static
argument made JAX hash it on every call, ~5 ms of a ~20 ms decode step; an NNX State is flattened by Python
callbacks on every call, a plain list in C++.)
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import ctypes.util
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from jupyter_chatflow.model.compile_clock import compile_seconds
from jupyter_chatflow.model.config import ModelConfig
from jupyter_chatflow.model.transformer import KVCache, Transformer, attention_rows

from .chunks import MID_CHUNK, MIN_CACHE
from .prompt_cache import MIN_KEPT_LENGTH
from .sampling import GREEDY_KNOBS, sample
from .stored import StoredProgram, architecture_key, clear_all, preload_in_background, stopping

N_ALTERNATIVES = 5
_KEY_DATA = jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0))).shape  # a key's raw data: (2,)


def logits(graphdef, state, hidden):
    """Vocabulary logits [b, s, V] for hidden states [b, s, d]."""
    model = nnx.merge(graphdef, state)
    b, s, d = hidden.shape
    return model.logits(hidden.reshape(b * s, d)).reshape(b, s, -1)


def _sample_next(model: Transformer, hidden, knobs, seen, key, step, allowed):
    """Sample from the logits of hidden [b, d] among `allowed` [b, V]; mark the chosen token seen. `key` and
    `step` are one for the batch, or one per row ([b]: each row its own sequence)."""
    fold = jax.vmap(jax.random.fold_in) if jnp.ndim(step) == 1 else jax.random.fold_in
    out = sample(model.logits(hidden), knobs, seen, fold(key, step), N_ALTERNATIVES, allowed)
    return out, seen.at[jnp.arange(hidden.shape[0]), out.token].set(True)


def embed_chunk(graphdef, state, tokens, start):
    """The first layer's input for a chunk [b, s] at `start`: (x [b, s, d], RoPE cos, sin)."""
    return nnx.merge(graphdef, state).embed_chunk(tokens, start)


def final_norm(graphdef, state, x):
    """The last layer's output [b, s, d] normed: the hidden states the logits are computed from."""
    return nnx.merge(graphdef, state).norm(x)


def layer(graphdef, state, x, cos, sin, keys, values, start):
    """One transformer layer on a prompt chunk: `Block.__call__` (x, the chunk's keys, values and queries)."""
    return nnx.merge(graphdef, state)(x, cos, sin, keys, values, start)


def sample_after(graphdef, state, hidden, last, knobs, seen, key_data, allowed):
    """The first token, sampled after position `last` of a prompt's last chunk (hidden [b, s, d]) with the random
    key whose data is `key_data` [2]: a small program of its own, the same for every cache length."""
    model = nnx.merge(graphdef, state)
    key = jax.random.wrap_key_data(key_data)
    return _sample_next(model, jax.lax.dynamic_index_in_dim(hidden, last, 1, False), knobs, seen, key, 0, allowed)


def sample_rows_after(graphdef, state, hidden, last, knobs, seen, key_data, allowed):
    """`sample_after` for prompts prefilled together, one per row: row i's first token after its position
    `last[i]` of the chunk (hidden [b, s, d]), with its own knobs [b, 5] and key (`key_data` [b, 2])."""
    model = nnx.merge(graphdef, state)
    rows = hidden[jnp.arange(hidden.shape[0]), last]  # [b, d]
    key = jax.random.wrap_key_data(key_data)
    return _sample_next(model, rows, knobs, seen, key, jnp.zeros_like(last), allowed)


def decode_rows(graphdef, state, cache, token, pos, seen, knobs, key_data, step, allowed):
    """One decode step of a batch of independent sequences: token [b] forwarded at its row's position `pos` [b]
    (the cache [b, k, T, e] per layer), the next sampled with the row's own knobs [b, 5], key (`key_data` [b, 2],
    `jax.random.key_data` of each row's key), `step` [b] and mask `allowed` [b, V]; returns (the sampler's output,
    the step's keys/values [b, k, 1, e] per layer, `seen` [b, V] with the new tokens marked). `Model.generate` runs
    it with one row: the program a scheduler's single row runs too."""
    model = nnx.merge(graphdef, state)
    hidden, chunk, _ = model(token[:, None], pos, cache)  # hidden [b, 1, d]
    key = jax.random.wrap_key_data(key_data)
    out, seen = _sample_next(model, hidden[:, 0], knobs, seen, key, step, allowed)
    return out, chunk, seen


def lens_top(graphdef, state, x, track, k: int):
    """The logit lens's reading of residuals x [n, d]: each through the final norm and the output head (soft caps
    included), its top `k` next tokens [n, k] int32 and their log-probabilities [n, k] float32; and for the ids
    `track` [n, m] of each row, their log-probabilities and ranks [n, m] (0: the top one)."""
    model = nnx.merge(graphdef, state)
    logits = model.logits(model.norm(x))  # [n, V] float32
    total = jax.nn.logsumexp(logits, axis=-1, keepdims=True)  # (no [n, V] log_softmax: the top, less this)
    values, indices = jax.lax.top_k(logits, k)
    tracked = jnp.take_along_axis(logits, track, axis=1)  # [n, m]
    ranks = jnp.sum(logits[:, None, :] > tracked[:, :, None], axis=-1, dtype=jnp.int32)
    return indices.astype(jnp.int32), values - total, tracked - total, ranks


def write_row(cache: KVCache, source: KVCache, row, length: int) -> KVCache:
    """Copy the first `length` positions of a one-row cache into row `row` of a batch's cache, in place."""
    return KVCache(
        keys=tuple(_put_row(c, n, row, length) for c, n in zip(cache.keys, source.keys, strict=True)),
        values=tuple(_put_row(c, n, row, length) for c, n in zip(cache.values, source.values, strict=True)),
    )


def _put_row(cache: jax.Array, source: jax.Array, row, length: int) -> jax.Array:
    return jax.lax.dynamic_update_slice(cache, source[:, :, :length], (row, 0, 0, 0))


def read_row(cache: KVCache, row, length: int) -> KVCache:
    """Row `row` of a batch's cache, its first `length` positions, as a one-row cache of its own (a copy)."""
    cut = lambda a: jax.lax.dynamic_slice_in_dim(a, row, 1, axis=0)[:, :, :length]  # noqa: E731
    return KVCache(keys=tuple(map(cut, cache.keys)), values=tuple(map(cut, cache.values)))


def select_rows(cache: KVCache, rows) -> KVCache:
    """A batch's cache with the rows `rows` [b'] (in that order, repeats allowed): shrinking or growing a batch."""
    pick = lambda a: jnp.take(a, rows, axis=0)  # noqa: E731
    return KVCache(keys=tuple(map(pick, cache.keys)), values=tuple(map(pick, cache.values)))


def set_row(array: jax.Array, row, value: jax.Array) -> jax.Array:
    """array[row] = value[0], in place (a joining sequence's row of the batch's `seen` mask)."""
    return jax.lax.dynamic_update_slice_in_dim(array, value.astype(array.dtype), row, axis=0)


def write(cache: KVCache, chunk: KVCache, start) -> KVCache:
    """Store a chunk's keys/values in the cache, in place (its own program: see `transformer.Attention`)."""
    return cache.write(chunk, start)


def rows(queries, keys, start, window: int = 0, cap: float = 0.0):
    """float16 attention probabilities [b, h, s, T] of one chunk of queries (see `attention_rows`)."""
    return attention_rows(queries, keys, start, window, cap).astype(jnp.float16)


class Programs:
    """The jitted programs of one model: argument lists as above, with `(graphdef, state)` replaced by
    `self.weights`, the state's leaves (`layer(i, ...)` passes layer i's own leaves, `self.layers[i]`).

    Layers whose weights have one structure share one layer program: every layer of a float model, where a file
    that mixes formats per layer (a Q4_K_M file's Q6_K ffn_down in some layers, loaded `weights="as-file"`) gets one
    program per distinct structure (`layer_kinds`).

    A prompt chunk goes through the layers one program call each (`forward`), a decode step through one fused
    program. XLA:CPU keeps ~5 KB per HLO instruction of every compiled program (the module, its buffer
    assignment): a whole-model program unrolls 30 layers and holds 60-80 MiB, one per chunk width and cache
    length, where one layer's program holds a thirtieth of that. Thirty dispatches cost nothing measurable
    next to a prefill chunk's compute, but ~3-10% of a ~12 ms decode step on 2 cores, so decoding stays fused.
    """

    def __init__(self, transformer: Transformer, *, one_at_a_time: bool = False):
        """`one_at_a_time`: each call waits for its program to finish before the lock is let go (a mesh of CPU
        devices: see `_serial`). `transformer` may be abstract (its weights `jax.ShapeDtypeStruct`s, `ahead.py`):
        then its programs can be prepared, for the model of that architecture being loaded, but not run."""
        self._one_at_a_time = one_at_a_time
        graphdef, state = nnx.split(transformer)
        self.weights, structure = jax.tree.flatten(state)
        kinds, kind_of = layer_kinds(transformer)
        self._kind_of = kind_of
        self.layers = [jax.tree.leaves(nnx.state(block)) for block in transformer.blocks]  # the same arrays
        self._jitted = jitted = _jitted_for((graphdef, structure, kinds))
        if not any(isinstance(w, jax.ShapeDtypeStruct) for w in self.weights):
            jitted.serve(self)
        # (one architecture's programs serve its float32 and bfloat16 models alike, compiled once for each)
        self._dtypes = tuple(sorted({str(w.dtype) for w in self.weights}))
        self._lock = jitted.lock  # (one per architecture: models sharing programs compile them once)
        serial = self._serial
        self.embed_chunk, self.final_norm = serial(jitted.embed_chunk), serial(jitted.final_norm)
        programs = [serial(program) for program in jitted.layers]
        self._layer_programs = [programs[kind] for kind in kind_of]  # layer i's program
        self.sample_after, self.logits = serial(jitted.sample_after), serial(jitted.logits)
        self.sample_rows_after = serial(jitted.sample_rows_after)
        self.decode_rows = serial(jitted.decode_rows)
        self.lens_top = serial(jitted.lens_top)
        self.write, self.write_row = serial(jitted.write), serial(jitted.write_row)
        self.read_row, self.select_rows = serial(jitted.read_row), serial(jitted.select_rows)
        self.set_row, self.rows = serial(jitted.set_row), serial(jitted.rows)
        self.preloading = False
        """Whether this model started loading its architecture's programs stored by an earlier process's first
        turn (once per architecture and process: the latest model's weights run each loaded program once)."""
        if not jitted.preloading:
            jitted.preloading = True
            self.preloading = bool(preload_in_background(jitted.architecture, jitted.model_weights))

    @property
    def architecture(self) -> str:
        """The key of the model's architecture: its graph and weights' structure (`stored.architecture_key`)."""
        return self._jitted.architecture

    def first_arguments(self) -> list[list]:
        """The weights the model's programs take first: the whole model's, and one layer's of each kind (the layer
        programs', one program per kind)."""
        one_per_kind = {id(program): w for program, w in zip(self._layer_programs, self.layers, strict=True)}
        return [self.weights, *one_per_kind.values()]

    def forward(
        self, weights: list[jax.Array], cache: KVCache, tokens, start, probe_layer: int,
        stream: list[jax.Array] | None = None,
    ):  # fmt: skip
        """A prompt chunk [b, s] at `start` through every layer: (hidden [b, s, d], its keys/values, the queries
        [b, h, s, e] of layer `probe_layer`). `stream` (a list) gets the residual [b, s, d] before the first layer
        and after each one."""
        x, cos, sin = self.embed_chunk(weights, tokens, start)
        keys, values, probed = [], [], None
        if stream is not None:
            stream.append(x)
        for i in range(len(self.layers)):
            x, k, v, queries = self.layer(i, x, cos, sin, cache.keys[i], cache.values[i], start)
            keys.append(k)
            values.append(v)
            probed = queries if i == probe_layer else probed
            if stream is not None:
                stream.append(x)
        return self.final_norm(weights, x), KVCache(keys=tuple(keys), values=tuple(values)), probed

    def layer(self, i: int, *args: Any) -> Any:
        """Layer `i` on a chunk (`layer`'s arguments after the weights: x, cos, sin, keys, values, start), through
        the program of its weights' structure."""
        return self._layer_programs[i](self.layers[i], *args)

    def decode_ready(self, rows: int, length: int) -> bool:
        """Whether a batch of `rows` rows of `length` positions decodes without compiling first."""
        return (rows, length, self._dtypes) in self._jitted.decode_ready

    def has_decoded(self) -> bool:
        """Whether a decode step of this model's architecture and dtypes has run (or been compiled) in this process:
        its first turn's programs are compiled, whichever chat, panel or cell ran it."""
        return any(dtypes == self._dtypes for _, _, dtypes in self._jitted.decode_ready)

    def decoded(self, rows: int, length: int) -> None:
        """A batch of that shape ran its decode step (its programs compiled on the way, if they were not)."""
        self._jitted.decode_ready.add((rows, length, self._dtypes))

    def first_turn(self, config: ModelConfig, dtype: Any) -> list[Callable[[], None]]:
        """Load (or compile and store) the programs a chat's first turn runs, at their usual shapes: a prompt in one
        middle chunk (`MID_CHUNK` wide, ~40 tokens with its system prompt), a cache of `MIN_CACHE` positions that a
        scheduler's row takes, one-row decode steps. For an abstract model's programs (`ahead.py`: while the model
        loads); returns the first run of each program it made (`StoredProgram.prepare`), for once the loaded model's
        weights exist. When the interpreter exits (it waits for the thread) it stops before the next program."""
        try:
            return self._first_turn(config, dtype)
        except _Exiting:
            return []

    def _first_turn(self, config: ModelConfig, dtype: Any) -> list[Callable[[], None]]:
        spec, jitted = jax.ShapeDtypeStruct, self._jitted
        runs = []

        def prepare(program: StoredProgram, *args: Any) -> Any:
            if stopping():
                raise _Exiting
            if (first_run := program.prepare(*args, weights=jitted.model_weights)) is not None:
                runs.append(first_run)
            return program.shapes(*args)

        tokens, start = spec((1, MID_CHUNK), jnp.int32), spec((), jnp.int32)  # (as `Runner.prefill` passes them)
        x, cos, sin = prepare(jitted.embed_chunk, self.weights, tokens, start)
        one = spec((1, config.n_kv_heads, MIN_CACHE, config.head_dim), dtype)
        for kind, program in enumerate(jitted.layers):
            weights = self.layers[self._kind_of.index(kind)]
            _, keys, values, _ = prepare(program, weights, x, cos, sin, one, one, start)
        hidden = prepare(jitted.final_norm, self.weights, x)
        cache = KVCache(keys=(one,) * config.n_layers, values=(one,) * config.n_layers)  # type: ignore[arg-type]  # (shapes only)
        chunk = KVCache(keys=(keys,) * config.n_layers, values=(values,) * config.n_layers)
        prepare(jitted.write, cache, chunk, start)
        masks, knobs = spec((1, config.vocab_size), jnp.bool_), spec((len(GREEDY_KNOBS),), jnp.float32)
        prepare(jitted.sample_after, self.weights, hidden, start, knobs, masks, spec(_KEY_DATA, jnp.uint32), masks)
        prepare(jitted.write_row, cache, cache, start, MIN_KEPT_LENGTH)  # (the scheduler's row takes the prompt)
        prepare(jitted.set_row, masks, start, masks)
        if stopping():
            raise _Exiting
        runs += self._prepare_decode(1, MIN_CACHE, config, dtype, None, jitted.model_weights)
        return runs

    def warm(self, rows: int, length: int, config: ModelConfig, dtype: Any, sharding: Any = None) -> None:
        """Load (or trace, compile and store: `stored.py`) the decode step and its cache write of a batch of
        `rows` rows of `length` positions, on this thread, each run once on ones (its first run's cost: the batch's
        first step took 235 ms against 45 without it), taking no lock: the scheduler has it done beside a batch that
        is decoding, which a compile on its own thread would stall for ~1-2 s (the decode program's tracing alone
        takes 0.5 s). On a mesh, `sharding` is the caches' (the program compiled must be the one the batch's sharded
        caches call)."""
        if self.decode_ready(rows, length):
            return
        for first_run in self._prepare_decode(rows, length, config, dtype, sharding):
            first_run()

    def _prepare_decode(
        self, rows: int, length: int, config: ModelConfig, dtype: Any, sharding: Any,
        weights: Callable[[], list[list] | None] | None = None,
    ) -> list[Callable[[], None]]:  # fmt: skip
        """`warm`'s loads or compiles, and their first runs (`StoredProgram.prepare`)."""
        spec = jax.ShapeDtypeStruct
        shape = (rows, config.n_kv_heads, length, config.head_dim)
        layers = tuple(spec(shape, dtype, sharding=sharding) for _ in range(config.n_layers))
        cache = KVCache(keys=layers, values=layers)  # type: ignore[arg-type]  # shapes only: jit lowers them
        ints, masks = spec((rows,), jnp.int32), spec((rows, config.vocab_size), jnp.bool_)
        knobs, keys = spec((rows, len(GREEDY_KNOBS)), jnp.float32), spec((rows, *_KEY_DATA), jnp.uint32)
        args = (self.weights, cache, ints, ints, masks, knobs, keys, ints, masks)  # as `_Batch.step` passes them
        runs = [self._jitted.decode_rows.prepare(*args, weights=weights)]
        step = tuple(spec((rows, config.n_kv_heads, 1, config.head_dim), dtype, sharding=sharding) for _ in layers)
        runs.append(self._jitted.write.prepare(cache, KVCache(keys=step, values=step), ints))  # type: ignore[arg-type]  # (the step's keys)
        self.decoded(rows, length)
        release_freed_memory()  # (as `_serial` does after a compile: the compiler's temporaries go back to the OS)
        return [run for run in runs if run is not None]

    def _serial(self, program: Callable[..., Any]) -> Callable[..., Any]:
        """`program`, called one thread at a time, and glibc told to return freed memory after it compiled.

        XLA compiles a program (or loads it from the persistent cache) on the calling thread, holding ~100 MiB
        of temporaries for a model-sized one: sessions starting side by side would compile side by side and add
        those up. The lock covers only the call (a dispatch once compiled), never a wait for the result, except on
        a mesh of CPU devices (`one_at_a_time`): there XLA:CPU runs each device's part of a program on a shared
        pool of threads, and with several sharded programs in flight on a 2-core machine one device's part of each
        waited at a collective for a part that had no thread left to run on (the process aborted after 40 s, at
        the default model's first prefill, two runs in two); waiting for each program ended that (3 runs in 3).
        """

        def call(*args: Any) -> Any:
            with self._lock:
                before = compile_seconds()
                out = program(*args)
                if self._one_at_a_time:
                    jax.block_until_ready(out)
                if compile_seconds() != before:
                    release_freed_memory()
            return out

        return call


class _Exiting(Exception):
    """The interpreter exits: `Programs.first_turn` stops before its next program."""


class _Jitted:
    """The jitted programs of one model architecture (its graph and the structure of its weights), shared by
    every `Programs` of that architecture: each model's weights are an argument, so a second model of the same
    architecture (the same file loaded again, a new panel's model, a test's) runs on programs already compiled."""

    def __init__(self, graphdef: Any, structure: Any, kinds: tuple[tuple[Any, Any], ...]):
        def bind(program, graphdef=graphdef, structure=structure):
            def bound(weights, *args):
                return program(graphdef, jax.tree.unflatten(structure, weights), *args)

            bound.__name__ = bound.__qualname__ = program.__name__  # (XLA's logs and profiles name the program)
            return bound

        self.lock = threading.Lock()
        self.decode_ready: set[tuple[int, int, tuple[str, ...]]] = set()
        """(rows, cache length, the weights' dtypes) of each batch whose decode step and cache write are compiled
        (`Programs.warm`)."""
        self.architecture = architecture = architecture_key(graphdef, structure, kinds)
        self.preloading = False
        self._model: Callable[[], Programs | None] = lambda: None
        self._model_ready = threading.Event()

        def stored(program, *bound_to, static_argnums=(), model=True, ends_first_turn=False, **jit):
            jitted = jax.jit(bind(program, *bound_to) if model else program, static_argnums=static_argnums, **jit)
            return StoredProgram(jitted, program.__name__, static_argnums=static_argnums, architecture=architecture,
                                 ends_first_turn=ends_first_turn)  # fmt: skip

        self.embed_chunk = stored(embed_chunk)
        self.layers = [stored(layer, graph, layer_structure) for graph, layer_structure in kinds]
        self.final_norm = stored(final_norm)
        self.sample_after = stored(sample_after, donate_argnums=(4,))
        self.sample_rows_after = stored(sample_rows_after, donate_argnums=(4,))
        self.logits = stored(logits)
        self.decode_rows = stored(decode_rows, donate_argnums=(4,), ends_first_turn=True)
        self.lens_top = stored(lens_top, static_argnums=(3,))
        # (programs of any model's caches: their shapes say which; kept with the architecture that used them)
        self.write = stored(write, model=False, donate_argnums=(0,))
        self.write_row = stored(write_row, model=False, donate_argnums=(0,), static_argnums=(3,))
        self.read_row = stored(read_row, model=False, static_argnums=(2,))
        self.select_rows = stored(select_rows, model=False)
        self.set_row = stored(set_row, model=False, donate_argnums=(0,))
        self.rows = stored(rows, model=False, static_argnums=(3, 4))

    def serve(self, programs: Programs) -> None:
        """`programs`, a loaded model's, is the one whose weights run this architecture's programs once when they
        were loaded or compiled before it (a preload, or `ahead.py` while the model loaded: `model_weights`)."""
        self._model = weakref.ref(programs)
        self._model_ready.set()

    def model_weights(self) -> list[list] | None:
        """`Programs.first_arguments` of the latest loaded model of this architecture, waiting up to
        `MODEL_WAIT_S` while one loads; None once it is gone (nothing keeps a model alive for this)."""
        deadline = time.monotonic() + MODEL_WAIT_S
        while not self._model_ready.wait(0.05):
            if stopping() or time.monotonic() > deadline:
                return None
        alive = self._model()
        return None if alive is None else alive.first_arguments()


MODEL_WAIT_S = 120.0
"""How long a program loaded or compiled ahead of its model waits for the model's weights to run once."""
KEEP_RECENT = 2  # architectures whose programs outlive their models (a model loaded again compiles nothing)
_shared: weakref.WeakValueDictionary[tuple, _Jitted] = weakref.WeakValueDictionary()  # those of live models
_recent: collections.deque[_Jitted] = collections.deque(maxlen=KEEP_RECENT)
_shared_lock = threading.Lock()


def architecture_of(transformer: Transformer) -> str:
    """The key of a transformer's programs, computed anew (`Programs.architecture` is the key of the shared programs
    it was given, found by equality: `_jitted_for`)."""
    graphdef, state = nnx.split(transformer)
    return architecture_key(graphdef, jax.tree.structure(state), layer_kinds(transformer)[0])


def layer_kinds(transformer: Transformer) -> tuple[tuple[tuple[Any, Any], ...], list[int]]:
    """The distinct (graph, weights' structure) of the transformer's layers in order of first appearance, and each
    layer's index among them: one kind for a float model's layers, more where formats differ between layers."""
    kinds: dict[tuple[Any, Any], int] = {}
    kind_of = []
    for block in transformer.blocks:
        graph, state = nnx.split(block)
        kind_of.append(kinds.setdefault((graph, jax.tree.structure(state)), len(kinds)))
    return tuple(kinds), kind_of


def _jitted_for(architecture: tuple) -> _Jitted:
    """The programs of `architecture` (graphdef, weights' structure, the layers' kinds): those of a live model or a
    recent one, else new ones (compiled at their first call)."""
    with _shared_lock:
        jitted = _shared.get(architecture)
        if jitted is None:
            jitted = _shared[architecture] = _Jitted(*architecture)
        if jitted in _recent:
            _recent.remove(jitted)
        _recent.append(jitted)
        return jitted


def release_all() -> None:
    """Let go of every compiled program of this process (`jax.clear_caches()`: every model's, and any other JAX
    code's) and give the memory back to the OS; each program compiles again (or loads from the persistent XLA
    cache) at its next call."""
    with _shared_lock, contextlib.ExitStack() as held:
        for jitted in {id(j): j for j in [*_shared.values(), *_recent]}.values():
            held.enter_context(jitted.lock)  # (no program runs or compiles meanwhile)
            jitted.decode_ready.clear()
        jax.clear_caches()
        clear_all()
    release_freed_memory()


def release_freed_memory() -> None:
    """Give the pages of freed heap memory back to the OS (glibc keeps what a compile freed: ~100 MiB)."""
    if _trim is not None:
        _trim(0)


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to trim
        return None


_trim = _malloc_trim()
