"""Choosing the next token: sampling parameters and a pure, jittable sampler.

The sampler reports what the views need besides the token: its logprob under the model, the entropy of the
model's distribution, and the top alternatives with the probability the sampler finally gave each (zero where
top-k / top-p / min-p cut it away), whether the repetition penalty lowered each, and each one's probability after
the penalty alone (so a view can say which knob moved a token: the penalty, or temperature and the filters).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jupyter_chatflow.errors import GenerationError
from jupyter_chatflow.settings import SAMPLER_DEFAULTS, number_error, sampler_numbers, shown


@dataclasses.dataclass(frozen=True, kw_only=True)
class SamplingParams:
    """What a caller asks of the sampler. Names, ranges and defaults are `settings.OPTIONS`': every knob starts at
    the value where it changes nothing (temperature 1, no top-k/top-p/min-p filter, no repetition penalty), so
    `SamplingParams(temperature=0.0)` is plain greedy decoding; a chat turn starts from the chat defaults instead
    (`ChatRequest.build`)."""

    temperature: float = SAMPLER_DEFAULTS["temperature"]
    """Divides the logits; 0 means greedy (always the most likely token)."""
    top_k: int = SAMPLER_DEFAULTS["top_k"]
    """Keep only the k most likely tokens; 0 keeps all."""
    top_p: float = SAMPLER_DEFAULTS["top_p"]
    """Keep the smallest set of tokens whose probability sums to at least p (nucleus); 1 keeps all."""
    min_p: float = SAMPLER_DEFAULTS["min_p"]
    """Drop tokens less likely than min_p times the most likely one; 0 keeps all."""
    repetition_penalty: float = SAMPLER_DEFAULTS["repetition_penalty"]
    """Divide positive (multiply negative) logits of tokens already in the prompt or answer; 1 is off."""
    max_tokens: int = SAMPLER_DEFAULTS["max_tokens"]
    """Stop after this many generated tokens."""
    stop: tuple[str, ...] = SAMPLER_DEFAULTS["stop"]
    """Stop as soon as the answer contains one of these strings (it is not included in the answer); one string
    may be given alone."""
    seed: int | None = SAMPLER_DEFAULTS["seed"]
    """Seed of the random stream, 0 to 2**32 - 1; the same seed and prompt give the same answer. None picks one."""
    ignore_eos: bool = SAMPLER_DEFAULTS["ignore_eos"]
    """Keep generating past the model's stop tokens (for benchmarks: always exactly max_tokens)."""
    penalty_from: int = 0
    """The repetition penalty counts the prompt's tokens from this position on, and every generated one: 0 counts
    the whole prompt, as vLLM and transformers do; a chat turn counts its answer alone (the length of its prompt).
    Why, as measured: docs/sampling.md#the-repetition-penalty-over-the-answer-alone."""

    def __post_init__(self) -> None:
        for knob in sampler_numbers():  # plain int / float values: JSON-ready, hashable
            value = getattr(self, knob.name)
            error = number_error(knob.name, value)
            if error:
                raise GenerationError(error)
            object.__setattr__(self, knob.name, value if value is None else knob.type(value))
        object.__setattr__(self, "stop", _stop_strings(self.stop))
        if not isinstance(self.ignore_eos, bool):
            raise GenerationError(f"ignore_eos must be True or False; got {shown(self.ignore_eos)}")
        if isinstance(self.penalty_from, bool) or not isinstance(self.penalty_from, int) or self.penalty_from < 0:
            raise GenerationError(f"penalty_from must be a prompt position, 0 or more; got {shown(self.penalty_from)}")

    def as_array(self) -> np.ndarray:
        """The numeric knobs as one float32 vector, so changing them never recompiles (on the host: making it on the
        device compiled a conversion program on the way to a first token)."""
        return np.array([self.temperature, self.top_k, self.top_p, self.min_p, self.repetition_penalty], np.float32)


def _stop_strings(stop: object) -> tuple[str, ...]:
    """`stop` as a tuple of non-empty strings (one string is one stop string)."""
    strings = (stop,) if isinstance(stop, str) else stop
    if not isinstance(strings, (list, tuple)) or not all(isinstance(s, str) and s for s in strings):
        raise GenerationError(f"stop must be a non-empty string or a list of them; got {shown(stop)}")
    return tuple(strings)


