"""`chatflow serve` as a user runs it: a process that listens, says when it is ready, logs JSON, stops on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest


def test_chatflow_serve_runs_answers_and_stops_on_ctrl_c(tiny_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "jupyter_chatflow", "serve", "--model", str(tiny_path), "--port", str(port),
               "--api-key", "sk-1"]  # fmt: skip
    env = os.environ | {"CHATFLOW_API_KEYS": "sk-2"}
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    try:
        base, statuses = f"http://127.0.0.1:{port}", []
        deadline = time.monotonic() + 120
        while not statuses or statuses[-1] != 200:
            assert time.monotonic() < deadline and server.poll() is None, "the server did not come up"
            try:
                statuses.append(httpx.get(f"{base}/health").status_code)
            except httpx.TransportError:
                time.sleep(0.1)
        body = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}
        for key in ("sk-1", "sk-2"):  # --api-key and CHATFLOW_API_KEYS both count
            reply = httpx.post(f"{base}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"})
            assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] >= 1
        assert httpx.post(f"{base}/v1/chat/completions", json=body).status_code == 401
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=30)
    assert server.returncode == 0
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert [line["status"] for line in lines if line["path"] == "/v1/chat/completions"] == [200, 200, 401]
    assert set(statuses) <= {200, 503} and "sk-1" not in err and "sk-2" not in err
    assert err.startswith("chatflow: tiny-random-llama: llama, 91,136 parameters, F32, context 512 tokens; weights")


def test_a_model_file_that_is_missing_or_not_a_gguf_fails_before_listening(tmp_path):
    text = tmp_path / "notes.gguf"
    text.write_text("not a model")
    for path, message in ((tmp_path / "missing.gguf", "No model file at"), (text, "is not a GGUF file")):
        done = subprocess.run([sys.executable, "-m", "jupyter_chatflow", "serve", "--model", str(path), "--port", "1"],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr


def test_a_model_that_fails_to_load_stops_the_server_with_its_error(tiny_path, monkeypatch):
    import pytest

    from jupyter_chatflow.engine import loader
    from jupyter_chatflow.errors import ChatflowError, ModelFormatError
    from jupyter_chatflow.frontends.server import ServerConfig
    from jupyter_chatflow.frontends.server.main import serve

    def broken(path, **options):
        time.sleep(0.5)  # (listening by then)
        raise ModelFormatError(f"{path} uses an architecture this loader does not know")

    monkeypatch.setattr(loader, "load_model", broken)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ChatflowError, match="The model did not load, so the server stopped: ModelFormatError: "):
        serve(ServerConfig(port=port), str(tiny_path))


def test_a_model_too_large_is_refused_before_listening(tiny_path, monkeypatch):
    import pytest

    from jupyter_chatflow.errors import ModelTooLargeError
    from jupyter_chatflow.frontends.server import ServerConfig
    from jupyter_chatflow.frontends.server.main import serve
    from jupyter_chatflow.model import memory

    monkeypatch.setattr(memory, "available_memory", lambda: memory.Available(1 << 20, "test"))
    said = r"^tiny-random-llama needs 0\.25 GiB as float32 .* and 1\.0 MiB are available"
    with pytest.raises(ModelTooLargeError, match=said):
        serve(ServerConfig(port=1), str(tiny_path))  # (port 1: it never listens)


def test_devices_and_weights_reach_load_model(tiny_path, monkeypatch):
    from jupyter_chatflow.engine import loader
    from jupyter_chatflow.errors import ModelFormatError
    from jupyter_chatflow.frontends.server.host import ModelHost

    asked = {}

    def record(path, **options):
        asked.update(options)
        raise ModelFormatError("recorded")

    monkeypatch.setattr(loader, "load_model", record)
    host = ModelHost()
    host.load_in_background(str(tiny_path), dtype="float32", devices=2, weights="as-file").join(timeout=60)
    assert asked == {"dtype": "float32", "devices": 2, "weights": "as-file"}
    assert host.status == "failed" and "recorded" in host.error


def test_more_devices_than_there_are_fails_before_listening(tiny_path):
    command = [sys.executable, "-m", "jupyter_chatflow", "serve", "--model", str(tiny_path), "--devices", "64"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "XLA_FLAGS=--xla_force_host_platform_device_count=64" in done.stderr


@pytest.mark.slow  # (~13 s: a server process on a 2-device mesh)
def test_chatflow_serve_on_a_2_device_mesh_answers(tiny_path):
    """`--devices 2` with the CPU split in 4 (XLA_FLAGS): the server comes up on the mesh and answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "jupyter_chatflow", "serve", "--model", str(tiny_path), "--port", str(port),
               "--devices", "2"]  # fmt: skip
    env = os.environ | {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    try:
        base, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline and server.poll() is None, "the server did not come up"
            try:
                if httpx.get(f"{base}/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        body = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "temperature": 0}
        reply = httpx.post(f"{base}/v1/chat/completions", json=body)
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] >= 1
    finally:
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=30)
    assert server.returncode == 0
