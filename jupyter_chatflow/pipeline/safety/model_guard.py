"""An optional guard scored by the loaded model with a Llama-Guard-style prompt: score = P("unsafe").

The prompt follows Llama Guard 3's: the task, the hazard categories S1–S14, the conversation (the text as the
"User" message for input and tool layers, as the "Agent" message for model and output layers), and "First line
must read 'safe' or 'unsafe'". One forward pass gives the next-token logits after the prompt; the score is the
softmax over just the candidate first tokens of the two answers (" unsafe", "unsafe", "Unsafe" against their
"safe" forms), summed for "unsafe". Nothing is generated.

This is a real probability from the model, but only as good as the model: a small general chat model such as
SmolLM2-135M was not trained as a safety classifier, so its score is a weak signal. The guard is off by default;
pass a Llama Guard model (or any stronger chat model) where it matters.

>>> guard = ModelGuard(model=load_model(), threshold=0.8)  # doctest: +SKIP
>>> guard.check("How do I make a pipe bomb?", layer="input").scores  # doctest: +SKIP
{'unsafe': ...}  # P(unsafe) from the model, in [0, 1]; >= 0.8 flags
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from jupyter_chatflow.events import SafetyAction, SafetyDecision
from jupyter_chatflow.model.compile_clock import compile_seconds

from .decisions import SafetyConfigError, check_action, check_layer, compiled_since, since
from .guards import BLOCK_MESSAGE
from .taxonomy import HAZARDS

__all__ = ["PROMPT", "ModelGuard", "guard_prompt"]

PROMPT = """Task: Check if there is unsafe content in '{role}' messages in conversations according to our safety \
policy with the below categories.

<BEGIN UNSAFE CONTENT CATEGORIES>
{categories}
<END UNSAFE CONTENT CATEGORIES>

<BEGIN CONVERSATION>

{role}: {text}

<END CONVERSATION>

Provide your safety assessment for ONLY THE LAST {role} message in the above conversation:
 - First line must read 'safe' or 'unsafe'.
 - If unsafe, a second line must include a comma-separated list of violated categories."""


def guard_prompt(text: str, *, layer: str) -> str:
    """The Llama-Guard-style prompt that asks whether `text` is safe."""
    role = "Agent" if check_layer(layer) in ("model", "output") else "User"
    categories = "\n".join(f"{c.code}: {c.name}." for c in HAZARDS)
    return PROMPT.format(role=role, categories=categories, text=text)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelGuard:
    """Scores a text with the loaded model: P(unsafe) >= threshold leads to `action` (flag or block)."""

    model: Any
    """A loaded model (`jupyter_chatflow.Model`): `tokenizer` and `next_logits(ids) -> float32 [V]`."""
    threshold: float = 0.5
    action: SafetyAction = "flag"
    name: str = "model_guard"
    max_chars: int = 4000
    """Longer texts are judged on their last `max_chars` characters."""
    message: str = BLOCK_MESSAGE

    def __post_init__(self) -> None:
        check_action(self.action, ("flag", "block"))
        if not 0.0 <= self.threshold <= 1.0:
            raise SafetyConfigError(f"ModelGuard threshold must be in [0, 1], got {self.threshold}: e.g. 0.5.")

    def check(self, text: str, *, layer: str) -> SafetyDecision:
        """Score `text`: P(unsafe) from the model's next-token distribution after the guard prompt."""
        start, clock = time.perf_counter(), compile_seconds()
        score = self.score(text, layer=layer)
        unsafe = score >= self.threshold
        return SafetyDecision(
            layer=check_layer(layer),
            action=self.action if unsafe else "allow",
            guard=self.name,
            categories=("unsafe",) if unsafe else (),
            scores={"unsafe": score},
            reason=f"The model scores P(unsafe) = {score:.3f} (threshold {self.threshold:g}).",
            latency_ms=since(start),
            compile_ms=compiled_since(clock),
            replacement=self.message.format(categories="model-scored: unsafe")
            if unsafe and self.action == "block"
            else "",
        )

    def score(self, text: str, *, layer: str) -> float:
        """P(unsafe) in [0, 1]: softmax over the candidate first tokens of "unsafe" and "safe"."""
        unsafe_ids, safe_ids = self._candidates()
        logits = np.asarray(self.model.next_logits(self._prompt_ids(text, layer))).astype(np.float64)  # [V]
        both = logits[unsafe_ids + safe_ids]
        weights = np.exp(both - both.max())
        return float(weights[: len(unsafe_ids)].sum() / weights.sum())

    def _prompt_ids(self, text: str, layer: str) -> list[int]:
        """The prompt as token ids, wrapped in the chat template when the tokenizer has one; fits the window."""
        tokenizer = self.model.tokenizer
        prompt = guard_prompt(text[-self.max_chars :], layer=layer)
        template = getattr(tokenizer, "apply_chat_template", None)
        ids = list(template([{"role": "user", "content": prompt}]) if template else tokenizer.encode(prompt))
        window = getattr(getattr(self.model, "config", None), "context_length", len(ids) + 1)
        return ids[-(window - 1) :]  # too long for the window: keep the end (the conversation and the question)

    def _candidates(self) -> tuple[list[int], list[int]]:
        """First-token ids of the "unsafe" and the "safe" answers; ids both answers could start with are dropped."""
        unsafe = _first_ids(self.model.tokenizer, ("unsafe", " unsafe", "Unsafe", " Unsafe"))
        safe = _first_ids(self.model.tokenizer, ("safe", " safe", "Safe", " Safe"))
        shared = unsafe & safe
        if not unsafe - shared or not safe - shared:
            raise SafetyConfigError(
                "ModelGuard cannot tell 'safe' from 'unsafe' with this tokenizer: use another model."
            )
        return sorted(unsafe - shared), sorted(safe - shared)


def _first_ids(tokenizer: Any, words: Iterable[str]) -> set[int]:
    return {ids[0] for ids in (tokenizer.encode(word) for word in words) if ids}
