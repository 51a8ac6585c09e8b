"""A remote chat against llama.cpp's OpenAI-compatible server, from its recorded bytes (`wire_replay.py`).

Recorded from llama-cpp-python 0.3.36's server on the default model's GGUF (each fixture's "server" says how it
was started). What these pin down is what that server does differently from ours: no usage chunk in a stream, tools
only with `--chat_format chatml-function-calling` and a named tool_choice, a failure after 200 OK as a stream that
just ends, a tool call's message refused when its content is null.
"""

from __future__ import annotations

import json

import pytest

from jupyter_chatflow import Chat
from jupyter_chatflow.events import (
    Completed,
    Failed,
    HttpRequest,
    HttpResponse,
    SseFrame,
    TokenDelta,
    ToolCall,
    ToolResult,
)
from jupyter_chatflow.pipeline.response import Response
from jupyter_chatflow.store.telemetry import turn_record

from .wire_replay import load, replaying

URL = "http://127.0.0.1:8091/v1"


def replay(name: str) -> tuple[Response, dict, list[dict]]:
    """Send the fixture's turn to its recorded server; the response, the fixture and the requests the chat sent."""
    fixture = load(name)
    chat = Chat(base_url=URL, persist=False)
    replayer = replaying(chat, fixture)
    response = chat.send(fixture["text"], safety="off", **fixture["options"])
    response.terminal()
    return response, fixture, replayer.requests


def of(response: Response, cls):
    return [e for e in response if isinstance(e, cls)]


def chunks(exchange: dict) -> list[dict]:
    """The JSON data of a recorded stream's frames, `[DONE]` left out."""
    body = "".join(c["text"] for c in exchange["response"]["chunks"])
    datas = [line.removeprefix("data: ") for line in body.splitlines() if line.startswith("data: ")]
    return [json.loads(d) for d in datas if d != "[DONE]"]


def test_a_streamed_answer_and_its_logprobs_arrive_whole():
    response, fixture, sent = replay("llama_cpp_plain")
    done = response.terminal()
    assert isinstance(done, Completed) and done.finish_reason == "length"
    recorded = chunks(fixture["exchanges"][1])
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in recorded)
    assert response.text() == text == fixture["answer"]
    assert text.startswith("L'Étoile, la Cité")  # llama.cpp's own greedy answer on the Q4_1 weights
    tokens = of(response, TokenDelta)
    entries = [e for c in recorded for e in (c["choices"][0]["logprobs"] or {}).get("content") or []]
    assert len(tokens) == len(entries) == 24 == done.usage.completion_tokens  # max_tokens
    assert [t.logprob for t in tokens] == pytest.approx([e["logprob"] for e in entries])
    assert [a.text for a in tokens[0].alternatives] == ["L", "The", "La", "Al", "Le"]
    # the model is the one GET /v1/models lists (the server's --model_alias), asked for before the answer
    assert [r["path"] for r in sent] == ["/v1/models", "/v1/chat/completions"]
    assert sent[1]["body"]["model"] == "SmolLM2-135M-Instruct"


def test_a_stream_without_a_usage_chunk_leaves_the_prompt_tokens_unreported():
    response, fixture, sent = replay("llama_cpp_plain")
    assert sent[1]["body"]["stream_options"] == {"include_usage": True}  # asked for, and ignored
    assert not any(c.get("usage") for c in chunks(fixture["exchanges"][1]))
    usage = response.terminal().usage
    assert usage.prompt_tokens is None and usage.total_tokens is None  # not 0: the server did not say
    assert usage.completion_tokens == 24  # one logprob entry per token: these are counted here
    record = turn_record(list(response), model="remote", redact=lambda text: text)
    assert record["tokens"] == {"prompt": None, "completion": 24, "reused": 0, "computed": None}


