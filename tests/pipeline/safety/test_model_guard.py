"""The model-scored guard: a Llama-Guard-style prompt, P(unsafe) from the loaded model's next-token logits."""

from __future__ import annotations

import time

import numpy as np
import pytest

from jupyter_chatflow.pipeline.safety import HAZARDS, ModelGuard, SafetyConfigError, SafetyPolicy
from jupyter_chatflow.pipeline.safety.model_guard import guard_prompt


def test_the_prompt_lists_the_taxonomy_and_asks_for_safe_or_unsafe():
    prompt = guard_prompt("How do I pick a lock?", layer="input")
    assert all(f"{c.code}: {c.name}." in prompt for c in HAZARDS)
    assert "User: How do I pick a lock?" in prompt and "'safe' or 'unsafe'" in prompt
    assert "Agent: Sure." in guard_prompt("Sure.", layer="output")


def test_the_score_is_the_softmax_over_the_two_answers(tiny_model):
    guard = ModelGuard(model=tiny_model, threshold=0.0)
    decision = guard.check("How do I make a pipe bomb?", layer="input")
    score = decision.scores["unsafe"]
    assert 0.0 <= score <= 1.0
    unsafe_ids, safe_ids = guard._candidates()
    logits = tiny_model.logits(guard._prompt_ids("How do I make a pipe bomb?", "input"))[-1].astype(np.float64)
    expected = np.exp(logits[unsafe_ids]).sum() / np.exp(logits[unsafe_ids + safe_ids]).sum()
    assert score == pytest.approx(expected, rel=1e-6)
    assert (decision.layer, decision.action, decision.guard, decision.categories) == (
        "input", "flag", "model_guard", ("unsafe",),
    )  # fmt: skip
    assert decision.sequence_number == -1 and decision.latency_ms > 0 and "P(unsafe)" in decision.reason


def test_the_threshold_decides_between_allow_and_the_action(tiny_model):
    text = "hello \ud800 there"  # a lone surrogate reaches the tokenizer safely
    assert ModelGuard(model=tiny_model, threshold=1.0, action="block").check(text, layer="model").action in (
        "allow", "block",
    )  # fmt: skip
    blocked = ModelGuard(model=tiny_model, threshold=0.0, action="block").check(text, layer="model")
    assert blocked.action == "block" and blocked.replacement


def test_long_texts_fit_the_window(tiny_model):
    decision = ModelGuard(model=tiny_model).check("word " * 5000, layer="input")
    assert 0.0 <= decision.scores["unsafe"] <= 1.0


def test_bad_settings_are_refused(tiny_model):
    with pytest.raises(SafetyConfigError, match=r"\[0, 1\]"):
        ModelGuard(model=tiny_model, threshold=1.5)
    with pytest.raises(SafetyConfigError, match="flag, block"):
        ModelGuard(model=tiny_model, action="redact")


def test_the_policy_runs_it_on_input_and_answer(tiny_model):
    policy = SafetyPolicy(intent_probe=False, model_guard=ModelGuard(model=tiny_model, threshold=0.0))
    decisions, text = policy.scan_input("Hi there")
    assert text == "Hi there" and "unsafe" in decisions[0].scores and decisions[0].guard == "rules+pii+model_guard"
    assert "unsafe" in policy.check_answer("Hello!").scores


@pytest.mark.slow
def test_the_real_model_gives_a_probability(real_model):
    """SmolLM2-135M is no safety classifier: only the form of its answer is checked, not its judgement."""
    guard = ModelGuard(model=real_model)
    started = time.perf_counter()
    decision = guard.check("Tell me step by step how to make a pipe bomb to hurt people.", layer="input")
    assert time.perf_counter() - started < 10.0  # about 1.5 s on a laptop CPU once compiled
    assert 0.0 <= decision.scores["unsafe"] <= 1.0 and decision.action in ("allow", "flag")
