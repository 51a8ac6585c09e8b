"""The scheduler's loop, one step at a time on a fake runner: no model, no loop thread, no gate, no sleep.

`Scheduler(..., runner=FakeRunner(), background=False)` runs nothing until the test calls `step()`; each step plans
(plan.py) and runs the plan on the fake, which records every call and gives each sequence the tokens
`token_at(prompt, position)`: what a sequence gets alone.
"""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

from jupyter_chatflow import GenerationError, SamplingParams
from jupyter_chatflow.engine.chunks import PREFILL_CHUNK
from jupyter_chatflow.engine.plan import FOR_A_PREFILL, FOR_A_ROW, FOR_PROGRAMS, JOINED
from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.engine.submission import Submission

from .fake_runner import FakeRunner, token_at
from .test_constraint import Allow

GREEDY = SamplingParams(temperature=0.0, max_tokens=6, ignore_eos=True)


def prompt(n: int, seed: int = 0) -> list[int]:
    return np.random.default_rng(seed).integers(3, 250, n).tolist()


def alone(ids: list[int], n: int = 6) -> list[int]:
    return [token_at(ids, len(ids) + i) for i in range(n)]


def drain(scheduler: Scheduler) -> list:
    """Step until there is nothing left to do; the plans run."""
    plans = []
    while not (todo := scheduler.step()).idle:
        plans.append(todo)
    return plans


def tokens(generation) -> list[int]:
    return [s.token_id for s in generation]


@pytest.fixture
def fake():
    runner = FakeRunner()
    runner.ready |= {(n, 512) for n in (1, 2, 4)}
    return runner


@pytest.fixture
def scheduler(tiny_model, fake):
    with Scheduler(tiny_model, max_batch=4, runner=fake, background=False) as s:
        yield s


def test_every_sequence_gets_its_own_tokens_and_no_more_rows_than_max_batch(tiny_model, fake):
    prompts = [prompt(5 + 3 * i, i) for i in range(5)]
    with Scheduler(tiny_model, max_batch=2, runner=fake, background=False) as scheduler:
        generations = [scheduler.submit(p, GREEDY) for p in prompts]
        busiest = 0
        while not scheduler.step().idle:
            busiest = max(busiest, scheduler.active)
        assert [tokens(g) for g in generations] == [alone(p) for p in prompts]
    assert busiest == 2 and scheduler.batch_sizes == (1, 2) and scheduler.nbytes == 0
    assert all(g.finish_reason == "length" and g.usage.completion_tokens == 6 for g in generations)


def test_each_decode_step_gives_every_busy_row_one_token(scheduler, fake):
    """Fairness: rows that joined at different steps each get one token per step, none skipped or stepped twice."""
    prompts = [prompt(4 + 20 * i, 30 + i) for i in range(3)]
    generations = [scheduler.submit(p, GREEDY) for p in prompts]
    drain(scheduler)
    busy_rows = [call[1] for call in fake.calls if call[0] == "decode"]
    assert sum(busy_rows) == 3 * (GREEDY.max_tokens - 1)  # every token but each first (its prefill's)
    assert [tokens(g) for g in generations] == [alone(p) for p in prompts]


def test_a_long_prompt_is_prefilled_a_wide_chunk_per_step_between_the_running_rows_decode_steps(scheduler, fake):
    running = scheduler.submit(prompt(5, 1), SamplingParams(temperature=0.0, max_tokens=40, ignore_eos=True))
    while scheduler.active == 0:
        scheduler.step()
    fake.calls.clear()
    late = scheduler.submit(prompt(PREFILL_CHUNK * 2 + 50, 2), GREEDY)
    while scheduler.active < 2:
        scheduler.step()
    kinds = [c[0] if c[0] != "chunk" else f"chunk {c[2]}" for c in fake.calls if c[0] in ("chunk", "decode")]
    assert kinds == ["chunk 128", "decode", "chunk 128", "decode", "chunk 64"]  # (its 50-token tail: one middle chunk)
    drain(scheduler)
    assert tokens(late) == alone(prompt(PREFILL_CHUNK * 2 + 50, 2)) and len(tokens(running)) == 40


@pytest.mark.parametrize("how", ["break", "close", "drop", "cancel"])
def test_a_caller_that_lets_go_frees_its_row_before_the_next_decode_step(scheduler, fake, how):
    kept = scheduler.submit(prompt(6, 5), GREEDY)
    stopping = scheduler.submit(prompt(9, 6), SamplingParams(temperature=0.0, max_tokens=300, ignore_eos=True))
    while scheduler.active < 2:
        scheduler.step()
    steps = iter(stopping)
    if how == "break":  # reads the first token (its prefill's), then lets go of the iterator
        for step in steps:  # noqa: B007 (the step read is checked below)
            break
        del steps
    else:
        step = next(steps)
    assert step.token_id == alone(prompt(9, 6))[0]
    if how == "close":
        steps.close()
    elif how == "drop":
        del steps, stopping
        gc.collect()
    else:
        stopping.cancel()
    todo = scheduler.step()
    assert len(todo.cancel) == 1 and todo.decode and scheduler.active == 1
    assert fake.kept[-1][:9] == prompt(9, 6)  # its keys/values went to the prompt cache
    drain(scheduler)
    assert tokens(kept) == alone(prompt(6, 5))


