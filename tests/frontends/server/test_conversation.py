"""POST /v1/chatflow/conversation: the whole pipeline's turn as delta-encoding v1 SSE, numbered, resumable."""

from __future__ import annotations

import json

import httpx
import pytest

from jupyter_chatflow.frontends.server import ServerConfig, conversations
from jupyter_chatflow.frontends.server.adapters import apply_delta_v1

from .conftest import wait_until

KEY = "sk-conversation-test"
AUTH = {"Authorization": f"Bearer {KEY}"}
ASK = {"message": "Tell me about the history of the printing press in Europe.",
       "options": {"temperature": 0, "max_tokens": 40}}  # fmt: skip


def frames(text: str) -> list[dict]:
    """Each SSE frame's id, event name and data (comments and pings left out)."""
    parsed = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":") and ": " in line)
        if "data" in fields:
            parsed.append({"id": int(fields["id"]), "event": fields.get("event"), "data": fields["data"]})
    return parsed


@pytest.fixture
def server(serve, wide_model):
    base, state = serve(ServerConfig(api_keys=(KEY,)), model=wide_model)
    return base, state


def test_a_turn_streams_numbered_delta_v1_frames_with_safety_and_title(server, http):
    base, state = server
    reply = http.post(f"{base}/v1/chatflow/conversation", json=ASK, headers=AUTH)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
    conversation_id = reply.headers["x-conversation-id"]
    sent = frames(reply.text)
    assert [f["id"] for f in sent] == list(range(1, len(sent) + 1))
    assert sent[0]["event"] == "delta_encoding" and json.loads(sent[0]["data"]) == "v1"
    assert sent[-1]["data"] == "[DONE]"
    names = [f["event"] for f in sent]
    assert "safety_decision" in names and names.count("title_generation") == 1
    title = json.loads(sent[names.index("title_generation")]["data"])
    deltas = [json.loads(f["data"]) for f in sent if f["event"] == "delta"]
    document = apply_delta_v1(deltas)
    chat = state.conversations.get(conversation_id, state.keys.check(AUTH["Authorization"])).chat
    [record] = chat.history()
    assert document["message"]["content"]["parts"][0] == record.answer != ""
    assert document["message"]["status"] == "finished_successfully"
    assert document["conversation_id"] == title["conversation_id"] == conversation_id
    assert title["title"] == chat.title != ""


@pytest.fixture
def paced(serve, wide_model):
    """A server whose decode steps take 20 ms each: a 40-token turn is still running when a test acts."""
    return serve(ServerConfig(api_keys=(KEY,)), model=wide_model, delay=0.02)


def first_frames(client: httpx.Client, url: str, body: dict, count: int) -> tuple[str, list[dict]]:
    """POST `body`, read `count` frames, then drop the connection: the conversation id and the frames read."""
    with client.stream("POST", url, json=body, headers=AUTH) as reply:
        assert reply.status_code == 200
        head = ""
        for line in reply.iter_lines():
            head += line + "\n"
            if line == "" and len(frames(head)) >= count:
                return reply.headers["x-conversation-id"], frames(head)  # the connection drops here
    raise AssertionError(f"the stream ended before {count} frames")


def test_a_dropped_stream_resumes_after_last_event_id_without_a_token_lost_or_repeated(paced):
    base, state = paced
    with httpx.Client(timeout=30) as client:
        conversation_id, seen = first_frames(client, f"{base}/v1/chatflow/conversation", ASK, 4)
        turn = state.conversations.get(conversation_id, state.keys.check(AUTH["Authorization"])).turn
        assert not turn.ended  # the dropped POST left the turn running: the resume below follows it live
        url = f"{base}/v1/chatflow/conversation/{conversation_id}/stream"
        rest = frames(client.get(url, headers={**AUTH, "Last-Event-ID": str(seen[-1]["id"])}).text)
        whole = frames(client.get(url, headers=AUTH).text)  # the turn has ended: the whole of it again
    assert [f["id"] for f in seen + rest] == [f["id"] for f in whole] == list(range(1, len(whole) + 1))
    assert seen + rest == whole and whole[-1]["data"] == "[DONE]"
    deltas = [json.loads(f["data"]) for f in seen + rest if f["event"] == "delta"]
    [record] = state.conversations.get(conversation_id, state.keys.check(AUTH["Authorization"])).chat.history()
    assert apply_delta_v1(deltas)["message"]["content"]["parts"][0] == record.answer
    assert len(record.answer) > 0 and turn.response.terminal().type == "completed"


