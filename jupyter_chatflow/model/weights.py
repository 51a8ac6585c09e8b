"""Map GGUF tensors to the transformer's layout: fused q/k/v and gate/up, [in, out] order, HF rotary layout.

Which optional tensors a layer has decides what it computes (llama.cpp's tensor names):
`attn_q/k/v.bias` (Qwen 2), `attn_q_norm`/`attn_k_norm` per head (Qwen 3, Gemma 3), `post_attention_norm` and
`post_ffw_norm` (Gemma 2/3), a fused `attn_qkv` and an `ffn_up` holding gate and up (Phi-3).

A matrix may come packed (`quant.packed.Packed`, `weights="as-file"`): then only rows move (stacked, permuted),
never a block, and it stays in the file's [out, in] order where a float one is transposed to [in, out].
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from jupyter_chatflow.errors import ModelFormatError

from .config import ModelConfig
from .quant.packed import Packed, stack_rows

Matrix = np.ndarray | Packed
"""A weight matrix: float values, or packed blocks."""

# The transformer's name for each optional per-layer tensor, and llama.cpp's.
_OPTIONAL = {
    "q_norm": "attn_q_norm",
    "k_norm": "attn_k_norm",
    "post_attn_norm": "post_attention_norm",
    "post_ffn_norm": "post_ffw_norm",
}


def unpermute_rotary(weight: Matrix, n_heads: int) -> Matrix:
    """Undo llama.cpp's q/k row permutation (interleaved pairs) so RoPE can rotate halves, as HF does.

    The converter reshaped each head's rows as (2, e/2) -> (e/2, 2); this reverses it. weight: [h * e, d]
    (or a bias [h * e]; or a packed matrix, whose rows are taken in that order).
    """
    if isinstance(weight, Packed):
        return weight.take(unpermute_rotary(np.arange(weight.rows), n_heads))  # type: ignore[arg-type]  # (an index)
    rows = weight.shape[0]
    head_dim = rows // n_heads
    return weight.reshape(n_heads, head_dim // 2, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def required_layer_tensors(names: Mapping[str, object] | set[str], layer: int) -> list[str]:
    """The tensor names layer `layer` must have, given which of the alternatives (fused or not) the file uses."""
    has = lambda part: f"blk.{layer}.{part}.weight" in names  # noqa: E731
    attention = ["attn_qkv"] if has("attn_qkv") else ["attn_q", "attn_k", "attn_v"]
    mlp = ["ffn_up"] if has("ffn_up") and not has("ffn_gate") else ["ffn_gate", "ffn_up"]
    parts = ["attn_norm", *attention, "attn_output", "ffn_norm", *mlp, "ffn_down"]
    return [f"blk.{layer}.{part}.weight" for part in parts]


def transformer_weights(config: ModelConfig, tensors: Mapping[str, Matrix]) -> dict:
    """Arrange GGUF tensors ([out, in]: dequantized, or packed) into the dict `Transformer` is built from."""
    return {
        "embed": tensors["token_embd.weight"],  # [V, d]
        "layers": [_layer(config, tensors, i) for i in range(config.n_layers)],
        "norm": tensors["output_norm.weight"],
        "head": tensors.get("output.weight"),  # [V, d], None when tied
        "rope_freqs": _rope_factors(config, tensors),
    }


def _layer(config: ModelConfig, tensors: Mapping[str, Matrix], i: int) -> dict[str, Matrix]:
    def t(name: str, kind: str = "weight") -> Matrix:
        return tensors[f"blk.{i}.{name}.{kind}"]

    def has(name: str, kind: str = "weight") -> bool:
        return f"blk.{i}.{name}.{kind}" in tensors

    layer = {
        "attn_norm": t("attn_norm"),
        "wqkv": _in_out(_qkv(config, t, has)),  # [d, (h + 2k) e]
        "wo": _in_out(t("attn_output")),  # [h e, d]
        "ffn_norm": t("ffn_norm"),
        "w_gate_up": _in_out(stack_rows([t("ffn_gate"), t("ffn_up")]) if has("ffn_gate") else t("ffn_up")),  # [d, 2f]
        "w_down": _in_out(t("ffn_down")),  # [f, d]
    }
    if has("attn_q", "bias"):
        layer["bqkv"] = stack_rows([t("attn_q", "bias"), t("attn_k", "bias"), t("attn_v", "bias")])
    return layer | {ours: t(theirs) for ours, theirs in _OPTIONAL.items() if has(theirs)}


def _in_out(matrix: Matrix) -> Matrix:
    """A float matrix [out, in] transposed for `x @ w`; a packed one as it is (it projects as `x @ W.T`)."""
    return matrix if isinstance(matrix, Packed) else matrix.T


def _qkv(config: ModelConfig, t, has) -> Matrix:
    """q, k and v stacked by rows ([(h + 2k) e, d]), in HF's rotate-halves layout."""
    if has("attn_qkv"):
        return t("attn_qkv")
    wq, wk = t("attn_q"), t("attn_k")
    if config.family.permuted_rope:
        wq, wk = unpermute_rotary(wq, config.n_heads), unpermute_rotary(wk, config.n_kv_heads)
    return stack_rows([wq, wk, t("attn_v")])


def _rope_factors(config: ModelConfig, tensors: Mapping[str, Any]) -> np.ndarray | None:
    """Per-frequency divisors of the rotary frequencies: Llama 3.1's `rope_freqs`, or Phi-3's LongRoPE factors,
    the long ones when the window served is longer than the one trained without scaling (as llama.cpp picks)."""
    if "rope_freqs.weight" in tensors:
        return tensors["rope_freqs.weight"]
    if "rope_factors_long.weight" not in tensors:
        return None
    original = config.rope_scaling.original_context_length
    if not original:
        raise ModelFormatError(
            f"the file has LongRoPE factors but no '{config.architecture}.rope.scaling.original_context_length'."
        )
    long = config.context_length > original
    return tensors["rope_factors_long.weight" if long else "rope_factors_short.weight"]
