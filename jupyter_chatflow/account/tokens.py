"""A turn's tokens: each round's prompt, prefills and output, the window's gauge, and what the model generated.

A round is one request to the model: it starts at a `ContextAssembled` (the prompt for the window), prefills it
(with a fork's kept answer after it, or a tool call's beginning), and ends with an answer or a tool call, whose
result the next round's prompt carries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from jupyter_chatflow.events import (
    Cancelled,
    Completed,
    ContextAssembled,
    Event,
    PrefillDone,
    TokenDelta,
    ToolCall,
    TurnStarted,
)

from .record import GaugeKind, GaugePart, RoundAccount
from .words import tokens as count

LABELS: dict[GaugeKind, str] = {
    "system": "system", "memory": "memory", "tools": "tools", "history": "history", "user": "user",
    "tool": "tool result", "generated": "the model's call, fed back", "template": "chat template",
    "answer": "answer", "call": "tool call written", "reserve": "reserved for the output, unused", "free": "free",
}  # fmt: skip
"""The gauge's words for each part: a prompt segment's kind, the round's output, the reserve and the free rest."""


@dataclasses.dataclass
class _Round:
    """What one round's events said, gathered in order."""

    assembled: ContextAssembled
    prefills: list[PrefillDone] = dataclasses.field(default_factory=list)
    answer: int = 0  # tokens shown in this round
    call: ToolCall | None = None


def gather(events: Sequence[Event]) -> list[_Round]:
    """The rounds of a turn's events (none for a remote turn: its prompt is assembled on the server)."""
    rounds: list[_Round] = []
    for event in events:
        if isinstance(event, ContextAssembled):
            rounds.append(_Round(event))
        elif rounds and isinstance(event, PrefillDone):
            rounds[-1].prefills.append(event)
        elif rounds and isinstance(event, TokenDelta):
            rounds[-1].answer += 1
        elif rounds and isinstance(event, ToolCall):
            rounds[-1].call = event
    return rounds


def round_account(r: _Round, kept: int) -> RoundAccount:
    """One round's figures; `kept`: the fork's kept and chosen tokens its answer starts with (round 0 only)."""
    a = r.assembled
    output_kind: GaugeKind = "call" if r.call is not None else "answer"
    output = r.call.tokens if r.call is not None else r.answer
    return RoundAccount(
        context_tokens=a.prompt_tokens, window=a.window, reserved_output=a.reserved_output,
        prefill_tokens=sum(p.prompt_tokens for p in r.prefills), reused_tokens=sum(p.reused_tokens for p in r.prefills),
        computed_tokens=sum(p.computed_tokens for p in r.prefills), prefill_note=prefill_note(r, kept),
        answer_tokens=r.answer, call_tokens=r.call.tokens if r.call is not None else 0,
        used_tokens=a.prompt_tokens + output, gauge=gauge(a, output_kind, output),
    )  # fmt: skip


def gauge(assembled: ContextAssembled, output_kind: GaugeKind, output: int) -> tuple[GaugePart, ...]:
    """The window part by part: the prompt by segment kind (in first-seen order), the output, what is left of the
    room reserved for it, and the free rest; they add up to the window."""
    sizes: dict[GaugeKind, int] = {}
    for segment in assembled.segments:
        sizes[segment.kind] = sizes.get(segment.kind, 0) + segment.tokens
    prompt, reserved = assembled.prompt_tokens, assembled.reserved_output
    sizes[output_kind] = output
    sizes["reserve"] = max(0, reserved - output)
    sizes["free"] = max(0, assembled.window - prompt - max(reserved, output))
    return tuple(GaugePart(kind=k, label=LABELS[k], tokens=n) for k, n in sizes.items() if n or k == "free")


