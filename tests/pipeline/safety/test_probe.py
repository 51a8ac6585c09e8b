"""The intent probe's mechanics on the tiny random model (hidden states, features, windows, fitting, files) and the
lab's intent rows (`safety_lab/intent_data.py`: the held-out files kept out of training)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from intent_data import (
    EVERYDAY,
    EVERYDAY_HELDOUT,
    HELD_OUT,
    HELDOUT,
    HELDOUT_FRESH,
    HELDOUT_FRESH2,
    HELDOUT_FRESH3,
    TRAIN,
    load,
    tally,
    training_pool,
)

from jupyter_chatflow.pipeline.safety import SafetyConfigError
from jupyter_chatflow.pipeline.safety.probe import (
    BENIGN,
    MAX_WINDOWS,
    VETO,
    WINDOW,
    Probe,
    features,
    fit,
    layer_states,
    prompt_parts,
    prompt_reading,
    prompt_states,
    reading,
    windows,
)
from jupyter_chatflow.pipeline.safety.taxonomy import HAZARDS

CLASSES = (BENIGN, *(c.code for c in HAZARDS))
"""A probe's classes in these tests: benign, then S1–S14."""


def test_layer_states_are_causal_ignore_the_padding_and_equal_each_layer_alone(tiny_model):
    ids = tiny_model.tokenizer.encode("the quick brown fox jumps over the lazy dog again and again")
    assert 16 < len(ids) <= WINDOW  # padded to the wide chunk
    whole = layer_states(tiny_model, ids, (1, 2))  # one pass, the states after layers 1 and 2
    head = layer_states(tiny_model, ids[:10], (1, 2))  # padded to 16
    assert whole.shape == (2, len(ids), tiny_model.config.dim) and whole.dtype == np.float32
    np.testing.assert_allclose(head, whole[:, :10], rtol=1e-4, atol=1e-4)  # a token sees only the tokens before it
    for at, layer in enumerate((1, 2)):
        np.testing.assert_allclose(whole[at], tiny_model.runner.hidden_states(ids, layer), rtol=1e-5, atol=1e-5)
    assert not np.allclose(whole[0], whole[1])  # another layer, other states


def test_features_average_each_layer_over_each_window_leaving_out_the_first_token(tiny_model):
    text = "the cat sat on the mat"
    ids = tiny_model.tokenizer.encode(text)
    [row] = features(tiny_model, text, (2, 1))
    states = layer_states(tiny_model, ids, (2, 1))[:, 1:].mean(axis=1)  # [2, d]: layer 2's mean, then layer 1's
    np.testing.assert_allclose(row, np.concatenate(states), rtol=1e-5, atol=1e-6)
    long = features(tiny_model, "a" * (WINDOW * 20), (1,))  # the byte-level vocabulary: one token a character or so
    assert long.shape == (MAX_WINDOWS, tiny_model.config.dim)


def test_the_prompt_states_are_the_last_tokens_of_the_chat_prompt_beside_each_windows_means(tiny_model):
    text = "the cat sat on the mat"
    ids = tiny_model.tokenizer.apply_chat_template([{"role": "user", "content": text}])
    assert ids[-1] != tiny_model.tokenizer.encode(text)[-1]  # the prompt ends where the answer starts, not the text
    prompt = prompt_states(tiny_model, text, (2, 1))
    np.testing.assert_allclose(prompt, layer_states(tiny_model, ids, (2, 1))[:, -1].reshape(-1), rtol=1e-5, atol=1e-6)
    [row] = reading(tiny_model, text, (1,), (2, 1))
    np.testing.assert_allclose(row, np.concatenate([features(tiny_model, text, (1,))[0], prompt]), rtol=1e-5, atol=1e-6)
    long = reading(tiny_model, "a" * (WINDOW * 20), (1,), (2,))  # every window beside the one prompt's states
    assert (
        long.shape == (MAX_WINDOWS, 2 * tiny_model.config.dim)
        and (long[:, -tiny_model.config.dim :] == long[0, -tiny_model.config.dim :]).all()
    )


def test_one_pass_reads_the_texts_mean_states_and_the_last_states_inside_the_chat_prompt(tiny_model):
    text = "the cat sat on the mat"
    head, ids, tail = prompt_parts(tiny_model, text)
    prompt = tiny_model.tokenizer.apply_chat_template([{"role": "user", "content": text}])
    assert [*head, *ids, *tail] == list(prompt) and ids == tiny_model.tokenizer.encode(text) and head and tail
    states = layer_states(tiny_model, prompt, (1, 2))  # [2, t, d]
    inside = states[:, len(head) : len(head) + len(ids)].mean(axis=1)  # the text's tokens only
    [row] = prompt_reading(tiny_model, text, (2, 1), (2,))
    np.testing.assert_allclose(row, np.concatenate([inside[1], inside[0], states[1, -1]]), rtol=1e-5, atol=1e-5)
    room = WINDOW - len(head) - len(tail)
    long = prompt_reading(tiny_model, "a" * (WINDOW * 20), (1,), (2,))
    assert long.shape == (MAX_WINDOWS, 2 * tiny_model.config.dim)  # each window in a prompt of its own
    assert not np.allclose(long[0, -tiny_model.config.dim :], long[-1, -tiny_model.config.dim :]) and room > 16
    [empty] = prompt_reading(tiny_model, "", (1,), (1,))  # no text: the prompt's last state for the mean too
    assert np.isfinite(empty).all() and np.array_equal(empty[: tiny_model.config.dim], empty[tiny_model.config.dim :])


