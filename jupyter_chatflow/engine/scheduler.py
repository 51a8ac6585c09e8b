"""Continuous batching: one scheduler thread decodes every submitted sequence at once, one row of a batch each.

On XLA:CPU a decode step's time grows far slower than its batch (the weights are read once per step whatever the
batch), so sequences decoded together make more tokens per second in all. Callers `submit` a prompt and iterate
the `Generation` they get back, as they would `Model.generate`'s; the loop thread, between two decode steps of
every running sequence, runs one prefill chunk's worth of newcomers' prompts (a long prompt never stalls the
others for its whole prefill), hands each row's token to its sequence's queue, and frees the row of a sequence
that finished, was cancelled or whose caller stopped iterating.

The rows share one KV cache of [B, k, T, e] per layer: B is the smallest of `BATCH_SIZES` (and max_batch) that
holds the sequences, T a power of two that holds the furthest one (at least `MIN_ROW_CACHE`), doubled as they
grow; when sequences leave and none waits, the rest move up into a smaller batch. A newcomer is prefilled alone
(the programs `Model.generate` uses, from the prompt cache's longest matching prefix) and then copied into its row;
a burst of short ones (a few tokens each after a cached system prompt) is prefilled as one group first
(`prefill_group.py`). A leaving sequence's keys/values go back to the prompt cache. So each sequence's greedy
output is its own alone.

A batch shape's decode programs (rows x cache length) are traced and compiled the first time a process meets it:
~1-2 s on the default model even from the persistent cache. The running rows never wait for that: a newcomer that
would grow the batch waits while they compile on a thread of their own (`_held`), and a cache about to double has
its next length's programs compiled before a row reaches the end (`WARM_AHEAD`).
"""

from __future__ import annotations

import atexit
import dataclasses
import itertools
import logging
import queue
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jupyter_chatflow.errors import GenerationError
from jupyter_chatflow.model.compile_clock import compile_seconds
from jupyter_chatflow.model.transformer import KVCache

from . import prefill_group
from .constraint import Constraint
from .generation import Generation, RawStep, Usage
from .model import PREFILL_CHUNK, Model, _Run, bucket, raw_step, room
from .prompt_cache import MIN_KEPT_LENGTH
from .sampling import GREEDY_KNOBS, Sampled, SamplingParams

# The batches compiled (and max_batch); the smallest that holds the rows runs. The default model's decode step on
# this 2-core CPU at batch 1/2/4/8/16 took 32/60/70/85/130 ms (best of 30, the machine shared): two rows run best
# at 2, three or four padded to 8 lose ~20% against 4, and each compiled decode program holds ~53 MiB (XLA:CPU).
BATCH_SIZES = (1, 2, 8, 16)
MIN_ROW_CACHE = 512  # positions per row at least: a chat prompt and its answer, without a grow on the way
_log = logging.getLogger(__name__)
WARM_AHEAD = 64  # steps before the rows fill the cache: compile the doubled cache's decode programs meanwhile
RELEASE_WAIT_S = 5.0  # at most this long, a caller that read its sequence's last step waits for it to be kept
IDLE_EXIT_S = 30.0  # the loop thread ends after this long with nothing to do (a submit starts another), so an
# unused scheduler, and the model it holds, can be collected


_LIVE: weakref.WeakSet[Scheduler] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """At exit, before the interpreter stops its daemon threads: end every scheduler's loop and compiles. (A daemon
    thread stopped inside an XLA call, a title still being written, aborts the process: "exception not rethrown".)"""
    for scheduler in list(_LIVE):
        scheduler.close()


@dataclasses.dataclass(frozen=True)
class _Out:
    """What a sequence's queue carries: a step, whether its constraint was complete after it, and whether it is
    the sequence's last (the loop frees its row and closes its queue next)."""

    raw: RawStep
    done: bool
    last: bool = False


@dataclasses.dataclass(frozen=True)
class _Own:
    """What a sequence's queue carries when its own work failed (its prefill, its constraint): it alone ends."""

    error: Exception


_END = object()  # the queue's last item: no more steps
_CLOSED = object()  # the same, when the scheduler closed: the generation ends as cancelled


