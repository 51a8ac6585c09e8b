"""A chat that sets no system prompt gets SmolLM2's only on a model whose template carries it."""

from __future__ import annotations

from pathlib import Path

from jupyter_chatflow import Chat, load_model
from jupyter_chatflow.pipeline.local import DEFAULT_SYSTEM, default_system

ARCHS = Path(__file__).parents[1] / "model" / "archs"


def test_smollm2s_template_keeps_its_own_default_and_others_get_none():
    smollm2 = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>"
    assert default_system(smollm2) == DEFAULT_SYSTEM
    assert default_system("{{ '<start_of_turn>user\n' }}") == ""


def test_a_gemma_chat_is_not_told_it_is_smollm(tmp_path):
    chat = Chat(model=load_model(ARCHS / "gemma3.gguf"), db=str(tmp_path / "chat.db"), persist=False)
    assert chat.system == ""
    assert Chat(model=chat.model, system="Be brief.", db=str(tmp_path / "chat.db"), persist=False).system == "Be brief."
