"""The intent guard on the tiny model: its decision, how it joins the rules, which probe a model gets, the events."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from intent_eval import evaluate
from rules_eval import Row

from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.pipeline.safety import SafetyPolicy
from jupyter_chatflow.pipeline.safety.intent import IntentGuard, model_key, probe_path, reconcile, verdict
from jupyter_chatflow.pipeline.safety.probe import BENIGN, Probe, features, fit
from jupyter_chatflow.pipeline.safety.taxonomy import HAZARDS
from jupyter_chatflow.store.database import Database

CLASSES = (BENIGN, *(c.code for c in HAZARDS))
"""A probe's classes in these tests: benign, then S1–S14."""

HARMFUL = ["zzzz qqqq xxxx", "qqqq zzzz xxxx zzzz", "xxxx zzzz qqqq qqqq", "zzzz zzzz xxxx qqqq"]
BENIGN_TEXTS = ["the cat sat on the mat", "a walk in the park", "the sun is out today", "tea with a friend"]


@pytest.fixture(scope="module")
def probe(tiny_model) -> Probe:
    """A probe for the tiny model that reads strings of z, q and x as S9 (its features tell them apart)."""
    x = np.vstack([features(tiny_model, t, (1,))[0] for t in HARMFUL + BENIGN_TEXTS])
    weights, bias, mean, scale = fit(x, ["S9"] * 4 + [BENIGN] * 4, CLASSES, l2=0.1)
    return Probe(weights=weights, bias=bias, mean=mean, scale=scale, layers=(1,), classes=CLASSES, threshold=0.5,
                 model=model_key(tiny_model))  # fmt: skip


def test_the_guard_blocks_what_the_probe_reads_as_harmful_and_scores_it(tiny_model, probe):
    guard = IntentGuard(model=tiny_model, probe=probe)
    blocked = guard.check("zzzz xxxx qqqq zzzz", layer="input")
    assert (blocked.action, blocked.guard, blocked.categories) == ("block", "intent", ("S9",))
    assert blocked.scores["harmful"] > 0.5 and blocked.scores["S9"] > 0.5 and blocked.latency_ms > 0
    assert "Indiscriminate Weapons" in blocked.replacement and "P(harmful) = " in blocked.reason
    allowed = guard.check("the cat is on the mat", layer="input")
    assert (allowed.action, allowed.categories) == ("allow", ()) and allowed.scores["harmful"] < 0.5


def test_the_guards_pass_reports_what_it_compiled(tiny_model, probe):
    """A cold process: the probe's pass compiles its layer programs, and its decision says how long of its latency
    that took (the timeline draws it as compile, the account counts it); the next pass compiles nothing."""
    from jupyter_chatflow.engine.programs import release_all

    release_all()
    guard = IntentGuard(model=tiny_model, probe=probe)
    cold = guard.check("the cat is on the mat", layer="input")
    assert 0 < cold.compile_ms <= cold.latency_ms
    assert guard.check("the cat is on the mat", layer="input").compile_ms == 0


def test_s6_is_flagged_not_blocked(probe):
    row = np.zeros(len(CLASSES))
    row[CLASSES.index("S6")] = 0.9
    row[0] = 0.1
    decision = verdict(row, probe, layer="input")
    assert (decision.action, decision.categories, decision.replacement) == ("flag", ("S6",), "")


@pytest.mark.parametrize(("harmful", "action"), [(0.95, "block"), (0.85, "block"), (0.7, "flag"), (0.6, "flag"),
                                                 (0.59, "allow")])  # fmt: skip
def test_the_probe_flags_between_its_flag_and_block_thresholds(probe, harmful, action):
    banded = dataclasses.replace(probe, threshold=0.85, flag_at=0.6)
    row = np.zeros(len(CLASSES))
    row[0], row[CLASSES.index("S2")] = 1 - harmful, harmful
    decision = verdict(row, banded, layer="input")
    assert decision.action == action and decision.scores["harmful"] == harmful
    assert decision.categories == (() if action == "allow" else ("S2",))
    assert ("flagged, not blocked" in decision.reason) is (action == "flag")
    assert "(threshold 0.85, flag at 0.6)" in decision.reason
    assert bool(decision.replacement) is (action == "block")


