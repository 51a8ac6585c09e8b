"""The prompt cache: a follow-up reuses the cached prefix and answers exactly as if computed from scratch."""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_chatflow.engine.chunks import cache_length
from jupyter_chatflow.engine.prompt_cache import MIN_KEPT_LENGTH, PromptCache, shared_prefix

PROMPT = [1, 50, 60, 70, 80, 90, 100, 110]


@pytest.fixture
def model(tiny_model):
    tiny_model.prompt_cache.clear()
    yield tiny_model
    tiny_model.prompt_cache = PromptCache()


def greedy(model, prompt, n=8):
    generation = model.generate(prompt, max_tokens=n, temperature=0.0, ignore_eos=True)
    return [s.token_id for s in generation], generation.usage


def test_shared_prefix():
    assert shared_prefix(np.array([1, 2, 3]), np.array([1, 2, 4, 5])) == 2
    assert shared_prefix(np.array([1, 2]), np.array([1, 2, 3])) == 2
    assert shared_prefix(np.array([9]), np.array([1])) == 0


def test_follow_up_reuses_prompt_and_answer_and_matches_a_cold_run(model):
    answer, usage = greedy(model, PROMPT)
    assert usage.reused_tokens == 0
    follow_up = [*PROMPT, *answer, 120, 130]
    warm, usage = greedy(model, follow_up)
    # every token whose keys/values were written: the prompt and all answer tokens but the last one sampled
    assert usage.reused_tokens == len(PROMPT) + len(answer) - 1
    model.prompt_cache = PromptCache(max_bytes=0)  # reuse off
    cold, usage = greedy(model, follow_up)
    assert usage.reused_tokens == 0
    assert warm == cold


def test_same_prompt_again_computes_one_token(model):
    first, _ = greedy(model, PROMPT)
    again, usage = greedy(model, PROMPT)
    assert usage.reused_tokens == len(PROMPT) - 1 and again == first


def test_one_token_after_a_cached_prefix_runs_as_a_decode_step_with_the_same_numbers(model):
    [cold] = list(model.generate(PROMPT, max_tokens=1, temperature=0.0))  # run to its end: the cache is kept
    calls, programs = [], model.runner._programs  # (white-box: which program ran)
    decode_rows = programs.decode_rows
    programs.decode_rows = lambda *args: calls.append(args) or decode_rows(*args)
    try:
        [warm] = list(model.generate(PROMPT, max_tokens=1, temperature=0.0))
    finally:
        programs.decode_rows = decode_rows
    assert len(calls) == 1  # the one computed token went through the decode program (no new prefill shape)
    assert warm.token_id == cold.token_id and warm.logprob == pytest.approx(cold.logprob, abs=1e-4)
    assert [a.token_id for a in warm.top_alternatives] == [a.token_id for a in cold.top_alternatives]


def test_a_different_branch_reuses_only_the_shared_part(model):
    greedy(model, PROMPT)
    branch = [*PROMPT[:4], 7, 8, 9]
    _, usage = greedy(model, branch)
    assert usage.reused_tokens == 4


def test_prefill_prewarms_a_prefix(model):
    assert model.prefill(PROMPT[:6]) == 6
    _, usage = greedy(model, PROMPT)
    assert usage.reused_tokens == 6


def test_cache_grows_when_a_longer_answer_needs_more_room(model):
    greedy(model, PROMPT, n=4)  # a 256-position cache
    long_answer, usage = greedy(model, PROMPT, n=300)  # needs 512 positions: the entry is copied into a longer one
    assert usage.reused_tokens == len(PROMPT) - 1
    model.prompt_cache = PromptCache(max_bytes=0)
    assert greedy(model, PROMPT, n=300)[0] == long_answer


