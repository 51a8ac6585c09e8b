import dataclasses
import json
import typing

import pytest

from jupyter_chatflow.engine.generation import Alternative
from jupyter_chatflow.events import (
    EVENT_TYPES,
    Completed,
    ContextAssembled,
    Emitter,
    Event,
    EventType,
    SafetyDecision,
    Segment,
    Span,
    Timings,
    TokenDelta,
    ToolCall,
    Trim,
    Usage,
    event_from_dict,
)
from jupyter_chatflow.pipeline.response import Response


def samples() -> list[Event]:
    emit = Emitter("turn-1", clock=iter(range(100)).__next__)
    return [
        emit(
            SafetyDecision(layer="input", action="redact", guard="pii", spans=(Span(start=3, end=9, category="email"),))
        ),
        emit(
            ContextAssembled(
                window=8192,
                reserved_output=256,
                budget=7936,
                prompt_tokens=12,
                segments=(Segment(kind="system", label="system", tokens=10, text="Be brief."),),
                trimmed=(Trim(label="history[0] user", tokens=40, action="dropped", reason="over budget"),),
            )
        ),
        emit(
            TokenDelta(
                index=0,
                token_id=42,
                text="Paris",
                logprob=-0.25,
                entropy=1.5,
                alternatives=(Alternative(token_id=7, text="Lyon", logprob=-2.0, sampling_prob=0.0),),
            )
        ),
        emit(
            Completed(finish_reason="stop", text="Paris", usage=Usage(prompt_tokens=12), timings=Timings(ttft_ms=9.5))
        ),
    ]


def test_emitter_numbers_events_in_order():
    events = samples()
    assert [e.sequence_number for e in events] == [0, 1, 2, 3]
    assert {e.turn_id for e in events} == {"turn-1"}
    assert [e.timestamp for e in events] == [0, 1, 2, 3]


def test_events_round_trip_exactly_through_json():
    for event in samples():
        row = json.loads(json.dumps(event.to_dict()))
        assert row["type"] == event.type
        assert event_from_dict(row) == event


def test_every_event_type_is_registered_once():
    assert len(EVENT_TYPES) == len({cls.__name__ for cls in EVENT_TYPES.values()})
    assert EVENT_TYPES["token"] is TokenDelta


def test_event_type_names_exactly_the_concrete_event_classes():
    def concrete(cls: type[Event]) -> list[type[Event]]:
        return [c for sub in cls.__subclasses__() for c in [sub, *concrete(sub)]]

    classes = concrete(Event)
    assert sorted(c.type for c in classes) == sorted(typing.get_args(EventType))
    assert set(EVENT_TYPES) == set(typing.get_args(EventType)) and set(EVENT_TYPES.values()) == set(classes)


def test_unknown_event_type_and_field_are_errors():
    with pytest.raises(ValueError, match="Unknown event type"):
        event_from_dict({"type": "nope"})
    with pytest.raises(ValueError, match="no field"):
        event_from_dict({"type": "completed", "finish_reason": "stop", "text": "", "usage": {}, "timings": {}, "x": 1})


def test_a_row_stored_before_a_field_existed_reads_it_as_its_default_or_empty_value():
    """Turns stay in the database across versions: a `tool_call` row from before `tokens`, `decode_ms` and
    `forced_tokens` existed, a `completed` row from before `usage`."""
    row = {"type": "tool_call", "sequence_number": 3, "turn_id": "turn_old", "timestamp": 1.0, "call_id": "call_1"}
    call = event_from_dict({**row, "name": "calculator", "arguments": {"expression": "17*23"}})
    assert (call.name, call.arguments, call.tokens, call.forced_tokens, call.decode_ms) == (
        "calculator", {"expression": "17*23"}, 0, 0, 0.0)  # fmt: skip
    assert isinstance(call, ToolCall) and (call.arguments_text, call.cut, call.guard) == ("", False, "")
    done = event_from_dict({"type": "completed", "finish_reason": "stop", "text": "391"})
    assert isinstance(done, Completed) and (done.text, done.usage, done.timings) == ("391", Usage(), Timings())
    context = event_from_dict({"type": "context_assembled", "window": 8192})
    assert isinstance(context, ContextAssembled) and context.segments == () and context.strategy == "drop"


