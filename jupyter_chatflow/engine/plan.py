"""What the scheduler's loop does next, decided by a pure function: `plan(state) -> StepPlan`.

As vLLM's v1 engine (`schedule()` returns what this step runs; `EngineCore.step` is schedule -> execute -> hand
out), the loop in scheduler.py takes a snapshot of its state (`SchedulerState`: plain values, sequences by id),
asks `plan` for a `StepPlan`, runs it on the runner and hands the tokens out; then again. `plan` reads nothing
else and changes nothing, so every decision (admission, cancellation, prefill chunks, a group prefill, a decode
step, a batch resize, compiling a batch shape beside the rows) is tested on hand-made states, without a model,
a thread or a clock.

The rules, between two decode steps (a "window"):

- the sequences whose callers stopped are cancelled: off the queue, out of their prefill, out of their rows;
- prefills run up to `PREFILL_CHUNK` tokens per window, one sequence at a time in the order they came (a long
  prompt never stalls the rows for its whole prefill): at the window's start a burst of short prompts that fit a
  group (`prefill_group`) is prefilled as one chunk; otherwise the sequence in its prefill runs its next chunk, or
  the head of the queue is admitted when a row is free for it (one that waits for a prefill of its own prompt, a
  draft's prewarm, joins it: it starts from that one's keys and values);
- a newcomer that would make a batch shape whose decode programs are not compiled waits while they compile beside
  the rows (`warm`: ~1-2 s on the default model, which the rows would stall for if the loop compiled them); the
  programs of the doubled cache are compiled before a row reaches the cache's end; a first sequence (no row
  running) has its batch's decode programs compiled (or loaded: `stored.py`) beside its prefill, not after it;
- then one decode step of every row; when none waits, the running rows move up into the smallest batch that
  holds them.
"""

from __future__ import annotations

import dataclasses

from .chunks import PREFILL_CHUNK
from .prefill_group import GROUP_SIZES, WIDTH, group_size

Shape = tuple[int, int]  # a batch's (rows, positions per row): one compiled decode program each

FOR_A_PREFILL = "another sequence's prefill"
JOINED = "a prefill of its own prompt already running (a draft's prewarm): joined, its keys and values reused"
"""The head of the queue waits for a prefill that computes more of its prompt than the prompt cache holds for it
(the draft's prewarm of the message just sent): its own prefill then starts from that one's keys and values."""
FOR_A_ROW = "a free row: every row of the batch was busy"
FOR_PROGRAMS = "the decode programs of the batch it joins to compile"


@dataclasses.dataclass(frozen=True)
class Waiting:
    """A sequence in the queue, as `plan` sees it."""

    id: int
    stopped: bool = False
    groupable: bool = False
    """It may be prefilled in a group: no constraint, and 2 to `prefill_group.WIDTH` tokens past the prompt
    cache's prefix (only looked at for the sequences a window's start could group)."""
    join_length: int = 0
    """The batch length it needs to join (only looked at for the head of the queue)."""
    joins: bool = False
    """The sequence in its prefill computes more of this one's prompt than the prompt cache holds for it: waiting
    for that prefill is joining it (only looked at for the head of the queue)."""


@dataclasses.dataclass(frozen=True)
class SchedulerState:
    """A snapshot of the scheduler, taken by the loop before each plan."""

    max_batch: int
    batch_sizes: tuple[int, ...]
    """The batch sizes that may run (the smallest that holds the rows does)."""
    waiting: tuple[Waiting, ...] = ()
    filling: int | None = None
    """The sequence in its prefill."""
    rows: tuple[int | None, ...] = ()
    """The batch's rows, each a sequence id or None (a free row)."""
    stopped: frozenset[int] = frozenset()
    """The sequences in a prefill or a row whose callers stopped (cancelled, stopped iterating, dropped)."""
    spent: int = 0
    """Prefill tokens run since the last decode step."""
    length: int = 0
    """Positions per row of the batch's cache (0: no batch)."""
    grows_soon: bool = False
    """A row will reach the end of the cache within `batch.WARM_AHEAD` steps, and it can double."""
    ready: frozenset[Shape] = frozenset()
    """The batch shapes whose decode programs are compiled."""
    warm_started: frozenset[Shape] = frozenset()
    """The batch shapes a warm was started for (compiling now, done, or failed: never started twice)."""
    warming: frozenset[Shape] = frozenset()
    """The batch shapes compiling now beside the rows."""


@dataclasses.dataclass(frozen=True)
class StepPlan:
    """What the loop runs next, in this order: `cancel`, `warm`, `wait_reason`, `resize`, then one of `group`,
    `admit` + `prefill`, `prefill`, `decode` (or nothing: `idle`)."""

    cancel: tuple[int, ...] = ()
    """End these sequences as cancelled: off the queue, out of their prefill, out of their rows (kept)."""
    warm: tuple[Shape, ...] = ()
    """Start compiling these batch shapes' decode programs, beside the rows."""
    wait_reason: str = ""
    """Why the head of the queue is not admitted now ("": it is, or no new reason)."""
    resize: int | None = None
    """Move the running rows into a batch of this many rows (0: no batch)."""
    group: tuple[int, ...] = ()
    """Prefill these waiting sequences together, as one chunk (`prefill_group`); each then takes a row."""
    admit: int | None = None
    """Take this waiting sequence (the head of the queue) into its prefill."""
    prefill: bool = False
    """Run the next chunk of the sequence in its prefill (after its last, it takes a row)."""
    decode: bool = False
    """Run one decode step of every row (none: only the window ends) and hand each row's token out."""

    @property
    def idle(self) -> bool:
        """Nothing to run: the loop waits for a submit."""
        return not (self.cancel or self.warm or self.resize is not None or self.group or self.admit is not None
                    or self.prefill or self.decode)  # fmt: skip


