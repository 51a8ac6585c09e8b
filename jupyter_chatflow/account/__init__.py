"""One account of each turn: every figure the views show, derived once from the turn's events (DESIGN.md,
"Figures: one account per turn").

>>> account = account_of(response.seen())        # a turn's events so far, or all of them
>>> account.ttft_ms, account.tokens_per_s, account.generated_note

The panel receives it beside each batch of events (through the generated TypeScript types), the cell's lines and
the static copy are written from it, `chatflow chat --json` prints it as its last line; no view recomputes a
figure. Where two figures differ by definition (the first token computed and shown, the tokens in the prompt and
in the prefill), the record carries both and the words that tell them apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from jupyter_chatflow.engine.plan import JOINED
from jupyter_chatflow.events import (
    Cancelled,
    Completed,
    Event,
    Failed,
    HttpRequest,
    PrefillDone,
    TitleGenerated,
    TokenDelta,
    ToolCall,
    TurnStarted,
)

from .calls import GUARD_WORDS, call_note
from .record import AccountStatus, GaugePart, Interval, RoundAccount, Stage, TurnAccount
from .timeline import Timeline, timeline, title_source
from .tokens import gather, generated_note, kept_tokens, round_account
from .words import ms

__all__ = [
    "GUARD_WORDS", "GaugePart", "Interval", "RoundAccount", "Stage", "TurnAccount", "account_of", "call_note",
    "settled",
]  # fmt: skip

TERMINAL = (Completed, Cancelled, Failed)


def account_of(events: Sequence[Event], prewarm: Mapping[str, Any] | None = None) -> TurnAccount:
    """The account of a turn from its events in sequence order (all of them, or those so far while it runs);
    `prewarm`: the draft prewarm that ran before it (`Chat.prewarm`'s `Prewarm` as a dict), if any."""
    if not events:
        return TurnAccount(status="live", remote=False)
    started = next((e for e in events if isinstance(e, TurnStarted)), None)
    kept = kept_tokens(events)
    t = timeline(events, started, kept)
    end = next((e for e in events if isinstance(e, TERMINAL)), None)
    rounds = tuple(round_account(r, kept if k == 0 else 0) for k, r in enumerate(gather(events)))
    return TurnAccount(
        status=_status(end), remote=any(isinstance(e, HttpRequest) for e in events), events=len(events),
        fork_of=started.fork_of if started else "",
        **_tokens(events, rounds, end, kept), **_times(events, t, started, end),
        prewarm_note=prewarm_note(prewarm, events), rounds=rounds, stages=_in_start_order(t.stages),
    )  # fmt: skip


def settled(end: Completed | Cancelled, events: Sequence[Event]) -> Completed | Cancelled:
    """A turn's terminal event (stamped: the last of `events`) with the figures its account derives from the events:
    the time to the first token, the prefill and decode time, the time to the end and tokens/s. The turn measured
    the rest (usage, the stages it timed); so the event, `chatflow chat --json`, the telemetry and every view carry
    one figure for each, not a second tally of the same thing (`Chat` settles each turn's end as it stamps it)."""
    a = account_of(events)
    answered = a.answer_ms if a.answer_ms is not None else end.timings.total_ms
    timings = dataclasses.replace(end.timings, ttft_ms=a.ttft_ms, prefill=a.prefill_ms, decode=a.decode_ms,
                                  total_ms=answered)  # fmt: skip
    if isinstance(end, Completed):
        return dataclasses.replace(end, timings=timings, tokens_per_s=a.tokens_per_s or 0.0)
    return dataclasses.replace(end, timings=timings)


def _status(end: Event | None) -> AccountStatus:
    if isinstance(end, Completed):
        return "completed"
    if isinstance(end, Cancelled):
        return "cancelled"
    return "error" if isinstance(end, Failed) else "live"


def _tokens(events: Sequence[Event], rounds: tuple[RoundAccount, ...], end: Event | None, kept: int) -> dict:
    answer = sum(isinstance(e, TokenDelta) for e in events)
    calls = [e for e in events if isinstance(e, ToolCall)]
    completion, unshown, note = generated_note(answer, calls, end, kept)
    usage = end.usage if isinstance(end, (Completed, Cancelled)) else None
    last = rounds[-1] if rounds else None
    return dict(
        prompt_tokens=usage.prompt_tokens if usage is not None else sum(r.context_tokens for r in rounds),
        context_tokens=last.context_tokens if last else 0, window=last.window if last else 0,
        prefill_tokens=sum(r.prefill_tokens for r in rounds), reused_tokens=sum(r.reused_tokens for r in rounds),
        computed_tokens=sum(r.computed_tokens for r in rounds),
        answer_tokens=answer, kept_tokens=kept,
        call_tokens=sum(c.tokens for c in calls), call_fixed_tokens=sum(c.forced_tokens for c in calls),
        completion_tokens=completion, unshown_tokens=unshown, generated_note=note,
    )  # fmt: skip


def _times(events: Sequence[Event], t: Timeline, started: TurnStarted | None, end: Event | None) -> dict:
    compiles = [c for s in t.stages for c in s.compiles]
    ttft = t.first_shown
    before = sum(_clipped(c, ttft) for c in compiles) if ttft is not None else 0.0
    queued = sum(s.end_ms - s.start_ms for s in t.stages if s.kind == "queue")
    answer_ms = t.at(end.timestamp) if end is not None else None
    title = next((e for e in events if isinstance(e, TitleGenerated)), None)
    after = max(0.0, t.at(title.timestamp) - answer_ms) if title is not None and answer_ms is not None else 0.0
    last = max([t.at(events[-1].timestamp), *(s.end_ms for s in t.stages)])
    rate, rate_note = tokens_per_s(t.stages, events, t)
    return dict(
        ttft_ms=ttft, first_computed_ms=t.first_computed,
        ttft_note=ttft_note(ttft, t.first_computed, queued, before, arrived=t.remote), queued_ms=queued,
        compile_ms=sum(c.end_ms - c.start_ms for c in compiles), compile_before_first_ms=before,
        prefill_ms=_lasted(t.stages, "prefill"), decode_ms=_lasted(t.stages, "decode"),
        tokens_per_s=rate, tokens_per_s_note=rate_note, answer_ms=answer_ms, title_after_ms=after, total_ms=last,
        title=title.title if title else "", title_note=title_source(title, after > 0) if title else "",
    )  # fmt: skip


def _clipped(c: Interval, until: float) -> float:
    return max(0.0, min(c.end_ms, until) - c.start_ms)


def _lasted(stages: Sequence[Stage], kind: str) -> float:
    return sum(s.end_ms - s.start_ms for s in stages if s.kind == kind)


def tokens_per_s(stages: Sequence[Stage], events: Sequence[Event], t: Timeline) -> tuple[float | None, str]:
    """Tokens per second over the ticks drawn: the intervals between each decode bar's ticks over the time they
    span, the compiling inside that span left out (a remote turn: over its tokens' arrivals)."""
    bars = [(s.ticks_ms, s.compiles) for s in stages if s.kind == "decode" and len(s.ticks_ms) > 1]
    if not any(s.kind == "decode" for s in stages):  # a remote turn: the tokens as they arrived
        arrived = tuple(t.at(e.computed_at) for e in events if isinstance(e, TokenDelta) and e.computed_at > 0)
        bars = [(arrived, ())] if len(arrived) > 1 else []
    steps = sum(len(ticks) - 1 for ticks, _ in bars)
    lasted = sum(ticks[-1] - ticks[0] for ticks, _ in bars)
    compiled = sum(_overlap(c, ticks[0], ticks[-1]) for ticks, compiles in bars for c in compiles)
    decoding = lasted - compiled
    if steps == 0 or decoding <= 0:
        return None, ""
    left_out = f", less {ms(compiled)} of XLA compiling" if compiled >= 1 else ""
    return steps / decoding * 1000, f"{steps} intervals between tokens over {ms(lasted)}{left_out}"


def _overlap(c: Interval, start: float, end: float) -> float:
    return max(0.0, min(c.end_ms, end) - max(c.start_ms, start))


def ttft_note(
    ttft: float | None, computed: float | None, queued: float, compiling: float, arrived: bool = False
) -> str:
    """What the time to the first token was made of (`arrived`: a remote turn's, whose tokens arrive)."""
    if ttft is None:
        return ""
    parts = [(ms(v), what) for v, what in ((queued, "waiting"), (compiling, "XLA compiling")) if v >= 1.0]
    said = [f"{v} of it {what}" if k == 0 else f"{v} {what}" for k, (v, what) in enumerate(parts)]
    note = f"first token {ms(ttft)}" + (f" ({', '.join(said)})" if said else "")
    if computed is not None and ttft - computed >= 1.0:
        came = "arrived" if arrived else "computed"
        note += f"; {came} at {ms(computed)}, shown once the next token began a word (the output scan)"
    return note


def prewarm_note(prewarm: Mapping[str, Any] | None, events: Sequence[Event]) -> str:
    """What the draft prewarm did, in the figures the panel's box under the input showed for it: the prompt's tokens
    it put in the prompt cache, whether it still ran when the message was sent (the turn joined it), and whether the
    prefill used them (and, if the prefill still compiled a new program, that it did)."""
    if not prewarm:
        return ""
    prefill = next((e for e in events if isinstance(e, PrefillDone)), None)
    joined = prefill is not None and prefill.queued_for == JOINED
    when = "still running when the message was sent: this turn joined it" if joined else "before this request"
    said = (f"Prewarmed while typing, {when}: {prewarm['prompt_tokens']} tokens "
            f"({prewarm['computed_tokens']} computed) in {ms(prewarm['latency_ms'])}")  # fmt: skip
    if prefill is None:
        return said
    if not prewarm["computed_tokens"]:
        why = "its draft was blocked, or a newer one stopped it" if not prewarm["prompt_tokens"] else "it held them"
        return f"{said} · it put nothing new in the prompt cache ({why}, or the send stopped it)"
    if prefill.reused_tokens <= prewarm.get("cached_before", 0):
        return f"{said} · not used: the prompt changed after it"
    compiled = f"; it still compiled a new prefill program for the rest ({ms(prefill.compile_ms)})"
    return f"{said} · used: this turn's prefill found them in the prompt cache" + (
        compiled if prefill.compile_ms >= 1.0 else ""
    )


def _in_start_order(stages: list[Stage]) -> tuple[Stage, ...]:
    """Sorted by start; stages that start together keep the order of their events."""
    return tuple(sorted(stages, key=lambda s: s.start_ms))
