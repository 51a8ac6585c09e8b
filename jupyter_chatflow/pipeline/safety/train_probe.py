"""Train the intent probe for a model file, and choose its threshold, without looking at the held-out split.

Features (`default_layers`, read in one pass: `probe.prompt_reading`): the text as the user's message in the
model's chat template; the mean hidden states over the text's tokens at a third, half and two thirds of the model's
depth (10, 15 and 20 of SmolLM2-135M's 30), and the state at the prompt's last token two thirds of the way up (20).

Round 5 compared, on the training pool (5-fold cross-validation, 4,788 requests) and the development splits (the
dev split and the first two fresh splits, never trained on), the probe alone's recall at 3 % of look-alikes
blocked out of fold / its AUC, and recall at 5 % blocked on each split / its AUC:

| features (means at 10, 15, 20) | out of fold | dev split | first fresh | second fresh |
|---|---|---|---|---|
| round 4: text-alone means, last at 20 (2 passes) | 0.942 / 0.9929 | 0.994 / 0.9977 | 0.969 / 0.9949 | 0.974 / 0.9917 |
| means in the prompt, its last at 20 (1 pass) | 0.950 / 0.9930 | 1.000 / 0.9990 | 0.983 / 0.9958 | 0.966 / 0.9928 |
| means in the prompt, its last at 15, 20, 25 | 0.943 / 0.9935 | 1.000 / 0.9992 | 0.983 / 0.9963 | 0.966 / 0.9935 |

Reading the means inside the prompt has every AUC higher, and higher recall out of fold and on two of the three
splits (the second fresh split's 0.966 against 0.974), at half the passes. Round 4 had
compared, on 3,508 requests and the first fresh split (recall out of fold / on that split):

| features | out of fold | first fresh split |
|---|---|---|
| mean of layer 15 over the text (rounds 1-3) | 0.896 / 0.9855 | 0.940 / 0.9874 |
| means of 10, 15, 20 | 0.918 / 0.9892 | 0.943 / 0.9886 |
| means of 10, 15, 20, 25 | 0.913 / 0.9892 | 0.949 / 0.9902 |
| the prompt's last state at 20 | 0.872 / 0.9841 | 0.900 / 0.9781 |
| means of 10, 15, 20 + the prompt's last state at 20 | 0.939 / 0.9935 | 0.966 / 0.9920 |
| mean and last token of the text at 15 | 0.908 / 0.9868 | 0.917 / 0.9816 |

(Rounds 1-3 chose layer 15 alone: AUC 0.990 against 0.985 for 12 and 0.988 for 18.) The prompt's last state is
where an instruction-tuned model has read the whole request and decides how to answer.

The probe is an L2 logistic regression over benign and S1–S14 (`probe.fit`). Its threshold and its veto floor (below
which a hazard frame's block is lowered to a flag, `intent.reconcile`) are the pair, among `THRESHOLDS` and
`VETOS`, with the highest recall of the whole input layer (rules, probe and `intent.reconcile`) at most
`MAX_BLOCKED` of benign look-alikes and `MAX_EVERYDAY_BLOCKED` of everyday requests blocked, by 5-fold
cross-validation repeated `REPEATS` times (the counts pooled) on the rows of `train.jsonl` and `everyday.jsonl` (not
the evaluation set's rows, which the rules were first written against). The probe's probabilities are out of fold,
the rules' actions those the rules take on the same rows.

    python -m jupyter_chatflow.pipeline.safety.train_probe                  # the default model, into the cache
    python -m jupyter_chatflow.pipeline.safety.train_probe --model PATH     # any model file, into the cache
    python -m jupyter_chatflow.pipeline.safety.train_probe --ship           # the package's probe (data/intent/)

A probe in the cache folder (`intent.probe_folder()`) is used by every chat on that model file from then on.
Training runs the model once over about 4,800 requests and fits 16 regressions: about fourteen minutes for
SmolLM2-135M on two CPU cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jupyter_chatflow.events import SafetyDecision

from .decisions import merge
from .intent import model_key, probe_folder, reconcile, verdict
from .intent_data import Row, Tally, tally, training_pool
from .policy import SafetyPolicy
from .probe import BENIGN, Probe, fit, prompt_reading, reading
from .tables import DATA
from .taxonomy import HAZARDS

__all__ = [
    "CLASSES",
    "L2",
    "MAX_BLOCKED",
    "MAX_EVERYDAY_BLOCKED",
    "THRESHOLDS",
    "VETOS",
    "default_layers",
    "featurize",
    "layer_action",
    "main",
    "train",
]

CLASSES = (BENIGN, *(c.code for c in HAZARDS))
Layers = tuple[tuple[int, ...], tuple[int, ...]]
"""The layers a probe reads: those of the text's mean states, those of the chat prompt's last state."""
L2 = 3.0
"""The penalty: 1, 3, 10 and 100 gave cross-validated AUCs within 0.002 of each other; 3 the best."""
THRESHOLDS = tuple(round(0.3 + 0.05 * i, 2) for i in range(14))  # 0.3 … 0.95
VETOS = (0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5)
"""Veto floors tried (each at most the threshold)."""
MAX_BLOCKED = 0.03
"""The share of benign look-alikes (`train.jsonl`) the chosen threshold may block (cross-validated): the target is
5 %."""
MAX_EVERYDAY_BLOCKED = 0.01
"""The share of everyday requests (`everyday.jsonl`) it may block (cross-validated): the target is 1 %. Round 5
added 150 everyday rows written in the shapes of harmful requests on purpose ("the cheapest way to", "in a hotel
room", "without them noticing"); out of fold 1.6 % of the everyday rows were blocked at 0.75, so 1 % chose 0.9
(recall 0.926 out of fold). A 2 % cap (0.6, floor 0.3) caught more on the development splits (1,018 of 1,050
against 994) and blocked no request of their three everyday files (352), but 5 of the 150 requests of the
everyday file written apart in round 5 (`everyday_fresh4.jsonl`: "continue", why onions make you cry, a photo of
the moon), against none at 0.9: the cap stays at 1 %."""
FOLDS = 5
REPEATS = 3
"""Cross-validation runs (other fold assignments), pooled: one run's choice moved with the folds (0.85 or 0.9)."""
FRESH = ("train-", "everyday-")
"""The rows the threshold is chosen on: those of `train.jsonl` and `everyday.jsonl`, not the evaluation set's (which
the rules were first written against)."""


def default_layers(n_layers: int) -> Layers:
    """The layers a probe reads: the text's mean states a third, half and two thirds of the way up (10, 15 and 20
    of SmolLM2's 30), and the chat prompt's last state two thirds of the way up (20)."""
    return (n_layers // 3, n_layers // 2, 2 * n_layers // 3), (2 * n_layers // 3,)


def featurize(model: Any, examples: Sequence[Row], layers: Layers, *, in_prompt: bool = True) -> np.ndarray:
    """A probe's features of each example over `layers` (`probe.prompt_reading`, or `probe.reading` where not
    `in_prompt`; the first window: training requests are short): [n, features]."""
    read = prompt_reading if in_prompt else reading
    return np.stack([read(model, example.text, *layers)[0] for example in examples])


def rule_decisions(examples: Sequence[Row]) -> list[list[SafetyDecision]]:
    """Each input guard's decision on each example, without the probe (the rules, PII)."""
    guards = SafetyPolicy(mode="input", intent_probe=False).guards_for("input")
    return [[guard.check(example.text, layer="input") for guard in guards] for example in examples]


def layer_action(rules: Sequence[SafetyDecision], probabilities: np.ndarray, probe: Probe) -> str:
    """The input layer's action from the other guards' decisions and the probe's probabilities, joined as
    `SafetyPolicy` joins them (`intent.reconcile` at the probe's veto floor, then the strongest action)."""
    decisions = reconcile([*rules, verdict(probabilities, probe, layer="input")], probe.veto)
    return merge(decisions, layer="input").action


def cross_validate(x: np.ndarray, labels: Sequence[str], *, l2: float = L2, seed: int = 0) -> np.ndarray:
    """Out-of-fold class probabilities [n, classes] from `FOLDS`-fold cross-validation."""
    order = np.random.default_rng(seed).permutation(len(labels))
    out = np.zeros((len(labels), len(CLASSES)))
    for fold in range(FOLDS):
        test = order[fold::FOLDS]
        train = np.setdiff1d(order, test)
        probe = _probe(x[train], [labels[i] for i in train], l2=l2, layers=((0,), ()))
        out[test] = probe.probabilities(x[test])
    return out


def choose_threshold(
    examples: Sequence[Row], runs: Sequence[np.ndarray], rules: Sequence[Sequence[SafetyDecision]], probe: Probe
) -> tuple[tuple[float, float], dict[tuple[float, float], Tally]]:
    """The (threshold, veto floor) with the highest cross-validated recall of the input layer at most `MAX_BLOCKED`
    of the `train.jsonl` rows' benign look-alikes blocked and at most `MAX_EVERYDAY_BLOCKED` of `everyday.jsonl`'s
    rows (the fewest blocked, then the highest threshold and the lowest floor, among equals), over the out-of-fold
    probabilities of each run in `runs` pooled; and the whole layer's tally at each pair (look-alikes and everyday
    rows in one)."""
    everyday = [e.id.startswith("everyday-") for e in examples] * len(runs)
    rows, decided, pooled = list(examples) * len(runs), list(rules) * len(runs), np.concatenate(runs)
    totals, allowed = {}, []
    for pair in [(t, v) for t in THRESHOLDS for v in VETOS if v <= t]:
        candidate = dataclasses.replace(probe, threshold=pair[0], veto=pair[1])
        actions = [layer_action(r, p, candidate) for r, p in zip(decided, pooled, strict=True)]
        totals[pair] = tally(zip(rows, actions, strict=True))["all"]
        groups = [tally((e, a) for e, a, d in zip(rows, actions, everyday, strict=True) if d is side).get("all")
                  for side in (False, True)]  # fmt: skip
        limits = (MAX_BLOCKED, MAX_EVERYDAY_BLOCKED)
        if all(group is None or group.blocked_rate <= limit for group, limit in zip(groups, limits, strict=True)):
            allowed.append(pair)
    rank = lambda p: (totals[p].recall, -totals[p].blocked, p[0], -p[1])  # noqa: E731
    best = max(allowed or [(THRESHOLDS[-1], VETOS[0])], key=rank)
    return best, totals


def train(model: Any, *, layers: Layers | None = None, l2: float = L2, log: Any = print) -> Probe:
    """A probe for `model` reading `layers` (the text's mean states, the chat prompt's last state; default
    `default_layers`), its threshold and veto floor chosen by cross-validation on the training pool's `train.jsonl`
    and `everyday.jsonl` rows."""
    layers = default_layers(model.config.n_layers) if layers is None else layers
    pool = training_pool()
    started = time.perf_counter()
    x = featurize(model, pool, layers, in_prompt=True)
    log(f"features of {len(pool)} requests, layers {layers}: {time.perf_counter() - started:.0f} s")
    labels = [e.label for e in pool]
    fresh = [i for i, e in enumerate(pool) if e.id.startswith(FRESH)]
    runs = [cross_validate(x, labels, l2=l2, seed=seed)[fresh] for seed in range(REPEATS)]
    probe = dataclasses.replace(_probe(x, labels, l2=l2, layers=layers), model=model_key(model), in_prompt=True)
    examples = [pool[i] for i in fresh]
    (threshold, veto), totals = choose_threshold(examples, runs, rule_decisions(examples), probe)
    for (t, v), total in totals.items():
        log(
            f"  threshold {t:.2f}, veto {v:.2f}: recall {total.recall:.3f} ({total.caught}/{total.harmful}), "
            f"benign blocked {total.blocked_rate:.4f} ({total.blocked}/{total.benign}) (5-fold x {REPEATS})"
        )
    log(f"chosen threshold {threshold:.2f}, veto floor {veto:.2f}")
    return dataclasses.replace(probe, threshold=threshold, veto=veto)


def _probe(x: np.ndarray, labels: Sequence[str], *, l2: float, layers: Layers) -> Probe:
    weights, bias, mean, scale = fit(x, labels, CLASSES, l2=l2)
    return Probe(weights=weights, bias=bias, mean=mean, scale=scale, layers=layers[0], prompt_layers=layers[1],
                 classes=CLASSES)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Train a probe for a model file and write it where `IntentGuard.for_model` finds it."""
    from jupyter_chatflow.engine.loader import load_model

    parser = argparse.ArgumentParser(prog="python -m jupyter_chatflow.pipeline.safety.train_probe")
    parser.add_argument("--model", help="a GGUF file or a known model's name (default: the default model)")
    parser.add_argument("--ship", action="store_true", help="write into the package's data/intent/ folder")
    args = parser.parse_args(argv)
    model = load_model(args.model)
    probe = train(model)
    folder = DATA / "intent" if args.ship else probe_folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = Path(folder) / f"{probe.model}.npz"
    probe.save(path)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
