"""Make the tiny random-weight GGUF fixtures in this folder, and transformers' reference logits for each.

For every model in MODELS: build it with `transformers` from a config class (offline, fixed seed), give its
weights values large enough that every feature the model is meant to exercise changes the logits, save it with
`save_pretrained` next to a tiny tokenizer trained here, convert that folder with llama.cpp's own
`convert_hf_to_gguf.py --outtype f32`, and write transformers' float32 logits of the ORIGINAL weights at every
position of a fixed random token sequence. Then reread each GGUF with llama.cpp's `gguf` package and write
`manifest.json` (configs, metadata keys, tensor names and shapes, checks).

This script is not part of the package's tests (its name is not test_*.py) and needs its own Python with
torch, transformers (5.x), tokenizers, sentencepiece and protobuf:

    python -m venv /tmp/hfenv
    /tmp/hfenv/bin/pip install torch  # a CPU build is enough
    /tmp/hfenv/bin/pip install transformers tokenizers sentencepiece protobuf safetensors numpy pyyaml tqdm

llama.cpp's converter comes from the llama-cpp-python sdist on PyPI (its vendor/llama.cpp folder); the
converter is run with that folder's own gguf-py:

    cd /tmp/tools/llsrc && pip download --no-binary :all: --no-deps llama-cpp-python==0.3.36
    tar xzf llama_cpp_python-0.3.36.tar.gz

    /tmp/hfenv/bin/python tests/model/archs/make_tiny_models.py \
        --llama-cpp /tmp/tools/llsrc/llama_cpp_python-0.3.36/vendor/llama.cpp

The tokenizers are trained here on TEXT below (no model hub). For the byte-level BPE ones the converter would
refuse a vocabulary it does not know (it hashes the tokenization of a test string: `get_vocab_base_pre`), so
its model class's `get_vocab_base_pre` is patched to return the pre-tokenizer name that the family's real files
carry ("llama-bpe", "qwen2"); the tensors and all other metadata are the converter's own.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_LLAMA_CPP = "/tmp/tools/llsrc/llama_cpp_python-0.3.36/vendor/llama.cpp"
DEFAULT_WORK = "/tmp/tiny-archs"
N_TOKENS = 48  # length of each reference sequence
SPM_VOCAB = 384  # sentencepiece vocabularies: 256 byte pieces + 4 specials + characters + merges
BPE_MERGES = 100  # byte-level BPE vocabularies: 256 bytes + 100 merges + the family's special tokens

# Training text for the tokenizers: a little English, code and numbers.
TEXT = """\
The quick brown fox jumps over the lazy dog. A small model is still a model: it has an embedding table,
a stack of attention and feed-forward layers, and an output head that turns the last hidden state into
logits over the vocabulary. Tests compare those logits position by position, so every layer must agree.
When the window slides, the oldest tokens fall out of view; when the rotary frequencies are scaled, long
wavelengths stretch while short ones stay as they were. Nothing here is trained to say anything useful.
It's a test, isn't it? We'll see. They're sure they've checked, and I'd say you'll agree.

def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)

for i in range(10):
    total = total + i * 3.14159  # accumulate
    if total > 100:
        print(f"total={total:.2f} at step {i}")
        break

class Cache:
    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self.items: dict[str, list[int]] = {}

Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 256 1024 2048 4096 65536 3.5 -7 1e-6 2026-01-31 12:30:45.
Prices rose 12% in 2024, from $1,250.00 to $1,400.00; the index fell 3.2 points to 987.6 on Monday.
JSON: {"name": "tiny", "layers": 4, "heads": [4, 2], "ok": true, "scale": 0.125}
Lists and lines:
- first item
- second item
  * nested, with tabs\tand  double  spaces
