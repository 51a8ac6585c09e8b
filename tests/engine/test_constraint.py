"""Constrained decoding through the engine: only allowed tokens come out, and a done constraint ends the answer."""

from __future__ import annotations

import numpy as np


class Allow:
    """Allows a fixed set of tokens, done after `length` tokens."""

    def __init__(self, vocab: int, allowed: list[int], length: int):
        self.mask = np.zeros(vocab, bool)
        self.mask[allowed] = True
        self.length = length
        self.seen: list[int] = []

    def allowed(self):
        return self.mask

    def advance(self, token_id: int) -> None:
        self.seen.append(token_id)

    def is_done(self) -> bool:
        return len(self.seen) >= self.length


def test_only_allowed_tokens_are_generated(tiny_model):
    allowed = [40, 41, 42]
    constraint = Allow(tiny_model.config.vocab_size, allowed, length=6)
    generation = tiny_model.generate([1, 50, 60], max_tokens=20, temperature=1.0, seed=3, constraint=constraint)
    ids = [s.token_id for s in generation]
    assert len(ids) == 6 and set(ids) <= set(allowed)
    assert constraint.seen == ids
    assert generation.finish_reason == "stop"


def test_greedy_under_a_constraint_takes_the_best_allowed_token(tiny_model):
    logits = tiny_model.logits([1, 50, 60])[-1]
    allowed = [int(i) for i in np.argsort(logits)[:3]]  # the three least likely tokens
    constraint = Allow(tiny_model.config.vocab_size, allowed, length=1)
    [step] = tiny_model.generate([1, 50, 60], max_tokens=5, temperature=0.0, constraint=constraint)
    assert step.token_id == max(allowed, key=lambda i: logits[i])
    # the alternatives still show what the model preferred, with zero sampling probability where it was cut
    assert step.top_alternatives[0].token_id == int(np.argmax(logits))
    assert step.top_alternatives[0].sampling_prob == 0.0


def test_unconstrained_none_mask_allows_everything(tiny_model):
    class Free(Allow):
        def allowed(self):
            return None

    free = Free(tiny_model.config.vocab_size, [], length=4)
    constrained = [s.token_id for s in tiny_model.generate([1, 50], max_tokens=4, temperature=0.0, constraint=free)]
    plain = [s.token_id for s in tiny_model.generate([1, 50], max_tokens=4, temperature=0.0)]
    assert constrained == plain[: len(constrained)] and len(constrained) >= 1
