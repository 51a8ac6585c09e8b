"""The heatmap's data: a turn's sequence and segments, token and segment views, pooling, float16 bytes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from jupyter_chatflow.events import Event, TokenDelta, Tokenized, event_from_dict
from jupyter_chatflow.frontends.panel.attention_map import (
    MAX_SIDE,
    AttentionRequestError,
    attention_map,
    block_mean,
    segment_mass,
    turn_sequence,
)

FIXTURES = Path(__file__).resolve().parents[3] / "js" / "test" / "fixtures"


def fixture(name: str) -> list[Event]:
    return [event_from_dict(row) for row in json.loads((FIXTURES / f"{name}.json").read_text())["events"]]


def causal_softmax(heads: int, n: int, seed: int = 0) -> np.ndarray:
    scores = np.random.default_rng(seed).normal(size=(heads, n, n)).astype(np.float32)
    scores[:, np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] = -np.inf
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    return (probs / probs.sum(-1, keepdims=True)).astype(np.float16)


def test_the_sequence_is_the_last_prompt_then_the_tokens_generated_after_it():
    events = fixture("tool")  # two rounds: the call, then the answer
    sequence = turn_sequence(events)
    last = [e for e in events if isinstance(e, Tokenized)][-1]
    answer = [e.token_id for e in events[events.index(last) :] if isinstance(e, TokenDelta)]
    assert sequence.ids == list(last.ids) + answer and sequence.prompt_tokens == len(last.ids)
    assert sequence.segments[-1]["kind"] == "generated"
    assert sequence.column.min() >= 0 and sequence.column.max() == len(sequence.segments) - 1
    kinds = [s["kind"] for s in sequence.segments]
    assert {"system", "user", "tool"} <= set(kinds)


def test_a_turn_that_never_reached_the_model_has_no_map():
    with pytest.raises(AttentionRequestError, match="no prompt"):
        turn_sequence(fixture("blocked"))


def test_segment_mass_rows_sum_to_one_and_tokens_mode_keeps_values():
    sequence = turn_sequence(fixture("answer"))
    n = len(sequence.ids)
    attention = causal_softmax(3, n)
    meta, data = attention_map(attention, sequence, head=-1, mode="segments")
    mass = np.frombuffer(data, "<f2").reshape(meta["shape"]).astype(np.float32)
    assert meta["shape"] == [n, len(sequence.segments)] and meta["pool"] == 1
    assert np.allclose(mass.sum(1), 1.0, atol=1e-2)
    meta, data = attention_map(attention, sequence, head=1, mode="tokens", rows_range=[5, 20], cols_range=[0, 10])
    block = np.frombuffer(data, "<f2").reshape(meta["shape"])
    assert meta["shape"] == [15, 10] and np.array_equal(block, attention[1, 5:20, 0:10])


def test_long_contexts_are_pooled_to_at_most_max_side():
    sequence = turn_sequence(fixture("answer"))
    n = 4000
    column = np.resize(sequence.column, n)
    long = type(sequence)(ids=list(range(n)), prompt_tokens=n - 10, segments=sequence.segments, column=column)
    attention = np.zeros((1, n, n), np.float16)
    attention[0, np.arange(n), np.arange(n)] = 1.0  # each position attends to itself
    meta, data = attention_map(attention, long, head=0, mode="tokens")
    assert meta["pool"] == 2 and meta["shape"] == [2000, 2000] and max(meta["shape"]) <= MAX_SIDE
    pooled = np.frombuffer(data, "<f2").reshape(meta["shape"])
    assert np.allclose(np.diag(pooled), 0.5) and pooled.sum() == pytest.approx(n / 4, rel=1e-3)
    assert len(data) == 2000 * 2000 * 2


def test_block_mean_averages_what_edge_blocks_cover():
    matrix = np.arange(15, dtype=np.float32).reshape(3, 5)
    pooled = block_mean(matrix, 2)
    assert pooled.shape == (2, 3)
    assert pooled[0, 0] == np.mean([0, 1, 5, 6]) and pooled[1, 2] == 14.0
    assert block_mean(matrix, 2, cols=False).shape == (2, 5)


def test_segment_mass_sums_each_rows_weight_per_segment():
    rows = np.array([[0.5, 0.25, 0.25, 0.0]], np.float32)
    assert segment_mass(rows, np.array([0, 1, 0, 2]), 3).tolist() == [[0.75, 0.25, 0.0]]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"head": 7}, "head must be"),
        ({"mode": "pixels"}, "mode must be"),
        ({"rows_range": [10, 5]}, "rows_range"),
        ({"mode": "tokens", "cols_range": [0, 10_000]}, "cols_range"),
    ],
)
def test_bad_requests_say_what_is_allowed(options, message):
    sequence = turn_sequence(fixture("answer"))
    attention = causal_softmax(2, len(sequence.ids))
    with pytest.raises(AttentionRequestError, match=message):
        attention_map(attention, sequence, **{"head": -1, "mode": "tokens", **options})


def test_the_reply_carries_the_layers_sliding_window():
    """0 for a global layer (the default), the window for a sliding one: the view draws where it ends."""
    sequence = turn_sequence(fixture("answer"))
    attention = causal_softmax(2, len(sequence.ids))
    assert attention_map(attention, sequence, head=-1, mode="tokens")[0]["window"] == 0
    assert attention_map(attention, sequence, head=0, mode="segments", window=512)[0]["window"] == 512
