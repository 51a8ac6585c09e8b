"""Layers, actions and helpers for building `events.SafetyDecision` records.

Decisions are built without sequence number, turn id or timestamp: the turn's `Emitter` stamps those. Actions are
ordered allow < flag < redact < block; merging decisions keeps the strongest action.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import get_args

from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.events import SafetyAction, SafetyDecision, SafetyLayer, Span
from jupyter_chatflow.model.compile_clock import compile_seconds

from .taxonomy import describe

__all__ = [
    "ACTIONS",
    "LAYERS",
    "SafetyConfigError",
    "check_action",
    "check_layer",
    "describe_spans",
    "merge",
    "since",
    "strongest",
]

LAYERS: tuple[SafetyLayer, ...] = get_args(SafetyLayer)  # input, model, output, tool
ACTIONS: tuple[SafetyAction, ...] = get_args(SafetyAction)  # allow < flag < redact < block


class SafetyConfigError(ChatflowError):
    """A safety setting that cannot work: an unknown mode, layer, action or threshold."""


def check_layer(layer: str) -> SafetyLayer:
    """`layer` if it is a known layer, else SafetyConfigError."""
    for known in LAYERS:
        if layer == known:
            return known
    raise SafetyConfigError(f"Unknown safety layer {layer!r}: use one of {', '.join(LAYERS)}.")


def check_action(action: str, allowed: Sequence[SafetyAction] = ACTIONS) -> SafetyAction:
    """`action` if it is one of `allowed`, else SafetyConfigError."""
    for known in allowed:
        if action == known:
            return known
    raise SafetyConfigError(f"Unknown safety action {action!r}: use one of {', '.join(allowed)}.")


def strongest(actions: Iterable[str]) -> SafetyAction:
    """The strongest of `actions` (allow when there are none)."""
    return ACTIONS[max(map(ACTIONS.index, actions), default=0)]


def since(start: float) -> float:
    """Milliseconds since `start`, a `time.perf_counter()` reading."""
    return (time.perf_counter() - start) * 1000.0


def compiled_since(clock: float) -> float:
    """Milliseconds this thread spent XLA compiling since `clock`, a `compile_seconds()` reading: what a guard that
    runs the model (the intent probe, the model guard) reports as its decision's `compile_ms`."""
    return (compile_seconds() - clock) * 1000.0


def describe_spans(verb: str, spans: Sequence[Span]) -> str:
    """A short sentence such as "Redacted 2 spans: pii:email, pii:phone."."""
    names = sorted({s.category for s in spans})
    return f"{verb} {len(spans)} span{'s' * (len(spans) != 1)}: {', '.join(describe(n) for n in names)}."


def merge(decisions: Sequence[SafetyDecision], *, layer: str, guard: str = "") -> SafetyDecision:
    """One decision for a layer from several guards' decisions: the strongest action, everything found, summed time."""
    action = strongest(d.action for d in decisions)
    categories = tuple(dict.fromkeys(c for d in decisions for c in d.categories))
    scores: dict[str, float] = {}
    for decision in decisions:
        for name, score in decision.scores.items():
            scores[name] = max(score, scores.get(name, 0.0))
    reasons = [d.reason for d in decisions if d.reason and d.action != "allow"]
    return SafetyDecision(
        layer=check_layer(layer),
        action=action,
        guard=guard or "+".join(dict.fromkeys(d.guard for d in decisions)) or "none",
        categories=categories,
        scores=scores,
        spans=tuple(sorted((s for d in decisions for s in d.spans), key=lambda s: (s.start, s.end))),
        reason=" ".join(reasons) or "Nothing found.",
        latency_ms=sum(d.latency_ms for d in decisions),
        compile_ms=sum(d.compile_ms for d in decisions),
        replacement=next((d.replacement for d in decisions if d.action == "block"), ""),
    )
