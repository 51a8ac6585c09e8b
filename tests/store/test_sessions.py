"""Sessions and turns: named sessions that survive a restart, ordered turns with their events, titles."""

from __future__ import annotations

import pytest

from jupyter_chatflow.events import Cancelled, Completed, Emitter, Failed, Timings, TokenDelta, TurnStarted, Usage
from jupyter_chatflow.pipeline.response import Response
from jupyter_chatflow.store.database import Database, StorageError
from jupyter_chatflow.store.sessions import SessionNotFoundError, Sessions, TurnRecord


@pytest.fixture
def path(tmp_path):
    return tmp_path / "chatflow.db"


@pytest.fixture
def sessions(path):
    with Database(path) as db:
        yield Sessions(db)


def turn_events(turn_id: str, session_id: str, user: str, pieces: list[str], terminal=Completed):
    """A finished turn's events: the request, one token per piece, the terminal event."""
    emit = Emitter(turn_id)
    answer = "".join(pieces)
    started = TurnStarted(
        request_id="req-" + turn_id, session_id=session_id, user=user, params={}, features={}, created=1.5
    )
    tokens = [TokenDelta(index=i, token_id=i, text=word, logprob=-0.1, entropy=0.2) for i, word in enumerate(pieces)]
    end = {
        Completed: Completed(finish_reason="stop", text=answer, usage=Usage(), timings=Timings()),
        Cancelled: Cancelled(text=answer),
        Failed: Failed(error="GenerationError", message="too long", text=answer),
    }[terminal]
    return [emit(e) for e in (started, *tokens, end)]


def test_open_creates_then_finds_the_live_session(sessions):
    demo = sessions.open("demo")
    assert (demo.name, demo.title, demo.archived) == ("demo", "", False)
    assert sessions.open("demo") == demo
    assert sessions.get(demo.id) == demo
    assert sessions.open("other").id != demo.id


def test_session_survives_a_restart(path):
    with Database(path) as db:
        demo = Sessions(db).open("demo")
        Sessions(db).add_turn(TurnRecord(id="t1", session_id=demo.id, user="Hi", answer="Hello", status="completed"))
    with Database(path) as db:  # a new kernel
        again = Sessions(db).open("demo")
        assert again.id == demo.id
        assert [(t.user, t.answer) for t in Sessions(db).turns(again.id)] == [("Hi", "Hello")]


def test_open_new_archives_the_old_session(sessions):
    old = sessions.open("demo")
    fresh = sessions.open("demo", new=True)
    assert fresh.id != old.id
    assert sessions.get(old.id).archived
    assert sessions.open("demo") == fresh
    assert [s.id for s in sessions.list()] == [fresh.id]
    assert {s.id for s in sessions.list(archived=True)} == {old.id, fresh.id}


def test_open_needs_a_name(sessions):
    with pytest.raises(ValueError, match="name"):
        sessions.open("  ")


def test_get_unknown_session_names_the_fix(sessions):
    with pytest.raises(SessionNotFoundError, match=r"Sessions\.list"):
        sessions.get("nope")


def test_title(sessions):
    demo = sessions.open("demo")
    sessions.set_title(demo.id, "  Capital of France ")
    assert sessions.get(demo.id).title == "Capital of France"
    with pytest.raises(SessionNotFoundError):
        sessions.set_title("nope", "x")


def test_turns_are_numbered_in_order_and_update_the_session(sessions):
    demo = sessions.open("demo")
    stored = [
        sessions.add_turn(TurnRecord(id=f"t{i}", session_id=demo.id, user=f"q{i}", answer=f"a{i}", status="completed"))
        for i in range(3)
    ]
    assert [t.seq for t in stored] == [0, 1, 2]
    assert sessions.turns(demo.id) == stored
    assert sessions.get(demo.id).updated >= demo.updated


def test_the_most_recently_used_session_is_listed_first(sessions):
    first, second = sessions.open("first"), sessions.open("second")
    sessions.add_turn(TurnRecord(id="t", session_id=first.id, user="q", answer="a", status="completed"))
    assert [s.name for s in sessions.list()] == ["first", "second"]
    assert second.id in {s.id for s in sessions.list()}


def test_turn_from_events_round_trips_through_the_store(sessions):
    demo = sessions.open("demo")
    events = turn_events("t1", demo.id, "What is the capital of France?", ["Paris", "."])
    stored = sessions.add_turn(TurnRecord.from_events(events, session_id=demo.id))
    assert (stored.user, stored.answer, stored.status, stored.created) == (
        "What is the capital of France?",
        "Paris.",
        "completed",
        1.5,
    )
    replay = Response(sessions.events("t1"))
    assert replay.events() == events
    assert replay.text() == "Paris."


@pytest.mark.parametrize(("terminal", "status"), [(Cancelled, "cancelled"), (Failed, "error")])
def test_stopped_and_failed_turns_keep_their_status(sessions, terminal, status):
    demo = sessions.open("demo")
    sessions.add_turn(TurnRecord.from_events(turn_events("t", demo.id, "Hi", ["Hel"], terminal)))
    (turn,) = sessions.turns(demo.id)
    assert (turn.status, turn.answer) == (status, "Hel")


def test_from_events_needs_a_finished_turn():
    events = turn_events("t", "s", "Hi", ["Hel"])[:-1]
    with pytest.raises(ValueError, match="finished"):
        TurnRecord.from_events(events)


def test_reset_deletes_the_turns_but_keeps_the_session(sessions):
    demo = sessions.open("demo")
    for i in range(2):
        sessions.add_turn(TurnRecord(id=f"t{i}", session_id=demo.id, user="q", answer="a", status="completed"))
    assert sessions.reset(demo.id) == 2
    assert sessions.turns(demo.id) == []
    assert sessions.open("demo").id == demo.id
    assert sessions.add_turn(TurnRecord(id="t9", session_id=demo.id, user="q", answer="a", status="completed")).seq == 0


def test_bad_turns_are_refused(sessions):
    with pytest.raises(ValueError, match="status"):
        TurnRecord(id="t", session_id="s", user="q", answer="a", status="done")
    with pytest.raises(StorageError, match=r"Sessions\.open"):
        sessions.add_turn(TurnRecord(id="t", session_id="no-such-session", user="q", answer="a", status="completed"))
    demo = sessions.open("demo")
    sessions.add_turn(TurnRecord(id="t", session_id=demo.id, user="q", answer="a", status="completed"))
    with pytest.raises(StorageError, match="new id"):
        sessions.add_turn(TurnRecord(id="t", session_id=demo.id, user="q", answer="a", status="completed"))


def test_events_of_an_unknown_turn(sessions):
    with pytest.raises(StorageError, match="turns"):
        sessions.events("nope")
