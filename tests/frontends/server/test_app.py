"""The server's other routes and what every request gets: /health, /tokenize, /metrics, request ids, idempotency
keys, cancellation on disconnect, keep-alive comments, the log line."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time

import httpx

from jupyter_chatflow.frontends.server import ModelHost, ServerConfig
from jupyter_chatflow.frontends.server.auth import key_id

from .conftest import chat_body, wait_until


def test_health_is_503_until_the_model_is_ready(serve, http, tiny_model):
    host = ModelHost()
    base, _ = serve(host=host)
    loading = http.get(f"{base}/health")
    assert loading.status_code == 503 and loading.json() == {"status": "loading"}
    models = http.get(f"{base}/v1/models")
    assert models.status_code == 503 and models.json()["error"]["code"] == "model_not_ready"
    host.status = "compiling"
    assert http.get(f"{base}/health").json() == {"status": "compiling"}
    host.install(tiny_model, "tiny")
    host.status = "ready"
    assert http.get(f"{base}/health").status_code == 200
    assert http.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=2)).status_code == 200


def test_a_503_while_the_model_loads_does_not_count_against_the_keys_limits(serve, http, tiny_model):
    host = ModelHost()
    base, _ = serve(ServerConfig(rate_limit=2), host=host)
    for route in ("/v1/chat/completions", "/v1/chatflow/conversation"):
        early = http.post(f"{base}{route}", json=chat_body(max_tokens=2) | {"message": "Hi"})
        assert early.status_code == 503 and "x-ratelimit-remaining-requests" not in early.headers
    host.install(tiny_model, "tiny")
    host.status = "ready"
    first = http.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=2))
    assert first.status_code == 200 and first.headers["x-ratelimit-remaining-requests"] == "1"


def test_a_host_loads_and_compiles_in_the_background(tiny_path):
    host = ModelHost()
    host.load_in_background(str(tiny_path)).join(timeout=120)
    assert host.status == "ready" and host.name == "tiny" and host.engine is not None
    failed = ModelHost()
    failed.load_in_background("/nonexistent/model.gguf").join(timeout=60)
    assert failed.status == "failed" and "ModelNotFoundError" in failed.error


def test_tokenize_counts_a_prompt_and_a_conversation(serve, http, tiny_model):
    base, _ = serve()
    text = http.post(f"{base}/tokenize", json={"model": "tiny", "prompt": "Hello world"}).json()
    assert text["tokens"] == tiny_model.tokenizer.encode("Hello world") and text["count"] == len(text["tokens"])
    assert text["max_model_len"] == tiny_model.config.context_length
    messages = [{"role": "user", "content": "Hi"}]
    chat = http.post(f"{base}/tokenize", json={"messages": messages}).json()
    assert chat["tokens"] == tiny_model.tokenizer.apply_chat_template(messages)
    assert http.post(f"{base}/tokenize", json={}).status_code == 400


def test_every_response_carries_a_request_id_and_honours_the_clients(serve, http):
    base, _ = serve()
    ids = {http.get(f"{base}/health").headers["x-request-id"] for _ in range(3)}
    assert len(ids) == 3 and all(i.startswith("req_") for i in ids)
    mine = http.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=2),
                     headers={"X-Client-Request-Id": "client-42"})  # fmt: skip
    assert mine.headers["x-request-id"] == "client-42"
    error = http.post(f"{base}/v1/chat/completions", content=b"{", headers={"X-Client-Request-Id": "client-43"})
    assert error.status_code == 400 and error.headers["x-request-id"] == "client-43"


def test_the_same_idempotency_key_and_body_return_the_stored_answer(serve, http):
    base, state = serve(delay=0.0)
    engine = state.host.engine
    body = chat_body(temperature=1.0, max_tokens=6)  # sampled: a second generation would differ
    first = http.post(f"{base}/v1/chat/completions", json=body, headers={"Idempotency-Key": "k1"})
    again = http.post(f"{base}/v1/chat/completions", json=body, headers={"Idempotency-Key": "k1"})
    assert first.status_code == again.status_code == 200 and again.content == first.content
    assert again.headers["x-idempotent-replay"] == "true" and len(engine.streams) == 1
    other = http.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=3), headers={"Idempotency-Key": "k1"})
    assert other.status_code == 400 and other.json()["error"]["code"] == "idempotency_key_reused"
    stream = chat_body(max_tokens=4, stream=True)
    streamed = http.post(f"{base}/v1/chat/completions", json=stream, headers={"Idempotency-Key": "k2"}).text
    replayed = http.post(f"{base}/v1/chat/completions", json=stream, headers={"Idempotency-Key": "k2"}).text
    assert replayed == streamed and streamed.endswith("data: [DONE]\n\n") and len(engine.streams) == 2


def test_the_same_body_spelled_with_other_spacing_and_key_order_is_the_same_request(serve, http):
    base, state = serve(delay=0.0)
    body = chat_body(temperature=1.0, max_tokens=6)
    compact = json.dumps(body, separators=(",", ":")).encode()
    spread = json.dumps(dict(reversed(body.items())), indent=2).encode()
    headers = {"Idempotency-Key": "k1", "Content-Type": "application/json"}
    first = http.post(f"{base}/v1/chat/completions", content=compact, headers=headers)
    again = http.post(f"{base}/v1/chat/completions", content=spread, headers=headers)
    assert first.status_code == again.status_code == 200 and again.content == first.content
    assert again.headers["x-idempotent-replay"] == "true" and len(state.host.engine.streams) == 1


def test_a_client_that_disconnects_cancels_its_generation_within_a_step_or_two(serve):
    base, state = serve(delay=0.05)
    body = chat_body(max_tokens=500, ignore_eos=True, stream=True)
    with httpx.Client(timeout=30) as client, client.stream("POST", f"{base}/v1/chat/completions", json=body) as reply:
        lines = reply.iter_lines()
        tokens = 0
        while tokens < 3:
            tokens += '"content":' in next(lines) and 1
        gone = time.perf_counter()
    stream = state.host.engine.streams[0]
    wait_until(lambda: stream.finish_reason == "cancelled" and state.host.engine.active == 0)
    after = [t for t in state.host.engine.step_times if t > gone]  # decode steps begun once the client went
    assert len(after) <= 2 and stream.steps < 10


def test_a_disconnected_streams_log_line_has_its_tokens_and_finish_reason(serve, caplog):
    base, _ = serve(delay=0.05)
    body = chat_body(max_tokens=500, ignore_eos=True, stream=True)
    headers = {"X-Client-Request-Id": "gone-1"}
    with caplog.at_level(logging.INFO, logger="jupyter_chatflow.server"):
        with httpx.Client(timeout=30) as client, client.stream("POST", f"{base}/v1/chat/completions", json=body,
                                                                headers=headers) as reply:  # fmt: skip
            lines = reply.iter_lines()
            tokens = 0
            while tokens < 3:
                tokens += '"content":' in next(lines) and 1
        wait_until(lambda: any("gone-1" in r.getMessage() for r in caplog.records))
    [line] = [json.loads(r.getMessage()) for r in caplog.records if "gone-1" in r.getMessage()]
    assert line["status"] == 200 and line["finish_reason"] == "cancelled" and line["stream"] is True
    assert 3 <= line["completion_tokens"] < 20 and line["prompt_tokens"] > 0


def test_a_queued_client_that_goes_leaves_the_queue_at_once(serve, http):
    base, state = serve(delay=0.05, max_batch=1)
    engine = state.host.engine
    blocker = threading.Thread(target=http.post, args=(f"{base}/v1/chat/completions",),
                               kwargs={"json": chat_body(max_tokens=60, ignore_eos=True)})  # fmt: skip
    blocker.start()
    wait_until(lambda: engine.active == 1)
    with httpx.Client(timeout=0.3) as client, contextlib.suppress(httpx.ReadTimeout):
        client.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=5))
    wait_until(lambda: engine.queued == 0, timeout=2)  # gone within a few steps, while the first still decodes
    assert engine.active == 1
    blocker.join()


def test_a_whole_answer_is_cancelled_when_its_client_goes(serve):
    base, state = serve(delay=0.05)
    with httpx.Client(timeout=0.4) as client, contextlib.suppress(httpx.ReadTimeout):
        client.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=500, ignore_eos=True))
    stream = state.host.engine.streams[0]
    wait_until(lambda: stream.finish_reason == "cancelled")
    assert stream.steps < 20


def test_a_queued_stream_gets_keepalive_comments(serve, http):
    base, state = serve(ServerConfig(keepalive_s=0.05), delay=0.05, max_batch=1)
    blocker = threading.Thread(target=http.post, args=(f"{base}/v1/chat/completions",),
                               kwargs={"json": chat_body(max_tokens=12, ignore_eos=True)})  # fmt: skip
    blocker.start()
    wait_until(lambda: state.host.engine.active == 1)
    text = http.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=2, stream=True)).text
    blocker.join()
    before_data = text[: text.index("data:")]
    assert before_data.count(": ping") >= 3  # comments, ignored by SSE clients, while it waited its turn


def test_one_json_log_line_per_request_without_the_prompt_or_the_key(serve, http, caplog):
    key = "sk-secret-key"
    base, _ = serve(ServerConfig(api_keys=(key,)))
    with caplog.at_level(logging.INFO, logger="jupyter_chatflow.server"):
        http.post(f"{base}/v1/chat/completions", json=chat_body("my secret prompt", max_tokens=3),
                  headers={"Authorization": f"Bearer {key}", "X-Client-Request-Id": "r1"})  # fmt: skip
        http.post(f"{base}/v1/chat/completions", json=chat_body(), headers={"Authorization": "Bearer nope"})
        wait_until(lambda: len(caplog.records) >= 2)
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "jupyter_chatflow.server"]
    assert len(lines) == 2
    ok, refused = lines
    assert ok["request_id"] == "r1" and ok["status"] == 200 and ok["key_id"] == key_id(key)
    assert ok["prompt_tokens"] > 0 and ok["completion_tokens"] > 0 and ok["finish_reason"] in ("stop", "length")
    assert {"queue_ms", "prefill_ms", "total_ms"} <= set(ok) and ok["model"] == "tiny"
    assert refused["status"] == 401 and refused["error"] == "invalid_api_key"
    text = caplog.text
    assert "secret prompt" not in text and key not in text and "nope" not in text


def test_metrics_count_requests_tokens_and_latencies(serve, http):
    base, _ = serve()
    http.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=4, ignore_eos=True))
    http.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=4, ignore_eos=True, stream=True))
    http.post(f"{base}/v1/chat/completions", json=chat_body(model="nope"))
    # (the loop frees a finished row right after handing out its last step: a client can read [DONE] first)
    wait_until(lambda: 'status="404"' in (t := http.get(f"{base}/metrics").text) and "active_slots 0.0" in t)
    text = http.get(f"{base}/metrics").text
    assert 'chatflow_requests_total{route="/v1/chat/completions",status="200"} 2.0' in text
    assert 'chatflow_requests_total{route="/v1/chat/completions",status="404"} 1.0' in text
    assert 'chatflow_tokens_total{kind="completion"} 8.0' in text
    assert "chatflow_time_to_first_token_seconds_count 2.0" in text
    assert "chatflow_inter_token_latency_seconds_count 6.0" in text
    assert "chatflow_queue_depth 0.0" in text and "chatflow_active_slots 0.0" in text
