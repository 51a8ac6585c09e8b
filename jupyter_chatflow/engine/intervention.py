"""Changing the model to see what a part of it does: attention heads knocked out, the residual steered along a
direction.

An `Intervention` is checked against the model's shape once (`Intervention.of`) and becomes two small arrays: each
layer's heads' weights `keep` [L, h] (0 knocks a head's output out before the layer's output projection) and the
vector `add` [L, d] added to the residual after each layer. `Model.intervened` puts them in a model that shares
the weights and the compiled programs of the one it came from (`Transformer.intervened`): an intervened turn
compiles nothing, and `Model.logits(ids, ablate_heads=…)` runs the serving path.

A direction (`Direction`) is a unit vector of the residual stream after a layer, with the residual's mean length
there (`scale`): a strength of 1 adds a vector as long as a typical token's residual, so strengths read alike at
every layer and in every model. `Model.direction` takes one from two contrasting texts; `Probe.direction`, a category of
the safety layer's probe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from jupyter_chatflow.errors import GenerationError
from jupyter_chatflow.model.config import ModelConfig


@dataclasses.dataclass(frozen=True)
class Steer:
    """A vector added to the residual after a layer, what it is in words, and how strongly it was scaled."""

    vector: np.ndarray
    """float32 [d]: what is added."""
    label: str = "a vector given"
    strength: float = 0.0
    """In units of its direction's `scale` (0 where the vector was given as it is)."""


@dataclasses.dataclass(frozen=True)
class Direction:
    """A unit direction of the residual stream after `layer`, where it came from (`label`), and the mean length of
    the residual there (`scale`). `direction * 0.5` is a `Steer` half as long as the residual."""

    vector: np.ndarray
    """float32 [d], of length 1."""
    layer: int
    scale: float
    label: str

    def __mul__(self, strength: float) -> Steer:
        vector = (self.vector * float(strength) * self.scale).astype(np.float32)
        return Steer(vector=vector, label=self.label, strength=float(strength))

    __rmul__ = __mul__

    @classmethod
    def between(cls, toward: np.ndarray, away: np.ndarray, layer: int, label: str) -> Direction:
        """From residual states [n, d] of texts on either side: the unit difference of their means, scaled by the
        median length of all of them (a text's first token is often many times longer than the rest: an attention
        sink's; the median is what a typical token's residual measures)."""
        difference = toward.mean(axis=0) - away.mean(axis=0)
        length = float(np.linalg.norm(difference))
        if length == 0.0:
            raise GenerationError("The two sides read the same at that layer: there is no direction between them.")
        scale = float(np.median(np.linalg.norm(np.concatenate([toward, away]), axis=-1)))
        return cls(vector=(difference / length).astype(np.float32), layer=layer, scale=scale, label=label)


@dataclasses.dataclass(frozen=True)
class Intervention:
    """Heads knocked out ({layer: heads}) and vectors added after layers ({layer: Steer}), checked for a model."""

    ablated: Mapping[int, tuple[int, ...]]
    steered: Mapping[int, Steer]

    @classmethod
    def of(
        cls, config: ModelConfig, ablate_heads: Mapping[int, Sequence[int]] | None,
        steer: Mapping[int, np.ndarray | Steer] | None,
    ) -> Intervention:  # fmt: skip
        """`ablate_heads` ({layer: [heads]}) and `steer` ({layer: a vector of the model's width, or a `Steer`})
        checked against `config`'s layers, heads and width."""
        ablated: dict[int, tuple[int, ...]] = {}
        for layer, heads in (ablate_heads or {}).items():
            _check_layer(layer, config.n_layers, "ablate_heads")
            for head in heads:
                if isinstance(head, bool) or not isinstance(head, (int, np.integer)) or not 0 <= head < config.n_heads:
                    last = config.n_heads - 1
                    raise GenerationError(f"ablate_heads[{layer}] names head {head!r}: heads are 0 to {last}")
            if heads:
                ablated[int(layer)] = tuple(sorted({int(h) for h in heads}))
        steered: dict[int, Steer] = {}
        for layer, given in (steer or {}).items():
            _check_layer(layer, config.n_layers, "steer")
            chosen = given if isinstance(given, Steer) else Steer(vector=np.asarray(given, np.float32))
            vector = np.asarray(chosen.vector, np.float32)
            if vector.shape != (config.dim,):
                raise GenerationError(f"steer[{layer}] must be a vector of the model's width ({config.dim}), got "
                                      f"shape {vector.shape}")  # fmt: skip
            steered[int(layer)] = dataclasses.replace(chosen, vector=vector)
        return cls(ablated=ablated, steered=steered)

    @property
    def empty(self) -> bool:
        """Whether it changes nothing."""
        return not self.ablated and not any(s.vector.any() for s in self.steered.values())

    def arrays(self, config: ModelConfig) -> tuple[np.ndarray, np.ndarray]:
        """keep [L, h] (1, or 0 for a head knocked out) and add [L, d], as `Transformer.intervened` takes them."""
        keep = np.ones((config.n_layers, config.n_heads), np.float32)
        add = np.zeros((config.n_layers, config.dim), np.float32)
        for layer, heads in self.ablated.items():
            keep[layer, list(heads)] = 0.0
        for layer, steer in self.steered.items():
            add[layer] += steer.vector
        return keep, add


def _check_layer(layer: object, layers: int, option: str) -> None:
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 0 <= layer < layers:
        raise GenerationError(f"{option} names layer {layer!r}: the model's layers are 0 to {layers - 1}")
