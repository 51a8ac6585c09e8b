"""A linear probe over the loaded model's own hidden states: what a request asks for, read from a middle layer.

A text is tokenized as it is (no chat template), cut into windows of at most `WINDOW` tokens, and each window runs
through the first `layer` transformer layers of the chat's loaded model (no second copy of the weights, no sampling,
no cache kept). The window's hidden states are averaged over its tokens (the first token of the text, on which a
transformer parks attention and whose state is an outlier, is left out) and standardized; a multinomial logistic
regression reads the average: P(benign) and P(each hazard category). A text's score is its most harmful window's.

The probe's weights are a small `.npz` file (`Probe.save`/`load`): the weights [classes, d], the bias, the
features' mean and scale, the layer, the class names, the threshold and the veto floor (`Probe.veto`), trained by
`fit` (L2-regularized, L-BFGS).

>>> probe = Probe.load(SHIPPED)  # doctest: +SKIP
>>> probe.scores(features(model, "How do I make a pipe bomb?", probe.layer))  # doctest: +SKIP
{'benign': 0.01, 'S9': 0.97, ...}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .decisions import SafetyConfigError

__all__ = ["BENIGN", "MAX_WINDOWS", "VETO", "WINDOW", "Probe", "features", "fit", "windows"]

BENIGN = "benign"
VETO = 0.01
"""The veto floor of a probe file that names none (written before the floor was chosen with the threshold)."""
WINDOW = 128
"""Tokens per window: the engine's wide prefill chunk, so a long window runs programs the chat has compiled."""
MAX_WINDOWS = 8
"""Windows scored per text (1,024 tokens); a longer one is scored on its first and last four (rules read it all)."""
_WIDTHS = (16, WINDOW)
"""Chunk widths: the engine's two prefill widths, whose layer programs a chat has compiled (32 and 64 would add
~15 MiB of programs each for ~20 ms less on a 30-token prompt)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Probe:
    """A trained probe: multinomial logistic regression over standardized mean hidden states of one layer."""

    weights: np.ndarray  # [classes, d]
    bias: np.ndarray  # [classes]
    mean: np.ndarray  # [d]
    scale: np.ndarray  # [d]
    layer: int
    classes: tuple[str, ...]
    """`BENIGN` first, then the hazard categories ("S1", … "S14")."""
    threshold: float = 0.5
    """P(harmful) = 1 - P(benign) at or above which a text is judged harmful."""
    veto: float = VETO
    """P(harmful) below which a hazard frame's block is lowered to a flag (`intent.reconcile`): chosen with the
    threshold by cross-validation (`train_probe`)."""
    model: str = ""
    """The model file it was trained on (`model_key`)."""

    def __post_init__(self) -> None:
        if self.classes[:1] != (BENIGN,) or self.weights.shape != (len(self.classes), self.mean.shape[0]):
            raise SafetyConfigError(f"A probe's classes start with {BENIGN!r} and match its weights' rows.")

    @property
    def dim(self) -> int:
        """The hidden size it reads."""
        return int(self.mean.shape[0])

    def probabilities(self, feature: np.ndarray) -> np.ndarray:
        """P(class) for each row of `feature` [n, d] (or one row [d]): [n, classes]."""
        x = (np.atleast_2d(feature) - self.mean) / self.scale
        return _softmax(x @ self.weights.T + self.bias)

    def save(self, path: Path) -> None:
        """Write the probe as an `.npz` file."""
        meta = np.array([self.layer, self.threshold, self.veto], np.float64)
        np.savez(path, weights=self.weights.astype(np.float32), bias=self.bias.astype(np.float32),
                 mean=self.mean.astype(np.float32), scale=self.scale.astype(np.float32), meta=meta,
                 classes=np.array(self.classes), model=np.array(self.model))  # fmt: skip

    @classmethod
    def load(cls, path: Path) -> Probe:
        """Read a probe written by `save`."""
        with np.load(path, allow_pickle=False) as data:
            layer, threshold, veto = [*data["meta"], VETO][:3]  # files written before the floor have two
            return cls(weights=data["weights"], bias=data["bias"], mean=data["mean"], scale=data["scale"],
                       layer=int(layer), threshold=float(threshold), veto=float(veto), model=str(data["model"]),
                       classes=tuple(str(c) for c in data["classes"]))  # fmt: skip


def windows(ids: Sequence[int]) -> list[list[int]]:
    """The token windows a text is scored on: at most `MAX_WINDOWS` of `WINDOW` tokens, the first and last ones."""
    cut = [list(ids[at : at + WINDOW]) for at in range(0, max(len(ids), 1), WINDOW)]
    half = MAX_WINDOWS // 2
    return cut if len(cut) <= MAX_WINDOWS else cut[:half] + cut[-half:]


def features(model: Any, text: str, layer: int) -> np.ndarray:
    """The mean hidden state of `layer` over each window of `text`: float32 [windows, d]."""
    ids = model.tokenizer.encode(text) or [0]
    rows = []
    for index, window in enumerate(windows(ids)):
        states = hidden_states(model, window, layer)  # [t, d]
        first = 1 if index == 0 and len(window) > 1 else 0  # the text's first token: an attention sink
        rows.append(states[first:].mean(axis=0))
    return np.stack(rows).astype(np.float32)


def hidden_states(model: Any, ids: Sequence[int], layer: int) -> np.ndarray:
    """The hidden states [t, d] after the first `layer` layers of `model` for tokens `ids` (t <= `WINDOW`): one
    zero-padded chunk of 16 or 128 tokens at position 0 (`Runner.hidden_states`), the shapes of a chat's own
    prefill, so no program is compiled for the probe."""
    return model.runner.hidden_states(ids, layer, next(w for w in _WIDTHS if w >= len(ids)))


def fit(x: np.ndarray, labels: Sequence[str], classes: Sequence[str], *, l2: float = 1.0) -> tuple[np.ndarray, ...]:
    """Multinomial logistic regression of `labels` on standardized `x` [n, d] with an L2 penalty `l2` on the weights
    (not the bias): (weights [classes, d], bias [classes], mean [d], scale [d]), by L-BFGS (scipy, which JAX needs)."""
    from scipy.optimize import minimize

    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-6
    z = ((x - mean) / scale).astype(np.float64)  # [n, d]
    targets = np.eye(len(classes))[[list(classes).index(label) for label in labels]]  # [n, k]
    shape = (z.shape[1] + 1, len(classes))  # the weights and, in the last row, the bias

    def loss(flat: np.ndarray) -> tuple[float, np.ndarray]:
        theta = flat.reshape(shape)
        logits = z @ theta[:-1] + theta[-1]  # [n, k]
        logits -= logits.max(axis=1, keepdims=True)
        log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        error = np.exp(log_p) - targets  # [n, k]
        value = -(targets * log_p).sum() + 0.5 * l2 * (theta[:-1] ** 2).sum()
        gradient = np.vstack([z.T @ error + l2 * theta[:-1], error.sum(axis=0)])
        return float(value), gradient.ravel()

    found = minimize(loss, np.zeros(shape).ravel(), jac=True, method="L-BFGS-B", options={"maxiter": 2000})
    theta = found.x.reshape(shape)
    return theta[:-1].T.copy(), theta[-1].copy(), mean, scale


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)
