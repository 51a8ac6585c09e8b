"""Continuous batching on the tiny model: each scheduled sequence gets exactly what it gets alone, and a row is freed
as soon as its sequence ends, is cancelled or is dropped.

Most tests run the loop themselves (`background=False`, then `step()`): what happens between two steps is checked
exactly, with no loop thread to race. The scheduling decisions alone are tested in test_plan.py, the loop on a fake
runner in test_scheduler_steps.py.
"""

from __future__ import annotations

import dataclasses
import gc

import numpy as np
import pytest

from jupyter_chatflow import GenerationError, SamplingParams, load_model
from jupyter_chatflow.engine import loop as loop_thread
from jupyter_chatflow.engine import prefill_group
from jupyter_chatflow.engine import scheduler as scheduling
from jupyter_chatflow.engine.batch import FREE, WARM_AHEAD
from jupyter_chatflow.engine.chunks import PREFILL_CHUNK
from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf

from .test_constraint import Allow

GREEDY = SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True)


def prompt(n: int, seed: int = 0) -> list[int]:
    return np.random.default_rng(seed).integers(3, 250, n).tolist()


def alone(model, ids, params=GREEDY, constraint=None) -> list[int]:
    return [s.token_id for s in model.generate(ids, params=params, constraint=constraint)]


def tokens(generation) -> list[int]:
    return [s.token_id for s in generation]


def drain(scheduler: Scheduler) -> None:
    while not scheduler.step().idle:
        pass


def step_until(scheduler: Scheduler, condition) -> None:
    for _ in range(10_000):
        if condition():
            return
        scheduler.step()
    raise AssertionError("never happened")


@pytest.fixture
def scheduler(tiny_model):
    """A scheduler of 4 rows whose loop the test runs (`step`)."""
    tiny_model.prompt_cache.clear()
    with Scheduler(tiny_model, max_batch=4, background=False) as s:
        yield s


def test_greedy_output_is_each_sequence_alone_as_they_join_at_different_times(tiny_model, scheduler):
    """Prompts of 5 to 2.5 wide chunks' tokens; two join while the first two decode; one is cancelled midway."""
    prompts = [prompt(5, 1), prompt(40, 2), prompt(PREFILL_CHUNK * 2 + 50, 3), prompt(17, 4)]
    expected = [alone(tiny_model, p) for p in prompts]
    tiny_model.prompt_cache.clear()
    first, cancelled = scheduler.submit(prompts[0], GREEDY), scheduler.submit(prompts[1], GREEDY)
    step_until(scheduler, lambda: scheduler.steps == 8)  # both decoding
    late = [scheduler.submit(p, GREEDY) for p in prompts[2:]]
    kept = []
    for step in cancelled:
        kept.append(step.token_id)
        if len(kept) == 5:
            break
    drain(scheduler)
    assert tokens(first) == expected[0] and [tokens(g) for g in late] == expected[2:]
    assert kept == expected[1][:5] and cancelled.finish_reason == "cancelled"
    assert first.finish_reason == "length" and [g.finish_reason for g in late] == ["length", "length"]
    assert [g.usage.completion_tokens for g in (first, *late)] == [24, 24, 24]


def test_no_more_rows_than_max_batch_and_all_finish(tiny_model):
    tiny_model.prompt_cache.clear()
    prompts = [prompt(8 + 3 * i, 10 + i) for i in range(5)]
    expected = [alone(tiny_model, p) for p in prompts]
    with Scheduler(tiny_model, max_batch=2, background=False) as scheduler:
        generations = [scheduler.submit(p, GREEDY) for p in prompts]
        busiest = 0
        while not scheduler.step().idle:
            busiest = max(busiest, scheduler.active)
        assert [tokens(g) for g in generations] == expected
    assert busiest == 2 and scheduler.batch_sizes == (1, 2) and scheduler.nbytes == 0


