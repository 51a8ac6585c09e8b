"""The attention core of a layer: a chunk's queries over the cache before it and over itself, two ways.

`transformer.Attention` computes it one of two ways, the same numbers either way (tests compare them on every tiny
architecture):

- streaming (`streamed`, the path on CPU): an online softmax over the written blocks of the cache only, then the
  chunk itself: a decode step's cost does not grow with the cache's length;
- fused (`fused`, the path on GPU and TPU): one `jax.nn.dot_product_attention` call over the cache and the
  chunk's own keys, with a mask: the cache positions at or past each row's start hidden, causal inside the chunk,
  and a sliding layer's window. JAX 0.10's `implementation=None` is XLA's own attention on every backend (its
  cuDNN selection is a TODO there); `IMPLEMENTATION = "cudnn"` asks for cuDNN's fused kernel on GPU in bfloat16 or
  float16 (not run here: no GPU was available to check which of its mask and shape limits this call meets).

On XLA:CPU neither path was measurably faster, so CPU keeps the streaming one (the path every CPU figure in the
docs was measured on; the figures: docs/engine.md, "Static shapes").
GPU and TPU take the fused path (`use_fused`), where the dense attention is what the hardware's kernels are for.
The fused call reads the whole cache (not only its written blocks) and concatenates the chunk's keys to it, a
copy of the cache per layer and step: on GPU a kernel reading the cache in place (cuDNN's, with the cache in
[b, T, k, e]) would spare that.

Gemma 2's soft-capped scores cannot be expressed through `dot_product_attention` (it has no cap): those layers
always stream. The attention view (`transformer.attention_rows`) has its explicit path of its own.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

FUSED: bool | None = None
"""Whether layers attend through `dot_product_attention`: None decides by backend (GPU and TPU yes, CPU no); True
or False forces it (tests). Read when a `Transformer` is built: a model built after a change takes the new path."""

IMPLEMENTATION: str | None = None
"""`dot_product_attention`'s `implementation`: None (JAX's choice), "xla" or "cudnn" (GPU, bfloat16/float16)."""


def use_fused(cap: float) -> bool:
    """Whether a layer whose scores are soft-capped at `cap` (0: none) attends through `fused_attention`."""
    if cap:
        return False
    return FUSED if FUSED is not None else jax.default_backend() != "cpu"


def fused_attention(q, keys, values, chunk_keys, chunk_values, start, window=None):
    """Attention of the queries q [b, s, h, e] (rotated and scaled) at positions start.. over the cache's keys and
    values [b, k, T, e] before `start` and the chunk's own [b, s, k, e] up to each query, in one
    `dot_product_attention` call: [b, s, h, e]. `start` is a scalar, or one position per row ([b]); a query at p
    sees no key at or before p - window (None: every key before it)."""
    b, s = q.shape[:2]
    length = keys.shape[2]
    first = jnp.broadcast_to(jnp.reshape(start, (-1, 1)), (b, 1))  # [b, 1] each row's start
    queried = first + jnp.arange(s)  # [b, s] the queries' positions
    cached = jnp.broadcast_to(jnp.arange(length), (b, length))  # [b, T]
    positions = jnp.concatenate([cached, queried], axis=1)  # [b, T + s] each key's position
    written = jnp.concatenate([cached < first, jnp.ones((b, s), bool)], axis=1)  # the cache's rows before start
    visible = written[:, None, :] & (positions[:, None, :] <= queried[:, :, None])  # [b, s, T + s] causal
    if window is not None:
        visible = visible & (positions[:, None, :] > queried[:, :, None] - window)
    all_keys = jnp.concatenate([keys.transpose(0, 2, 1, 3), chunk_keys.astype(keys.dtype)], axis=1)  # [b, T+s, k, e]
    all_values = jnp.concatenate([values.transpose(0, 2, 1, 3), chunk_values.astype(values.dtype)], axis=1)
    return jax.nn.dot_product_attention(
        q.astype(keys.dtype), all_keys, all_values, mask=visible[:, None], scale=1.0, implementation=IMPLEMENTATION
    )


def softcap(scores: jax.Array, cap: float) -> jax.Array:
    """Gemma's soft cap: cap * tanh(scores / cap), or the scores as they are when cap is 0."""
    return cap * jnp.tanh(scores / cap) if cap else scores


