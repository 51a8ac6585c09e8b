"""A turn's timeline, like a browser's Network tab: one bar per stage, from the events' own times.

An event is stamped when its stage ends, so a stage runs from `timestamp - latency_ms` to `timestamp`. A token has
two times: when the engine computed it (`TokenDelta.computed_at`) and when it was shown (`timestamp`: the output
scan shows a word once the next one begins). A decode bar runs over the computed times, a tick each; the first
token line is where the first token was shown. XLA compiling is drawn inside the bar of the stage it delayed: a
prefill's at its start, a decode step's between the token before it and its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from urllib.parse import urlparse

from jupyter_chatflow.engine.plan import JOINED
from jupyter_chatflow.events import (
    Cancelled,
    Completed,
    ContextAssembled,
    Event,
    Failed,
    HttpRequest,
    HttpResponse,
    MemoryRecalled,
    MemoryWritten,
    PrefillDone,
    SafetyDecision,
    SseFrame,
    TitleGenerated,
    TokenDelta,
    Tokenized,
    ToolCall,
    ToolResult,
    TurnStarted,
)

from .calls import call_note
from .record import Interval, Stage, StageKind
from .words import ms

WAIT_MS = 1.0
"""A wait shorter than this is a hand-over between threads, not a wait: it gets no bar."""
GUARD_PASS = "the programs of a guard's pass over the model (the intent probe's), new to the process"


@dataclasses.dataclass
class _Decode:
    """A decode bar being built: from its generation's first token (its prefill's end) to its last."""

    start: float
    ticks: list[float] = dataclasses.field(default_factory=list)
    compiles: list[Interval] = dataclasses.field(default_factory=list)
    seen: int = 0  # tokens of the generation so far (its first comes out of the prefill: its compile is there)


class Timeline:
    """Folds a turn's events into stages (ms from `origin`, monotonic seconds); `kept` tokens of a fork's answer
    were not computed in this turn (they get no tick)."""

    def __init__(self, origin: float, kept: int = 0):
        self.origin, self.kept = origin, kept
        self.stages: list[Stage] = []
        self.first_shown: float | None = None
        self.first_computed: float | None = None
        self._round, self._ended, self._shown = 0, False, 0
        self._decode: _Decode | None = None
        self._call_began: float | None = None  # when the latest tool-call prefill began waiting (its wait, or itself)
        self.remote = False  # a remote turn: its tokens arrive in SSE frames (their bar), no decode bar here
        self._request: tuple[HttpRequest, HttpResponse | None, list[SseFrame]] | None = None

    def at(self, seconds: float) -> float:
        """A monotonic time as ms from the submission (to the microsecond: what the clock measures, and short)."""
        return round((seconds - self.origin) * 1000, 3)

    def add(self, label: str, kind: StageKind, start: float, end: float, detail: str, **more) -> None:
        self.stages.append(Stage(label=label, kind=kind, start_ms=start, end_ms=max(start, end), detail=detail, **more))

    def span(self, label: str, kind: StageKind, e: Event, latency_ms: float, detail: str) -> None:
        """A stage that ended at `e` after `latency_ms`."""
        end = self.at(e.timestamp)
        self.add(label, kind, end - latency_ms, end, detail)

    def take(self, e: Event) -> None:
        """One event, in sequence order."""
        if isinstance(e, ContextAssembled):
            self.end_decode()
            self._round += 1
        if isinstance(e, (Completed, Cancelled, Failed)):
            self.end_decode()
            self._ended = True
        if isinstance(e, PrefillDone):
            self._prefill(e)
        elif isinstance(e, TokenDelta):
            self._token(e)
        elif isinstance(e, ToolCall):
            self._call(e)
        elif isinstance(e, (HttpRequest, HttpResponse, SseFrame)):
            self._wire(e)
        else:
            self._stage(e)

    @property
    def _r(self) -> str:
        return f" #{self._round}" if self._round > 1 else ""

    def _stage(self, e: Event) -> None:
        if isinstance(e, SafetyDecision):
            self._safety(e)
        elif isinstance(e, MemoryRecalled):
            self.span("memory recall", "memory", e, e.latency_ms, f"{len(e.snippets)} recalled")
        elif isinstance(e, ContextAssembled):
            self.span(f"context{self._r}", "context", e, e.latency_ms, f"{e.prompt_tokens:,} of {e.window:,} tokens")
        elif isinstance(e, Tokenized):
            self.span(f"tokenize{self._r}", "tokenize", e, e.latency_ms, f"{len(e.ids):,} ids")
        elif isinstance(e, ToolResult):
            outcome = f"error: {e.error}" if e.error else f"→ {e.output}"
            self.span(f"tool {e.name}", "tool", e, e.latency_ms, outcome)
        elif isinstance(e, TitleGenerated):
            self.span("title", "title", e, e.latency_ms, title_words(e, self._ended))
        elif isinstance(e, MemoryWritten):
            self.span("memory write", "memory", e, 0.0, f"{e.operation}: {e.text}")

    def _safety(self, e: SafetyDecision) -> None:
        """A safety layer's bar; a guard that ran the model (the intent probe) compiled at its start, on a cold turn."""
        label = f"safety {e.layer}" + (f" ({e.subject})" if e.subject else "")
        end = self.at(e.timestamp)
        start = end - e.latency_ms
        compiles = (Interval(start_ms=start, end_ms=min(end, start + e.compile_ms)),) if e.compile_ms > 0 else ()
        compiled = f" · {ms(e.compile_ms)} of it XLA compiling {GUARD_PASS}" if e.compile_ms else ""
        self.add(label, "safety", start, end, f"{e.action} · {e.guard} · {e.reason}{compiled}", compiles=compiles)

    def _prefill(self, e: PrefillDone) -> None:
        self.end_decode()
        end = self.at(e.timestamp)
        start = end - e.latency_ms
        if e.queued_ms >= WAIT_MS and e.queued_for == JOINED:  # its own prompt's prefill (the draft's prewarm)
            self.add(f"prefill, joined{self._r}", "prefill", start - e.queued_ms, start, joined_words(e))
        elif e.queued_ms >= WAIT_MS:
            why = f"waited {ms(e.queued_ms)} for {e.queued_for or 'the scheduler'}"
            self.add(f"wait{self._r}", "queue", start - e.queued_ms, start, why)
        compiles = (Interval(start_ms=start, end_ms=min(end, start + e.compile_ms)),) if e.compile_ms > 0 else ()
        if e.kind == "tool_call":
            self._call_began = start - (e.queued_ms if e.queued_ms >= WAIT_MS else 0.0)
        label = f"prefill{' (tool call)' if e.kind == 'tool_call' else ''}{self._r}"
        self.add(label, "prefill", start, end, prefill_words(e), compiles=compiles)
        self._decode = _Decode(start=end)

    def _token(self, e: TokenDelta) -> None:
        self._shown += 1
        if self._shown <= self.kept:  # a fork's kept token: computed by the forked turn, not this one
            return
        self.first_shown = self.at(e.timestamp) if self.first_shown is None else self.first_shown
        at = self.at(e.computed_at if e.computed_at > 0 else e.timestamp)
        self.first_computed = at if self.first_computed is None else self.first_computed
        if self.remote:  # (the server decoded it: its arrival is a tick of the SSE bar, not of a decode here)
            return
        d = self._decode = self._decode or _Decode(start=at)
        if d.seen and e.compile_ms > 0 and d.ticks:  # a decode step's compile, since the token before it
            d.compiles.append(Interval(start_ms=d.ticks[-1], end_ms=min(at, d.ticks[-1] + e.compile_ms)))
        d.seen += 1
        d.ticks.append(at)

    def _call(self, e: ToolCall) -> None:
        """A call ends the decode bar it was written in (its steps decode under the JSON-schema mask); before its
        prefill, the grammar that masks it was built."""
        began, self._call_began = self._call_began, None
        start = self.at(e.timestamp) - e.decode_ms
        if e.constrained and began is not None and began - start >= WAIT_MS:
            grammar = "the tool call's JSON-schema grammar and first mask (llguidance), before its prefill"
            self.add(f"call grammar{self._r}", "tool", start, began, f"built {grammar}")
        d = self._decode
        if d is not None and e.compile_ms > 0:
            d.compiles.append(Interval(start_ms=d.start, end_ms=d.start + e.compile_ms))
        how = " (arguments decoded under the JSON-schema mask)" if e.constrained else ""
        note = call_note(e)
        self.end_decode(self.at(e.timestamp), f"ends with the call {e.name}{how}" + (f": {note}" if note else ""))

    def end_decode(self, end: float | None = None, detail: str = "") -> None:
        """Closes the decode bar being built at `end` (a tool call) or at its last tick."""
        d, self._decode = self._decode, None
        if d is None or (not d.ticks and end is None):
            return
        finish = end if end is not None else d.ticks[-1]
        compiled = sum(c.end_ms - c.start_ms for c in d.compiles)
        said = [f"{len(d.ticks)} token{'' if len(d.ticks) == 1 else 's'} shown"] if d.ticks else []
        said += [f"{ms(compiled)} of it XLA compiling a decode program new to the process"] if compiled else []
        said += [detail] if detail else []
        self.add("decode", "decode", d.start, finish, " · ".join(said), ticks_ms=tuple(d.ticks),
                 compiles=tuple(d.compiles))  # fmt: skip

    def _wire(self, e: HttpRequest | HttpResponse | SseFrame) -> None:
        """A remote turn's HTTP: a bar from sending a request to its response's headers, then one for its SSE
        stream with a tick at each frame's arrival (the server's queue, prefill and decode are inside these)."""
        if isinstance(e, HttpRequest):
            self.end_wire()
            self._request, self.remote = (e, None, []), True
        elif self._request is not None and isinstance(e, SseFrame):
            self._request[2].append(e)
        elif self._request is not None and isinstance(e, HttpResponse):
            request = self._request[0]
            self._request = (request, e, self._request[2])
            sent = self.at(request.timestamp)
            rid = f" · {e.request_id}" if e.request_id else ""
            what = f"{request.method} {urlparse(request.url).path}"
            self.add(f"HTTP {what}", "http", sent, sent + e.elapsed_ms, f"{e.status} {e.reason}{rid}")

    def end_wire(self) -> None:
        """Ends the SSE bar of the latest request, at its last frame."""
        request, self._request = self._request, None
        if request is None or request[1] is None or not request[2]:
            return
        sent, frames = self.at(request[0].timestamp), request[2]
        ticks = tuple(sent + f.arrival_ms for f in frames)
        detail = f"{len(frames)} frames, {sum(f.bytes for f in frames):,} bytes (the server's prefill and decode)"
        self.add("SSE stream", "http", sent + request[1].elapsed_ms, ticks[-1], detail, ticks_ms=ticks)