Emoji and accents: cafe, café, naïve, Straße, déjà vu, 東京, Привет.
"""

LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Tokenizers. "spm-*": a sentencepiece model (tokenizer.model); "bpe-*": a GPT-2 style byte-level BPE
# (tokenizer.json) whose pre-tokenizer name the converter is told (see the module docstring).
TOKENIZERS: dict[str, dict[str, Any]] = {
    # Llama 2 / Phi-3 style: <unk>=0 <s>=1 </s>=2, a dummy prefix space.
    "spm-llama": {"kind": "spm", "ids": {"unk": 0, "bos": 1, "eos": 2, "pad": -1}, "dummy_prefix": True},
    # Phi-3 style: the Llama 2 ids plus control tokens; </s> stays id 2, eos is <|endoftext|> as in Phi-3's
    # config (llama.cpp looks <|endoftext|> up by text when general.name contains "phi3").
    "spm-phi3": {
        "kind": "spm",
        "ids": {"unk": 0, "bos": 1, "eos": 2, "pad": -1},
        "dummy_prefix": True,
        "control": ["<|endoftext|>", "<|assistant|>", "<|user|>", "<|end|>"],
        "eos_piece": "<|endoftext|>",
    },
    # Gemma style: <pad>=0 <eos>=1 <bos>=2 <unk>=3, no dummy prefix (the converter writes add_space_prefix false).
    "spm-gemma": {"kind": "spm", "ids": {"pad": 0, "eos": 1, "bos": 2, "unk": 3}, "dummy_prefix": False},
    "bpe-llama3": {
        "kind": "bpe",
        "split": LLAMA3_SPLIT,
        "ignore_merges": True,
        "nfc": False,
        "specials": ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"],
        "bos": "<|begin_of_text|>",
        "eos": "<|end_of_text|>",
        "pad": None,
        "pre": "llama-bpe",
    },
    "bpe-qwen2": {
        "kind": "bpe",
        "split": QWEN2_SPLIT,
        "ignore_merges": False,
        "nfc": True,
        "specials": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        "bos": None,
        "eos": "<|endoftext|>",
        "pad": "<|endoftext|>",
        "pre": "qwen2",
    },
}

_DIMS = {
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "max_position_embeddings": 128,
}

# Each model: transformers classes, the tokenizer, config values (vocab size and special ids are filled in
# from the tokenizer), what it exercises, and how its weights are scaled (see init_weights).
MODELS: dict[str, dict[str, Any]] = {
    "llama": {
        "config": "LlamaConfig",
        "model": "LlamaForCausalLM",
        "tokenizer": "spm-llama",
        "kwargs": {
            **_DIMS,
            "head_dim": 16,
            "rms_norm_eps": 1e-5,
            "tie_word_embeddings": False,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        },
        "exercises": (
            "plain Llama: GQA (4 query heads, 2 kv heads), SwiGLU, RMSNorm, untied output.weight, "
            "sentencepiece vocabulary; the converter permutes attn_q/attn_k rows (HF rotate_half order -> "
            "llama.cpp's interleaved pairs)"
        ),
    },
    "llama3-rope": {
        "config": "LlamaConfig",
        "model": "LlamaForCausalLM",
        "tokenizer": "bpe-llama3",
        "init": {"final_norm": (0.15, 0.45)},
        "kwargs": {
            **_DIMS,
            "head_dim": 16,
            "rms_norm_eps": 1e-5,
            "tie_word_embeddings": True,
            "rope_parameters": {
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
            },
        },
        "exercises": (
            "Llama 3.1 rope scaling (rope_type llama3, factor 8, original context 16, theta 500000): the converter "
            "writes the per-frequency divisors as rope_freqs.weight [head_dim/2]; tied embeddings (no "
            "output.weight, like Llama 3.2 1B/3B); byte-level BPE vocabulary with tokenizer.ggml.pre llama-bpe"
        ),
        "variants": {"rope_scaling_off": "config: rope_parameters -> default rope, theta 500000"},
    },
    "qwen2": {
        "config": "Qwen2Config",
        "model": "Qwen2ForCausalLM",
        "tokenizer": "bpe-qwen2",
        "init": {"final_norm": (0.15, 0.45)},
        "kwargs": {
            **_DIMS,
            "rms_norm_eps": 1e-6,
            "tie_word_embeddings": True,
            "use_sliding_window": False,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
        },
        "exercises": (
            "Qwen2: non-zero q/k/v biases (attn_q.bias, attn_k.bias, attn_v.bias), NEOX rope (attn_q/attn_k NOT "
            "permuted), tied embeddings (no output.weight), theta 1e6, byte-level BPE with tokenizer.ggml.pre qwen2"
        ),
        "variants": {"qkv_bias_zero": "state dict: q/k/v biases set to 0"},
    },
    "qwen3": {
        "config": "Qwen3Config",
        "model": "Qwen3ForCausalLM",
        "tokenizer": "bpe-qwen2",
        "kwargs": {
            **_DIMS,
            "head_dim": 24,
            "rms_norm_eps": 1e-6,
            "tie_word_embeddings": False,
            "attention_bias": False,
            "use_sliding_window": False,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
        },
        "exercises": (
            "Qwen3: per-head RMSNorm of q and k before rope (attn_q_norm/attn_k_norm [head_dim], random around 1), "
            "head_dim 24 != hidden/heads 16 (attention.key_length/value_length 24: attn_q is [96, 64], "
            "attn_output [64, 96]), untied output.weight, no biases, NEOX rope"
        ),
        "variants": {"qk_norm_ones": "state dict: q_norm/k_norm weights set to 1"},
    },
    "gemma2": {
        "config": "Gemma2Config",
        "model": "Gemma2ForCausalLM",
        "tokenizer": "spm-gemma",
        "init": {"final_norm": (-0.4, -0.2), "qk_gain": (1.5, 6.0, 1.5, 6.0)},
        "kwargs": {
            **_DIMS,
            "num_hidden_layers": 4,
            "head_dim": 16,
            "rms_norm_eps": 1e-6,
            "hidden_activation": "gelu_pytorch_tanh",
            "query_pre_attn_scalar": 16,
            "sliding_window": 8,
            "attn_logit_softcapping": 50.0,
            "final_logit_softcapping": 30.0,
            "tie_word_embeddings": True,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        },
        "exercises": (
            "Gemma2: embeddings scaled by sqrt(hidden)=8, RMSNorm (1+w) (the converter stores w+1), four norms "
            "per layer (attn_norm, post_attention_norm, ffn_norm, post_ffw_norm), GeGLU (gelu tanh), "
            "attention scale query_pre_attn_scalar^-0.5 = head_dim^-0.5, attention logit softcap 50 and final "
            "logit softcap 30 (both active: see sensitivity), sliding window 8 on layers 0 and 2 (even layers) "
            "and global attention on layers 1 and 3, tied embeddings, NEOX rope"
        ),
        "variants": {
            "attn_softcap_off": "config: attn_logit_softcapping None",
            "final_softcap_off": "config: final_logit_softcapping None",
            "sliding_window_off": "config: sliding_window 4096 (every layer sees all 48 tokens)",
        },
    },
    "gemma3": {
        "config": "Gemma3TextConfig",
        "model": "Gemma3ForCausalLM",
        "tokenizer": "spm-gemma",
        "init": {"final_norm": (-0.85, -0.55)},
        "kwargs": {
            **_DIMS,
            "num_hidden_layers": 6,
            "intermediate_size": 64,  # 6 layers of 128 would make the file ~1 MB
            "head_dim": 16,
            "rms_norm_eps": 1e-6,
            "hidden_activation": "gelu_pytorch_tanh",
            "query_pre_attn_scalar": 16,
            "sliding_window": 8,
            "final_logit_softcapping": None,
            "attn_logit_softcapping": None,
            "tie_word_embeddings": True,
            "rope_parameters": {
                "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            },
        },
        "exercises": (
            "Gemma3 text: the default layer pattern (sliding_window_pattern 6): layers 0-4 sliding window 8 with "
            "rope theta 10000 (gemma3.rope.freq_base_swa), layer 5 global with theta 1e6 (gemma3.rope.freq_base); "
            "per-head q/k RMSNorm (1+w, stored w+1: attn_q_norm/attn_k_norm), four norms per layer, embeddings "
            "scaled by sqrt(hidden), GeGLU, no softcapping, tied embeddings, NEOX rope"
        ),
        "variants": {
            "sliding_window_off": "config: sliding_window 4096",
            "local_theta_as_global": "config: sliding_attention rope_theta 1e6 (same as the global layers)",
        },
    },
    "phi3": {
        "config": "Phi3Config",
        "model": "Phi3ForCausalLM",
        "tokenizer": "spm-phi3",
        "kwargs": {
            **_DIMS,
            "rms_norm_eps": 1e-5,
            "tie_word_embeddings": False,
            "sliding_window": None,
            "original_max_position_embeddings": 128,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        },
        "exercises": (
            "Phi-3: fused qkv_proj (attn_qkv.weight [q+k+v rows = 64+32+32, 64]) and fused gate_up_proj "
            "(ffn_up.weight [2*ffn = 256, 64], gate rows first, no ffn_gate), untied output.weight, no sliding "
            "window (phi3.attention.sliding_window 0), NEOX rope"
        ),
    },
    "phi3-partial": {
        "config": "Phi3Config",
        "model": "Phi3ForCausalLM",
        "tokenizer": "spm-phi3",
        "init": {"final_norm": (0.15, 0.45)},
        "kwargs": {
            **_DIMS,
            "rms_norm_eps": 1e-5,
            "tie_word_embeddings": True,
            "sliding_window": None,
            "original_max_position_embeddings": 128,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.75},
        },
        "exercises": (
            "Phi-3 with partial rotary factor 0.75 (as Phi-4-mini): phi3.rope.dimension_count 12 < head dim 16, "
            "rope on the first 12 dims of each head (NEOX halves of 6), the last 4 unrotated; tied embeddings "
            "(as Phi-4-mini: no output.weight)"
        ),
        "variants": {"full_rotary": "config: partial_rotary_factor 1.0"},
    },
    "phi3-longrope": {
        "config": "Phi3Config",
        "model": "Phi3ForCausalLM",
        "tokenizer": "spm-phi3",
        "kwargs": {
            **_DIMS,
            "max_position_embeddings": 1024,
            "original_max_position_embeddings": 256,
            "rms_norm_eps": 1e-5,
            "tie_word_embeddings": False,
            "sliding_window": None,
            "rope_parameters": {
                "rope_type": "longrope",
                "rope_theta": 10000.0,
                "short_factor": [1.0, 1.1, 1.25, 1.5, 1.8, 2.2, 2.7, 3.3],
                "long_factor": [1.0, 2.0, 4.0, 6.0, 9.0, 12.0, 16.0, 24.0],
            },
        },
        "exercises": (
            "Phi-3 LongRoPE: rope_factors_short/rope_factors_long [head_dim/2 = 8] (each frequency divided by the "
            "factor) and phi3.rope.scaling.attn_factor sqrt(1 + ln(1024/256)/ln(256)) = 1.1180 multiplying cos "
            "and sin (so q.k scores by its square); context 1024, original 256: the 48-token reference is <= 256, "
            "so transformers used the SHORT factors (llama.cpp picks the long ones when its context per sequence "
            "is > 256; it pads contexts to a multiple of 256, hence original 256 rather than something smaller)"
        ),
        "variants": {
            "long_factors": "config: short_factor := long_factor (what a context > 256 would use)",
            "attn_factor_one": "config: attention_factor 1.0",
            "plain_rope": "config: default rope (no factors, no attention factor)",
        },
    },
}


# What llama.cpp's converter does with each model, as found by reading the GGUFs back (manifest: converter_notes).
NOTES: dict[str, list[str]] = {
    "llama": [
        "attn_q/attn_k rows permuted per head (LlamaModel.permute: HF's rotate_half halves -> interleaved "
        "pairs, so llama.cpp's normal (GPT-J style) rope applies); attn_v, attn_output as in transformers",
        "llama.rope.dimension_count 16, attention.key_length/value_length 16 (head_dim is in config.json), "
        "llama.vocab_size written; no rope.scaling.* keys",
    ],
    "llama3-rope": [
        "attn_q/attn_k permuted as in llama",
        "rope_freqs.weight [8]: per-frequency divisors (llama.cpp divides frequency i by them): 1 where the "
        "wavelength < original/high_freq_factor, 8 where > original/low_freq_factor, smooth in between; "
        "no llama.rope.scaling.* keys at all",
        "no output.weight (tied); tokenizer.ggml.pre llama-bpe forced (LlamaModel.get_vocab_base_pre patched)",
    ],
    "qwen2": [
        "blk.N.attn_q.bias/attn_k.bias/attn_v.bias; attn_q/attn_k NOT permuted (NEOX rope)",
        "no attention.key_length and no rope.dimension_count (config.json has no head_dim): "
        "head_dim = embedding_length / head_count",
        "no output.weight (tied); tokenizer.ggml.pre qwen2 forced (Qwen2Model.get_vocab_base_pre patched)",
    ],
    "qwen3": [
        "attention.key_length/value_length 24; attn_q [96, 64], attn_k/attn_v [48, 64], attn_output [64, 96]",
        "attn_q_norm/attn_k_norm [24] as in transformers (plain RMSNorm weights, no +1); not permuted",
        "no rope.dimension_count (rope over all 24 dims); tokenizer.ggml.pre qwen2 forced "
        "(Qwen3Model inherits Qwen2Model's patched get_vocab_base_pre)",
    ],
    "gemma2": [
        "every *norm.weight stored as w + 1 (attn_norm, post_attention_norm, ffn_norm, post_ffw_norm, "
        "output_norm): multiply by the stored value",
        "no gemma2.rope.freq_base key (llama.cpp's default 10000 is the value used here); no "
        "query_pre_attn_scalar key (llama.cpp scales q by head_dim^-0.5 except for its 27B size); no "
        "sliding_window_pattern key (llama.cpp's gemma2 default: pattern 2, even layers sliding, odd global, "
        "as transformers' layer_types)",
        "no output.weight (tied; the converter also drops any lm_head); the sqrt(n_embd) embedding scale is "
        "implied by the architecture, not stored",
    ],
    "gemma3": [
        "every *norm.weight stored as w + 1, attn_q_norm/attn_k_norm included",
        "gemma3.rope.freq_base 1e6 (global layers) and gemma3.rope.freq_base_swa 1e4 (sliding layers); "
        "gemma3.attention.sliding_window 8; no sliding_window_pattern key: llama.cpp's gemma3 default pattern 6 "
        "(layer il global iff (il + 1) % 6 == 0) is transformers' default layer_types here",
        "no final_logit_softcapping key (None) and no attention softcap (the converter asserts it is None); "
        "q scale head_dim^-0.5 implied (query_pre_attn_scalar not stored)",
        "token_embd is cut to the tokenizer's size by the converter (equal to vocab_size here, 384); "
        "no output.weight (tied)",
    ],
    "phi3": [
        "attn_qkv.weight [128, 64] = rows q (64) | k (32) | v (32); ffn_up.weight [256, 64] = rows gate (128) | "
        "up (128), HF's gate_up_proj unchanged, no ffn_gate: act = silu(gate) * up; q/k not permuted (NEOX)",
        "phi3.attention.sliding_window 0 (null in config.json); phi3.rope.scaling.original_context_length 128; "
        "phi3.rope.dimension_count 16; no attention.key_length",
        "eos is <|endoftext|> (id 3): llama.cpp looks '<|endoftext|>' up by text for a model named phi3 "
        "and refuses the vocabulary without it",
    ],
    "phi3-partial": [
        "phi3.rope.dimension_count 12 = int(0.75 * 64) // 4: rope on the first 12 of each head's 16 dims "
        "(NEOX pairs (i, i + 6), i < 6), the last 4 untouched",
        "no output.weight (tied)",
    ],
    "phi3-longrope": [
        "rope_factors_short.weight and rope_factors_long.weight [8] (global tensors, not per layer); "
        "phi3.rope.scaling.attn_factor 1.118034 = sqrt(1 + ln(1024/256) / ln(256)); no rope.scaling.type key",
        "phi3.context_length 1024, phi3.rope.scaling.original_context_length 256",
        "the reference used the short factors (48 tokens <= 256) and cos, sin times 1.118034",
    ],
}


# --------------------------------------------------------------------------------------------- tokenizers


def train_spm(name: str, out_dir: Path) -> Path:
    """A tiny sentencepiece BPE model with byte fallback; returns the path of its tokenizer.model."""
    import sentencepiece as spm

    spec = TOKENIZERS[name]
    ids = spec["ids"]
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        text_file = Path(tmp) / "text.txt"
        text_file.write_text(TEXT * 4, encoding="utf-8")
        spm.SentencePieceTrainer.train(
            input=str(text_file),
            model_prefix=str(Path(tmp) / "m"),
            model_type="bpe",
            vocab_size=SPM_VOCAB,
            byte_fallback=True,
            character_coverage=1.0,
            split_digits=True,
            allow_whitespace_only_pieces=True,
            remove_extra_whitespaces=False,
            normalization_rule_name="identity",
            add_dummy_prefix=spec["dummy_prefix"],
            unk_id=ids["unk"],
            bos_id=ids["bos"],
            eos_id=ids["eos"],
            pad_id=ids["pad"],
            control_symbols=spec.get("control", []),
            num_threads=1,
            minloglevel=2,
        )
        shutil.copy(Path(tmp) / "m.model", out_dir / "tokenizer.model")
    return out_dir / "tokenizer.model"


def save_spm_tokenizer(name: str, spm_path: Path, model_dir: Path) -> dict[str, Any]:
    """tokenizer.model plus a tokenizer_config.json the converter accepts (no tokenizer.json: the converter
    reads the sentencepiece file itself; special ids also come from config.json)."""
    import sentencepiece as spm

    spec = TOKENIZERS[name]
    sp = spm.SentencePieceProcessor(model_file=str(spm_path))
    ids = spec["ids"]
    shutil.copy(spm_path, model_dir / "tokenizer.model")
    gemma = name == "spm-gemma"
    eos = sp.piece_to_id(spec["eos_piece"]) if "eos_piece" in spec else ids["eos"]
    control = {sp.piece_to_id(p): p for p in spec.get("control", [])}
    tok_config = {
        "tokenizer_class": "GemmaTokenizer" if gemma else "LlamaTokenizer",
        "bos_token": sp.id_to_piece(ids["bos"]),
        "eos_token": sp.id_to_piece(eos),
        "unk_token": sp.id_to_piece(ids["unk"]),
        "pad_token": sp.id_to_piece(ids["pad"]) if ids["pad"] >= 0 else None,
        "add_bos_token": True,
        "add_eos_token": False,
        "model_max_length": 4096,
    }
    if control:
        tok_config["added_tokens_decoder"] = {
            str(i): {"content": p, "special": True, "lstrip": False, "rstrip": False, "normalized": False}
            for i, p in sorted(control.items())
        }
    (model_dir / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2) + "\n")
    return {
        "kind": "sentencepiece bpe, byte_fallback, " + ("no dummy prefix" if gemma else "dummy prefix"),
        "vocab_size": sp.get_piece_size(),
        "special_ids": {
            **{sp.id_to_piece(v): v for v in ids.values() if v >= 0},
            **{p: i for i, p in control.items()},
        },
        "config_ids": {
            "bos_token_id": ids["bos"],
            "eos_token_id": eos,
            "pad_token_id": ids["pad"] if ids["pad"] >= 0 else None,
        },
    }


def train_bpe(name: str, out_dir: Path):
    """A tiny GPT-2 style byte-level BPE (the family's split regex), saved as a PreTrainedTokenizerFast."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    spec = TOKENIZERS[name]
    tok = Tokenizer(models.BPE(ignore_merges=spec["ignore_merges"], byte_fallback=False))
    if spec["nfc"]:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(spec["split"]), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=256 + BPE_MERGES,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
        special_tokens=[],
    )
    tok.train_from_iterator(TEXT.splitlines(keepends=True), trainer)
    tok.add_special_tokens(spec["specials"])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=spec["bos"],
        eos_token=spec["eos"],
        pad_token=spec["pad"],
        clean_up_tokenization_spaces=False,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out_dir)
    return fast