def test_events_are_frozen():
    event = samples()[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.action = "allow"  # type: ignore[misc]


def test_response_is_lazy_and_replays():
    pulled = []

    def source():
        for event in samples():
            pulled.append(event.sequence_number)
            yield event

    response = Response(source())
    assert pulled == []
    first = next(iter(response))
    assert pulled == [0] and first.sequence_number == 0
    assert [e.sequence_number for e in response] == [0, 1, 2, 3]
    assert [e.sequence_number for e in response] == [0, 1, 2, 3]
    assert pulled == [0, 1, 2, 3]
    assert response.text() == "Paris"


def test_response_rebuilds_from_dicts():
    response = Response(samples())
    again = Response.from_dicts(response.to_dicts())
    assert again.events() == response.events()


def test_follow_hands_each_event_once_even_after_an_interrupt_in_the_handler():
    response, seen, interrupted = Response(samples()), [], []

    def handle(event):
        seen.append(event.sequence_number)
        if len(seen) == 2 and not interrupted:
            interrupted.append(True)
            raise KeyboardInterrupt  # lands in the caller's code, after the event was taken

    response.follow(handle)
    assert seen == [0, 1, 2, 3] and interrupted


def test_usage_and_timings_keep_their_wire_keys_and_read_older_rows():
    """Stored turns, the panel and `chatflow chat --json` read these keys; rows stored before Usage and Timings were
    typed had no total_tokens, only the stages that ran, and (before 2026-11-23) the title's time."""
    row = {"type": "completed", "sequence_number": 9, "turn_id": "t", "timestamp": 3.0, "finish_reason": "stop",
           "text": "Paris", "usage": {"prompt_tokens": 12, "completion_tokens": 3, "reused_tokens": 4},
           "timings": {"context": 1.5, "prefill": 20.0, "decode": 30.0, "title": 9.0, "total_ms": 70.0},
           "tokens_per_s": 66.7}  # fmt: skip
    event = event_from_dict(row)
    assert isinstance(event, Completed)
    assert event.usage == Usage(prompt_tokens=12, completion_tokens=3, reused_tokens=4)
    assert event.usage.total_tokens == 15
    assert event.timings == Timings(context=1.5, prefill=20.0, decode=30.0, total_ms=70.0)  # no first token known
    again = event.to_dict()
    assert list(again) == list(row)
    assert again["usage"] == row["usage"] | {"total_tokens": 15}
    assert again["timings"] == {"safety_input": 0.0, "memory": 0.0, "context": 1.5, "prefill": 20.0, "decode": 30.0,
                                "tools": 0.0, "memory_write": 0.0, "ttft_ms": None, "total_ms": 70.0}  # fmt: skip
    assert event_from_dict(json.loads(json.dumps(again))) == event
    cancelled = event_from_dict({"type": "cancelled", "text": "Par", "usage": {}, "timings": {}})
    assert cancelled.usage == Usage() and cancelled.timings == Timings()


def test_a_cut_call_keeps_what_was_written_and_its_rule_through_json():
    """A call max_tokens cut has no parsed arguments: its text as written, its token count and `cut` carry it."""
    emit = Emitter("turn-1", clock=iter(range(10)).__next__)
    call = emit(ToolCall(call_id="call_1", name="calculator", arguments={}, constrained=True, tokens=24,
                         forced_tokens=19, arguments_text='{"expression": "17*', cut=True, guard="repeat"))  # fmt: skip
    back = event_from_dict(json.loads(json.dumps(call.to_dict())))
    assert back == call and back.to_dict()["arguments_text"] == '{"expression": "17*'


def test_the_events_package_reexports_every_public_name_of_its_modules():
    """`events` is a package (`base`, `values`, `stages`, …); `from jupyter_chatflow.events import X` reaches every
    public name any of its modules defines."""
    import importlib
    import pkgutil

    import jupyter_chatflow.events as events

    for module in pkgutil.iter_modules(events.__path__):
        part = importlib.import_module(f"jupyter_chatflow.events.{module.name}")
        defined = [n for n, v in vars(part).items() if not n.startswith("_") and getattr(v, "__module__", "") ==
                   part.__name__ and isinstance(v, type)]  # fmt: skip
        assert all(getattr(events, n) is getattr(part, n) for n in defined), module.name
    assert set(events.__all__) <= set(vars(events)) and "ToolCall" in events.__all__
