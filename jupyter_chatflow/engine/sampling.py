"""Choosing the next token: sampling parameters and a pure, jittable sampler.

The sampler reports what the views need besides the token: its logprob under the model, the entropy of the
model's distribution, and the top alternatives with the probability the sampler finally gave each (zero where
top-k / top-p / min-p cut it away).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jupyter_chatflow.errors import GenerationError


@dataclasses.dataclass(frozen=True, kw_only=True)
class SamplingParams:
    """What a caller asks of the sampler. Defaults are greedy-free, llama.cpp-like settings."""

    temperature: float = 0.7
    """Divides the logits; 0 means greedy (always the most likely token)."""
    top_k: int = 0
    """Keep only the k most likely tokens; 0 keeps all."""
    top_p: float = 1.0
    """Keep the smallest set of tokens whose probability sums to at least p (nucleus); 1 keeps all."""
    min_p: float = 0.0
    """Drop tokens less likely than min_p times the most likely one; 0 keeps all."""
    repetition_penalty: float = 1.0
    """Divide positive (multiply negative) logits of tokens already in the prompt or answer; 1 is off."""
    max_tokens: int = 256
    """Stop after this many generated tokens."""
    stop: tuple[str, ...] = ()
    """Stop as soon as the answer contains one of these strings (it is not included in the answer); one string
    may be given alone."""
    seed: int | None = None
    """Seed of the random stream, 0 to 2**32 - 1; the same seed and prompt give the same answer. None picks one."""
    ignore_eos: bool = False
    """Keep generating past the model's stop tokens (for benchmarks: always exactly max_tokens)."""

    def __post_init__(self) -> None:
        for name, whole, ok, allowed in _LIMITS:  # plain int / float values: JSON-ready, hashable
            object.__setattr__(self, name, _checked_number(name, getattr(self, name), whole, ok, allowed))
        object.__setattr__(self, "stop", _stop_strings(self.stop))
        object.__setattr__(self, "seed", _seed(self.seed))
        if not isinstance(self.ignore_eos, bool):
            raise GenerationError(f"ignore_eos must be True or False; got {_shown(self.ignore_eos)}")

    def as_array(self) -> jax.Array:
        """The numeric knobs as one float32 vector, so changing them never recompiles."""
        return jnp.array([self.temperature, self.top_k, self.top_p, self.min_p, self.repetition_penalty], jnp.float32)


MAX_SEED = 2**32 - 1
"""Seeds are 32-bit in JAX's default mode: a larger one would give the same stream as a smaller one."""

# (option, whole number?, allowed?, the allowed range as the error message says it)
_LIMITS: tuple[tuple[str, bool, Callable[[float], bool], str], ...] = (
    ("temperature", False, lambda v: v >= 0, ">= 0 (0 is greedy)"),
    ("top_k", True, lambda v: v >= 0, ">= 0 (0 keeps all tokens)"),
    ("top_p", False, lambda v: 0 < v <= 1, "in (0, 1]"),
    ("min_p", False, lambda v: 0 <= v < 1, "in [0, 1)"),
    ("repetition_penalty", False, lambda v: v > 0, "> 0 (1 is off)"),
    ("max_tokens", True, lambda v: v >= 1, ">= 1"),
)


