"""Train the input layer's intent probe on public data, score it leaving each source out, and ship it.

What it learns from (`corpus.SOURCES`): the public sets whose licence allows a shipped model to learn from them
(`use == "train"`), the project's own training and everyday requests, and the training half of the long benign
texts (`long_texts.py`), each window of those also a benign example of its own (a chunk of a pasted document is not
a request). Classes: benign, S1–S14 and `other` (harmful, outside S1–S14). Each (source, benign or harmful) group
is weighted by 1/sqrt(its size), so no one set decides the direction.

Scores (`score`): every public training source is left out in turn and scored by a probe trained on the rest
(leave-one-source-out, LOSO); the probe trained on everything scores the sources it never saw: the dev sets
(HarmBench, StrongREJECT, CoCoNot), the evaluation-only public sets, the held-out long texts and the project's own
held-out splits. `thresholds.py` chooses the thresholds on the LOSO scores.

    python safety_lab/train_probe.py --loso                       # scores (.data/scores.json), then
    python safety_lab/thresholds.py safety_lab/.data/scores.json  # the thresholds, then
    python safety_lab/train_probe.py --ship PATH --thresholds T.json [--without dolly] [--model GGUF]

Features come from the cache (`features.py`: run it on every file first).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from corpus import BENIGN, OTHER, ROOT, SOURCES
from dataset import Table, table
from features import columns
from fitting import auroc, fit, probabilities

KEY = "SmolLM2-135M-Instruct.Q4_1-98362432-d576-l30"
"""The default model's feature cache (`intent.model_key`); `--model` picks another."""
D = 576
L2 = 2000.0
"""The penalty: 30, 300 and 2,000 compared on the evaluation-only sets (AUC 0.901 at 300, 0.924 at 2,000)."""
CLASSES = (BENIGN, *(f"S{i}" for i in range(1, 15)), OTHER)
PUBLIC = [s.name for s in SOURCES if s.use == "train"]
OWN = ["own_train", "own_everyday"]
UNSEEN = [s.name for s in SOURCES if s.use in ("dev", "eval", "ownheld")]
SCORES = ROOT / ".data" / "scores.json"


@dataclasses.dataclass(frozen=True)
class Rows:
    """Feature rows with their classes and the (source, benign or harmful) group each belongs to."""

    x: np.ndarray
    labels: list[str]
    groups: list[str]

    def __add__(self, other: Rows) -> Rows:
        return Rows(np.concatenate([self.x, other.x]), self.labels + other.labels, self.groups + other.groups)


def training_rows(t: Table, cols: np.ndarray, *, windows: bool = False) -> Rows:
    """Each example's mean window; with `windows`, each window of a benign text of several also on its own."""
    x, labels = [t.mean()[:, cols]], [e.category for e in t.examples]
    groups = [f"{e.source}/{e.label}" for e in t.examples]
    if windows:
        for i, e in enumerate(t.examples):
            n = int(t.starts[i + 1] - t.starts[i])
            if e.label == BENIGN and n > 1:
                x.append(t.windows[t.starts[i] : t.starts[i + 1]][:, cols].astype(np.float32))
                labels += [BENIGN] * n
                groups += [f"{e.source}/window"] * n
    return Rows(np.concatenate(x), labels, groups)


def weights(rows: Rows) -> np.ndarray:
    """1/sqrt(n) for each group of n rows."""
    counts: dict[str, int] = {}
    for g in rows.groups:
        counts[g] = counts.get(g, 0) + 1
    return np.array([1.0 / np.sqrt(counts[g]) for g in rows.groups])


def train(rows: Rows, l2: float):
    """A linear probe (L2 `l2`), or with `l2` below 0 an MLP (weight decay `-l2`)."""
    if l2 < 0:
        from mlp import fit_mlp

        return fit_mlp(rows.x, rows.labels, CLASSES, weights=weights(rows), decay=-l2)
    return fit(rows.x, rows.labels, CLASSES, l2=l2, weights=weights(rows))


def prob(model, x: np.ndarray) -> np.ndarray:
    if isinstance(model, dict):
        from mlp import mlp_probabilities

        return mlp_probabilities(model, x)
    return probabilities(model, x)


def predict(model: tuple[np.ndarray, ...], t: Table, cols: np.ndarray) -> dict[str, list]:
    """Per example: P(harmful) of its mean window and of its most harmful window, the top class, the truth."""
    mean = prob(model, t.mean()[:, cols])
    window = 1.0 - prob(model, t.windows[:, cols].astype(np.float32))[:, 0]
    return {
        "mean": (1.0 - mean[:, 0]).round(5).tolist(),
        "max": np.maximum.reduceat(window, t.starts[:-1]).round(5).tolist(),
        "top": [CLASSES[1 + int(i)] for i in mean[:, 1:].argmax(axis=1)],
        "category": [e.category for e in t.examples],
        "label": [e.label for e in t.examples],
        "kind": [e.kind for e in t.examples],
        "windows": np.diff(t.starts).tolist(),
        "id": [e.id for e in t.examples],
    }