GREEDY_KNOBS = np.array([0.0, 0.0, 1.0, 0.0, 1.0], np.float32)
"""`SamplingParams(temperature=0.0).as_array()` on the host: the knobs of a batch's padding rows."""


class Sampled(NamedTuple):
    """One sampler decision: arrays with a leading batch axis."""

    token: jax.Array  # [b] int32
    logprob: jax.Array  # [b] log p(token) under the model (temperature 1, no filtering)
    entropy: jax.Array  # [b] entropy of the model's distribution, in nats
    top_ids: jax.Array  # [b, n] the n most likely tokens after the repetition penalty
    top_logprobs: jax.Array  # [b, n] their model logprobs
    top_sampling_probs: jax.Array  # [b, n] the probability the sampler gave each after all filters
    top_penalized: jax.Array  # [b, n] bool: the repetition penalty lowered it (seen, and the penalty is not 1)
    top_penalized_logprobs: jax.Array  # [b, n] their logprobs after the penalty alone (temperature 1, no filter)


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

    With knobs [b, 5] (one `as_array()` per row) and keys [b], each row samples as it would alone: a batch of
    independent sequences (`scheduler.py`).
    """
    per_row = knobs.ndim == 2
    temperature, top_k, top_p, min_p, penalty = (knobs[:, i, None] if per_row else knobs[i] for i in range(5))
    logprobs = jax.nn.log_softmax(logits, axis=-1)
    entropy = -jnp.sum(jnp.exp(logprobs) * jnp.where(jnp.isfinite(logprobs), logprobs, 0.0), axis=-1)
    preferred = penalize(logits, seen, penalty)
    penalized = preferred if allowed is None else jnp.where(allowed, preferred, -jnp.inf)

    def greedy(_):
        token = jnp.argmax(penalized, axis=-1).astype(jnp.int32)
        return token, jax.nn.one_hot(token, logits.shape[-1], dtype=jnp.float32)

    def stochastic(_):
        scale = jnp.where(temperature > 0, temperature, 1.0) if per_row else temperature  # greedy rows: any
        probs = jax.nn.softmax(filter_logits(penalized / scale, top_k, top_p, min_p), axis=-1)
        draw = jax.vmap(jax.random.categorical) if per_row else jax.random.categorical  # a key per row, or one
        return draw(key, jnp.log(probs)).astype(jnp.int32), probs

    top_preferred, top_ids = jax.lax.top_k(preferred, n_top)  # [b, n]
    if per_row:  # every row greedy or sampled on its own; the sort and draw run only when some row samples
        token, top_sampling_probs = _rows(temperature[:, 0] > 0, penalized, top_ids, stochastic)
    else:
        token, final_probs = jax.lax.cond(temperature > 0, stochastic, greedy, None)  # [b], [b, V]
    return Sampled(
        token=token,
        logprob=jnp.take_along_axis(logprobs, token[:, None], axis=-1)[:, 0],
        entropy=entropy,
        top_ids=top_ids,
        top_logprobs=jnp.take_along_axis(logprobs, top_ids, axis=-1),
        top_sampling_probs=top_sampling_probs if per_row else jnp.take_along_axis(final_probs, top_ids, axis=-1),
        top_penalized=jnp.take_along_axis(seen, top_ids, axis=-1) & (penalty != 1),
        top_penalized_logprobs=top_preferred - jax.nn.logsumexp(preferred, axis=-1, keepdims=True),  # one [b, V] sum
    )


def _rows(sampled: jax.Array, penalized: jax.Array, top_ids: jax.Array, stochastic) -> tuple[jax.Array, jax.Array]:
    """(token [b], the sampling probabilities of top_ids [b, n]): `stochastic`'s for the rows where `sampled` is
    set, the greedy choice elsewhere. The greedy token is `top_k(…, 1)` (the same token as argmax, lowest index
    first among equals): XLA:CPU's argmax over [16, 49152] took ~8 ms, top_k ~1 ms; and no [b, V] one-hot."""
    token = jax.lax.top_k(penalized, 1)[1][:, 0].astype(jnp.int32)
    at_top = (top_ids == token[:, None]).astype(jnp.float32)

    def mixed(_):
        drawn, probs = stochastic(None)
        chosen = jnp.take_along_axis(probs, top_ids, axis=-1)
        return jnp.where(sampled, drawn, token), jnp.where(sampled[:, None], chosen, at_top)

    return jax.lax.cond(jnp.any(sampled), mixed, lambda _: (token, at_top), None)