def streamed(q, keys, values, kk, v, start, window, cap):
    """The streaming attention of q [b, k, m, e], m = (g, s), over the cache before `start` and the chunk's own
    kk, v [b, k, s, e]: [b, k, m, e] float32. Only the written blocks are read: no [m, T] score matrix, and a decode
    step's time does not grow with the cache's length (a dense pass over a 1,024-position cache cost ~10% more
    than over 256)."""
    s = kk.shape[2]
    g = q.shape[2] // s
    rel = jnp.arange(s)[:, None] - jnp.arange(s)[None, :]  # query i minus chunk key j
    seen = rel >= 0 if window is None else (rel >= 0) & (rel < window)
    causal = jnp.tile(seen, (g, 1))  # [g s, s] query i sees chunk key j <= i (and within the window)
    past = _partial_blocked(q, keys, values, start, s, window, cap)  # start: scalar, or [b] (per row)
    acc, _, total = _merge(past, _partial(q, kk, v, causal, cap))
    return acc / total[..., None]


def fused(q, keys, values, kk, v, start, window):
    """`fused_attention` in the streaming path's layouts: q [b, k, m, e], m = (g, s); kk, v [b, k, s, e];
    returns [b, k, m, e]."""
    b, k, m, e = q.shape
    s = kk.shape[2]
    g = m // s
    heads = q.reshape(b, k, g, s, e).transpose(0, 3, 1, 2, 4).reshape(b, s, k * g, e)  # [b, s, h, e]
    out = fused_attention(heads, keys, values, kk.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3), start, window)
    return out.reshape(b, s, k, g, e).transpose(0, 2, 3, 1, 4).reshape(b, k, m, e)


ATTENTION_BLOCK = 256  # keys per step of the streaming (online-softmax) prefill attention
_MASKED = -1e30  # finite "minus infinity": a fully masked block must not turn the running max into NaN


def _partial(q, keys, values, mask, cap=0.0):
    """Attention of q [b, k, m, e] over keys/values [b, k, t, e] where mask (broadcasts to [m, t]) is set,
    left unnormalized: (sum of p * v [b, k, m, e], running max [b, k, m], sum of p [b, k, m]), float32."""
    scores = softcap(jnp.einsum("bkme,bkte->bkmt", q, keys).astype(jnp.float32), cap)
    scores = jnp.where(mask, scores, _MASKED)
    top = scores.max(axis=-1)
    p = jnp.where(mask, jnp.exp(scores - top[..., None]), 0.0)
    return jnp.einsum("bkmt,bkte->bkme", p.astype(values.dtype), values).astype(jnp.float32), top, p.sum(-1)


def _merge(a, b):
    """Combine two unnormalized partial attentions (online softmax)."""
    top = jnp.maximum(a[1], b[1])
    wa, wb = jnp.exp(a[1] - top), jnp.exp(b[1] - top)
    return a[0] * wa[..., None] + b[0] * wb[..., None], top, a[2] * wa + b[2] * wb


def _partial_blocked(q, keys, values, start, width, window=None, cap=0.0):
    """`_partial` over the cache positions < start, one block of keys at a time (a loop of ceil(start/B)).

    `start` is a scalar, or one position per row ([b]): then the loop runs to the furthest row and each row
    masks the positions at or past its own. q's m axis is (g, s) with s = `width` positions from `start`; a
    query at position p sees no key at or before p - window (None: every key before it)."""
    b, k, m, e = q.shape
    block = min(ATTENTION_BLOCK, keys.shape[2])
    per_row = jnp.ndim(start) == 1
    offsets = jnp.tile(jnp.arange(width), m // width)  # [m]: each query's position after `start`

    def step(j, carry):
        at = j * block
        key_block = jax.lax.dynamic_slice_in_dim(keys, at, block, axis=2)
        value_block = jax.lax.dynamic_slice_in_dim(values, at, block, axis=2)
        positions = at + jnp.arange(block)  # [t]
        visible = (positions[None, :] < start[:, None])[:, None, None, :] if per_row else positions < start
        if window is not None:
            reach = (start[:, None] if per_row else start) + offsets - window  # [b, m] or [m]: p - window
            recent = positions > reach[..., None]  # [b, m, t] or [m, t]
            visible = visible & (recent[:, None] if per_row else recent)
        return _merge(carry, _partial(q, key_block, value_block, visible, cap))

    empty = (jnp.zeros((b, k, m, e), jnp.float32), jnp.full((b, k, m), _MASKED), jnp.zeros((b, k, m)))
    furthest = jnp.max(start) if per_row else start
    first = 0 if window is None else jnp.maximum(jnp.min(start) - window + 1, 0) // block  # (wholly out of reach)
    return jax.lax.fori_loop(first, (furthest + block - 1) // block, step, empty)
