"""A prompt that branches off a cached conversation makes room by evicting older entries, not that conversation."""

from __future__ import annotations

import pytest

from jupyter_chatflow.engine import chunks
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


def test_a_short_prompt_that_branches_off_a_long_cache_gets_a_cache_of_its_own_length(model, monkeypatch):
    """A short conversation that branches off a long prompt's cache copies the shared part into a cache of the
    positions it needs (the long one is cut, and stays): carried on at the long one's full length, it left no
    room to copy for the title's branch, which then took it."""
    monkeypatch.setattr(chunks, "MIN_CACHE", 64)
    run(model, [1, 2, 3, 4, *range(30, 230)])  # a long prompt: a cache of 512 positions (its answer's room too)
    [long] = model.prompt_cache._entries
    assert long.cache.length == 512
    model.prompt_cache.max_bytes = long.nbytes * 320 // 512  # 320 positions: its cut 256 and no copy beside it
    conversation = [1, 2, 3, 4, 50, 51, 52, 53]
    run(model, conversation)  # shares 4 tokens with the long one
    entry = model.prompt_cache._entries[-1]
    assert list(entry.ids[:8]) == conversation
    own_length = chunks.cache_length(chunks.room(len(conversation)), model.config.context_length)
    assert entry.cache.length <= own_length < 512 and len(model.prompt_cache) == 2
    assert run(model, [1, 2, 3, 4, 90, 91]).reused_tokens == 4  # the title: a copy of its length fits, of 512 not
    follow_up = run(model, [*conversation, 60, 61, 62])
    assert follow_up.reused_tokens >= len(conversation)


def test_new_chats_sharing_the_system_prompt_leave_an_earlier_conversation_cached(model):
    """The quickstart: one chat's turn, then two more chats whose prompts share only the template and system
    prompt with it, then a fork of the first answer. The bound had no room for a full-length cache beside the
    cut entries, so the third chat's prompt took the first conversation's entry (the one it shared most with)
    and the fork recomputed all but the shared 4 tokens; an entry is copied into a new cache either way, and
    the pass's full-length cache is cut before an older conversation is evicted for it."""
    conversation = [1, 2, 3, 4, 50, 51, 52, 53]
    generation = model.generate(conversation, max_tokens=4, temperature=0.0, ignore_eos=True)
    answer = [step.token_id for step in generation]
    [entry] = model.prompt_cache._entries
    model.prompt_cache.max_bytes = entry.nbytes + entry.kept_nbytes  # a full-length cache and one cut entry
    run(model, [1, 2, 3, 4, 90, 91])  # another chat: the same system prompt
    run(model, [1, 2, 3, 4, 70, 71, 72])  # and another
    assert model.prompt_cache.nbytes <= model.prompt_cache.max_bytes
    fork = run(model, [*conversation, *answer[:2], 99])  # the first answer, forked at its token 2
    assert fork.reused_tokens == len(conversation) + 2
