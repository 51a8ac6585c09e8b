"""A tiny random-weight Llama model written as a real GGUF file, for fast tests with no downloads.

The file goes through the same loader, tokenizer and engine as a real model. Its vocabulary is byte-level
BPE (the 256 byte tokens, a handful of merges, ChatML control tokens), its weights random.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import gguf
import numpy as np

from .tokenizer.bpe import gpt2_byte_chars
from .tokenizer.tokenizer import CHATML_TEMPLATE

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
MERGES = ("Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ s")
# Byte layout of one block of each K-quant type: where the float16 scale fields sit (gguf-py cannot
# quantize to K types, so tests write random blocks with finite scales and compare against its dequantizer).
_K_SCALE_OFFSETS = {"Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,), "Q2_K": (80, 82), "Q3_K": (108,)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class TinySpec:
    """Shape and storage of a tiny test model."""

    n_layers: int = 2
    dim: int = 64
    n_heads: int = 4
    n_kv_heads: int = 2
    ffn_dim: int = 128
    context_length: int = 512
    quant: str = "F32"
    """Storage type of the layer matrices (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, or a K-quant)."""
    tied: bool = True
    seed: int = 0
    chat_template: str | None = CHATML_TEMPLATE
    rope_freqs: bool = False
    """Ship a `rope_freqs.weight` tensor of per-frequency factors, as Llama 3.1+ GGUF files do."""
    vocabulary: str = "gpt2"
    """'gpt2' (byte-level BPE with merges, like SmolLM2's) or 'llama' (SentencePiece with scores, like TinyLlama's)."""


def tiny_tokens() -> list[str]:
    """Special tokens, the 256 byte tokens, then one token per merge (ids follow merge order)."""
    return [*SPECIALS, *gpt2_byte_chars(), *(m.replace(" ", "") for m in MERGES)]


SPM_PIECES = ("▁", *"abcdefghijklmnopqrstuvwxyz", "▁t", "he", "▁the", "in", "er", "▁a", "on", "▁s", "é", "▁é")


def tiny_spm_tokens() -> tuple[list[str], list[float], list[int]]:
    """A SentencePiece-style vocabulary: <unk>, <s>, </s>, 256 <0xNN> byte tokens, pieces with scores."""
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *SPM_PIECES]
    scores = [0.0] * (3 + 256) + [-float(i) for i in range(len(SPM_PIECES))]
    types = [2, 3, 3, *([6] * 256), *([1] * len(SPM_PIECES))]
    return tokens, scores, types


def write_tiny_gguf(path: str | os.PathLike[str], spec: TinySpec = TinySpec()) -> Path:
    """Write a random-weight Llama GGUF to `path` and return the path."""
    path = Path(path)
    tokens = tiny_tokens()
    writer = gguf.GGUFWriter(str(path), "llama")
    _add_metadata(writer, spec, tokens)
    if spec.vocabulary == "llama":
        tokens = tiny_spm_tokens()[0]
    rng = np.random.default_rng(spec.seed)
    for name, shape in _tensor_shapes(spec, len(tokens)).items():
        values = (rng.standard_normal(shape) * 0.2).astype(np.float32)
        if name.endswith("norm.weight"):
            writer.add_tensor(name, 1.0 + values)
        elif name == "rope_freqs.weight":  # factors >= 1 that stretch the low frequencies, as Llama 3.1's do
            writer.add_tensor(name, np.linspace(1.0, 8.0, shape[0], dtype=np.float32))
        else:
            _add_matrix(writer, name, values, spec.quant if name.startswith("blk.") else "F32", rng)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _add_metadata(writer: gguf.GGUFWriter, spec: TinySpec, tokens: list[str]) -> None:
    writer.add_name("tiny-random-llama")
    writer.add_block_count(spec.n_layers)
    writer.add_context_length(spec.context_length)
    writer.add_embedding_length(spec.dim)
    writer.add_feed_forward_length(spec.ffn_dim)
    writer.add_head_count(spec.n_heads)
    writer.add_head_count_kv(spec.n_kv_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(spec.dim // spec.n_heads)
    if spec.vocabulary == "llama":
        _add_spm_vocabulary(writer)
    else:
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("smollm")
        writer.add_token_list(tokens)
        writer.add_token_types([3 if t in SPECIALS else 1 for t in tokens])
        writer.add_token_merges(list(MERGES))
        writer.add_add_bos_token(False)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    if spec.chat_template is not None:
        writer.add_chat_template(spec.chat_template)


def _add_spm_vocabulary(writer: gguf.GGUFWriter) -> None:
    tokens, scores, types = tiny_spm_tokens()
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_add_space_prefix(True)


def _tensor_shapes(spec: TinySpec, vocab: int) -> dict[str, tuple[int, ...]]:
    """Numpy shapes ([out, in]) of every tensor, named as llama.cpp names them."""
    head_dim = spec.dim // spec.n_heads
    kv_dim = spec.n_kv_heads * head_dim
    shapes: dict[str, tuple[int, ...]] = {
        "token_embd.weight": (vocab, spec.dim),
        "output_norm.weight": (spec.dim,),
    }
    if not spec.tied:
        shapes["output.weight"] = (vocab, spec.dim)
    if spec.rope_freqs:
        shapes["rope_freqs.weight"] = (head_dim // 2,)
    for i in range(spec.n_layers):
        shapes |= {
            f"blk.{i}.attn_norm.weight": (spec.dim,),
            f"blk.{i}.attn_q.weight": (spec.dim, spec.dim),
            f"blk.{i}.attn_k.weight": (kv_dim, spec.dim),
            f"blk.{i}.attn_v.weight": (kv_dim, spec.dim),
            f"blk.{i}.attn_output.weight": (spec.dim, spec.dim),
            f"blk.{i}.ffn_norm.weight": (spec.dim,),
            f"blk.{i}.ffn_gate.weight": (spec.ffn_dim, spec.dim),
            f"blk.{i}.ffn_up.weight": (spec.ffn_dim, spec.dim),
            f"blk.{i}.ffn_down.weight": (spec.dim, spec.ffn_dim),
        }
    return shapes


def _add_matrix(writer: gguf.GGUFWriter, name: str, values: np.ndarray, quant: str, rng) -> None:
    qtype = gguf.GGMLQuantizationType[quant]
    if quant == "F32":
        writer.add_tensor(name, values)
    elif quant in _K_SCALE_OFFSETS:
        writer.add_tensor(name, random_k_blocks(values.shape, quant, rng), raw_dtype=qtype)
    else:
        writer.add_tensor(name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)


def random_k_blocks(shape: tuple[int, ...], quant: str, rng) -> np.ndarray:
    """Random K-quant bytes for a [rows, cols] matrix whose float16 scales are small and finite."""
    block_size, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[quant]]
    rows, cols = shape
    blocks = rng.integers(0, 256, (rows, cols // block_size, type_size), dtype=np.uint8)
    scale = np.array([0.01], np.float16).view(np.uint8)
    for offset in _K_SCALE_OFFSETS[quant]:
        blocks[..., offset : offset + 2] = scale
    return blocks.reshape(rows, -1)
