"""The compiled XLA programs of one model: prefill, decode, cache write, logits, attention rows.

Each is a pure function of the model's state and plain arrays; `Programs` jits them with the model's graph
structure closed over and takes the state as a flat list of arrays. (Passing the NNX GraphDef as a static
argument made JAX hash it on every call, ~5 ms of a ~20 ms decode step; an NNX State is flattened by Python
callbacks on every call, a plain list in C++.)
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import nnx

from .sampling import sample
from .transformer import KVCache, Transformer, attention_rows

N_ALTERNATIVES = 5


def forward(graphdef, state, cache, tokens, start, probe_layer, probe: bool):
    """Run a chunk [b, s] at `start`: (hidden [b, s, d], its keys/values, probe_layer's queries or None)."""
    model = nnx.merge(graphdef, state)
    return model(tokens, start, cache, probe_layer if probe else None)


def logits(graphdef, state, hidden):
    """Vocabulary logits [b, s, V] for hidden states [b, s, d]."""
    model = nnx.merge(graphdef, state)
    b, s, d = hidden.shape
    return model.logits(hidden.reshape(b * s, d)).reshape(b, s, -1)


def _sample_next(model: Transformer, hidden, knobs, seen, key, step, allowed):
    """Sample from the logits of hidden [b, d] among `allowed` [b, V]; mark the chosen token seen."""
    out = sample(model.logits(hidden), knobs, seen, jax.random.fold_in(key, step), N_ALTERNATIVES, allowed)
    return out, seen.at[jnp.arange(hidden.shape[0]), out.token].set(True)


def prefill_and_sample(graphdef, state, cache, tokens, start, last, knobs, seen, key, allowed):
    """The prompt's last chunk and the first token in one program: forward, logits at `last`, sample."""
    model = nnx.merge(graphdef, state)
    hidden, chunk, _ = model(tokens, start, cache)
    out, seen = _sample_next(model, jax.lax.dynamic_index_in_dim(hidden, last, 1, False), knobs, seen, key, 0, allowed)
    return out, chunk, seen


def decode_step(graphdef, state, cache, token, pos, seen, knobs, key, step, allowed):
    """One decode step: forward one token per row at `pos`, sample the next; returns its keys/values too."""
    model = nnx.merge(graphdef, state)
    hidden, chunk, _ = model(token[:, None], pos, cache)
    out, seen = _sample_next(model, hidden[:, 0], knobs, seen, key, step, allowed)
    return out, chunk, seen


@functools.partial(jax.jit, donate_argnums=(0,))
def write(cache: KVCache, chunk: KVCache, start) -> KVCache:
    """Store a chunk's keys/values in the cache, in place (its own program: see `transformer.Attention`)."""
    return cache.write(chunk, start)


@jax.jit
def rows(queries, keys, start):
    """float16 attention probabilities [b, h, s, T] of one chunk of queries (see `attention_rows`)."""
    return attention_rows(queries, keys, start).astype(jnp.float16)


class Programs:
    """The jitted programs of one model: argument lists as above, with `(graphdef, state)` replaced by
    `self.weights`, the state's leaves.
    """

    def __init__(self, transformer: Transformer):
        graphdef, state = nnx.split(transformer)
        self.weights, structure = jax.tree.flatten(state)

        def bind(program):
            return lambda weights, *args: program(graphdef, jax.tree.unflatten(structure, weights), *args)

        self.forward = jax.jit(bind(forward), static_argnums=(5,))
        self.logits = jax.jit(bind(logits))
        self.prefill_and_sample = jax.jit(bind(prefill_and_sample), donate_argnums=(6,))
        self.decode_step = jax.jit(bind(decode_step), donate_argnums=(4,))
        self.write = write
        self.rows = rows