@pytest.mark.parametrize("how", ["break", "close", "drop"])
def test_a_caller_that_stops_iterating_frees_its_row_within_a_step(tiny_model, scheduler, how):
    running = scheduler.submit(prompt(6, 5), GREEDY)
    generation = scheduler.submit(prompt(9, 6), GREEDY)
    step_until(scheduler, lambda: scheduler.active == 2)
    steps = iter(generation)
    if how == "break":  # reads the first token (its prefill's), then lets go of the iterator
        for _ in steps:
            break
        del steps
    else:
        next(steps)
    if how == "close":
        steps.close()
    elif how == "drop":
        del steps, generation
        gc.collect()
    scheduler.step()
    assert scheduler.active == 1
    drain(scheduler)
    assert tokens(running) == alone(tiny_model, prompt(6, 5))


def test_sampling_knobs_seed_and_penalty_are_per_row(tiny_model, scheduler):
    """Three rows with different temperatures, filters, penalties and seeds: each draws what it draws alone."""
    params = [
        SamplingParams(temperature=0.9, top_p=0.8, seed=7, max_tokens=20, ignore_eos=True),
        SamplingParams(temperature=0.0, repetition_penalty=1.5, max_tokens=20, ignore_eos=True),
        SamplingParams(temperature=1.3, top_k=5, min_p=0.05, repetition_penalty=1.2, seed=3, max_tokens=20),
    ]
    ids = [prompt(12, 20 + i) for i in range(3)]
    expected = [alone(tiny_model, p, q) for p, q in zip(ids, params, strict=True)]
    generations = [scheduler.submit(p, q) for p, q in zip(ids, params, strict=True)]
    drain(scheduler)
    assert [tokens(g) for g in generations] == expected
    assert expected[0] != alone(tiny_model, ids[0], GREEDY)  # the first really sampled


def test_each_rows_alternatives_say_what_its_own_penalty_did(tiny_model, scheduler):
    """Two rows at once, one with the repetition penalty and one without: each row's alternatives are what it
    reports alone (flags and probabilities after the penalty)."""
    params = [
        dataclasses.replace(GREEDY, repetition_penalty=1.5, max_tokens=8),
        dataclasses.replace(GREEDY, max_tokens=8),
    ]
    ids = [[1, *range(3, 120, 2)], [1, *range(4, 120, 2)]]  # half the byte tokens: some of the top 5 in them
    generations = [scheduler.submit(p, q) for p, q in zip(ids, params, strict=True)]
    drain(scheduler)
    for generation, p, q in zip(generations, ids, params, strict=True):
        batched = [s.top_alternatives for s in generation]
        single = [s.top_alternatives for s in tiny_model.generate(p, params=q)]
        assert [[a.penalized for a in step] for step in batched] == [[a.penalized for a in step] for step in single]
        flat = [a.penalized_logprob for step in batched for a in step]
        assert flat == pytest.approx([a.penalized_logprob for step in single for a in step], abs=1e-4)
    assert any(a.penalized for step in tiny_model.generate(ids[0], params=params[0]) for a in step.top_alternatives)


def test_a_constraint_masks_its_own_row_and_ends_it(tiny_model, scheduler):
    vocab = tiny_model.config.vocab_size
    ids = prompt(10, 30)
    expected = alone(tiny_model, ids, constraint=Allow(vocab, [40, 41, 42], length=4))
    constrained = scheduler.submit(ids, GREEDY, constraint=Allow(vocab, [40, 41, 42], length=4))
    free = scheduler.submit(prompt(10, 31), GREEDY)
    drain(scheduler)
    assert tokens(constrained) == expected and set(expected) <= {40, 41, 42} and len(expected) == 4
    assert constrained.finish_reason == "stop"
    assert tokens(free) == alone(tiny_model, prompt(10, 31))


def test_stop_strings_and_stop_tokens_end_a_sequence_as_alone(tiny_model, scheduler):
    ids = prompt(11, 40)
    full = "".join(s.text for s in tiny_model.generate(ids, params=GREEDY))
    params = SamplingParams(temperature=0.0, max_tokens=24, stop=(full[6:8],))
    reference = tiny_model.generate(ids, params=params)
    expected = "".join(s.text for s in reference)
    scheduled = scheduler.submit(ids, params)
    with_eos = scheduler.submit(ids, SamplingParams(temperature=0.0, max_tokens=8))
    drain(scheduler)
    assert "".join(s.text for s in scheduled) == expected == reference.text == scheduled.text
    assert scheduled.finish_reason == reference.finish_reason == "stop"
    eos = tiny_model.tokenizer.eos_id
    assert [s.token_id for s in with_eos] == [t for t in alone(tiny_model, ids)[:8] if t != eos][:8]


