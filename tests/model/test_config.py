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
