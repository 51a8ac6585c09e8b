"""The logit lens on the serving path (`Runner.lens`): over several prefill chunks it reads what the explicit pass
reads, and a second look compiles nothing; attribution's programs kept for one input width. Against transformers:
tests/model/test_inside_reference.py."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jupyter_chatflow.model import explicit


def test_a_lens_over_several_chunks_reads_what_the_explicit_pass_reads(tiny_model):
    ids = [int(i) for i in np.random.default_rng(0).integers(3, 260, size=300)]  # (chunks of 128, 128 and 16+)
    lens = tiny_model.lens(ids, k=4)
    assert lens.top_ids.shape == lens.top_logprobs.shape == (tiny_model.config.n_layers + 1, 300, 4)
    graphdef, state = nnx.split(tiny_model.runner.transformer)
    model = nnx.merge(graphdef, state)
    stream = explicit.residuals(model, jnp.asarray([ids], jnp.int32))[:, 0]
    want = jax.nn.log_softmax(explicit.lens_logits(model, stream), axis=-1)
    values, indices = jax.lax.top_k(want, 4)
    assert np.array_equal(lens.top_ids, np.asarray(indices))
    assert np.abs(lens.top_logprobs - np.asarray(values)).max() < 1e-4
    assert np.allclose(lens.top_logprobs[-1, :, 0], tiny_model.logits(ids).max(-1) - _logsumexp(tiny_model.logits(ids)))


def test_a_second_look_compiles_nothing(tiny_model):
    """Nothing but the prefill's programs (compiled for a turn of that length already) and the reading program:
    none of the model's programs holds a compiled version more after the second and third looks."""
    jitted = tiny_model.runner._programs._jitted
    programs = [jitted.embed_chunk, *jitted.layers, jitted.final_norm, jitted.lens_top]
    ids = list(range(3, 40))
    tiny_model.lens(ids, k=5)
    before = [program._cache_size() for program in programs]
    tiny_model.lens(ids[::-1], k=5)
    tiny_model.lens(ids[:30], k=5)  # (the same prefill chunks: two of 16)
    assert [program._cache_size() for program in programs] == before


def _logsumexp(logits: np.ndarray) -> np.ndarray:
    top = logits.max(-1, keepdims=True)
    return (top + np.log(np.exp(logits - top).sum(-1, keepdims=True)))[:, 0]


def test_tracked_ids_get_their_log_probability_and_rank_at_every_layer(tiny_model):
    ids = list(range(3, 40))
    lens = tiny_model.lens(ids, k=10, track=[[ids[t + 1] if t + 1 < len(ids) else 5, 7] for t in range(len(ids))])
    assert lens.tracked_logprobs.shape == lens.tracked_ranks.shape == (tiny_model.config.n_layers + 1, len(ids), 2)
    for layer, t, j in [(0, 0, 0), (1, 5, 1), (2, 36, 0), (2, 10, 1)]:
        token = lens.tracked_ids[t, j]
        found = np.flatnonzero(lens.top_ids[layer, t] == token)
        if found.size:  # within the top 10: the same log-probability, and its place there is its rank
            assert lens.tracked_ranks[layer, t, j] == found[0]
            assert np.isclose(lens.tracked_logprobs[layer, t, j], lens.top_logprobs[layer, t, found[0]], atol=1e-5)
        else:
            assert lens.tracked_ranks[layer, t, j] >= 10
            assert lens.tracked_logprobs[layer, t, j] <= lens.top_logprobs[layer, t, -1] + 1e-6
    last = tiny_model.logits(ids)[-1]
    assert lens.tracked_ranks[-1, -1, 1] == int((last > last[7]).sum())  # (7 ranked among the whole vocabulary)
    same = tiny_model.lens(ids, k=3, track=[7, 9])  # the same ids at every position
    assert np.array_equal(same.tracked_ids, np.tile([7, 9], (len(ids), 1)))


def test_attribution_keeps_one_widths_programs_between_looks(tiny_model):
    """A turn's tokens are attributed over inputs a position apart: one width (64), compiled once; another width
    lets the first go; `release_programs` lets go of them all."""
    ids = list(range(3, 40))
    first = tiny_model.attribution(ids, 7)
    kept = dict(tiny_model.runner.looks._programs)
    tiny_model.attribution(ids[:-1], 7)
    np.testing.assert_array_equal(tiny_model.attribution(ids, 7), first)
    assert tiny_model.runner.looks._programs == kept and set(kept) == {"embed", "grad"}  # (the same compiled ones)
    tiny_model.attribution(list(range(3, 90)), 7)  # (width 128)
    assert tiny_model.runner.looks._width == 128
    tiny_model.runner.release_programs()
    assert tiny_model.runner.looks._width == 0
