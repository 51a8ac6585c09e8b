"""An independent NumPy Llama forward pass over raw GGUF tensors, used as the oracle for the tiny model.

It works on the file's own layout (llama.cpp's interleaved-pair RoPE, [out, in] matrices), so it checks the
engine's weight rearrangement (fused matrices, un-permuted rotary rows) as well as its math.
"""

from __future__ import annotations

import numpy as np


def rms_norm(x: np.ndarray, scale: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * scale


def rope_interleaved(x: np.ndarray, base: float, factors: np.ndarray | None = None) -> np.ndarray:
    """x: [T, n, e]; rotate each adjacent pair (2j, 2j+1) by pos * base^(-2j/e) / factors[j] (llama.cpp)."""
    length, _, dim = x.shape
    theta = np.arange(length)[:, None] * base ** (-np.arange(0, dim, 2) / dim)[None, :]  # [T, e/2]
    if factors is not None:
        theta = theta / factors[None, :]
    cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def forward(tensors, config, ids) -> tuple[np.ndarray, list[np.ndarray]]:
    """Logits [T, V] for every position, and each layer's attention probabilities [h, T, T]."""
    t = {name: np.asarray(value, np.float64) for name, value in tensors.items()}
    length, heads, kv_heads, dim = len(ids), config.n_heads, config.n_kv_heads, config.head_dim
    x = t["token_embd.weight"][np.asarray(ids)]
    causal = np.tril(np.ones((length, length), bool))
    all_probs = []
    for i in range(config.n_layers):
        w = lambda name, i=i: t[f"blk.{i}.{name}.weight"]  # noqa: E731
        h = rms_norm(x, w("attn_norm"), config.norm_eps)
        factors = t.get("rope_freqs.weight")
        q = rope_interleaved((h @ w("attn_q").T).reshape(length, heads, dim), config.rope_base, factors)
        k = rope_interleaved((h @ w("attn_k").T).reshape(length, kv_heads, dim), config.rope_base, factors)
        v = (h @ w("attn_v").T).reshape(length, kv_heads, dim)
        group = heads // kv_heads
        probs = np.empty((heads, length, length))
        out = np.empty((length, heads, dim))
        for head in range(heads):
            scores = q[:, head] @ k[:, head // group].T / np.sqrt(dim)
            scores = np.where(causal, scores, -np.inf)
            p = np.exp(scores - scores.max(-1, keepdims=True))
            probs[head] = p / p.sum(-1, keepdims=True)
            out[:, head] = probs[head] @ v[:, head // group]
        all_probs.append(probs)
        x = x + out.reshape(length, -1) @ w("attn_output").T
        h = rms_norm(x, w("ffn_norm"), config.norm_eps)
        gate, up = h @ w("ffn_gate").T, h @ w("ffn_up").T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w("ffn_down").T
    x = rms_norm(x, t["output_norm.weight"], config.norm_eps)
    head = t.get("output.weight", t["token_embd.weight"])
    return x @ head.T, all_probs
