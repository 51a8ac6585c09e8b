"""A linear probe over the loaded model's own hidden states: what a request asks for, read from its middle layers.

It reads a text in one pass through the chat's loaded model, as deep as the layers it reads (no second copy of the
weights, no sampling, no cache kept): the text as the user's message in the model's chat template, up to where the
answer starts (`prompt_reading`), and takes

- each of the probe's `layers` states averaged over the text's own tokens (the template's are left out);
- each of its `prompt_layers` states at the prompt's last token, where the model has read the whole request and is
  about to answer (an instruction-tuned model's refusals are decided there).

A text longer than a window (`WINDOW` tokens with the template) is cut into windows of the text, each read in the
template. The states are put side by side and standardized, and a multinomial logistic regression reads them:
P(benign) and P(each hazard category). A long text's score is its most harmful window's.

Probes of round 4 (`Probe.in_prompt` false) read the text twice: the means over the text alone (no template,
`features`, the first token left out: a transformer parks attention on it), and the prompt's last states
(`prompt_states`) in a second pass (`reading`). Reading the means inside the prompt gave every AUC higher, out of
fold and on the development splits, at half the passes (round 5's `train_probe` table, now in git history).

The probe's weights are a small `.npz` file (`Probe.save`/`load`): the weights [classes, features], the bias, the
features' mean and scale, the layers, the class names, the threshold and the veto floor (`Probe.veto`), trained by
`fit` (L2-regularized, L-BFGS).

>>> probe = Probe.load(SHIPPED)  # doctest: +SKIP
>>> probe.probabilities(probe.features(model, "How do I make a pipe bomb?"))  # doctest: +SKIP
array([[0.01, ..., 0.97, ...]])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jupyter_chatflow.engine.intervention import Direction

from .decisions import SafetyConfigError
from .taxonomy import describe

__all__ = [
    "BENIGN", "MAX_WINDOWS", "VETO", "WINDOW", "Probe", "features", "fit", "layer_states", "prompt_parts",
    "prompt_reading", "prompt_states", "reading", "windows",
]  # fmt: skip

BENIGN = "benign"
POOLS = ("mean", "max")
VETO = 0.01
"""The veto floor of a probe file that names none (written before the floor was chosen with the threshold)."""
WINDOW = 128
"""Tokens per window: the engine's wide prefill chunk, so a long window runs programs the chat has compiled."""
SHORT = 64
"""A window whose prompt fits in 64 tokens (a request of up to ~34 tokens in SmolLM2's template) is read in a 64-wide
chunk: half the work of the 128-wide one (~80 ms against ~125 on two cores, reading 20 layers), for one program
compiled once per process (its first short request), never per request."""
MAX_WINDOWS = 8
"""Windows scored per text (1,024 tokens less the template's eight times over: about 780 with SmolLM2's); a longer
one is scored on its first and last four (rules read it all)."""
_WIDTHS = (16, WINDOW)
"""Chunk widths: the engine's two prefill widths, whose layer programs a chat has compiled (32 and 64 would add
~15 MiB of programs each for ~20 ms less on a 30-token prompt)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Probe:
    """A trained probe: multinomial logistic regression over standardized hidden states of some layers."""

    weights: np.ndarray  # [classes, features]: (layers + prompt layers) x d
    bias: np.ndarray  # [classes]
    mean: np.ndarray  # [features]
    scale: np.ndarray  # [features]
    layers: tuple[int, ...]
    """The layers whose mean states over the text it reads, side by side in this order (0: the embedding)."""
    prompt_layers: tuple[int, ...] = ()
    """The layers whose state at the chat prompt's last token it reads next (`prompt_states`: the request as the
    model reads it when its answer is about to start)."""
    classes: tuple[str, ...]
    """`BENIGN` first, then the hazard categories ("S1", … "S14")."""
    threshold: float = 0.5
    """P(harmful) = 1 - P(benign) at or above which a text is judged harmful."""
    veto: float = VETO
    """P(harmful) below which a hazard frame's block is lowered to a flag (`intent.reconcile`): chosen with the
    thresholds leaving each training source out (`safety_lab/thresholds.py`)."""
    model: str = ""
    """The model file it was trained on (`model_key`)."""
    in_prompt: bool = False
    """Whether the means of `layers` are read over the text inside the chat prompt, in the one pass that reads the
    prompt's last states (`prompt_reading`), rather than over the text alone in a pass of their own (`reading`)."""
    flag_at: float | None = None
    """P(harmful) at or above which (and below `threshold`) the text is flagged: it goes on, and the decision says
    what the probe read. None: no flag band (files written before it)."""
    pool: str = "max"
    """How a text of several windows is read: "mean" (the windows' features averaged: one reading of the whole
    text) or "max" (its most harmful window's reading: files written before the pooling was chosen)."""

    def __post_init__(self) -> None:
        if self.classes[:1] != (BENIGN,) or self.weights.shape != (len(self.classes), self.mean.shape[0]):
            raise SafetyConfigError(f"A probe's classes start with {BENIGN!r} and match its weights' rows.")
        if self.pool not in POOLS:
            raise SafetyConfigError(f"A probe pools its windows by {' or '.join(POOLS)}, not {self.pool!r}.")
        if not self.layers or self.mean.shape[0] % (len(self.layers) + len(self.prompt_layers)):
            raise SafetyConfigError(
                f"A probe reads d features from each of its layers {self.layers} and {self.prompt_layers}."
            )

    @property
    def dim(self) -> int:
        """The hidden size it reads (of each layer)."""
        return int(self.mean.shape[0]) // (len(self.layers) + len(self.prompt_layers))

    def features(self, model: Any, text: str) -> np.ndarray:
        """What it reads of `text` in `model`: [windows, features] (`prompt_reading`, or `reading`)."""
        read = prompt_reading if self.in_prompt else reading
        return read(model, text, self.layers, self.prompt_layers)

    def reading(self, model: Any, text: str) -> np.ndarray:
        """P(class) of `text` as the probe judges it: [classes], its windows pooled (`pool`)."""
        read = self.features(model, text)  # [windows, features]
        if self.pool == "mean":
            return self.probabilities(read.mean(axis=0))[0]
        rows = self.probabilities(read)
        return rows[int((1.0 - rows[:, 0]).argmax())]

    def direction(self, category: str, layer: int) -> Direction:
        """The direction in which this probe reads `category` ("S1" … "S14") rather than benign, in the residual
        after layer `layer` (from 0, as `steer` counts; one of the layers it reads): its weights for the category
        less those for benign, through the standardization (each feature's scale), of length 1. Its `scale` is
        the root-mean-square length of the residual the probe was trained on there (its means and scales).
        `model.intervened(steer={layer: probe.direction("S1", layer) * 2})` pushes a text toward the category."""
        if category not in self.classes[1:]:
            raise SafetyConfigError(f"The probe reads the categories {', '.join(self.classes[1:])}; not {category!r}.")
        blocks = (*self.layers, *self.prompt_layers)
        if layer + 1 not in blocks:
            readable = ", ".join(str(n - 1) for n in sorted(set(blocks)) if n > 0)
            raise SafetyConfigError(f"The probe reads the residual after layers {readable}; not after layer {layer}.")
        at = slice(blocks.index(layer + 1) * self.dim, (blocks.index(layer + 1) + 1) * self.dim)
        row = self.classes.index(category)
        raw = (self.weights[row, at] - self.weights[0, at]) / self.scale[at]
        length = float(np.sqrt(np.sum(self.mean[at] ** 2) + np.sum(self.scale[at] ** 2)))
        return Direction(vector=(raw / np.linalg.norm(raw)).astype(np.float32), layer=layer, scale=length,
                         label=f"the safety probe's {category} ({describe(category)})")  # fmt: skip

    def probabilities(self, feature: np.ndarray) -> np.ndarray:
        """P(class) for each row of `feature` [n, d] (or one row [d]): [n, classes]."""
        x = (np.atleast_2d(feature) - self.mean) / self.scale
        return _softmax(x @ self.weights.T + self.bias)

    def save(self, path: Path) -> None:
        """Write the probe as an `.npz` file."""
        flag_at = self.threshold if self.flag_at is None else self.flag_at
        meta = np.array([self.threshold, self.veto, flag_at], np.float64)
        np.savez(path, weights=self.weights.astype(np.float32), bias=self.bias.astype(np.float32),
                 mean=self.mean.astype(np.float32), scale=self.scale.astype(np.float32), meta=meta,
                 layers=np.array(self.layers, np.int32), prompt_layers=np.array(self.prompt_layers, np.int32),
                 in_prompt=np.array(self.in_prompt), classes=np.array(self.classes), pool=np.array(self.pool),
                 model=np.array(self.model))  # fmt: skip

    @classmethod
    def load(cls, path: Path) -> Probe:
        """Read a probe written by `save`."""
        with np.load(path, allow_pickle=False) as data:
            prompt_layers = tuple(int(n) for n in data["prompt_layers"]) if "prompt_layers" in data else ()
            in_prompt = bool(data["in_prompt"]) if "in_prompt" in data else False
            pool = str(data["pool"]) if "pool" in data else "max"
            flag_at = None
            if "layers" in data:
                layers, (threshold, veto, *rest) = tuple(int(n) for n in data["layers"]), data["meta"]
                flag_at = float(rest[0]) if rest else None
            else:  # files of one layer: meta holds it, then the threshold (and the floor, once it was chosen)
                layer, threshold, veto = [*data["meta"], VETO][:3]
                layers = (int(layer),)
            return cls(weights=data["weights"], bias=data["bias"], mean=data["mean"], scale=data["scale"],
                       layers=layers, prompt_layers=prompt_layers, threshold=float(threshold), veto=float(veto),
                       model=str(data["model"]), in_prompt=in_prompt, flag_at=flag_at, pool=pool,
                       classes=tuple(str(c) for c in data["classes"]))  # fmt: skip