def _is_number(value: object, *, whole: bool) -> bool:
    """A real number (not a bool): an integer when `whole`, else finite (no NaN, no infinity)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return isinstance(value, numbers.Integral) if whole else math.isfinite(value)


def _checked_number(name: str, value: Any, whole: bool, ok: Callable[[float], bool], allowed: str) -> float:
    if not _is_number(value, whole=whole) or not ok(value):
        kind = "a whole number" if whole else "a finite number"
        raise GenerationError(f"{name} must be {allowed}, {kind}; got {_shown(value)}")
    return int(value) if whole else float(value)


def _seed(seed: Any) -> int | None:
    if seed is None:
        return None
    if not (_is_number(seed, whole=True) and 0 <= seed <= MAX_SEED):
        raise GenerationError(f"seed must be None or a whole number from 0 to {MAX_SEED}; got {_shown(seed)}")
    return int(seed)


def _stop_strings(stop: object) -> tuple[str, ...]:
    """`stop` as a tuple of non-empty strings (one string is one stop string)."""
    strings = (stop,) if isinstance(stop, str) else stop
    if not isinstance(strings, (list, tuple)) or not all(isinstance(s, str) and s for s in strings):
        raise GenerationError(f"stop must be a non-empty string or a list of them; got {_shown(stop)}")
    return tuple(strings)


def _shown(value: object) -> str:
    """A value for an error message, with its type where the repr alone could mislead (True, '5')."""
    text = repr(value)
    text = text if len(text) <= 60 else text[:59] + "…"
    plain = isinstance(value, (int, float)) and not isinstance(value, bool)
    return text if plain else f"{text} ({type(value).__name__})"


class Sampled(NamedTuple):
    """One sampler decision: arrays with a leading batch axis."""

    token: jax.Array  # [b] int32
    logprob: jax.Array  # [b] log p(token) under the model (temperature 1, no filtering)
    entropy: jax.Array  # [b] entropy of the model's distribution, in nats
    top_ids: jax.Array  # [b, n] the n most likely tokens after the repetition penalty
    top_logprobs: jax.Array  # [b, n] their model logprobs
    top_sampling_probs: jax.Array  # [b, n] the probability the sampler gave each after all filters


def penalize(logits: jax.Array, seen: jax.Array, penalty: jax.Array) -> jax.Array:
    """CTRL-style repetition penalty on tokens in `seen` ([b, V] bool)."""
    scaled = jnp.where(logits > 0, logits / penalty, logits * penalty)
    return jnp.where(seen, scaled, logits)


def filter_logits(logits: jax.Array, top_k: jax.Array, top_p: jax.Array, min_p: jax.Array) -> jax.Array:
    """Set to -inf every logit that top-k, top-p or min-p removes. logits: [b, V] (already temperature-scaled)."""
    sorted_logits = jnp.sort(logits, axis=-1)[:, ::-1]  # [b, V] descending
    vocab = logits.shape[-1]
    k = jnp.where(top_k > 0, jnp.minimum(top_k, vocab), vocab).astype(jnp.int32)
    kth = jnp.take_along_axis(sorted_logits, jnp.broadcast_to(k - 1, (logits.shape[0], 1)), axis=-1)  # [b, 1]
    probs = jax.nn.softmax(sorted_logits, axis=-1)
    before = jnp.cumsum(probs, axis=-1) - probs  # mass strictly above each sorted token
    keep_sorted = before < top_p  # the first token is always kept
    nucleus_floor = jnp.min(jnp.where(keep_sorted, sorted_logits, jnp.inf), axis=-1, keepdims=True)
    min_p_floor = sorted_logits[:, :1] + jnp.log(jnp.maximum(min_p, 1e-30))
    floor = jnp.maximum(jnp.maximum(kth, nucleus_floor), jnp.where(min_p > 0, min_p_floor, -jnp.inf))
    return jnp.where(logits >= floor, logits, -jnp.inf)


def sample(
    logits: jax.Array,
    knobs: jax.Array,
    seen: jax.Array,
    key: jax.Array,
    n_top: int = 5,
    allowed: jax.Array | None = None,
) -> Sampled:
    """Pick the next token for each row of logits [b, V] given `SamplingParams.as_array()` knobs.

    Greedy (temperature 0) takes the argmax of the penalized logits; otherwise tokens are drawn from the
    filtered, temperature-scaled distribution with `key`. `allowed` ([b, V] bool, from a constraint) removes
    every other token before choosing; the alternatives still show what the model preferred, with sampling
    probability 0 where the constraint cut them.
    """
    temperature, top_k, top_p, min_p, penalty = (knobs[i] for i in range(5))
    logprobs = jax.nn.log_softmax(logits, axis=-1)
    entropy = -jnp.sum(jnp.exp(logprobs) * jnp.where(jnp.isfinite(logprobs), logprobs, 0.0), axis=-1)
    preferred = penalize(logits, seen, penalty)
    penalized = preferred if allowed is None else jnp.where(allowed, preferred, -jnp.inf)

    def greedy(_):
        token = jnp.argmax(penalized, axis=-1).astype(jnp.int32)
        return token, jax.nn.one_hot(token, logits.shape[-1], dtype=jnp.float32)

    def stochastic(_):
        probs = jax.nn.softmax(filter_logits(penalized / temperature, top_k, top_p, min_p), axis=-1)
        return jax.random.categorical(key, jnp.log(probs), axis=-1).astype(jnp.int32), probs

    token, final_probs = jax.lax.cond(temperature > 0, stochastic, greedy, None)  # [b], [b, V]
    _, top_ids = jax.lax.top_k(preferred, n_top)
    return Sampled(
        token=token,
        logprob=jnp.take_along_axis(logprobs, token[:, None], axis=-1)[:, 0],
        entropy=entropy,
        top_ids=top_ids,
        top_logprobs=jnp.take_along_axis(logprobs, top_ids, axis=-1),
        top_sampling_probs=jnp.take_along_axis(final_probs, top_ids, axis=-1),
    )