def test_branches_are_kept_while_memory_allows_then_the_bound_holds(model):
    for i in range(3):
        greedy(model, [1, 200 + 10 * i, 5, 6])  # each shares only its first token with the others: a copy each
    assert len(model.prompt_cache) == 3
    full, cut = (e.nbytes for e in model.prompt_cache._entries[::-1][:2])
    model.prompt_cache.max_bytes = full + cut  # room for the newest entry and one cut one, not for a copy
    _, usage = greedy(model, [1, 250, 5, 6])  # a copy still (taking the cut entry would copy it into a new cache)
    assert usage.reused_tokens == 1
    # past the bound the newest entry is cut first (four cut entries fit where a full one and a cut one did)
    assert model.prompt_cache.nbytes <= full + cut and len(model.prompt_cache) == 4
    assert model.prompt_cache._entries[-1].cache.length == model.prompt_cache._entries[-1].kept_length


def test_an_entry_of_the_needed_length_is_taken_when_no_copy_fits(model):
    greedy(model, [1, 2, 3, 4])  # the newest entry: at full length, the length the branch below needs
    [entry] = model.prompt_cache._entries
    model.prompt_cache.max_bytes = entry.nbytes  # no room for a copy beside it
    _, usage = greedy(model, [1, 2, 9, 9])  # branches off inside it: taken and overwritten (no new cache made)
    assert usage.reused_tokens == 2
    [entry] = model.prompt_cache._entries
    assert list(entry.ids[:4]) == [1, 2, 9, 9]


def test_only_the_newest_entry_keeps_its_full_length_and_a_cut_one_still_serves_its_follow_up(model):
    first, _ = greedy(model, PROMPT)
    greedy(model, [1, 2, 3])  # another conversation: the first one's entry is cut to the power of two holding it
    older, newest = model.prompt_cache._entries
    assert newest.cache.length == cache_length(1, model.config.context_length)
    assert older.cache.length == MIN_KEPT_LENGTH == older.kept_length and older.ids.size <= MIN_KEPT_LENGTH
    follow_up = [*PROMPT, *first, 120, 130]
    warm, usage = greedy(model, follow_up, n=60)  # grown back to full length to go on past the cut
    assert usage.reused_tokens == len(PROMPT) + len(first) - 1
    model.prompt_cache = PromptCache(max_bytes=0)
    assert greedy(model, follow_up, n=60)[0] == warm


def test_the_byte_budget_holds_after_every_generation(model):
    greedy(model, [1, 100, 7, 8, 9], n=3)
    [entry] = model.prompt_cache._entries
    budget = 3 * entry.kept_nbytes  # three cut entries (the newest at full length never fits beside them)
    model.prompt_cache.max_bytes = budget
    for i in range(1, 8):
        greedy(model, [1, 100 + i, 7, 8, 9], n=3)
        assert model.prompt_cache.nbytes <= budget
    assert len(model.prompt_cache) == 3
    assert [list(e.ids[:2]) for e in model.prompt_cache._entries] == [[1, 105], [1, 106], [1, 107]]


def test_an_entry_another_holds_is_not_kept_twice(model):
    answer, _ = greedy(model, PROMPT)
    model.attention(PROMPT, 0)  # recomputes the prompt from scratch: its ids are a prefix of the kept entry's
    [entry] = model.prompt_cache._entries
    assert list(entry.ids) == [*PROMPT, *answer[:-1]]
    model.prefill([*PROMPT, *answer])  # a longer prefix: it replaces the entry it holds all of
    [entry] = model.prompt_cache._entries
    assert list(entry.ids) == [*PROMPT, *answer]


def test_cancelled_generation_leaves_a_consistent_entry(model):
    generation = model.generate(PROMPT, max_tokens=50, temperature=0.0, ignore_eos=True)
    steps = []
    for step in generation:
        steps.append(step.token_id)
        if len(steps) == 5:
            generation.cancel()
    follow_up = [*PROMPT, *steps, 42]
    warm, usage = greedy(model, follow_up)
    assert usage.reused_tokens >= len(PROMPT) + len(steps) - 1
    model.prompt_cache = PromptCache(max_bytes=0)
    assert greedy(model, follow_up)[0] == warm
