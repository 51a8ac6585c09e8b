"""The panel's looks inside a finished turn (issue 36): the logit lens over its answer, and which positions of its
input made one of its tokens ("why this token?", "why this rather than that?").

Both run on the chat's engine thread, after any turn already queued, through the model's public API
(`Model.lens`, `Model.attribution`, docs/inside.md). The lens runs on the programs the turn compiled, and one small
reader; attribution keeps its programs for one input width (the turn's other tokens reuse them). The reply is
built from the arrays and sent; no array is kept.

- **lens**: each round of the turn that streamed answer tokens is lensed once, over its prompt and its answer
  before its last token (the last token predicts nothing shown). Per answer token, at the position that predicted
  it: each row's top `SHOWN`, and the chosen token and the alternatives the sampler saw, row by row, each by rank
  among the whole vocabulary and log-probability (`Model.lens(track=…)` follows each, however low it ranks). The
  last round's prompt positions come too: the model's top choice after each, and the row from which it was.
- **why**: the token's round's prompt, then the answer before the token, attributed to log p(token) (less
  log p(contrast)); the values are summed per segment of the prompt (its provenance) and for the answer so far.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.events import TERMINAL, ContextAssembled, Event, SegmentKind, TokenDelta, Tokenized
from jupyter_chatflow.model.compile_clock import compile_seconds, compiling_now

from .protocol import (
    ArrayInfo,
    InsideErrorMessage,
    InsideProgressMessage,
    InsideRequestKind,
    InsideStage,
    LensMessage,
    LensRequest,
    WhyMessage,
    WhyRequest,
    WhySegment,
)

SHOWN = 5
"""Each row's top choices a view shows."""
STEPS = 32
"""Integrated gradients' steps when a request does not say."""
TICK_S = 0.25
"""How often a look's progress goes to the view."""
ANSWER_SO_FAR = "answer so far"


class InsideRequestError(ValueError):
    """The view asked for something this turn cannot give."""


@dataclasses.dataclass(frozen=True)
class LookedRound:
    """One prompt of a turn and the answer tokens streamed after it."""

    ids: list[int]
    column: np.ndarray
    """int32 [len(ids)]: each prompt position's segment in `segments`."""
    segments: list[tuple[str, SegmentKind]]
    """(label, kind) of the prompt's segments, in order of first appearance."""
    message_end: int
    """The position of the user's message's last token (-1: none)."""
    tokens: list[TokenDelta]


def rounds_of(events: Sequence[Event]) -> list[LookedRound]:
    """The turn's rounds, from its `tokenized` events (each with the context assembled before it)."""
    rounds: list[LookedRound] = []
    context: ContextAssembled | None = None
    for event in events:
        if isinstance(event, ContextAssembled):
            context = event
        elif isinstance(event, Tokenized):
            rounds.append(_round(event, context))
        elif isinstance(event, TokenDelta) and rounds:
            rounds[-1].tokens.append(event)
    return rounds


def _round(prompt: Tokenized, context: ContextAssembled | None) -> LookedRound:
    """A prompt's segments in the context's order (those its provenance uses; a position no run covers is the
    template's), each position's segment, and where the user's message ends."""
    ids = list(prompt.ids)
    runs = [r for r in prompt.provenance if r.end > r.start]
    order = sorted({r.segment for r in runs})
    known = context.segments if context is not None else ()
    segments: list[tuple[str, SegmentKind]] = [
        (known[i].label, known[i].kind) if 0 <= i < len(known) else ("template", "template") for i in order
    ]
    column = np.full(len(ids), -1, np.int32)
    for run in runs:
        column[run.start : run.end] = order.index(run.segment)
    if (column < 0).any():
        segments.append(("template", "template"))
        column[column < 0] = len(segments) - 1
    ends = [r.end - 1 for r in runs if segments[order.index(r.segment)][1] == "user"]
    return LookedRound(ids=ids, column=column, segments=segments, message_end=max(ends, default=-1), tokens=[])


def finished_rounds(events: Sequence[Event]) -> list[LookedRound]:
    """The rounds of a finished turn, or why it has none to look into."""
    if not any(isinstance(e, TERMINAL) for e in events):
        raise InsideRequestError("This turn is still generating: look inside it once it has ended.")
    rounds = rounds_of(events)
    if not rounds:
        raise InsideRequestError("This turn has no prompt (it ended before the model ran): nothing to look into.")
    if any(t.token_id < 0 for r in rounds for t in r.tokens):
        raise InsideRequestError("This turn's tokens came from a server without their ids: nothing to look into.")
    return rounds


