"""Forking a turn from one of its tokens: the answer up to that token is kept, an alternative takes its place.

The fork is an ordinary turn whose answer starts with those tokens (`TurnSetup.prefix`): its prompt and the kept
tokens are already in the prompt cache from the forked turn, so only the chosen token is computed before the
model goes on. The kept tokens carry the logprobs, entropies and alternatives the sampler saw the first time
(the context is the same, so those numbers are unchanged); the chosen token, its own logprob from that step.
"""

from __future__ import annotations

from typing import Any

from jupyter_chatflow.engine.generation import Alternative, Step
from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.store.sessions import TurnRecord
from jupyter_chatflow.tokenizer.tokenizer import StreamDecoder, Tokenizer

from .request import ChatRequest, Features, RequestError


def fork_request(
    parent: TurnRecord, index: int, token_id: int, tokenizer: Tokenizer, session: str
) -> tuple[ChatRequest, tuple[Step, ...]]:
    """The request that repeats `parent` (same message, settings and features), and the answer's first tokens."""
    events = parent.events
    started = events[0] if events and events[0].get("type") == "turn_started" else None
    if started is None:
        raise RequestError(f"Turn {parent.id} has no request to repeat.")
    if any(e.get("type") == "tool_call" for e in events):
        raise RequestError("A turn with tool calls cannot be forked yet: fork a turn that answered directly.")
    deltas = [e for e in events if e.get("type") == "token"]
    if not 0 <= index < len(deltas):
        raise RequestError(f"Turn {parent.id} has tokens 0–{len(deltas) - 1}; there is no token {index} to fork from.")
    chosen = _chosen(deltas[index], token_id)
    request = ChatRequest(
        text=started["user"], session=session, system=_system(events), params=_params(started["params"]),
        features=_features(started["features"]), fork_of=parent.id, fork_index=index,
    )  # fmt: skip
    return request, _steps(deltas[:index], chosen, token_id, tokenizer)


def _chosen(delta: dict[str, Any], token_id: int) -> dict[str, Any]:
    """The step at the fork with `token_id` in place of the sampled token."""
    if token_id == delta["token_id"]:
        return {**delta, "chosen_logprob": delta["logprob"]}
    alternative = next((a for a in delta["alternatives"] if a["token_id"] == token_id), None)
    if alternative is None:
        known = ", ".join(str(a["token_id"]) for a in delta["alternatives"])
        raise RequestError(f"Token {token_id} was not among the alternatives at token {delta['index']} ({known}).")
    return {**delta, "chosen_logprob": alternative["logprob"]}


def _steps(kept: list[dict[str, Any]], chosen: dict[str, Any], token_id: int, tokenizer: Tokenizer) -> tuple[Step, ...]:
    decoder = StreamDecoder(tokenizer)
    steps = [
        Step(index=i, token_id=d["token_id"], text=decoder.push(d["token_id"]), logprob=d["logprob"],
             entropy=d["entropy"], top_alternatives=_alternatives(d), elapsed_ms=0.0)
        for i, d in enumerate(kept)
    ]  # fmt: skip
    ends = token_id in tokenizer.stop_ids  # choosing to end the answer here: the token shows no text
    text = decoder.flush() if ends else decoder.push(token_id) + decoder.flush()
    steps.append(Step(index=len(kept), token_id=token_id, text=text,
                      logprob=chosen["chosen_logprob"], entropy=chosen["entropy"],
                      top_alternatives=_alternatives(chosen), elapsed_ms=0.0))  # fmt: skip
    return tuple(steps)


def _alternatives(delta: dict[str, Any]) -> tuple[Alternative, ...]:
    return tuple(Alternative(**a) for a in delta["alternatives"])


def _system(events: tuple[dict[str, Any], ...]) -> str | None:
    """The system prompt the forked turn used (its `system` segment)."""
    context = next((e for e in events if e.get("type") == "context_assembled"), None)
    segments = context["segments"] if context else []
    return next((s["text"] for s in segments if s["kind"] == "system"), None)


def _params(params: dict[str, Any]) -> SamplingParams:
    return SamplingParams(**{**params, "stop": tuple(params.get("stop", ()))})


def _features(features: dict[str, Any]) -> Features:
    return Features(**{**features, "tools": tuple(features.get("tools", ()))})
