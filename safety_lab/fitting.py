"""Fitting a probe: multinomial logistic regression with sample weights and an L2 penalty, by L-BFGS (scipy)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def fit(x: np.ndarray, labels: Sequence[str], classes: Sequence[str], *, l2: float = 1.0,
        weights: np.ndarray | None = None, maxiter: int = 200) -> tuple[np.ndarray, ...]:  # fmt: skip
    """Multinomial logistic regression of `labels` on standardized `x` [n, d], each row weighted by `weights`
    (normalized to sum to n), L2 penalty `l2` on the weights (not the bias): (weights [classes, d], bias [classes],
    mean [d], scale [d])."""
    from scipy.optimize import minimize

    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-6
    z = ((x - mean) / scale).astype(np.float32)
    index = {c: i for i, c in enumerate(classes)}
    targets = np.eye(len(classes), dtype=np.float32)[[index[label] for label in labels]]
    w = np.ones(len(z), np.float32) if weights is None else (weights * len(z) / weights.sum()).astype(np.float32)
    shape = (z.shape[1] + 1, len(classes))

    def loss(flat: np.ndarray) -> tuple[float, np.ndarray]:
        theta = flat.reshape(shape).astype(np.float32)
        logits = z @ theta[:-1] + theta[-1]
        logits -= logits.max(axis=1, keepdims=True)
        log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        error = (np.exp(log_p) - targets) * w[:, None]
        value = -(w[:, None] * targets * log_p).sum() + 0.5 * l2 * (theta[:-1] ** 2).sum()
        gradient = np.vstack([z.T @ error + l2 * theta[:-1], error.sum(axis=0)])
        return float(value), gradient.ravel().astype(np.float64)

    found = minimize(loss, np.zeros(shape).ravel(), jac=True, method="L-BFGS-B", options={"maxiter": maxiter})
    theta = found.x.reshape(shape)
    return theta[:-1].T.copy(), theta[-1].copy(), mean, scale


def probabilities(model: tuple[np.ndarray, ...], x: np.ndarray) -> np.ndarray:
    """P(class) [n, classes] of rows `x` under a fitted model."""
    weights, bias, mean, scale = model
    logits = ((x - mean) / scale) @ weights.T + bias
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)


def auroc(scores: np.ndarray, positive: np.ndarray) -> float:
    """The area under the ROC curve of `scores` for the boolean `positive` (ties counted half)."""
    from scipy.stats import rankdata

    ranks = rankdata(scores)
    n_pos, n_neg = positive.sum(), (~positive).sum()
    return (
        float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)) if n_pos and n_neg else float("nan")
    )
