"""The default model behind `chatflow serve`, asked through the openai client (slow: loads SmolLM2-135M)."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from jupyter_chatflow.frontends.server import ModelHost, create_app

from .conftest import running


@pytest.mark.slow
def test_the_openai_client_gets_a_sensible_greedy_answer(real_model):
    host = ModelHost.ready(real_model)
    with running(create_app(host)) as base:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
        model = client.models.list().data[0].id
        question = [{"role": "user", "content": "What is the capital of France?"}]
        answer = client.chat.completions.create(model=model, messages=question, temperature=0, max_tokens=32)
        streamed = client.chat.completions.create(model=model, messages=question, temperature=0, max_tokens=32,
                                                  stream=True)  # fmt: skip
        text = "".join(chunk.choices[0].delta.content or "" for chunk in streamed)
    assert model == "SmolLM2-135M-Instruct.Q4_1"
    assert "Paris" in answer.choices[0].message.content and answer.choices[0].finish_reason == "stop"
    assert text == answer.choices[0].message.content


@pytest.mark.slow
def test_the_server_pages_client_snippet_prints_what_it_says(real_model, capsys):
    """docs/server.md's first Python block (it was the README's), against a live server."""
    section = (Path(__file__).resolve().parents[3] / "docs" / "server.md").read_text(encoding="utf-8")
    snippet = section[section.index("```py\n") + 6 : section.index("\n```", section.index("```py\n"))]
    with running(create_app(ModelHost.ready(real_model))) as base:
        exec(snippet.replace("http://127.0.0.1:8000", base), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["The capital of France is Paris. 8", "The capital of France is Paris."]


EXPRESSION = "Evaluate an arithmetic expression."
CALCULATOR = {"type": "function", "function": {"name": "calculator", "description": EXPRESSION,
              "parameters": {"type": "object", "properties": {"expression": {"type": "string", "maxLength": 40,
                                                                           "pattern": "^[0-9+*/() .-]+$"}},
                             "required": ["expression"], "additionalProperties": False}}}  # fmt: skip


@pytest.mark.slow
def test_the_model_calls_the_calculator_when_required(real_model):
    """(Under "auto" SmolLM2-135M answers 17*23 itself, wrongly: "17 * 23 = 341".)"""
    with running(create_app(ModelHost.ready(real_model))) as base:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
        answer = client.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", messages=[{"role": "user", "content": "What is 17*23?"}],
            tools=[CALCULATOR], tool_choice="required", temperature=0,
        )  # fmt: skip
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls
    expression = json.loads(call.function.arguments)["expression"]
    assert call.function.name == "calculator" and "17" in expression and "23" in expression


@pytest.mark.slow
def test_a_json_schema_answer_holds_the_models_answer(real_model):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"],
              "additionalProperties": False}  # fmt: skip
    with running(create_app(ModelHost.ready(real_model))) as base:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
        question = [{"role": "user", "content": "What is the capital of France?"}]
        answer = client.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", messages=question,
            response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema}}, temperature=0,
        )  # fmt: skip
    assert json.loads(answer.choices[0].message.content) == {"city": "Paris"}