def prefill_words(e: PrefillDone) -> str:
    """A prefill bar's detail: its tokens, what the prompt cache gave, its compiling."""
    said = f"{e.prompt_tokens:,} tokens: {e.reused_tokens:,} from the prompt cache, {e.computed_tokens:,} computed"
    return said + (f" · {ms(e.compile_ms)} of it XLA compiling a program new to the process" if e.compile_ms else "")


def joined_words(e: PrefillDone) -> str:
    """A joined prefill's detail: the prefill of this prompt already running when the turn came (a draft's prewarm),
    which the turn's own prefill then started from."""
    found = f"{e.reused_tokens:,} of its {e.prompt_tokens:,} tokens"
    return (f"joined the prefill of this prompt already running (the draft's prewarm) for {ms(e.queued_ms)}: the "
            f"prefill below found {found} in the prompt cache")  # fmt: skip


def title_words(e: TitleGenerated, after_answer: bool) -> str:
    """The title and whose it is (a timeline row's detail): "“Capital of France”: the user's words (…); …"."""
    return f"“{e.title}”: {title_source(e, after_answer)}"


def title_source(e: TitleGenerated, after_answer: bool) -> str:
    """Whose title, and when: the model's, or the user's words and why the model's was not used."""
    when = "after the answer" if after_answer else "beside the answer, mid-stream"
    if e.source == "model":
        return f"written by the model ({when})"
    written = f"the model's “{e.model_title}” was not used: " if e.model_title else ""
    return f"the user's words ({when}); {written}{e.rejected or 'the model gave no usable title'}"


def engine_wait(started: TurnStarted) -> Stage | None:
    """The wait for the engine thread before the turn began (a turn, a title or a prewarm ran first)."""
    if started.queued_ms < WAIT_MS:
        return None
    detail = f"waited {ms(started.queued_ms)} for the engine thread (a turn, a title or a prewarm ran first)"
    return Stage(label="queue", kind="queue", start_ms=0.0, end_ms=started.queued_ms, detail=detail)


def timeline(events: Sequence[Event], started: TurnStarted | None, kept: int) -> Timeline:
    """The stages of a turn's events, ms from its submission (from its first event, without a `TurnStarted`)."""
    origin = started.timestamp - started.queued_ms / 1000 if started else events[0].timestamp
    t = Timeline(origin, kept)
    wait = engine_wait(started) if started else None
    if wait is not None:
        t.stages.append(wait)
    for event in events:
        t.take(event)
    t.end_decode()
    t.end_wire()
    return t
