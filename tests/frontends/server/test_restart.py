"""After a restart, the server goes on where it was: a stored conversation continues with its history, and a
request repeated with its Idempotency-Key gets the answer it got before, not a new one. The restart is real for
everything the server holds in memory: a new app, state and scheduler over the same database file."""

from __future__ import annotations

import pytest

from jupyter_chatflow.frontends.server import ServerConfig

from .conftest import chat_body, wait_until

KEY = "sk-restart-test"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture
def restartable(serve, wide_model, tmp_path, monkeypatch):
    """start() -> (base URL, state): a fresh server each call, on one database."""
    monkeypatch.setenv("CHATFLOW_DB", str(tmp_path / "server.db"))

    def start():
        return serve(ServerConfig(api_keys=(KEY, "sk-other")), model=wide_model)

    return start


def test_a_stored_conversation_goes_on_after_a_restart_for_its_key_only(restartable, http):
    base, state = restartable()
    ask = {"message": "Tell me about tea.", "options": {"temperature": 0, "max_tokens": 6}}
    first = http.post(f"{base}/v1/chatflow/conversation", json=ask, headers=AUTH)
    conversation_id = first.headers["x-conversation-id"]
    assert first.status_code == 200 and "[DONE]" in first.text
    wait_until(lambda: state.host.engine.active == 0)

    base, state = restartable()  # nothing of the first server's memory
    follow_up = {"conversation_id": conversation_id, "message": "And coffee?", "options": {"max_tokens": 4}}
    other = http.post(f"{base}/v1/chatflow/conversation", json=follow_up, headers={"Authorization": "Bearer sk-other"})
    assert other.status_code == 404 and other.json()["error"]["code"] == "conversation_not_found"
    second = http.post(f"{base}/v1/chatflow/conversation", json=follow_up, headers=AUTH)
    assert second.status_code == 200, second.text
    assert second.headers["x-conversation-id"] == conversation_id
    chat = state.conversations.get(conversation_id, state.keys.check(AUTH["Authorization"])).chat
    assert [r.user for r in chat.history()] == ["Tell me about tea.", "And coffee?"]  # the first turn's history
    unknown = {**follow_up, "conversation_id": "conv_never"}
    assert http.post(f"{base}/v1/chatflow/conversation", json=unknown, headers=AUTH).status_code == 404


@pytest.mark.parametrize("stream", [False, True])
def test_an_idempotency_key_repeated_after_a_restart_gets_the_stored_answer(restartable, http, stream):
    body = chat_body("Name a colour.", max_tokens=6, temperature=1.0, seed=None, stream=stream)
    headers = {**AUTH, "Idempotency-Key": f"restart-{stream}"}
    base, _ = restartable()
    first = http.post(f"{base}/v1/chat/completions", json=body, headers=headers)
    assert first.status_code == 200 and "x-idempotent-replay" not in first.headers

    base, _ = restartable()
    again = http.post(f"{base}/v1/chat/completions", json=body, headers=headers)
    assert again.status_code == 200 and again.headers["x-idempotent-replay"] == "true"
    assert again.content == first.content  # the same answer, byte for byte (sampled at temperature 1: not rerun)
    reused = http.post(f"{base}/v1/chat/completions", json={**body, "max_tokens": 5}, headers=headers)
    assert reused.status_code == 400 and reused.json()["error"]["code"] == "idempotency_key_reused"


def test_forgotten_conversations_give_their_threads_back_and_go_on_when_used(restartable, http, monkeypatch):
    """A soak of 16 clients left one Chat thread per remembered conversation (22 → 87 threads): past
    MAX_CONVERSATIONS, or idle for IDLE_S, a conversation is forgotten, its Chat closed, and it opens again from the
    database when its id is used."""
    import threading

    from jupyter_chatflow.frontends.server import conversations

    monkeypatch.setattr(conversations, "MAX_CONVERSATIONS", 2)
    base, state = restartable()

    def engine_threads() -> int:
        return sum(t.name.startswith("chatflow-engine") for t in threading.enumerate())

    before = engine_threads()
    ids = []
    for n in range(5):
        reply = http.post(f"{base}/v1/chatflow/conversation", json={"message": f"Hi {n}", "options": {"max_tokens": 2}},
                          headers=AUTH)  # fmt: skip
        ids.append(reply.headers["x-conversation-id"])
        wait_until(lambda: state.host.engine.active == 0)
    wait_until(lambda: engine_threads() <= before + 2)  # the forgotten three's threads have ended
    monkeypatch.setattr(conversations, "IDLE_S", 0.0)
    again = {"conversation_id": ids[0], "message": "Still there?", "options": {"max_tokens": 2}}
    assert http.post(f"{base}/v1/chatflow/conversation", json=again, headers=AUTH).status_code == 200
    wait_until(lambda: state.host.engine.active == 0)
    http.post(f"{base}/v1/chatflow/conversation", json={"message": "New", "options": {"max_tokens": 2}}, headers=AUTH)
    wait_until(lambda: engine_threads() <= before + 1)  # idle ones forgotten too: only the newest is open
    chat = state.conversations.reopen(ids[0], state.keys.check(AUTH["Authorization"]), *state.host.require()).chat
    assert [r.user for r in chat.history()] == ["Hi 0", "Still there?"]
