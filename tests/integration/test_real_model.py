"""Integration: the default SmolLM2-135M-Instruct against Hugging Face transformers' float32 outputs."""

from __future__ import annotations

import numpy as np
import pytest

LOGIT_TOLERANCE = 2e-3  # measured: max |ours - HF| over every reference top-5 logit is ~8e-5 in float32
NEAR_TIE = 0.02


def messages(prompt: dict) -> list[dict]:
    return [{"role": "system", "content": prompt["system"]}, {"role": "user", "content": prompt["user"]}]


def agreed_prefix(prompt: dict) -> int:
    """Reference steps up to (and including) the first near-tie, where either answer is right."""
    for i, top in enumerate(prompt["top5_per_step"]):
        if top[0][1] - top[1][1] < NEAR_TIE:
            return i + 1
    return len(prompt["greedy_ids"])


def test_chat_template_reproduces_reference_prompt_ids(real_model, greedy_reference):
    for prompt in greedy_reference["prompts"]:
        assert real_model.tokenizer.apply_chat_template(messages(prompt)) == prompt["prompt_ids"]


def test_greedy_ids_equal_reference(real_model, greedy_reference):
    for prompt in greedy_reference["prompts"]:
        expected = prompt["greedy_ids"]
        generation = real_model.generate(prompt["prompt_ids"], max_tokens=len(expected), temperature=0.0)
        ours = [step.token_id for step in generation]
        if expected[-1] == 2:  # the stop token ends the answer and is not yielded as a step
            assert generation.finish_reason == "stop"
            ours.append(2)
        n = agreed_prefix(prompt)
        assert ours[:n] == expected[:n], prompt["user"]


def test_logits_agree_with_reference(real_model, greedy_reference):
    for prompt in greedy_reference["prompts"]:
        ids = prompt["prompt_ids"] + prompt["greedy_ids"][:-1]
        logits = real_model.logits(ids)[len(prompt["prompt_ids"]) - 1 :]
        for step, top5 in enumerate(prompt["top5_per_step"]):
            token_ids = [t[0] for t in top5]
            np.testing.assert_allclose(logits[step, token_ids], [t[1] for t in top5], atol=LOGIT_TOLERANCE)
            row = logits[step].astype(np.float64)
            logprobs = row - np.logaddexp.reduce(row)
            np.testing.assert_allclose(logprobs[token_ids], [t[2] for t in top5], atol=LOGIT_TOLERANCE)


def test_answers_the_capital_of_france(real_model):
    ids = real_model.tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}])
    generation = real_model.generate(ids, max_tokens=24, temperature=0.0)
    steps = list(generation)
    assert "Paris" in generation.text
    assert all(s.logprob <= 0 and s.entropy >= 0 and len(s.top_alternatives) == 5 for s in steps)
    assert steps[0].top_alternatives[0].token_id == steps[0].token_id  # greedy picks the top alternative


def test_attention_of_a_long_sequence_is_bounded(real_model):
    ids = list(np.random.default_rng(0).integers(100, 40000, 1500))
    probs = real_model.attention(ids, layer=3)
    assert probs.shape == (9, 1500, 1500) and probs.dtype == np.float16
    rows = probs[:, ::97].astype(np.float32).sum(-1)
    np.testing.assert_allclose(rows, 1.0, atol=2e-2)
    assert not np.triu(probs[0], k=1).any()


@pytest.mark.parametrize("dtype", ["bfloat16"])
def test_bfloat16_runs_and_mostly_agrees(real_model_path, greedy_reference, dtype):
    from jupyter_chatflow import load_model

    model = load_model(real_model_path, dtype=dtype)
    prompt = greedy_reference["prompts"][0]
    ours = [s.token_id for s in model.generate(prompt["prompt_ids"], max_tokens=7, temperature=0.0)]
    assert ours[:4] == prompt["greedy_ids"][:4]
