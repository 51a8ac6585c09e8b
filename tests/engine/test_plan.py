"""The scheduler's decisions as a pure function: hand-made states in, a `StepPlan` out (no model, thread or clock)."""

from __future__ import annotations

import dataclasses

from jupyter_chatflow.engine.chunks import PREFILL_CHUNK
from jupyter_chatflow.engine.plan import (
    FOR_A_PREFILL,
    FOR_A_ROW,
    FOR_PROGRAMS,
    JOINED,
    SchedulerState,
    StepPlan,
    Waiting,
    batch_size,
    plan,
)

SIZES = (1, 2, 8)
READY = frozenset({(1, 512), (2, 512), (8, 512)})


def state(**fields) -> SchedulerState:
    """A scheduler of 8 rows at most, every batch of 512 positions compiled, unless `fields` say otherwise."""
    return SchedulerState(**{"max_batch": 8, "batch_sizes": SIZES, "ready": READY, **fields})


def queue(*ids: int, **fields) -> tuple[Waiting, ...]:
    return tuple(Waiting(id=i, join_length=512, **fields) for i in ids)


def test_nothing_to_do_is_idle_and_an_empty_batch_is_let_go():
    assert plan(state()).idle
    assert plan(state(rows=(None, None), length=512)) == StepPlan(resize=0)


def test_the_head_of_the_queue_is_admitted_first_and_its_first_chunk_runs():
    assert plan(state(waiting=queue(7, 8, 9))) == StepPlan(admit=7, prefill=True)


def test_one_prefill_at_a_time_the_next_one_waits_for_it():
    todo = plan(state(waiting=queue(8), filling=7, rows=(3,), length=512))
    assert todo == StepPlan(prefill=True, wait_reason=FOR_A_PREFILL)


def test_one_that_waits_for_a_prefill_of_its_own_prompt_joins_it():
    """A turn sent while its draft's prewarm prefills the same prompt: it waits for that prefill as a join."""
    todo = plan(state(waiting=queue(8, joins=True), filling=7))
    assert todo == StepPlan(prefill=True, wait_reason=JOINED)


def test_prefills_stop_for_the_window_once_a_wide_chunk_is_spent_and_the_rows_decode():
    """A long prompt never stalls the running rows for its whole prefill: PREFILL_CHUNK tokens per window."""
    running = state(filling=7, rows=(3, 4), length=512)
    assert plan(dataclasses.replace(running, spent=PREFILL_CHUNK - 16)).prefill
    assert plan(dataclasses.replace(running, spent=PREFILL_CHUNK)) == StepPlan(decode=True)


def test_without_running_rows_the_window_ends_with_an_empty_decode():
    assert plan(state(filling=7, spent=PREFILL_CHUNK)) == StepPlan(decode=True)


def test_a_full_batch_keeps_the_queue_waiting_for_a_row():
    full = state(waiting=queue(9), rows=tuple(range(8)), length=512)
    assert plan(full) == StepPlan(decode=True, wait_reason=FOR_A_ROW)
    assert plan(dataclasses.replace(full, rows=(*range(7), None))).admit == 9  # a row left: it goes in


def test_stopped_callers_are_cancelled_wherever_they_are():
    waiting = (*queue(5), Waiting(id=6, stopped=True))
    todo = plan(state(waiting=waiting, filling=4, rows=(1, 2), length=512, stopped=frozenset({2, 4})))
    assert set(todo.cancel) == {6, 4, 2}
    assert todo.admit == 5 and todo.prefill  # the prefill's sequence left: the next one starts at once
    assert plan(state(rows=(1,), length=512, stopped=frozenset({1}))) == StepPlan(cancel=(1,), resize=0)


