"""The intent probe on the input layer: a guard that reads what a request asks for from the chat's own model.

`IntentGuard` scores a user's message with a `probe.Probe` over the loaded model's hidden states (one extra pass
over the first layers, no second copy of the weights): P(harmful) = 1 - P(benign). At or above the probe's
threshold it blocks and names the most likely category (S6, specialized advice, is flagged, as the rules do);
below, it allows. Its decision carries `scores["harmful"]`, so the turn's input decision shows the probe's number
beside the rules' matches.

The rules stay where they are precise; the probe adds recall on paraphrases the word lists do not hold. One more
step joins the two (`reconcile`): a block by the hazard frames (S1–S13 less S4 and S9: words only, never a code
pattern, S14, injection, markup or PII) on a text the probe reads as benign (P(harmful) below the probe's veto
floor, `Probe.veto`, chosen with its threshold by cross-validation) is lowered to a flag. The text goes on and the
decision still names both readings: what the frames matched and the probe's P(harmful) ("how phishing works, to
train our staff" matches the phishing frame; the probe reads a defensive request).

Which probe: the one shipped for the default model (`data/intent/<key>.npz`, trained on
`data/intent/train.jsonl` and the evaluation set's input rows), else one trained for this model file and kept in
`probe_folder()` (`python -m jupyter_chatflow.pipeline.safety.train_probe --model PATH`). A model with neither gets
no intent guard: the input layer is the rules alone, and its decision says so (`SafetyPolicy.with_model`).

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

from jupyter_chatflow.events import SafetyAction, SafetyDecision

from .decisions import check_layer, since
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
_VETOED = frozenset(f"S{n}" for n in range(1, 14)) - {"S4", "S9"}
"""Categories whose frame blocks the probe may lower: the word-based hazards, not S14's code patterns, and never
the gravest two (S4 child sexual exploitation, S9 weapons of mass harm)."""
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
        """P(harmful) of `text` (its most harmful window's) and the verdict at the probe's threshold."""
        start = time.perf_counter()
        rows = self.probe.probabilities(self.probe.features(self.model, text))  # [windows, classes]
        worst = rows[int((1.0 - rows[:, 0]).argmax())]
        decision = verdict(worst, self.probe, layer=layer, message=self.message)
        return dataclasses.replace(decision, latency_ms=since(start), guard=self.name)


def verdict(probabilities: Any, probe: Probe, *, layer: str, message: str = BLOCK_MESSAGE) -> SafetyDecision:
    """The intent guard's decision from one row of the probe's class probabilities [classes]."""
    harmful = float(1.0 - probabilities[0])
    category = probe.classes[1 + int(probabilities[1:].argmax())]
    fired = harmful >= probe.threshold
    action: SafetyAction = ("flag" if category in FLAG_ONLY else "block") if fired else "allow"
    scores = {"harmful": round(harmful, 4), **({category: round(float(probabilities[1:].max()), 4)} if fired else {})}
    what = f"reads {describe(category)} ({category})" if fired else "reads a benign request"
    return SafetyDecision(
        layer=check_layer(layer), action=action, guard=NAME, categories=(category,) if fired else (), scores=scores,
        reason=f"The intent probe {what}: P(harmful) = {harmful:.3f} (threshold {probe.threshold:g}).",
        replacement=_message(message, category) if action == "block" else "",
    )  # fmt: skip


def _message(message: str, category: str) -> str:
    note = CATEGORY_NOTES.get(category)
    text = message.format(categories=f"{category} {describe(category)}, intent probe")
    return f"{text} {note}" if note else text


def reconcile(decisions: Sequence[SafetyDecision], veto: float = VETO) -> list[SafetyDecision]:
    """The input guards' decisions with a hazard frame's block lowered to a flag where the intent probe reads the
    text as benign (P(harmful) < `veto`, the probe's `Probe.veto` in a chat): only blocks whose categories are all
    word-based hazards (S1–S13). And the probe's own block lowered to a flag where the rules read a prompt
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
    """A block by the built-in rules whose categories are all word-based hazards."""
    hazards = bool(decision.categories) and set(decision.categories) <= _VETOED
    return decision.guard == RULES and decision.action == "block" and hazards


def _lowered(decision: SafetyDecision, harmful: float, veto: float) -> SafetyDecision:
    why = f" Not blocked: the intent probe reads a benign request (P(harmful) = {harmful:.3f} < its floor {veto:g})."
    return dataclasses.replace(decision, action="flag", reason=decision.reason + why, replacement="")