def score(
    means: Sequence[int], lasts: Sequence[int], l2: float, *, loso: bool, key: str = KEY, dim: int = D,
    public: Sequence[str] = tuple(PUBLIC), log=print,
) -> dict:  # fmt: skip
    """LOSO scores of each public training source of `public` (with `loso`) and the full probe's scores of every
    unseen one, from the feature cache of the model file `key` (hidden size `dim`)."""
    cols = columns(dim, means, lasts)
    started = time.perf_counter()
    base = table([*public, *OWN], key)
    long_t = table(["long"], key)
    long_train = long_t.select([i for i, e in enumerate(long_t.examples) if e.split == "train"])
    long_rows = training_rows(long_train, cols, windows=True)
    result: dict = {"loso": {}, "unseen": {}}
    if loso:
        for name in public:
            keep = [i for i, e in enumerate(base.examples) if e.source != name]
            model = train(training_rows(base.select(keep), cols) + long_rows, l2)
            held = base.select([i for i, e in enumerate(base.examples) if e.source == name])
            result["loso"][name] = got = predict(model, held, cols)
            harm = np.array(got["label"]) == "harmful"
            log(f"  LOSO {name}: auc {auroc(np.array(got['mean']), harm):.3f} ({time.perf_counter() - started:.0f} s)")
    model = train(training_rows(base, cols) + long_rows, l2)
    for name in UNSEEN:
        try:
            result["unseen"][name] = predict(model, table([name], key), cols)
        except FileNotFoundError:
            log(f"  (no features for {name} yet)")
    held = long_t.select([i for i, e in enumerate(long_t.examples) if e.split != "train"])
    result["unseen"]["long_heldout"] = predict(model, held, cols)
    linear = not isinstance(model, dict)
    result["model"] = [a.tolist() for a in model] if linear else {k: v.tolist() for k, v in model.items()}
    result["config"] = {"means": list(means), "lasts": list(lasts), "l2": l2, "key": key, "public": list(public)}
    log(f"done in {time.perf_counter() - started:.0f} s")
    return result


def ship(scores: dict, *, threshold: float, flag_at: float, veto: float, pool: str, path: Path) -> None:
    """Write the probe trained on everything (`scores["model"]`, a linear one) as the run-time probe file."""
    from jupyter_chatflow.pipeline.safety.probe import Probe

    weights, bias, mean, scale = (np.array(a, np.float32) for a in scores["model"])
    config = scores["config"]
    probe = Probe(weights=weights, bias=bias, mean=mean, scale=scale, layers=tuple(config["means"]),
                  prompt_layers=tuple(config["lasts"]), classes=CLASSES, threshold=threshold, veto=veto,
                  flag_at=flag_at, pool=pool, model=config.get("key", KEY), in_prompt=True)  # fmt: skip
    probe.save(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--means", default="8,12,16,20", help="layers whose mean states it reads (%(default)s)")
    parser.add_argument("--lasts", default="12,16,20", help="layers whose last prompt state it reads (%(default)s)")
    parser.add_argument("--l2", type=float, default=L2, help="the L2 penalty (%(default)s; below 0: an MLP)")
    parser.add_argument("--loso", action="store_true", help="leave each public training source out in turn")
    parser.add_argument("--model", help="another model file (its features cached by features.py --model)")
    parser.add_argument("--without", default="", help="comma-separated public sources not to train on (e.g. dolly)")
    parser.add_argument("--out", type=Path, default=SCORES)
    parser.add_argument("--ship", type=Path, help="write the probe file here, with the thresholds of --thresholds")
    parser.add_argument("--thresholds", type=Path, help="thresholds.py's choice (JSON: block, flag, veto)")
    args = parser.parse_args(argv)
    key, dim = KEY, D
    if args.model:
        from jupyter_chatflow import load_model
        from jupyter_chatflow.pipeline.safety.intent import model_key

        model = load_model(args.model)
        key, dim = model_key(model), model.config.dim
    public = [name for name in PUBLIC if name not in args.without.split(",")]
    means = tuple(int(n) for n in args.means.split(",") if n)
    lasts = tuple(int(n) for n in args.lasts.split(",") if n)
    result = score(
        means, lasts, args.l2, loso=args.loso, key=key, dim=dim, public=public, log=lambda s: print(s, flush=True)
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result))
    print(f"wrote {args.out}")
    if args.ship:
        chosen = json.loads(args.thresholds.read_text())
        ship(result, threshold=chosen["block"], flag_at=chosen["flag"], veto=chosen["veto"], pool="mean",
             path=args.ship)  # fmt: skip
        print(f"wrote {args.ship}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
