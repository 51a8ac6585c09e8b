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
    response, _, sent = replay("llama_cpp_fc_tools")
    done = response.terminal()
    assert isinstance(done, Completed) and done.finish_reason == "stop" and response.text() == ""
    assert not of(response, ToolCall) and sent[1]["body"]["tool_choice"] == "auto"
    assert of(response, HttpRequest)[-1].body["tools"]


# ---- shapes other servers send, written from their source (vLLM 0.33.0, SGLang 0.5.23's wheels), not recorded ----
# Neither runs here (they need a GPU, or a CPU build that cannot be installed offline); each exchange below is the
# shape their OpenAI server code writes, cited by file, so the client's reading of it is pinned down.

MODELS = {"request": {"method": "GET", "path": "/v1/models", "body": None},
          "response": {"status": 200, "headers": {"content-type": "application/json"},
                       "chunks": [{"ms": 1.0, "text": '{"object": "list", "data": [{"id": "served"}]}'}]}}  # fmt: skip


def stream(*chunks: dict | str, status: int = 200, content_type: str = "text/event-stream") -> dict:
    """A recorded-style exchange whose answer is these SSE data frames (dicts as JSON; "[DONE]" as is)."""
    frames = [f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks]
    return {"request": {"method": "POST", "path": "/v1/chat/completions", "body": None},
            "response": {"status": status, "headers": {"content-type": content_type},
                         "chunks": [{"ms": float(i), "text": f} for i, f in enumerate(frames)]}}  # fmt: skip


def delta(content: str | None = None, *, finish: str | None = None, entries: list | None = None, **more) -> dict:
    choice = {"index": 0, "delta": {"content": content, **more} if content is not None or more else {},
              "logprobs": {"content": entries} if entries else None, "finish_reason": finish}  # fmt: skip
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "served", "choices": [choice]}


def entry(token: str, logprob: float, top: list[tuple[str, float]]) -> dict:
    return {
        "token": token,
        "logprob": logprob,
        "bytes": list(token.encode()),
        "top_logprobs": [{"token": t, "logprob": p, "bytes": list(t.encode())} for t, p in top],
    }


def send(*exchanges: dict, text: str = "Hi", **options) -> Response:
    chat = Chat(base_url=URL, persist=False)
    replaying(chat, {"exchanges": [MODELS, *exchanges]})
    response = chat.send(text, safety="off", temperature=0, **options)
    response.terminal()
    return response


def test_vllm_usage_chunk_and_cached_tokens_are_read():
    """vLLM: a last chunk with `choices: []` and the usage; cached_tokens with --enable-prompt-tokens-details
    (vllm/entrypoints/openai/chat_completion/serving.py)."""
    usage = {"prompt_tokens": 31, "completion_tokens": 2, "total_tokens": 33,
             "prompt_tokens_details": {"cached_tokens": 16}}  # fmt: skip
    response = send(stream(delta("", role="assistant"), delta("Hello", entries=[entry("Hello", -0.1, [])]),
                           delta("!", finish="stop", entries=[entry("!", -0.2, [])]),
                           {"id": "chatcmpl-1", "choices": [], "usage": usage}, "[DONE]"))  # fmt: skip
    done = response.terminal()
    assert isinstance(done, Completed) and response.text() == "Hello!"
    assert (done.usage.prompt_tokens, done.usage.completion_tokens, done.usage.reused_tokens) == (31, 2, 16)
    assert done.usage.total_tokens == 33


def test_vllm_lists_its_pick_first_and_the_alternatives_are_shown_best_first():
    """vLLM's top_logprobs start with the sampled token, not the most likely (serving.py, _get_top_logprobs)."""
    top = [("Paris", -1.2), ("The", -0.4), ("It", -2.0)]
    response = send(stream(delta("Paris", finish="stop", entries=[entry("Paris", -1.2, top)]), "[DONE]"))
    [token] = of(response, TokenDelta)
    assert [a.text for a in token.alternatives] == ["The", "Paris", "It"]
    assert [a.logprob for a in token.alternatives] == [-0.4, -1.2, -2.0]


def test_an_error_chunk_after_200_fails_the_turn_with_its_message():
    """vLLM checks top_logprobs against --max-logprobs once streaming began: 200, an error chunk, [DONE]."""
    error = {"error": {"message": "Requested top logprobs of 25 exceeds the max of 20", "type": "BadRequestError",
                       "param": None, "code": 400}}  # fmt: skip
    failed = send(stream(error, "[DONE]")).terminal()
    assert isinstance(failed, Failed)
    assert failed.message == "The server failed mid-answer: Requested top logprobs of 25 exceeds the max of 20"


def test_sglangs_flat_error_body_gives_its_message():
    """SGLang's errors before streaming have no {"error": …} wrapper (serving_base.py, create_error_response)."""
    body = {"object": "error", "message": "The input (9000 tokens) is longer than the model's context length "
            "(8192 tokens).", "type": "BadRequestError", "param": None, "code": 400}  # fmt: skip
    failed = send(stream(status=400, content_type="application/json") | {"response": {
        "status": 400, "headers": {"content-type": "application/json"},
        "chunks": [{"ms": 1.0, "text": json.dumps(body)}]}}).terminal()  # fmt: skip
    assert isinstance(failed, Failed)
    assert "answered 400 Bad Request: The input (9000 tokens) is longer than the model's context length" in (
        failed.message
    )


def test_sglangs_abort_is_an_error_not_a_finished_answer():
    """SGLang reports finish_reason "abort" for an answer it gave up on (serving_chat.py)."""
    failed = send(stream(delta("Par", entries=[entry("Par", -0.3, [])]), delta(finish="abort"), "[DONE]")).terminal()
    assert isinstance(failed, Failed) and "aborted the answer after 1 tokens" in failed.message
    assert failed.text == "Par"


def test_sglangs_tool_call_pieces_with_explicit_nulls_merge():
    """SGLang: the first piece names the call with arguments "", later ones carry id and name as null
    (function_call/base_format_detector.py, serving_chat.py)."""
    first = {"index": 0, "id": "call_7", "type": "function", "function": {"name": "calculator", "arguments": ""}}
    pieces = [{"index": 0, "id": None, "type": "function", "function": {"name": None, "arguments": a}}
              for a in ('{"expression": ', '"17*23"}')]  # fmt: skip
    calls = [delta(None, tool_calls=[p], role=None) for p in (first, *pieces)]
    answer = [delta("391", finish="stop", entries=[entry("391", -0.1, [])]), "[DONE]"]
    response = send(stream(*calls, delta(finish="tool_calls"), "[DONE]"), stream(*answer),
                    text="What is 17*23?", tools="calculator", tool_choice="calculator")  # fmt: skip
    [call], [result] = of(response, ToolCall), of(response, ToolResult)
    assert (call.call_id, call.name, call.arguments) == ("call_7", "calculator", {"expression": "17*23"})
    assert result.output == "17*23 = 391" and response.text() == "391"