def save_bpe_tokenizer(name: str, tok_dir: Path, model_dir: Path) -> dict[str, Any]:
    from transformers import AutoTokenizer

    for f in tok_dir.iterdir():
        shutil.copy(f, model_dir / f.name)
    fast = AutoTokenizer.from_pretrained(model_dir)
    spec = TOKENIZERS[name]
    sid = {s: fast.convert_tokens_to_ids(s) for s in spec["specials"]}
    return {
        "kind": "byte-level BPE (tokenizers), split regex of the family",
        "vocab_size": len(fast),
        "special_ids": sid,
        "config_ids": {
            "bos_token_id": sid[spec["bos"]] if spec["bos"] else None,
            "eos_token_id": sid[spec["eos"]],
            "pad_token_id": sid[spec["pad"]] if spec["pad"] else None,
        },
        "forced_tokenizer_pre": spec["pre"],
    }


# ------------------------------------------------------------------------------------------------ models


def build_config(name: str, vocab_size: int, ids: dict[str, int | None]):
    import transformers

    spec = MODELS[name]
    kwargs = copy.deepcopy(spec["kwargs"])
    kwargs.update(vocab_size=vocab_size, **ids)
    cls = getattr(transformers, spec["config"])
    config = cls(**copy.deepcopy(kwargs))  # config classes edit rope_parameters in place
    config._attn_implementation = "eager"  # softcapping and exact masks: the reference path
    return config, kwargs


