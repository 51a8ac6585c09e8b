"""End to end with a SentencePiece vocabulary (TinyLlama-style GGUF): load, tokenize, template, generate."""

from __future__ import annotations

import pytest

from jupyter_chatflow import load_model
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    path = write_tiny_gguf(tmp_path_factory.mktemp("spm") / "tiny-spm.gguf", TinySpec(vocabulary="llama"))
    return load_model(path)


def test_encodes_with_space_prefix_bos_and_byte_fallback(spm_model):
    tokenizer = spm_model.tokenizer
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "the é 😀"}])
    assert ids[0] == tokenizer.bos_id == 1
    pieces = [tokenizer.piece(i) for i in tokenizer.encode("the")]
    assert pieces == [" the"]  # '▁the' is one piece of the vocabulary
    emoji = tokenizer.encode("😀")
    assert [tokenizer.piece(i) for i in emoji][-4:] == ["<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]
    assert tokenizer.decode(tokenizer.encode("the é 😀")) == " the é 😀"


def test_generates_and_streams_whole_characters(spm_model):
    prompt = spm_model.tokenizer.apply_chat_template([{"role": "user", "content": "hello"}])
    generation = spm_model.generate(prompt, max_tokens=12, temperature=1.0, seed=3, ignore_eos=True)
    steps = list(generation)
    assert len(steps) == 12 and generation.finish_reason == "length"
    assert "".join(s.text for s in steps) == generation.text
    # random weights pick random <0xNN> tokens: the stream must still equal decoding all ids at once
    assert generation.text == spm_model.tokenizer.decode([s.token_id for s in steps])