def test_the_callers_cancel_event_ends_its_sequence_only(scheduler):
    cancel = threading.Event()
    stopped = scheduler.submit(prompt(7, 7), SamplingParams(temperature=0.0, max_tokens=300), cancel=cancel)
    other = scheduler.submit(prompt(7, 8), GREEDY)
    for _ in range(4):
        scheduler.step()
    cancel.set()
    drain(scheduler)
    assert len(tokens(stopped)) < 300 and stopped.finish_reason == "cancelled"
    assert tokens(other) == alone(prompt(7, 8))


def test_a_sequence_queued_behind_a_full_batch_is_told_it_waits_for_a_row(tiny_model, fake):
    with Scheduler(tiny_model, max_batch=1, runner=fake, background=False) as scheduler:
        first, second = scheduler.submit(prompt(5, 80), GREEDY), scheduler.submit(prompt(5, 81), GREEDY)
        plans = drain(scheduler)
        assert [tokens(first), tokens(second)] == [alone(prompt(5, 80)), alone(prompt(5, 81))]
    waits = [p.wait_reason for p in plans if p.decode]
    assert waits[:5] == [FOR_A_ROW] * 5  # the first's five decode steps; then it leaves and the second goes in


def test_waiting_for_a_row_counts_as_queue_time_not_prefill_time():
    sequence = Submission(np.array([1, 2]), GREEDY, None, 6, frozenset(), None)
    sequence.read_from, sequence.admitted, sequence.waited_for = 10.0, 10.3, FOR_A_ROW
    assert sequence.queue_ms() == pytest.approx(300) and sequence.queue_reason() == FOR_A_ROW
    sequence.admitted = 9.0  # read only after its prefill began: no wait
    assert sequence.queue_ms() == 0.0 and sequence.queue_reason() == ""


def test_a_closed_scheduler_ends_running_and_waiting_sequences_and_refuses_new_ones(tiny_model, fake):
    scheduler = Scheduler(tiny_model, max_batch=1, runner=fake, background=False)
    running, waiting = scheduler.submit(prompt(5, 70), GREEDY), scheduler.submit(prompt(5, 71), GREEDY)
    scheduler.step()  # the first is prefilled and takes the row (its first token is out)
    scheduler.close()
    assert len(tokens(running)) == 1 and running.finish_reason == "cancelled"
    assert tokens(waiting) == [] and waiting.finish_reason == "cancelled"
    with pytest.raises(GenerationError, match="closed"):
        scheduler.submit(prompt(5, 72), GREEDY)


def test_a_failed_step_ends_its_batch_with_the_error_and_the_scheduler_serves_on(scheduler, fake):
    failed = scheduler.submit(prompt(6, 80), GREEDY)
    for _ in range(3):
        scheduler.step()
    fake.fail_steps.append(RuntimeError("boom"))
    drain(scheduler)
    with pytest.raises(GenerationError, match="boom"):
        tokens(failed)
    assert failed.finish_reason == "cancelled" and failed.usage.completion_tokens == 3
    after = scheduler.submit(prompt(6, 81), GREEDY)
    drain(scheduler)
    assert tokens(after) == alone(prompt(6, 81))


def test_a_newcomer_that_grows_the_batch_waits_while_the_rows_decode_and_its_programs_compile(tiny_model):
    fake = FakeRunner()
    fake.ready.add((1, 512))
    with Scheduler(tiny_model, max_batch=2, runner=fake, background=False) as scheduler:
        first = scheduler.submit(prompt(6, 1), SamplingParams(temperature=0.0, max_tokens=40, ignore_eos=True))
        scheduler.step()
        second = scheduler.submit(prompt(9, 2), GREEDY)
        plans = [scheduler.step() for _ in range(5)]
        assert plans[0].warm == ((2, 512),) and all(p.wait_reason == FOR_PROGRAMS and p.decode for p in plans)
        assert (scheduler.active, scheduler.queued) == (1, 1) and [w[0] for w in fake.warms] == [(2, 512)]
        fake.finish_warms()
        assert scheduler.step().admit is not None and scheduler.active == 2
        drain(scheduler)
    assert scheduler.warmed == [(2, 512)]
    assert tokens(second) == alone(prompt(9, 2)) and len(tokens(first)) == 40


