"""Newcomers prefilled together: several short prompts as one chunk of a batch, each after its own cached prefix.

A prefill chunk reads every weight once, whatever its batch, as a decode step does. A burst of requests (a
server's clients asking at once) is mostly a shared system prompt, which the prompt cache holds, then a question
of a few tokens: one narrow chunk each, costing about what a whole batch's decode step costs. Prefilled together
they cost one chunk of the group's batch (on the default model, 16 newcomers' prefills took ~1.4 s one by one).

Each row's result is the one it gets alone: the same programs (a row's arithmetic does not depend on the others),
the same narrow chunk width, the cached prefix copied in, and a cache `ATTENTION_BLOCK` long, so that the attention
over the prefix runs in the same blocks as alone (`model.attention.streamed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import jax
import jax.numpy as jnp
import numpy as np

from jupyter_chatflow.model.attention import ATTENTION_BLOCK
from jupyter_chatflow.model.config import ModelConfig
from jupyter_chatflow.model.transformer import KVCache

from .chunks import MIN_BUCKET, bucket
from .generation import RawStep
from .programs import Programs
from .prompt_cache import MIN_KEPT_LENGTH
from .run import SequenceState, raw_step
from .sampling import GREEDY_KNOBS

GROUP_SIZES = (4, 8, 16)  # rows of a group (padded up); fewer than 4 newcomers are prefilled one by one
WIDTH = MIN_BUCKET  # the group's one chunk: what each member has left after its cached prefix, at most


class Prefixes(Protocol):
    """What a group's prefill needs of the runner: the model's shapes and the prompt cache's prefixes."""

    config: ModelConfig

    def empty_cache(self, rows: int, length: int) -> KVCache: ...

    def copy_prefix(self, prompt: np.ndarray, cache: KVCache, row: int) -> tuple[KVCache, int]: ...


def fits(prompt: np.ndarray, cached: int) -> bool:
    """Whether `prompt`, whose first `cached` tokens the prompt cache holds, can join a group: 2 to `WIDTH` tokens
    left past them (one token left is a decode step alone, as `Runner.prefill` runs it), and its chunk within the
    group's cache of `ATTENTION_BLOCK` positions (16 rows of the default model: 180 MiB while the group runs)."""
    return prompt.size + WIDTH <= ATTENTION_BLOCK and 2 <= prompt.size - cached <= WIDTH


def group_size(n: int) -> int:
    """The rows a group of n newcomers is padded to (0: too few to group)."""
    return next((size for size in GROUP_SIZES if size >= n), 0) if n >= GROUP_SIZES[0] else 0


def prefill(runner: Prefixes, programs: Programs, runs: Sequence[SequenceState]) -> list[tuple[RawStep, int] | None]:
    """Prefill `runs` (started, no cache yet) as one chunk on `runner`'s `programs`: per run, (its first token, the
    prefix reused), and `run.cache` (a cache of its own) and `run.seen` set; None where the prompt cache changed
    meanwhile and the prompt no longer fits a group (the run is untouched: prefill it alone)."""
    size = group_size(len(runs))
    cache = runner.empty_cache(size, ATTENTION_BLOCK)
    starts, reused = np.zeros(size, np.int32), list[int | None]()
    for row, run in enumerate(runs):
        cache, n = runner.copy_prefix(run.prompt, cache, row)
        reused.append(n if 2 <= run.prompt.size - n <= WIDTH else None)
        starts[row] = n
    tokens = np.zeros((size, WIDTH), np.int32)
    for row, (run, prefix) in enumerate(zip(runs, reused, strict=True)):
        if prefix is not None:
            tokens[row, : run.prompt.size - prefix] = run.prompt[prefix:]
    out, seen, cache = _forward(programs, runner.config.vocab_size, runs, cache, tokens, starts, reused)
    host = jax.device_get(out)
    return [_member(programs, run, cache, row, prefix, raw_step(host, row), seen) for row, (run, prefix) in
            enumerate(zip(runs, reused, strict=True))]  # fmt: skip


def _forward(
    programs: Programs, vocab: int, runs: Sequence[SequenceState], cache: KVCache, tokens: np.ndarray,
    starts: np.ndarray, reused: Sequence[int | None],
):  # fmt: skip
    """The chunk [b, WIDTH] through every layer, its keys/values written, each row's first token sampled."""
    size = tokens.shape[0]
    hidden, chunk, _ = programs.forward(programs.weights, cache, tokens, starts, 0)  # hidden [b, WIDTH, d]
    cache = programs.write(cache, chunk, starts)
    last = np.array([r.prompt.size - (n or 0) - 1 for r, n in zip(runs, reused, strict=True)], np.int32)
    last = np.clip(np.pad(last, (0, size - len(runs))), 0, WIDTH - 1)
    knobs = np.stack([np.asarray(r.knobs) for r in runs] + [GREEDY_KNOBS] * (size - len(runs)))
    keys = np.concatenate([r.key_data for r in runs])  # [n, 2]
    keys = np.concatenate([keys, np.zeros((size - len(runs), *keys.shape[1:]), keys.dtype)])
    seen = np.zeros((size, vocab), bool)
    for row, run in enumerate(runs):
        seen[row] = np.asarray(run.seen)[0]
    allowed = jnp.ones((size, vocab), bool)
    out, seen_after = programs.sample_rows_after(programs.weights, hidden, last, knobs, seen, keys, allowed)
    return out, seen_after, cache


def _member(
    programs: Programs, run: SequenceState, cache: KVCache, row: int, reused: int | None, raw: RawStep, seen: jax.Array
) -> tuple[RawStep, int] | None:
    """Row `row` of the group's result as `run`'s own: its cache (a copy of its first positions), its `seen`."""
    if reused is None:
        return None
    length = min(cache.length, bucket(run.prompt.size, MIN_KEPT_LENGTH))  # (what the scheduler copies to a row)
    run.cache = programs.read_row(cache, np.int32(row), length)
    run.seen = jax.lax.dynamic_slice_in_dim(seen, np.int32(row), 1)  # (one program for every row)
    run.tokens.append(raw.token_id)
    return raw, reused