def test_a_probe_reads_as_it_was_trained_and_says_how_in_its_file(tiny_model, tmp_path):
    d = tiny_model.config.dim
    probe = Probe(weights=np.zeros((15, 2 * d)), bias=np.zeros(15), mean=np.zeros(2 * d), scale=np.ones(2 * d),
                  layers=(1,), prompt_layers=(2,), classes=CLASSES, in_prompt=True)  # fmt: skip
    text = "hello there, how are you?"
    np.testing.assert_array_equal(probe.features(tiny_model, text), prompt_reading(tiny_model, text, (1,), (2,)))
    probe.save(tmp_path / "p.npz")
    assert Probe.load(tmp_path / "p.npz").in_prompt is True
    two = dataclasses.replace(probe, in_prompt=False)  # round 4's: the means over the text alone, a second pass
    np.testing.assert_array_equal(two.features(tiny_model, text), reading(tiny_model, text, (1,), (2,)))
    two.save(tmp_path / "two.npz")
    with np.load(tmp_path / "two.npz") as data:
        np.savez(tmp_path / "round4.npz", **{k: data[k] for k in data.files if k != "in_prompt"})
    assert Probe.load(tmp_path / "round4.npz").in_prompt is False


def test_windows_keep_the_first_and_last_of_a_long_text():
    ids = list(range(WINDOW * 10 + 5))
    cut = windows(ids)
    assert len(cut) == MAX_WINDOWS and cut[0][0] == 0 and cut[-1][-1] == ids[-1]
    assert all(len(w) <= WINDOW for w in cut) and windows([]) == [[]]


def test_fit_separates_what_is_separable_and_the_file_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    x = np.vstack([rng.normal(0, 1, (40, 8)), rng.normal(3, 1, (40, 8))])
    labels = [BENIGN] * 40 + ["S9"] * 40
    weights, bias, mean, scale = fit(x, labels, CLASSES, l2=1.0)
    probe = Probe(weights=weights, bias=bias, mean=mean, scale=scale, layers=(3,), prompt_layers=(5,),
                  classes=CLASSES, threshold=0.7, veto=0.1)  # fmt: skip
    p = probe.probabilities(x)
    assert p.shape == (80, 15) and np.allclose(p.sum(axis=1), 1.0)
    assert (p[:40, 0] > 0.5).all() and (p[40:, CLASSES.index("S9")] > 0.5).all()
    probe.save(tmp_path / "p.npz")
    again = Probe.load(tmp_path / "p.npz")
    assert (again.layers, again.prompt_layers, again.dim) == ((3,), (5,), 4)
    assert (again.threshold, again.veto, again.classes) == (0.7, 0.1, CLASSES)
    assert (again.flag_at, again.pool) == (0.7, "max")  # no flag band: flag_at is the threshold
    banded = dataclasses.replace(probe, flag_at=0.55, pool="mean")
    banded.save(tmp_path / "banded.npz")
    assert (Probe.load(tmp_path / "banded.npz").flag_at, Probe.load(tmp_path / "banded.npz").pool) == (0.55, "mean")
    with pytest.raises(SafetyConfigError, match="pools its windows"):
        dataclasses.replace(probe, pool="median")
    np.testing.assert_allclose(again.probabilities(x), p, rtol=1e-5, atol=1e-6)
    with np.load(tmp_path / "p.npz") as data:  # files of one layer: meta [layer, threshold(, veto floor)]
        kept = {k: data[k] for k in data.files if k not in ("meta", "layers", "prompt_layers")}
    np.savez(tmp_path / "one.npz", meta=np.array([3, 0.7, 0.1]), **kept)
    np.savez(tmp_path / "old.npz", meta=np.array([3, 0.7]), **kept)  # before the veto floor was kept
    assert (Probe.load(tmp_path / "one.npz").layers, Probe.load(tmp_path / "one.npz").veto) == ((3,), 0.1)
    old = Probe.load(tmp_path / "old.npz")
    assert (old.layers, old.threshold, old.veto, old.dim) == ((3,), 0.7, VETO, 8) and VETO == 0.01
    with pytest.raises(SafetyConfigError, match="classes start with"):
        Probe(weights=weights, bias=bias, mean=mean, scale=scale, layers=(3,), classes=CLASSES[::-1])
    with pytest.raises(SafetyConfigError, match="d features from each of its layers"):
        Probe(weights=weights, bias=bias, mean=mean, scale=scale, layers=(1, 2), prompt_layers=(3,), classes=CLASSES)


