"""The engine on the tiny model: determinism, cancellation, limits, errors."""

from __future__ import annotations

import itertools
import threading
import time

import numpy as np
import pytest

from jupyter_chatflow import GenerationError, SamplingParams
from jupyter_chatflow.engine import chunks
from jupyter_chatflow.engine import model as engine


def tokens(model, **kwargs) -> list[int]:
    return [s.token_id for s in model.generate([1, 50, 60, 70], **kwargs)]


def test_same_seed_same_answer(tiny_model):
    first = tokens(tiny_model, max_tokens=20, temperature=1.0, seed=7)
    assert first == tokens(tiny_model, max_tokens=20, temperature=1.0, seed=7)
    assert first != tokens(tiny_model, max_tokens=20, temperature=1.0, seed=8)


def test_greedy_is_deterministic(tiny_model):
    assert tokens(tiny_model, max_tokens=15, temperature=0.0) == tokens(tiny_model, max_tokens=15, temperature=0.0)


def test_max_tokens_bounds_the_answer(tiny_model):
    generation = tiny_model.generate([1, 50], max_tokens=5, temperature=1.0, seed=0)
    steps = list(generation)
    assert len(steps) <= 5
    assert generation.finish_reason == ("length" if len(steps) == 5 else "stop")
    assert generation.usage.prompt_tokens == 2 and generation.usage.completion_tokens >= len(steps)


def test_params_object_is_used(tiny_model):
    params = SamplingParams(temperature=0.0, max_tokens=3)
    assert len(list(tiny_model.generate([1, 50], params=params))) <= 3


def test_cancel_from_another_thread_stops_promptly(tiny_model):
    cancel = threading.Event()
    generation = tiny_model.generate([1, 50, 60], max_tokens=400, temperature=1.0, seed=1, cancel=cancel)
    list(tiny_model.generate([1, 50, 60], max_tokens=2))  # compile outside the timed part
    seen, stopped_at = [], []

    def consume():
        for step in generation:
            seen.append(step)
        stopped_at.append(time.perf_counter())

    worker = threading.Thread(target=consume)
    worker.start()
    while len(seen) < 3 and worker.is_alive():
        time.sleep(0.001)
    asked = time.perf_counter()
    generation.cancel()
    worker.join(timeout=10)
    assert not worker.is_alive()
    if generation.finish_reason != "stop":  # the random model may have ended on its own first
        assert generation.finish_reason == "cancelled" and len(seen) < 400
        assert stopped_at[0] - asked < 1.0


def test_model_is_usable_after_an_abandoned_generation(tiny_model):
    generation = iter(tiny_model.generate([1, 50], max_tokens=50, temperature=0.0))
    next(generation)
    generation.close()
    assert tokens(tiny_model, max_tokens=4, temperature=0.0)


