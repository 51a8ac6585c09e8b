"""A turn whose process is killed mid-answer (`kill -9`) leaves its message and what had streamed: the next process
finds it "interrupted", and the conversation goes on with it in its history, as it does after a stopped turn."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from jupyter_chatflow.events import Failed
from jupyter_chatflow.pipeline.chat import STOPPED_MARK, Chat
from jupyter_chatflow.store.database import Database
from jupyter_chatflow.store.sessions import Sessions, TurnRecord

CHILD = textwrap.dedent(
    """
    import sys, time
    from jupyter_chatflow import load_model
    from jupyter_chatflow.pipeline import keeper
    from jupyter_chatflow.pipeline.chat import Chat
    from jupyter_chatflow.store.database import Database

    keeper.EVERY_S = 0.05
    chat = Chat(model=load_model(sys.argv[1], dtype="float32"), db=Database(sys.argv[2]), session="killed")
    step = chat.scheduler._batch.step

    def slow(*args):  # a decode step of a real model's pace, so the kill lands mid-answer
        time.sleep(0.03)
        return step(*args)

    chat.scheduler._batch.step = slow
    for n, event in enumerate(chat.send("Tell me a long story.", max_tokens=400, temperature=0.0, memory=False)):
        if event.type == "token" and event.index == 10:
            print("STREAMING", flush=True)
    print("ENDED", flush=True)
    """
)


@pytest.mark.slow  # a fresh process importing JAX and the package
def test_a_turn_killed_mid_answer_is_kept_interrupted_with_what_had_streamed(tiny_model, tmp_path):
    path = tmp_path / "chatflow.db"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tiny_model.path), str(path)], stdout=subprocess.PIPE,
                             text=True)  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "STREAMING"
        with Database(path) as db:  # kill once the answer so far has been written (after the first programs compile)
            deadline = time.monotonic() + 60
            while sum(len(row["answer"]) for row in db.query("SELECT answer FROM turns")) < 10:
                assert time.monotonic() < deadline and child.poll() is None
                time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        child.kill()
    with Database(path) as db:  # before anyone looks: the turn is there, still "running"
        assert db.query("SELECT status FROM turns")[0]["status"] == "running"
        assert Sessions(db).turns(db.query("SELECT session_id FROM turns")[0][0]) == []  # (not a turn yet)

    chat = Chat(model=tiny_model, db=Database(path), session="killed")  # the next process opens the database
    [turn] = chat.history()
    assert turn.status == "interrupted" and turn.user == "Tell me a long story." and len(turn.answer) >= 10
    ended = turn.events[-1]
    assert isinstance(ended, Failed) and ended.error == "interrupted" and "ended before the turn did" in ended.message
    streamed = "".join(e.text for e in turn.events if e.type == "token")
    assert turn.answer == streamed == ended.text
    assert turn.events[0].type == "turn_started" and any(e.type == "context_assembled" for e in turn.events)

    again = chat.send("Go on.", max_tokens=2, temperature=0.0, memory=False)
    context = next(e for e in again if e.type == "context_assembled")
    assert any(turn.answer + STOPPED_MARK in s.text for s in context.segments)  # the history holds it, as stopped
    again.wait(60)
    assert [t.status for t in chat.history()] == ["interrupted", "completed"]


def test_a_running_turn_of_a_live_process_is_left_running_and_one_of_a_dead_pid_is_interrupted(tmp_path):
    with Database(tmp_path / "chatflow.db") as db:
        sessions = Sessions(db)
        session = sessions.open("s")
        sessions.begin("mine", session.id, "hello", [])
        done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        gone = int(done.stdout)  # a pid that has ended (and was reaped)
        host = os.uname().nodename
        sessions.begin("theirs", session.id, "hi", [])
        with db.transaction() as conn:  # as a process that has ended would have stored it
            conn.execute("UPDATE turns SET owner = ? WHERE id = 'theirs'", (f"{host}:{gone}",))
        assert sessions.recover() == ["theirs"]
        statuses = {row["id"]: row["status"] for row in db.query("SELECT id, status FROM turns")}
        assert statuses == {"mine": "running", "theirs": "interrupted"}
        sessions.add_turn(TurnRecord(id="mine", session_id=session.id, user="hello", answer="hi!", status="completed"))
        assert [(t.id, t.seq, t.status) for t in sessions.turns(session.id)] == [
            ("mine", 0, "completed"),
            ("theirs", 1, "interrupted"),
        ]
