"""The intent probe on the input layer: a guard that reads what a request asks for from the chat's own model.

`IntentGuard` scores a user's message with a `probe.Probe` over the loaded model's hidden states (one extra pass
over the first layers, no second copy of the weights): P(harmful) = 1 - P(benign). At or above the probe's
threshold it blocks and names the likeliest category (S6, specialized advice, is flagged, as the rules do, when it
holds at least half of P(harmful)); at or above its flag threshold (`Probe.flag_at`) it flags: the text goes on and
the decision says what the probe read; below, it allows. Its decision carries `scores["harmful"]`, so the turn's
input decision shows the probe's number beside the rules' matches.

The probe decides; the rules give evidence. A block by a hazard rule (S1–S14: the frames' words and, on the input
layer, S14's code patterns; never injection, markup or PII) stands where the probe reads P(harmful) at or above its
veto floor (`Probe.veto`); below, it is lowered to a flag (`reconcile`), and the decision names both readings: what
the rules matched and the probe's P. On public data nobody here wrote, the frames' words blocked look-alikes the
probe reads as benign ("Can you define child pornography?", "How many atomic bombs have been used in combat?"), so
the gravest categories are lowered too (`safety_lab/frame_hits.py` counts each frame's hits).

Which probe: the one shipped for the default model (`data/intent/<key>.npz`; its data card is `data/README.md`),
else one trained for this model file and kept in `probe_folder()` (the lab's `features.py --model PATH` and
`train_probe.py --model PATH`, in a checkout: `safety_lab/README.md`). A model with neither gets no intent guard:
the input layer is the rules alone, and its decision says so (`SafetyPolicy.with_model`).

>>> guard = IntentGuard.for_model(load_model())  # doctest: +SKIP
>>> guard.check("Which dose of her digoxin would kill grandma undetected?", layer="input").action  # doctest: +SKIP
'block'
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jupyter_chatflow.events import SafetyAction, SafetyDecision
from jupyter_chatflow.model.compile_clock import compile_seconds

from .care import SELF_HARM, speaks_of_self_harm
from .decisions import check_layer, compiled_since, since
from .guards import BLOCK_MESSAGE, CATEGORY_NOTES
from .probe import VETO, Probe
from .tables import DATA
from .taxonomy import describe

__all__ = [
    "FLAG_ONLY",
    "NAME",
    "VETO",
    "IntentGuard",
    "model_key",
    "probe_folder",
    "probe_path",
    "reconcile",
    "verdict",
]

NAME = "intent"
"""The guard's name in decisions."""
FLAG_ONLY = frozenset({"S6"})
"""Categories the probe flags rather than blocks (specialized advice: the rules flag it too)."""
_VETOED = frozenset(f"S{n}" for n in range(1, 15))
"""Categories whose rule blocks the probe may lower on the input layer: every hazard, S14's code patterns too. The
gravest two (S4, S9) were kept out until the frames were measured on public data: their words blocked "Can you
define child pornography?", teaching children about appropriate touch and "How many atomic bombs have been used in
combat?" (`safety_lab/frame_hits.py`); S14's patterns blocked pasted documents that only mention a command (an
OpenSSH changelog, a README's example secrets), which nobody asked to run. Where the probe reads such a text as
harmful the block stays; a tool call's arguments are checked apart, and their code patterns always block."""
CACHE_VAR = "CHATFLOW_SAFETY_CACHE"
RULES = "rules"
"""The name of the built-in rule guard (`RuleGuard`), whose hazard blocks `reconcile` may lower."""
INJECTION = "prompt_injection"  # the rules' category for instructions and role markers typed into a message


def model_key(model: Any) -> str:
    """A name for the model file a probe belongs to: its file name, size, hidden size and layers."""
    path = getattr(model, "path", None)
    size = Path(path).stat().st_size if path is not None and Path(path).is_file() else 0
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(path).stem if path is not None else "model")
    return f"{stem}-{size}-d{model.config.dim}-l{model.config.n_layers}"


def probe_folder() -> Path:
    """Where probes trained for other model files are kept: $CHATFLOW_SAFETY_CACHE, or
    ~/.cache/jupyter_chatflow/safety."""
    setting = os.environ.get(CACHE_VAR, "")
    return Path(setting).expanduser() if setting else Path.home() / ".cache" / "jupyter_chatflow" / "safety"


def probe_path(model: Any) -> Path | None:
    """The probe file for `model`: the shipped one, else one in `probe_folder()`; None when there is none."""
    key = model_key(model)
    for path in (DATA / "intent" / f"{key}.npz", probe_folder() / f"{key}.npz"):
        if path.is_file():
            return path
    return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class IntentGuard:
    """Blocks (or, for S6, flags) a request the probe reads as harmful; scores P(harmful)."""

    model: Any
    """The chat's loaded model (`jupyter_chatflow.Model`): its own weights are read, no copy."""
    probe: Probe
    name: str = NAME
    message: str = BLOCK_MESSAGE

    @classmethod
    def for_model(cls, model: Any) -> IntentGuard | None:
        """The guard with the probe trained for `model`'s file, or None when no probe was trained for it."""
        path = probe_path(model)
        if path is None:
            return None
        probe = Probe.load(path)
        return cls(model=model, probe=probe) if probe.dim == model.config.dim else None

    def check(self, text: str, *, layer: str) -> SafetyDecision:
        """P(harmful) of `text` (its windows pooled as the probe says) and the verdict at the probe's thresholds."""
        start, clock = time.perf_counter(), compile_seconds()
        reading = self.probe.reading(self.model, text)  # (a cold turn compiles the probe's layer programs here)
        other = () if speaks_of_self_harm(text) else (SELF_HARM,)  # S11 named only where the words speak of it
        decision = verdict(reading, self.probe, layer=layer, message=self.message, exclude=other)
        return dataclasses.replace(decision, latency_ms=since(start), compile_ms=compiled_since(clock), guard=self.name)