def test_a_burst_of_short_prompts_is_prefilled_as_one_group_at_the_window_start():
    burst = queue(*range(10, 15), groupable=True)
    assert plan(state(waiting=burst, rows=(1,), length=512)) == StepPlan(group=tuple(range(10, 15)))
    assert not plan(state(waiting=burst, rows=(1,), length=512, spent=16)).group  # mid-window: one by one
    assert not plan(state(waiting=burst[:3], rows=(1,), length=512)).group  # fewer than four: one by one
    mixed = (*queue(20), *queue(21, 22, 23, 24, groupable=True))
    assert plan(state(waiting=mixed, rows=(1,), length=512)).group == (21, 22, 23, 24)  # the others go alone, next


def test_a_group_takes_no_more_members_than_free_rows():
    burst = queue(*range(10, 20), groupable=True)
    assert plan(state(waiting=burst, rows=(1, 2, 3, 4, None, None, None, None), length=512)).group == (10, 11, 12, 13)
    assert not plan(state(waiting=burst, rows=(*range(6), None, None), length=512)).group  # two free rows: no group


def test_a_newcomer_that_grows_the_batch_waits_while_its_programs_compile_beside_the_rows():
    compiled = frozenset({(1, 512)})
    waiting = state(waiting=queue(9), rows=(1,), length=512, ready=compiled)
    todo = plan(waiting)
    assert todo == StepPlan(warm=((2, 512),), wait_reason=FOR_PROGRAMS, decode=True)
    compiling = dataclasses.replace(waiting, warm_started=frozenset({(2, 512)}), warming=frozenset({(2, 512)}))
    assert plan(compiling) == StepPlan(wait_reason=FOR_PROGRAMS, decode=True)  # the rows go on decoding
    compiled_now = dataclasses.replace(compiling, warming=frozenset(), ready=compiled | {(2, 512)})
    assert plan(compiled_now).admit == 9
    failed = dataclasses.replace(compiling, warming=frozenset())  # it failed: the loop compiles it on the way
    assert plan(failed).admit == 9 and not plan(failed).warm


def test_nobody_waits_for_a_compile_when_no_row_runs_and_the_first_rows_decode_compiles_beside_its_prefill():
    first = state(waiting=queue(9), ready=frozenset())
    shape = (1, max(first.length, first.waiting[0].join_length))
    assert plan(first) == StepPlan(warm=(shape,), admit=9, prefill=True)
    started = dataclasses.replace(first, warm_started=frozenset({shape}), warming=frozenset({shape}))
    assert plan(started) == StepPlan(admit=9, prefill=True)  # (started once; the prefill does not wait for it)
    assert plan(dataclasses.replace(first, ready=frozenset({shape}))) == StepPlan(admit=9, prefill=True)


def test_a_running_batch_compiling_its_own_first_step_holds_the_queue_without_a_second_compile():
    todo = plan(state(waiting=queue(9), rows=(1, None), length=512, ready=frozenset({(1, 512)})))
    assert todo == StepPlan(wait_reason=FOR_PROGRAMS, decode=True)


def test_a_newcomer_with_a_long_prompt_waits_for_the_longer_caches_programs():
    todo = plan(state(waiting=(Waiting(id=9, join_length=1024),), rows=(1, None), length=512))
    assert todo.warm == ((2, 1024),) and todo.wait_reason == FOR_PROGRAMS


def test_the_doubled_caches_programs_compile_before_a_row_reaches_the_end():
    near = state(rows=(1, 2), length=512, grows_soon=True)
    assert plan(near) == StepPlan(warm=((2, 1024),), decode=True)
    assert plan(dataclasses.replace(near, warm_started=frozenset({(2, 1024)}))) == StepPlan(decode=True)


def test_when_none_waits_the_rows_move_up_into_the_smallest_batch_that_holds_them():
    assert plan(state(rows=(None, 4, None, None, 5, None, None, None), length=512)).resize == 2
    assert plan(state(rows=(None, 4), length=512)).resize == 1
    assert plan(state(waiting=queue(9), rows=(None, 4), length=512)).resize is None  # one is on its way in


def test_batch_sizes_are_the_smallest_that_hold_the_rows_and_never_past_max_batch():
    assert [batch_size(n, SIZES) for n in (1, 2, 3, 8, 12)] == [1, 2, 8, 8, 8]
