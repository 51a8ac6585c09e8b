"""The device side of a batch of independent sequences, one row each: made by `Runner.batch()`.

The rows share one KV cache of [B, k, T, e] per layer and one `seen` mask [B, V]; the host keeps each row's next
token, position, step, knobs and key. A decode step (`Batch.step`) advances every row at once (free rows decode a
greedy padding token at position 0, harmlessly). T is a power of two that holds the furthest row (at least
`MIN_CACHE`, the length `Model.generate` starts from: one decode program serves both), doubled as rows grow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import numpy as np

from jupyter_chatflow.model.config import ModelConfig
from jupyter_chatflow.model.transformer import KVCache

from .chunks import MIN_CACHE, bucket, cache_length
from .programs import Programs
from .prompt_cache import MIN_KEPT_LENGTH
from .run import SequenceState, key_data
from .sampling import GREEDY_KNOBS, Sampled

WARM_AHEAD = 64  # steps before the rows fill the cache: compile the doubled cache's decode programs meanwhile

FREE: dict[str, int | np.ndarray] = {  # a free row's host values: a greedy padding token at position 0
    "token": 0, "pos": 0, "step": 0, "knobs": GREEDY_KNOBS, "key": 0,
}  # fmt: skip


def kept_length(n: int, limit: int) -> int:
    """Positions to copy for a sequence's first n: a power of two (few copy programs), at most `limit`."""
    return min(limit, bucket(n, MIN_KEPT_LENGTH))


class Batch:
    """The rows' KV cache and `seen` masks on the device, and each row's token, position, step, knobs and key on
    the host. Empty (no cache) until `resize` gives it rows."""

    def __init__(self, programs: Programs, empty_cache: Callable[[int, int], KVCache], config: ModelConfig):
        self._programs, self._config, self._empty_cache = programs, config, empty_cache  # (rows, length) -> zeros
        self.cache: KVCache | None = None
        self.seen: jax.Array | None = None  # [B, V] bool
        self.host: dict[str, np.ndarray] = {}
        self._anything: jax.Array | None = None  # [B, V] all True: the mask of no constraint

    @property
    def length(self) -> int:
        """Positions per row (0 while empty)."""
        return 0 if self.cache is None else self.cache.length

    @property
    def nbytes(self) -> int:
        """Device memory of the rows' KV cache (0 while empty)."""
        return 0 if self.cache is None else sum(a.nbytes for a in (*self.cache.keys, *self.cache.values))

    def positions(self) -> np.ndarray:
        """Each row's next position [B] (0 for a free row)."""
        return self.host.get("pos", np.zeros(0, np.int32))

    def resize(self, keep: list[int], size: int) -> None:
        """Keep the rows `keep`, in that order, in a batch of `size` rows (the rest free); 0 empties it."""
        if size == 0:
            self.cache, self.seen, self.host, self._anything = None, None, {}, None
            return
        if self.cache is None or self.seen is None:
            self._empty(size, MIN_CACHE)
            return
        rows = np.array(keep + [0] * (size - len(keep)), np.int32)  # free rows: copies of row 0, never read
        self.cache = self._programs.select_rows(self.cache, rows)
        self.seen = self.seen[rows]
        self.host = {name: array[rows] for name, array in self.host.items()}
        for name, array in self.host.items():
            array[len(keep) :] = FREE[name]
        self._anything = None

    def _empty(self, size: int, length: int) -> None:
        self.cache = self._empty_cache(size, self._length(length))
        # (numpy's zeros and the host's key: `jnp.zeros` and `jax.random.key` ran four eager programs here, ~30 ms
        # between a new process's prefill and its first decode step)
        self.seen = jax.device_put(np.zeros((size, self._config.vocab_size), bool))
        key_shape = key_data(0).shape
        self.host = {
            "token": np.zeros(size, np.int32),
            "pos": np.zeros(size, np.int32),
            "step": np.zeros(size, np.int32),
            "knobs": np.tile(FREE["knobs"], (size, 1)),
            "key": np.zeros((size, *key_shape), np.uint32),
        }

    def join(self, row: int, run: SequenceState, length: int) -> None:
        """Row `row` takes a prefilled sequence: the first `length` positions of its cache, its first token."""
        self._fit(max(length, run.prompt.size + 1))
        assert self.cache is not None and self.seen is not None
        self.cache = self._programs.write_row(self.cache, run.cache, np.int32(row), length)
        self.seen = self._programs.set_row(self.seen, np.int32(row), run.seen)
        self.host["token"][row] = run.tokens[-1]
        self.host["pos"][row] = run.prompt.size
        self.host["step"][row] = 1
        self.host["knobs"][row] = np.asarray(run.knobs)
        self.host["key"][row] = run.key_data[0]

    def _fit(self, needed: int) -> None:
        """Grow the cache (all rows) to hold `needed` positions per row."""
        assert self.cache is not None
        length = self._length(needed)
        if length > self.cache.length:
            empty = self._empty_cache(self.cache.keys[0].shape[0], length)
            self.cache = self._programs.write(empty, self.cache, np.int32(0))

    def _length(self, needed: int) -> int:
        return cache_length(needed, self._config.context_length)

    def length_for(self, prompt_size: int) -> int:
        """The cache length a sequence with a prompt of `prompt_size` tokens needs to join (see `join`)."""
        return self._length(max(bucket(prompt_size, MIN_KEPT_LENGTH), prompt_size + 1))

    def grows_soon(self, reach: int) -> bool:
        """Whether a row will reach the end of the cache within `WARM_AHEAD` steps (and the cache can double); `reach`:
        the furthest position a row may come to (its position plus what its budget has left)."""
        return (
            bool(self.host)
            and int(self.host["pos"].max()) + WARM_AHEAD >= self.length > 0
            and reach >= self.length
            and (self._length(2 * self.length) > self.length)
        )

    def step(self, rows: Sequence[object | None], masks: dict[int, np.ndarray]) -> Sampled:
        """One decode step of every row (free rows, None in `rows`, too, harmlessly), constrained rows under their
        `masks`; returns the sampler's output on the host."""
        self._fit(int(self.host["pos"].max()) + 1)
        assert self.cache is not None
        h = self.host
        out, chunk, self.seen = self._programs.decode_rows(
            self._programs.weights, self.cache, h["token"], h["pos"], self.seen, h["knobs"], h["key"], h["step"],
            self._allowed(len(rows), masks),
        )  # fmt: skip
        self.cache = self._programs.write(self.cache, chunk, h["pos"])
        self._programs.decoded(len(rows), self.length)
        host = jax.device_get(out)
        busy = np.array([s is not None for s in rows])
        h["token"] = np.where(busy, host.token, 0).astype(np.int32)
        h["pos"] = h["pos"] + busy
        h["step"] = h["step"] + busy
        return host

    def _allowed(self, size: int, masks: dict[int, np.ndarray]) -> jax.Array:
        """[B, V]: each row's constraint mask, all True where a row has none."""
        if not masks:
            if self._anything is None:
                self._anything = jax.device_put(np.ones((size, self._config.vocab_size), bool))
            return self._anything
        allowed = np.ones((size, self._config.vocab_size), bool)
        for i, mask in masks.items():
            allowed[i] = mask
        return jax.device_put(allowed)

    def free(self, row: int) -> None:
        """Row `row` is free: it decodes a padding token at position 0 from now on (and never widens the loop)."""
        for name, array in self.host.items():
            array[row] = FREE[name]

    def read(self, row: int, length: int) -> KVCache:
        """The first `length` positions of row `row`, as a cache of its own."""
        assert self.cache is not None
        return self._programs.read_row(self.cache, np.int32(row), length)
