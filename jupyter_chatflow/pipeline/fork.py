"""Forking a turn from one of its tokens: the answer up to that token is kept, an alternative takes its place; or
answering it again from its start on a changed model (`repeat_request`, `intervened_event`: `Chat.intervene`).

The fork is an ordinary turn whose answer starts with those tokens (`TurnSetup.prefix`): its prompt and the kept
tokens are already in the prompt cache from the forked turn, so only the chosen token is computed before the
model goes on. The kept tokens carry the logprobs, entropies and alternatives the sampler saw the first time
(the context is the same, so those numbers are unchanged); the chosen token, its own logprob from that step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jupyter_chatflow.engine.generation import Step
from jupyter_chatflow.engine.intervention import Intervention
from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.events import (
    ContextAssembled,
    Event,
    Head,
    Intervened,
    Steering,
    TokenDelta,
    ToolCall,
    TurnStarted,
)
from jupyter_chatflow.store.sessions import TurnRecord
from jupyter_chatflow.tokenizer.tokenizer import StreamDecoder, Tokenizer

from .request import ChatRequest, Features, RequestError


def fork_request(
    parent: TurnRecord, index: int, token_id: int, tokenizer: Tokenizer, session: str
) -> tuple[ChatRequest, tuple[Step, ...]]:
    """The request that repeats `parent` (same message, settings and features), and the answer's first tokens."""
    events = parent.events
    if any(isinstance(e, ToolCall) for e in events):
        raise RequestError("A turn with tool calls cannot be forked yet: fork a turn that answered directly.")
    deltas = [e for e in events if isinstance(e, TokenDelta)]
    if not 0 <= index < len(deltas):
        raise RequestError(f"Turn {parent.id} has tokens 0–{len(deltas) - 1}; there is no token {index} to fork from.")
    chosen_logprob = _chosen_logprob(deltas[index], token_id)
    request = repeat_request(parent, session, fork_index=index)
    return request, _steps(deltas[:index], deltas[index], chosen_logprob, token_id, tokenizer)


def repeat_request(parent: TurnRecord, session: str, fork_index: int = -1) -> ChatRequest:
    """The request of `parent` again (its message, system prompt, settings and features), as a fork of it: from
    its token `fork_index`, or (-1) answered anew from the start (an intervention, `Chat.intervene`)."""
    events = parent.events
    started = events[0] if events and isinstance(events[0], TurnStarted) else None
    if started is None:
        raise RequestError(f"Turn {parent.id} has no request to repeat.")
    return ChatRequest(
        text=started.user, session=session, system=_system(events), params=_params(started.params),
        features=_features(started.features), fork_of=parent.id, fork_index=fork_index,
    )  # fmt: skip


def intervened_event(intervention: Intervention) -> Intervened:
    """The turn's record of an intervention: which heads, and each steering's layer, label, strength and length."""
    heads = tuple(Head(layer=layer, head=h) for layer, hs in sorted(intervention.ablated.items()) for h in hs)
    steering = tuple(
        Steering(layer=layer, label=s.label, strength=s.strength, norm=float(np.linalg.norm(s.vector)))
        for layer, s in sorted(intervention.steered.items())
    )  # fmt: skip
    return Intervened(heads=heads, steering=steering)


def _chosen_logprob(delta: TokenDelta, token_id: int) -> float:
    """The logprob of `token_id` at the fork: the sampled token's, or the alternative's."""
    if token_id == delta.token_id:
        return delta.logprob
    alternative = next((a for a in delta.alternatives if a.token_id == token_id), None)
    if alternative is None:
        known = ", ".join(str(a.token_id) for a in delta.alternatives)
        raise RequestError(f"Token {token_id} was not among the alternatives at token {delta.index} ({known}).")
    return alternative.logprob


def _steps(
    kept: list[TokenDelta], at: TokenDelta, chosen_logprob: float, token_id: int, tokenizer: Tokenizer
) -> tuple[Step, ...]:
    decoder = StreamDecoder(tokenizer)
    steps = [
        Step(index=i, token_id=d.token_id, text=decoder.push(d.token_id), logprob=d.logprob, entropy=d.entropy,
             top_alternatives=d.alternatives, elapsed_ms=0.0)
        for i, d in enumerate(kept)
    ]  # fmt: skip
    ends = token_id in tokenizer.stop_ids  # choosing to end the answer here: the token shows no text
    text = decoder.flush() if ends else decoder.push(token_id) + decoder.flush()
    steps.append(Step(index=len(kept), token_id=token_id, text=text, logprob=chosen_logprob, entropy=at.entropy,
                      top_alternatives=at.alternatives, elapsed_ms=0.0))  # fmt: skip
    return tuple(steps)


def _system(events: Sequence[Event]) -> str | None:
    """The system prompt the forked turn used (its `system` segment)."""
    context = next((e for e in events if isinstance(e, ContextAssembled)), None)
    segments = context.segments if context else ()
    return next((s.text for s in segments if s.kind == "system"), None)


def _params(params: dict[str, Any]) -> SamplingParams:
    return SamplingParams(**{**params, "stop": tuple(params.get("stop", ()))})


def _features(features: dict[str, Any]) -> Features:
    return Features(**{**features, "tools": tuple(features.get("tools", ()))})
