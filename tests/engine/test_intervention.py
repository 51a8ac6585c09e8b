"""A model with heads knocked out or its residual steered (`Model.intervened`): the same weights and programs as the
model it came from, its changes in every pass (the prefill and each decode step alike), the original untouched;
directions from contrasting texts. What transformers says of the same changes: tests/model/test_inside_reference.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_chatflow.engine.intervention import Direction, Steer
from jupyter_chatflow.errors import GenerationError

PROMPT = [1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100]


def test_an_intervened_model_shares_the_weights_and_the_programs_and_leaves_the_original_as_it_was(tiny_model):
    plain = tiny_model.logits(PROMPT)
    jitted = tiny_model.runner._programs._jitted
    programs = [jitted.embed_chunk, *jitted.layers, jitted.final_norm, jitted.logits]
    before = [program._cache_size() for program in programs]
    ablated = tiny_model.intervened(ablate_heads={0: [0, 1]})
    changed = ablated.logits(PROMPT)
    assert ablated.runner._programs._jitted is jitted  # (its programs are the original's, compiled for this shape)
    assert [program._cache_size() for program in programs] == before
    assert np.abs(changed - plain).max() > 1e-3
    assert np.array_equal(tiny_model.logits(PROMPT), plain)
    mine, theirs = tiny_model.runner.transformer, ablated.runner.transformer
    assert mine.blocks[1].attn.wqkv.get_value() is theirs.blocks[1].attn.wqkv.get_value()
    assert ablated.intervention is not None and ablated.intervention.ablated == {0: (0, 1)}
    assert tiny_model.intervention is None
    # the original's own arrays are as they were (its explicit pass reads them: attribution, the lens of old)
    assert np.array_equal(np.asarray(mine.blocks[0].attn.keep.get_value()), np.ones(tiny_model.config.n_heads))
    assert not np.asarray(mine.blocks[0].steer.get_value()).any()
    np.testing.assert_array_equal(np.asarray(theirs.blocks[0].attn.keep.get_value())[:2], [0.0, 0.0])


def test_each_decode_step_runs_the_intervention_as_the_prefill_does(tiny_model):
    """Greedy tokens of the intervened model are the argmax of its own logits at every step, and not the original's:
    the decode program reads the heads' weights and the steering as the prefill does."""
    steer = np.random.default_rng(0).normal(size=tiny_model.config.dim).astype(np.float32) * 3
    model = tiny_model.intervened(ablate_heads={1: [0]}, steer={0: steer})
    tokens = [s.token_id for s in model.generate(PROMPT, max_tokens=6, temperature=0.0, ignore_eos=True)]
    logits = model.logits(PROMPT + tokens)
    assert tokens == [int(np.argmax(row)) for row in logits[len(PROMPT) - 1 : -1]]
    plain = [s.token_id for s in tiny_model.generate(PROMPT, max_tokens=6, temperature=0.0, ignore_eos=True)]
    assert plain != tokens


def test_a_direction_between_two_texts_is_of_length_one_and_steers_by_the_residuals_length(tiny_model):
    direction = tiny_model.direction(0, ["I love this", "what a joy"], "I hate this")
    assert np.isclose(np.linalg.norm(direction.vector), 1.0, atol=1e-5)
    assert direction.layer == 0 and direction.scale > 0
    assert direction.label == '"I love this" + "what a joy" − "I hate this"'
    toward = tiny_model.runner.layer_states(tiny_model.tokenizer.encode("I love this"), (1,))[0]  # (after layer 0)
    assert np.isclose(np.median(np.linalg.norm(toward, axis=-1)), direction.scale, rtol=0.5)  # (over both sides)
    steer = direction * 2
    assert isinstance(steer, Steer) and steer.strength == 2.0 and steer.label == direction.label
    assert np.isclose(np.linalg.norm(steer.vector), 2 * direction.scale, rtol=1e-5)
    zero = tiny_model.intervened(steer={0: direction * 0})
    assert zero.intervention is not None and zero.intervention.empty
    assert np.array_equal(zero.logits(PROMPT), tiny_model.logits(PROMPT))


def test_bad_directions_and_steering_say_what_is_wrong(tiny_model):
    with pytest.raises(GenerationError, match="layer must be 0 to 1"):
        tiny_model.direction(2, "a", "b")
    with pytest.raises(GenerationError, match="at least one non-empty text on each side"):
        tiny_model.direction(1, "a", [])
    with pytest.raises(GenerationError, match="no direction between them"):
        tiny_model.direction(1, "same", "same")
    with pytest.raises(GenerationError, match="model's width"):
        tiny_model.intervened(steer={0: Steer(vector=np.ones(3, np.float32))})
    same = Direction(vector=np.ones(3, np.float32), layer=1, scale=1.0, label="x")
    assert (0.5 * same).strength == 0.5
