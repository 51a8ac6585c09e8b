"""Hostile bodies: whatever a client sends, the server answers 2xx or a 4xx in OpenAI's error shape, never a 500,
and keeps serving."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import chat_body

ROUTES = ("/v1/chat/completions", "/tokenize", "/v1/chatflow/conversation")
DEEP_OBJECT = b'{"a":' * 10_000 + b"1" + b"}" * 10_000
DEEP_LIST = b"[" * 10_000 + b"]" * 10_000


def raw(http, url: str, body: bytes):
    return http.post(url, content=body, headers={"content-type": "application/json"})


def assert_openai_error(response, status: int = 400, param: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    if param is not None:
        assert error["param"] == param
    return error


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("body", [DEEP_OBJECT, DEEP_LIST], ids=["object", "list"])
def test_a_body_nested_10000_deep_is_a_400_on_every_route(serve, http, route, body):
    url, _ = serve()
    error = assert_openai_error(raw(http, url + route, body))
    assert "nested too deeply" in error["message"]
    assert http.post(url + "/v1/chat/completions", json=chat_body()).status_code == 200  # still serving


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/tokenize"])
def test_a_role_that_is_a_list_is_a_400_naming_it(serve, http, route):
    url, _ = serve()
    body = {"model": "tiny", "messages": [{"role": ["user"], "content": "hi"}]}
    error = assert_openai_error(http.post(url + route, json=body), param="messages[0].role")
    assert "['user'] (list)" in error["message"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (b'{"model": "tiny", "messages": [], "temperature": NaN}', "NaN is not a JSON number"),
        (b'{"model": "tiny", "messages": [], "temperature": 1e999}', "out of range"),
        (b'{"model": "tiny", "messages": [{"role": "user", "content": "\xff"}]}', "not valid JSON"),
    ],
)
def test_numbers_json_cannot_carry_and_bytes_that_are_not_utf8_are_400s(serve, http, text, words):
    url, _ = serve()
    assert words in assert_openai_error(raw(http, url + "/v1/chat/completions", text))["message"]


@pytest.mark.parametrize("route", ROUTES)
def test_a_lone_surrogate_is_refused_by_its_field_not_replaced(serve, http, route):
    """One decision for the server: "\\ud800" is not text, and no tokenizer can encode it; the 400 names the field."""
    url, _ = serve()
    body = b'{"model": "tiny", "messages": [{"role": "user", "content": "hi \\ud800 there"}]}'
    error = assert_openai_error(raw(http, url + route, body), param="messages[0].content")
    assert "lone UTF-16 surrogate" in error["message"]
    paired = b'{"model": "tiny", "messages": [{"role": "user", "content": "\\ud83d\\ude00"}], "max_tokens": 2}'
    assert raw(http, url + "/v1/chat/completions", paired).status_code == 200  # an escaped pair is a character


def test_minus_zero_duplicate_keys_and_nul_bytes_are_ordinary_json(serve, http):
    url, _ = serve()
    body = b'{"model": "tiny", "messages": [{"role": "user", "content": "a\\u0000b"}], "temperature": -0, ' \
           b'"max_tokens": 9, "max_tokens": 2}'  # fmt: skip
    response = raw(http, url + "/v1/chat/completions", body)
    assert response.status_code == 200 and response.json()["usage"]["completion_tokens"] <= 2  # the last key wins


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "system", "assistant", "tool", "developer", "x"]) | JSON},
    optional={"content": st.text(max_size=12) | JSON, "tool_call_id": JSON, "tool_calls": JSON},
)
OPTIONS = {
    "max_tokens": st.integers(-3, 5) | JSON,
    "temperature": st.floats(-1, 3, allow_nan=False) | JSON,
    "top_p": JSON,
    "top_k": JSON,
    "stop": JSON,
    "stream": st.booleans() | JSON,
    "logprobs": JSON,
    "top_logprobs": JSON,
    "seed": JSON,
    "tools": JSON,
    "tool_choice": JSON,
    "stream_options": JSON,
    "prompt": JSON,
}
# Mostly the right skeleton (the served model, a list of messages) with any values inside, so that a body gets
# past the first checks to every field's; and bodies of anything at all.
BODIES = st.fixed_dictionaries(
    {"model": st.just("tiny"), "messages": st.lists(MESSAGE | JSON, min_size=1, max_size=3)}, optional=OPTIONS
) | st.dictionaries(st.sampled_from(["model", "messages", *OPTIONS]), JSON, max_size=5)


@pytest.fixture(scope="module")
def shared_server(tiny_model):
    import contextlib

    from jupyter_chatflow.engine.scheduler import Scheduler
    from jupyter_chatflow.frontends.server import ModelHost, create_app

    from .conftest import running

    with contextlib.ExitStack() as stack:
        scheduler = stack.enter_context(Scheduler(tiny_model, max_batch=4))
        host = ModelHost.ready(tiny_model, name="tiny", make_engine=lambda _: scheduler)
        yield stack.enter_context(running(create_app(host)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=BODIES, route=st.sampled_from(ROUTES))
def test_every_generated_body_gets_a_2xx_or_a_4xx_in_openais_shape(shared_server, http, body, route):
    if "max_tokens" in body and isinstance(body["max_tokens"], int) and body["max_tokens"] > 0:
        body["max_tokens"] = min(body["max_tokens"], 4)  # (an answer that is allowed runs short)
    response = http.post(shared_server + route, content=json.dumps(body).encode())
    assert response.status_code < 500, (body, response.text)
    if response.status_code >= 400:
        error = response.json()["error"]
        assert error["type"] and error["message"], body
        assert error.get("param") is None or isinstance(error["param"], str)
    assert http.get(shared_server + "/health").status_code == 200
