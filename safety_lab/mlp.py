"""A small MLP probe (one hidden layer, ReLU), trained with Adam and weight decay in JAX: an alternative to the
linear probe, compared in `train_probe.py`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def fit_mlp(x: np.ndarray, labels: Sequence[str], classes: Sequence[str], *, weights: np.ndarray | None = None,
            hidden: int = 256, decay: float = 1e-3, steps: int = 3000, batch: int = 512, seed: int = 0,
            dropout: float = 0.2) -> dict[str, np.ndarray]:  # fmt: skip
    """The MLP's parameters (w1, b1, w2, b2, mean, scale) fitted to `labels` on standardized `x`."""
    import jax
    import jax.numpy as jnp
    import optax

    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-6
    z = ((x - mean) / scale).astype(np.float32)
    index = {c: i for i, c in enumerate(classes)}
    y = np.array([index[label] for label in labels], np.int32)
    w = np.ones(len(z), np.float32) if weights is None else (weights * len(z) / weights.sum()).astype(np.float32)
    key = jax.random.PRNGKey(seed)
    k1, k2, key = jax.random.split(key, 3)
    d, k = z.shape[1], len(classes)
    params = {"w1": jax.random.normal(k1, (d, hidden)) * (1 / np.sqrt(d)), "b1": jnp.zeros(hidden),
              "w2": jax.random.normal(k2, (hidden, k)) * (1 / np.sqrt(hidden)), "b2": jnp.zeros(k)}  # fmt: skip
    opt = optax.adamw(1e-3, weight_decay=decay)
    state = opt.init(params)

    def loss(p, xb, yb, wb, rng):
        h = jax.nn.relu(xb @ p["w1"] + p["b1"])
        keep = jax.random.bernoulli(rng, 1 - dropout, h.shape)
        h = jnp.where(keep, h / (1 - dropout), 0)
        logits = h @ p["w2"] + p["b2"]
        nll = -jax.nn.log_softmax(logits)[jnp.arange(len(yb)), yb]
        return (nll * wb).mean()

    @jax.jit
    def step(p, s, xb, yb, wb, rng):
        g = jax.grad(loss)(p, xb, yb, wb, rng)
        updates, s = opt.update(g, s, p)
        return optax.apply_updates(p, updates), s

    rng = np.random.default_rng(seed)
    for _ in range(steps):
        pick = rng.integers(0, len(z), batch)
        key, sub = jax.random.split(key)
        params, state = step(params, state, z[pick], y[pick], w[pick], sub)
    return {**{n: np.asarray(v) for n, v in params.items()}, "mean": mean, "scale": scale}


def mlp_probabilities(model: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    z = (x - model["mean"]) / model["scale"]
    h = np.maximum(z @ model["w1"] + model["b1"], 0)
    logits = h @ model["w2"] + model["b2"]
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)
