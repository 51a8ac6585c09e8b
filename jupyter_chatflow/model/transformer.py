"""The decoder transformer in Flax NNX: RMSNorm, RoPE, grouped-query attention, a gated MLP, and what the
families add to that core (`config.FAMILIES`): q/k/v biases, per-head q/k norms, norms after attention and after
the MLP, GeGLU, a scaled embedding, sliding-window layers with a rope base of their own, soft-capped scores and
logits, partial rotary embeddings.

Axis legend for the einsums and shape comments:
    b batch   s query positions   t key positions (the whole cache)   d model dim
    h query heads   k key/value heads   g query heads per kv head (h = k * g)   e head dim

Each layer matrix is its own array, with q/k/v fused into one matrix and gate/up into another: on XLA:CPU
this decoded ~1.5x faster than scanning over stacked layer weights in a probe (docs/engine.md, "Layer layout").
Weights arrive in [in, out] order so every projection is `x @ w`.

What differs between the layers of one model (a sliding window or none, the global or the local rope) is held as
arrays (`Buffer`), not as Python attributes: every layer then has the same graph, and the prefill runs all of them
through one compiled layer program.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from . import attention
from .attention import softcap
from .config import ModelConfig
from .quant.matrix import Weight, gather_rows, head_logits, layer_weights, project, weight


class Buffer(nnx.Variable):
    """A constant array that belongs to the model but is not a trained weight (RoPE frequencies)."""


NO_WINDOW = 2**30
"""The window of a layer that attends to every position before it."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class KVCache:
    """Keys and values of every layer, preallocated to a static length T: [b, k, T, e] each."""

    keys: tuple[jax.Array, ...]
    values: tuple[jax.Array, ...]

    @classmethod
    def zeros(
        cls,
        config: ModelConfig,
        batch: int,
        length: int,
        dtype: jnp.dtype,
        sharding: jax.sharding.Sharding | None = None,
    ) -> KVCache:
        """An empty cache of `length` positions, made where `sharding` says (a mesh's, `engine.mesh.cache_sharding`;
        None: the default device)."""
        shape = (batch, config.n_kv_heads, length, config.head_dim)
        return _zeros_on(sharding)(config.n_layers, shape, jnp.dtype(dtype))

    @property
    def length(self) -> int:
        """Positions the cache can hold."""
        return self.keys[0].shape[2]

    def truncated(self, length: int) -> KVCache:
        """A new cache holding the first `length` positions of this one."""
        return _truncate(self, length)

    def write(self, chunk: KVCache, start: jax.Array) -> KVCache:
        """Store a chunk's keys/values ([b, k, s, e] per layer) at positions start..start+s-1; `start` is one
        position for every row, or one per row ([b], each row of the batch at its own position)."""
        put = _write_rows if jnp.ndim(start) == 1 else _write_all
        return KVCache(
            keys=tuple(put(c, n, start) for c, n in zip(self.keys, chunk.keys, strict=True)),
            values=tuple(put(c, n, start) for c, n in zip(self.values, chunk.values, strict=True)),
        )


def _write_all(cache: jax.Array, chunk: jax.Array, start: jax.Array) -> jax.Array:
    return jax.lax.dynamic_update_slice(cache, chunk, (0, 0, start, 0))


# [k, T, e] <- [k, s, e] at position p, row by row
_write_rows = jax.vmap(lambda cache, chunk, p: jax.lax.dynamic_update_slice(cache, chunk, (0, p, 0)))


def _zeros(layers: int, shape: tuple[int, ...], dtype: jnp.dtype) -> KVCache:
    """`KVCache.zeros`: one program makes every layer's arrays (60 eager `jnp.zeros` dispatches took ~27 ms)."""
    return KVCache(
        keys=tuple(jnp.zeros(shape, dtype) for _ in range(layers)),
        values=tuple(jnp.zeros(shape, dtype) for _ in range(layers)),
    )


@functools.lru_cache(maxsize=8)
def _zeros_on(sharding: jax.sharding.Sharding | None):
    """The `_zeros` program whose arrays are made in place with `sharding` (each device its own shard)."""
    return jax.jit(_zeros, static_argnums=(0, 1, 2), out_shardings=sharding)


