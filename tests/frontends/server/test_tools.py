"""tools / tool_choice: the call decoded under the JSON-schema mask, handed to the client as OpenAI's tool_calls."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from jupyter_chatflow.frontends.server.requests import parse_messages
from jupyter_chatflow.frontends.server.tools import Tools, parse_tools, prompt_messages

from .conftest import chat_body, wait_until

ADD = {"type": "function", "function": {"name": "add", "description": "Add two whole numbers.",
       "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                      "required": ["a", "b"], "additionalProperties": False}}}  # fmt: skip
SHOUT = {"type": "function", "function": {"name": "shout", "description": "Say a word loudly.",
         "parameters": {"type": "object", "properties": {"word": {"type": "string", "enum": ["hi", "bye"]}},
                        "required": ["word"], "additionalProperties": False}}}  # fmt: skip
PROMPT = [{"role": "user", "content": "What is 2 + 3?"}]


@pytest.fixture
def client(serve, wide_model):
    base, _ = serve(model=wide_model)
    return openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)


def test_required_gives_a_valid_call_of_an_offered_tool(client):
    answer = client.chat.completions.create(model="tiny", messages=PROMPT, tools=[ADD, SHOUT],
                                            tool_choice="required", temperature=0)  # fmt: skip
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls
    arguments = json.loads(call.function.arguments)
    assert call.type == "function" and call.id.startswith("call_") and call.function.name in ("add", "shout")
    if call.function.name == "add":
        assert set(arguments) == {"a", "b"} and all(isinstance(v, int) for v in arguments.values())
    else:
        assert arguments["word"] in ("hi", "bye")
    assert answer.usage.completion_tokens > 5  # the forced `<tool_call>\n{"name": …` counts


NOTE = {"type": "function", "function": {"name": "note", "description": "Write a note.", "parameters": {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}  # fmt: skip


LEAST_NOTE = 68  # the tiny byte-level vocabulary spells the shortest whole `note` call in 68 tokens


@pytest.mark.parametrize("max_tokens", [3, 30, LEAST_NOTE - 1])
def test_a_forced_call_max_tokens_cannot_hold_is_a_400_naming_the_least_that_works(serve, http, wide_model, max_tokens):
    """`<tool_call>\n{"name": "note", "arguments": {"text": "` alone is 52 tokens here: below the shortest whole call
    the answer would end before the model chose anything (it used to vanish, or come back as the name with
    arguments ""). The client learns the least that works, before anything is generated."""
    base, _ = serve(model=wide_model)
    body = chat_body(PROMPT[0]["content"], tools=[NOTE], tool_choice="required", max_tokens=max_tokens)
    response = http.post(f"{base}/v1/chat/completions", json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "max_tokens" and f"is {LEAST_NOTE} tokens" in error["message"]
    assert f"Give max_tokens {LEAST_NOTE} or more" in error["message"]
    auto = http.post(f"{base}/v1/chat/completions", json={**body, "tool_choice": "auto"})
    assert auto.status_code == 200  # unforced, the model may answer in text: any budget is fine


@pytest.mark.parametrize("stream", [False, True])
def test_a_call_max_tokens_cuts_comes_back_as_written_with_finish_reason_length(client, stream):
    """An unbounded string argument the tiny model never closes: max_tokens ends the call inside the string. As
    OpenAI returns a cut call: the name and the arguments written so far, finish_reason "length"."""
    knobs = {"model": "tiny", "messages": PROMPT, "tools": [NOTE], "tool_choice": "required", "temperature": 0,
             "max_tokens": LEAST_NOTE + 12}  # fmt: skip
    answer = client.chat.completions.create(**knobs)
    choice = answer.choices[0]
    assert choice.finish_reason == "length" and answer.usage.completion_tokens == LEAST_NOTE + 12
    [call] = choice.message.tool_calls
    written = call.function.arguments
    assert call.function.name == "note" and call.id.startswith("call_")
    assert written.startswith('{"text": "') and not written.endswith("}") and "tool_call" not in written
    if stream:
        chunks = [c for c in client.chat.completions.create(**knobs, stream=True) if c.choices]
        deltas = [call for c in chunks for call in (c.choices[0].delta.tool_calls or [])]
        assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == ["length"]
        [streamed] = deltas
        assert (streamed.function.name, streamed.function.arguments) == ("note", written)  # greedy: the same call


def test_a_calls_tokens_have_no_logprobs_as_they_are_not_content(client):
    knobs = {"model": "tiny", "messages": PROMPT, "tools": [SHOUT], "tool_choice": "required", "temperature": 0,
             "logprobs": True}  # fmt: skip
    whole = client.chat.completions.create(**knobs).choices[0]
    assert whole.message.content is None and whole.message.tool_calls and whole.logprobs.content == []
    chunks = [c for c in client.chat.completions.create(**knobs, stream=True) if c.choices]
    assert all(c.choices[0].logprobs is None for c in chunks) and chunks[-1].choices[0].finish_reason == "tool_calls"


def test_a_named_tool_is_the_one_called_and_streams_as_a_tool_call_delta(client):
    chunks = list(client.chat.completions.create(
        model="tiny", messages=PROMPT, tools=[ADD, SHOUT], stream=True, temperature=0,
        tool_choice={"type": "function", "function": {"name": "shout"}},
    ))  # fmt: skip
    calls = [c for chunk in chunks if chunk.choices for c in (chunk.choices[0].delta.tool_calls or [])]
    assert [c.function.name for c in calls] == ["shout"]
    assert json.loads(calls[0].function.arguments)["word"] in ("hi", "bye")
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices) == ""
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "tool_calls"


def test_auto_and_none_answer_in_text_with_the_tools_in_the_prompt_or_not(client):
    def ask(choice: str):
        return client.chat.completions.create(model="tiny", messages=PROMPT, tools=[ADD], tool_choice=choice,
                                              temperature=0, max_tokens=6)  # fmt: skip

    auto, none = ask("auto"), ask("none")
    plain = client.chat.completions.create(model="tiny", messages=PROMPT, temperature=0, max_tokens=6)
    assert auto.usage.prompt_tokens > none.usage.prompt_tokens == plain.usage.prompt_tokens
    assert none.choices[0].message.content == plain.choices[0].message.content
    assert auto.choices[0].finish_reason in ("stop", "length") and auto.choices[0].message.tool_calls is None


def test_a_call_and_its_result_go_back_in_the_models_format(wide_model):
    messages = parse_messages([
        {"role": "system", "content": "Be brief."},
        *PROMPT,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "5"},
    ])  # fmt: skip
    tools = parse_tools({"tools": [ADD]})
    assert isinstance(tools, Tools) and tools.choice == "auto"
    out = prompt_messages(messages, tools, wide_model.tokenizer)
    assert (
        out[0]["role"] == "system"
        and out[0]["content"].startswith("Be brief.")
        and '"name": "add"' in out[0]["content"]
    )
    assert out[2] == {
        "role": "assistant",
        "content": '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>',
    }
    assert out[3]["content"].endswith("5") or '"content": "5"' in out[3]["content"]


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"tools": [ADD], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        ({"tools": [{"type": "function"}]}, "tools[0]"),
        ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tools[0].function"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"messages": [{"role": "tool", "tool_call_id": "x", "content": "5"}]}, "messages[0].tool_call_id"),
        (
            {
                "messages": [
                    {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "add", "arguments": "[1]"}}]}
                ]
            },
            "messages[0].tool_calls[0].function",
        ),
    ],
)
def test_bad_tools_are_a_400_naming_the_field(serve, http, wide_model, fields, param):
    base, _ = serve(model=wide_model)
    response = http.post(f"{base}/v1/chat/completions", json=chat_body(**fields))
    assert response.status_code == 400 and response.json()["error"]["param"] == param


def _nested(depth: int) -> dict:
    schema: dict = {"type": "object", "properties": {"leaf": {"type": "string"}}, "required": ["leaf"]}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"x": schema}, "required": ["x"]}
    return schema


def _with(properties, required=("a",), **more) -> dict:
    return {"type": "object", "properties": properties, "required": list(required), **more}


BAD_SCHEMAS = {
    "a string": "not a schema",
    "a list": [{"type": "object"}],
    "a number": 7,
    "type foo": _with({"a": {"type": "foo"}}),
    "properties as a list": {"type": "object", "properties": [{"a": {"type": "string"}}]},
    "a $ref to nothing": _with({"a": {"$ref": "#/$defs/missing"}}),
    "an empty enum, required": _with({"a": {"enum": []}}),
    "a required $ref to itself": _with({"a": {"$ref": "#/properties/a"}}),
    "100 nested objects": _nested(100),
    "400 nested objects": _nested(400),
}


REF_SCHEMAS = {
    "pydantic's $defs": _with(
        {"a": {"$ref": "#/$defs/Point"}}, **{"$defs": {"Point": _with({"x": {"type": "integer"}}, required=("x",))}}
    ),
    "a tree ($ref to the root)": _with({"a": {"type": "string"}, "child": {"$ref": "#"}}),
}


@pytest.mark.parametrize("schema", list(REF_SCHEMAS.values()), ids=list(REF_SCHEMAS))
def test_a_tool_schema_with_local_refs_is_decoded_where_its_refs_point(serve, http, wide_model, schema):
    """A tool's parameters sit inside the call's schema (as its `arguments`): "#/$defs/…" used to point at the
    call's root, so a pydantic model's schema could not be called at all (500, then "Pointer does not exist")."""
    import jsonschema

    base, _ = serve(model=wide_model)
    tools = [{"type": "function", "function": {"name": name, "parameters": schema}} for name in ("f", "g")]
    for offered in (tools[:1], tools):  # one tool, and the anyOf of two
        body = chat_body(tools=offered, tool_choice="required", max_tokens=300)
        answer = http.post(f"{base}/v1/chat/completions", json=body).json()
        choice = answer["choices"][0]
        assert choice["finish_reason"] in ("tool_calls", "length"), answer
        if choice["finish_reason"] == "tool_calls":
            [call] = choice["message"]["tool_calls"]
            jsonschema.validate(json.loads(call["function"]["arguments"]), schema)


@pytest.mark.parametrize("choice", ["required", "auto"])
@pytest.mark.parametrize("schema", list(BAD_SCHEMAS.values()), ids=list(BAD_SCHEMAS))
def test_a_tool_schema_no_call_can_be_written_under_is_a_400_saying_why_before_anything_is_generated(
    serve, http, wide_model, schema, choice
):
    """These reached a 500 (`AttributeError` in Tool, or "The generation failed: ToolError." once the prompt was
    filled); the same schemas as response_format were already 400s."""
    base, _ = serve(model=wide_model)
    tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
    for stream in (False, True):
        body = chat_body(tools=[tool], tool_choice=choice, max_tokens=200, stream=stream)
        response = http.post(f"{base}/v1/chat/completions", json=body)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["param"].startswith("tools[0].function") and len(error["message"]) > 40, error


def test_tokenize_counts_the_prompt_a_completion_with_tools_makes(serve, http, wide_model):
    base, _ = serve(model=wide_model)
    body = chat_body(PROMPT[0]["content"], tools=[ADD], max_tokens=2)
    answer = http.post(f"{base}/v1/chat/completions", json=body).json()
    counted = http.post(f"{base}/tokenize", json={"messages": body["messages"], "tools": [ADD]}).json()
    assert counted["count"] == answer["usage"]["prompt_tokens"] > 300


def test_a_client_that_disconnects_mid_call_cancels_it(serve, wide_model):
    base, state = serve(model=wide_model, delay=0.05)
    note = {"type": "function", "function": {"name": "note", "parameters": {"type": "object", "properties": {
        "text": {"type": "string", "minLength": 100, "maxLength": 200}}, "required": ["text"]}}}  # fmt: skip
    body = chat_body(PROMPT[0]["content"], tools=[note], tool_choice="required", stream=True,
                     max_tokens=300)  # fmt: skip
    engine = state.host.engine
    with httpx.Client(timeout=30) as client, client.stream("POST", f"{base}/v1/chat/completions", json=body):
        wait_until(lambda: engine.streams and engine.streams[0].steps >= 1)  # the first step of the call came out
    [stream] = engine.streams
    wait_until(lambda: stream.finish_reason == "cancelled" and engine.active == 0 and engine.queued == 0)
    assert stream.steps < 20  # of the 100 characters or more the call's text must have
