"""Looking inside a model's prediction: attribution to the prompt's positions (`Model.attribution`), and the logit
lens's result (`Lens`: `Model.lens` reads it on the serving path, `Runner.lens`). A model with heads knocked out or
its residual steered (`Model.intervened`) is looked into the same way.

Attribution runs the transformer's explicit pass (`model/explicit.py`: whole attention matrices, differentiable)
in a program compiled for this call and let go after it (nothing stays compiled between looks: a tour notebook's
memory stays what its turns need). What is compared with Hugging Face transformers, and how closely: `tests/model/test_
inside_reference.py`.
"""

from __future__ import annotations

import dataclasses
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jupyter_chatflow.errors import GenerationError
from jupyter_chatflow.model import explicit
from jupyter_chatflow.model.transformer import Transformer

Method = Literal["grad_x_input", "integrated_gradients"]
STEPS_AT_ONCE = 2
"""Integrated gradients' points computed together (a batch of the explicit pass: memory grows with it; four at once
took a notebook's kernel on the default model to 1.42-1.48 GiB, near Binder's 1.5)."""


@dataclasses.dataclass(frozen=True)
class Lens:
    """The logit lens over a sequence: after the embeddings (row 0) and after each layer (row i), the top-k next
    tokens at each position and their log-probabilities, each residual read through the model's final norm and
    output head; the last row is the model's own prediction."""

    top_ids: np.ndarray
    """int32 [n_layers + 1, T, k]."""
    top_logprobs: np.ndarray
    """float32 [n_layers + 1, T, k]."""
    tracked_ids: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 0), np.int32))
    """int32 [T, m]: the ids followed at each position (`Model.lens(track=…)`)."""
    tracked_logprobs: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 0, 0), np.float32))
    """float32 [n_layers + 1, T, m]: the followed ids' log-probabilities at each layer."""
    tracked_ranks: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 0, 0), np.int32))
    """int32 [n_layers + 1, T, m]: the followed ids' ranks (0: the top one; the count of tokens above each)."""


def tracked(track: Sequence[int] | Sequence[Sequence[int]] | None, length: int, vocab: int) -> np.ndarray:
    """`track` as [length, m] int32 ids: none ([length, 0]), the same ids at every position, or each its own."""
    if track is None:
        return np.zeros((length, 0), np.int32)
    array = np.asarray(track)
    if array.ndim == 1:
        array = np.broadcast_to(array, (length, array.size))
    if array.ndim != 2 or array.shape[0] != length or array.dtype.kind not in "iu":
        raise GenerationError(f"track must be token ids, [m] or one row per position [{length}, m]; got {array.shape}")
    if array.size and not (array.min() >= 0 and array.max() < vocab):
        raise GenerationError(f"track must hold token ids in [0, {vocab})")
    return np.ascontiguousarray(array, np.int32)


WIDTH = 64
"""Attribution pads its input to a multiple of this many positions (the padding comes after the last position, which
causal attention never lets it reach): the answer's tokens of one turn share a few programs."""


class KeptPrograms:
    """A model's compiled attribution programs of one input width, kept between looks at one turn (its tokens'
    inputs differ by a position or two: one width); a look at another width lets them go first, so at most one
    width's programs are held (~0.1 GiB on the default model). `Runner.release_programs` lets go of them too."""

    def __init__(self) -> None:
        self._width = 0
        self._programs: dict[str, Callable[..., jax.Array]] = {}
        self._lock = threading.Lock()

    def get(self, name: str, width: int, build: Callable[[], Callable[..., jax.Array]]) -> Callable[..., jax.Array]:
        """The program `name` for inputs `width` wide, compiled by `build` if it is not held."""
        with self._lock:
            if width != self._width:
                self._programs, self._width = {}, width
            if name not in self._programs:
                self._programs[name] = build()
            return self._programs[name]

    def clear(self) -> None:
        with self._lock:
            self._programs, self._width = {}, 0


