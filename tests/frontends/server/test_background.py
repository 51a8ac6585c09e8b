"""The server on a thread of this process (a notebook's): it answers over HTTP on the model it was given."""

from __future__ import annotations

import httpx
import pytest

from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.frontends.server import ServerConfig, serve_in_background

from .conftest import chat_body


def test_a_background_server_serves_the_kernels_model_until_closed(tiny_model):
    config = ServerConfig(api_keys=("sk-demo",), max_batch=2, model_name="tiny")
    with serve_in_background(tiny_model, config) as server:
        assert server.url.startswith("http://127.0.0.1:") and server.scheduler.model is tiny_model
        assert httpx.get(f"{server.url}/health").json() == {"status": "ready"}
        headers = {"Authorization": "Bearer sk-demo"}
        answer = httpx.post(f"{server.url}/v1/chat/completions", json=chat_body(max_tokens=3), headers=headers)
        assert answer.status_code == 200 and answer.json()["usage"]["completion_tokens"] == 3
        assert httpx.post(f"{server.url}/v1/chat/completions", json=chat_body()).status_code == 401
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/health")


def test_a_taken_port_is_a_clear_error(tiny_model):
    with serve_in_background(tiny_model, ServerConfig(model_name="tiny")) as first:
        port = int(first.url.rsplit(":", 1)[1])
        with pytest.raises(ChatflowError, match="port taken"):
            serve_in_background(tiny_model, ServerConfig(model_name="tiny"), port=port)