def test_the_frames_are_the_bytes_the_server_sent():
    response, fixture, _ = replay("llama_cpp_plain")
    frames = [f for f in of(response, SseFrame)]
    body = "".join(c["text"] for c in fixture["exchanges"][1]["response"]["chunks"])
    assert "".join(f.text for f in frames) == body and sum(f.bytes for f in frames) == len(body.encode())
    assert frames[-1].text == "data: [DONE]\n\n"
    [status] = [r for r in of(response, HttpResponse) if r.headers.get("content-type", "").startswith("text/")]
    assert status.status == 200 and status.headers["server"] == "uvicorn" and status.request_id


def test_tools_with_the_default_chat_format_are_ignored():
    """llama-cpp-python's default chat format drops `tools`: no call, the model does the arithmetic itself."""
    response, _, sent = replay("llama_cpp_tools")
    assert sent[1]["body"]["tools"][0]["function"]["name"] == "calculator"
    assert sent[1]["body"]["tool_choice"] == "auto"
    assert not of(response, ToolCall) and isinstance(response.terminal(), Completed)
    assert response.text().startswith("17*23 = 4096")  # wrong (391): why the README says which flags make tools work


def test_a_named_tool_choice_streams_a_call_that_runs_here():
    response, fixture, sent = replay("llama_cpp_fc_tools_named")
    assert sent[1]["body"]["tool_choice"] == {"type": "function", "function": {"name": "calculator"}}
    [call], [result] = of(response, ToolCall), of(response, ToolResult)
    # the call's arguments came in one-token pieces; merged, they are what the model wrote
    pieces = [c["choices"][0]["delta"]["tool_calls"] for c in chunks(fixture["exchanges"][1])[1:-1]]
    merged = "".join(p[0]["function"]["arguments"] for p in pieces)
    assert json.loads(merged) == call.arguments and call.name == "calculator"
    assert call.arguments["expression"].startswith("17*23,045.")  # the Q4_1 model's, not a valid expression
    assert "CalculatorError" in result.error and not result.output
    # the result went back, the call's message with content "" (llama-cpp-python answers null with a 500)
    assistant, tool = sent[2]["body"]["messages"][1:]
    assert assistant["content"] == "" and assistant["tool_calls"][0]["id"] == call.call_id
    assert tool == {"role": "tool", "tool_call_id": call.call_id, "content": result.error}
    assert "tools" not in sent[2]["body"]  # after a forced call the model answers
    done = response.terminal()
    assert isinstance(done, Completed) and response.text() == fixture["answer"]
    # the call's tokens came without logprob entries and no usage: the completion cannot be counted here
    assert done.usage.completion_tokens is None and done.usage.prompt_tokens is None


@pytest.mark.parametrize("name", ["llama_cpp_too_long", "llama_cpp_fc_tools_required"])
def test_a_stream_that_just_ends_is_an_error_not_an_empty_answer(name):
    """A prompt past --n_ctx, or tool_choice "required" under chatml-function-calling: llama.cpp's server has sent
    200 and its headers when the request fails, so the stream ends with nothing in it."""
    response, fixture, _ = replay(name)
    assert fixture["exchanges"][1]["response"] == {**fixture["exchanges"][1]["response"], "status": 200, "chunks": []}
    failed = response.terminal()
    assert isinstance(failed, Failed) and failed.error == "RemoteError" and response.text() == ""
    assert "ended its stream before any token, with no finish_reason and no [DONE]" in failed.message
    assert "--n_ctx" in failed.message and "server's log" in failed.message


def test_auto_tool_choice_under_function_calling_gives_the_models_empty_answer():
    """chatml-function-calling with tool_choice "auto": SmolLM2-135M's first token is "<" and the server stops."""
    response, fixture, sent = replay("llama_cpp_fc_tools")
    done = response.terminal()
    assert isinstance(done, Completed) and done.finish_reason == "stop" and response.text() == ""
    assert not of(response, ToolCall) and sent[1]["body"]["tool_choice"] == "auto"
    assert of(response, HttpRequest)[-1].body["tools"]