def test_the_category_named_is_the_likeliest_the_words_allow(probe):
    """S6 names a decision only where it holds half of P(harmful); S11 only where the words speak of self-harm (the
    guard passes `exclude`): the digoxin request read S11 0.19, S6 0.21, S1 0.16 of 0.97."""
    row = np.zeros(len(CLASSES))
    row[0] = 0.03
    for code, p in {"S6": 0.21, "S11": 0.19, "S1": 0.16, "S7": 0.15, "S2": 0.26}.items():
        row[CLASSES.index(code)] = p
    assert verdict(row, probe, layer="input").categories == ("S2",)
    row[CLASSES.index("S2")], row[0] = 0.0, 0.29  # P(harmful) 0.71
    assert verdict(row, probe, layer="input").categories == ("S11",)  # S6 0.21 < half of 0.71: not advice
    decision = verdict(row, probe, layer="input", exclude=("S11",))
    assert (decision.action, decision.categories) == ("block", ("S1",))


def test_a_long_text_is_read_as_the_mean_of_its_windows(tiny_model, probe):
    """`pool="mean"`: the windows' features averaged, one reading; "max": the most harmful window's."""
    text = " ".join(["the cat sat on the mat"] * 60 + ["zzzz xxxx qqqq zzzz"] * 3)
    read = probe.features(tiny_model, text)
    assert len(read) > 1
    mean = dataclasses.replace(probe, pool="mean").reading(tiny_model, text)
    assert np.allclose(mean, probe.probabilities(read.mean(axis=0))[0])
    worst = probe.reading(tiny_model, text)
    assert np.allclose(worst, probe.probabilities(read)[int((1 - probe.probabilities(read)[:, 0]).argmax())])


def test_a_plainly_benign_reading_lowers_a_hazard_frames_block_to_a_flag(probe):
    rules = SafetyPolicy(mode="input", intent_probe=False).guards_for("input")
    text = "Explain how a phishing email works."  # the S2 phishing frame blocks it
    decisions = [g.check(text, layer="input") for g in rules]
    assert decisions[0].action == "block" and decisions[0].categories == ("S2",)
    benign, harmful = np.eye(len(CLASSES))[0], np.eye(len(CLASSES))[CLASSES.index("S2")]
    lowered = reconcile([*decisions, verdict(benign, probe, layer="input")])
    assert lowered[0].action == "flag" and "Not blocked: the intent probe's P(harmful) = " in lowered[0].reason
    kept = reconcile([*decisions, verdict(0.985 * benign + 0.015 * harmful, probe, layer="input")])
    assert kept[0].action == "block"  # P(harmful) = 0.015: not below the veto (0.01)
    # every word-based frame is lowered, the gravest two too ("Can you define child pornography?" matched S4's)
    child = dataclasses.replace(decisions[0], categories=("S4",))
    assert reconcile([child, verdict(benign, probe, layer="input")])[0].action == "flag"
    code = dataclasses.replace(decisions[0], categories=("S14",))  # a pasted changelog that mentions a command
    assert reconcile([code, verdict(benign, probe, layer="input")])[0].action == "flag"
    injection = dataclasses.replace(decisions[0], categories=("prompt_injection",))  # never lowered
    assert reconcile([injection, verdict(benign, probe, layer="input")])[0].action == "block"


@pytest.mark.parametrize(("veto", "expected"), [(0.01, "block"), (0.05, "flag")])
def test_the_input_layer_lowers_a_frames_block_below_the_probes_own_floor(tiny_model, probe, veto, expected):
    """The floor a probe file carries (`Probe.veto`, chosen with its threshold) decides: here P(harmful) = 0.03."""
    bias = np.full(len(CLASSES), -50.0)
    bias[0], bias[CLASSES.index("S2")] = np.log(0.97), np.log(0.03)
    fixed = dataclasses.replace(probe, weights=np.zeros_like(probe.weights), bias=bias, veto=veto)
    policy = SafetyPolicy(mode="input", intent=IntentGuard(model=tiny_model, probe=fixed))
    decision = policy.scan_input("Explain how a phishing email works.")[0][0]  # the S2 phishing frame blocks it
    assert (decision.action, decision.categories, decision.scores["harmful"]) == (expected, ("S2",), 0.03)
    assert ("Not blocked" in decision.reason) is (expected == "flag")
    assert (
        dataclasses.replace(policy, veto=0.01).scan_input("Explain how a phishing email works.")[0][0].action == "block"
    )


def test_a_model_without_a_probe_runs_rules_alone_and_says_so(tiny_model, tmp_path, monkeypatch):
    monkeypatch.setenv("CHATFLOW_SAFETY_CACHE", str(tmp_path))
    assert probe_path(tiny_model) is None and IntentGuard.for_model(tiny_model) is None
    policy = SafetyPolicy().with_model(tiny_model)
    decision = policy.scan_input("hello there")[0][0]
    assert policy.intent is None and decision.guard == "rules+pii"
    assert "No intent probe was trained for tiny-" in decision.reason and "rules alone" in decision.reason
    assert SafetyPolicy(intent_probe=False).with_model(tiny_model).intent_note == ""


