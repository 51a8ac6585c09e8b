"""The account of one turn, as a typed record: every figure a view shows of the turn, with the words that explain
where two of them differ. `account_of` (`account/__init__.py`) fills it from the turn's events; the panel (through
the generated TypeScript types), the cell's lines, the static copy, the CLI's `--json` and the tour read it.

Times are milliseconds from the request's submission (`TurnStarted.timestamp - TurnStarted.queued_ms`), so the
wait for the engine thread is part of the turn and nothing has a negative time.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

AccountStatus = Literal["live", "completed", "cancelled", "error"]
"""Where the turn stands: still running, or how it ended (its terminal event's type)."""
StageKind = Literal["queue", "safety", "memory", "context", "tokenize", "prefill", "decode", "tool", "title", "http"]
"""What a timeline bar stands for (its colour)."""
GaugeKind = Literal[
    "system", "memory", "tools", "history", "user", "tool", "generated", "template", "answer", "call", "reserve",
    "free",
]  # fmt: skip
"""A part of the context window: a prompt segment's kind (`SegmentKind`), then the round's output (the answer's
tokens, or a tool call's), the rest of the room reserved for the output, and the free rest."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Interval:
    """A stretch of time, in ms from the submission."""

    start_ms: float
    end_ms: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class Stage:
    """One bar of the timeline: a stage of the turn from its start to its end."""

    label: str
    kind: StageKind
    start_ms: float
    end_ms: float
    detail: str
    ticks_ms: tuple[float, ...] = ()
    """A decode bar: when each token shown was computed; an SSE bar: when each frame arrived."""
    compiles: tuple[Interval, ...] = ()
    """Inside the bar: the stretches XLA spent compiling (or loading) programs new to the process."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class GaugePart:
    """One part of the context window's gauge, in tokens."""

    kind: GaugeKind
    label: str
    tokens: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class RoundAccount:
    """One request to the model: its prompt in the window, its prefills, and what it generated."""

    context_tokens: int
    """The prompt assembled for the window (`ContextAssembled.prompt_tokens`, the tokenizer's ids)."""
    window: int
    reserved_output: int
    """Of the window, the room kept for the output (max_tokens)."""
    prefill_tokens: int
    """Tokens its prefills put in the KV cache: the prompt, and a fork's kept answer or a tool call's beginning."""
    reused_tokens: int
    """Of prefill_tokens, those the prompt cache already held."""
    computed_tokens: int
    prefill_note: str
    """Its prefills in words: what they held beyond the prompt, what the prompt cache gave ("" when none ran)."""
    answer_tokens: int
    """Tokens of the answer shown in this round."""
    call_tokens: int
    """Tokens of the tool call this round ended with (0: none)."""
    used_tokens: int
    """Of the window: the prompt and the round's output."""
    gauge: tuple[GaugePart, ...]
    """The window, part by part: the prompt's segment kinds, the output, the unused reserve, the free rest (they
    add up to the window)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TurnAccount:
    """Every figure of one turn, derived once from its events."""

    status: AccountStatus
    remote: bool
    """The turn went to a server (its model's internals are not known here)."""
    events: int = 0
    """How many of the turn's events it was derived from (a view keeps the one from the most)."""
    fork_of: str = ""
    # ---- tokens -------------------------------------------------------------------------------------------------
    prompt_tokens: int | None = 0
    """Every round's prompt counted (usage; None: a server did not report it)."""
    context_tokens: int = 0
    """The last round's prompt, in the window."""
    window: int = 0
    prefill_tokens: int = 0
    """Tokens put in the KV cache by every prefill of the turn (prompts, a fork's kept answer, calls' beginnings)."""
    reused_tokens: int = 0
    """Of prefill_tokens, those the prompt cache already held."""
    computed_tokens: int = 0
    answer_tokens: int = 0
    """Tokens of the answer as shown (a fork's kept and chosen ones included)."""
    kept_tokens: int = 0
    """Of answer_tokens, a fork's: the forked answer's tokens it kept and the alternative chosen in its place."""
    call_tokens: int = 0
    """Tokens of the turn's tool calls, `<tool_call>` (or the line after it) to `</tool_call>`."""
    call_fixed_tokens: int = 0
    """Of call_tokens, those the grammar fixed (keys, punctuation, a sole tool's name)."""
    completion_tokens: int | None = None
    """Every token the model output, as usage counts it (None: not known yet, or a server did not report it)."""
    unshown_tokens: int | None = None
    """Of completion_tokens, neither in the answer nor in a call: the end-of-sequence token, a stop string's."""
    generated_note: str = ""
    """completion_tokens in words, each part named ("47 tokens generated: 12 in the answer + 34 in the tool call
    + 1 end-of-sequence token, not shown")."""
    # ---- time (ms from the submission) ------------------------------------------------------------------------
    ttft_ms: float | None = None
    """When the first token was shown (None: none was)."""
    first_computed_ms: float | None = None
    """When the engine computed the first token shown (the output scan holds a word back until the next one)."""
    ttft_note: str = ""
    """What the time to the first token was made of, in words."""
    queued_ms: float = 0.0
    """Waits drawn as queue bars: for the engine thread, then for the scheduler to start each prefill."""
    compile_ms: float = 0.0
    """XLA compiling (or loading) programs new to the process, every compile bar's stretch."""
    compile_before_first_ms: float = 0.0
    """Of compile_ms, the part before the first token was shown."""
    prefill_ms: float = 0.0
    decode_ms: float = 0.0
    tokens_per_s: float | None = None
    """Over the decode bars' ticks: intervals between tokens shown, over their time less the compiling inside it
    (None: fewer than two ticks in a bar)."""
    tokens_per_s_note: str = ""
    answer_ms: float | None = None
    """From the submission to the turn's end (None while it runs)."""
    title_after_ms: float = 0.0
    """Title work after the answer's end (0: none, or the title came mid-answer)."""
    total_ms: float = 0.0
    """From the submission to the last event (the title's, when it came after the answer)."""
    title: str = ""
    title_note: str = ""
    """Whose title it is and when it came ("the user's words (after the answer); the model's “Paris Answer” was
    not used: …")."""
    prewarm_note: str = ""
    """What the draft prewarm did for this turn ("" when none ran)."""
    # ---- views ------------------------------------------------------------------------------------------------
    rounds: tuple[RoundAccount, ...] = ()
    stages: tuple[Stage, ...] = ()
    """The timeline's bars, in order of their start."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what the panel and `chatflow chat --json` receive)."""
        return _plain(self)


def _plain(value: Any) -> Any:
    """Dataclasses as dicts and tuples as lists, all the way down, as JSON reads them back (`dataclasses.asdict`
    deep-copies every value: ~50x slower on a long answer's ticks, which the panel receives several times a second)."""
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [v if isinstance(v, float) else _plain(v) for v in value]
    return value