# ---- the lens ---------------------------------------------------------------------------------------------------


def settled_row(top: np.ndarray, token: int) -> int:
    """The first row from which `top` (the top choice per row) is `token` through the last row; -1 when it is
    not the last row's."""
    if top[-1] != token:
        return -1
    differs = np.flatnonzero(top != token)
    return int(differs[-1]) + 1 if differs.size else 0


def series_ids(token: TokenDelta) -> list[int]:
    """The chosen token, then the other alternatives the sampler saw, each once."""
    ids = [token.token_id]
    for alt in token.alternatives:
        if alt.token_id >= 0 and alt.token_id not in ids:
            ids.append(alt.token_id)
    return ids


def lens_reply(model: Any, message: LensRequest, events: Sequence[Event]) -> tuple[LensMessage, list[bytes]]:
    """The `lens` message and its buffers for a finished turn (on the engine thread)."""
    rounds = finished_rounds(events)
    answered = [r for r in rounds if r.tokens]
    if not answered:
        raise InsideRequestError("This turn streamed no answer tokens: nothing to lens.")
    rows = model.config.n_layers + 1
    before = compile_seconds()
    started = time.perf_counter()
    tops, top_lps, ranks, lps, series, settled, indices, positions = [], [], [], [], [], [], [], []
    prompt_top, prompt_settled, prompt_lps = np.zeros(0, np.int32), [], np.zeros(0, np.float32)
    width = max(len(series_ids(t)) for r in answered for t in r.tokens)
    for number, r in enumerate(answered):
        sequence = r.ids + [t.token_id for t in r.tokens[:-1]]
        follow = np.zeros((len(sequence), width), np.int32)  # each answer token's series, at the position before it
        for i, token in enumerate(r.tokens):
            wanted = series_ids(token)
            follow[len(r.ids) - 1 + i, : len(wanted)] = wanted
        lens = model.lens(sequence, k=SHOWN, track=follow)
        for i, token in enumerate(r.tokens):
            at = len(r.ids) - 1 + i
            ids, logprobs = lens.top_ids[:, at], lens.top_logprobs[:, at]  # [rows, SHOWN]
            tops.append(ids.copy())  # (copies: the round's whole lens is let go after it)
            top_lps.append(logprobs.copy())
            wanted = series_ids(token)
            pad = width - len(wanted)
            exact = lens.tracked_ranks[:, at, : len(wanted)].T + 1  # [series, rows], 1: the top
            ranks.append(np.concatenate([exact, np.zeros((pad, rows), np.int32)]))
            known = lens.tracked_logprobs[:, at, : len(wanted)].T
            lps.append(np.concatenate([known, np.full((pad, rows), np.nan, np.float32)]))
            series.append(wanted + [-1] * pad)
            settled.append(settled_row(ids[:, 0], token.token_id))
            indices.append(token.index)
            positions.append(at)
        if number == len(answered) - 1:
            prompt = lens.top_ids[:, : len(r.ids), 0]  # [rows, P]
            prompt_top = prompt[-1].copy()
            prompt_settled = [settled_row(prompt[:, p], int(prompt[-1, p])) for p in range(len(r.ids))]
            prompt_lps = lens.top_logprobs[-1, : len(r.ids), 0].copy()
        del lens
    compute_ms = (time.perf_counter() - started) * 1000
    arrays = {
        "top_ids": np.asarray(tops, "<i4"), "top_logprobs": np.asarray(top_lps, "<f4"),
        "series_ranks": np.asarray(ranks, "<i4"), "series_logprobs": np.asarray(lps, "<f4"),
        "prompt_logprobs": np.asarray(prompt_lps, "<f4"),
    }  # fmt: skip
    shown = {int(i) for i in np.unique(arrays["top_ids"])} | {int(i) for i in prompt_top}
    shown |= {i for ids in series for i in ids if i >= 0}
    last = answered[-1]
    reply = {
        "type": "lens", "request_id": message["request_id"], "turn_id": message["turn_id"], "layers": rows - 1,
        "k": SHOWN, "depth": model.config.vocab_size,  # (every rank is known: `Model.lens(track=…)`)
        "indices": indices, "positions": positions, "series": series, "settled": settled,
        "prompt_tokens": len(last.ids), "prompt_top": [int(i) for i in prompt_top], "prompt_settled": prompt_settled,
        "message_end": last.message_end,
        "arrays": [ArrayInfo(name=name, dtype="int32" if a.dtype.kind == "i" else "float32", shape=list(a.shape))
                   for name, a in arrays.items()],
        "pieces": _pieces(model, shown), "compile_ms": (compile_seconds() - before) * 1000, "compute_ms": compute_ms,
    }  # fmt: skip
    return cast(LensMessage, reply), [a.tobytes() for a in arrays.values()]


