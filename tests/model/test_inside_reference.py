"""The lens, attribution and interventions against Hugging Face transformers on the same weights, float32, for every
tiny architecture (references: `archs/make_inside_reference.py`, committed in `archs/inside/`).

What is compared: the lens's top-5 ids at every layer and position, its log-probabilities within 1e-4; grad × input
within 1e-4 relative of torch autograd; the logits with heads knocked out, and with the residual steered after a
layer, within 1e-4 of transformers with the same change made by a hook (each an intervened model's serving path).
Beside them, what needs no reference: an intervention that changes nothing is the serving path bit for bit;
integrated gradients warn, with both figures, when their sum misses f(input) - f(zeros) (docs/inside.md says why
they do from a zero input).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from jupyter_chatflow import load_model
from jupyter_chatflow.errors import GenerationError

ARCHS = Path(__file__).parent / "archs"
NAMES = list(json.loads((ARCHS / "manifest.json").read_text()))
SHORT_ROPE = "phi3-longrope"
"""Its engine serves a 1,024-token window with LongRoPE's long factors, where transformers uses the short ones for
a sequence within the original 256 positions (archs/README.md): its transformers reference is another model's.
The checks that need no reference still run on it."""


@pytest.fixture(scope="module", params=NAMES)
def case(request):
    reference = dict(np.load(ARCHS / "inside" / f"{request.param}.npz"))
    return request.param, load_model(ARCHS / f"{request.param}.gguf", dtype="float32"), reference


def test_the_lens_is_transformers_hidden_states_through_the_final_norm_and_head(case):
    name, model, ref = case
    if name == SHORT_ROPE:
        pytest.skip(SHORT_ROPE.join("  ") + "runs long RoPE factors, its reference the short ones")
    lens = model.lens(ref["tokens"].tolist(), k=5)
    assert lens.top_ids.shape == (model.config.n_layers + 1, len(ref["tokens"]), 5)
    close = np.abs(lens.top_logprobs - ref["lens_top_logprobs"]) <= 1e-4
    assert close.all(), f"{name}: {np.abs(lens.top_logprobs - ref['lens_top_logprobs']).max()}"
    # the ids: equal wherever two candidates are not tied within the tolerance (a tie may order either way)
    gaps = np.diff(ref["lens_top_logprobs"], axis=-1)
    settled = np.concatenate([np.abs(gaps) > 1e-4, np.ones((*gaps.shape[:-1], 1), bool)], axis=-1)
    settled &= np.concatenate([np.ones((*gaps.shape[:-1], 1), bool), np.abs(gaps) > 1e-4], axis=-1)
    assert (lens.top_ids == ref["lens_top_ids"])[settled].all(), name


def test_the_lens_last_row_is_the_models_own_prediction(case):
    _, model, ref = case
    ids = ref["tokens"].tolist()
    logits = model.logits(ids)
    logprobs = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
    lens = model.lens(ids, k=3)
    assert (lens.top_ids[-1, :, 0] == logits.argmax(-1)).all()
    assert np.abs(lens.top_logprobs[-1, :, 0] - logprobs.max(-1)).max() < 1e-4


def test_grad_x_input_is_torch_autograds(case):
    name, model, ref = case
    if name == SHORT_ROPE:
        pytest.skip(SHORT_ROPE.join("  ") + "runs long RoPE factors, its reference the short ones")
    ids, target = ref["tokens"].tolist(), int(ref["target"])
    for contrast, expected in ((None, ref["gxi"]), (int(ref["contrast"]), ref["gxi_contrast"])):
        got = model.attribution(ids, target, contrast_id=contrast)
        scale = np.abs(expected).max()
        assert np.abs(got - expected).max() <= 1e-4 * scale + 1e-6, (name, contrast, np.abs(got - expected).max())


def test_knocked_out_heads_and_a_steered_residual_give_transformers_logits(case):
    name, model, ref = case
    if name == SHORT_ROPE:
        pytest.skip(SHORT_ROPE.join("  ") + "runs long RoPE factors, its reference the short ones")
    ids = ref["tokens"].tolist()
    heads = iter(ref["ablate_heads"].tolist())
    layers = zip(ref["ablate_layers"], ref["ablate_counts"], strict=True)
    ablate = {int(layer): [next(heads) for _ in range(n)] for layer, n in layers}
    ablated = model.logits(ids, ablate_heads=ablate)
    assert np.abs(ablated - ref["ablated"]).max() < 1e-4, name
    assert np.abs(ablated - model.logits(ids)).max() > 1e-3  # (the heads mattered)
    steered = model.logits(ids, steer={int(ref["steer_layer"]): ref["steer"]})
    assert np.abs(steered - ref["steered"]).max() < 1e-4, name


def test_an_intervention_that_changes_nothing_is_the_serving_path_bit_for_bit(case):
    _, model, ref = case
    ids, plain = ref["tokens"].tolist(), model.logits(ref["tokens"].tolist())
    assert np.array_equal(model.logits(ids, ablate_heads={}, steer={}), plain)
    nothing = {0: np.zeros(model.config.dim, np.float32)}
    assert np.array_equal(model.logits(ids, ablate_heads={0: []}, steer=nothing), plain)  # (an intervened model)


def test_integrated_gradients_average_the_gradient_on_the_path_from_zero_and_say_when_they_miss(case):
    """IG = input × the mean gradient at the midpoints α = (k + 1/2) / steps of the path α · input; its sum should
    be f(input) - f(zeros), and where a few dozen points cannot follow the path (on these models they cannot: see
    docs/inside.md) a warning gives both figures."""
    import warnings

    name, model, ref = case
    ids, target = ref["tokens"].tolist(), int(ref["target"])
    seen: list[tuple[int, int]] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ig = model.attribution(ids, target, method="integrated_gradients", steps=8, progress=lambda *a: seen.append(a))
    logits = model.logits(ids)[-1]
    moved = logits[target] - np.logaddexp.reduce(logits) - _at_zeros(model, ids, target)
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    if abs(ig.sum() - moved) > 0.05 * abs(moved) + 1e-3:
        assert said and f"add up to {ig.sum():.3f}" in said[0] and f"moves {moved:.3f}" in said[0], (name, said)
    else:
        assert not said
    assert seen == [(2, 8), (4, 8), (6, 8), (8, 8)]


def _at_zeros(model, ids, target) -> float:
    import jax.numpy as jnp
    from flax import nnx

    from jupyter_chatflow.model import explicit

    transformer = model.runner.transformer
    graphdef, state = nnx.split(transformer)
    tokens = jnp.asarray(np.asarray(ids, np.int32)[None])
    embeds = jnp.zeros((1, len(ids), model.config.dim), jnp.float32)
    return float(explicit.target_logprob(nnx.merge(graphdef, state), tokens, embeds, target, -1))


def test_bad_interventions_say_what_is_wrong():
    model = load_model(ARCHS / "llama.gguf", dtype="float32")
    with pytest.raises(GenerationError, match="layers are 0 to 1"):
        model.logits([1, 2, 3], ablate_heads={5: [0]})
    with pytest.raises(GenerationError, match="heads are 0 to 3"):
        model.logits([1, 2, 3], ablate_heads={0: [4]})
    with pytest.raises(GenerationError, match="model's width"):
        model.logits([1, 2, 3], steer={0: np.ones(3)})
    with pytest.raises(GenerationError, match="method must be"):
        model.attribution([1, 2, 3], 5, method="saliency")  # type: ignore[arg-type]
    with pytest.raises(GenerationError, match="target_id must be a token id"):
        model.attribution([1, 2, 3], 10**6)


def check_real_model(model, ref: dict, *, lens_rel: float, gxi_rel: float) -> None:
    """A real model's lens, attribution and interventions against its reference (`make_inside_reference.py
    --gguf`): every lens top-5 list equal, log-probabilities within `lens_rel` of their size (at least 1), grad ×
    input within `gxi_rel` of the largest value, knocked-out heads and a steered residual within 1e-4."""
    ids, at = ref["tokens"].tolist(), ref["positions"]
    lens = model.lens(ids, k=5)
    assert (lens.top_ids == ref["lens_top_ids"]).all()
    scale = np.maximum(1.0, np.abs(ref["lens_top_logprobs"]))
    assert (np.abs(lens.top_logprobs - ref["lens_top_logprobs"]) <= lens_rel * scale).all()
    for contrast, expected in ((None, ref["gxi"]), (int(ref["contrast"]), ref["gxi_contrast"])):
        got = model.attribution(ids, int(ref["target"]), contrast_id=contrast)
        assert np.abs(got - expected).max() <= gxi_rel * np.abs(expected).max()
    heads, layers = iter(ref["ablate_heads"].tolist()), zip(ref["ablate_layers"], ref["ablate_counts"], strict=True)
    ablate = {int(layer): [next(heads) for _ in range(n)] for layer, n in layers}
    assert np.abs(model.logits(ids, ablate_heads=ablate)[at] - ref["ablated"]).max() < 1e-4
    steered = model.logits(ids, steer={int(ref["steer_layer"]): ref["steer"]})[at]
    assert np.abs(steered - ref["steered"]).max() < 1e-4


@pytest.mark.slow
def test_the_default_model_against_transformers(real_model):
    """SmolLM2-135M-Instruct (its GGUF dequantized by transformers and by the loader alike), on 16 tokens of "The
    capital of France is Paris. The capital of Italy is": 30 layers of float32 put the lens's log-probabilities
    within 2e-4 (1.07e-4 measured) and grad × input within 5e-4 relative (2.3e-4), not the tiny models' 1e-4."""
    check_real_model(real_model, dict(np.load(ARCHS / "inside" / "smollm2.npz")), lens_rel=2e-4, gxi_rel=5e-4)
