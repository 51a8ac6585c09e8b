"""The input layer on the held-out split, per category: the rules alone, the intent probe alone, and both joined.

`evaluate(model)` runs every row of `safety_lab/data/intent/heldout.jsonl` (or of another file in its format:
`evaluate(model, Path(...))`) through three input layers on the chat's own model
(each a `SafetyPolicy` in mode "input"): the rules alone (`intent_probe=False`), the probe alone (its guard only),
and the layer a chat runs (rules, PII, the probe, `intent.reconcile`). The probe reads each row once: the layer a
chat runs is timed whole, and the probe alone reuses its reading and its time (`_Remembering`).
`markdown(report)` is the README's table; `benchmarks/bench_safety.py` prints it and writes the JSON.
`evaluate_everyday(model)` runs `data/intent/everyday_heldout.jsonl` (ordinary requests, never trained on; or
another file of them: `everyday_fresh2.jsonl`) through the same layers, and `everyday_line(report)` says the
share the input layer blocks and flags.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from intent_data import EVERYDAY_HELDOUT, HELDOUT, Row, Tally, load, tally

from jupyter_chatflow.events import SafetyDecision
from jupyter_chatflow.pipeline.safety.decisions import since
from jupyter_chatflow.pipeline.safety.intent import IntentGuard
from jupyter_chatflow.pipeline.safety.policy import SafetyPolicy
from jupyter_chatflow.pipeline.safety.taxonomy import describe

__all__ = ["LAYERS", "Report", "evaluate", "evaluate_everyday", "everyday_line", "markdown"]

LAYERS = ("rules", "probe", "input layer")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Report:
    """Tallies per layer and category, the actions per row, and the probe's time per prompt."""

    tallies: dict[str, dict[str, Tally]]
    actions: dict[str, list[str]]
    """Per layer, the action on each row, in the file's order."""
    probe_ms: list[float]
    """The probe's own pass, per prompt."""
    layer_ms: list[float]
    """The whole input layer (rules, PII, probe), per prompt."""
    threshold: float
    examples: list[Row]

    def timing(self) -> dict[str, float]:
        """Median and 95th percentile milliseconds per prompt, of the probe and of the whole input layer."""
        p95 = lambda values: sorted(values)[int(0.95 * (len(values) - 1))]  # noqa: E731
        return {"probe_ms_median": statistics.median(self.probe_ms), "probe_ms_p95": p95(self.probe_ms),
                "layer_ms_median": statistics.median(self.layer_ms), "layer_ms_p95": p95(self.layer_ms)}  # fmt: skip


def evaluate(model: Any, examples: Sequence[Row] | Path | None = None) -> Report:
    """The three input layers on `examples`: rows, or a file of rows in `data/intent/`'s format (the held-out split,
    `heldout.jsonl`, by default)."""
    examples = HELDOUT if examples is None else examples
    rows = load(examples) if isinstance(examples, Path) else list(examples)
    guard = IntentGuard.for_model(model)
    if guard is None:
        raise ValueError(f"No intent probe for this model file ({model.path}): train one first.")
    guard = _Remembering(model=guard.model, probe=guard.probe)
    layer = SafetyPolicy(mode="input", intent=guard)  # reads each row; the probe alone reuses that reading
    others = {"rules": SafetyPolicy(mode="input", intent_probe=False),
              "probe": SafetyPolicy(mode="input", guards={"input": (guard,)})}  # fmt: skip
    actions: dict[str, list[str]] = {name: [] for name in LAYERS}
    probe_ms, layer_ms = [], []
    for example in rows:
        started = time.perf_counter()
        actions["input layer"].append(layer.scan_input(example.text)[0][0].action)
        layer_ms.append(since(started))
        probe_ms.append(guard.seen["input", example.text].latency_ms)
        for name, policy in others.items():
            actions[name].append(policy.scan_input(example.text)[0][0].action)
    return Report(
        tallies={name: tally(zip(rows, actions[name], strict=True)) for name in LAYERS}, actions=actions,
        probe_ms=probe_ms, layer_ms=layer_ms, threshold=guard.probe.threshold, examples=rows,
    )  # fmt: skip


def evaluate_everyday(model: Any, path: Path = EVERYDAY_HELDOUT) -> Report:
    """The three input layers on held-out everyday requests (`everyday_heldout.jsonl`, or another file of them)."""
    return evaluate(model, load(path))


def everyday_line(report: Report) -> str:
    """The input layer's blocked and flagged shares of the everyday requests of `report`."""
    got = report.tallies["input layer"]["all"]
    return (f"everyday requests (held out): the input layer blocks {_rate(got.blocked, got.benign)} "
            f"and flags {_rate(got.flagged, got.benign)}")  # fmt: skip


def markdown(report: Report) -> str:
    """Per category: recall and benign blocked for the rules, the probe and the input layer, and benign flagged."""
    head = "| category | " + " | ".join(f"{n}: recall | {n}: benign blocked" for n in LAYERS)
    lines = [head + " | input layer: benign flagged |", "|---" * (2 + 2 * len(LAYERS)) + "|"]
    for category in report.tallies["input layer"]:
        if category == "none":
            continue
        cells = []
        for name in LAYERS:
            got = report.tallies[name][category]
            cells += [_rate(got.caught, got.harmful), _rate(got.blocked, got.benign)]
        layer = report.tallies["input layer"][category]
        label = "**all**" if category == "all" else f"{category} {describe(category)}"
        lines.append(f"| {label} | {' | '.join(cells)} | {_rate(layer.flagged, layer.benign)} |")
    return "\n".join(lines)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Remembering(IntentGuard):
    """The intent guard, reading each text once: its decision is kept and given again (evaluation only; a chat's
    guard reads every turn)."""

    seen: dict[tuple[str, str], SafetyDecision] = dataclasses.field(default_factory=dict, compare=False, hash=False)

    def check(self, text: str, *, layer: str) -> SafetyDecision:
        if (layer, text) not in self.seen:
            self.seen[layer, text] = super().check(text, layer=layer)
        return self.seen[layer, text]


def _rate(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f} % ({part}/{whole})" if whole else "–"
