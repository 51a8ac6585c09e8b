"""A prompt that branches off a cached conversation makes room by evicting older entries, not that conversation."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from jupyter_chatflow.prompt_cache import PromptCache


def fake_cache(length: int) -> SimpleNamespace:
    return SimpleNamespace(keys=(np.zeros(length, np.uint8),), values=(np.zeros(length, np.uint8),), length=length)


def grow(cache, length: int) -> SimpleNamespace:
    return fake_cache(length)


def test_the_title_prompt_does_not_take_the_conversation_it_shares_template_tokens_with():
    cache = PromptCache(max_bytes=2 * 2 * 1024)  # room for two entries of 1,024 positions
    cache.put(np.array([7, 8, 9]), fake_cache(1024))  # an older conversation
    conversation = np.array([1, 2, 3, 4, 50, 51, 52, 53])
    cache.put(conversation, fake_cache(1024))  # the latest: the one a follow-up continues
    title_prompt = np.array([1, 2, 3, 4, 90, 91])  # the same template start, then other text
    taken, reused = cache.take(title_prompt, 1024, grow)
    assert reused == 4
    cache.put(title_prompt, taken)
    _, reused = cache.take(np.array([*conversation, 60, 61]), 1024, grow)
    assert reused == conversation.size  # the follow-up still finds its whole conversation
