"""Newcomers prefilled together: several short prompts as one chunk of a batch, each after its own cached prefix.

A prefill chunk reads every weight once, whatever its batch, as a decode step does. A burst of requests (a
server's clients asking at once) is mostly a shared system prompt, which the prompt cache holds, then a question
of a few tokens: one narrow chunk each, costing about what a whole batch's decode step costs. Prefilled together
they cost one chunk of the group's batch (on the default model, 16 newcomers' prefills took ~1.4 s one by one).

Each row's result is the one it gets alone: the same programs (a row's arithmetic does not depend on the others),
the same narrow chunk width, the cached prefix copied in, and a cache `ATTENTION_BLOCK` long, so that the attention
over the prefix runs in the same blocks as alone (`transformer._partial_blocked`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from jupyter_chatflow.model.transformer import ATTENTION_BLOCK, KVCache

from .generation import RawStep
from .model import MIN_BUCKET, bucket, raw_step
from .prompt_cache import MIN_KEPT_LENGTH
from .sampling import GREEDY_KNOBS

if TYPE_CHECKING:
    from .model import Model, _Run

GROUP_SIZES = (4, 8, 16)  # rows of a group (padded up); fewer than 4 newcomers are prefilled one by one
WIDTH = MIN_BUCKET  # the group's one chunk: what each member has left after its cached prefix, at most


def fits(model: Model, prompt: np.ndarray) -> bool:
    """Whether `prompt` can join a group: 2 to `WIDTH` tokens left past the prompt cache's prefix (one token
    left is a decode step alone, as `Model._prefill_steps` runs it), and its chunk within the group's cache of
    `ATTENTION_BLOCK` positions (16 rows of the default model: 180 MiB while the group runs)."""
    return prompt.size + WIDTH <= ATTENTION_BLOCK and 2 <= prompt.size - model._shared_prefix(prompt) <= WIDTH


def group_size(n: int) -> int:
    """The rows a group of n newcomers is padded to (0: too few to group)."""
    return next((size for size in GROUP_SIZES if size >= n), 0) if n >= GROUP_SIZES[0] else 0


def prefill(model: Model, runs: Sequence[_Run]) -> list[tuple[RawStep, int] | None]:
    """Prefill `runs` (started, no cache yet) as one chunk: per run, (its first token, the prefix reused), and
    `run.cache` (a cache of its own) and `run.seen` set; None where the prompt cache changed meanwhile and the
    prompt no longer fits a group (the run is untouched: prefill it alone)."""
    size = group_size(len(runs))
    cache = KVCache.zeros(model.config, size, ATTENTION_BLOCK, model.dtype)
    starts, reused = np.zeros(size, np.int32), list[int | None]()
    for row, run in enumerate(runs):
        cache, n = model._copy_prefix(run.prompt, cache, row)
        reused.append(n if 2 <= run.prompt.size - n <= WIDTH else None)
        starts[row] = n
    tokens = np.zeros((size, WIDTH), np.int32)
    for row, (run, prefix) in enumerate(zip(runs, reused, strict=True)):
        if prefix is not None:
            tokens[row, : run.prompt.size - prefix] = run.prompt[prefix:]
    out, seen, cache = _forward(model, runs, cache, tokens, starts, reused)
    host = jax.device_get(out)
    return [_member(model, run, cache, row, prefix, raw_step(host, row), seen) for row, (run, prefix) in
            enumerate(zip(runs, reused, strict=True))]  # fmt: skip


def _forward(
    model: Model, runs: Sequence[_Run], cache: KVCache, tokens: np.ndarray, starts: np.ndarray,
    reused: Sequence[int | None],
):  # fmt: skip
    """The chunk through every layer, its keys/values written, each row's first token sampled."""
    programs, size = model._programs, tokens.shape[0]
    hidden, chunk, _ = programs.forward(model._weights, cache, tokens, starts, 0)
    cache = programs.write(cache, chunk, starts)
    last = np.array([r.prompt.size - (n or 0) - 1 for r, n in zip(runs, reused, strict=True)], np.int32)
    last = np.clip(np.pad(last, (0, size - len(runs))), 0, WIDTH - 1)
    knobs = np.stack([np.asarray(r.knobs) for r in runs] + [GREEDY_KNOBS] * (size - len(runs)))
    keys = np.stack([np.asarray(jax.random.key_data(r.key)) for r in runs])
    keys = np.concatenate([keys, np.zeros((size - len(runs), *keys.shape[1:]), keys.dtype)])
    seen = np.zeros((size, model.config.vocab_size), bool)
    for row, run in enumerate(runs):
        seen[row] = np.asarray(run.seen)[0]
    allowed = jnp.ones((size, model.config.vocab_size), bool)
    out, seen_after = programs.sample_rows_after(model._weights, hidden, last, knobs, seen, keys, allowed)
    return out, seen_after, cache


def _member(
    model: Model, run: _Run, cache: KVCache, row: int, reused: int | None, raw: RawStep, seen: jax.Array
) -> tuple[RawStep, int] | None:
    """Row `row` of the group's result as `run`'s own: its cache (a copy of its first positions), its `seen`."""
    if reused is None:
        return None
    length = min(cache.length, bucket(run.prompt.size, MIN_KEPT_LENGTH))  # (what the scheduler copies to a row)
    run.cache = model._programs.read_row(cache, np.int32(row), length)
    run.seen = jax.lax.dynamic_slice_in_dim(seen, np.int32(row), 1)  # (one program for every row)
    run.tokens.append(raw.token_id)
    return raw, reused