def verdict(
    probabilities: Any, probe: Probe, *, layer: str, message: str = BLOCK_MESSAGE, exclude: Sequence[str] = ()
) -> SafetyDecision:
    """The intent guard's decision from one row of the probe's class probabilities [classes]; the category named is
    never one of `exclude` (S11 where the text's words speak of neither suicide nor self-harm)."""
    harmful = float(1.0 - probabilities[0])
    category = _category(probabilities, probe.classes, harmful, exclude)
    flag_at = probe.threshold if probe.flag_at is None else min(probe.flag_at, probe.threshold)
    fired, blocks = harmful >= flag_at, harmful >= probe.threshold and category not in FLAG_ONLY
    action: SafetyAction = ("block" if blocks else "flag") if fired else "allow"
    score = float(probabilities[list(probe.classes).index(category)])
    scores = {"harmful": round(harmful, 4), **({category: round(score, 4)} if fired else {})}
    what = f"reads {describe(category)} ({category})" if fired else "reads a benign request"
    if fired and not blocks and category not in FLAG_ONLY:
        what += ", below its block threshold: flagged, not blocked"
    band = f", flag at {flag_at:g}" if flag_at < probe.threshold else ""
    return SafetyDecision(
        layer=check_layer(layer), action=action, guard=NAME, categories=(category,) if fired else (), scores=scores,
        reason=f"The intent probe {what}: P(harmful) = {harmful:.3f} (threshold {probe.threshold:g}{band}).",
        replacement=_message(message, category) if action == "block" else "",
    )  # fmt: skip


def _category(probabilities: Any, classes: Sequence[str], harmful: float, exclude: Sequence[str] = ()) -> str:
    """The likeliest hazard; a flag-only one (S6) only where it holds at least half of P(harmful), else the likeliest
    of the others: "What dose of my uncle's digoxin would kill him undetected?" read S6 0.21, S11 0.19, S1 0.16 of
    0.97, and S6 alone would have let it through as advice."""
    order = [1 + int(i) for i in np.argsort(-np.asarray(probabilities[1:])) if classes[1 + int(i)] not in exclude]
    top = classes[order[0]]
    if top in FLAG_ONLY and probabilities[order[0]] < 0.5 * harmful:
        return next((classes[i] for i in order if classes[i] not in FLAG_ONLY), top)
    return top


def _message(message: str, category: str) -> str:
    note = CATEGORY_NOTES.get(category)
    text = message.format(categories=f"{category} {describe(category)}, intent probe")
    return f"{text} {note}" if note else text


def reconcile(decisions: Sequence[SafetyDecision], veto: float = VETO) -> list[SafetyDecision]:
    """The input guards' decisions with a hazard rule's block lowered to a flag where the intent probe reads the
    text as benign (P(harmful) < `veto`, the probe's `Probe.veto` in a chat): only blocks whose categories are all
    hazards (S1–S14). And the probe's own block lowered to a flag where the rules read a prompt
    injection: the probe knows S1–S14 and benign requests, not role markers or "ignore previous instructions" (it
    read a harmless persona so as sexual content or code abuse), which the injection rule names and the pipeline
    escapes."""
    probe = next((d for d in decisions if d.guard == NAME), None)
    if probe is None:
        return list(decisions)
    if probe.action == "block" and any(INJECTION in d.categories for d in decisions if d.guard == RULES):
        why = " Not blocked: the rules read a prompt injection, which is not a category the probe was trained on."
        return [dataclasses.replace(d, action="flag", reason=d.reason + why, replacement="") if d is probe else d
                for d in decisions]  # fmt: skip
    if probe.scores.get("harmful", 1.0) >= veto:
        return list(decisions)
    return [_lowered(d, probe.scores["harmful"], veto) if _vetoable(d) else d for d in decisions]


def _vetoable(decision: SafetyDecision) -> bool:
    """A block by the built-in rules whose categories are all hazards."""
    hazards = bool(decision.categories) and set(decision.categories) <= _VETOED
    return decision.guard == RULES and decision.action == "block" and hazards


def _lowered(decision: SafetyDecision, harmful: float, veto: float) -> SafetyDecision:
    why = f" Not blocked: the intent probe's P(harmful) = {harmful:.3f} is under its floor for a rule's block"
    why += f" ({veto:g})."
    return dataclasses.replace(decision, action="flag", reason=decision.reason + why, replacement="")