def test_a_finished_sequence_goes_to_the_prompt_cache_and_a_follow_up_reuses_it(tiny_model, scheduler):
    ids = prompt(30, 50)
    first = scheduler.submit(ids, GREEDY)
    drain(scheduler)
    answer = tokens(first)
    follow_up = [*ids, *answer, *prompt(6, 51)]
    expected = alone(tiny_model, follow_up)
    tiny_model.prompt_cache.clear()
    kept = scheduler.submit(ids, GREEDY)  # (kept: a generation dropped unread is cancelled)
    drain(scheduler)
    assert tokens(kept) == answer
    again = scheduler.submit(follow_up, GREEDY)
    drain(scheduler)
    assert tokens(again) == expected
    assert again.usage.reused_tokens == len(ids) + len(answer) - 1  # all it fed: every token but the last


def test_a_generation_read_to_its_end_is_in_the_prompt_cache_and_clearing_it_then_clears_it(tiny_model):
    """Its queue closes only once its keys and values are kept, so what a caller does after reading to the end
    (tour chapter 6: `prompt_cache.clear()`, then the same prompt) sees the cache as the generation left it. (The
    loop runs on its own thread here: the race is between it and the reader.)"""
    ids = prompt(30, 55)
    with Scheduler(tiny_model, max_batch=4) as scheduler:
        for _ in range(5):  # (the race it closes went either way)
            tiny_model.prompt_cache.clear()
            tokens(scheduler.submit(ids, GREEDY))
            assert len(tiny_model.prompt_cache) == 1
            tiny_model.prompt_cache.clear()
            again = scheduler.submit(ids, GREEDY)
            tokens(again)
            assert again.usage.reused_tokens == 0


def test_a_sequence_starts_from_a_running_ones_prompt_when_they_share_a_prefix(tiny_model, scheduler):
    """The system prompt of two chats: the second prefills only its own end (the first's prompt cache entry)."""
    shared = prompt(40, 52)
    first, second = [*shared, 7, *prompt(5, 53)], [*shared, 9, *prompt(7, 54)]
    expected = [alone(tiny_model, p) for p in (first, second)]
    tiny_model.prompt_cache.clear()
    generations = [scheduler.submit(p, GREEDY) for p in (first, second)]
    drain(scheduler)
    assert [tokens(g) for g in generations] == expected
    assert [g.usage.reused_tokens for g in generations] == [0, 40]


def test_rows_are_sized_to_need(tiny_model, scheduler):
    """Two short sequences: a batch of 2 rows of MIN_ROW_CACHE positions, not max_batch rows of the window."""
    generations = [scheduler.submit(prompt(10, 60 + i), GREEDY) for i in range(2)]
    step_until(scheduler, lambda: scheduler.active == 2)
    config = tiny_model.config
    per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim * 4  # keys and values, float32
    assert scheduler.nbytes == 2 * scheduling.MIN_ROW_CACHE * per_position
    for g in generations:
        g.cancel()
    drain(scheduler)
    assert scheduler.nbytes == 0


def test_free_rows_decode_greedy_padding():
    assert np.array_equal(FREE["knobs"], SamplingParams(temperature=0.0).as_array())


CHATS = ("What is the capital of France?", "Write a haiku about the sea.", "Explain what a CPU cache is.")


@pytest.mark.slow
def test_real_model_chats_in_one_batch_answer_as_alone(real_model):
    params = SamplingParams(temperature=0.0, max_tokens=40)
    prompts = [real_model.tokenizer.apply_chat_template([{"role": "user", "content": c}]) for c in CHATS]
    expected = [alone(real_model, p, params) for p in prompts]
    real_model.prompt_cache.clear()
    with Scheduler(real_model, max_batch=4) as scheduler:
        generations = [scheduler.submit(p, params) for p in prompts]
        answers = [tokens(g) for g in generations]
    assert answers == expected
    assert "Paris" in generations[0].text