def _seed(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")


def init_weights(model, name: str) -> None:
    """Overwrite every parameter with seeded random values of a useful size.

    Default init (std 0.02, biases 0, norms 1) makes all logits ~0 and hides rope, biases, norms and
    softcapping. Here: embeddings N(0, 1); linear weights N(0, g^2/fan_in) with g = 1 (2 for the output
    head; MODELS[name]["init"]["qk_gain"] for q/k, a number or one per layer); biases N(0, 0.5^2); plain
    RMSNorm weights U(0.5, 1.5); Gemma's (1+w) norm weights w ~ U(-0.5, 0.5); the final norm from
    MODELS[name]["init"]["final_norm"] where set (tied heads: N(0, 1) embeddings would give logits of std ~8
    otherwise; gemma2: logits that reach the final cap).
    """
    import torch

    init = MODELS[name].get("init", {})
    gemma = name.startswith("gemma")
    gen = torch.Generator().manual_seed(_seed(name))
    with torch.no_grad():
        for pname, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if pname.endswith("norm.weight") or "layernorm" in pname:
                lo, hi = (-0.5, 0.5) if gemma else (0.5, 1.5)
                if pname == "model.norm.weight" and "final_norm" in init:
                    lo, hi = init["final_norm"]
                p.copy_(torch.rand(p.shape, generator=gen) * (hi - lo) + lo)
            elif pname.endswith("embed_tokens.weight"):
                p.copy_(torch.randn(p.shape, generator=gen))
            elif pname.endswith(".bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
            elif p.ndim == 2:
                gain = 1.0
                if pname.endswith("lm_head.weight"):
                    gain = 2.0
                elif pname.endswith(("q_proj.weight", "k_proj.weight")):
                    gain = init.get("qk_gain", 1.0)
                    if isinstance(gain, (list, tuple)):  # per layer
                        gain = gain[int(pname.split(".")[2])]
                p.copy_(torch.randn(p.shape, generator=gen) * (gain / math.sqrt(p.shape[1])))
            else:
                raise ValueError(f"{name}: no init rule for {pname} {tuple(p.shape)}")


LONG_TOKENS = 264
"""phi3-longrope's second reference: past the original 256 positions, where transformers switches to the long
factors, as jupyter_chatflow does for a served window (1,024) longer than the original one (and llama.cpp for a
context over 256)."""


def save_long_reference(model, vocab: int, path: Path) -> None:
    tokens = np.random.default_rng(LONG_TOKENS).integers(0, vocab, size=LONG_TOKENS).astype(np.int32)
    np.savez_compressed(path, tokens=tokens, logits=logits_of(model, tokens))


def logits_of(model, tokens: np.ndarray) -> np.ndarray:
    import torch

    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(tokens.astype(np.int64))[None], use_cache=False)
    return out.logits[0].float().numpy().astype(np.float32)


def variant_logits(name: str, model, variant: str, tokens: np.ndarray) -> np.ndarray:
    """Logits of the same weights with one feature switched off (shows the feature moves the logits)."""
    import torch

    cfg = model.config.to_dict()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    rp = cfg.get("rope_parameters")
    if variant == "rope_scaling_off":
        cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": rp["rope_theta"]}
    elif variant == "qkv_bias_zero":
        state = {k: (torch.zeros_like(v) if k.endswith("_proj.bias") else v) for k, v in state.items()}
    elif variant == "qk_norm_ones":
        state = {
            k: (torch.ones_like(v) if k.endswith(("q_norm.weight", "k_norm.weight")) else v) for k, v in state.items()
        }
    elif variant == "attn_softcap_off":
        cfg["attn_logit_softcapping"] = None
    elif variant == "final_softcap_off":
        cfg["final_logit_softcapping"] = None
    elif variant == "sliding_window_off":
        cfg["sliding_window"] = 4096
    elif variant == "local_theta_as_global":
        rp["sliding_attention"]["rope_theta"] = rp["full_attention"]["rope_theta"]
    elif variant == "full_rotary":
        rp["partial_rotary_factor"] = 1.0
    elif variant == "long_factors":
        rp["short_factor"] = list(rp["long_factor"])
    elif variant == "attn_factor_one":
        rp["attention_factor"] = 1.0
    elif variant == "plain_rope":
        cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": rp["rope_theta"]}
    else:
        raise ValueError(variant)
    import transformers

    spec = MODELS[name]
    cfg.pop("transformers_version", None)
    config = getattr(transformers, spec["config"]).from_dict(cfg)
    config._attn_implementation = "eager"
    other = getattr(transformers, spec["model"])(config).float().eval()
    other.load_state_dict(state, strict=True)
    return logits_of(other, tokens)


# ---------------------------------------------------------------------------------------------- converter

_SHIM = r"""
import runpy, sys
lcpp, tokpre = sys.argv[1], sys.argv[2]
script = lcpp + "/convert_hf_to_gguf.py"
sys.argv = [script, *sys.argv[3:]]
sys.path[:0] = [lcpp, lcpp + "/gguf-py"]
if tokpre:
    import json
    from pathlib import Path
    from conversion import get_model_class
    arch = json.loads((Path(sys.argv[-1]) / "config.json").read_text())["architectures"][0]
    cls = get_model_class(arch)
    def get_vocab_base_pre(self, tokenizer):
        return tokpre
    cls.get_vocab_base_pre = get_vocab_base_pre
    print(f"patched {cls.__name__}.get_vocab_base_pre -> {tokpre!r}", file=sys.stderr)
runpy.run_path(script, run_name="__main__")
"""


def convert(lcpp: Path, model_dir: Path, out: Path, name: str, tokpre: str | None) -> None:
    cmd = [
        sys.executable,
        "-c",
        _SHIM,
        str(lcpp),
        tokpre or "",
        "--outtype",
        "f32",
        "--outfile",
        str(out),
        "--model-name",
        name,
        str(model_dir),
    ]
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    log = model_dir.parent / "convert.log"
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"{name}: converter failed (log: {log})")


