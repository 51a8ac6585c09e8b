"""The engine's static shapes: KV cache lengths and the prefill chunks a prompt is cut into.

Shapes stay few so XLA compiles few programs: each compiled model-sized program holds tens of MiB on XLA:CPU. A
sequence's KV cache has a power-of-two length of at least `MIN_CACHE` positions and doubles when decoding reaches
its end; a batch's rows use the same lengths, so `Model.generate` and a scheduler's single row run one decode
program (rows x cache length). A prompt is prefilled in chunks of three widths (`prefill_chunks`).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

PREFILL_CHUNK = 128  # the wide prefill chunk: XLA:CPU's prefill tokens/s level off from here (within ~5% of 512)
MID_CHUNK = 64  # the middle chunk: a first chat turn's prompt (system prompt and question, ~40 tokens) in one
MIN_BUCKET = 16  # the narrow chunk, for a prompt's short tail (what a follow-up turn adds)
MIN_CACHE = 512  # positions of a sequence's (and a batch row's) cache at least: a chat prompt and its answer


def bucket(n: int, minimum: int = MIN_BUCKET) -> int:
    """The power of two at or above n (at least `minimum`)."""
    return max(minimum, 1 << (max(n, 1) - 1).bit_length())


def cache_length(needed: int, context_length: int) -> int:
    """The cache length for `needed` positions: a power of two, at least `MIN_CACHE`, at most the window's."""
    return min(bucket(needed, MIN_CACHE), bucket(context_length))


def room(prompt_size: int) -> int:
    """Cache positions a prompt needs: its own, plus room for the zero padding of its last prefill chunk."""
    return prompt_size + max(PREFILL_CHUNK // 2, MIN_BUCKET)


def prefill_chunks(prompt: np.ndarray, cache_size: int, first: int = 0) -> Iterator[tuple[int, np.ndarray, int]]:
    """Split prompt[first:] into zero-padded chunks: (start, tokens [1, width], real size).

    Three widths, so three prefill programs per cache length: the wide chunk while more than half of one is left,
    the middle one while more than a narrow one is, else a narrow one. On XLA:CPU a chunk's layer is
    compute-bound: the default model's 43-token first prompt took 232 ms as three narrow chunks, 129 ms as one
    middle chunk and 200 ms as one wide (warm, 2 cores; `docs/engine.md`). A chunk never passes the cache's end:
    a cache of `room(prompt.size)` positions or more leaves space for the padding.
    """
    wide, middle, narrow = PREFILL_CHUNK, min(MID_CHUNK, PREFILL_CHUNK), min(MIN_BUCKET, PREFILL_CHUNK)
    start = first
    while start < prompt.size:
        left = prompt.size - start
        if left > wide // 2 and start + wide <= cache_size:
            width = wide
        elif left > narrow and start + middle <= cache_size:
            width = middle
        else:
            width = narrow
        chunk = prompt[start : start + min(width, cache_size - start)]
        tokens = np.zeros((1, min(width, cache_size - start)), np.int32)
        tokens[0, : chunk.size] = chunk
        yield start, tokens, chunk.size
        start += chunk.size