def test_compiling_on_the_loop_is_counted_in_each_sequences_steps(tiny_model):
    """XLA's compile clock is per thread; the scheduler hands each step the compile time its loop spent since the
    sequence's step before, so a timeline still draws compiling as compiling (a batch of 3 rows is new here: its
    copies and resizes compile on the loop)."""
    with Scheduler(tiny_model, max_batch=3, background=False) as scheduler:
        generations = [scheduler.submit(prompt(6, 90 + i), GREEDY) for i in range(3)]
        drain(scheduler)
        steps = [list(g) for g in generations]
    assert sum(g.usage.compile_ms for g in generations) > 50, [g.usage for g in generations]
    assert all(
        sum(s.compile_ms for s in run) == pytest.approx(g.usage.compile_ms)
        for run, g in zip(steps, generations, strict=True)
    )


def burst(shared: list[int], n: int, seed: int) -> list[list[int]]:
    """n prompts: `shared` (a system prompt) and a short question of its own each (6 to 12 tokens)."""
    return [[*shared, *prompt(6 + i % 7, seed + i)] for i in range(n)]


@pytest.fixture
def wide(tiny_model):
    """A scheduler of 8 rows, its system prompt cached, one sequence decoding (a decode step just ran)."""
    tiny_model.prompt_cache.clear()
    shared = prompt(40, 90)
    tiny_model.prefill([*shared, 3])
    tiny_model.runner.warm(8, scheduling.MIN_ROW_CACHE)  # (else newcomers wait while the 8-row batch compiles)
    with Scheduler(tiny_model, max_batch=8, background=False) as scheduler:
        running = scheduler.submit(prompt(5, 99), GREEDY)
        step_until(scheduler, lambda: scheduler.steps == 1)
        yield scheduler, shared, running


def test_a_burst_of_short_prompts_is_prefilled_as_one_group_each_answer_as_alone(tiny_model, wide):
    """Five questions after a cached system prompt arrive while a sequence decodes: one group (padded to 8 rows)
    prefills them between two steps, and each answer is what it is alone."""
    scheduler, shared, running = wide
    prompts = burst(shared, 5, 91)
    generations = [scheduler.submit(p, GREEDY) for p in prompts]
    assert scheduler.step().group and scheduler.active == 6
    drain(scheduler)
    got = [tokens(g) for g in generations]
    assert scheduler.groups == 1 and [g.usage.reused_tokens for g in generations] == [40] * 5
    assert got == [alone(tiny_model, p) for p in prompts]
    assert len(tokens(running)) == 24


def test_fewer_than_four_newcomers_or_long_remainders_are_prefilled_one_by_one(tiny_model, wide):
    scheduler, shared, running = wide
    few = [scheduler.submit(p, GREEDY) for p in burst(shared, 3, 93)]
    drain(scheduler)
    assert [len(tokens(g)) for g in (*few, running)] == [24] * 4 and scheduler.groups == 0
    runner = tiny_model.runner
    assert not runner.fits_group(np.array([*shared, *prompt(20, 194)], np.int32))  # 20 left > 16
    assert runner.fits_group(np.array([*shared, *prompt(16, 194)], np.int32))
    assert not runner.fits_group(np.array([*shared, 5], np.int32))  # one left: a decode step alone
    long_prefix = prompt(250, 195)
    tiny_model.prefill([*long_prefix, 3])
    assert not runner.fits_group(np.array([*long_prefix, *prompt(6, 196)], np.int32))  # > 256
    assert [prefill_group.group_size(n) for n in (3, 4, 5, 9, 16)] == [0, 4, 8, 16, 16]


