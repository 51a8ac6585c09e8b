"""A prompt that branches off a cached conversation makes room by evicting older entries, not that conversation."""

from __future__ import annotations

import pytest

from jupyter_chatflow.prompt_cache import PromptCache


@pytest.fixture
def model(tiny_model):
    tiny_model.prompt_cache = PromptCache()
    yield tiny_model
    tiny_model.prompt_cache = PromptCache()


def run(model, prompt):
    generation = model.generate(prompt, max_tokens=4, temperature=0.0, ignore_eos=True)
    list(generation)
    return generation.usage


def test_the_title_prompt_does_not_take_the_conversation_it_shares_template_tokens_with(model):
    run(model, [9, 30, 31, 32, 33])  # an older conversation
    one_entry = model.prompt_cache.nbytes
    model.prompt_cache.max_bytes = 2 * one_entry  # room for two entries
    conversation = [1, 2, 3, 4, 50, 51, 52, 53]
    run(model, conversation)  # the latest: the one a follow-up continues
    assert run(model, [1, 2, 3, 4, 90, 91]).reused_tokens == 4  # the title: the same template start
    follow_up = run(model, [*conversation, 60, 61, 62])
    assert follow_up.reused_tokens >= len(conversation)  # the follow-up still finds its whole conversation
