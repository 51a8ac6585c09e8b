"""Tool calls through the clients users and agents route through (the official openai client, litellm,
langchain-openai) against `chatflow serve` on the default model, with tools written as users write them: a
`calculator` whose only parameter `expression` has no description, and one with a description (slow: SmolLM2-135M).

Issue 23's reproduction: a forced `calculator` call with an undescribed parameter ran its string to max_tokens
(`"17*23}}</tool_call>  # 17*23 = 422.222.222…`, 275 tokens) and came back with no call. The call must parse, the
client's arithmetic must be right, and a call max_tokens does cut must come back as OpenAI returns one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from jupyter_chatflow.frontends.server import ModelHost, create_app
from jupyter_chatflow.pipeline.tools import evaluate

from .conftest import running

MODEL = "SmolLM2-135M-Instruct.Q4_1"
QUESTION = [{"role": "user", "content": "What is 17*23?"}]
NAMED = {"type": "function", "function": {"name": "calculator"}}
DESCRIBED = "The arithmetic expression to evaluate, e.g. 2 * (3 + 4)."


def calculator(described: bool) -> dict:
    """The tool as a user writes it for the OpenAI API: no bounds, no pattern, a description or not."""
    expression = {"type": "string"} | ({"description": DESCRIBED} if described else {})
    parameters = {"type": "object", "properties": {"expression": expression}, "required": ["expression"]}
    function = {"name": "calculator", "description": "Evaluate an arithmetic expression.", "parameters": parameters}
    return {"type": "function", "function": function}


@pytest.fixture(scope="module")
def base(real_model) -> Iterator[str]:
    with running(create_app(ModelHost.ready(real_model))) as url:
        yield f"{url}/v1"


@pytest.fixture(scope="module")
def client(base) -> openai.OpenAI:
    return openai.OpenAI(base_url=base, api_key="unused", max_retries=0)


@pytest.mark.parametrize("described", [False, True])
def test_the_openai_client_gets_a_call_whose_arithmetic_is_right(client, described):
    knobs = {"model": MODEL, "messages": QUESTION, "tools": [calculator(described)], "tool_choice": NAMED,
             "temperature": 0}  # fmt: skip
    answer = client.chat.completions.create(**knobs)
    choice = answer.choices[0]
    [call] = choice.message.tool_calls
    expression = json.loads(call.function.arguments)["expression"]
    assert choice.finish_reason == "tool_calls" and call.function.name == "calculator"
    assert evaluate(expression) == 391, expression  # what the client computes when it runs the call
    assert answer.usage.completion_tokens < 40  # the call, not a 275-token runaway
    chunks = [c for c in client.chat.completions.create(**knobs, stream=True) if c.choices]
    streamed = [d.function for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
    assert [(f.name, f.arguments) for f in streamed] == [("calculator", call.function.arguments)]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


NOTE = {"type": "function", "function": {"name": "note", "description": "Write a note.", "parameters": {
    "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}  # fmt: skip
LEAST = 29  # the shortest whole calculator call here: the fixed 19 tokens, an empty string, the fixed end


def test_a_call_max_tokens_cuts_comes_back_partial_with_finish_reason_length(client):
    """Inside its value (a note, which the model writes at length), or inside its fixed end: the arguments written,
    never the call's closing markup (at 26-32 tokens they held `17*23}}</tool_call`), finish_reason "length"."""
    knobs = {"model": MODEL, "messages": [{"role": "user", "content": "Write a note about the sea."}],
             "tools": [NOTE], "tool_choice": {"type": "function", "function": {"name": "note"}}, "temperature": 0,
             "max_tokens": 30}  # fmt: skip
    answer = client.chat.completions.create(**knobs)
    choice = answer.choices[0]
    [call] = choice.message.tool_calls
    assert choice.finish_reason == "length" and answer.usage.completion_tokens == 30
    assert call.function.name == "note" and call.function.arguments.startswith('{"text": "')
    with pytest.raises(json.JSONDecodeError):  # unfinished, as OpenAI's are: the client sees it was cut
        json.loads(call.function.arguments)
    chunks = [c for c in client.chat.completions.create(**knobs, stream=True) if c.choices]
    streamed = [d.function.arguments for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
    assert streamed == [call.function.arguments] and chunks[-1].choices[0].finish_reason == "length"
    for max_tokens in range(LEAST, LEAST + 4):  # the calculator's call ends inside its fixed end here
        knobs = {"model": MODEL, "messages": QUESTION, "tools": [calculator(False)], "tool_choice": NAMED,
                 "temperature": 0, "max_tokens": max_tokens}  # fmt: skip
        choice = client.chat.completions.create(**knobs).choices[0]
        written = choice.message.tool_calls[0].function.arguments if choice.message.tool_calls else ""
        assert "tool_call" not in written and "}}" not in written, (max_tokens, written)
    too_few = client.chat.completions.with_raw_response.create
    with pytest.raises(openai.BadRequestError, match=f"Give max_tokens {LEAST} or more"):
        too_few(**{**knobs, "max_tokens": LEAST - 1})


@pytest.mark.parametrize("described", [False, True])
def test_litellm_gets_the_call(base, described, monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # (no network: litellm reads its bundled copy)
    litellm = pytest.importorskip("litellm")
    answer = litellm.completion(model=f"openai/{MODEL}", api_base=base, api_key="unused", messages=QUESTION,
                                tools=[calculator(described)], tool_choice=NAMED, temperature=0)  # fmt: skip
    choice = answer.choices[0]
    [call] = choice.message.tool_calls
    assert choice.finish_reason == "tool_calls" and call.function.name == "calculator"
    assert evaluate(json.loads(call.function.arguments)["expression"]) == 391


def _langchain_tools():
    """langchain's `@tool` as users write it: the parameter bare, or described in the docstring's Args."""
    tools = pytest.importorskip("langchain_core.tools")

    @tools.tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        return str(evaluate(expression))

    @tools.tool("calculator", parse_docstring=True)
    def described(expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: The arithmetic expression to evaluate, e.g. 2 * (3 + 4).
        """
        return str(evaluate(expression))

    return calculator, described


@pytest.mark.parametrize("which", [0, 1])
def test_langchain_bind_tools_gets_the_call_and_runs_it(base, which):
    chat_openai = pytest.importorskip("langchain_openai")
    tool = _langchain_tools()[which]
    assert ("description" in json.dumps(tool.args_schema.model_json_schema()["properties"])) is bool(which)
    llm = chat_openai.ChatOpenAI(model=MODEL, base_url=base, api_key="unused", temperature=0, max_retries=0)
    message = llm.bind_tools([tool], tool_choice="calculator").invoke("What is 17*23?")
    [call] = message.tool_calls  # (it was [] with no error before: the call had run away and been dropped)
    assert call["name"] == "calculator" and tool.invoke(call["args"]) == "391"


def test_langchain_sees_a_cut_call_as_an_invalid_call_with_what_was_written(base):
    chat_openai = pytest.importorskip("langchain_openai")
    llm = chat_openai.ChatOpenAI(model=MODEL, base_url=base, api_key="unused", temperature=0, max_retries=0,
                                 max_tokens=30)  # fmt: skip
    message = llm.bind_tools([NOTE], tool_choice="note").invoke("Write a note about the sea.")
    [invalid] = message.invalid_tool_calls
    assert message.tool_calls == [] and message.response_metadata["finish_reason"] == "length"
    assert invalid["name"] == "note" and invalid["args"].startswith('{"text": "')
