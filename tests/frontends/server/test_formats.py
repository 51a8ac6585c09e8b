"""response_format: the answer is JSON valid for the schema, decoded under its token mask."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from .conftest import chat_body

SCHEMA = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]},
          "digit": {"type": "integer", "minimum": 0, "maximum": 9}},
          "required": ["answer", "digit"], "additionalProperties": False}  # fmt: skip
FORMAT = {"type": "json_schema", "json_schema": {"name": "reply", "schema": SCHEMA, "strict": True}}
PROMPT = [{"role": "user", "content": "Is 7 odd?"}]


@pytest.fixture
def client(serve):
    base, _ = serve()
    return openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_answer_is_json_valid_for_the_schema(client, seed):
    answer = client.chat.completions.create(model="tiny", messages=PROMPT, response_format=FORMAT, seed=seed,
                                            temperature=1.0, max_tokens=64)  # fmt: skip
    value = json.loads(answer.choices[0].message.content)
    jsonschema.validate(value, SCHEMA)
    assert answer.choices[0].finish_reason == "stop"


def test_a_streamed_json_answer_is_the_same(client):
    whole = client.chat.completions.create(model="tiny", messages=PROMPT, response_format=FORMAT, temperature=0,
                                           max_tokens=64)  # fmt: skip
    chunks = client.chat.completions.create(model="tiny", messages=PROMPT, response_format=FORMAT, temperature=0,
                                            max_tokens=64, stream=True)  # fmt: skip
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content and json.loads(text)["answer"] in ("yes", "no")


@pytest.mark.parametrize(
    ("response_format", "extra", "param"),
    [
        ({"type": "xml"}, {}, "response_format.type"),
        ({"type": "json_schema", "json_schema": {"name": "x"}}, {}, "response_format.json_schema.schema"),
        (
            {"type": "json_schema", "json_schema": {"schema": {"type": "bogus"}}},
            {},
            "response_format.json_schema.schema",
        ),
        (FORMAT, {"tools": [{"type": "function", "function": {"name": "f"}}]}, "response_format"),
    ],
)
def test_a_bad_response_format_is_a_400(serve, http, response_format, extra, param):
    base, _ = serve()
    response = http.post(f"{base}/v1/chat/completions", json=chat_body(response_format=response_format, **extra))
    assert response.status_code == 400 and response.json()["error"]["param"] == param


@pytest.mark.parametrize("response_format", [{"type": "json_object"}, FORMAT])
def test_either_json_mode_with_tools_is_the_same_400(serve, http, response_format):
    base, _ = serve()
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    response = http.post(f"{base}/v1/chat/completions", json=chat_body(response_format=response_format, tools=tools))
    assert response.status_code == 400
    assert response.json()["error"] == {
        "message": "response_format and tools cannot be used together on this server yet.",
        "type": "invalid_request_error", "param": "response_format", "code": None,
    }  # fmt: skip