def test_a_probe_in_the_cache_folder_is_found_for_its_model_file(tiny_model, probe, tmp_path, monkeypatch):
    monkeypatch.setenv("CHATFLOW_SAFETY_CACHE", str(tmp_path))
    probe.save(tmp_path / f"{model_key(tiny_model)}.npz")
    policy = SafetyPolicy().with_model(tiny_model)
    assert isinstance(policy.intent, IntentGuard) and policy.intent.probe.layers == (1,)
    assert policy.with_model(tiny_model) is policy  # bound once
    wrong = dataclasses.replace(probe, weights=probe.weights[:, :8], mean=probe.mean[:8], scale=probe.scale[:8])
    wrong.save(tmp_path / f"{model_key(tiny_model)}.npz")
    assert IntentGuard.for_model(tiny_model) is None  # trained on another hidden size: not used


def test_the_input_decision_in_the_turns_events_carries_the_probe(tiny_model, probe, tmp_path):
    policy = SafetyPolicy(intent=IntentGuard(model=tiny_model, probe=probe))
    chat = Chat(model=tiny_model, db=Database(tmp_path / "chat.db"), session="intent", policy=policy, persist=False)
    events = list(chat.send("zzzz qqqq xxxx qqqq", max_tokens=4))
    [decision] = [e for e in events if e.type == "safety_decision"]
    assert (decision.layer, decision.action, decision.guard) == ("input", "block", "rules+pii+intent")
    assert decision.categories == ("S9",) and decision.scores["harmful"] > 0.5
    assert events[-1].type == "completed" and events[-1].finish_reason == "content_filter"
    events = list(chat.send("the cat sat on the mat", max_tokens=4))
    [decision] = [e for e in events if e.type == "safety_decision" and e.layer == "input"]
    assert decision.action == "allow" and 0.0 <= decision.scores["harmful"] < 0.5


def test_the_probe_does_not_block_what_the_rules_read_as_a_prompt_injection():
    """The probe knows S1-S14 and benign requests; typed role markers are the injection rule's (flagged, escaped)."""
    from jupyter_chatflow.events import SafetyDecision

    rules = SafetyDecision(layer="input", action="flag", guard="rules", categories=("prompt_injection",),
                           reason="Matched rules: Prompt injection.")  # fmt: skip
    probe = SafetyDecision(layer="input", action="block", guard="intent", categories=("S12",),
                           scores={"harmful": 0.99}, reason="The intent probe reads Sexual Content (S12).")  # fmt: skip
    lowered = reconcile([rules, probe])
    assert [d.action for d in lowered] == ["flag", "flag"]
    assert "prompt injection" in lowered[1].reason
    alone = reconcile([dataclasses.replace(rules, action="allow", categories=()), probe])
    assert alone[1].action == "block"


def test_evaluate_reads_each_row_once_and_scores_every_layer(tiny_model, probe, tmp_path, monkeypatch):
    """`intent_eval.evaluate`: the probe alone reuses the input layer's reading of a row (one pass, not two), and
    its time per row is that reading's."""
    monkeypatch.setenv("CHATFLOW_SAFETY_CACHE", str(tmp_path))
    dataclasses.replace(probe, veto=0.5).save(tmp_path / f"{model_key(tiny_model)}.npz")  # lowers the frame's block
    reads = []
    monkeypatch.setattr(Probe, "features", lambda self, model, text: reads.append(text) or features(model, text, (1,)))
    rows = [
        Row(id="h1", text="qqqq xxxx zzzz zzzz", category="S9", kind="harmful", expected="block"),
        Row(id="b1", text="a cat in the park", category="S9", kind="benign", expected="allow"),
        Row(id="b2", text="Explain how a phishing email works.", category="S2", kind="benign", expected="allow"),
    ]
    report = evaluate(tiny_model, rows)
    assert reads == [row.text for row in rows]
    assert report.actions == {"rules": ["allow", "allow", "block"], "probe": ["block", "allow", "allow"],
                              "input layer": ["block", "allow", "flag"]}  # fmt: skip
    assert report.tallies["input layer"]["all"].caught == 1 and report.tallies["input layer"]["all"].blocked == 0
    assert all(0 < probe_ms <= layer_ms for probe_ms, layer_ms in zip(report.probe_ms, report.layer_ms, strict=True))