def batch_size(rows: int, sizes: tuple[int, ...]) -> int:
    """The smallest of `sizes` (ascending, the largest max_batch) that holds `rows` rows (at most the largest)."""
    return next(s for s in sizes if s >= min(rows, sizes[-1]))


def plan(state: SchedulerState) -> StepPlan:
    """The next step of the loop in `state` (see the module's rules)."""
    cancel = _stopped(state)
    state = _without(state, frozenset(cancel))
    active = sum(r is not None for r in state.rows)
    if not (state.waiting or state.filling is not None or active):
        resize = 0 if state.rows else None
        return StepPlan(cancel=cancel, resize=resize)
    warm, held = _compiles(state, active)
    reason = FOR_PROGRAMS if held else ""
    if not held and state.spent < PREFILL_CHUNK:
        group = _group(state, active)
        if group:
            return StepPlan(cancel=cancel, warm=warm, group=group)
        reason = _head_waits(state, active)
        if state.filling is not None:
            return StepPlan(cancel=cancel, warm=warm, wait_reason=reason, prefill=True)
        if state.waiting and not reason:
            return StepPlan(cancel=cancel, warm=warm, admit=state.waiting[0].id, prefill=True)
    return StepPlan(cancel=cancel, warm=warm, wait_reason=reason, resize=_shrink(state, active), decode=True)


def _stopped(state: SchedulerState) -> tuple[int, ...]:
    """The sequences to cancel: stopped ones in the queue, the prefill, or a row."""
    waiting = [w.id for w in state.waiting if w.stopped]
    others = [i for i in (state.filling, *state.rows) if i is not None and i in state.stopped]
    return (*waiting, *others)


def _without(state: SchedulerState, cancelled: frozenset[int]) -> SchedulerState:
    """`state` once the cancelled sequences are gone (their rows free)."""
    if not cancelled:
        return state
    return dataclasses.replace(
        state,
        waiting=tuple(w for w in state.waiting if w.id not in cancelled),
        filling=None if state.filling in cancelled else state.filling,
        rows=tuple(None if r in cancelled else r for r in state.rows),
    )


def _compiles(state: SchedulerState, active: int) -> tuple[tuple[Shape, ...], bool]:
    """(the shapes to start compiling, whether the head of the queue waits for a compile). The doubled cache's
    programs are compiled before a row reaches the end; a newcomer waits while the batch it would make compiles
    beside running rows (with no row running, nobody waits for it: the loop compiles it on the way)."""
    warm: list[Shape] = []
    doubled = (len(state.rows), 2 * state.length)
    if state.grows_soon and active and _startable(state, doubled):
        warm.append(doubled)
    if not active and state.waiting and state.filling is None:  # a first sequence: its decode step compiles
        first = (batch_size(1, state.batch_sizes), max(state.length, state.waiting[0].join_length))
        if _startable(state, first):  # beside its prefill, not after it (loaded from disk: beside it too)
            warm.append(first)
    if not active or not state.waiting:
        return tuple(warm), False
    if (len(state.rows), state.length) not in state.ready:
        return tuple(warm), True  # the running batch's first step compiles its own programs: one compile at a time
    rows = len(state.rows) if None in state.rows else batch_size(active + len(state.waiting), state.batch_sizes)
    shape = (rows, max(state.length, state.waiting[0].join_length))
    if _startable(state, shape) and shape not in warm:
        warm.append(shape)
    held = shape not in state.ready and (shape in warm or shape in state.warming)  # (a failed warm: not held)
    return tuple(warm), held


def _startable(state: SchedulerState, shape: Shape) -> bool:
    return shape not in state.ready and shape not in state.warm_started


def _group(state: SchedulerState, active: int) -> tuple[int, ...]:
    """The waiting sequences to prefill together at a window's start: those that fit a group among as many from the
    head as there are free rows, when they make one (at least `GROUP_SIZES[0]`); else none."""
    if state.spent or state.filling is not None:
        return ()
    head = state.waiting[: max(0, state.max_batch - active)]
    members = tuple(w.id for w in head if w.groupable)[: GROUP_SIZES[-1]]
    return members if group_size(len(members)) else ()


def group_cost(members: int) -> int:
    """The prefill tokens a group of `members` counts against the window (one narrow chunk each)."""
    return members * WIDTH


def _head_waits(state: SchedulerState, active: int) -> str:
    """Why the head of the queue cannot start its prefill now ("": it can, or nobody waits)."""
    if not state.waiting:
        return ""
    if state.filling is not None:
        return JOINED if state.waiting[0].joins else FOR_A_PREFILL
    if active >= state.max_batch:
        return FOR_A_ROW
    return ""


def _shrink(state: SchedulerState, active: int) -> int | None:
    """The smaller batch the running rows move up into, when one holds them and no sequence is on its way in."""
    if state.waiting or state.filling is not None or not state.rows:
        return None
    size = batch_size(active, state.batch_sizes) if active else 0
    return size if size < len(state.rows) else None