def attribution(
    transformer: Transformer, ids: Sequence[int], target_id: int, *, method: Method, steps: int,
    contrast_id: int | None, progress: Callable[[int, int], None] | None, kept: KeptPrograms,
) -> np.ndarray:  # fmt: skip
    """Per position of `ids`, the sum over the hidden dimension of gradient × input for log p(target) (less log
    p(contrast)) after the last position: float32 [T]. Integrated gradients average the gradient over `steps`
    points from a zero input to the real one (midpoints), so the positions' values add up to f(input) - f(zeros).
    The programs are `kept`'s, compiled for the input padded to a multiple of `WIDTH` positions."""
    if method not in ("grad_x_input", "integrated_gradients"):
        raise GenerationError(f'method must be "grad_x_input" or "integrated_gradients", got {method!r}')
    vocab = transformer.config.vocab_size
    for name, token in (("target_id", target_id), ("contrast_id", contrast_id)):
        if token is not None and not 0 <= token < vocab:
            raise GenerationError(f"{name} must be a token id in [0, {vocab}), got {token}")
    if method == "integrated_gradients" and (not isinstance(steps, int) or isinstance(steps, bool) or steps < 1):
        raise GenerationError(f"steps must be a whole number of at least 1, got {steps!r}")
    graphdef, state = nnx.split(transformer)
    n = len(ids)
    width = -(-n // WIDTH) * WIDTH
    tokens = jnp.asarray(np.pad(np.asarray(_tokens(ids)), ((0, 0), (0, width - n))))
    at = (jnp.int32(n - 1), jnp.int32(target_id), jnp.int32(-1 if contrast_id is None else contrast_id))

    def f(state, embeds, tokens, last, target, contrast):
        return explicit.target_logprob(nnx.merge(graphdef, state), tokens, embeds, target, contrast, last)

    def compiled(name: str, function: Callable[..., jax.Array], *args: object) -> Callable[..., jax.Array]:
        return kept.get(name, width, lambda: jax.jit(function).lower(*args).compile())

    embed = compiled("embed", lambda state, tokens: nnx.merge(graphdef, state).embed_chunk(tokens, 0)[0], state, tokens)
    embeds = embed(state, tokens)
    if method == "grad_x_input":
        grad = compiled("grad", jax.grad(f, argnums=1), state, embeds, tokens, *at)
        return np.asarray(jnp.sum(grad(state, embeds, tokens, *at) * embeds, axis=-1)[0, :n], np.float32)
    points = jax.vmap(jax.grad(f, argnums=1), in_axes=(None, 0, None, None, None, None))
    batch = jnp.zeros((STEPS_AT_ONCE, *embeds.shape), embeds.dtype)
    batched = compiled(f"ig{STEPS_AT_ONCE}", points, state, batch, tokens, *at)
    total = jnp.zeros_like(embeds)
    alphas = (np.arange(steps) + 0.5) / steps
    for start in range(0, steps, STEPS_AT_ONCE):
        part = np.zeros(STEPS_AT_ONCE, np.float32)  # (a last part of fewer points: the rest at 0, left out below)
        chunk = alphas[start : start + STEPS_AT_ONCE]
        part[: len(chunk)] = chunk
        grads = batched(state, jnp.asarray(part, embeds.dtype)[:, None, None, None] * embeds[None], tokens, *at)
        total = total + jnp.sum(grads[: len(chunk)], axis=0)
        if progress is not None:
            progress(min(start + STEPS_AT_ONCE, steps), steps)
    values = np.asarray(jnp.sum(total / steps * embeds, axis=-1)[0, :n], np.float32)
    value = compiled("value", f, state, embeds, tokens, *at)  # (one program for both ends of the path)
    moved = float(value(state, embeds, tokens, *at) - value(state, jnp.zeros_like(embeds), tokens, *at))
    if abs(float(values.sum()) - moved) > GAP * abs(moved) + 1e-3:
        warnings.warn(completeness_gap(float(values.sum()), moved, steps), RuntimeWarning, stacklevel=3)
    return values


GAP = 0.05
"""How far (relative) integrated gradients' sum may miss f(input) - f(zeros) before a warning says so."""


def completeness_gap(total: float, moved: float, steps: int) -> str:
    """The warning when the quadrature missed: the zero baseline sits where every RMSNorm divides by ~sqrt(eps),
    and the path from it bends over decades of scale (docs/inside.md#integrated-gradients-from-zero)."""
    return (f"integrated gradients' positions add up to {total:.3f}, but log p moves {moved:.3f} from a zero input "
            f"to this one ({steps} steps): the path from zero passes where the model's norms divide by almost "
            "nothing, and a few dozen points do not follow it. Read the values as a rough picture, or use "
            'method="grad_x_input" (docs/inside.md#integrated-gradients-from-zero).')  # fmt: skip


def _tokens(ids: Sequence[int]) -> jax.Array:
    array = np.asarray(list(ids), np.int32)
    if array.ndim != 1 or array.size == 0:
        raise GenerationError("ids must be a non-empty sequence of token ids")
    return jnp.asarray(array[None])
