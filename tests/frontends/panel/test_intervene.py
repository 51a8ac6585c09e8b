"""The panel's "answer again" (issue: interventions as forks): the Attention tab's `intervene` message becomes
`Chat.intervene` with heads knocked out or the residual steered along two texts or a probe category; a request that
cannot be answered says what to change in the `error` trait; the model info offers the probe's categories and layers
only where a probe exists. On the tiny random model."""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_chatflow.events import Intervened
from jupyter_chatflow.frontends.panel import model_setting
from jupyter_chatflow.frontends.panel import widget as widget_module
from jupyter_chatflow.frontends.panel.widget import ChatWidget
from jupyter_chatflow.pipeline.safety.probe import BENIGN, Probe

from .test_widget import fetched, message, recorded_panel


@pytest.fixture
def panel(tiny_model, tmp_path):
    return recorded_panel(tiny_model, tmp_path, "intervene")


def answered(panel: ChatWidget) -> str:
    """A finished turn from the panel: its id."""
    response = panel.ask("Hello there")
    panel.wait(60)
    return response.turn_id


def intervened(panel: ChatWidget) -> dict:
    """The panel's latest turn, as a view fetches it: its row and events."""
    panel.wait(60)
    row = panel.turns[-1]
    return {**row, "events": fetched(panel, row["turn_id"])["events"]}


def fake_probe(dim: int) -> Probe:
    """A probe of the model's width over its layer 2 (steerable after layer 1), two categories."""
    rng = np.random.default_rng(0)
    classes = (BENIGN, "S1", "S9")
    features = dim
    return Probe(weights=rng.normal(size=(len(classes), features)).astype(np.float32),
                 bias=np.zeros(len(classes), np.float32), mean=np.zeros(features, np.float32),
                 scale=np.ones(features, np.float32), layers=(2,), classes=classes)  # fmt: skip


def test_heads_from_the_panel_answer_the_turn_again_as_a_fork_that_says_what_changed(panel):
    parent = answered(panel)
    message(panel, type="intervene", turn_id=parent, heads=[[0, 1], [1, 0]], steer=None)
    turn = intervened(panel)
    assert panel.error == ""
    assert turn["fork_of"] == parent and turn["events"][0]["fork_of"] == parent
    change = next(e for e in turn["events"] if e["type"] == "intervened")
    assert [(h["layer"], h["head"]) for h in change["heads"]] == [(0, 1), (1, 0)]
    assert Intervened(heads=(), steering=()).type == change["type"]
    assert [t["turn_id"] for t in panel.turns] == [parent, turn["turn_id"]]


def test_steering_along_two_texts_computes_the_direction_on_the_chats_model(panel):
    parent = answered(panel)
    steer = {"layer": 1, "strength": 4.0, "toward": "love", "away": "hate"}
    message(panel, type="intervene", turn_id=parent, heads=[], steer=steer)
    turn = intervened(panel)
    assert panel.error == ""
    [steering] = next(e for e in turn["events"] if e["type"] == "intervened")["steering"]
    assert steering["layer"] == 1 and steering["strength"] == 4.0 and "love" in steering["label"]


def test_steering_along_a_probe_category_uses_the_probes_direction(panel, monkeypatch):
    probe = fake_probe(panel.chat.model.config.dim)
    monkeypatch.setattr(widget_module, "steering_probe", lambda model: probe)
    parent = answered(panel)
    message(panel, type="intervene", turn_id=parent, heads=[], steer={"layer": 1, "strength": 2, "category": "S9"})
    turn = intervened(panel)
    assert panel.error == ""
    [steering] = next(e for e in turn["events"] if e["type"] == "intervened")["steering"]
    assert steering["layer"] == 1 and "S9" in steering["label"]


@pytest.mark.parametrize(
    ("heads", "steer", "said"),
    [
        ([], None, "Nothing to change: select heads"),
        ([], {"layer": 1, "strength": 2, "category": "S4"}, "not 'S4': pick one of them"),
        ([], {"layer": 0, "strength": 2, "category": "S1"}, "The probe steers after layers 1; not after layer 0"),
        ([], {"layer": 1, "strength": 2, "toward": " ", "away": "hate"}, "type a text to steer toward"),
        ([], {"layer": 99, "strength": 2, "toward": "a", "away": "b"}, "Steer after a layer from 0 to"),
    ],
)
def test_a_request_that_cannot_be_answered_names_the_fix(panel, monkeypatch, heads, steer, said):
    probe = fake_probe(panel.chat.model.config.dim)
    monkeypatch.setattr(widget_module, "steering_probe", lambda model: probe)
    parent = answered(panel)
    message(panel, type="intervene", turn_id=parent, heads=heads, steer=steer)
    assert said in panel.error
    assert len(panel.turns) == 1


def test_without_a_probe_a_category_is_refused_and_the_model_info_offers_none(panel):
    info = panel.model_info
    assert info["probe_layers"] == [] and info["probe_categories"] == []
    parent = answered(panel)
    message(panel, type="intervene", turn_id=parent, heads=[], steer={"layer": 1, "strength": 1, "category": "S1"})
    assert "No safety probe was trained for this model" in panel.error


def test_the_model_info_offers_the_probes_categories_and_steerable_layers(panel, monkeypatch):
    probe = fake_probe(panel.chat.model.config.dim)
    monkeypatch.setattr(model_setting, "steering_probe", lambda model: probe)
    info = model_setting.model_info(panel.chat)
    assert info["probe_layers"] == [1]
    assert info["probe_categories"] == [("S1", "Violent Crimes"), ("S9", "Indiscriminate Weapons")]


def test_only_the_latest_turn_is_answered_again_and_malformed_requests_get_a_reply(panel):
    first = answered(panel)
    answered(panel)
    message(panel, type="intervene", turn_id=first, heads=[[0, 0]], steer=None)
    assert "latest turn" in panel.error
    message(panel, type="intervene", turn_id=first, heads=[[0]], steer=None)
    [(reply, _)] = panel.send.of("request_error")
    assert reply["request"] == "intervene" and "heads" in reply["message"]