def windows(ids: Sequence[int], size: int = WINDOW) -> list[list[int]]:
    """The token windows a text is scored on: at most `MAX_WINDOWS` of `size` tokens, the first and last ones."""
    cut = [list(ids[at : at + size]) for at in range(0, max(len(ids), 1), size)]
    half = MAX_WINDOWS // 2
    return cut if len(cut) <= MAX_WINDOWS else cut[:half] + cut[-half:]


def prompt_reading(model: Any, text: str, layers: Sequence[int], prompt_layers: Sequence[int]) -> np.ndarray:
    """A probe's features of `text` in one pass a window: `text` (or each window of it) as the user's message in the
    model's chat template; each of `layers` states averaged over the text's tokens, then each of `prompt_layers`
    states at the prompt's last token: float32 [windows, features]. A window runs in the 64-token chunk when its
    prompt fits (`SHORT`), else in the 128-token one."""
    head, ids, tail = prompt_parts(model, text)
    room = WINDOW - len(head) - len(tail)
    if room < 16:
        raise SafetyConfigError(f"The chat template takes {WINDOW - room} of a probe window's {WINDOW} tokens.")
    rows = []
    for window in windows(ids, room):
        sequence = [*head, *window, *tail]
        width = SHORT if len(sequence) <= SHORT else WINDOW
        states = model.runner.layer_states(sequence, (*layers, *prompt_layers), width)
        span = slice(len(head), len(head) + len(window)) if window else slice(-1, None)  # no text: the last token
        means = states[: len(layers), span].mean(axis=1)  # [layers, d]
        rows.append(np.concatenate([means.reshape(-1), states[len(layers) :, -1].reshape(-1)]))
    return np.stack(rows).astype(np.float32)


