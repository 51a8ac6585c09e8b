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