def prefill_note(r: _Round, kept: int) -> str:
    """The round's prefills in words: "prefill 435 tokens (the 416-token prompt + 19 of the tool call, the
    beginning the grammar fixed): 20 from the prompt cache, 415 computed"."""
    said = [_one_prefill(p, r.assembled.prompt_tokens, kept, before) for before, p in _answered_before(r)]
    return "; then ".join(said)


def _answered_before(r: _Round) -> list[tuple[bool, PrefillDone]]:
    """Each prefill, and whether the round had shown answer text before it (a call after some answer)."""
    return [(k > 0 and r.answer > 0, p) for k, p in enumerate(r.prefills)]


def _one_prefill(p: PrefillDone, context: int, kept: int, after_answer: bool) -> str:
    prompt = p.context_tokens or context
    beyond = _beyond(p, p.prompt_tokens - prompt, kept, after_answer)
    said = f"the {prompt:,}-token prompt{beyond}" if beyond else "the prompt"
    return (f"prefill {count(p.prompt_tokens)} ({said}): {p.reused_tokens:,} from the prompt cache, "
            f"{p.computed_tokens:,} computed")  # fmt: skip


def _beyond(p: PrefillDone, extra: int, kept: int, after_answer: bool) -> str:
    """What a prefill held after the round's prompt: a tool call's beginning, or a fork's kept answer."""
    if extra <= 0:
        return ""
    if p.kind == "tool_call":
        before = "the answer so far, <tool_call> and " if after_answer else ""
        return f" + {extra} of the tool call, {before}the beginning the grammar fixed"
    if not kept:
        return f" + {extra} of the answer"
    lost = ("; the forked turn was no longer in the prompt cache (other turns pushed it out), so only what it "
            "shares with another cached conversation came from there") if p.computed_tokens > 1 else ""  # fmt: skip
    return f" + {extra} of the answer: {_kept_words(kept)}{lost}"


def _kept_words(kept: int) -> str:
    """The tokens a fork's answer starts with: those of the forked answer before the token, and the chosen one."""
    return f"{kept - 1} kept from the forked answer and the chosen token" if kept > 1 else "the chosen token"


def kept_tokens(events: Sequence[Event]) -> int:
    """A fork's answer starts with the forked answer's tokens before its token and the alternative chosen there."""
    started = next((e for e in events if isinstance(e, TurnStarted)), None)
    if started is None or not started.fork_of:
        return 0
    shown = sum(isinstance(e, TokenDelta) for e in events)
    return min(shown, started.fork_index + 1)


def generated_note(
    answer: int, calls: Sequence[ToolCall], end: Event | None, kept: int
) -> tuple[int | None, int | None, str]:
    """completion_tokens (usage's, once the turn has ended with `end`), the tokens not shown, and the sum in words:
    `answer` tokens shown (`kept` of them a fork's) and the tokens of `calls`."""
    call = sum(c.tokens for c in calls)
    completion = end.usage.completion_tokens if isinstance(end, (Completed, Cancelled)) else None
    unshown = None if completion is None else max(0, completion - answer - call)
    parts = [_answer_words(answer, kept)] if answer or not calls else []
    if call:  # (0: a stored turn from before calls were counted)
        fixed = sum(c.forced_tokens for c in calls)
        parts.append(f"{call} in the tool call{'s' if len(calls) > 1 else ''} ({fixed} fixed by the grammar)")
    if unshown:
        parts.append(_unshown_words(unshown, end))
    head = f"{count(completion)} generated" if completion is not None else "so far"
    return completion, unshown, f"{head}: {' + '.join(parts)}" if parts else head


def _answer_words(answer: int, kept: int) -> str:
    return f"{answer} in the answer" + (f" ({_kept_words(kept)})" if kept else "")


def _unshown_words(n: int, end: Event | None) -> str:
    if n == 1 and isinstance(end, Completed) and end.finish_reason == "stop":
        return "1 end-of-sequence token, not shown"
    return f"{n} not shown (the end-of-sequence token, a stop string's, a call's opening, text a layer held back)"
