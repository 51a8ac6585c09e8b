"""Map GGUF tensors to the transformer's layout: fused q/k/v and gate/up, [in, out] order, HF rotary layout."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .config import ModelConfig


def unpermute_rotary(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's q/k row permutation (interleaved pairs) so RoPE can rotate halves, as HF does.

    The converter reshaped each head's rows as (2, e/2) -> (e/2, 2); this reverses it. weight: [h * e, d].
    """
    rows, dim = weight.shape
    head_dim = rows // n_heads
    return weight.reshape(n_heads, head_dim // 2, 2, dim).swapaxes(1, 2).reshape(rows, dim)


def transformer_weights(config: ModelConfig, tensors: Mapping[str, np.ndarray]) -> dict:
    """Arrange dequantized GGUF tensors ([out, in]) into the dict `Transformer` is built from."""
    layers = []
    for i in range(config.n_layers):
        t = lambda name, i=i: tensors[f"blk.{i}.{name}.weight"]  # noqa: E731
        wq = unpermute_rotary(t("attn_q"), config.n_heads)
        wk = unpermute_rotary(t("attn_k"), config.n_kv_heads)
        layers.append(
            {
                "attn_norm": t("attn_norm"),
                "wqkv": np.concatenate([wq, wk, t("attn_v")], axis=0).T,  # [d, (h + 2k) e]
                "wo": t("attn_output").T,  # [h e, d]
                "ffn_norm": t("ffn_norm"),
                "w_gate_up": np.concatenate([t("ffn_gate"), t("ffn_up")], axis=0).T,  # [d, 2f]
                "w_down": t("ffn_down").T,  # [f, d]
            }
        )
    return {
        "embed": tensors["token_embd.weight"],  # [V, d]
        "layers": layers,
        "norm": tensors["output_norm.weight"],
        "head": tensors.get("output.weight"),  # [V, d], None when tied
        "rope_freqs": tensors.get("rope_freqs.weight"),
    }
