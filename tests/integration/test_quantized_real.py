"""The default model (SmolLM2-135M-Instruct: Q4_1 layer matrices, a Q8_0 embedding) held as the file's blocks and as
int8, against float32: the same greedy answers, and what each holds in memory.

As-file computes with the values float32 holds (tests/model/test_quantized.py): only the summation order differs,
so its greedy answers are float32's. Int8 rounds every weight again (half a step of its row's max / 127), so its
answers may part from float32's after a while: how many tokens agree is printed, and the first few must.
"""

from __future__ import annotations

import pytest

from jupyter_chatflow import load_model
from jupyter_chatflow.model import memory

PROMPTS = ("What is the capital of France?", "Write a haiku about the sea.", "List three prime numbers.")
TOKENS = 24


def greedy(model, text: str) -> list[int]:
    ids = model.tokenizer.apply_chat_template([{"role": "user", "content": text}])
    return [step.token_id for step in model.generate(ids, max_tokens=TOKENS, temperature=0.0, ignore_eos=True)]


def agreeing(a: list[int], b: list[int]) -> int:
    """How many leading tokens two answers share."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), len(a))


@pytest.fixture(scope="module")
def models(real_model_path):
    return {w: load_model(real_model_path, dtype="float32", weights=w) for w in ("float", "as-file", "int8")}


def test_as_file_answers_as_float32_does_and_int8_starts_alike(models):
    for text in PROMPTS:
        exact = greedy(models["float"], text)
        packed, int8 = greedy(models["as-file"], text), greedy(models["int8"], text)
        print(
            f"{text!r}: as-file {agreeing(exact, packed)}/{TOKENS} tokens agree, int8 {agreeing(exact, int8)}/{TOKENS}"
        )
        assert packed == exact
        assert agreeing(exact, int8) >= 4


def test_as_file_holds_under_30_percent_of_float32s_bytes(models, real_model_path):
    held = {name: model.runner.weight_bytes for name, model in models.items()}
    ratio = {name: held[name] / held["float"] for name in held}
    print(", ".join(f"{name} {held[name] / 2**20:.1f} MiB ({ratio[name]:.1%})" for name in held))
    assert ratio["as-file"] <= 0.30 and ratio["int8"] <= 0.30
    about = memory.footprint(real_model_path)
    for name in ("as-file", "int8"):  # the estimate before loading: the file's tensors (not what is made at load)
        assert abs(about.weight_bytes("float32", name) - (held[name] - made_bytes(models[name]))) < 2**10


def made_bytes(model) -> int:
    """What is made at load, not a tensor of the file: the rope table, each layer's heads' weights and steering
    vector (what an intervention changes)."""
    transformer = model.runner.transformer
    layers = sum(b.attn.keep[...].nbytes + b.steer[...].nbytes for b in transformer.blocks)
    return transformer.inv_freq[...].nbytes + layers
