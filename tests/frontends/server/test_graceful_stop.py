"""`chatflow serve` stopped by SIGTERM or Ctrl-C while it generates: it stops accepting, cancels what is in flight,
stores each conversation turn as cancelled with what it had, writes every request's log line, and exits within a
bound (it used to lose SIGTERM's turns and their log lines, and to run Ctrl-C's turns to their end for nobody)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from jupyter_chatflow.store.database import Database
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _serve(model: Path, db: Path) -> tuple[subprocess.Popen, str]:
    """`chatflow serve` on `model` and the database `db`, once its model is ready: (the process, its base URL)."""
    port = _port()
    command = [sys.executable, "-m", "jupyter_chatflow", "serve", "--model", str(model), "--port", str(port)]
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=os.environ | {"CHATFLOW_DB": str(db)})
    base, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 120
    while True:
        assert time.monotonic() < deadline and server.poll() is None, "the server did not come up"
        try:
            if httpx.get(f"{base}/health").status_code == 200:
                return server, base
        except httpx.TransportError:
            time.sleep(0.1)


def _read(url: str, body: dict, seen: threading.Event, frames: list[str]) -> None:
    """Stream `body` to `url`, noting each data line; `seen` once a few have come."""
    try:
        with httpx.stream("POST", url, json=body, timeout=60) as reply:
            for line in reply.iter_lines():
                if line.startswith("data:"):
                    frames.append(line)
                    if len(frames) >= 8:
                        seen.set()
    except httpx.HTTPError:
        pass  # the server went away: that is the point
    seen.set()


@pytest.mark.slow  # a server process (JAX, the package, a model) and two long generations
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_server_cancels_stores_and_logs_what_was_in_flight_and_exits_within_a_bound(tmp_path, stop):
    path = write_tiny_gguf(tmp_path / "long.gguf", TinySpec(context_length=8192))  # room for a long answer
    db = tmp_path / "server.db"
    server, base = _serve(path, db)
    try:
        turn = {"message": "Tell me everything.", "options": {"max_tokens": 7000, "temperature": 0}}
        model = httpx.get(f"{base}/v1/models").json()["data"][0]["id"]
        completion = {"model": model, "messages": [{"role": "user", "content": "Go on."}], "max_tokens": 7000,
                      "stream": True, "ignore_eos": True}  # fmt: skip
        streams = []
        for url, body in ((f"{base}/v1/chatflow/conversation", turn), (f"{base}/v1/chat/completions", completion)):
            seen, frames = threading.Event(), []
            threading.Thread(target=_read, args=(url, body, seen, frames), daemon=True).start()
            streams.append((seen, frames))
        for seen, frames in streams:
            assert seen.wait(60) and len(frames) >= 8, frames
        server.send_signal(stop)
        stopped = time.monotonic()
        _, err = server.communicate(timeout=60)
        took = time.monotonic() - stopped
    finally:
        server.kill()
    assert server.returncode == 0, err[-2000:]
    assert took < 15, f"took {took:.1f} s to stop"
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    logged = {line["path"]: line for line in lines}
    assert {"/v1/chatflow/conversation", "/v1/chat/completions"} <= set(logged), err[-2000:]
    assert logged["/v1/chat/completions"]["finish_reason"] == "cancelled"
    with Database(db) as database:
        [turn_row] = database.query("SELECT status, answer, user FROM turns")
    assert turn_row["status"] == "cancelled" and turn_row["user"] == "Tell me everything." and turn_row["answer"]


@pytest.mark.slow  # two server processes, one after the other
def test_a_restarted_server_process_goes_on_with_its_conversations_and_idempotent_answers(tiny_path, tmp_path):
    """The restart as it happens: the process stops (SIGTERM) and a new one starts on the same database."""
    db = tmp_path / "server.db"
    server, base = _serve(tiny_path, db)
    try:
        first = httpx.post(f"{base}/v1/chatflow/conversation", json={"message": "Hi", "options": {"max_tokens": 3}})
        conversation_id = first.headers["x-conversation-id"]
        model = httpx.get(f"{base}/v1/models").json()["data"][0]["id"]
        body = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6, "temperature": 1.0}
        answer = httpx.post(f"{base}/v1/chat/completions", json=body, headers={"Idempotency-Key": "once"})
        assert first.status_code == answer.status_code == 200
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
    server, base = _serve(tiny_path, db)
    try:
        follow_up = {"conversation_id": conversation_id, "message": "Again", "options": {"max_tokens": 3}}
        second = httpx.post(f"{base}/v1/chatflow/conversation", json=follow_up)
        again = httpx.post(f"{base}/v1/chat/completions", json=body, headers={"Idempotency-Key": "once"})
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
    assert second.status_code == 200 and second.headers["x-conversation-id"] == conversation_id
    assert again.headers["x-idempotent-replay"] == "true" and again.content == answer.content
    with Database(db) as database:
        rows = database.query("SELECT user, session_id, seq FROM turns ORDER BY seq")
    assert [(row["user"], row["seq"]) for row in rows] == [("Hi", 0), ("Again", 1)]
    assert rows[0]["session_id"] == rows[1]["session_id"]  # one conversation, its second turn after the first