@dataclasses.dataclass(eq=False)
class _Sequence:
    """One submitted sequence, as the loop thread sees it."""

    prompt: np.ndarray
    params: SamplingParams
    constraint: Constraint | None
    budget: int
    stop_ids: frozenset[int]
    cancel: threading.Event | None  # the caller's
    out: queue.SimpleQueue = dataclasses.field(default_factory=queue.SimpleQueue)
    closed: threading.Event = dataclasses.field(default_factory=threading.Event)  # the caller let go
    generation_stop: threading.Event | None = None  # the Generation's own stop flag, once it is iterated
    run: _Run | None = None
    prefill: Iterator[tuple[int, bool]] | None = None  # (chunk width, last) per chunk run
    reused: int = 0
    row: int = -1
    done_read: bool = False  # the constraint was complete after the step the caller read last (its thread only)
    read_from: float | None = None  # perf_counter when the caller began reading (its thread)
    admitted: float | None = None  # perf_counter when its prefill began (the loop thread)
    compiled: float = 0.0  # the loop thread's compile clock at this sequence's last step (or its admission)
    waited_for: str = ""  # why it was last left in the queue at the head (the loop thread)
    released: threading.Event = dataclasses.field(default_factory=threading.Event)  # its queue is closed: its row
    # is free and its keys/values are in the prompt cache (a caller that read its last step waits for it)

    def queue_ms(self) -> float:
        """Time from the caller's first read to the start of the prefill (0 if it began reading later)."""
        if self.read_from is None or self.admitted is None:
            return 0.0
        return max(0.0, (self.admitted - self.read_from) * 1000)

    def queue_reason(self) -> str:
        """What its prefill waited for, in words ("" for a wait under a millisecond: a hand-over, not a wait)."""
        if self.queue_ms() < 1.0:
            return ""
        return self.waited_for or "the running sequences' decode step"

    def stopped(self) -> bool:
        """The caller cancelled, stopped iterating, or dropped the generation."""
        return any(e is not None and e.is_set() for e in (self.closed, self.cancel, self.generation_stop))