@functools.partial(jax.jit, static_argnums=(1,))
def _truncate(cache: KVCache, length: int) -> KVCache:
    return KVCache(
        keys=tuple(k[:, :, :length] for k in cache.keys), values=tuple(v[:, :, :length] for v in cache.values)
    )


class RMSNorm(nnx.Module):
    """x / rms(x) * scale, computed in float32."""

    def __init__(self, scale: jax.Array, eps: float):
        self.scale = nnx.Param(scale)
        self.eps = eps

    def __call__(self, x: jax.Array) -> jax.Array:
        x32 = x.astype(jnp.float32)
        normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
        return (normed * self.scale[...].astype(jnp.float32)).astype(x.dtype)


def rotate(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotary embedding, rotate-half layout, of the first r dims of each head (all of them unless the model's
    rotary dimension is partial, as Phi-4-mini's). x: [b, s, n, e]; cos, sin: [b, s, r/2]."""
    r = 2 * cos.shape[-1]
    x1, x2 = jnp.split(x[..., :r], 2, axis=-1)
    cos, sin = cos[:, :, None, :].astype(x.dtype), sin[:, :, None, :].astype(x.dtype)
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin, x[..., r:]], axis=-1)


class Attention(nnx.Module):
    """Grouped-query attention of a chunk over the cached positions before it and (causally) over itself."""

    def __init__(self, config: ModelConfig, weights: dict[str, Any], layer: int):
        self.wqkv = weights["wqkv"]  # [d, (h + 2k) * e] (packed: [(h + 2k) * e, d], see quant/matrix.py)
        self.bqkv = nnx.Param(weights["bqkv"]) if "bqkv" in weights else None  # [(h + 2k) * e]
        self.wo = weights["wo"]  # [h * e, d]
        self.q_norm = RMSNorm(weights["q_norm"], config.norm_eps) if "q_norm" in weights else None  # [e]
        self.k_norm = RMSNorm(weights["k_norm"], config.norm_eps) if "k_norm" in weights else None
        self.n_heads, self.n_kv, self.head_dim = config.n_heads, config.n_kv_heads, config.head_dim
        self.scale, self.cap = config.query_scale, config.attn_softcap
        self.fused = attention.use_fused(self.cap)  # through `dot_product_attention` (model/attention.py)
        # (None in a model without sliding layers: its programs are the plain causal ones, not masks of 2**30)
        sliding = bool(config.sliding_layers)
        self.window = Buffer(jnp.int32(config.window_of(layer) or NO_WINDOW)) if sliding else None
        self.local = Buffer(jnp.int32(layer in config.sliding_layers)) if config.local_rope_base else None
        """Which of the rope tables (`Transformer.embed_chunk`) this layer rotates by: 1 for the local one."""
        self.keep = Buffer(jnp.ones((config.n_heads,), jnp.float32))
        """Each query head's weight before the output projection: 1, or 0 for a head knocked out (`intervened`)."""

    def __call__(self, x, cos, sin, keys, values, start):
        """Attend x [b, s, d] at positions start.. to the cache [b, k, T, e] and to itself (causally).

        The cache is only read here. The chunk's own keys/values [b, k, s, e] are returned for
        `KVCache.write` to store in a separate program: XLA:CPU copies a donated buffer that one program both
        reads and updates in place (the whole cache, every layer, every step). Returns (out, keys, values,
        queries), the queries [b, h, s, e] rotated and scaled, for `attention_rows`.
        """
        b, s, _ = x.shape
        q, kk, v = self.qkv(x, cos, sin)
        window = None if self.window is None else self.window[...]
        if self.fused:
            out = attention.fused(q, keys, values, kk, v, start, window).astype(x.dtype)  # [b, k, m, e]
        else:
            out = attention.streamed(q, keys, values, kk, v, start, window, self.cap).astype(x.dtype)
        queries = q.reshape(b, self.n_heads, s, self.head_dim)  # (k, g) -> h: head i uses kv head i // g
        return self.output(self.heads(out, s)), kk.astype(keys.dtype), v.astype(values.dtype), queries

    def qkv(self, x: jax.Array, cos: jax.Array, sin: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """The queries [b, k, m, e] (m = (g, s): the g query heads of each kv head, rotated and scaled), keys and
        values [b, k, s, e] of x [b, s, d]."""
        b, s, _ = x.shape
        h, k, e = self.n_heads, self.n_kv, self.head_dim
        g = h // k
        qkv = project(x, self.wqkv)
        if self.bqkv is not None:
            qkv = qkv + self.bqkv[...].astype(x.dtype)
        q, kk, v = jnp.split(qkv, [h * e, (h + k) * e], axis=-1)
        q, kk = q.reshape(b, s, h, e), kk.reshape(b, s, k, e)
        if self.q_norm is not None and self.k_norm is not None:  # per head, before the rotation (Qwen 3, Gemma 3)
            q, kk = self.q_norm(q), self.k_norm(kk)
        table = 0 if self.local is None else self.local[...]
        cos, sin = cos[table], sin[table]
        q = rotate(q, cos, sin) * jnp.asarray(self.scale, q.dtype)
        q = q.reshape(b, s, k, g, e).transpose(0, 2, 3, 1, 4).reshape(b, k, g * s, e)  # m = (g, s)
        kk = rotate(kk, cos, sin).transpose(0, 2, 1, 3)  # [b, k, s, e]
        v = v.reshape(b, s, k, e).transpose(0, 2, 1, 3)  # [b, k, s, e]
        return q, kk, v

    def heads(self, out: jax.Array, s: int) -> jax.Array:
        """The attention's output [b, k, m, e] (m = (g, s)) as each query head's: [b, s, h, e]."""
        b, k, _, e = out.shape
        return out.reshape(b, k, self.n_heads // k, s, e).transpose(0, 3, 1, 2, 4).reshape(b, s, self.n_heads, e)

    def output(self, heads: jax.Array) -> jax.Array:
        """The heads' outputs [b, s, h, e], each scaled by its `keep`, through the output projection: [b, s, d]."""
        b, s, h, e = heads.shape
        heads = heads * self.keep[...].astype(heads.dtype)[:, None]
        return project(heads.reshape(b, s, h * e), self.wo)


def attention_rows(
    queries: jax.Array, keys: jax.Array, start: jax.Array, window: int = 0, cap: float = 0.0
) -> jax.Array:
    """Attention probabilities [b, h, s, T] of queries [b, h, s, e] at positions start.. over keys [b, k, T, e].

    The keys must already hold every position up to start + s - 1 (the whole sequence's prefill ran first).
    A sliding layer's `window` hides the keys at or before p - window from the query at p; `cap` soft-caps
    the scores as the layer does.
    """
    b, h, s, e = queries.shape
    k, length = keys.shape[1], keys.shape[2]
    scores = jnp.einsum("bkgse,bkte->bkgst", queries.reshape(b, k, h // k, s, e), keys).astype(jnp.float32)
    scores = softcap(scores, cap)
    rel = (start + jnp.arange(s))[:, None] - jnp.arange(length)[None, :]  # [s, T] query position - key position
    visible = (rel >= 0) & (rel < (window or NO_WINDOW))  # causal, and inside the window
    probs = jax.nn.softmax(jnp.where(visible, scores, -jnp.inf), axis=-1)
    return probs.reshape(b, h, s, length)


class FeedForward(nnx.Module):
    """A gated MLP: (act(x W_gate) * x W_up) W_down, with gate and up fused into one matrix; act is SiLU
    (SwiGLU) or GELU with its tanh approximation (GeGLU, Gemma's `gelu_pytorch_tanh`)."""

    def __init__(self, w_gate_up: Any, w_down: Any, activation: str = "silu"):
        self.w_gate_up: Weight = w_gate_up  # [d, 2f] (a Param, or packed: quant/matrix.py)
        self.w_down: Weight = w_down  # [f, d]
        self.gelu = activation == "gelu_tanh"

    def __call__(self, x: jax.Array) -> jax.Array:
        gate, up = jnp.split(project(x, self.w_gate_up), 2, axis=-1)
        act = jax.nn.gelu(gate, approximate=True) if self.gelu else jax.nn.silu(gate)
        return project(act * up, self.w_down)


class Block(nnx.Module):
    """One pre-norm transformer layer (Gemma 2/3 also norm each branch's output before adding it back)."""

    def __init__(self, config: ModelConfig, weights: dict[str, jax.Array], layer: int):
        norm = lambda name: RMSNorm(weights[name], config.norm_eps) if name in weights else None  # noqa: E731
        self.attn_norm, self.post_attn_norm = norm("attn_norm"), norm("post_attn_norm")
        self.attn = Attention(config, weights, layer)
        self.ffn_norm, self.post_ffn_norm = norm("ffn_norm"), norm("post_ffn_norm")
        self.ffn = FeedForward(weights["w_gate_up"], weights["w_down"], config.family.activation)
        self.steer = Buffer(jnp.zeros((config.dim,), jnp.float32))
        """A vector added to the residual after the layer: zeros, or a direction steered along (`intervened`)."""

    def __call__(self, x, cos, sin, keys, values, start):
        """x [b, s, d] through the layer, attending to its cache [b, k, T, e]: (x, keys, values, queries), the
        chunk's own keys/values [b, k, s, e] and queries [b, h, s, e] as `Attention` returns them."""
        attn_out, k, v, queries = self.attn(self.attn_norm(x), cos, sin, keys, values, start)
        return self.rest(x, attn_out), k, v, queries

    def rest(self, x: jax.Array, attn_out: jax.Array) -> jax.Array:
        """The layer after its attention: the attention's output added back, the feed-forward, the steering."""
        assert self.ffn_norm is not None  # (every family has one)
        x = x + (attn_out if self.post_attn_norm is None else self.post_attn_norm(attn_out))
        ffn_out = self.ffn(self.ffn_norm(x))
        x = x + (ffn_out if self.post_ffn_norm is None else self.post_ffn_norm(ffn_out))
        return x + self.steer[...].astype(x.dtype)


class Transformer(nnx.Module):
    """The whole model: embed, blocks, final norm, output head (tied to the embedding unless the file has one)."""

    def __init__(self, config: ModelConfig, weights: dict, dtype: jnp.dtype = jnp.float32):
        """`weights` as `weights.transformer_weights` arranges them: float arrays, or `quant.packed.Packed`
        matrices (kept quantized, dequantized in the programs)."""
        self.config = config
        self.embed = weight(weights["embed"], dtype)  # [V, d]
        layers = enumerate(weights["layers"])
        self.blocks = nnx.List([Block(config, layer_weights(layer, dtype), i) for i, layer in layers])
        self.norm = RMSNorm(jnp.asarray(weights["norm"], dtype), config.norm_eps)
        self.head = weight(weights["head"], dtype) if weights.get("head") is not None else None  # [V, d]
        # [tables, r/2]: the global rope, then the sliding layers' own (Gemma 3) when they have one
        self.inv_freq = Buffer(jnp.asarray(rope_tables(config, weights.get("rope_freqs"))))
        self.embed_scale = float(np.sqrt(config.dim)) if config.family.embed_scale else 0.0
        self.final_cap, self.rope_gain = config.final_softcap, config.rope_scaling.attn_factor

    @property
    def dtype(self) -> jnp.dtype:
        """The dtype the model computes in (its norms' scales are always plain arrays of it)."""
        return self.norm.scale[...].dtype

    def __call__(self, tokens, start, cache: KVCache, probe_layer=None):
        """tokens: [b, s] at positions start..start+s-1, after the cache's first `start` positions (`start` is
        a scalar, or [b]: each row at its own position, as a batch of decoding sequences is).

        Returns (hidden [b, s, d], the chunk's keys/values as a KVCache of length s, queries): the queries
        [b, h, s, e] of layer `probe_layer` when it is given (for `attention_rows`), else None.
        """
        x, cos, sin = self.embed_chunk(tokens, start)
        keys, values, probed = [], [], None
        for i, block in enumerate(self.blocks):
            x, k, v, queries = block(x, cos, sin, cache.keys[i], cache.values[i], start)
            keys.append(k)
            values.append(v)
            if probe_layer is not None:
                probed = queries if probed is None else jnp.where(probe_layer == i, queries, probed)
        return self.norm(x), KVCache(keys=tuple(keys), values=tuple(values)), probed

    def intervened(self, keep: np.ndarray, steer: np.ndarray) -> Transformer:
        """This model with each layer's heads weighted by `keep` [L, h] (0 knocks a head out) and `steer` [L, d]
        added to the residual after each layer. The weights are the same arrays (nothing is copied), and the
        graph the same: its programs are this model's, compiled once for both."""
        graphdef, state = nnx.split(self)
        # (merged from the state itself, the copy would hold this model's Variables: setting its `keep` set ours;
        # mapped, the state's Variables are new ones around the same arrays)
        other = nnx.merge(graphdef, jax.tree.map(lambda array: array, state))
        for block, weights, vector in zip(other.blocks, keep, steer, strict=True):
            block.attn.keep.set_value(_placed(weights, block.attn.keep.get_value()))
            block.steer.set_value(_placed(vector, block.steer.get_value()))
        return other

    def embed_chunk(self, tokens, start):
        """The first layer's input for tokens [b, s] at positions start..: (x [b, s, d], RoPE cos, sin
        [tables, b, s, r/2], one table per rope of the model: a layer picks its own)."""
        b, s = tokens.shape
        x = gather_rows(self.embed, tokens)  # (a packed table dequantizes only these rows)
        if self.embed_scale:  # Gemma: sqrt(d), rounded to the weights' dtype as HF does
            x = x * jnp.asarray(self.embed_scale, x.dtype)
        positions = (start[:, None] if jnp.ndim(start) == 1 else start) + jnp.arange(s)  # [b, s] or [s]
        positions = jnp.broadcast_to(positions, (b, s)).astype(jnp.float32)
        angles = positions[None, :, :, None] * self.inv_freq[...][:, None, None, :]  # [tables, b, s, r/2]
        if self.rope_gain == 1.0:
            return x, jnp.cos(angles), jnp.sin(angles)
        return x, jnp.cos(angles) * self.rope_gain, jnp.sin(angles) * self.rope_gain

    def logits(self, hidden: jax.Array) -> jax.Array:
        """Project final hidden states [b, d] to vocabulary logits [b, V] in float32 (soft-capped where the model
        caps them)."""
        head = self.embed if self.head is None else self.head
        return softcap(head_logits(hidden, head).astype(jnp.float32), self.final_cap)


def _placed(values: np.ndarray, like: jax.Array) -> jax.Array:
    """`values` as an array of `like`'s dtype placed as `like` is: on a mesh, over its devices; else on the default
    device, uncommitted as the model's own arrays are (a committed one is another program's argument to jit)."""
    if isinstance(like.sharding, jax.sharding.SingleDeviceSharding):
        return jnp.asarray(values, like.dtype)
    return jax.device_put(np.asarray(values, like.dtype), like.sharding)


def inverse_frequencies(config: ModelConfig, freq_factors: np.ndarray | None = None) -> np.ndarray:
    """RoPE inverse frequencies [r/2] of the global layers, with linear scaling or per-frequency factors
    (Llama 3.1+ `rope_freqs`, Phi-3's LongRoPE factors)."""
    exponents = np.arange(0, config.rope_dim, 2, dtype=np.float64) / config.rope_dim
    inv = 1.0 / (config.rope_base**exponents)
    if config.rope_scaling.kind == "linear":
        inv = inv / config.rope_scaling.factor
    if freq_factors is not None:
        inv = inv / np.asarray(freq_factors, dtype=np.float64)
    return inv.astype(np.float32)


def rope_tables(config: ModelConfig, freq_factors: np.ndarray | None = None) -> np.ndarray:
    """[tables, r/2]: the global inverse frequencies, and the sliding layers' own when they have a rope base of
    their own (never scaled, as llama.cpp's `rope_freq_scale_train_swa` is 1)."""
    tables = [inverse_frequencies(config, freq_factors)]
    if config.local_rope_base:
        exponents = np.arange(0, config.rope_dim, 2, dtype=np.float64) / config.rope_dim
        tables.append((1.0 / config.local_rope_base**exponents).astype(np.float32))
    return np.stack(tables)
