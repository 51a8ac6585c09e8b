"""Hostile bodies: whatever a client sends, the server answers 2xx or a 4xx in OpenAI's error shape, never a 500,
and keeps serving."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

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
# JSON schemas of every shape, well-formed or not: the keywords a tool's parameters use, with values that are right,
# wrong, self-referencing, unsatisfiable or deep
SCHEMA_TYPES = st.sampled_from(["object", "string", "integer", "number", "boolean", "array", "null", "foo"])
SCHEMA = st.recursive(
    st.fixed_dictionaries(
        {},
        optional={
            "type": SCHEMA_TYPES | JSON,
            "enum": st.lists(JSON, max_size=2) | JSON,
            "$ref": st.sampled_from(["#", "#/properties/a", "#/$defs/x", "#/nope"]) | JSON,
            "pattern": st.sampled_from(["^a+$", "[", "^[0-9]{2}$"]) | JSON,
            "minLength": st.integers(-1, 3) | JSON,
            "const": JSON,
        },
    ),
    lambda inner: st.fixed_dictionaries(
        {"type": st.just("object") | SCHEMA_TYPES},
        optional={
            "properties": st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2) | JSON,
            "required": st.lists(st.sampled_from(["a", "b", "c"]), max_size=2) | JSON,
            "items": inner,
            "anyOf": st.lists(inner, max_size=2),
            "$defs": st.fixed_dictionaries({"x": inner}),
            "additionalProperties": st.booleans() | inner,
        },
    ),
    max_leaves=8,
)
HOSTILE_TOOL = st.fixed_dictionaries(
    {"type": st.just("function") | JSON,
     "function": st.fixed_dictionaries({"name": st.sampled_from(["f", "bad name"]) | JSON},
                                       optional={"description": JSON, "parameters": SCHEMA | JSON})},
)  # fmt: skip
# most tools are well-formed around their schema, so that the schema is what each body tests
GOOD_TOOL = st.fixed_dictionaries(
    {"type": st.just("function"),
     "function": st.fixed_dictionaries({"name": st.sampled_from(["f", "g"])},
                                       optional={"description": st.text(max_size=8), "parameters": SCHEMA})},
)  # fmt: skip
TOOL = GOOD_TOOL | HOSTILE_TOOL
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
    "tools": st.lists(TOOL, max_size=2) | JSON,
    "tool_choice": JSON,
    "stream_options": JSON,
    "prompt": JSON,
}
# Mostly the right skeleton (the served model, a list of messages) with any values inside, so that a body gets
# past the first checks to every field's; and bodies of anything at all.
BODIES = st.fixed_dictionaries(
    {"model": st.just("tiny"), "messages": st.lists(MESSAGE | JSON, min_size=1, max_size=3)}, optional=OPTIONS
) | st.dictionaries(st.sampled_from(["model", "messages", *OPTIONS]), JSON, max_size=5)
# A good request around tools of every shape: each body gets past the skeleton's checks to the tools'.
CHOICE = st.sampled_from(["auto", "none", "required"]) | st.just({"type": "function", "function": {"name": "f"}}) | JSON
TOOL_BODIES = st.fixed_dictionaries(
    {"model": st.just("tiny"), "messages": st.just([{"role": "user", "content": "What is 2 + 3?"}]),
     "max_tokens": st.integers(1, 4) | st.sampled_from([60, 120]), "tools": st.lists(TOOL, min_size=1, max_size=2)},
    optional={"tool_choice": CHOICE, "stream": st.booleans()},
)  # fmt: skip
# The conversation route's body: a message and Chat.send's keywords (tools are named from the server's toolbox).
CONVERSATION = st.fixed_dictionaries(
    {"message": st.text("ab 7*", min_size=1, max_size=12).filter(str.strip) | JSON},
    optional={"options": st.fixed_dictionaries({}, optional={
        "tools": st.sampled_from(["calculator", "nope", "python", "variable", "remember", "default", "none"])
                 | st.lists(st.sampled_from(["calculator", "nope", "python"]), max_size=2) | JSON,
        "tool_choice": st.sampled_from(["auto", "none", "required", "calculator", "nope"]) | JSON,
        "max_tokens": st.integers(-1, 4) | JSON, "temperature": st.floats(0, 2) | JSON, "system": st.text(max_size=8),
        "safety": st.sampled_from(["off", "input", "all", "x"]), "memory": st.just(False) | JSON,
        "trim": st.sampled_from(["drop", "x"]), "max_tool_rounds": st.integers(0, 3) | JSON}),
        "conversation_id": st.just("nope") | JSON},
)  # fmt: skip


@contextlib.contextmanager
def _serving(model) -> Iterator[str]:
    """A live server on `model` (the engine `chatflow serve` runs), for a module's generated bodies."""
    from jupyter_chatflow.engine.scheduler import Scheduler
    from jupyter_chatflow.frontends.server import ModelHost, create_app

    from .conftest import running

    with contextlib.ExitStack() as stack:
        scheduler = stack.enter_context(Scheduler(model, max_batch=4))
        host = ModelHost.ready(model, name="tiny", make_engine=lambda _: scheduler)
        yield stack.enter_context(running(create_app(host)))


def assert_answered(http, base: str, route: str, body) -> None:
    """2xx, or a 4xx in OpenAI's error shape (a message, a type, a param that is a field's name or null), never a
    500; and the server goes on."""
    response = http.post(base + route, content=json.dumps(body).encode())
    assert response.status_code < 500, (body, response.text)
    if response.status_code >= 400:
        error = response.json()["error"]
        assert error["type"] and error["message"], body
        assert error.get("param") is None or isinstance(error["param"], str)
    assert http.get(base + "/health").status_code == 200


@pytest.fixture(scope="module")
def shared_server(tiny_model):
    with _serving(tiny_model) as base:
        yield base


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=BODIES, route=st.sampled_from(ROUTES))
def test_every_generated_body_gets_a_2xx_or_a_4xx_in_openais_shape(shared_server, http, body, route):
    if "max_tokens" in body and isinstance(body["max_tokens"], int) and body["max_tokens"] > 0:
        body["max_tokens"] = min(body["max_tokens"], 4)  # (an answer that is allowed runs short)
    assert_answered(http, shared_server, route, body)


@pytest.fixture(scope="module")
def wide_server(wide_model):
    """The shared server on the tiny model with a 2,048-token window: room in the prompt for two tools."""
    with _serving(wide_model) as base:
        yield base


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=TOOL_BODIES, route=st.sampled_from(["/v1/chat/completions", "/tokenize"]))
def test_every_generated_tool_definition_gets_a_2xx_or_a_4xx(wide_server, http, body, route):
    assert_answered(http, wide_server, route, body)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=CONVERSATION)
def test_every_generated_conversation_body_gets_a_2xx_or_a_4xx(shared_server, http, body):
    options = body.get("options")
    if isinstance(options, dict) and not (isinstance(options.get("max_tokens"), int) and options["max_tokens"] < 5):
        options["max_tokens"] = 3  # (a turn that is allowed runs short)
    assert_answered(http, shared_server, "/v1/chatflow/conversation", body)
