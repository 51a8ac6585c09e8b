"""Continuous batching: each scheduled sequence gets exactly what it gets alone, and a row is freed as soon as its
sequence ends, is cancelled or is dropped."""

from __future__ import annotations

import dataclasses
import gc
import threading
import time
import types

import numpy as np
import pytest

from jupyter_chatflow import GenerationError, SamplingParams
from jupyter_chatflow.engine import prefill_group
from jupyter_chatflow.engine import scheduler as scheduling
from jupyter_chatflow.engine.model import PREFILL_CHUNK
from jupyter_chatflow.engine.scheduler import Scheduler

from .test_constraint import Allow

GREEDY = SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True)


def prompt(n: int, seed: int = 0) -> list[int]:
    return np.random.default_rng(seed).integers(3, 250, n).tolist()


def alone(model, ids, params=GREEDY, constraint=None) -> list[int]:
    return [s.token_id for s in model.generate(ids, params=params, constraint=constraint)]


def tokens(generation) -> list[int]:
    return [s.token_id for s in generation]


def wait_until(condition, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


class Gate:
    """Decode steps run only when the test lets one through: what happens between two steps is checked exactly.

    `step()` returns once the loop is parked before its next step (or idle), so a check after it sees everything
    the loop does between two steps (freeing the rows of callers that let go), never a moment in the middle."""

    def __init__(self, scheduler: Scheduler, monkeypatch):
        self.scheduler, self.permits = scheduler, threading.Semaphore(0)
        self.arrivals = 0  # times the loop reached the gate
        decode = scheduler._batch.step

        def gated(rows, *rest):
            self.arrivals += 1
            if not self.permits.acquire(timeout=60):  # a test that failed before opening: never hang the loop
                raise RuntimeError("the test's gate stayed shut")
            return decode(rows, *rest)

        monkeypatch.setattr(scheduler._batch, "step", gated)

    def step(self) -> None:
        """Let one decode step run, and wait until the loop is back at the gate (or has nothing left to step)."""
        arrivals = self.arrivals
        self.permits.release()
        wait_until(lambda: self.arrivals > arrivals or self._idle())

    def _idle(self) -> bool:
        return self.scheduler.active == 0 and self.scheduler.queued == 0

    def until(self, condition) -> None:
        """Let steps run one by one until `condition()` (checked between two steps)."""
        deadline = time.monotonic() + 30
        while not condition():
            assert time.monotonic() < deadline, "timed out"
            if self.scheduler.active and self.arrivals > self.scheduler.steps:  # parked at the gate
                self.step()
            else:
                time.sleep(0.005)  # a prefill is under way: no step to let through yet

    def open(self) -> None:
        """Let every step run from now on."""
        self.permits.release(1_000_000)


@pytest.fixture
def gate(scheduler, monkeypatch):
    """A Gate on the `scheduler` fixture's loop, opened at the end whatever the test did (its close() can join)."""
    gate = Gate(scheduler, monkeypatch)
    yield gate
    gate.open()


@pytest.fixture
def scheduler(tiny_model):
    tiny_model.prompt_cache.clear()
    with Scheduler(tiny_model, max_batch=4) as s:
        yield s


def test_greedy_output_is_each_sequence_alone_as_they_join_at_different_times(tiny_model, scheduler):
    """Prompts of 5 to 2.5 wide chunks' tokens; two join while the first two decode; one is cancelled midway."""
    prompts = [prompt(5, 1), prompt(40, 2), prompt(PREFILL_CHUNK * 2 + 50, 3), prompt(17, 4)]
    expected = [alone(tiny_model, p) for p in prompts]
    tiny_model.prompt_cache.clear()
    first, cancelled = scheduler.submit(prompts[0], GREEDY), scheduler.submit(prompts[1], GREEDY)
    steps = iter(first)
    head = [next(steps).token_id for _ in range(3)]  # the first two are decoding now
    late = [scheduler.submit(p, GREEDY) for p in prompts[2:]]
    kept = []
    for step in cancelled:
        kept.append(step.token_id)
        if len(kept) == 5:
            break
    assert head + [s.token_id for s in steps] == expected[0]
    assert [tokens(g) for g in late] == expected[2:]
    assert kept == expected[1][:5] and cancelled.finish_reason == "cancelled"
    assert first.finish_reason == "length" and [g.finish_reason for g in late] == ["length", "length"]
    assert [g.usage.completion_tokens for g in (first, *late)] == [24, 24, 24]


def test_no_more_rows_than_max_batch_and_all_finish(tiny_model):
    tiny_model.prompt_cache.clear()
    prompts = [prompt(8 + 3 * i, 10 + i) for i in range(5)]
    expected = [alone(tiny_model, p) for p in prompts]
    busiest = []
    with Scheduler(tiny_model, max_batch=2) as scheduler:
        generations = [scheduler.submit(p, GREEDY) for p in prompts]
        results = []
        for g in generations:
            results.append(tokens(g))
            busiest.append(scheduler.active)
        wait_until(lambda: scheduler.active == 0 and scheduler.nbytes == 0)
    assert results == expected
    assert max(busiest) <= 2 and scheduler.batch_sizes == (1, 2)


def test_a_caller_that_stops_iterating_frees_its_row_within_a_step(tiny_model, scheduler, gate):
    runner = scheduler.submit(prompt(6, 5), GREEDY)
    for label in ("break", "close", "drop"):
        generation = scheduler.submit(prompt(9, 6), GREEDY)
        steps = iter(generation)
        gate.until(lambda: scheduler.active == 2)
        if label == "break":  # reads the first token (its prefill's), then lets go of the iterator
            for _ in steps:
                break
            del steps
        else:
            next(steps)
        if label == "close":
            steps.close()
        elif label == "drop":
            del steps, generation
            gc.collect()
        gate.step()
        assert scheduler.active == 1, label
    gate.open()
    assert tokens(runner) == alone(tiny_model, prompt(6, 5))


def test_the_callers_cancel_event_ends_its_sequence_only(tiny_model, scheduler):
    cancel = threading.Event()
    params = SamplingParams(temperature=0.0, max_tokens=300, ignore_eos=True)
    stopped, other = scheduler.submit(prompt(7, 7), params, cancel=cancel), scheduler.submit(prompt(7, 8), GREEDY)
    steps = iter(stopped)
    next(steps)
    cancel.set()
    list(steps)
    assert stopped.finish_reason == "cancelled" and stopped.usage.completion_tokens < 300
    assert tokens(other) == alone(tiny_model, prompt(7, 8))


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
    assert tokens(constrained) == expected and set(expected) <= {40, 41, 42} and len(expected) == 4
    assert constrained.finish_reason == "stop"
    assert tokens(free) == alone(tiny_model, prompt(10, 31))


def test_stop_strings_and_stop_tokens_end_a_sequence_as_alone(tiny_model, scheduler):
    ids = prompt(11, 40)
    text = tiny_model.generate(ids, params=GREEDY)
    full = "".join(s.text for s in text)
    params = SamplingParams(temperature=0.0, max_tokens=24, stop=(full[6:8],))
    reference = tiny_model.generate(ids, params=params)
    expected = "".join(s.text for s in reference)
    scheduled = scheduler.submit(ids, params)
    assert "".join(s.text for s in scheduled) == expected == reference.text == scheduled.text
    assert scheduled.finish_reason == reference.finish_reason == "stop"
    eos = tiny_model.tokenizer.eos_id
    with_eos = scheduler.submit(ids, SamplingParams(temperature=0.0, max_tokens=8))
    assert [s.token_id for s in with_eos] == [t for t in alone(tiny_model, ids)[:8] if t != eos][:8]


def test_a_finished_sequence_goes_to_the_prompt_cache_and_a_follow_up_reuses_it(tiny_model, scheduler):
    ids = prompt(30, 50)
    answer = tokens(scheduler.submit(ids, GREEDY))
    follow_up = [*ids, *answer, *prompt(6, 51)]
    expected = alone(tiny_model, follow_up)
    tiny_model.prompt_cache.clear()
    tokens(scheduler.submit(ids, GREEDY))
    again = scheduler.submit(follow_up, GREEDY)
    assert tokens(again) == expected
    assert again.usage.reused_tokens == len(ids) + len(answer) - 1  # all it fed: every token but the last


def test_a_generation_read_to_its_end_is_in_the_prompt_cache_and_clearing_it_then_clears_it(tiny_model, scheduler):
    """Its queue closes only once its keys and values are kept, so what a caller does after reading to the end
    (tour chapter 6: `prompt_cache.clear()`, then the same prompt) sees the cache as the generation left it."""
    ids = prompt(30, 55)
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
    assert [tokens(g) for g in generations] == expected
    assert [g.usage.reused_tokens for g in generations] == [0, 40]


def test_rows_are_sized_to_need(tiny_model, scheduler, gate):
    """Two short sequences: a batch of 2 rows of MIN_ROW_CACHE positions, not max_batch rows of the window."""
    generations = [scheduler.submit(prompt(10, 60 + i), GREEDY) for i in range(2)]
    gate.until(lambda: scheduler.active == 2)
    config = tiny_model.config
    per_position = 2 * config.n_layers * config.n_kv_heads * config.head_dim * 4  # keys and values, float32
    assert scheduler.nbytes == 2 * scheduling.MIN_ROW_CACHE * per_position
    for g in generations:
        g.cancel()
    gate.open()
    wait_until(lambda: scheduler.nbytes == 0)


def test_free_rows_decode_greedy_padding():
    assert np.array_equal(scheduling._FREE["knobs"], SamplingParams(temperature=0.0).as_array())


def test_a_closed_scheduler_refuses_new_sequences_and_ends_waiting_ones(tiny_model, monkeypatch):
    scheduler = Scheduler(tiny_model, max_batch=1)
    gate = Gate(scheduler, monkeypatch)
    running, waiting = scheduler.submit(prompt(5, 70), GREEDY), scheduler.submit(prompt(5, 71), GREEDY)
    steps = iter(running)  # (kept: a dropped iterator would end it before the close does)
    next(steps)  # (its first token needs no decode step)
    closing = threading.Thread(target=scheduler.close)
    closing.start()
    wait_until(lambda: scheduler._closing)  # (before the gate opens: else the loop may run both to their ends)
    gate.open()  # the step under way ends, then the loop stops
    closing.join()
    assert len(list(steps)) <= 1 and running.finish_reason == "cancelled"
    assert list(waiting) == [] and waiting.finish_reason == "cancelled"
    with pytest.raises(GenerationError, match="closed"):
        scheduler.submit(prompt(5, 72), GREEDY)


def test_a_failed_step_ends_its_batch_with_an_error_and_the_scheduler_keeps_serving(tiny_model, scheduler, monkeypatch):
    real, calls = tiny_model._programs.decode_rows, []

    def failing(*args):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("boom")
        return real(*args)

    monkeypatch.setattr(tiny_model._programs, "decode_rows", failing)
    failed = scheduler.submit(prompt(6, 80), GREEDY)
    with pytest.raises(GenerationError, match="boom"):
        tokens(failed)
    assert failed.finish_reason == "cancelled" and failed.usage.completion_tokens == 3
    assert tokens(scheduler.submit(prompt(6, 81), GREEDY)) == alone(tiny_model, prompt(6, 81))


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


def test_the_wait_for_a_row_is_queue_time_not_prefill_time(tiny_model, monkeypatch):
    with Scheduler(tiny_model, max_batch=1) as scheduler:
        gate = Gate(scheduler, monkeypatch)
        first, second = scheduler.submit(prompt(5, 80), GREEDY), scheduler.submit(prompt(5, 81), GREEDY)
        read = threading.Thread(target=lambda: list(second))  # reads from now on; waits for the first's row
        read.start()
        gate.until(lambda: scheduler.active == 1)
        time.sleep(0.3)
        gate.open()
        list(first)
        read.join()
    assert second.usage.queue_ms >= 300 > second.usage.prefill_ms
    assert first.usage.queue_ms == 0.0  # read only after its prefill began


def test_compiling_on_the_loop_thread_is_counted_in_each_sequences_steps(tiny_model, monkeypatch):
    """XLA's compile clock is per thread; the scheduler hands each step the compile time its loop spent since the
    sequence's step before, so a timeline still draws compiling as compiling (a batch of 3 is new here: the first
    sequence's first step compiles its decode; the two others wait in the queue meanwhile, see `_held`)."""
    monkeypatch.setattr(tiny_model._programs._jitted, "decode_ready", set())
    with Scheduler(tiny_model, max_batch=3) as scheduler:
        generations = [scheduler.submit(prompt(6, 90 + i), GREEDY) for i in range(3)]
        steps = [list(g) for g in generations]
    assert generations[0].usage.compile_ms > 50, generations[0].usage
    assert all(
        sum(s.compile_ms for s in run) == pytest.approx(g.usage.compile_ms)
        for run, g in zip(steps, generations, strict=True)
    )


class Failing(Allow):
    """Allows a fixed set of tokens, and fails (a grammar's bug, say) when asked for its mask the `fail_at`-th time."""

    def __init__(self, vocab: int, fail_at: int):
        super().__init__(vocab, list(range(40, 60)), length=100)
        self.asked, self.fail_at = 0, fail_at

    def allowed(self):
        self.asked += 1
        if self.asked == self.fail_at:
            raise ValueError("the grammar broke")
        return self.mask


@pytest.mark.parametrize("fail_at", [1, 4], ids=["in its prefill", "mid-decode"])
def test_a_failing_constraint_ends_its_own_sequence_only(tiny_model, scheduler, fail_at):
    expected = alone(tiny_model, prompt(8, 100))
    failing = scheduler.submit(prompt(8, 101), GREEDY, Failing(tiny_model.config.vocab_size, fail_at))
    other = scheduler.submit(prompt(8, 100), GREEDY)
    with pytest.raises(GenerationError, match="This sequence failed: the grammar broke"):
        list(failing)
    assert tokens(other) == expected
    wait_until(lambda: scheduler.active == 0)
    assert tokens(scheduler.submit(prompt(8, 100), GREEDY)) == expected  # the scheduler serves on


def burst(shared: list[int], n: int, seed: int) -> list[list[int]]:
    """n prompts: `shared` (a system prompt) and a short question of its own each (6 to 12 tokens)."""
    return [[*shared, *prompt(6 + i % 7, seed + i)] for i in range(n)]


@pytest.fixture
def wide(tiny_model, monkeypatch):
    """A scheduler of 8 rows, its system prompt cached, one sequence decoding and the loop parked at its gate."""
    tiny_model.prompt_cache.clear()
    shared = prompt(40, 90)
    tiny_model.prefill([*shared, 3])
    with Scheduler(tiny_model, max_batch=8) as scheduler:
        gate = Gate(scheduler, monkeypatch)
        running = scheduler.submit(prompt(5, 99), GREEDY)
        gate.until(lambda: scheduler.active == 1)
        wait_until(lambda: gate.arrivals > scheduler.steps)  # parked at the gate: nothing is prefilled meanwhile
        yield scheduler, gate, shared, running
        gate.open()


def test_a_burst_of_short_prompts_is_prefilled_as_one_group_each_answer_as_alone(tiny_model, wide):
    """Five questions after a cached system prompt arrive while a sequence decodes: one group (padded to 8 rows)
    prefills them between two steps, and each answer is what it is alone."""
    scheduler, gate, shared, running = wide
    prompts = burst(shared, 5, 91)
    generations = [scheduler.submit(p, GREEDY) for p in prompts]
    gate.open()
    got = [tokens(g) for g in generations]
    assert scheduler.groups == 1 and [g.usage.reused_tokens for g in generations] == [40] * 5
    assert got == [alone(tiny_model, p) for p in prompts]
    assert len(tokens(running)) == 24


def test_fewer_than_four_newcomers_or_long_remainders_are_prefilled_one_by_one(tiny_model, wide):
    scheduler, gate, shared, running = wide
    few = [scheduler.submit(p, GREEDY) for p in burst(shared, 3, 93)]
    gate.open()
    assert [len(tokens(g)) for g in (*few, running)] == [24] * 4 and scheduler.groups == 0
    assert not prefill_group.fits(tiny_model, np.array([*shared, *prompt(20, 194)], np.int32))  # 20 left > 16
    assert prefill_group.fits(tiny_model, np.array([*shared, *prompt(16, 194)], np.int32))
    assert not prefill_group.fits(tiny_model, np.array([*shared, 5], np.int32))  # one left: a decode step alone
    long_prefix = prompt(250, 195)
    tiny_model.prefill([*long_prefix, 3])
    assert not prefill_group.fits(tiny_model, np.array([*long_prefix, *prompt(6, 196)], np.int32))  # > 256
    assert [prefill_group.group_size(n) for n in (3, 4, 5, 9, 16)] == [0, 4, 8, 16, 16]


def test_a_failing_group_ends_its_members_only_and_the_scheduler_keeps_serving(tiny_model, wide, monkeypatch):
    scheduler, gate, shared, running = wide

    def failing(*args):
        raise RuntimeError("no memory for the group")

    monkeypatch.setattr(tiny_model._programs, "sample_rows_after", failing)
    members = [scheduler.submit(p, GREEDY) for p in burst(shared, 4, 96)]
    gate.open()
    for generation in members:
        with pytest.raises(GenerationError, match="This sequence failed: no memory for the group"):
            tokens(generation)
    assert len(tokens(running)) == 24 and scheduler.groups == 1
    assert tokens(scheduler.submit(prompt(6, 81), GREEDY)) == alone(tiny_model, prompt(6, 81))


# ---- a batch's decode programs compiled beside the running rows -------------------------------------------------


def test_a_newcomer_that_grows_the_batch_waits_while_its_programs_compile_on_another_thread(tiny_model, monkeypatch):
    """A second sequence needs a batch of 2 rows: its decode programs compile on a thread of their own while the
    first keeps decoding (compiled on the loop thread, they would stall it ~1-2 s on the default model), and it
    joins once they are ready; both answers are what they are alone."""
    params = SamplingParams(temperature=0.0, max_tokens=480, ignore_eos=True)
    first_ids, second_ids = prompt(6, 1), prompt(9, 2)
    expected = [alone(tiny_model, ids, params) for ids in (first_ids, second_ids)]
    tiny_model.prompt_cache.clear()
    programs = tiny_model._programs
    monkeypatch.setattr(programs._jitted, "decode_ready", set())  # as in a new process (executables stay cached)
    started, release, seen = threading.Event(), threading.Event(), []
    warm = programs.warm

    def held(rows, length, *rest):
        seen.append((threading.current_thread().name, rows, length))
        started.set()
        assert release.wait(30)
        warm(rows, length, *rest)

    monkeypatch.setattr(programs, "warm", held)
    with Scheduler(tiny_model, max_batch=2) as scheduler:
        sizes: list[int] = []
        step = scheduler._batch.step
        monkeypatch.setattr(scheduler._batch, "step", lambda rows, masks: sizes.append(len(rows)) or step(rows, masks))
        first = scheduler.submit(first_ids, params)
        steps = iter(first)
        head = [next(steps).token_id for _ in range(2)]  # decoding in a batch of 1 row
        second = scheduler.submit(second_ids, params)
        assert started.wait(30)
        before = scheduler.steps
        wait_until(lambda: scheduler.steps >= before + 3)  # the running row decodes while they compile...
        assert (scheduler.active, scheduler.queued) == (1, 1)  # ...and the newcomer waits for them
        release.set()
        assert tokens(second) == expected[1]
        assert head + [s.token_id for s in steps] == expected[0]
    assert seen == [("chatflow-warm", 2, scheduling.MIN_ROW_CACHE)] and 2 in sizes
    assert scheduler.warmed == [(2, scheduling.MIN_ROW_CACHE)] and programs.decode_ready(2, scheduling.MIN_ROW_CACHE)


def test_a_warm_that_fails_leaves_the_compile_to_the_loop(tiny_model, monkeypatch):
    params = SamplingParams(temperature=0.0, max_tokens=40, ignore_eos=True)
    ids = [prompt(6, 3), prompt(7, 4)]
    expected = [alone(tiny_model, p, params) for p in ids]
    tiny_model.prompt_cache.clear()
    programs = tiny_model._programs
    monkeypatch.setattr(programs._jitted, "decode_ready", set())

    def broken(*_):
        raise MemoryError("no room to compile")

    monkeypatch.setattr(programs, "warm", broken)
    with Scheduler(tiny_model, max_batch=2) as scheduler:
        first = scheduler.submit(ids[0], params)
        steps = iter(first)
        head = [next(steps).token_id]
        second = scheduler.submit(ids[1], params)
        assert tokens(second) == expected[1] and head + [s.token_id for s in steps] == expected[0]
    assert scheduler.warmed == [] and programs.decode_ready(2, scheduling.MIN_ROW_CACHE)  # compiled on the loop


def test_the_doubled_caches_programs_are_compiled_before_a_row_reaches_the_end(tiny_model):
    """`grows_soon`: within WARM_AHEAD positions of the end of the rows' cache, while a row may still pass it (its
    budget left) and a longer cache is possible."""
    model = types.SimpleNamespace(_programs=tiny_model._programs, dtype=tiny_model.dtype,
                                  config=dataclasses.replace(tiny_model.config, context_length=2048))  # fmt: skip
    batch = scheduling._Batch(model)
    batch.resize([], 1)
    assert batch.length == scheduling.MIN_ROW_CACHE == 512
    batch.host["pos"][0] = 512 - scheduling.WARM_AHEAD - 1
    assert not batch.grows_soon(reach=2048)
    batch.host["pos"][0] = 512 - scheduling.WARM_AHEAD
    assert batch.grows_soon(reach=2048) and batch.grows_soon(reach=512)
    assert not batch.grows_soon(reach=511)  # its budget ends it before the cache's end: nothing to prepare
    batch._empty(1, 2048)  # the window's length: nothing longer to prepare
    batch.host["pos"][0] = 2040
    assert batch.length == 2048 and not batch.grows_soon(reach=4096)


def test_a_row_whose_budget_ends_before_the_caches_end_compiles_no_longer_cache(tmp_path, monkeypatch):
    """A prompt near the end of the 512-position cache with a few tokens to write: no 1,024-position programs."""
    from jupyter_chatflow import load_model
    from jupyter_chatflow.testing import TinySpec, write_tiny_gguf

    model = load_model(write_tiny_gguf(tmp_path / "w.gguf", TinySpec(context_length=1024)), dtype="float32")
    monkeypatch.setattr(model._programs._jitted, "decode_ready", set())
    warmed = []
    monkeypatch.setattr(model._programs, "warm", lambda rows, length, *_: warmed.append((rows, length)))
    ids = prompt(scheduling.MIN_ROW_CACHE - scheduling.WARM_AHEAD, 5)
    short = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    long = SamplingParams(temperature=0.0, max_tokens=2 * scheduling.WARM_AHEAD, ignore_eos=True)
    with Scheduler(model, max_batch=2) as scheduler:
        assert tokens(scheduler.submit(ids, short)) == alone(model, ids, short)
        assert warmed == []
        assert tokens(scheduler.submit(ids, long)) == alone(model, ids, long)
    assert warmed == [(1, 2 * scheduling.MIN_ROW_CACHE)]


def test_an_idle_loop_thread_ends_and_the_next_submit_starts_another(tiny_model, monkeypatch):
    """An idle scheduler holds no thread, so one nobody uses (and the model it holds) can be collected."""
    import weakref

    monkeypatch.setattr(scheduling, "IDLE_EXIT_S", 0.05)
    scheduler = Scheduler(tiny_model, max_batch=2)
    expected = alone(tiny_model, prompt(6))
    assert tokens(scheduler.submit(prompt(6), GREEDY)) == expected
    wait_until(lambda s=scheduler: s._thread is None, 10)
    assert tokens(scheduler.submit(prompt(6), GREEDY)) == expected  # served by a new loop thread
    wait_until(lambda s=scheduler: s._thread is None, 10)
    collected = weakref.ref(scheduler)
    del scheduler
    gc.collect()
    assert collected() is None


EXIT_MID_GENERATION = """
import sys
from jupyter_chatflow import SamplingParams, load_model
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
