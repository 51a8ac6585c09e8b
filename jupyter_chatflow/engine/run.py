"""One sequence's state while it runs (`SequenceState`), and a sampler's output read back as a `RawStep`."""

from __future__ import annotations

import jax
import numpy as np

from jupyter_chatflow.model.transformer import KVCache

from .generation import RawStep
from .sampling import Sampled


class SequenceState:
    """The state of one sequence while it runs: made by `Runner.start`, given a cache by `Runner.take_cache` (or a
    group's prefill), advanced by `Runner.prefill` and `Runner.decode`, or copied into a row of a `Batch`.

    `out` is the sampler's output of the last step (on the device until read), `seen` [1, V] the tokens the
    repetition penalty counts, `fed` how many generated tokens have their keys/values in `cache`.
    """

    def __init__(self, prompt: np.ndarray, seed: int, knobs: np.ndarray, seen: np.ndarray):
        self.prompt, self.knobs = prompt, knobs  # knobs: [5], `SamplingParams.as_array()`
        self.key_data = key_data(seed)[None]  # [1, 2]: the random key as the programs take it
        self.row_knobs = np.asarray(knobs)[None]  # [1, 5]: the knobs as the row programs take them
        self.seen: np.ndarray | jax.Array = seen  # [1, V] the tokens seen (on the device once sampled)
        self.cache: KVCache
        self.out: Sampled
        self.fed = 0  # generated tokens whose keys/values are in the cache
        self.tokens: list[int] = []  # generated tokens read back so far

    def host(self, out: Sampled) -> RawStep:
        """`out` read back to the host as this sequence's next token (counted in `tokens`)."""
        raw = raw_step(jax.device_get(out), 0)
        self.tokens.append(raw.token_id)
        return raw

    def written(self) -> np.ndarray:
        """The ids whose keys/values the cache holds, in position order."""
        return np.concatenate([self.prompt, np.asarray(self.tokens[: self.fed], np.int32)])


def key_data(seed: int) -> np.ndarray:
    """`jax.random.key_data(jax.random.key(seed))`, made on the host: in a new process `jax.random.key` compiles two
    small programs (~20 ms) on the way to a first token. Threefry's key is the seed's high and low 32 bits; another
    PRNG implementation (`jax_default_prng_impl`) is asked for its own."""
    if getattr(jax.config, "jax_default_prng_impl", "threefry2x32") != "threefry2x32":
        return np.asarray(jax.random.key_data(jax.random.key(seed)))
    return np.array([(seed >> 32) & 0xFFFFFFFF, seed & 0xFFFFFFFF], np.uint32)


def raw_step(host: Sampled, row: int) -> RawStep:
    """Row `row` of a sampler's output, already read back to the host."""
    return RawStep(
        token_id=int(host.token[row]),
        logprob=float(host.logprob[row]),
        entropy=float(host.entropy[row]),
        top_ids=np.asarray(host.top_ids[row]),
        top_logprobs=np.asarray(host.top_logprobs[row]),
        top_sampling_probs=np.asarray(host.top_sampling_probs[row]),
        top_penalized=np.asarray(host.top_penalized[row]),
        top_penalized_logprobs=np.asarray(host.top_penalized_logprobs[row]),
    )
