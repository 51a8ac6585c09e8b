"""Every error over raw HTTP: OpenAI-shaped, the right status and headers, and the server serves on after each."""

from __future__ import annotations

import threading

import httpx
import pytest

from jupyter_chatflow.frontends.server import ServerConfig

from .conftest import chat_body, wait_until

KEY = "sk-test-123"


def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def still_serving(http: httpx.Client, base: str, headers: dict | None = None) -> None:
    answer = http.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=2), headers=headers or {})
    assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["role"] == "assistant"


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        (b"{not json", None, "not valid JSON"),
        (b"[1, 2]", None, "JSON object"),
        (chat_body(messages=[]), "messages", "non-empty list"),
        (chat_body(messages=[{"role": "wizard", "content": "x"}]), "messages[0].role", "wizard"),
        (chat_body(messages=[{"role": "user", "content": 5}]), "messages[0].content", "string"),
        (chat_body(temperature=-1), "temperature", "temperature must be"),
        (chat_body(temperature=2.5), "temperature", "from 0 to 2"),
        (chat_body(top_k=-2), "top_k", "-1 as vLLM spells it"),
        (chat_body(top_p=2), "top_p", "top_p"),
        (chat_body(max_tokens=0), "max_tokens", "max_tokens"),
        (chat_body(max_completion_tokens="5"), "max_completion_tokens", "max_completion_tokens"),
        (chat_body(seed=-3), "seed", "seed"),
        (chat_body(stop=["a", "b", "c", "d", "e"]), "stop", "up to 4"),
        (chat_body(stream="yes"), "stream", "true or false"),
        (chat_body(stream_options={"include_usage": True}), "stream_options", "stream is true"),
        (chat_body(top_logprobs=3), "top_logprobs", "logprobs"),
        (chat_body(logprobs=True, top_logprobs=50), "top_logprobs", "from 0 to 5"),
        (chat_body(n=2), "n", "n must be 1"),
        (chat_body(presence_penalty=0.5), "presence_penalty", "not supported"),
        ({"messages": [{"role": "user", "content": "Hi"}]}, "model", "model is required"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(serve, http, body, param, words):
    base, _ = serve()
    sent = {"content": body} if isinstance(body, bytes) else {"json": body}
    response = http.post(f"{base}/v1/chat/completions", **sent)
    error = error_of(response)
    assert response.status_code == 400 and error["type"] == "invalid_request_error"
    assert error["param"] == param and words in error["message"]
    still_serving(http, base)


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        (chat_body(temperature=2.5), "temperature", "temperature must be a number from 0 to 2 (0 is greedy); got 2.5."),
        (chat_body(temperature=-0.5), "temperature",
         "temperature must be a number from 0 to 2 (0 is greedy); got -0.5."),
        (chat_body(top_k=-2), "top_k",
         "top_k must be a whole number >= 0 (0, or -1 as vLLM spells it, is off); got -2."),
        (chat_body(max_tokens=512), "max_tokens",
         "max_tokens must be from 1 to 511 (the model's window is 512 tokens, shared by the prompt and the answer); "
         "got 512."),
        (chat_body(max_completion_tokens=10_000), "max_completion_tokens",
         "max_completion_tokens must be from 1 to 511 (the model's window is 512 tokens, shared by the prompt and the "
         "answer); got 10000."),
    ],
)  # fmt: skip
def test_a_knob_outside_openais_range_or_the_window_is_a_400_that_says_the_range(serve, http, body, param, message):
    base, _ = serve()
    response = http.post(f"{base}/v1/chat/completions", json=body)
    assert response.status_code == 400
    assert error_of(response) == {"message": message, "type": "invalid_request_error", "param": param, "code": None}


def test_tokenize_with_both_prompt_and_messages_is_a_400_that_says_to_give_one(serve, http):
    base, _ = serve()
    body = {"prompt": "Hi", "messages": [{"role": "user", "content": "Hi"}]}
    response = http.post(f"{base}/tokenize", json=body)
    assert response.status_code == 400 and error_of(response) == {
        "message": "Give prompt or messages, not both: prompt counts plain text, messages a chat through the chat "
        "template.", "type": "invalid_request_error", "param": "prompt", "code": None,
    }  # fmt: skip
    assert http.post(f"{base}/tokenize", json={"prompt": "Hi", "messages": None}).json()["count"] >= 1


