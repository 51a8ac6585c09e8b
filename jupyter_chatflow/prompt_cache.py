"""The prompt cache: KV caches kept after each generation, keyed by the token ids they hold.

A new request takes the entry sharing the longest prefix with its prompt and prefills only the rest, so a
follow-up turn computes just its new tokens (the system prompt and earlier turns are already there). Entries are
whole static-length caches; what lies past the shared prefix is stale but harmless (attention never reads
positions after the query's own, and prefill overwrites them). Memory is bounded: least recently used entries go
first once the total passes `max_bytes` (128 MiB by default: a notebook's few conversations, on a machine where
the whole kernel should stay near 1 GiB), and an entry whose ids another entry holds all of is not kept twice.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

import numpy as np

from .transformer import KVCache

DEFAULT_MAX_BYTES = 128 << 20  # CHATFLOW_PROMPT_CACHE_MB overrides (0 disables reuse)


@dataclasses.dataclass(eq=False)
class Entry:
    """A KV cache and the token ids whose keys/values it holds at positions 0..len(ids)-1."""

    ids: np.ndarray
    cache: KVCache

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (*self.cache.keys, *self.cache.values))


def shared_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the common prefix of two id arrays."""
    n = min(a.size, b.size)
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


def _starts_with(ids: np.ndarray, prefix: np.ndarray) -> bool:
    return ids.size >= prefix.size and shared_prefix(ids, prefix) == prefix.size


def max_bytes_from_env() -> int:
    """CHATFLOW_PROMPT_CACHE_MB in MiB, else 128 MiB."""
    value = os.environ.get("CHATFLOW_PROMPT_CACHE_MB")
    return DEFAULT_MAX_BYTES if value is None else max(0, int(float(value) * (1 << 20)))


class PromptCache:
    """Least-recently-used KV caches keyed by their token ids (not thread-safe: the engine's lock guards it)."""

    def __init__(self, max_bytes: int | None = None):
        self.max_bytes = max_bytes_from_env() if max_bytes is None else max_bytes
        self._entries: list[Entry] = []  # oldest first

    def take(
        self, prompt: np.ndarray, length: int, grow: Callable[[KVCache | None, int], KVCache]
    ) -> tuple[KVCache, int]:
        """A cache of at least `length` positions and how many leading prompt tokens it already holds.

        The entry with the longest shared prefix is used (at least one prompt token is always left to compute,
        so the model has a position to predict from): taken when the prompt extends all of it (a follow-up
        turn), copied when the prompt branches off inside it and the copy fits the memory bound (so both
        branches stay cached). With no shared prefix a new cache is made, unless that would pass the bound:
        then the least recently used entry that is long enough is overwritten. A branch evicts older entries
        before it would take the entry it branches from: a prompt that shares a few template tokens with the
        latest conversation (the session's title) took that conversation's cache, and its follow-up recomputed
        everything. `grow(cache, length)` copies
        a cache into a new one of `length` positions (or makes an empty one from None).
        """
        best, reused = None, 0
        for entry in self._entries:
            n = min(shared_prefix(entry.ids, prompt), prompt.size - 1)
            if n > reused:
                best, reused = entry, n
        if best is None or self.max_bytes == 0:
            best, reused = self._scratch(length), 0
        if best is None:
            return grow(None, length), 0
        length = max(length, best.cache.length)
        if reused < best.ids.size:  # a branch: keep the entry, work on a copy (older entries make room for it)
            copy = best.nbytes * length // best.cache.length
            while self.nbytes + copy > self.max_bytes and self._entries[0] is not best:
                self._entries.pop(0)
            if self.nbytes + copy <= self.max_bytes:
                return grow(best.cache, length), reused
        self._entries.remove(best)
        return (best.cache if best.cache.length >= length else grow(best.cache, length)), reused

    def _scratch(self, length: int) -> Entry | None:
        """The oldest entry long enough to overwrite, when keeping it and a new cache would pass the bound."""
        long_enough = [e for e in self._entries if e.cache.length >= length]
        if not long_enough or self.nbytes + long_enough[0].nbytes <= self.max_bytes:
            return None
        return long_enough[0]

    def put(self, ids: np.ndarray, cache: KVCache) -> None:
        """Keep `cache`, which holds `ids`, as the most recent entry; evict the oldest past the bound.

        Never two copies of one prefix: entries whose ids are a prefix of `ids` are dropped, and when an entry
        already holds `ids` and more (an attention map recomputed over a prompt that was answered), that entry
        becomes the most recent instead and `cache` is let go.
        """
        ids = np.array(ids, np.int32)
        holder = next((e for e in self._entries if e.ids.size > ids.size and _starts_with(e.ids, ids)), None)
        if holder is not None:
            self._entries.remove(holder)
            self._entries.append(holder)
            return
        self._entries = [e for e in self._entries if not _starts_with(ids, e.ids)]
        self._entries.append(Entry(ids=ids, cache=cache))
        while len(self._entries) > 1 and self.nbytes > self.max_bytes:
            self._entries.pop(0)

    @property
    def nbytes(self) -> int:
        """Device memory held by the cached entries."""
        return sum(e.nbytes for e in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Drop every entry."""
        self._entries.clear()