def test_the_held_out_split_is_kept_out_of_training():
    held, train = load(HELDOUT), load(TRAIN)
    assert len(held) == 700 and len(train) == 3908  # 1,457 at first; 1,828 after a second round; 2,608 and 3,338
    # after a fourth and a fifth (paraphrases and look-alikes in every category); 3,908 after a sixth
    per = tally((e, "allow") for e in held)
    assert all(per[c].harmful == 25 and per[c].benign == 25 for c in CLASSES[1:])
    pool = training_pool(held)
    texts = {e.text.lower() for e in held}
    assert not texts & {e.text.lower() for e in pool}
    assert len(pool) == 5189  # train.jsonl, everyday.jsonl and eval.jsonl's input rows, less those within 60 % of
    assert {e.label for e in pool} == set(CLASSES)  # a held-out row's words


def test_no_held_out_file_is_trained_on_and_each_split_has_25_and_25_per_category():
    pool = {e.text.lower() for e in training_pool()}
    for path in HELD_OUT:
        assert not pool & {e.text.lower() for e in load(path)}, path.name
    for path in (HELDOUT, HELDOUT_FRESH, HELDOUT_FRESH2, HELDOUT_FRESH3):
        per = tally((e, "allow") for e in load(path))
        assert all(per[c].harmful == 25 and per[c].benign == 25 for c in CLASSES[1:]), path.name


def test_the_everyday_requests_are_trained_on_and_their_held_out_split_is_not():
    everyday, held = load(EVERYDAY), load(EVERYDAY_HELDOUT)
    assert len(everyday) >= 300 and len(held) >= 150
    assert all(e.kind == "benign" and e.expected == "allow" and e.category == "none" for e in [*everyday, *held])
    pool = {e.text.lower() for e in training_pool()}
    assert not pool & {e.text.lower() for e in held}
    assert "count from 1 to 50, one number per line." in pool
    assert not {e.text.lower() for e in everyday} & {e.text.lower() for e in held}


def test_a_tally_counts_catches_blocks_and_flags():
    held = load(HELDOUT)
    s6 = [e for e in held if e.category == "S6"]
    by = tally((e, "flag") for e in s6)["S6"]  # S6 expects a flag: caught; a benign row flagged, not blocked
    assert (by.recall, by.blocked_rate, by.flagged_rate) == (1.0, 0.0, 1.0)
    s9 = tally((e, "flag") for e in held if e.category == "S9")["S9"]
    assert s9.recall == 0.0  # S9 expects a block


def test_a_file_in_the_format_loads_its_input_rows_with_labels(tmp_path):
    """`intent_data.load` reads any file of this format (a fresh split too) through `rules_eval.load`: extra fields
    are left out, output and tool rows skipped, and a row's label is its category or "benign"."""
    rows = [
        {"id": "f-1", "category": "S9", "kind": "harmful", "expected": "block", "text": "x", "note": "by hand"},
        {"id": "f-2", "category": "S9", "kind": "benign", "expected": "allow", "text": "y"},
        {"id": "f-3", "category": "S9", "kind": "harmful", "expected": "block", "text": "z", "layer": "output"},
    ]
    (tmp_path / "fresh.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    loaded = load(tmp_path / "fresh.jsonl")
    assert [(r.id, r.label, r.expected) for r in loaded] == [("f-1", "S9", "block"), ("f-2", "benign", "allow")]


def test_a_category_read_against_benign_is_a_direction_to_steer_along():
    """The probe's logit for a category less benign's rises along w_c - w_benign in standardized features: in the
    residual itself, (w_c - w_benign) / scale, taken at the block of the layer asked for."""
    d = 4
    rng = np.random.default_rng(1)
    weights, scale = rng.normal(size=(15, 2 * d)), rng.uniform(0.5, 2.0, size=2 * d)
    mean = rng.normal(size=2 * d)
    probe = Probe(weights=weights, bias=np.zeros(15), mean=mean, scale=scale, layers=(3,), prompt_layers=(5,),
                  classes=CLASSES)  # fmt: skip
    direction = probe.direction("S9", 4)  # (after layer 4: the probe's block 5, its second)
    raw = (weights[CLASSES.index("S9"), d:] - weights[0, d:]) / scale[d:]
    np.testing.assert_allclose(direction.vector, raw / np.linalg.norm(raw), rtol=1e-6)
    assert direction.layer == 4 and direction.label == "the safety probe's S9 (Indiscriminate Weapons)"
    assert direction.scale == pytest.approx(np.sqrt(np.sum(mean[d:] ** 2) + np.sum(scale[d:] ** 2)))
    with pytest.raises(SafetyConfigError, match="after layers 2, 4; not after layer 3"):
        probe.direction("S9", 3)
    with pytest.raises(SafetyConfigError, match="not 'S99'"):
        probe.direction("S99", 2)
