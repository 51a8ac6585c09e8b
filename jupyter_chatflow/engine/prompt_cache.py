"""The prompt cache: KV caches kept after each generation, keyed by the token ids they hold.

A new request takes the entry sharing the longest prefix with its prompt and prefills only the rest, so a
follow-up turn computes just its new tokens (the system prompt and earlier turns are already there). Entries are
whole static-length caches; what lies past the shared prefix is stale but harmless (attention never reads
positions after the query's own, and prefill overwrites them). Memory is bounded: only the most recent entry
keeps its full length (the next turn of that conversation takes it as it is), while it fits; older ones are cut
to the power of two that holds their ids (a follow-up to one of them copies it back into a full-length cache,
~6 ms for 1,024 positions of the default model). Once the total passes `max_bytes` (64 MiB by default: a
notebook's few conversations, in a kernel that should stay near 1 GiB) the most recent entry is cut too, then
the least recently used entries go; an entry whose ids another entry holds all of is not kept twice.

A full-length cache is large (1,024 positions of the default model are 45 MiB, most of the bound), so it
never counts against the conversations kept: a prompt that branches off an entry copies it unless the entry's
own buffers would serve as they are (only then does taking it save memory), and a pass's full-length cache is
cut before an older conversation is evicted for it. Otherwise a new chat's prompt, sharing only the template
and system prompt (25 tokens) with another conversation, took that conversation's cache, and a fork of its
answer recomputed all but those 25 tokens.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

import jax
import numpy as np

from jupyter_chatflow.model.transformer import KVCache

DEFAULT_MAX_BYTES = 64 << 20  # CHATFLOW_PROMPT_CACHE_MB overrides (0 disables reuse)
MIN_KEPT_LENGTH = 64  # an older entry is cut to a power of two at least this long (few shapes to copy between)


@dataclasses.dataclass(eq=False)
class Entry:
    """A KV cache and the token ids whose keys/values it holds at positions 0..len(ids)-1."""

    ids: np.ndarray
    cache: KVCache

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (*self.cache.keys, *self.cache.values))

    @property
    def kept_length(self) -> int:
        """The length it is cut to once it is no longer the most recent entry."""
        return min(self.cache.length, max(MIN_KEPT_LENGTH, 1 << (max(self.ids.size, 1) - 1).bit_length()))

    @property
    def kept_nbytes(self) -> int:
        return self.nbytes_at(self.kept_length)

    def nbytes_at(self, length: int) -> int:
        """What a cache like this one holds at `length` positions."""
        return self.nbytes // self.cache.length * length


def shared_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the common prefix of two id arrays."""
    n = min(a.size, b.size)
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


def _starts_with(ids: np.ndarray, prefix: np.ndarray) -> bool:
    return ids.size >= prefix.size and shared_prefix(ids, prefix) == prefix.size


def _sized(cache: KVCache, length: int, grow: Callable[[KVCache | None, int], KVCache], copy: bool = False) -> KVCache:
    """`cache` with exactly `length` positions (a copy when `copy`): cut when longer, so a short prompt that takes
    a long conversation's cache does not carry its length on (every later copy of it would be that large), grown
    when shorter."""
    if cache.length > length:
        return jax.block_until_ready(cache.truncated(length))
    return grow(cache, length) if copy or cache.length < length else cache


def max_bytes_from_env() -> int:
    """CHATFLOW_PROMPT_CACHE_MB in MiB, else 64 MiB."""
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
        """A cache of `length` positions and how many leading prompt tokens it already holds.

        The entry with the longest shared prefix is used (at least one prompt token is always left to compute,
        so the model has a position to predict from): taken when the prompt extends all of it (a follow-up
        turn), copied when the prompt branches off inside it (so both branches stay cached), unless the entry
        has `length` positions already and the copy passes the memory bound: then it is taken and overwritten
        (only then does taking it save memory: an entry of another length is copied into a new cache either
        way; the bound is kept by `put`). With no shared prefix a new cache is made, unless that would pass the bound:
        then the least recently used entry that is long enough is overwritten. `grow(cache, length)` copies
        a cache into a new one of `length` positions (or makes an empty one from None). The bound is checked
        as it will be once the cache is put back: the entries cut to their kept length, plus this cache.
        """
        best, reused = self.longest(prompt)
        if best is None or self.max_bytes == 0:
            scratch = self._scratch(length)
            self._cut(keep=scratch)
            if scratch is None:
                return grow(None, length), 0
            self._entries.remove(scratch)
            return _sized(scratch.cache, length, grow), 0
        in_place = best.cache.length == length  # taking it would use its buffers as they are
        fits = self._kept_nbytes() + best.nbytes_at(length) <= self.max_bytes
        branch = reused < best.ids.size and (fits or not in_place)
        self._cut(keep=None if branch else best)  # before the copy: never a full-length entry beside it
        if branch:
            return _sized(best.cache, length, grow, copy=True), reused  # keep the entry, work on a copy
        self._entries.remove(best)
        return _sized(best.cache, length, grow), reused

    def longest(self, prompt: np.ndarray) -> tuple[Entry | None, int]:
        """The entry sharing the longest prefix with `prompt` and that prefix's length (at most all but the
        prompt's last token), left in place; (None, 0) when no entry shares one."""
        best, reused = None, 0
        for entry in self._entries:
            n = min(shared_prefix(entry.ids, prompt), prompt.size - 1)
            if n > reused:
                best, reused = entry, n
        return best, reused

    def _scratch(self, length: int) -> Entry | None:
        """The oldest entry long enough to overwrite, when keeping it and a new cache would pass the bound."""
        long_enough = [e for e in self._entries if e.cache.length >= length]
        if not long_enough:
            return None
        oldest = long_enough[0]
        return oldest if self._kept_nbytes() + oldest.nbytes_at(length) > self.max_bytes else None

    def _cut(self, keep: Entry | None = None) -> None:
        """Cut every entry but `keep` to its kept length."""
        for entry in self._entries:
            if entry is not keep and entry.kept_length < entry.cache.length:
                entry.cache = entry.cache.truncated(entry.kept_length)
                jax.block_until_ready(entry.cache)  # the full-length buffers are freed now, not at some later point

    def _kept_nbytes(self) -> int:
        return sum(e.kept_nbytes for e in self._entries)

    def put(self, ids: np.ndarray, cache: KVCache) -> None:
        """Keep `cache`, which holds `ids`, as the most recent entry; evict the oldest past the bound.

        The newest keeps its full length while the total fits `max_bytes`, else it is cut to its kept length;
        then the oldest entries go until the total fits. Never two copies of one prefix: entries whose ids are a
        prefix of `ids` are dropped, and when an entry already holds `ids` and more (an attention map recomputed
        over a prompt that was answered), that entry becomes the most recent instead and `cache` is let go.
        """
        ids = np.array(ids, np.int32)
        holder = next((e for e in self._entries if e.ids.size > ids.size and _starts_with(e.ids, ids)), None)
        if holder is not None:
            self._entries.remove(holder)
            self._entries.append(holder)
            return
        self._entries = [e for e in self._entries if not _starts_with(ids, e.ids)]
        self._cut()
        self._entries.append(Entry(ids=ids, cache=cache))
        if self.nbytes > self.max_bytes:  # its full length does not fit: it is cut before older entries go
            self._cut()
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