def prompt_parts(model: Any, text: str) -> tuple[list[int], list[int], list[int]]:
    """`text` as the user's message in the model's chat template, cut in three: the template's tokens before the
    text, the text's, and the template's after it (up to where the answer starts), found against the template
    around an empty message."""
    full = list(model.tokenizer.apply_chat_template([{"role": "user", "content": text}]))
    empty = list(model.tokenizer.apply_chat_template([{"role": "user", "content": ""}]))
    start = next((i for i, (a, b) in enumerate(zip(full, empty, strict=False)) if a != b), min(len(full), len(empty)))
    end = 0
    while end < len(empty) - start and full[-1 - end] == empty[-1 - end]:
        end += 1
    return full[:start], full[start : len(full) - end], full[len(full) - end :]


def features(model: Any, text: str, layers: Sequence[int], *, wide: bool = False) -> np.ndarray:
    """The mean hidden state of each of `layers` over each window of `text`, side by side: float32
    [windows, layers x d]. `wide`: every window in the 128-token chunk (`layer_states`)."""
    ids = model.tokenizer.encode(text) or [0]
    rows = []
    for index, window in enumerate(windows(ids)):
        states = layer_states(model, window, layers, wide=wide)  # [layers, t, d]
        first = 1 if index == 0 and len(window) > 1 else 0  # the text's first token: an attention sink
        rows.append(states[:, first:].mean(axis=1).reshape(-1))
    return np.stack(rows).astype(np.float32)


def reading(model: Any, text: str, layers: Sequence[int], prompt_layers: Sequence[int] = ()) -> np.ndarray:
    """A probe's features of `text`: each window's mean states of `layers` (`features`), the chat prompt's last
    states of `prompt_layers` (`prompt_states`) beside each: float32 [windows, features]. With prompt layers, every
    pass runs in the 128-token chunk (the chat prompt needs it: its template alone passes 16 tokens), so the probe
    needs one program, not two: after `release_programs()` a chat's next turn compiled both again (tour chapter 9
    peaked at 1,525 MiB with two, 1,311 with one), for ~30 ms less on a short request."""
    rows = features(model, text, layers, wide=bool(prompt_layers))
    if not prompt_layers:
        return rows
    prompt = prompt_states(model, text, prompt_layers)
    return np.hstack([rows, np.broadcast_to(prompt, (len(rows), prompt.shape[0]))])


def prompt_states(model: Any, text: str, layers: Sequence[int]) -> np.ndarray:
    """The state after each of `layers` at the last token of `text` as the model's chat prompt (the user's message
    in its chat template, up to where the answer starts; its last `WINDOW` tokens), side by side: float32
    [layers x d]."""
    ids = model.tokenizer.apply_chat_template([{"role": "user", "content": text}])[-WINDOW:]
    return layer_states(model, ids, layers, wide=True)[:, -1].reshape(-1)


def layer_states(model: Any, ids: Sequence[int], layers: Sequence[int], *, wide: bool = False) -> np.ndarray:
    """The hidden states [layers, t, d] after each of `layers` of `model` for tokens `ids` (t <= `WINDOW`): one
    zero-padded chunk of 16 (unless `wide`) or 128 tokens at position 0 (`Runner.layer_states`), the shapes of a
    chat's own prefill, so no program is compiled for the probe alone. The padding changes no state."""
    width = WINDOW if wide else next(w for w in _WIDTHS if w >= len(ids))
    return model.runner.layer_states(ids, layers, width)


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
