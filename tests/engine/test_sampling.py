"""The sampler as pure functions on tiny logits."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jupyter_chatflow import GenerationError, SamplingParams
from jupyter_chatflow.engine.run import key_data
from jupyter_chatflow.engine.sampling import GREEDY_KNOBS, filter_logits, penalize, sample

LOGITS = jnp.array([[2.0, 1.0, 0.5, -1.0, 3.0, 0.0]])
NOTHING_SEEN = jnp.zeros((1, 6), bool)


def draw(params: SamplingParams, seed: int = 0, logits=LOGITS, seen=NOTHING_SEEN, n_top: int = 3):
    return sample(logits, params.as_array(), seen, jax.random.key(seed), n_top)


def test_temperature_zero_is_argmax():
    assert int(draw(SamplingParams(temperature=0.0)).token[0]) == 4


@pytest.mark.parametrize("seed", range(5))
def test_top_k_one_equals_greedy(seed):
    assert int(draw(SamplingParams(temperature=1.5, top_k=1), seed).token[0]) == 4


@pytest.mark.parametrize("seed", range(5))
def test_tiny_top_p_equals_greedy(seed):
    assert int(draw(SamplingParams(temperature=1.0, top_p=0.01), seed).token[0]) == 4


def test_filter_top_k_keeps_exactly_k():
    kept = np.isfinite(np.asarray(filter_logits(LOGITS, jnp.float32(3), jnp.float32(1.0), jnp.float32(0.0))))
    assert kept.tolist() == [[True, True, False, False, True, False]]


def test_filter_top_p_keeps_the_smallest_nucleus():
    probs = np.asarray(jax.nn.softmax(LOGITS))[0]  # sorted: 3.0 (.58), 2.0 (.21), 1.0 (.08) ...
    p = float(probs[4] + probs[0]) - 1e-3  # the top two reach p; the third is not needed
    kept = np.isfinite(np.asarray(filter_logits(LOGITS, jnp.float32(0), jnp.float32(p), jnp.float32(0.0))))
    assert kept.tolist() == [[True, False, False, False, True, False]]


def test_filter_min_p_drops_tokens_below_the_fraction_of_the_top():
    # p_i / p_max = exp(l_i - 3): keep 2.0 (0.37) and 1.0 (0.135), drop 0.5 (0.082) at min_p = 0.1
    kept = np.isfinite(np.asarray(filter_logits(LOGITS, jnp.float32(0), jnp.float32(1.0), jnp.float32(0.1))))
    assert kept.tolist() == [[True, True, False, False, True, False]]


def test_repetition_penalty_divides_positive_and_multiplies_negative():
    seen = jnp.array([[True, False, False, True, False, False]])
    out = np.asarray(penalize(LOGITS, seen, jnp.float32(2.0)))
    np.testing.assert_allclose(out, [[1.0, 1.0, 0.5, -2.0, 3.0, 0.0]])


def test_penalty_changes_the_greedy_choice():
    seen = jnp.array([[False, False, False, False, True, False]])  # 3.0 / 2 = 1.5 < 2.0
    assert int(draw(SamplingParams(temperature=0.0, repetition_penalty=2.0), seen=seen).token[0]) == 0


def test_same_seed_same_draws_and_different_seeds_differ():
    params = SamplingParams(temperature=5.0)
    flat = jnp.zeros((1, 1000))
    first = [int(draw(params, s, logits=flat, seen=jnp.zeros((1, 1000), bool)).token[0]) for s in range(20)]
    again = [int(draw(params, s, logits=flat, seen=jnp.zeros((1, 1000), bool)).token[0]) for s in range(20)]
    assert first == again and len(set(first)) > 10


def test_sampling_follows_the_distribution():
    logits = jnp.log(jnp.array([[0.7, 0.2, 0.1]]))
    keys = jax.random.split(jax.random.key(1), 4000)
    knobs = SamplingParams(temperature=1.0).as_array()
    tokens = jax.vmap(lambda k: sample(logits, knobs, jnp.zeros((1, 3), bool), k, 2).token[0])(keys)
    counts = np.bincount(np.asarray(tokens), minlength=3) / 4000
    np.testing.assert_allclose(counts, [0.7, 0.2, 0.1], atol=0.03)


def test_reports_logprob_entropy_and_alternatives():
    out = draw(SamplingParams(temperature=0.0, top_k=2), n_top=3)
    logprobs = np.asarray(jax.nn.log_softmax(LOGITS))[0]
    assert float(out.logprob[0]) == pytest.approx(logprobs[4], abs=1e-6)
    assert float(out.entropy[0]) == pytest.approx(-(np.exp(logprobs) * logprobs).sum(), abs=1e-5)
    assert np.asarray(out.top_ids[0]).tolist() == [4, 0, 1]
    np.testing.assert_allclose(np.asarray(out.top_logprobs[0]), logprobs[[4, 0, 1]], atol=1e-6)
    # greedy puts all sampling mass on the argmax
    np.testing.assert_allclose(np.asarray(out.top_sampling_probs[0]), [1.0, 0.0, 0.0])


@pytest.mark.parametrize("penalty", [2.0, 1.0])
def test_reports_which_alternatives_the_penalty_lowered_and_their_probabilities_after_it(penalty):
    seen = jnp.array([[True, False, False, True, True, False]])  # 3.0 and 2.0 seen: 1.5 and 1.0 at penalty 2
    out = draw(SamplingParams(temperature=0.7, top_p=0.9, repetition_penalty=penalty), seen=seen, n_top=4)
    ids = np.asarray(out.top_ids[0])
    after = np.asarray(jax.nn.log_softmax(penalize(LOGITS, seen, jnp.float32(penalty))))[0]
    assert np.asarray(out.top_penalized[0]).tolist() == [bool(seen[0, i]) and penalty != 1 for i in ids]
    np.testing.assert_allclose(np.asarray(out.top_penalized_logprobs[0]), after[ids], atol=1e-6)
    if penalty == 1:  # off: the probabilities after it are the model's
        np.testing.assert_allclose(
            np.asarray(out.top_penalized_logprobs[0]), np.asarray(out.top_logprobs[0]), atol=1e-6
        )


def test_sampling_probs_show_what_top_k_cut_away():
    out = draw(SamplingParams(temperature=1.0, top_k=2), n_top=3)
    probs = np.asarray(out.top_sampling_probs[0])
    assert probs[2] == 0.0 and probs[0] + probs[1] == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"temperature": -0.1}, "temperature must be >= 0"),
        ({"top_p": 0.0}, "top_p must be in"),
        ({"top_k": -1}, "top_k must be >= 0"),
        ({"min_p": 1.0}, "min_p must be in"),
        ({"max_tokens": 0}, "max_tokens must be >= 1"),
        ({"repetition_penalty": 0.0}, "repetition_penalty must be > 0"),
    ],
)
def test_params_are_validated(bad, message):
    with pytest.raises(GenerationError, match=message):
        SamplingParams(**bad)


def test_per_row_knobs_and_keys_sample_each_row_as_alone():
    """A batch with knobs [b, 5] and keys [b]: each row is what `sample` gives that row alone."""
    logits = jnp.concatenate([LOGITS, LOGITS[:, ::-1], LOGITS * 0.5])
    seen = jnp.array([[False] * 6, [False, True, False, False, False, False], [False] * 6])
    rows = [
        SamplingParams(temperature=0.0),
        SamplingParams(temperature=0.0, repetition_penalty=3.0),
        SamplingParams(temperature=2.0, top_k=4, seed=9),
    ]
    keys = jax.random.wrap_key_data(jnp.stack([jax.random.key_data(jax.random.key(s)) for s in (0, 1, 9)]))
    batch = sample(logits, jnp.stack([p.as_array() for p in rows]), seen, keys, 3)
    for i, (params, seed) in enumerate(zip(rows, (0, 1, 9), strict=True)):
        one = draw(params, seed, logits[i : i + 1], seen[i : i + 1])
        assert int(batch.token[i]) == int(one.token[0])
        np.testing.assert_allclose(batch.top_sampling_probs[i], one.top_sampling_probs[0], rtol=1e-6)
        np.testing.assert_allclose(batch.top_penalized_logprobs[i], one.top_penalized_logprobs[0], atol=1e-6)
        assert batch.top_penalized[i].tolist() == one.top_penalized[0].tolist()
    assert int(batch.token[1]) != int(jnp.argmax(logits[1]))  # the penalty moved that row's greedy choice


def test_greedy_knobs_are_the_host_copy_of_a_greedy_sampler():
    assert np.array_equal(GREEDY_KNOBS, SamplingParams(temperature=0.0).as_array())


@pytest.mark.parametrize("seed", [0, 1, 7, 2**31 - 1, 2**31, 2**32 - 1])
def test_a_seeds_key_is_made_on_the_host_as_jax_makes_it(seed):
    assert np.array_equal(key_data(seed), np.asarray(jax.random.key_data(jax.random.key(seed))))