def _pieces(model: Any, ids: set[int]) -> dict[str, list[str]]:
    tokenizer = model.tokenizer
    return {str(i): [tokenizer.piece(i), tokenizer.token_bytes(i).hex()] for i in sorted(ids)}


# ---- why this token ---------------------------------------------------------------------------------------------


def why_input(rounds: Sequence[LookedRound], index: int) -> tuple[LookedRound, int]:
    """The round of answer token `index` and its place among that round's tokens."""
    for r in rounds:
        for i, token in enumerate(r.tokens):
            if token.index == index:
                return r, i
    count = sum(len(r.tokens) for r in rounds)
    raise InsideRequestError(f"This turn has no answer token {index} (it has {count}).")


def segment_sums(values: np.ndarray, column: np.ndarray, count: int) -> np.ndarray:
    """float64 [count]: the values summed over each segment's positions."""
    return np.bincount(column, weights=values.astype(np.float64), minlength=count)


def why_reply(
    model: Any, message: WhyRequest, events: Sequence[Event], progress: Callable[[int, int], None] | None = None
) -> WhyMessage:
    """The `why` message for one answer token of a finished turn (on the engine thread)."""
    r, i = why_input(finished_rounds(events), message["index"])
    token = r.tokens[i]
    contrast = message["contrast_token_id"]
    if contrast is not None and contrast == token.token_id:
        raise InsideRequestError("The contrast is the token itself: pick another of the alternatives.")
    method = message["method"]
    steps = message["steps"] if message["steps"] is not None else STEPS
    ids = r.ids + [t.token_id for t in r.tokens[:i]]
    before = compile_seconds()
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        values = model.attribution(ids, token.token_id, method=method, steps=steps, contrast_id=contrast,
                                   progress=progress if method == "integrated_gradients" else None)  # fmt: skip
    compute_ms = (time.perf_counter() - started) * 1000
    values = np.asarray(values, np.float32)
    segments: list[tuple[str, SegmentKind]] = [*r.segments, (ANSWER_SO_FAR, "generated")] if i else list(r.segments)
    column = np.concatenate([r.column, np.full(i, len(r.segments), np.int32)])
    sums = segment_sums(values, column, len(segments))
    counts = np.bincount(column, minlength=len(segments))
    alternative = next((a for a in token.alternatives if a.token_id == contrast), None)
    reply = {
        "type": "why", "request_id": message["request_id"], "turn_id": message["turn_id"], "index": token.index,
        "method": method, "steps": steps if method == "integrated_gradients" else 0, "target_id": token.token_id,
        "contrast_id": contrast, "target_logprob": token.logprob,
        "contrast_logprob": alternative.logprob if alternative is not None else None,
        "ids": ids, "prompt_tokens": len(r.ids), "values": [float(v) for v in values],
        "column": [int(c) for c in column],
        "segments": [WhySegment(label=label, kind=kind, tokens=int(n), value=float(s))
                     for (label, kind), n, s in zip(segments, counts, sums, strict=True)],
        "total": float(values.astype(np.float64).sum()),
        "note": " ".join(str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)),
        "compile_ms": (compile_seconds() - before) * 1000, "compute_ms": compute_ms,
    }  # fmt: skip
    return cast(WhyMessage, reply)


# ---- the requests, as the panel runs them -----------------------------------------------------------------------


