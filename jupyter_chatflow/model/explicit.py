"""The transformer's forward pass written out, for looking inside it: every layer's residual stream,
differentiable end to end (a model with heads knocked out or a direction added, `Transformer.intervened`, runs it
with those changes: they are its weights).

The serving path (`transformer.Transformer.__call__`) attends through a KV cache and, on CPU, streams the keys in
blocks inside a loop (`attention.streamed`) that reverse-mode differentiation cannot go through. This pass has no
cache: each layer computes its whole attention matrix (causal, inside a sliding layer's window, soft-capped where
the model caps), from the same weights and the same pieces (`Attention.qkv`, `heads`, `output`, the norms and the
feed-forward), so its logits equal the serving path's (tests/model/test_explicit.py) and `jax.grad` goes through.
It is meant for a prompt of a few hundred tokens at a time: the matrices are [heads, T, T] per layer.

- `residuals`: the residual stream before the first layer and after each one, [L + 1, b, T, d].
- `lens_logits`: each of those through the model's final norm and output head (the logit lens).
- `target_logprob`: log p(target) (minus log p(contrast)) after the last position, as a function of the vectors
  fed to the first layer (what `jax.grad` differentiates for attribution).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .attention import softcap
from .transformer import NO_WINDOW, Attention, Block, Transformer


def attend(attn: Attention, x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Layer attention of x [b, s, d] over itself, causally, with the whole score matrix."""
    s = x.shape[1]
    q, kk, v = attn.qkv(x, cos, sin)  # [b, k, m, e] (m = (g, s)), [b, k, s, e]
    scores = softcap(jnp.einsum("bkme,bkte->bkmt", q, kk).astype(jnp.float32), attn.cap)
    position = jnp.arange(s)
    queried = jnp.tile(position, q.shape[2] // s)  # [m]: each query's position (m = (g, s), g major)
    window = NO_WINDOW if attn.window is None else attn.window[...]
    rel = queried[:, None] - position[None, :]
    visible = (rel >= 0) & (rel < window)
    probs = jax.nn.softmax(jnp.where(visible, scores, -jnp.inf), axis=-1)
    out = jnp.einsum("bkmt,bkte->bkme", probs.astype(v.dtype), v)
    return attn.output(attn.heads(out, s))  # (each head weighted by its `keep`)


def layer(block: Block, x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """One layer as `Block.__call__` runs it, its attention written out (`attend`)."""
    assert block.attn_norm is not None  # (every family has one)
    return block.rest(x, attend(block.attn, block.attn_norm(x), cos, sin))


def residuals(model: Transformer, tokens: jax.Array, *, embeds: jax.Array | None = None) -> jax.Array:
    """The residual stream of tokens [b, T] from position 0: before the first layer, then after each layer,
    [L + 1, b, T, d]. `embeds` [b, T, d]: the vectors fed to the first layer, in place of the tokens' own (a
    baseline, or a point on an integration path)."""
    x, cos, sin = model.embed_chunk(tokens, 0)
    if embeds is not None:
        x = embeds.astype(x.dtype)
    stream = [x]
    for block in model.blocks:
        x = layer(block, x, cos, sin)
        stream.append(x)
    return jnp.stack(stream)


def lens_logits(model: Transformer, stream: jax.Array) -> jax.Array:
    """Residuals [..., d] through the final norm and the output head (soft-capped where the model caps): the logits
    each would give were it the last layer's output, float32 [..., V]."""
    lead, d = stream.shape[:-1], stream.shape[-1]
    return model.logits(model.norm(stream).reshape(-1, d)).reshape(*lead, -1)


def target_logprob(
    model: Transformer, tokens: jax.Array, embeds: jax.Array, target, contrast, last=-1
) -> jax.Array:  # fmt: skip
    """log p(target | embeds) after position `last` (the last one by default: a padded input says which), less log
    p(contrast) when `contrast` >= 0: a scalar."""
    stream = residuals(model, tokens, embeds=embeds)[-1]  # [b, T, d]
    last = jax.lax.dynamic_index_in_dim(stream, jnp.asarray(last) % stream.shape[1], axis=1, keepdims=False)
    logprobs = jax.nn.log_softmax(lens_logits(model, last)[0])
    return logprobs[target] - jnp.where(contrast >= 0, logprobs[jnp.maximum(contrast, 0)], 0.0)