def test_a_prompt_longer_than_the_window_is_a_400(serve, http, tiny_model):
    base, _ = serve()
    response = http.post(f"{base}/v1/chat/completions", json=chat_body("word " * tiny_model.config.context_length))
    assert response.status_code == 400 and error_of(response)["code"] == "context_length_exceeded"
    still_serving(http, base)


def test_an_unknown_model_is_a_404(serve, http):
    base, _ = serve()
    response = http.post(f"{base}/v1/chat/completions", json=chat_body(model="gpt-9"))
    error = error_of(response)
    assert response.status_code == 404 and error["code"] == "model_not_found" and "'tiny'" in error["message"]
    assert http.get(f"{base}/v2/nothing").status_code == 404
    still_serving(http, base)


def test_a_key_is_required_when_the_server_has_keys(serve, http):
    base, _ = serve(ServerConfig(api_keys=(KEY, "sk-other")))
    missing = http.post(f"{base}/v1/chat/completions", json=chat_body())
    wrong = http.post(f"{base}/v1/chat/completions", json=chat_body(), headers={"Authorization": "Bearer sk-no"})
    for response in (missing, wrong, http.get(f"{base}/v1/models")):
        assert response.status_code == 401 and error_of(response)["code"] == "invalid_api_key"
    assert "Authorization: Bearer" in error_of(missing)["message"]
    assert http.get(f"{base}/health").status_code == 200  # probes need no key
    still_serving(http, base, {"Authorization": f"Bearer {KEY}"})
    still_serving(http, base, {"Authorization": "Bearer sk-other"})


def test_a_body_over_the_limit_is_a_413(serve, http):
    base, _ = serve(ServerConfig(max_body_bytes=2000))
    big = chat_body("x" * 3000)
    declared = http.post(f"{base}/v1/chat/completions", json=big)
    chunked = http.post(f"{base}/v1/chat/completions", content=iter([b'{"model": "tiny", ', b" " * 3000, b"}"]))
    for response in (declared, chunked):
        assert response.status_code == 413 and error_of(response)["code"] == "request_too_large"
    still_serving(http, base)


def test_past_the_request_limit_is_a_429_with_retry_after_and_the_headers(serve, http):
    base, _ = serve(ServerConfig(rate_limit=2, token_limit=100_000))
    first = http.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=2))
    assert first.headers["x-ratelimit-limit-requests"] == "2" and first.headers["x-ratelimit-remaining-requests"] == "1"
    assert first.headers["x-ratelimit-limit-tokens"] == "100000"
    assert http.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=2)).status_code == 200
    over = http.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=2))
    error = error_of(over)
    assert over.status_code == 429 and error["code"] == "rate_limit_exceeded" and error["type"] == "requests"
    assert 1 <= int(over.headers["Retry-After"]) <= 60 and over.headers["x-ratelimit-remaining-requests"] == "0"
    assert over.headers["x-ratelimit-reset-requests"].endswith("s")
    assert int(over.headers["x-ratelimit-remaining-tokens"]) < 100_000  # the two answers' tokens were counted
    assert http.get(f"{base}/health").status_code == 200


def test_past_the_token_limit_is_a_429(serve, http):
    base, _ = serve(ServerConfig(token_limit=10))
    assert http.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=2)).status_code == 200  # > 10 tokens
    over = http.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=2))
    assert over.status_code == 429 and error_of(over)["type"] == "tokens"
    assert over.headers["x-ratelimit-remaining-tokens"] == "0" and "Retry-After" in over.headers


def test_a_full_queue_is_a_503(serve, http):
    base, state = serve(ServerConfig(max_queue=1), delay=0.05, max_batch=1)
    long = chat_body(max_tokens=200, ignore_eos=True)
    threads = [threading.Thread(target=http.post, args=(f"{base}/v1/chat/completions",), kwargs={"json": long})
               for _ in range(2)]  # fmt: skip
    engine = state.host.engine
    threads[0].start()
    wait_until(lambda: engine.active == 1)  # (one at a time: the second must not find the first still queued)
    threads[1].start()
    wait_until(lambda: engine.queued == 1)
    full = http.post(f"{base}/v1/chat/completions", json=chat_body())
    assert full.status_code == 503 and error_of(full)["code"] == "queue_full" and "Retry-After" in full.headers
    for stream in engine.streams:
        stream.cancel()
    for thread in threads:
        thread.join()
    still_serving(http, base)
