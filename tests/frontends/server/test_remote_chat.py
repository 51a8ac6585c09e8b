"""The notebook as a client: `Chat(base_url=…)` against a live `chatflow serve` on the tiny model."""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading

import pytest

from jupyter_chatflow import Chat
from jupyter_chatflow.events import (
    Cancelled,
    Completed,
    Failed,
    HttpRequest,
    HttpResponse,
    SseFrame,
    TokenDelta,
    ToolCall,
    ToolResult,
)
from jupyter_chatflow.frontends.server import ServerConfig
from jupyter_chatflow.pipeline.response import Response
from jupyter_chatflow.pipeline.wire import mask_key

from .conftest import wait_until

KEY = "sk-chatflow-test-7f3a9c2e5b81abcd"


def remote(url: str, **kwargs) -> Chat:
    return Chat(base_url=f"{url}/v1", persist=False, **kwargs)


def of(response: Response, cls):
    return [e for e in response if isinstance(e, cls)]


def test_a_remote_turn_is_the_servers_greedy_answer(serve, http):
    url, _ = serve(ServerConfig(api_keys=(KEY,)))
    chat = remote(url, api_key=KEY)
    response = chat.send("Hi", temperature=0, max_tokens=8)
    done = response.terminal()
    assert isinstance(done, Completed) and done.finish_reason == "length"
    post = next(e for e in of(response, HttpRequest) if e.method == "POST")
    body = {k: v for k, v in post.body.items() if k not in ("stream", "stream_options")}
    whole = http.post(f"{url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}).json()
    assert (
        response.text()
        == whole["choices"][0]["message"]["content"]
        == "".join(e.text for e in of(response, TokenDelta))
    )
    # every token came with its logprob entry; the usage is the server's
    entries = [entry for f in of(response, SseFrame) for entry in _entries(f)]
    assert len(entries) == done.usage.completion_tokens == whole["usage"]["completion_tokens"] == 8
    assert done.usage.prompt_tokens == whole["usage"]["prompt_tokens"] > 0
    first = of(response, TokenDelta)[0]
    assert first.logprob == pytest.approx(entries[0]["logprob"]) and len(first.alternatives) == 5
    assert [a.logprob for a in first.alternatives] == pytest.approx([a["logprob"] for a in entries[0]["top_logprobs"]])


def _entries(frame: SseFrame) -> list[dict]:
    data = frame.text.removeprefix("data: ").strip()
    if not data.startswith("{"):
        return []
    choices = json.loads(data)["choices"]
    return [e for c in choices for e in ((c.get("logprobs") or {}).get("content") or [])]


FLOAT = re.compile(r"-?\d+\.\d+(?:e-?\d+)?")


def test_the_wire_events_mask_the_key_and_add_up(serve, http):
    url, _ = serve(ServerConfig(api_keys=(KEY,)))
    chat = remote(url, api_key=KEY, model="tiny")  # the model named: no GET /v1/models
    response = chat.send("Hi", temperature=0, max_tokens=8, safety="off")
    [request] = of(response, HttpRequest)
    assert (request.method, request.url) == ("POST", f"{url}/v1/chat/completions")
    assert request.headers["Authorization"] == "Bearer sk-…abcd" == f"Bearer {mask_key(KEY)}"
    assert request.body["stream"] and request.body["logprobs"] and request.body["top_logprobs"] == 5
    [status] = of(response, HttpResponse)
    assert status.status == 200 and status.request_id.startswith("req_")
    assert status.headers["x-request-id"] == status.request_id
    frames = of(response, SseFrame)
    assert [f.index for f in frames] == list(range(len(frames))) and frames[-1].text == "data: [DONE]\n\n"
    assert all(a.arrival_ms <= b.arrival_ms for a, b in itertools.pairwise(frames))
    assert frames[0].arrival_ms >= status.elapsed_ms > 0
    # the frames add up to the body: the same request sent directly gives as many bytes (ids of equal length; each
    # float counted as one character: a logprob's last bits, and so its repr's length, may differ between the two)
    body = request.body
    with http.stream("POST", request.url, json=body, headers={"Authorization": f"Bearer {KEY}"}) as direct:
        received = b"".join(direct.iter_raw())
    text = "".join(f.text for f in frames)
    assert sum(f.bytes for f in frames) == len(text.encode())
    assert len(FLOAT.sub("0", text).encode()) == len(FLOAT.sub("0", received.decode()).encode())
    # the secret is nowhere: not in the events, their JSON, the chat's repr of its server
    everything = repr(response.events()) + json.dumps(response.to_dicts()) + repr(chat.answerer.server)
    assert KEY not in everything and KEY[3:-4] not in everything


def test_a_wrong_key_is_a_clear_error(serve):
    url, _ = serve(ServerConfig(api_keys=(KEY,)))
    response = remote(url, api_key="sk-wrong-key-000000000000").send("Hi", max_tokens=4)
    failed = response.terminal()
    assert isinstance(failed, Failed) and failed.error == "RemoteError"
    assert "401" in failed.message and "pass api_key=" in failed.message
    assert [e.status for e in of(response, HttpResponse)] == [401]
    assert "sk-wrong-key" not in json.dumps(response.to_dicts())


def test_no_server_names_chatflow_serve():
    with socket.socket() as probe:  # a port nobody listens on: bind one, then let it go
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    failed = remote(f"http://127.0.0.1:{port}").send("Hi").terminal()
    assert isinstance(failed, Failed) and "is `chatflow serve`" in failed.message and f":{port}/v1" in failed.message


def test_stop_mid_stream_cancels_and_frees_the_row(serve):
    url, state = serve(delay=0.05)
    chat = remote(url)
    response = chat.send("Hi", temperature=0, max_tokens=200, safety="off")
    tokens = 0
    for event in response:
        if isinstance(event, TokenDelta):
            tokens += 1
            if tokens == 3:
                threading.Thread(target=chat.stop).start()
    last = response.terminal()
    assert isinstance(last, Cancelled) and 3 <= len(of(response, TokenDelta)) < 200
    assert last.text == "".join(e.text for e in of(response, TokenDelta))
    engine = state.host.engine
    wait_until(lambda: engine.active == 0 and engine.queued == 0)  # the server saw the client go


def test_a_tool_the_server_asks_for_runs_here(serve, wide_model):
    url, _ = serve(model=wide_model)
    chat = remote(url)
    response = chat.send(
        "What is 2+3?", tools="calculator", tool_choice="required", temperature=0, max_tokens=300, max_tool_rounds=1
    )  # (room for the call: max_tokens bounds it too)
    assert isinstance(response.terminal(), Completed), response.terminal()
    [call], [result] = of(response, ToolCall), of(response, ToolResult)
    assert call.name == result.name == "calculator" and result.call_id == call.call_id
    first, second = [e for e in of(response, HttpRequest)][-2:]
    assert first.body["tool_choice"] == "required" and "tools" not in second.body  # then it answers
    sent = second.body["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == call.call_id
    assert sent[-1] == {"role": "tool", "tool_call_id": call.call_id, "content": result.output or result.error}


def test_a_remote_session_keeps_its_history_and_gets_a_title(serve, tmp_path):
    url, _ = serve()
    chat = Chat(base_url=f"{url}/v1", db=str(tmp_path / "remote.db"), session="remote")
    first = chat.send("Tell me about the capital of France", temperature=0, max_tokens=4, safety="input")
    assert first.title() == "Capital of France" == chat.title  # the user's words: no title request is sent
    second = chat.send("And Spain?", temperature=0, max_tokens=4, safety="input")
    sent = next(e for e in of(second, HttpRequest) if e.method == "POST").body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[0]["content"] == "Tell me about the capital of France" and sent[1]["content"] == first.text()
    with pytest.raises(Exception, match="no local model"):
        chat.model  # noqa: B018


@pytest.fixture
def shell(tmp_path, monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.setenv("CHATFLOW_DB", str(tmp_path / "magic.db"))
    monkeypatch.delenv("CHATFLOW_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    InteractiveShell.clear_instance()
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_chatflow")
    yield ip
    InteractiveShell.clear_instance()


def test_chat_magic_sends_to_a_server(serve, shell, capsys):
    url, _ = serve(ServerConfig(api_keys=(KEY,)))
    shell.run_cell_magic("chat", f"--server {url}/v1 --api-key {KEY} --max-tokens 4 -o r", "Hi")
    out, err = capsys.readouterr()
    response = shell.user_ns["r"]
    assert isinstance(response.terminal(), Completed) and response.text() in out and not err
    assert f"server: POST {url}/v1/chat/completions → 200 OK, req_" in out and "SSE frames" in out
    magics = shell.magics_manager.registry["ChatMagics"]
    assert magics._model is None  # no local model was loaded
    # the kernel's default server and key: %config, then a plain %%chat; the key is never printed
    shell.run_line_magic("config", f"ChatMagics.server = '{url}/v1'")
    shell.run_line_magic("config", f"ChatMagics.api_key = '{KEY}'")
    shell.run_cell_magic("chat", "--session other --max-tokens 4 -o r2", "Hello")
    shell.run_line_magic("config", "ChatMagics")
    out, err = capsys.readouterr()
    assert isinstance(shell.user_ns["r2"].terminal(), Completed), err
    assert KEY not in out + err and "sk-…abcd" in out
    # a wrong key: the error names the fix, not the key
    shell.run_cell_magic("chat", f"--session third --server {url}/v1 --api-key sk-not-the-key-12345678", "Hi")
    out, err = capsys.readouterr()
    assert "error: " in out and "401" in out and "pass api_key=" in out and "sk-not-the-key" not in out + err


def test_the_panel_over_a_remote_chat(serve):
    from jupyter_chatflow.frontends.panel.widget import ChatWidget

    url, _ = serve()
    panel = ChatWidget(remote(url), settings={"temperature": 0, "max_tokens": 6})
    assert panel.model_info["remote"] == f"{url}/v1" and panel.model_info["layers"] == 0  # 0: not known
    panel._on_message(panel, {"type": "draft", "text": "Hel"}, [])  # a draft: no prewarm, no error
    panel.ask("Hello")
    panel.wait(60)
    [row] = panel.turns  # (its row: the events a view asks for)
    sent: list[dict] = []
    panel.send = lambda content, buffers=None: sent.append(content)  # type: ignore[method-assign]
    panel._on_message(panel, {"type": "fetch", "turn_id": row["turn_id"], "after": -1}, [])
    [reply] = sent
    kinds = [e["type"] for e in reply["events"]]
    assert reply["pieces"] == {} and "http_request" in kinds and "sse_frame" in kinds and kinds[-1] == "completed"
    assert panel.model_info["name"] == "tiny" and panel.error == ""  # the server's model, once a turn asked
    panel._on_message(panel, {"type": "fork", "turn_id": row["turn_id"], "index": 0, "token_id": -1}, [])
    assert "cannot be forked" in panel.error


def test_a_rate_limit_and_a_loading_server_are_clear_errors(serve):
    from jupyter_chatflow.frontends.server import ModelHost

    url, _ = serve(ServerConfig(rate_limit=1))
    chat = remote(url, model="tiny")
    assert isinstance(chat.send("Hi", max_tokens=2).terminal(), Completed)
    limited = chat.send("Hi", max_tokens=2)
    failed = limited.terminal()
    assert isinstance(failed, Failed) and "429" in failed.message and "Retry after" in failed.message
    [status] = of(limited, HttpResponse)
    assert (
        status.status == 429
        and int(status.headers["retry-after"]) > 0
        and "x-ratelimit-limit-requests" in status.headers
    )
    loading, _ = serve(host=ModelHost())  # no model yet: /health and the routes say 503
    failed = remote(loading, model="tiny").send("Hi").terminal()
    assert isinstance(failed, Failed) and "503" in failed.message and "still loading" in failed.message