def test_a_turn_nobody_reads_is_cancelled_after_the_grace_period(paced, monkeypatch):
    monkeypatch.setattr(conversations, "ORPHAN_S", 0.1)
    base, state = paced
    long = {**ASK, "options": {"temperature": 0, "max_tokens": 400, "ignore_eos": True}}  # 400 tokens, whatever
    with httpx.Client(timeout=30) as client:  # the tiny model's answer
        conversation_id, _ = first_frames(client, f"{base}/v1/chatflow/conversation", long, 3)
        turn = state.conversations.get(conversation_id, state.keys.check(AUTH["Authorization"])).turn
        wait_until(lambda: turn.ended)
        whole = frames(client.get(f"{base}/v1/chatflow/conversation/{conversation_id}/stream", headers=AUTH).text)
    assert turn.response.terminal().type == "cancelled"
    document = apply_delta_v1([json.loads(f["data"]) for f in whole if f["event"] == "delta"])
    assert document["message"]["status"] == "finished_partial_completion" and whole[-1]["data"] == "[DONE]"
    assert sum(1 for f in whole if f["event"] == "delta") < 100  # far fewer than the 400 tokens asked for


def test_a_second_send_while_a_turn_runs_is_a_409(paced, http):
    base, _ = paced
    with httpx.Client(timeout=30) as client:
        conversation_id, _ = first_frames(client, f"{base}/v1/chatflow/conversation", ASK, 3)
        again = {"conversation_id": conversation_id, "message": "And in Asia?", "options": {"max_tokens": 4}}
        busy = http.post(f"{base}/v1/chatflow/conversation", json=again, headers=AUTH)
        assert busy.status_code == 409 and busy.json()["error"]["code"] == "turn_running", busy.text
        client.get(f"{base}/v1/chatflow/conversation/{conversation_id}/stream", headers=AUTH)  # to the turn's end
    assert http.post(f"{base}/v1/chatflow/conversation", json=again, headers=AUTH).status_code == 200


def test_a_conversation_goes_on_with_its_id(server, http):
    base, state = server
    first = http.post(f"{base}/v1/chatflow/conversation", json=ASK, headers=AUTH)
    conversation_id = first.headers["x-conversation-id"]
    follow_up = {"conversation_id": conversation_id, "message": "And in Asia?", "options": {"max_tokens": 8}}
    second = http.post(f"{base}/v1/chatflow/conversation", json=follow_up, headers=AUTH)
    assert second.status_code == 200 and second.headers["x-conversation-id"] == conversation_id
    chat = state.conversations.get(conversation_id, state.keys.check(AUTH["Authorization"])).chat
    assert [r.user for r in chat.history()] == [ASK["message"], "And in Asia?"]
    wait_until(lambda: state.host.engine.active == 0)


@pytest.mark.parametrize(
    "body, status, param",
    [
        ({"message": ""}, 400, "message"),
        ({"message": "Hi", "options": {"temperature": "hot"}}, 400, "options.temperature"),
        ({"message": "Hi", "options": {"max_tokens": 4, "max_tokns": 4}}, 400, "options.max_tokns"),
        ({"message": "Hi", "options": ["temperature"]}, 400, "options"),
        ({"message": "Hi", "options": {"memory": True}}, 400, "options.memory"),
        ({"message": "Hi", "conversation_id": "conv_nope"}, 404, "conversation_id"),
    ],
)
def test_bad_requests_name_the_field(server, http, body, status, param):
    base, _ = server
    reply = http.post(f"{base}/v1/chatflow/conversation", json=body, headers=AUTH)
    assert reply.status_code == status and reply.json()["error"]["param"] == param, reply.text


def test_a_conversation_is_its_keys_only(serve, wide_model, http):
    base, _ = serve(ServerConfig(api_keys=(KEY, "sk-other")), model=wide_model)
    reply = http.post(f"{base}/v1/chatflow/conversation", json={**ASK, "options": {"max_tokens": 4}}, headers=AUTH)
    url = f"{base}/v1/chatflow/conversation/{reply.headers['x-conversation-id']}/stream"
    assert http.get(url).status_code == 401
    assert http.get(url, headers={"Authorization": "Bearer sk-other"}).status_code == 404
    assert http.get(url, headers={**AUTH, "Last-Event-ID": "9999"}).status_code == 400


def test_an_unknown_conversation_or_an_expired_turn_is_a_404(server, http, monkeypatch):
    base, _ = server
    unknown = http.get(f"{base}/v1/chatflow/conversation/conv_nope/stream", headers=AUTH)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "conversation_not_found"
    reply = http.post(f"{base}/v1/chatflow/conversation", json={**ASK, "options": {"max_tokens": 4}}, headers=AUTH)
    url = f"{base}/v1/chatflow/conversation/{reply.headers['x-conversation-id']}/stream"
    assert frames(http.get(url, headers=AUTH).text) == frames(reply.text)  # kept: the same frames again
    monkeypatch.setattr(conversations, "KEEP_S", 0.0)  # the ended turn's frames expire
    gone = http.get(url, headers=AUTH)
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "no_turn"