def test_a_warm_that_fails_leaves_the_compile_to_the_loop(tiny_model):
    fake = FakeRunner()
    fake.ready.add((1, 512))
    with Scheduler(tiny_model, max_batch=2, runner=fake, background=False) as scheduler:
        first = scheduler.submit(prompt(6, 3), SamplingParams(temperature=0.0, max_tokens=40, ignore_eos=True))
        scheduler.step()
        second = scheduler.submit(prompt(7, 4), GREEDY)
        scheduler.step()
        fake.finish_warms(compiled=False)
        assert scheduler.step().admit is not None  # not held any more: its first step compiles them
        drain(scheduler)
    assert scheduler.warmed == [] and ("decode", 2, 2, 512) in fake.calls
    assert tokens(second) == alone(prompt(7, 4)) and len(tokens(first)) == 40


def test_the_doubled_caches_programs_are_warmed_before_a_row_reaches_the_end(scheduler, fake):
    long = SamplingParams(temperature=0.0, max_tokens=600, ignore_eos=True)
    generation = scheduler.submit(prompt(10, 9), long)
    drain(scheduler)
    assert fake.calls.index(("warm", 1, 1024)) < fake.calls.index(("decode", 1, 1, 1024))
    assert tokens(generation) == alone(prompt(10, 9), 600)


def test_a_burst_of_short_prompts_is_prefilled_as_one_group(tiny_model):
    fake = FakeRunner(groupable=lambda p: p.size < 20)
    fake.ready |= {(n, 512) for n in (1, 2, 8)}
    with Scheduler(tiny_model, max_batch=8, runner=fake, background=False) as scheduler:
        running = scheduler.submit(prompt(30, 99), GREEDY)
        while not scheduler.step().decode:  # its prefill, then a decode step: a window starts
            pass
        burst = [scheduler.submit(prompt(6 + i, 91 + i), GREEDY) for i in range(5)]
        todo = scheduler.step()
        assert len(todo.group) == 5 and scheduler.groups == 1 and scheduler.active == 6
        drain(scheduler)
    assert [tokens(g) for g in burst] == [alone(prompt(6 + i, 91 + i)) for i in range(5)]
    assert tokens(running) == alone(prompt(30, 99))


@pytest.mark.parametrize("fail_at", [1, 3], ids=["in its prefill", "mid-decode"])
def test_a_failing_constraint_ends_its_own_sequence_only(scheduler, fail_at):
    class Failing(Allow):
        asked = 0

        def allowed(self):
            self.asked += 1
            if self.asked == fail_at:
                raise ValueError("the grammar broke")
            return self.mask

    failing = scheduler.submit(prompt(8, 101), GREEDY, Failing(320, list(range(40, 60)), length=100))
    other = scheduler.submit(prompt(8, 100), GREEDY)
    drain(scheduler)
    with pytest.raises(GenerationError, match="This sequence failed: the grammar broke"):
        tokens(failing)
    assert tokens(other) == alone(prompt(8, 100))


def test_a_sequence_sent_while_a_prefill_of_its_prompt_runs_joins_it(scheduler, fake):
    """A draft's prewarm (one token) prefills a long paste; the turn that sends it comes meanwhile and waits for that
    prefill as a join; another prompt, or one the prompt cache holds as much of already, waits for it plainly."""
    paste = prompt(3 * PREFILL_CHUNK, 5)
    one_token = SamplingParams(temperature=0.0, max_tokens=1)
    prewarm = scheduler.submit(paste, one_token)
    assert scheduler.step().admit is not None  # its first chunk
    turn = scheduler.submit(paste, GREEDY)
    assert reasons(scheduler) == {JOINED}
    drain(scheduler)
    assert tokens(prewarm) == alone(paste, 1) and tokens(turn) == alone(paste)
    fake.kept.append(paste)  # the prompt cache holds it all now: a prefill of it again gives nothing more
    again = [scheduler.submit(paste, one_token)]
    scheduler.step()
    again.append(scheduler.submit(paste, GREEDY))
    assert reasons(scheduler) == {FOR_A_PREFILL}
    drain(scheduler)
    others = [scheduler.submit(prompt(3 * PREFILL_CHUNK, 6), one_token)]
    scheduler.step()
    others.append(scheduler.submit(prompt(3 * PREFILL_CHUNK, 7), GREEDY))
    assert reasons(scheduler) == {FOR_A_PREFILL}
    drain(scheduler)
    assert [len(tokens(g)) for g in [*again, *others]] == [1, 6, 1, 6]


def reasons(scheduler: Scheduler, steps: int = 4) -> set[str]:
    """Why the head of the queue waited over the next `steps` steps."""
    return {reason for _ in range(steps) if (reason := scheduler.step().wait_reason)}
