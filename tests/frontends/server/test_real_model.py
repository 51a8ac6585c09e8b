"""The default model behind `chatflow serve`, asked through the openai client (slow: loads SmolLM2-135M)."""

from __future__ import annotations

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
def test_the_readmes_client_snippet_prints_what_it_says(real_model, capsys):
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### `chatflow serve`") :]
    snippet = section[section.index("```py\n") + 6 : section.index("\n```", section.index("```py\n"))]
    with running(create_app(ModelHost.ready(real_model))) as base:
        exec(snippet.replace("http://127.0.0.1:8000", base), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["The capital of France is Paris. 8", "The capital of France is Paris."]
