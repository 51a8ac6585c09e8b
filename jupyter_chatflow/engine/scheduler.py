"""Continuous batching: one loop decodes every submitted sequence at once, one row of a batch each.

On XLA:CPU a decode step's time grows far slower than its batch (the weights are read once per step whatever the
batch), so sequences decoded together make more tokens per second in all. Callers `submit` a prompt and iterate
the `Generation` they get back, as they would `Model.generate`'s.

The loop is schedule -> execute -> hand out, as vLLM's v1 engine core: `step()` takes a snapshot of the queue,
the prefill and the rows (`SchedulerState`), asks the pure `plan.plan` what to run (`StepPlan`), runs it on the
model's `Runner` and puts each token in its sequence's queue. `plan.py` holds every decision and its rules; this
module carries them out. A thread of its own runs `step()` while there is work (`background=False`: the caller
does, e.g. a test, one step at a time). A newcomer is prefilled alone from the prompt cache's longest prefix, or in
a group (`prefill_group.py`), then copied into its row; a leaving one's keys/values go back to the prompt cache.
So each sequence's greedy output is its own alone.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections import deque
from collections.abc import Sequence

import numpy as np

from jupyter_chatflow.errors import GenerationError
from jupyter_chatflow.model.compile_clock import compile_seconds

from .batch import kept_length
from .chunks import MIN_CACHE
from .constraint import Constraint
from .generation import Generation, RawStep
from .loop import LoopThread
from .model import Model
from .plan import SchedulerState, Shape, StepPlan, Waiting, batch_size, group_cost, plan
from .prompt_cache import shared_prefix
from .run import raw_step
from .runner import Runner
from .sampling import SamplingParams
from .submission import CLOSED, OwnError, Submission

# The batches compiled (and max_batch); the smallest that holds the rows runs. The default model's decode step on
# this 2-core CPU at batch 1/2/4/8/16 took 32/60/70/85/130 ms (best of 30, the machine shared): two rows run best
# at 2, three or four padded to 8 lose ~20% against 4, and each compiled decode program holds ~53 MiB (XLA:CPU).
BATCH_SIZES = (1, 2, 8, 16)
MIN_ROW_CACHE = MIN_CACHE  # positions per row at least: the length `Model.generate` starts from (one program)

_LIVE: weakref.WeakSet[Scheduler] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """At exit, before the interpreter stops its daemon threads: end every scheduler's loop and compiles. (A daemon
    thread stopped inside an XLA call, a title still being written, aborts the process: "exception not rethrown".)"""
    for scheduler in list(_LIVE):
        scheduler.close()


class Scheduler:
    """Decodes many sequences together on one model; `submit` returns a `Generation` to iterate.

    >>> scheduler = Scheduler(model, max_batch=8)
    >>> answers = [scheduler.submit(ids, SamplingParams(temperature=0.0, max_tokens=64)) for ids in prompts]
    >>> texts = [[step.text for step in answer] for answer in answers]  # from any threads, in any order
    >>> scheduler.close()

    No lock is held while a caller iterates: a caller may stop at any step (break, close, or drop the
    generation), and its row is free before the next decode step. `runner` is the model's unless given (a test's
    fake); with `background=False` no thread runs the loop: call `step()`.
    """

    def __init__(self, model: Model, max_batch: int = 8, *, runner: Runner | None = None, background: bool = True):
        if max_batch < 1:
            raise GenerationError(f"max_batch must be at least 1; got {max_batch}")
        self.model = model
        self.runner = model.runner if runner is None else runner
        self.max_batch = max_batch
        self.batch_sizes = tuple(sorted({s for s in BATCH_SIZES if s < max_batch} | {max_batch}))
        self._waiting: deque[Submission] = deque()
        self._filling: Submission | None = None  # the sequence in its prefill
        self._rows: list[Submission | None] = []  # one per row of the batch; None is a free (padding) row
        self._batch = self.runner.batch()
        self._spent = 0  # prefill tokens since the last decode step
        self._work = threading.Condition()
        self._background = background
        self._loop = LoopThread(self.step, self._has_work, self._end_all, self._work)
        self.steps = 0
        """Decode steps run so far (each advanced every row)."""
        self.groups = 0
        """Groups of newcomers prefilled together so far (`prefill_group`)."""
        self.warmed: list[Shape] = []
        """(rows, cache length) of each batch whose decode programs were compiled beside a running batch."""
        self._warming: dict[Shape, bool] = {}  # each shape a compile was started for: whether it still runs
        self._compiles: list[threading.Thread | None] = []  # their threads
        _LIVE.add(self)

    def submit(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams | None = None,
        constraint: Constraint | None = None,
        cancel: threading.Event | None = None,
    ) -> Generation:
        """Queue a sequence; iterate the result for its `Step`s (as `Model.generate`'s, `params` its knobs)."""
        params = SamplingParams() if params is None else params
        prompt = self.runner.check_prompt(prompt_ids)
        stop_ids = frozenset() if params.ignore_eos else self.model.tokenizer.stop_ids
        sequence = Submission(prompt, params, constraint, self.runner.budget(prompt, params), stop_ids, cancel)
        done = (lambda: sequence.done_read) if constraint is not None else None
        generation = self.model.generation(sequence.steps, prompt, params, cancel, done)
        weakref.finalize(generation, sequence.closed.set)  # dropped without being iterated to the end
        with self._work:
            if self._loop.closing:
                raise GenerationError("This scheduler is closed: make a new one.")
            self._waiting.append(sequence)
            if self._background:
                self._loop.wake()
        return generation

    @property
    def active(self) -> int:
        """Sequences decoding now (each in a row of the batch)."""
        return sum(s is not None for s in self._rows)

    @property
    def queued(self) -> int:
        """Sequences waiting for a row or in their prefill."""
        return len(self._waiting) + (self._filling is not None)

    @property
    def nbytes(self) -> int:
        """Device memory of the rows' KV cache now (0 while nothing runs)."""
        return self._batch.nbytes

    def rest(self) -> None:
        """Let the loop thread end as soon as it is idle (a chat moved to another model: this one, its KV and prompt
        caches can be collected now rather than `IDLE_EXIT_S` later). A later submit starts it again."""
        with self._work:
            self._loop.rest()

    def close(self) -> None:
        """Stop the loop (after its current step) and wait for any compile on a thread of its own; every unfinished
        sequence ends as cancelled."""
        with self._work:
            loop, threads = self._loop.close(), list(self._compiles)
        if loop is None:
            self._end_all()
        for thread in [loop, *threads]:
            if thread is not None and thread is not threading.current_thread():
                thread.join()

    @property
    def closed(self) -> bool:
        """`close()` was called: `submit` raises."""
        return self._loop.closing

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- one step: schedule -> execute -> hand out -----------------------------------------------------------------

    def step(self) -> StepPlan:
        """Plan the next step from a snapshot of the state and run it; returns the plan (`idle`: there was nothing
        to do). A program that fails ends the sequences it ran for, and the loop serves on."""
        with self._work:
            state = self.state()
        todo = plan(state)
        try:
            self._execute(todo)
        except Exception as error:  # a failed program: end what ran, keep serving the rest
            self._fail(error)
        return todo

    def state(self) -> SchedulerState:
        """A snapshot of the queue, the prefill and the rows, as `plan` takes it."""
        running, active = self._running(), self.active
        grouping = not self._spent and self._filling is None
        window = max(0, self.max_batch - active) if grouping else 0
        waiting = tuple(
            Waiting(id=s.id, stopped=s.stopped(), join_length=self._batch.length_for(s.prompt.size) if i == 0 else 0,
                    groupable=i < window and s.constraint is None and self.runner.fits_group(s.prompt),
                    joins=i == 0 and self._joins(s))
            for i, s in enumerate(self._waiting)
        )  # fmt: skip
        reach = max((s.reach(int(self._batch.positions()[s.row])) for s in running), default=0)
        return SchedulerState(
            max_batch=self.max_batch, batch_sizes=self.batch_sizes, waiting=waiting,
            filling=None if self._filling is None else self._filling.id,
            rows=tuple(None if s is None else s.id for s in self._rows),
            stopped=frozenset(s.id for s in [*running, *self._pending()] if s.stopped()),
            spent=self._spent, length=self._batch.length,
            grows_soon=bool(running) and self._batch.grows_soon(reach),
            ready=self._ready(waiting[0].join_length if waiting else 0),
            warm_started=frozenset(self._warming), warming=frozenset(k for k, busy in self._warming.items() if busy),
        )  # fmt: skip

    def _joins(self, sequence: Submission) -> bool:
        """Whether the sequence in its prefill computes more of `sequence`'s prompt than the prompt cache holds for
        it (its keys and values are lent to the prompt cache when its prefill ends: `sequence` starts from them)."""
        filling = self._filling
        if filling is None:
            return False
        ahead = min(shared_prefix(filling.prompt, sequence.prompt), sequence.prompt.size - 1)
        return ahead > self.runner.shared_prefix(sequence.prompt)

    def _ready(self, join_length: int) -> frozenset[Shape]:
        """Which of the batch shapes a plan may ask about have their decode programs compiled."""
        length = self._batch.length
        sizes, lengths = {len(self._rows), *self.batch_sizes}, {length, 2 * length, max(length, join_length)}
        return frozenset((n, t) for n in sizes for t in lengths if t and self.runner.decode_ready(n, t))

    def _execute(self, todo: StepPlan) -> None:
        for sequence_id in todo.cancel:
            self._cancel(sequence_id)
        for shape in todo.warm:
            self._warm(shape)
        if todo.wait_reason and self._waiting:
            self._waiting[0].waited_for = todo.wait_reason
        if todo.resize is not None:
            self._resize([s.row for s in self._running()], todo.resize)
        if todo.group:
            self._prefill_group(todo.group)
        if todo.admit is not None:
            self._admit(todo.admit)
        if todo.prefill:
            self._prefill_chunk()
        if todo.decode:
            self._decode()

    def _cancel(self, sequence_id: int) -> None:
        """End a sequence whose caller stopped: off the queue, out of its prefill, or out of its row."""
        sequence = next((s for s in [*self._pending(), *self._running()] if s.id == sequence_id), None)
        if sequence is None:
            with self._work:
                sequence = next(s for s in self._waiting if s.id == sequence_id)
                self._waiting.remove(sequence)
        elif sequence is self._filling:
            self._filling = None
        else:
            self._leave(sequence)
        sequence.finish()

    def _warm(self, shape: Shape) -> None:
        """Compile a batch shape's decode programs on a thread of their own; the loop is told when they are done."""

        def done(compiled: bool) -> None:
            if compiled:
                self.warmed.append(shape)
            with self._work:
                self._warming[shape] = False
                self._work.notify()  # a newcomer held for them may go in now

        with self._work:
            self._warming[shape] = True  # (started: the plans see it compiling until `done`)
        self._compiles.append(self.runner.warm_in_background(*shape, done))

    def _admit(self, sequence_id: int) -> None:
        """Start the prefill of the head of the queue: its state, its cache (from the prompt cache)."""
        with self._work:
            sequence = self._waiting.popleft()
        assert sequence.id == sequence_id, "plans admit the head of the queue"
        self._filling, sequence.admitted = sequence, time.perf_counter()  # (a failure now reaches its caller)
        sequence.compiled = compile_seconds()
        run = sequence.run = self.runner.start(sequence.prompt, sequence.params)
        sequence.reused = self.runner.take_cache(run)
        sequence.prefill = self.runner.prefill(run, sequence.reused, sequence.constraint)

    def _prefill_chunk(self) -> None:
        """The next chunk of the sequence in its prefill; after its last, its first token goes out."""
        sequence = self._filling
        assert sequence is not None and sequence.prefill is not None and sequence.run is not None
        try:
            width, last = next(sequence.prefill)
        except Exception as error:  # its own prefill (or its constraint's first mask): only it ends
            self._filling = None
            sequence.finish(OwnError(error))
            return
        self._spent += width
        if last:
            self._filling = None
            self._first_token(sequence, sequence.run.host(sequence.run.out))

    def _prefill_group(self, members_ids: tuple[int, ...]) -> None:
        """Prefill the waiting sequences `members_ids` together (`prefill_group`); each then takes a row."""
        with self._work:
            members = [s for s in self._waiting if s.id in members_ids]
            for sequence in members:
                self._waiting.remove(sequence)
        now, compiled = time.perf_counter(), compile_seconds()
        for sequence in members:
            sequence.admitted, sequence.compiled = now, compiled
            sequence.run = self.runner.start(sequence.prompt, sequence.params)
        self.groups += 1
        try:
            results = self.runner.prefill_group([s.run for s in members if s.run is not None])
        except Exception as error:  # the group's own programs: only its members end (the batch is untouched)
            for sequence in members:
                sequence.finish(OwnError(error))
            return
        self._spent += group_cost(len(members))
        again = [s for s, result in zip(members, results, strict=True) if result is None]
        with self._work:  # the prompt cache changed meanwhile: they wait to be prefilled alone, first
            self._waiting.extendleft(reversed(again))
        for sequence, result in zip(members, results, strict=True):
            if result is None:
                sequence.run = None
            else:
                raw, sequence.reused = result
                self._first_token(sequence, raw)

    def _first_token(self, sequence: Submission, raw: RawStep) -> None:
        """A prefilled sequence's first token goes out; it takes a row unless that token ended it."""
        run = sequence.run
        assert run is not None
        if sequence.emit(raw, compile_seconds()):
            self.runner.release(run)
            sequence.finish()
            return
        if None not in self._rows:  # room for those waiting too: one resize, not many
            wanted = batch_size(self.active + 1 + len(self._waiting), self.batch_sizes)
            self._resize(list(range(len(self._rows))), wanted)
        row = self._rows.index(None)
        self._batch.join(row, run, kept_length(run.prompt.size, run.cache.length))
        self._rows[row], sequence.row = sequence, row
        self.runner.keep(run.cache, run.prompt)  # lent to the prompt cache: a sequence with its prefix starts from it

    def _decode(self) -> None:
        """One decode step of every row; each sequence's token goes to its queue; finished rows are freed."""
        self._spent = 0
        masks = self._masks()
        if not self.active:
            return
        host = self._batch.step(self._rows, masks)
        self.steps += 1
        for sequence in self._running():
            run = sequence.run
            assert run is not None
            run.fed += 1
            raw = raw_step(host, sequence.row)
            run.tokens.append(raw.token_id)
            if sequence.emit(raw, compile_seconds()):
                self._leave(sequence)
                sequence.finish()

    def _masks(self) -> dict[int, np.ndarray]:
        """Each constrained row's mask for the next step; a constraint that fails ends its own sequence only."""
        masks = {}
        for sequence in self._running():
            try:
                mask = sequence.constraint.allowed() if sequence.constraint is not None else None
            except Exception as error:
                self._leave(sequence)
                sequence.finish(OwnError(error))
                continue
            if mask is not None:
                masks[sequence.row] = mask
        return masks

    def _leave(self, sequence: Submission) -> None:
        """Free a sequence's row; its keys/values go to the prompt cache."""
        run = sequence.run
        assert run is not None
        written = run.written()
        self.runner.keep(self._batch.read(sequence.row, kept_length(written.size, self._batch.length)), written)
        self._rows[sequence.row] = None
        self._batch.free(sequence.row)

    def _running(self) -> list[Submission]:
        return [s for s in self._rows if s is not None]

    def _pending(self) -> list[Submission]:
        return [] if self._filling is None else [self._filling]

    def _resize(self, keep: list[int], size: int) -> None:
        """A batch of `size` rows: the rows `keep` first (in that order), then free ones."""
        self._batch.resize(keep, size)
        kept = [self._rows[i] for i in keep]
        self._rows = kept + [None] * (size - len(kept))
        for row, sequence in enumerate(self._rows):
            if sequence is not None:
                sequence.row = row

    def _fail(self, error: Exception) -> None:
        """A program failed: every sequence in a row or a prefill gets the error; the batch starts over."""
        for sequence in [*self._running(), *self._pending()]:
            sequence.finish(error)
        self._filling, self._rows, self._spent = None, [], 0
        self._batch.resize([], 0)

    def _has_work(self) -> bool:
        return bool(self._waiting or self._filling or self._rows)  # (rows: a batch to free, even with none busy)

    def _end_all(self) -> None:
        with self._work:
            for sequence in [*self._running(), *self._pending(), *self._waiting]:
                sequence.finish(CLOSED)
            self._waiting.clear()
