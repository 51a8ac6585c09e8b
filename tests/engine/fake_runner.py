"""A fake `Runner` for the scheduler's tests: no model, no thread, no clock; every call is recorded.

A sequence's token at position p is `token_at(prompt, p)`, whether it was sampled by a prefill, a group or a row of a
batch: a scheduler that mixes rows up (crosstalk) or feeds a row the wrong position shows it at once. Compiles
started with `warm_in_background` finish when the test says (`finish_warms`); `fail_steps` makes decode steps
raise. The batch shapes a test marks ready (`ready`) decode without a compile.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from jupyter_chatflow.engine.batch import WARM_AHEAD, kept_length
from jupyter_chatflow.engine.chunks import bucket, cache_length, prefill_chunks, room
from jupyter_chatflow.engine.prefill_group import WIDTH
from jupyter_chatflow.engine.prompt_cache import MIN_KEPT_LENGTH, shared_prefix
from jupyter_chatflow.engine.run import SequenceState, raw_step
from jupyter_chatflow.engine.sampling import Sampled, SamplingParams
from jupyter_chatflow.errors import GenerationError

VOCAB, WINDOW = 320, 4096


def token_at(prompt: Sequence[int], position: int) -> int:
    """The fake model's token at `position` after `prompt` (never a stop token of the tiny tokenizer: < 256)."""
    return 3 + (int(np.sum(prompt)) * 7 + position * 13) % 250


def sampled(tokens: Sequence[int]) -> Sampled:
    """A sampler's output (host arrays) that chose `tokens`, one per row."""
    n = len(tokens)
    top = np.tile(np.arange(5), (n, 1))
    return Sampled(
        token=np.asarray(tokens, np.int32), logprob=np.full(n, -0.5, np.float32), entropy=np.ones(n, np.float32),
        top_ids=top, top_logprobs=np.full((n, 5), -2.0, np.float32), top_sampling_probs=np.zeros((n, 5), np.float32),
        top_penalized=np.zeros((n, 5), bool), top_penalized_logprobs=np.full((n, 5), -2.0, np.float32),
    )  # fmt: skip


@dataclasses.dataclass
class FakeCache:
    length: int


class FakeRunner:
    """What `Scheduler` calls on a `Runner`, recorded in `calls` as (name, details) tuples."""

    def __init__(self, groupable: Callable[[np.ndarray], bool] = lambda _prompt: False):
        self.config = dataclasses.make_dataclass("Config", ["vocab_size", "context_length"])(VOCAB, WINDOW)
        self.calls: list[tuple] = []
        self.ready: set[tuple[int, int]] = set()
        self.warms: list[tuple[tuple[int, int], Callable[[bool], None]]] = []  # started, not finished
        self.fail_steps: list[Exception] = []  # raised by the next decode steps, one each
        self.kept: list[list[int]] = []  # the ids of each cache given to the prompt cache
        self.groupable = groupable

    def check_prompt(self, prompt_ids: Sequence[int]) -> np.ndarray:
        prompt = np.asarray(prompt_ids, np.int32).reshape(-1)
        if prompt.size == 0:
            raise GenerationError("The prompt is empty")
        return prompt

    def budget(self, prompt: np.ndarray, params: SamplingParams) -> int:
        return min(params.max_tokens, WINDOW - prompt.size)

    def start(self, prompt: np.ndarray, params: SamplingParams) -> SequenceState:
        return SequenceState(prompt, 0, params.as_array(), np.zeros((1, VOCAB), bool))

    def take_cache(self, run: SequenceState) -> int:
        run.cache = FakeCache(cache_length(room(run.prompt.size), WINDOW))  # type: ignore[assignment]
        return 0

    def prefill(self, run: SequenceState, reused: int, constraint=None) -> Iterator[tuple[int, bool]]:
        *head, (_, last, _) = prefill_chunks(run.prompt, run.cache.length, reused)
        for _, tokens, _ in head:
            self.calls.append(("chunk", run.prompt.size, tokens.shape[1]))
            yield tokens.shape[1], False
        self.calls.append(("chunk", run.prompt.size, last.shape[1]))
        if constraint is not None:
            constraint.allowed()
        run.out = sampled([token_at(run.prompt, run.prompt.size)])
        yield last.shape[1], True

    def release(self, run: SequenceState) -> None:
        self.keep(run.cache, run.written())

    def keep(self, cache, ids: np.ndarray) -> None:
        self.kept.append(np.asarray(ids).tolist())

    def shared_prefix(self, prompt: np.ndarray) -> int:
        """The longest prefix of `prompt` among the caches kept (at most all but its last token)."""
        return max((min(shared_prefix(np.asarray(k), prompt), prompt.size - 1) for k in self.kept), default=0)

    def batch(self) -> FakeBatch:
        return FakeBatch(self)

    def fits_group(self, prompt: np.ndarray) -> bool:
        return self.groupable(prompt)

    def prefill_group(self, runs: Sequence[SequenceState]) -> list:
        self.calls.append(("group", len(runs)))
        results = []
        for run in runs:
            run.cache = FakeCache(bucket(run.prompt.size, MIN_KEPT_LENGTH))  # type: ignore[assignment]
            raw = raw_step(sampled([token_at(run.prompt, run.prompt.size)]), 0)
            run.tokens.append(raw.token_id)
            results.append((raw, max(0, run.prompt.size - WIDTH)))
        return results

    def decode_ready(self, rows: int, length: int) -> bool:
        return (rows, length) in self.ready

    def warm_in_background(self, rows: int, length: int, done: Callable[[bool], None]):
        self.calls.append(("warm", rows, length))
        self.warms.append(((rows, length), done))
        return None

    def finish_warms(self, compiled: bool = True) -> None:
        """The compiles started so far end (`compiled`: they succeeded)."""
        warms, self.warms = self.warms, []
        for shape, done in warms:
            if compiled:
                self.ready.add(shape)
            done(compiled)


