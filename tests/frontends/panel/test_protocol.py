"""The panel's protocol (protocol.py): a view's message is taken as declared, or refused saying what is wrong."""

from __future__ import annotations

from typing import Literal

import pytest

from jupyter_chatflow.frontends.panel.protocol import (
    VIEW_MESSAGES,
    ProtocolError,
    TurnRow,
    type_problem,
    view_message,
)

VALID = [
    {"type": "send", "text": "Hello"},
    {"type": "stop"},
    {"type": "new_session"},
    {"type": "draft", "text": "Hel"},
    {"type": "fetch", "turn_id": "turn_a", "after": -1},
    {"type": "attention", "request_id": "att-1", "turn_id": "turn_a", "layer": 0, "head": -1, "mode": "segments",
     "rows_range": [0, 10], "cols_range": None},
    {"type": "fork", "turn_id": "turn_a", "index": 3, "token_id": 42},
    {"type": "intervene", "turn_id": "turn_a", "heads": [[3, 1], [3, 4]], "steer": None},
    {"type": "intervene", "turn_id": "turn_a", "heads": [],
     "steer": {"layer": 10, "strength": 4.0, "toward": "love", "away": "hate"}},
    {"type": "intervene", "turn_id": "turn_a", "heads": [], "steer": {"layer": 11, "strength": 2, "category": "S1"}},
    {"type": "load_model", "path": "m.gguf", "dtype": "bfloat16"},
    {"type": "lens", "request_id": "lens-1", "turn_id": "turn_a"},
    {"type": "why", "request_id": "why-1", "turn_id": "turn_a", "index": 4, "method": "integrated_gradients",
     "contrast_token_id": 42, "steps": 16},
]  # fmt: skip


def test_every_request_the_view_sends_is_declared_and_taken_as_it_came():
    assert sorted(VIEW_MESSAGES) == sorted({m["type"] for m in VALID})
    for content in VALID:
        assert view_message(content) == content


def test_a_field_that_allows_none_may_be_left_out():
    assert view_message({"type": "load_model", "path": "m.gguf"}) == {"type": "load_model", "path": "m.gguf",
                                                                       "dtype": None}  # fmt: skip
    taken = view_message({"type": "attention", "request_id": "a", "turn_id": "t", "layer": 1, "head": 0,
                          "mode": "tokens"})  # fmt: skip
    assert taken["rows_range"] is None and taken["cols_range"] is None


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "The panel sent NoneType, not a message"),
        ({"type": 3}, "unknown request 3"),
        ({"type": "resume", "turn_id": "t", "after": 0}, "unknown request 'resume'"),
        ({"type": "send"}, "has no 'text'"),
        ({"type": "send", "text": None}, "text must be a string, got None"),
        ({"type": "fetch", "turn_id": "t", "after": True}, "after must be a whole number, got True (bool)"),
        ({"type": "fetch", "turn_id": "t", "after": 1.5}, "after must be a whole number, got 1.5 (float)"),
        ({"type": "attention", "request_id": "a", "turn_id": "t", "layer": 0, "head": -1, "mode": "tokens",
          "rows_range": [0, "9"]}, "rows_range must be a pair or null, got [0, '9']"),
        ({"type": "load_model", "path": "m", "dtype": 16}, "dtype must be string or null, got 16 (int)"),
        ({"type": "draft", "text": "x", "extra": 1}, "has fields it should not: extra"),
        ({"type": "intervene", "turn_id": "t", "heads": [[1]]}, "heads [0] must hold 2 items, got 1"),
        ({"type": "intervene", "turn_id": "t", "heads": [], "steer": {"layer": 1, "strength": 2}},
         "steer must be TextSteer or ProbeSteer or null"),
    ],
)  # fmt: skip
def test_a_message_that_is_not_declared_is_refused_saying_why(content, said):
    with pytest.raises(ProtocolError) as refused:
        view_message(content)
    assert said in str(refused.value)


@pytest.mark.parametrize(
    ("value", "hint", "problem"),
    [
        (1, float, ""),
        (1.5, int, "must be a whole number, got 1.5 (float)"),
        ("x", Literal["x", "y"], ""),
        ("z", Literal["x", "y"], "must be one of 'x', 'y', got 'z'"),
        ([1, 2], list[int], ""),
        ([1, "2"], list[int], "[1] must be a whole number, got '2' (str)"),
        ({"a": ["p", "0a"]}, dict[str, tuple[str, str]], ""),
        ({"a": ["p"]}, dict[str, tuple[str, str]], "['a'] must hold 2 items, got 1"),
    ],
)
def test_a_value_is_checked_against_its_declared_type(value, hint, problem):
    assert type_problem(value, hint) == problem


def test_a_turn_row_is_checked_as_a_whole():
    row = {"turn_id": "t", "fork_of": "", "prewarm": None, "user": "hi", "status": "completed",
           "finish_reason": "stop", "answer_tokens": 3, "call_tokens": 0, "tokens_per_s": 9.5, "ttft_ms": None,
           "generated_note": ""}  # fmt: skip
    assert type_problem(row, TurnRow) == ""
    assert type_problem({**row, "status": "done"}, TurnRow).startswith(".status must be one of 'live',")