class Scheduler:
    """Decodes many sequences together on one model; `submit` returns a `Generation` to iterate.

    >>> scheduler = Scheduler(model, max_batch=8)
    >>> answers = [scheduler.submit(ids, SamplingParams(temperature=0.0, max_tokens=64)) for ids in prompts]
    >>> texts = [[step.text for step in answer] for answer in answers]  # from any threads, in any order
    >>> scheduler.close()

    No lock is held while a caller iterates: a caller may stop at any step (break, close, or drop the
    generation), and its row is free before the next decode step.
    """

    def __init__(self, model: Model, max_batch: int = 8):
        if max_batch < 1:
            raise GenerationError(f"max_batch must be at least 1; got {max_batch}")
        self.model = model
        self.max_batch = max_batch
        self.batch_sizes = tuple(sorted({s for s in BATCH_SIZES if s < max_batch} | {max_batch}))
        self._waiting: deque[_Sequence] = deque()
        self._filling: _Sequence | None = None  # the sequence in its prefill
        self._rows: list[_Sequence | None] = []  # one per row of the batch; None is a free (padding) row
        self._batch = _Batch(model)
        self._work = threading.Condition()
        self._closing = False
        self._thread: threading.Thread | None = None
        self.steps = 0
        """Decode steps run so far (each advanced every row)."""
        self.groups = 0
        """Groups of newcomers prefilled together so far (`prefill_group`)."""
        self.warmed: list[tuple[int, int]] = []
        """(rows, cache length) of each batch whose decode programs were compiled beside a running batch."""
        self._warming: dict[tuple[int, int], threading.Thread] = {}
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
        prompt = self.model._check_prompt(prompt_ids)
        sequence = _Sequence(
            prompt, params, constraint, self.model._budget(prompt, params), self.model._stop_ids(params), cancel
        )
        steps = lambda stop, usage: self._steps(sequence, stop, usage)  # noqa: E731
        done = (lambda: sequence.done_read) if constraint is not None else None
        generation = self.model._generation(steps, prompt, params, cancel, done)
        weakref.finalize(generation, sequence.closed.set)  # dropped without being iterated to the end
        with self._work:
            if self._closing:
                raise GenerationError("This scheduler is closed: make a new one.")
            self._waiting.append(sequence)
            self._start_thread()
            self._work.notify()
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
        cache = self._batch.cache
        return 0 if cache is None else sum(a.nbytes for a in (*cache.keys, *cache.values))

    def close(self) -> None:
        """Stop the loop thread (after its current step) and wait for any compile on a thread of its own; every
        unfinished sequence ends as cancelled."""
        with self._work:
            self._closing = True
            self._work.notify()
            threads = [self._thread, *self._warming.values()]
        for thread in threads:
            if thread is not None and thread is not threading.current_thread():
                thread.join()

    @property
    def closed(self) -> bool:
        """`close()` was called: `submit` raises."""
        return self._closing

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the caller's side ------------------------------------------------------------------------------------------

    def _steps(self, sequence: _Sequence, stop: threading.Event, usage: Usage) -> Iterator[RawStep]:
        """The raw steps of one sequence, read from its queue on the caller's thread."""
        sequence.generation_stop, sequence.read_from = stop, time.perf_counter()
        last = False
        try:
            while (item := sequence.out.get()) is not _END:
                if item is _CLOSED:
                    stop.set()
                    return
                if isinstance(item, _Own):
                    raise GenerationError(f"This sequence failed: {item.error}") from item.error
                if isinstance(item, BaseException):
                    raise GenerationError(f"The batch this sequence ran in failed: {item}") from item
                usage.reused_tokens, usage.queue_ms = sequence.reused, sequence.queue_ms()
                usage.queue_reason = sequence.queue_reason()
                sequence.done_read, last = item.done, item.last
                yield item.raw
        finally:
            sequence.closed.set()
            if last:  # (a caller that stops at the end-of-sequence token does not read the queue's end) it returns
                # once the loop has kept the sequence's keys/values, right after: what it does next (a follow-up,
                # `prompt_cache.clear()`) sees the prompt cache as the generation left it
                sequence.released.wait(RELEASE_WAIT_S)

    # --- the loop thread ----------------------------------------------------------------------------------------------

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="chatflow-scheduler", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while self._wait_for_work():
            try:
                self._prefill()
                self._decode()
            except Exception as error:  # a failed program: end what ran, keep serving the rest
                self._fail(error)
        if self._closing:  # (not after an idle end: a newer loop thread may be serving by now)
            self._end_all()

    def _wait_for_work(self) -> bool:
        """Whether there is work; False when closing, or after `IDLE_EXIT_S` idle (the thread then ends)."""
        with self._work:
            while not self._closing and not self._has_work():
                if not self._work.wait(IDLE_EXIT_S) and not self._has_work():
                    self._thread = None  # (under the lock: a submit from now on starts a new thread)
                    return False
            return not self._closing

    def _has_work(self) -> bool:
        return bool(self._waiting or self._filling or self.active)

    def _admit(self) -> None:
        """Start the prefill of the next waiting sequence when a row is free for it. One prefill at a time: its
        cache (the prompt's own, from the prompt cache) exists only from its first chunk to its row."""
        while self._waiting and not self._waits():
            with self._work:
                sequence = self._waiting.popleft()
            if sequence.stopped():
                self._finish(sequence)
                continue
            self._filling, sequence.admitted = sequence, time.perf_counter()  # (a failure now reaches its caller)
            sequence.compiled = compile_seconds()
            run = self.model._start(sequence.prompt, sequence.params)
            run.cache, sequence.reused = self.model._take_cache(sequence.prompt, room(sequence.prompt.size))
            sequence.run = run
            sequence.prefill = self.model._prefill_steps(run, sequence.reused, sequence.constraint)

    def _waits(self) -> bool:
        """Whether the head of the queue must wait before its prefill starts; if so, it is told why."""
        if self._filling is not None:
            reason = "another sequence's prefill"
        elif self.active >= self.max_batch:
            reason = "a free row: every row of the batch was busy"
        elif self._held():
            reason = "the decode programs of the batch it joins to compile"
        else:
            return False
        self._waiting[0].waited_for = reason
        return True

    def _prefill(self) -> None:
        """Prefill chunks of up to `PREFILL_CHUNK` tokens in all between two decode steps: one wide chunk of a long
        prompt (it never stalls the others for its whole prefill), or the narrow chunks of a few short ones; a
        burst of short ones as one chunk together (`prefill_group`)."""
        self._drop_stopped()
        if self._held():
            return
        spent = self._prefill_group()
        while spent < PREFILL_CHUNK:
            self._admit()
            sequence = self._filling
            if sequence is None:
                return
            if sequence.stopped():
                self._filling = None
                self._finish(sequence)
                continue
            assert sequence.prefill is not None
            try:
                width, last = next(sequence.prefill)
            except Exception as error:  # its own prefill (or its constraint's first mask): only it ends
                self._filling = None
                self._finish(sequence, _Own(error))
                continue
            spent += width
            if last:
                assert sequence.run is not None
                self._first_token(sequence, sequence.run.host(sequence.run.out))
                self._filling = None

    def _drop_stopped(self) -> None:
        """End the waiting sequences whose callers stopped (a client gone while queued): off the queue now, not
        when their turn comes."""
        with self._work:
            stopped = [s for s in self._waiting if s.stopped()]
            for sequence in stopped:
                self._waiting.remove(sequence)
        for sequence in stopped:
            self._finish(sequence)

    def _held(self) -> bool:
        """Whether the next newcomer waits while the decode programs of the batch it would make are compiled on
        another thread (`Programs.warm`): compiled on this one, they would stall every running row ~1-2 s (a
        session's title joining its answer, a second client). With no row running, nobody waits for it."""
        if not self.active or not self._waiting:
            return False
        if not self.model._programs.decode_ready(len(self._rows), self._batch.length):
            return True  # the running batch's first step compiles its own programs: one compile at a time
        wanted = self.active + len(self._waiting)  # as `_join` sizes the batch: room for those waiting too
        rows = len(self._rows) if None in self._rows else self._batch_size(wanted)
        return self._warm(rows, max(self._batch.length, self._batch.length_for(self._waiting[0].prompt.size)))

    def _warm(self, rows: int, length: int) -> bool:
        """Start compiling the decode programs of a batch of `rows` x `length` on a thread of their own, unless
        they are ready; True while they are being compiled."""
        programs, key = self.model._programs, (rows, length)
        if programs.decode_ready(rows, length):
            return False
        with self._work:
            thread = self._warming.get(key)
            if thread is None:
                thread = self._warming[key] = threading.Thread(
                    target=self._warm_thread, args=key, name="chatflow-warm", daemon=True
                )
                thread.start()
            return thread.is_alive()

    def _warm_thread(self, rows: int, length: int) -> None:
        try:
            self.model._programs.warm(rows, length, self.model.config, self.model.dtype)
            self.warmed.append((rows, length))
        except Exception:  # then the loop compiles them itself when it gets there, as it would have
            _log.debug("compiling the decode programs of %d x %d rows failed", rows, length, exc_info=True)
        finally:
            with self._work:
                self._work.notify()  # a newcomer held for them may go in now

    def _prefill_group(self) -> int:
        """The waiting sequences at the head of the queue, prefilled together when enough of them fit a group
        and have rows (`prefill_group`); returns the tokens that cost (0: no group)."""
        members = self._group_members()
        if not members:
            return 0
        now, compiled = time.perf_counter(), compile_seconds()
        for sequence in members:
            sequence.admitted, sequence.compiled = now, compiled
            sequence.run = self.model._start(sequence.prompt, sequence.params)
        self.groups += 1
        try:
            results = prefill_group.prefill(self.model, [s.run for s in members if s.run is not None])
        except Exception as error:  # the group's own programs: only its members end (the batch is untouched)
            for sequence in members:
                self._finish(sequence, _Own(error))
            return 0
        for sequence, result in reversed(list(zip(members, results, strict=True))):
            if result is None:  # the prompt cache changed meanwhile: it waits to be prefilled alone, first
                sequence.run = None
                with self._work:
                    self._waiting.appendleft(sequence)
        for sequence, result in zip(members, results, strict=True):
            if result is not None:
                raw, sequence.reused = result
                self._first_token(sequence, raw)
        return len(members) * prefill_group.WIDTH

    def _group_members(self) -> list[_Sequence]:
        """The waiting sequences that fit a group, in order, among as many from the head as there are free rows,
        taken off the queue if they make one (the others are prefilled one by one, next); else none."""
        if self._filling is not None:
            return []
        with self._work:
            head = list(itertools.islice(self._waiting, max(0, self.max_batch - self.active)))
        members = [
            s for s in head if s.constraint is None and not s.stopped() and prefill_group.fits(self.model, s.prompt)
        ]
        members = members[: prefill_group.GROUP_SIZES[-1]]
        if not prefill_group.group_size(len(members)):
            return []
        with self._work:
            for sequence in members:
                self._waiting.remove(sequence)
        return members

    def _first_token(self, sequence: _Sequence, raw: RawStep) -> None:
        """A prefilled sequence's first token goes out; it takes a row unless that token ended it."""
        run = sequence.run
        assert run is not None
        if self._emit(sequence, raw):
            self.model._keep_cache(run.cache, run.written())
            self._finish(sequence)
            return
        self._join(sequence)

    def _join(self, sequence: _Sequence) -> None:
        """Give a prefilled sequence a row: its cache copied in, then lent to the prompt cache meanwhile (a
        sequence with the same prefix can start from it)."""
        run = sequence.run
        assert run is not None
        if None not in self._rows:
            wanted = self.active + 1 + len(self._waiting)  # room for those waiting too: one resize, not many
            self._resize(list(range(len(self._rows))), self._batch_size(wanted))
        row = self._rows.index(None)
        self._batch.join(row, run, _kept_length(run.prompt.size, run.cache.length))
        self._rows[row] = sequence
        sequence.row = row
        self.model._keep_cache(run.cache, run.prompt)

    def _decode(self) -> None:
        """One decode step of every row; each sequence's token goes to its queue; finished rows are freed."""
        for sequence in self._running():
            if sequence.stopped():
                self._leave(sequence)
                self._finish(sequence)
        masks = self._masks()
        if not self.active:
            self._shrink()
            return
        host = self._batch.step(self._rows, masks)
        self.steps += 1
        if self._batch.grows_soon(self._reach()):  # the next cache length's programs, before a row reaches it
            self._warm(len(self._rows), 2 * self._batch.length)
        for sequence in self._running():
            run = sequence.run
            assert run is not None
            run.fed += 1
            raw = raw_step(host, sequence.row)
            run.tokens.append(raw.token_id)
            if self._emit(sequence, raw):
                self._leave(sequence)
                self._finish(sequence)
        self._shrink()

    def _reach(self) -> int:
        """The furthest cache position a running row may still come to: its position plus what its budget has left
        (a row that must stop before the cache's end never needs it doubled, nor its programs compiled)."""
        pos = self._batch.host["pos"]
        reach = (int(pos[s.row]) + s.budget - len(s.run.tokens) for s in self._running() if s.run is not None)
        return max(reach, default=0)

    def _masks(self) -> dict[int, np.ndarray]:
        """Each constrained row's mask for the next step; a constraint that fails ends its own sequence only."""
        masks = {}
        for sequence in self._running():
            try:
                mask = sequence.constraint.allowed() if sequence.constraint is not None else None
            except Exception as error:
                self._leave(sequence)
                self._finish(sequence, _Own(error))
                continue
            if mask is not None:
                masks[sequence.row] = mask
        return masks

    def _emit(self, sequence: _Sequence, raw: RawStep) -> bool:
        """Hand a step to its sequence; True when the sequence ends with it. The caller then gives its keys and
        values to the prompt cache and only then closes its queue (`_END`): a turn that has read to the end finds
        the prompt cache as its generation left it (`prompt_cache.clear()` right after it clears it)."""
        constraint, run = sequence.constraint, sequence.run
        assert run is not None
        try:
            if constraint is not None:
                constraint.advance(raw.token_id)
            done = constraint is not None and constraint.is_done()
        except Exception as error:  # its constraint failed: it alone ends
            sequence.out.put(_Own(error))
            return True
        compiled, sequence.compiled = sequence.compiled, compile_seconds()  # (what the loop compiled meanwhile)
        raw = dataclasses.replace(raw, compile_ms=(sequence.compiled - compiled) * 1000)
        last = raw.token_id in sequence.stop_ids or len(run.tokens) >= sequence.budget or done
        sequence.out.put(_Out(raw=raw, done=done, last=last))
        return last

    @staticmethod
    def _finish(sequence: _Sequence, last: object = _END) -> None:
        """Close a sequence's queue with `last` (its end, an error of its own); its caller may return now."""
        sequence.out.put(last)
        sequence.released.set()

    def _leave(self, sequence: _Sequence) -> None:
        """Free a sequence's row; its keys/values go to the prompt cache."""
        run = sequence.run
        assert run is not None
        written = run.written()
        self.model._keep_cache(self._batch.read(sequence.row, _kept_length(written.size, self._batch.length)), written)
        self._rows[sequence.row] = None
        self._batch.free(sequence.row)

    def _running(self) -> list[_Sequence]:
        return [s for s in self._rows if s is not None]

    def _pending(self) -> list[_Sequence]:
        return [] if self._filling is None else [self._filling]

    def _shrink(self) -> None:
        """Move the running rows up into a smaller batch when one holds them and no sequence is on its way in."""
        if self._waiting or self._filling:
            return
        size = self._batch_size(self.active) if self.active else 0
        if size < len(self._rows):
            self._resize([s.row for s in self._running()], size)

    def _resize(self, keep: list[int], size: int) -> None:
        """A batch of `size` rows: the rows `keep` first (in that order), then free ones."""
        self._batch.resize(keep, size)
        kept = [self._rows[i] for i in keep]
        self._rows = kept + [None] * (size - len(kept))
        for row, sequence in enumerate(self._rows):
            if sequence is not None:
                sequence.row = row

    def _batch_size(self, rows: int) -> int:
        return next(s for s in self.batch_sizes if s >= min(rows, self.max_batch))

    def _fail(self, error: Exception) -> None:
        """A program failed: every sequence in a row or a prefill gets the error; the batch starts over."""
        for sequence in [*self._running(), *self._pending()]:
            self._finish(sequence, error)
        self._filling = None
        self._rows = []
        self._batch = _Batch(self.model)

    def _end_all(self) -> None:
        with self._work:
            for sequence in [*self._running(), *self._pending(), *self._waiting]:
                self._finish(sequence, _CLOSED)
            self._waiting.clear()