def test_a_failing_group_ends_its_members_only_and_the_scheduler_keeps_serving(tiny_model, wide, monkeypatch):
    scheduler, shared, running = wide

    def failing(runs):
        raise RuntimeError("no memory for the group")

    monkeypatch.setattr(tiny_model.runner, "prefill_group", failing)
    members = [scheduler.submit(p, GREEDY) for p in burst(shared, 4, 96)]
    drain(scheduler)
    for generation in members:
        with pytest.raises(GenerationError, match="This sequence failed: no memory for the group"):
            tokens(generation)
    assert len(tokens(running)) == 24 and scheduler.groups == 1
    monkeypatch.undo()
    after = scheduler.submit(prompt(6, 81), GREEDY)
    drain(scheduler)
    assert tokens(after) == alone(tiny_model, prompt(6, 81))


def test_a_batch_grows_soon_within_warm_ahead_of_its_end_while_a_row_may_pass_it(tmp_path):
    """`Batch.grows_soon`: within WARM_AHEAD positions of the end of the rows' cache, while a row may still pass it
    (its budget left) and a longer cache is possible."""
    model = load_model(write_tiny_gguf(tmp_path / "w.gguf", TinySpec(context_length=1024)), dtype="float32")
    batch = model.runner.batch()
    batch.resize([], 1)
    assert batch.length == scheduling.MIN_ROW_CACHE == 512
    batch.host["pos"][0] = 512 - WARM_AHEAD - 1
    assert not batch.grows_soon(reach=1024)
    batch.host["pos"][0] = 512 - WARM_AHEAD
    assert batch.grows_soon(reach=1024) and batch.grows_soon(reach=512)
    assert not batch.grows_soon(reach=511)  # its budget ends it before the cache's end: nothing to prepare
    batch.host["pos"][0] = 1023
    batch.step([object()], {})  # (grown to the window's 1,024 positions: nothing longer to prepare)
    assert batch.length == 1024 and not batch.grows_soon(reach=4096)


def test_an_idle_loop_thread_ends_and_the_next_submit_starts_another(tiny_model, monkeypatch):
    """An idle scheduler holds no thread, so one nobody uses (and the model it holds) can be collected."""
    import weakref

    monkeypatch.setattr(loop_thread, "IDLE_EXIT_S", 0.05)
    scheduler = Scheduler(tiny_model, max_batch=2)
    expected = alone(tiny_model, prompt(6))
    for _ in range(2):  # the second served by a new loop thread
        assert tokens(scheduler.submit(prompt(6), GREEDY)) == expected
        loop = scheduler._loop.thread  # (white-box: the loop's thread, joined once it ended on its own)
        assert loop is not None
        loop.join(10)
        assert not loop.is_alive() and scheduler._loop.thread is None
    collected = weakref.ref(scheduler)
    del scheduler
    gc.collect()
    assert collected() is None


EXIT_MID_GENERATION = """
import sys
from jupyter_chatflow import GenerationError, SamplingParams, load_model
from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf

spec = TinySpec(n_layers=4, dim=256, n_heads=4, n_kv_heads=2, ffn_dim=1024, context_length=4096)  # steps of ms
model = load_model(write_tiny_gguf(sys.argv[1], spec), dtype="float32")
scheduler = Scheduler(model, max_batch=2)
params = SamplingParams(temperature=0.0, max_tokens=4000, ignore_eos=True)
generations = [scheduler.submit([5, 6, 7], params), scheduler.submit([8, 9], params)]
next(iter(generations[0]))
print("leaving mid-generation", flush=True)
"""


def test_a_process_that_exits_mid_generation_exits_cleanly(tmp_path):
    """A script (or `chatflow chat`, its title still being written) may end while the loop thread is inside an XLA
    call: the scheduler is closed at exit, where a daemon thread stopped mid-call aborted the process (SIGABRT)."""
    import os
    import subprocess
    import sys

    script = [sys.executable, "-c", EXIT_MID_GENERATION, str(tmp_path / "exit.gguf")]
    env = {**os.environ, "CHATFLOW_WEIGHTS_CACHE": str(tmp_path / "weights")}  # as a user runs: the second run
    for _ in range(2):  # maps the weights the first prepared, and its steps are the ones that ran into the exit
        result = subprocess.run(script, capture_output=True, text=True, timeout=120, env=env)
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout == "leaving mid-generation\n"
