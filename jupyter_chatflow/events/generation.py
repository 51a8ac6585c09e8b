"""The events of the model's work: a prefill, each generated token, a tool call and its result."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal

from jupyter_chatflow.engine.generation import Alternative

from .base import Event
from .kinds import CallGuard, PrefillKind
from .values import Head, Steering


@dataclasses.dataclass(frozen=True, kw_only=True)
class Intervened(Event):
    """The model that answers this turn is changed (`Chat.intervene`): attention heads knocked out, vectors added
    to the residual. Right after `TurnStarted`, so every view of the turn (the static copy, a replay) says so."""

    type: ClassVar[Literal["intervened"]] = "intervened"
    heads: tuple[Head, ...] = ()
    steering: tuple[Steering, ...] = ()

    def describe(self) -> str:
        """In words: "heads 3.1 and 3.4 knocked out; steered at layer 10 along … (strength 4)"."""
        parts = []
        if self.heads:
            names = [f"{h.layer}.{h.head}" for h in self.heads]
            listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
            parts.append(f"{'head' if len(names) == 1 else 'heads'} {listed} knocked out")
        for s in self.steering:
            how = f"strength {s.strength:g}" if s.strength else f"length {s.norm:.3g}"
            parts.append(f"steered after layer {s.layer} along {s.label} ({how})")
        return "; ".join(parts) or "nothing changed"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrefillDone(Event):
    """The prompt is in the KV cache; reused tokens came from the prompt cache."""

    type: ClassVar[Literal["prefill"]] = "prefill"
    prompt_tokens: int
    reused_tokens: int
    computed_tokens: int
    latency_ms: float
    compile_ms: float = 0.0
    """Of latency_ms, the time XLA spent compiling (or loading from its cache) programs new to the process."""
    queued_ms: float = 0.0
    """Before latency_ms: the wait for the engine's scheduler to start this prefill (`queued_for` says why)."""
    queued_for: str = ""
    """What the prefill waited for ("" when it did not wait): every row busy, another sequence's prefill, the
    running rows' decode step, or their batch's programs compiling."""
    kind: PrefillKind = "answer"
    context_tokens: int = 0
    """Of prompt_tokens, the round's assembled prompt (`ContextAssembled.prompt_tokens`); the rest are answer
    tokens after it: a fork's kept ones, or a tool call's beginning (0: not recorded, a stored older turn)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TokenDelta(Event):
    """One generated token. `text` is what became visible (after stop-string holdback and output redaction)."""

    type: ClassVar[Literal["token"]] = "token"
    index: int
    token_id: int
    """-1 in a remote turn: the Chat Completions API sends a token's bytes, not its id."""
    text: str
    logprob: float
    entropy: float
    """0 in a remote turn: a server sends at most its top 5 alternatives, not the distribution."""
    alternatives: tuple[Alternative, ...] = ()
    """In a remote turn, the server's `top_logprobs` (ids -1, sampling_prob -1: it does not send them)."""
    elapsed_ms: float = 0.0
    compile_ms: float = 0.0
    """XLA compile time since the previous token (a decode program's first call in the process), in elapsed_ms.
    A generation's first token comes out of its prefill: its compile_ms is that prefill's (`PrefillDone.compile_ms`),
    not more of it; add one of the two."""
    redacted: bool = False
    computed_at: float = 0.0
    """Monotonic seconds when the engine produced this token (`timestamp` is when it was shown: the output scan
    holds a word back until the next one); a remote turn's, when its bytes arrived. 0: not computed in this turn
    (a fork's kept token), or not recorded (a stored older turn)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToolCall(Event):
    """The model asked for a tool; the stream pauses here until the result. A call max_tokens `cut` is shown
    as written and never run: the turn ends with it (finish_reason "length")."""

    type: ClassVar[Literal["tool_call"]] = "tool_call"
    call_id: str
    name: str
    arguments: dict[str, Any]
    """The arguments, parsed ({} for a cut call: its `arguments_text` is what was written of them)."""
    constrained: bool = False
    """True when the arguments were decoded under a JSON-schema token mask."""
    decode_ms: float = 0.0
    """Time to write the call under the mask (its prefill and decode steps), ending at this event."""
    compile_ms: float = 0.0
    """Of decode_ms after the call's prefill, the time XLA spent compiling programs new to the process."""
    tokens: int = 0
    """Tokens of the call's text, `<tool_call>` (or the line after it) to `</tool_call>`."""
    forced_tokens: int = 0
    """Of those, the ones the grammar fixed (keys, punctuation, a sole tool's name), as the tokenizer spells them;
    the others are the model's choices under the mask."""
    arguments_text: str = ""
    """The arguments as JSON text, as the model wrote them ("": not recorded, a remote turn's or an older one)."""
    cut: bool = False
    """max_tokens ran out before `</tool_call>`: `tokens` were written, `arguments_text` holds them; not run."""
    guard: CallGuard = ""
    """The rule that ended one of the string arguments the model did not end itself ("" when it ended them all)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToolResult(Event):
    """A tool's output or error, which goes back into the context."""

    type: ClassVar[Literal["tool_result"]] = "tool_result"
    call_id: str
    name: str
    output: str = ""
    error: str = ""
    latency_ms: float = 0.0
    """The tool's own run (checking the arguments, the call, formatting its output), ending at this event."""