def _kept_length(n: int, limit: int) -> int:
    """Positions to copy for a sequence's first n: a power of two (few copy programs), at most `limit`."""
    return min(limit, bucket(n, MIN_KEPT_LENGTH))


class _Batch:
    """The device side of the batch: the rows' KV cache and `seen` masks, and the host arrays of each row's
    token, position, step, knobs, key and constraint mask."""

    def __init__(self, model: Model):
        self.model = model
        self.programs = model._programs
        self.cache: KVCache | None = None
        self.seen: jax.Array | None = None  # [B, V] bool
        self.host: dict[str, np.ndarray] = {}
        self._anything: jax.Array | None = None  # [B, V] all True: the mask of no constraint

    @property
    def length(self) -> int:
        return 0 if self.cache is None else self.cache.length

    def resize(self, keep: list[int], size: int) -> None:
        """Keep the rows `keep`, in that order, in a batch of `size` rows (the rest free)."""
        if size == 0:
            self.cache, self.seen, self.host, self._anything = None, None, {}, None
            return
        if self.cache is None or self.seen is None:
            self._empty(size, MIN_ROW_CACHE)
            return
        rows = np.array(keep + [0] * (size - len(keep)), np.int32)  # free rows: copies of row 0, never read
        self.cache = self.programs.select_rows(self.cache, rows)
        self.seen = self.seen[rows]
        self.host = {name: array[rows] for name, array in self.host.items()}
        for name, array in self.host.items():
            array[len(keep) :] = _FREE[name]
        self._anything = None

    def _empty(self, size: int, length: int) -> None:
        config = self.model.config
        self.cache = KVCache.zeros(config, size, self._length(length), self.model.dtype)
        self.seen = jnp.zeros((size, config.vocab_size), bool)
        key_shape = jax.random.key_data(jax.random.key(0)).shape
        self.host = {
            "token": np.zeros(size, np.int32),
            "pos": np.zeros(size, np.int32),
            "step": np.zeros(size, np.int32),
            "knobs": np.tile(_FREE["knobs"], (size, 1)),
            "key": np.zeros((size, *key_shape), np.uint32),
        }

    def join(self, row: int, run: _Run, length: int) -> None:
        """Row `row` takes a prefilled sequence: the first `length` positions of its cache, its first token."""
        self._fit(max(length, run.prompt.size + 1))
        assert self.cache is not None and self.seen is not None
        self.cache = self.programs.write_row(self.cache, run.cache, np.int32(row), length)
        self.seen = self.programs.set_row(self.seen, np.int32(row), run.seen)
        self.host["token"][row] = run.tokens[-1]
        self.host["pos"][row] = run.prompt.size
        self.host["step"][row] = 1
        self.host["knobs"][row] = np.asarray(run.knobs)
        self.host["key"][row] = np.asarray(jax.random.key_data(run.key))

    def _fit(self, needed: int) -> None:
        """Grow the cache (all rows) to hold `needed` positions per row."""
        assert self.cache is not None
        length = self._length(needed)
        if length > self.cache.length:
            empty = KVCache.zeros(self.model.config, self.cache.keys[0].shape[0], length, self.model.dtype)
            self.cache = self.programs.write(empty, self.cache, np.int32(0))

    def _length(self, needed: int) -> int:
        return min(bucket(needed, MIN_ROW_CACHE), bucket(self.model.config.context_length))

    def length_for(self, prompt_size: int) -> int:
        """The cache length a sequence with a prompt of `prompt_size` tokens needs to join (see `join`)."""
        return self._length(max(bucket(prompt_size, MIN_KEPT_LENGTH), prompt_size + 1))

    def grows_soon(self, reach: int) -> bool:
        """Whether a row will reach the end of the cache within `WARM_AHEAD` steps (and the cache can double); `reach`:
        the furthest position a row may come to (`Scheduler._reach`)."""
        return (
            bool(self.host)
            and int(self.host["pos"].max()) + WARM_AHEAD >= self.length > 0
            and reach >= self.length
            and (self._length(2 * self.length) > self.length)
        )

    def step(self, rows: list[_Sequence | None], masks: dict[int, np.ndarray]) -> Sampled:
        """One decode step of every row (free rows too, harmlessly), constrained rows under their `masks`;
        returns the sampler's output on the host."""
        self._fit(int(self.host["pos"].max()) + 1)
        assert self.cache is not None
        h = self.host
        out, chunk, self.seen = self.programs.decode_rows(
            self.model._weights, self.cache, h["token"], h["pos"], self.seen, h["knobs"], h["key"], h["step"],
            self._allowed(len(rows), masks),
        )  # fmt: skip
        self.cache = self.programs.write(self.cache, chunk, h["pos"])
        self.programs.decoded(len(rows), self.length)
        host = jax.device_get(out)
        busy = np.array([s is not None for s in rows])
        h["token"] = np.where(busy, host.token, 0).astype(np.int32)
        h["pos"] = h["pos"] + busy
        h["step"] = h["step"] + busy
        return host

    def _allowed(self, size: int, masks: dict[int, np.ndarray]) -> jax.Array:
        """[B, V]: each row's constraint mask, all True where a row has none."""
        if not masks:
            if self._anything is None:
                self._anything = jax.device_put(np.ones((size, self.model.config.vocab_size), bool))
            return self._anything
        allowed = np.ones((size, self.model.config.vocab_size), bool)
        for i, mask in masks.items():
            allowed[i] = mask
        return jax.device_put(allowed)

    def free(self, row: int) -> None:
        """Row `row` is free: it decodes a padding token at position 0 from now on (and never widens the loop)."""
        for name, array in self.host.items():
            array[row] = _FREE[name]

    def read(self, row: int, length: int) -> KVCache:
        """The first `length` positions of row `row`, as a cache of its own."""
        assert self.cache is not None
        return self.programs.read_row(self.cache, np.int32(row), length)


_FREE: dict[str, int | np.ndarray] = {  # a free row's host values: a greedy padding token at position 0
    "token": 0, "pos": 0, "step": 0, "knobs": GREEDY_KNOBS, "key": 0,
}  # fmt: skip