class Look:
    """One `lens` or `why` request: its progress to the view while it waits and computes (a clock on a thread of
    its own, which also watches XLA compile; integrated gradients' steps as they come), then its reply or its
    error."""

    def __init__(self, send: Callable[..., None], kind: InsideRequestKind, request_id: str):
        self.send, self.kind, self.request_id = send, kind, request_id
        self.stage: InsideStage = "queued"
        self.done = self.total = 0
        self.started = time.perf_counter()
        self.compile_s = 0.0
        """Seconds the clock saw XLA compiling while this look computed (each look compiles its programs)."""
        self._busy = False
        self._said: tuple[str, int] | None = None  # (stage, done) last sent
        self._over = threading.Event()
        self._lock = threading.Lock()
        self._clock = threading.Thread(target=self._tick, name="chatflow-panel-look", daemon=True)
        self._clock.start()

    def steps(self, done: int, total: int) -> None:
        """Integrated gradients' progress (on the engine thread)."""
        self.done, self.total = done, total
        self._report()

    def begin(self) -> None:
        """The engine thread took the look up."""
        self.stage = "computing"
        self._report()

    def finish(self, reply: dict[str, Any], buffers: list[bytes] | None = None) -> None:
        self._over.set()
        with self._lock:
            self.send(reply, buffers=buffers or [])

    def fail(self, error: BaseException) -> None:
        self._over.set()
        said = str(error) if isinstance(error, (ChatflowError, ValueError)) else repr(error)
        with self._lock:
            self.send(InsideErrorMessage(type="inside_error", request_id=self.request_id, request=self.kind,
                                         message=said or type(error).__name__))  # fmt: skip

    def _tick(self) -> None:
        last = time.perf_counter()
        while not self._over.wait(TICK_S):
            now = time.perf_counter()
            self._busy = self.stage != "queued" and bool(compiling_now())
            if self._busy:
                self.compile_s += now - last
            last = now
            self._report()

    def _report(self) -> None:
        stage: InsideStage = "compiling" if self._busy else self.stage
        text = {
            "queued": "waiting for the model (a turn is running)",
            "compiling": f"XLA compiles this look's programs (new for each look), {self.compile_s:.1f} s so far",
            "computing": f"integrated gradients, step {self.done} of {self.total}" if self.total else "computing",
        }[stage]  # fmt: skip
        with self._lock:
            if self._over.is_set() or (self._said == (stage, self.done) and stage != "compiling"):
                return
            self._said = (stage, self.done)
            self.send(InsideProgressMessage(
                type="inside_progress", request_id=self.request_id, request=self.kind, stage=stage, done=self.done,
                total=self.total, text=text, elapsed_ms=(time.perf_counter() - self.started) * 1000,
            ))  # fmt: skip


class InsideLooks:
    """The panel's `lens` and `why` requests: checked, queued on the chat's engine thread, answered (nothing of a
    look is kept after its reply)."""

    def __init__(self, chat: Any, send: Callable[..., None]):
        self.chat, self.send = chat, send

    def request(self, message: LensRequest | WhyRequest, events: list[Event] | None) -> Look:
        """Answer `message` over the turn's `events` (None: the panel has no such turn)."""
        look = Look(self.send, message["type"], message["request_id"])
        try:
            if not self.chat.abilities.attention:
                raise InsideRequestError(
                    f"This chat's turns are answered by a server ({self.chat.abilities.where}): the lens and "
                    "attribution need the model's weights in this kernel. Make a panel over a local model "
                    "(ChatWidget(model=…)) to look inside its answers."
                )  # fmt: skip
            if events is None:
                raise InsideRequestError(f"No turn {message['turn_id']!r} in this panel.")
            finished_rounds(events)  # (refused now, not after the queue)
        except InsideRequestError as error:
            look.fail(error)
            return look
        try:
            job = self.chat.submit(self._run, look, message, events)
        except Exception as error:  # (the chat is closed: its clock must stop, and the view hear why)
            look.fail(error)
            return look
        job.add_done_callback(lambda done: look.fail(done.exception()) if done.exception() else None)
        return look

    def _run(self, look: Look, message: LensRequest | WhyRequest, events: list[Event]) -> None:
        look.begin()
        model = self.chat.model
        if message["type"] == "lens":
            reply, buffers = lens_reply(model, cast(LensRequest, message), events)
            look.finish(dict(reply), buffers)
        else:
            look.finish(dict(why_reply(model, cast(WhyRequest, message), events, look.steps)))
