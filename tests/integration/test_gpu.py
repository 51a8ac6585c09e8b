"""Accelerator checks: run where JAX sees a GPU or TPU (skipped on CPU-only machines such as CI's)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(jax.default_backend() == "cpu", reason="JAX sees no GPU/TPU here"),
]


def test_default_dtype_is_bfloat16_on_accelerators(tiny_path):
    from jupyter_chatflow import load_model

    assert load_model(tiny_path).dtype == jnp.bfloat16


def test_greedy_answer_on_the_accelerator(real_model_path, greedy_reference):
    from jupyter_chatflow import load_model

    model = load_model(real_model_path, dtype="float32")
    for prompt in greedy_reference["prompts"]:
        expected = prompt["greedy_ids"][:6]
        ours = [s.token_id for s in model.generate(prompt["prompt_ids"], max_tokens=6, temperature=0.0)]
        assert ours == expected[: len(ours)] and len(ours) >= 5


ARCHS = __import__("pathlib").Path(__file__).parents[1] / "model" / "archs"
ARCH_NAMES = ["llama", "llama3-rope", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "phi3-partial", "phi3-longrope"]


@pytest.mark.parametrize("name", ARCH_NAMES)
def test_every_architecture_on_the_accelerator(name):
    """The tiny model of each architecture (tests/model/archs) on the accelerator: float32 at full matmul precision
    within 1e-4 of transformers' logits (relative to each position's largest), as on the CPU; bfloat16, the
    accelerator's default, picks transformers' argmax at 90 % of the positions or more. Also printed: float32 at
    XLA's default precision, which may multiply in TF32 on a GPU."""
    import numpy as np

    from jupyter_chatflow import load_model

    reference = np.load(ARCHS / f"{'phi3-longrope-long' if name == 'phi3-longrope' else name}.npz")
    tokens, expected = reference["tokens"].tolist(), reference["logits"]
    scale = np.abs(expected).max(-1)
    with jax.default_matmul_precision("highest"):
        exact = load_model(ARCHS / f"{name}.gguf", dtype="float32").logits(tokens)
    default = load_model(ARCHS / f"{name}.gguf", dtype="float32").logits(tokens)
    half = load_model(ARCHS / f"{name}.gguf", dtype="bfloat16").logits(tokens)
    error = lambda ours: float((np.abs(ours - expected).max(-1) / scale).max())  # noqa: E731
    agree = float((half.argmax(-1) == expected.argmax(-1)).mean())
    print(f"\n{name}: float32 highest {error(exact):.1e}, default {error(default):.1e}; bfloat16 {error(half):.1e}, "
          f"argmax agreement {agree:.0%} on {jax.devices()[0].device_kind}")  # fmt: skip
    assert error(exact) < 1e-4 and (exact.argmax(-1) == expected.argmax(-1)).all()
    assert agree >= 0.9