# Optional cross-check: the GGUF's logits from llama.cpp itself (its C library through the ctypes bindings of the
# same llama-cpp-python sdist), f32 KV cache, no flash attention, one sequence, n_ctx 256.
_LLAMA_CPP_LOGITS = r"""
import os, sys, types, ctypes
import numpy as np
sdist, lib_dir, gguf_path, tokens_path, out_path = sys.argv[1:6]
os.environ["LLAMA_CPP_LIB_PATH"] = lib_dir
pkg = types.ModuleType("llama_cpp")  # the bindings module only, not the package's high-level API
pkg.__path__ = [os.path.join(sdist, "llama_cpp")]
sys.modules["llama_cpp"] = pkg
import llama_cpp.llama_cpp as L
L.llama_backend_init()
tokens = np.load(tokens_path)
mp = L.llama_model_default_params()
mp.n_gpu_layers = 0
model = L.llama_model_load_from_file(gguf_path.encode(), mp)
assert model, "llama.cpp could not load " + gguf_path
n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
cp = L.llama_context_default_params()
cp.n_ctx = cp.n_batch = cp.n_ubatch = 256
cp.n_seq_max = 1
cp.n_threads = cp.n_threads_batch = 1
cp.type_k = cp.type_v = 0  # GGML_TYPE_F32
cp.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_DISABLED
ctx = L.llama_init_from_model(model, cp)
assert ctx
batch = L.llama_batch_init(len(tokens), 0, 1)
for i, t in enumerate(tokens):
    batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = int(t), i, 1, 1
    batch.seq_id[i][0] = 0
batch.n_tokens = len(tokens)
assert L.llama_decode(ctx, batch) == 0
logits = np.ctypeslib.as_array(L.llama_get_logits(ctx), shape=(len(tokens), n_vocab)).copy()
np.save(out_path, logits)
"""