class FakeBatch:
    """The rows: each row's prompt, position and next token on the host; no cache but its length."""

    def __init__(self, runner: FakeRunner):
        self.runner, self.length = runner, 0
        self.prompts: list[np.ndarray | None] = []
        self.pos = np.zeros(0, np.int32)
        self.token = np.zeros(0, np.int32)

    @property
    def nbytes(self) -> int:
        return len(self.prompts) * self.length

    def positions(self) -> np.ndarray:
        return self.pos

    def resize(self, keep: list[int], size: int) -> None:
        self.runner.calls.append(("resize", size))
        if size == 0:
            self.length, self.prompts, self.pos, self.token = 0, [], np.zeros(0, np.int32), np.zeros(0, np.int32)
            return
        self.length = self.length or cache_length(1, WINDOW)
        pick = keep + [None] * (size - len(keep))
        self.prompts = [None if i is None else self.prompts[i] for i in pick]
        self.pos = np.array([0 if i is None else self.pos[i] for i in pick], np.int32)
        self.token = np.array([0 if i is None else self.token[i] for i in pick], np.int32)

    def join(self, row: int, run: SequenceState, length: int) -> None:
        self.length = max(self.length, cache_length(max(length, run.prompt.size + 1), WINDOW))
        self.prompts[row], self.pos[row], self.token[row] = run.prompt, run.prompt.size, run.tokens[-1]

    def length_for(self, prompt_size: int) -> int:
        return cache_length(max(bucket(prompt_size, MIN_KEPT_LENGTH), prompt_size + 1), WINDOW)

    def grows_soon(self, reach: int) -> bool:
        far = int(self.pos.max()) if self.pos.size else 0
        return far + WARM_AHEAD >= self.length > 0 and reach >= self.length and 2 * self.length <= WINDOW

    def step(self, rows: Sequence[object | None], masks: dict[int, np.ndarray]) -> Sampled:
        self.runner.calls.append(("decode", sum(r is not None for r in rows), len(rows), self.length))
        if self.runner.fail_steps:
            raise self.runner.fail_steps.pop(0)
        self.runner.ready.add((len(rows), self.length))
        if int(self.pos.max()) + 1 > self.length:
            self.length = cache_length(int(self.pos.max()) + 1, WINDOW)
        chosen = [0 if p is None else token_at(p, int(pos) + 1) for p, pos in zip(self.prompts, self.pos, strict=True)]
        for row, mask in masks.items():
            chosen[row] = int(np.flatnonzero(mask)[0])
        busy = np.array([r is not None for r in rows])
        self.pos = self.pos + busy
        self.token = np.where(busy, chosen, 0).astype(np.int32)
        return sampled(chosen)

    def free(self, row: int) -> None:
        self.prompts[row], self.pos[row], self.token[row] = None, 0, 0

    def read(self, row: int, length: int) -> FakeCache:
        return FakeCache(kept_length(length, self.length))
