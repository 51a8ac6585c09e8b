"""The model's name as people know it, from a GGUF file's name and metadata."""

from __future__ import annotations

import pytest

from jupyter_chatflow.model.config import display_name
from jupyter_chatflow.model.gguf_file import read_metadata

# SmolLM2-135M-Instruct's metadata as its GGUF file carries it: a converter's name made from a training run's folder
SMOLLM2 = {
    "general.name": "Smollm2 135M 8k Lc100K Mix1 Ep2",
    "general.basename": "smollm2",
    "general.size_label": "135M",
    "general.finetune": "8k-lc100k-mix1-ep2",
}


@pytest.mark.parametrize(
    ("file_name", "metadata", "name"),
    [
        ("SmolLM2-135M-Instruct.Q4_1.gguf", SMOLLM2, "SmolLM2-135M-Instruct"),
        ("Llama-3.2-1B-Instruct-Q4_K_M.gguf", {"general.basename": "Llama-3.2"}, "Llama-3.2-1B-Instruct"),
        ("Grok-100B-v1.0-Q4_0-00003-of-00009.gguf", {"general.basename": "Grok"}, "Grok-100B-v1.0"),
        ("qwen2.5-0.5b-instruct-bf16.gguf", {"general.basename": "Qwen2.5"}, "qwen2.5-0.5b-instruct"),
    ],
)
def test_a_file_named_after_its_model_gives_the_name(file_name, metadata, name):
    assert display_name(metadata, file_name) == name


def test_else_the_metadata_parts_then_general_name_then_the_file_name():
    assert display_name(SMOLLM2, "model.gguf") == "smollm2-135M-8k-lc100k-mix1-ep2"
    assert display_name({"general.name": "tiny-random-llama"}, "tiny.gguf") == "tiny-random-llama"
    assert display_name({}, "tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf") == "tinyllama-1.1b-chat-v1.0"
    assert display_name({}) == "unnamed"


def test_the_default_model_is_named_as_its_model_card_names_it(real_model_path):
    from jupyter_chatflow.model.gguf_file import describe

    assert read_metadata(real_model_path)["general.name"] == SMOLLM2["general.name"]  # (what the panel showed)
    assert describe(real_model_path)["name"] == "SmolLM2-135M-Instruct"


def _metadata(arch: str, **extra) -> dict:
    keys = {"embedding_length": 64, "attention.head_count": 4, "block_count": 6, "feed_forward_length": 128,
            "context_length": 256, "attention.layer_norm_rms_epsilon": 1e-6}  # fmt: skip
    return {"general.architecture": arch, **{f"{arch}.{k}": v for k, v in {**keys, **extra}.items()}}


def _config(metadata: dict):
    from jupyter_chatflow.model.config import ModelConfig

    return ModelConfig.from_metadata(metadata, vocab_size=300, tied=True)


@pytest.mark.parametrize(
    ("arch", "extra", "key"),
    [
        ("qwen2", {"rope.scaling.type": "yarn"}, "'qwen2.rope.scaling.type'"),
        ("qwen3", {"expert_count": 8}, "'qwen3.expert_count'"),
        ("llama", {"attention.sliding_window": 4096}, "'llama.attention.sliding_window'"),
    ],
)
def test_what_a_file_asks_for_that_is_not_implemented_is_refused_by_its_key(arch, extra, key):
    from jupyter_chatflow import ModelFormatError

    with pytest.raises(ModelFormatError, match=key):
        _config(_metadata(arch, **extra))


def test_an_unsupported_architecture_is_named_with_the_families_that_run():
    from jupyter_chatflow import ModelFormatError

    with pytest.raises(ModelFormatError, match=r"'mamba' is not supported .*gemma3 \(Gemma 3"):
        _config(_metadata("mamba"))


def test_gemma_layers_slide_but_every_nth_as_llama_cpp_sets_them():
    gemma3 = _config(_metadata("gemma3", **{"attention.sliding_window": 512}))
    assert gemma3.sliding_layers == (0, 1, 2, 3, 4) and gemma3.local_rope_base == 10000.0
    gemma2 = _config(_metadata("gemma2", **{"attention.sliding_window": 4096, "attn_logit_softcapping": 50.0}))
    assert gemma2.sliding_layers == (0, 2, 4) and gemma2.attn_softcap == 50.0 and gemma2.local_rope_base == 0.0
    pattern = _config(_metadata("gemma3", **{"attention.sliding_window": 8, "attention.sliding_window_pattern": 3}))
    assert pattern.sliding_layers == (0, 1, 3, 4)
    assert _config(_metadata("gemma3")).sliding_layers == ()  # no window key: every layer global
    phi3 = _config(_metadata("phi3", **{"attention.sliding_window": 2047}))  # llama.cpp disables Phi's window
    assert phi3.sliding_layers == ()


def test_gemma_27b_scales_queries_by_the_model_width_over_heads():
    big = _config({**_metadata("gemma3", **{"embedding_length": 5376, "attention.head_count": 32,
                                             "attention.key_length": 128}), "gemma3.block_count": 62})  # fmt: skip
    assert big.query_scale == pytest.approx((5376 / 32) ** -0.5)
    assert _config(_metadata("gemma3", **{"attention.key_length": 256})).query_scale == 256**-0.5