def test_breaking_out_of_generations_never_blocks_the_next_one(tiny_model):
    """A notebook loop that breaks after 3 tokens, three times, then a generation from another thread: all done
    within seconds (the engine held its lock across `yield`, so the next generate waited forever)."""
    list(tiny_model.generate([1, 50, 60], max_tokens=4, ignore_eos=True))  # compile outside the timed part
    generations, done = [], []

    def notebook():
        for _ in range(3):
            generation = tiny_model.generate([1, 50, 60], max_tokens=200, ignore_eos=True)
            for step in generation:
                if step.index == 2:
                    break
            generations.append(generation)  # kept alive: breaking, not garbage collection, must end it
        other = threading.Thread(target=lambda: done.append(tokens(tiny_model, max_tokens=4, ignore_eos=True)))
        other.start()
        other.join()

    worker = threading.Thread(target=notebook, daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert not worker.is_alive(), f"the engine stayed locked after {len(generations)} abandoned generation(s)"
    assert [g.finish_reason for g in generations] == ["cancelled"] * 3
    assert [g.usage.completion_tokens for g in generations] == [3, 3, 3]
    assert len(done) == 1 and len(done[0]) == 4


def test_an_abandoned_generation_gives_its_cache_back(tiny_model):
    """Dropping the iterator (no break, no close) ends the generation at once: its KV cache returns to the prompt
    cache, so the same prompt is then served from it."""
    tiny_model.prompt_cache.clear()
    prompt = [1, 50, 60, 70, 80]
    steps = iter(tiny_model.generate(prompt, max_tokens=50, ignore_eos=True))
    next(steps)
    del steps
    assert len(tiny_model.prompt_cache) == 1
    again = tiny_model.generate(prompt, max_tokens=2, ignore_eos=True)
    list(again)
    assert again.usage.reused_tokens == len(prompt) - 1


@pytest.mark.parametrize(
    "prompt, message",
    [([], "prompt is empty"), ([1] * 512, "window is 512"), ([1, 99999], r"ids must be in \[0, 267\)")],
)
def test_bad_prompts_are_clear_errors(tiny_model, prompt, message):
    with pytest.raises(GenerationError, match=message):
        tiny_model.generate(prompt)


def test_answer_is_clipped_to_the_window(tiny_model):
    generation = tiny_model.generate([1] * 508, max_tokens=100, temperature=0.0)
    assert len(list(generation)) <= 4


def test_attention_layer_must_exist(tiny_model):
    with pytest.raises(GenerationError, match=r"layer must be in \[0, 2\)"):
        tiny_model.attention([1, 2, 3], 2)


def test_ignore_eos_always_gives_max_tokens(tiny_model):
    generation = tiny_model.generate([1, 50], max_tokens=12, temperature=0.0, ignore_eos=True)
    assert len(list(generation)) == 12 and generation.finish_reason == "length"


def test_unknown_dtype_is_a_clear_error(tiny_path):
    from jupyter_chatflow import ChatflowError, load_model

    with pytest.raises(ChatflowError, match="dtype must be one of float32, bfloat16, float16"):
        load_model(tiny_path, dtype="int4")


def test_next_logits_equal_the_last_row_of_logits_also_from_the_prompt_cache(tiny_model):
    ids = [1, 50, 60, 70, 80]
    expected = tiny_model.logits(ids)[-1]
    np.testing.assert_allclose(tiny_model.next_logits(ids), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tiny_model.next_logits(ids), expected, rtol=1e-5, atol=1e-5)  # prefix reused
    longer = [*ids, 90]
    np.testing.assert_allclose(tiny_model.next_logits(longer), tiny_model.logits(longer)[-1], rtol=1e-5, atol=1e-5)


def test_a_stop_string_given_as_a_str_is_one_stop_string(tiny_model):
    generation = tiny_model.generate([1, 50, 60], max_tokens=2, stop="END")
    assert generation._stop == ("END",)  # not "E", "N", "D"


def test_prefill_returns_once_the_cache_is_computed(tiny_model):
    """A prewarm's measured time is its own: `prefill` returns when the keys/values exist, not when the work is
    merely queued (its compute landed in the next request's time to first token)."""
    tiny_model.prompt_cache.clear()
    tiny_model.prefill([1, *(30 + k % 200 for k in range(450))])
    cache = tiny_model.prompt_cache._entries[-1].cache
    assert all(a.is_ready() for a in (*cache.keys, *cache.values))


def test_a_cache_sized_for_its_prompt_grows_while_decoding_with_the_same_answer(tiny_model, monkeypatch):
    """The cache starts at the prompt's size (not prompt + max_tokens) and doubles as the answer reaches its end:
    the tokens and their logprobs are those of a run whose cache was long enough from the start."""
    prompt = [1, *(30 + k % 200 for k in range(40))]
    tiny_model.prompt_cache.clear()
    full = list(tiny_model.generate(prompt, max_tokens=300, temperature=0.0, ignore_eos=True))
    monkeypatch.setattr(chunks, "MIN_CACHE", 64)
    tiny_model.prompt_cache.clear()
    grown = list(tiny_model.generate(prompt, max_tokens=300, temperature=0.0, ignore_eos=True))
    [entry] = tiny_model.prompt_cache._entries
    first = chunks.cache_length(chunks.room(len(prompt)), tiny_model.config.context_length)
    assert first == 128 and entry.cache.length == 512  # 128 -> 256 -> 512
    assert [s.token_id for s in grown] == [s.token_id for s in full]
    np.testing.assert_allclose([s.logprob for s in grown], [s.logprob for s in full], atol=1e-4)


@pytest.mark.parametrize("size, first", [(1, 0), (15, 0), (16, 0), (17, 0), (64, 0), (65, 0), (300, 0), (300, 250)])
def test_prompts_are_prefilled_in_three_widths_and_never_past_the_cache(size, first):
    prompt = np.arange(size, dtype=np.int32)
    length = engine.bucket(engine.room(size), 64)
    pieces = list(engine.prefill_chunks(prompt, length, first))
    assert {tokens.shape[1] for _, tokens, _ in pieces} <= {engine.MIN_BUCKET, chunks.MID_CHUNK, engine.PREFILL_CHUNK}
    assert all(start + tokens.shape[1] <= length for start, tokens, _ in pieces)
    assert np.concatenate([tokens[0, :n] for _, tokens, n in pieces]).tolist() == prompt[first:].tolist()
    assert [start for start, _, _ in pieces] == np.cumsum([first] + [n for _, _, n in pieces])[:-1].tolist()
    narrow = sum(tokens.shape[1] == engine.MIN_BUCKET for _, tokens, _ in pieces)
    assert narrow <= 1  # (a tail of more than one narrow chunk takes a middle or a wide one)
    assert len(pieces) <= -(-(size - first) // engine.PREFILL_CHUNK) + 2


@pytest.mark.parametrize("penalty", [1.5, 1.0])
def test_each_alternative_says_whether_the_repetition_penalty_lowered_it(tiny_model, penalty):
    """Lowered exactly when it is in the prompt or the answer so far (and the penalty is on); its probability after
    the penalty moves against an unpenalized one's by the penalty alone (two unpenalized keep their ratio)."""
    ids = [1, *range(3, 120, 2)]  # half the byte tokens: some of every step's top 5 are in it, some not
    seen, mixed = set(ids), 0
    for step in tiny_model.generate(ids, max_tokens=12, temperature=0.0, repetition_penalty=penalty, ignore_eos=True):
        alternatives = step.top_alternatives
        assert [a.penalized for a in alternatives] == [a.token_id in seen and penalty != 1 for a in alternatives]
        free = [a for a in alternatives if not a.penalized]
        for a, b in itertools.pairwise(free):
            assert a.penalized_logprob - b.penalized_logprob == pytest.approx(a.logprob - b.logprob, abs=1e-4)
        mixed += any(a.penalized for a in alternatives) and bool(free)
        seen.add(step.token_id)
    assert mixed or penalty == 1


def test_the_penalty_counts_the_prompt_from_penalty_from_on(tiny_model):
    """A chat turn's penalty counts its answer alone (`penalty_from` = the prompt's length): the first step's
    alternatives are never lowered; the engine's default counts the whole prompt."""
    ids = tiny_model.tokenizer.encode("abcabcabc hello hello")
    knobs = {"temperature": 0.0, "repetition_penalty": 1.5, "max_tokens": 1}
    answer_only = next(iter(tiny_model.generate(ids, params=SamplingParams(**knobs, penalty_from=len(ids)))))
    assert not any(a.penalized for a in answer_only.top_alternatives)
    whole = next(iter(tiny_model.generate(ids, params=SamplingParams(**knobs))))
    assert [a.penalized for a in whole.top_alternatives] == [a.token_id in ids for a in whole.top_alternatives]