def llama_cpp_check(lcpp: Path, lib_dir: Path | None, gguf_path: Path, tokens: np.ndarray, ref: np.ndarray):
    sdist = lcpp.parent.parent  # llama_cpp_python-X/vendor/llama.cpp -> llama_cpp_python-X
    if lib_dir is None or not (lib_dir / "libllama.so").is_file():
        return "skipped: no libllama.so (build llama.cpp, or pass --llama-cpp-lib)"
    if not (sdist / "llama_cpp" / "llama_cpp.py").is_file():
        return f"skipped: no llama_cpp/llama_cpp.py bindings in {sdist}"
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "tokens.npy", tokens)
        cmd = [sys.executable, "-c", _LLAMA_CPP_LOGITS, str(sdist), str(lib_dir), str(gguf_path)]
        cmd += [str(Path(tmp) / "tokens.npy"), str(Path(tmp) / "logits.npy")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
            return "failed: " + " | ".join(tail)
        got = np.load(Path(tmp) / "logits.npy")
    return {
        "max_abs_diff": float(f"{np.abs(got - ref).max():.3g}"),
        "argmax_agree": float(np.mean(got.argmax(-1) == ref.argmax(-1))),
        "how": "libllama (CPU), n_ctx 256, f32 KV cache, flash attention off, all 48 logits in one batch",
    }


def _json_value(v: Any) -> Any:
    if isinstance(v, (np.generic,)):
        return v.item()
    if isinstance(v, float):
        return float(str(np.float32(v))) if math.isfinite(v) else str(v)
    return v


def inspect_gguf(lcpp: Path, path: Path) -> dict[str, Any]:
    """Metadata (token arrays only by length) and tensors (numpy [rows, cols] order, type) of a GGUF."""
    if str(lcpp / "gguf-py") not in sys.path:
        sys.path.insert(0, str(lcpp / "gguf-py"))
    import gguf

    reader = gguf.GGUFReader(path)
    metadata: dict[str, Any] = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        value = field.contents()
        if isinstance(value, list) and (len(value) > 16 or key.startswith("tokenizer.ggml.")):
            metadata[key] = {"array_len": len(value), "first": [_json_value(x) for x in value[:3]]}
        elif isinstance(value, list):
            metadata[key] = [_json_value(x) for x in value]
        else:
            metadata[key] = _json_value(value)
    tensors = {t.name: [int(n) for n in reversed(t.shape.tolist())] for t in reader.tensors}
    types = sorted({t.tensor_type.name for t in reader.tensors})
    arrays = {t.name: np.array(t.data) for t in reader.tensors}
    small = {k: [float(str(x)) for x in v.ravel()] for k, v in arrays.items() if k.startswith("rope_")}
    return {
        "metadata": metadata,
        "tensor_types": types,
        "tensors": tensors,
        "rope_tensor_values": small,
        "_arrays": arrays,
    }


def check_tensors(name: str, model, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """How the converter wrote some tensors, checked against the transformers weights."""
    sd = {k: v.float().numpy() for k, v in model.state_dict().items()}
    out: dict[str, Any] = {}
    emb = sd["model.embed_tokens.weight"]
    out["token_embd_equals_embed_tokens"] = bool(np.array_equal(arrays["token_embd.weight"], emb))
    if "output.weight" in arrays:
        out["output_equals_lm_head"] = bool(np.array_equal(arrays["output.weight"], sd["lm_head.weight"]))
    else:
        out["output_weight"] = "absent (tied: use token_embd.weight)"
    norm = sd["model.norm.weight"]
    onorm = arrays["output_norm.weight"]
    if np.array_equal(onorm, norm):
        out["output_norm"] = "as in transformers"
    elif np.allclose(onorm, norm + 1, atol=0):
        out["output_norm"] = "transformers weight + 1 (Gemma's (1+w) folded in)"
    else:
        out["output_norm"] = "differs"
    if "blk.0.attn_q.weight" in arrays:
        q = sd["model.layers.0.self_attn.q_proj.weight"]
        a = arrays["blk.0.attn_q.weight"]
        if np.array_equal(a, q):
            out["attn_q"] = "as in transformers (not permuted)"
        else:
            n_head = model.config.num_attention_heads
            perm = q.reshape(n_head, 2, q.shape[0] // n_head // 2, -1).swapaxes(1, 2).reshape(q.shape)
            out["attn_q"] = (
                "rows permuted per head: HF rotate_half halves -> interleaved pairs "
                "(w.reshape(n_head, 2, hd/2, -1).swapaxes(1, 2))"
                if np.array_equal(a, perm)
                else "differs"
            )
    return out


# ------------------------------------------------------------------------------------------------- main


def make_one(
    name: str, lcpp: Path, lib_dir: Path | None, work: Path, tok_paths: dict[str, Path], out_dir: Path
) -> dict[str, Any]:
    import torch
    import transformers

    spec = MODELS[name]
    tok_name = spec["tokenizer"]
    model_dir = work / name / "hf"
    if model_dir.exists():
        shutil.rmtree(model_dir)
    model_dir.mkdir(parents=True)

    if TOKENIZERS[tok_name]["kind"] == "spm":
        tok_info = save_spm_tokenizer(tok_name, tok_paths[tok_name], model_dir)
    else:
        tok_info = save_bpe_tokenizer(tok_name, tok_paths[tok_name], model_dir)
    vocab = tok_info["vocab_size"]

    config, kwargs = build_config(name, vocab, tok_info["config_ids"])
    torch.manual_seed(_seed(name))
    model = getattr(transformers, spec["model"])(config).float().eval()
    init_weights(model, name)
    model.save_pretrained(model_dir)

    rng = np.random.default_rng(_seed(name) ^ 0x5EED)
    tokens = rng.integers(0, vocab, size=N_TOKENS).astype(np.int32)
    logits = logits_of(model, tokens)
    assert logits.shape == (N_TOKENS, vocab) and np.isfinite(logits).all()
    np.savez_compressed(out_dir / f"{name}.npz", tokens=tokens, logits=logits)
    if name == "phi3-longrope":
        save_long_reference(model, vocab, out_dir / f"{name}-long.npz")

    # the reference, once more from the saved folder
    reloaded = getattr(transformers, spec["model"]).from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation="eager"
    )
    reloaded.eval()
    again = logits_of(reloaded, tokens)
    reload_identical = bool(np.array_equal(again, logits))

    sensitivity = {}
    for variant, what in spec.get("variants", {}).items():
        diff = float(np.abs(variant_logits(name, model, variant, tokens) - logits).max())
        sensitivity[variant] = {"what": what, "max_abs_logit_change": round(diff, 4)}
    if name == "gemma2":  # how far the pre-cap values go (final cap 30)
        sensitivity["final_softcap_off"]["max_abs_uncapped_logit"] = round(
            float(np.abs(variant_logits(name, model, "final_softcap_off", tokens)).max()), 3
        )

    gguf_path = out_dir / f"{name}.gguf"
    convert(lcpp, model_dir, gguf_path, name, TOKENIZERS[tok_name].get("pre"))
    info = inspect_gguf(lcpp, gguf_path)
    arrays = info.pop("_arrays")
    tensor_checks = check_tensors(name, model, arrays)
    lcpp_check = llama_cpp_check(lcpp, lib_dir, gguf_path, tokens, logits)

    saved_config = json.loads((model_dir / "config.json").read_text())
    saved_config.pop("transformers_version", None)
    meta = info["metadata"]
    return {
        "architecture": meta.get("general.architecture"),
        "hf_architecture": spec["model"],
        "hf_config_class": spec["config"],
        "exercises": spec["exercises"],
        "config_kwargs": kwargs,
        "weights": {
            "seed": _seed(name),
            "overrides": spec.get("init", {}),
            "rule": (
                "embeddings N(0,1); linear N(0, g^2/fan_in), g=1, lm_head g=2, q/k g=qk_gain; biases N(0,0.25); "
                "RMSNorm w U(0.5,1.5) (Gemma's 1+w: w U(-0.5,0.5)); final norm from final_norm where given"
            ),
            "tokens": "numpy default_rng(seed ^ 0x5EED).integers(0, vocab, 48)",
        },
        "hf_config_json": saved_config,
        "tokenizer": {
            **tok_info,
            "tokenizer.ggml.model": meta.get("tokenizer.ggml.model"),
            "tokenizer.ggml.pre": meta.get("tokenizer.ggml.pre"),
        },
        "reference": {
            "file": f"{name}.npz",
            "tokens_len": N_TOKENS,
            "vocab": vocab,
            "logits_abs_max": round(float(np.abs(logits).max()), 4),
            "logits_std": round(float(logits.std()), 4),
            "reload_recompute_identical": reload_identical,
            "attn_implementation": "eager",
            "dtype": "float32",
        },
        "sensitivity": sensitivity,
        "gguf": {
            "file": gguf_path.name,
            "bytes": gguf_path.stat().st_size,
            "sha256": hashlib.sha256(gguf_path.read_bytes()).hexdigest(),
            "converter_writes": tensor_checks,
            "llama_cpp_logits_vs_reference": lcpp_check,
            "converter_notes": NOTES.get(name, []),
            "metadata": meta,
            "tensor_types": info["tensor_types"],
            "rope_tensor_values": info["rope_tensor_values"],
            "tensors": info["tensors"],
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llama-cpp", type=Path, default=Path(DEFAULT_LLAMA_CPP), help="llama.cpp source folder")
    parser.add_argument("--work", type=Path, default=Path(DEFAULT_WORK), help="scratch folder (HF model folders)")
    parser.add_argument("--out", type=Path, default=HERE, help="where the .gguf/.npz/manifest.json go")
    parser.add_argument("--only", nargs="*", choices=sorted(MODELS), help="make only these models")
    parser.add_argument(
        "--llama-cpp-lib",
        type=Path,
        default=None,
        help="folder with a built libllama.so for the optional cross-check (default: <llama-cpp>/build/bin)",
    )
    args = parser.parse_args(argv)

    import torch
    import transformers

    torch.set_num_threads(1)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    lcpp = args.llama_cpp.resolve()
    lib_dir = args.llama_cpp_lib or lcpp / "build" / "bin"
    if not (lcpp / "convert_hf_to_gguf.py").is_file():
        raise SystemExit(f"no convert_hf_to_gguf.py in {lcpp}")
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)

    names = args.only or list(MODELS)
    tok_paths: dict[str, Path] = {}
    for tok_name in sorted({MODELS[n]["tokenizer"] for n in names}):
        tdir = args.work / "tokenizers" / tok_name
        if TOKENIZERS[tok_name]["kind"] == "spm":
            tok_paths[tok_name] = train_spm(tok_name, tdir)
        else:
            train_bpe(tok_name, tdir)
            tok_paths[tok_name] = tdir

    manifest_path = args.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    models = dict(manifest)
    made_with = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "llama_cpp": lcpp.parent.parent.name if lcpp.parent.name == "vendor" else str(lcpp),
        "gguf_py": _gguf_version(lcpp),
    }
    for name in names:
        print(f"== {name}", flush=True)
        entry = make_one(name, lcpp, lib_dir, args.work, tok_paths, args.out)
        models[name] = entry
        entry["made_with"] = made_with
        print(
            f"   {entry['architecture']}: {entry['gguf']['bytes']} bytes, reload identical "
            f"{entry['reference']['reload_recompute_identical']}, llama.cpp "
            f"{entry['gguf']['llama_cpp_logits_vs_reference']}",
            flush=True,
        )
        for variant, v in entry["sensitivity"].items():
            print(f"   {variant}: {v}", flush=True)

    # One entry per model name at the top level (tests iterate over it); what holds for all of them is in
    # README.md: shapes are numpy order [rows, cols] (GGML ne reversed); sliding windows hold sliding_window
    # tokens, the current one included.
    manifest = {k: models[k] for k in MODELS if k in models}
    manifest_path.write_text(_dumps(manifest) + "\n")
    print(f"wrote {manifest_path}")


def _dumps(obj: Any, indent: int = 0) -> str:
    """JSON with one key per line but short lists and small dicts on one line."""
    flat = json.dumps(obj, ensure_ascii=False)
    if not isinstance(obj, (dict, list)) or len(flat) + indent <= 110:
        return flat
    pad = " " * (indent + 1)
    if isinstance(obj, list):
        return "[\n" + ",\n".join(pad + _dumps(v, indent + 1) for v in obj) + "\n" + " " * indent + "]"
    items = [f"{pad}{json.dumps(k)}: {_dumps(v, indent + 1)}" for k, v in obj.items()]
    return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"


def _gguf_version(lcpp: Path) -> str:
    for line in (lcpp / "gguf-py" / "pyproject.toml").read_text().splitlines():
        if line.startswith("version"):
            return line.split("=", 1)[1].strip().strip('"')
    return "?"


if __name__ == "__main__":
    main()
