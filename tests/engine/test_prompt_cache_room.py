"""A prompt that branches off a cached conversation makes room by evicting older entries, not that conversation."""

from __future__ import annotations

import pytest

from jupyter_chatflow.engine import model as engine
from jupyter_chatflow.engine.prompt_cache import PromptCache


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


def test_a_short_prompt_that_takes_a_long_cache_cuts_it_to_its_own_length(model, monkeypatch):
    """A short conversation that took a long prompt's cache (no room to copy it) keeps only the positions it
    needs: carried on at full length, it left no room to copy for the title's branch, which then took it."""
    monkeypatch.setattr(engine, "MIN_CACHE", 64)
    run(model, [1, 2, 3, 4, *range(30, 230)])  # a long prompt: a cache of 512 positions (its answer's room too)
    [long] = model.prompt_cache._entries
    assert long.cache.length == 512
    model.prompt_cache.max_bytes = long.nbytes * 320 // 512  # 320 positions: its cut 256 and no copy beside it
    conversation = [1, 2, 3, 4, 50, 51, 52, 53]
    run(model, conversation)  # shares 4 tokens with the long one, takes its cache
    [entry] = model.prompt_cache._entries
    assert list(entry.ids[:8]) == conversation
    assert entry.cache.length == model._length(engine.room(len(conversation))) < 512
    assert run(model, [1, 2, 3, 4, 90, 91]).reused_tokens == 4  # the title: a copy of its length fits, of 512 not
    follow_up = run(model, [*conversation, 60, 61, 62])
    assert follow_up.reused_tokens >= len(conversation)
