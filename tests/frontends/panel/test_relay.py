"""The relay between a chat's events and its panel: batches every ~40 ms, in order, on a thread that ends when the
events stop; `sync` waits for what was pushed; the engine never waits for the panel."""

from __future__ import annotations

import threading
import time

from jupyter_chatflow.events import Event, TokenDelta
from jupyter_chatflow.frontends.panel.relay import Relay, token_pieces


def tokens(count: int, turn_id: str = "turn_t") -> list[Event]:
    return [TokenDelta(index=i, token_id=i, text="x", logprob=-1.0, entropy=1.0, sequence_number=i, turn_id=turn_id)
            for i in range(count)]  # fmt: skip


def test_events_are_batched_every_40_ms_not_handed_on_one_by_one():
    batches: list[list[Event]] = []
    relay = Relay(batches.append)
    for event in tokens(60):
        relay.push(event)
        time.sleep(0.004)  # 60 events over ~0.25 s
    assert relay.sync(10)
    assert [e.sequence_number for batch in batches for e in batch] == list(range(60))  # each once, in order
    assert 3 <= len(batches) <= 15  # ~40 ms apart, not 60 calls


def test_push_never_waits_for_a_slow_panel_and_sync_waits_for_everything_pushed():
    handled: list[int] = []
    gate = threading.Event()

    def slow(batch: list[Event]) -> None:
        gate.wait(10)
        handled.extend(e.sequence_number for e in batch)

    relay = Relay(slow)
    started = time.perf_counter()
    for event in tokens(20):
        relay.push(event)
    assert time.perf_counter() - started < 0.05  # the engine thread went on at once
    assert not relay.sync(0.2) and handled == []  # the panel is still busy
    gate.set()
    assert relay.sync(10) and handled == list(range(20))


def test_the_thread_ends_when_events_stop_and_a_new_one_starts_when_they_come_back():
    seen: list[int] = []
    relay = Relay(lambda batch: seen.extend(e.sequence_number for e in batch))
    relay.push(tokens(1)[0])
    assert relay.sync(5)
    deadline = time.monotonic() + 5
    while any(t.name == "chatflow-relay" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(t.name == "chatflow-relay" for t in threading.enumerate())  # an idle panel holds no thread
    relay.push(tokens(2)[1])
    assert relay.sync(5) and seen == [0, 1]


def test_a_panel_that_fails_does_not_stop_the_relay(recwarn):
    calls: list[int] = []

    def broken(batch: list[Event]) -> None:
        calls.append(len(batch))
        raise RuntimeError("the front end went away")

    relay = Relay(broken)
    relay.push(tokens(1)[0])
    assert relay.sync(5)
    relay.push(tokens(2)[1])
    assert relay.sync(5) and calls == [1, 1]
    assert "could not show events in the panel" in str(recwarn[0].message)


def test_token_pieces_name_each_id_once():
    class Tokenizer:
        def piece(self, token_id: int) -> str:
            return f"<{token_id}>"

        def token_bytes(self, token_id: int) -> bytes:
            return bytes([token_id])

    known: set[int] = set()
    first = token_pieces(Tokenizer(), tokens(3), known)  # type: ignore[arg-type]
    again = token_pieces(Tokenizer(), tokens(4), known)  # type: ignore[arg-type]
    assert first == {"0": ["<0>", "00"], "1": ["<1>", "01"], "2": ["<2>", "02"]} and again == {"3": ["<3>", "03"]}
