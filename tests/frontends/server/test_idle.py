"""An idle server gives back its compiled programs and prompt cache once per idle spell (`--release-idle-s`)."""

from __future__ import annotations

import threading
import time

import pytest

from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.frontends.server import ServerConfig

from .conftest import chat_body, wait_until


def test_an_idle_server_releases_its_programs_once_per_idle_spell(serve, http, monkeypatch):
    base, state = serve(ServerConfig(release_idle_s=0.3))
    released = []
    monkeypatch.setattr(state.host.model.runner, "release_programs", lambda: released.append(time.monotonic()))
    stop = threading.Event()
    watcher = threading.Thread(target=state.release_when_idle, args=(stop, 0.02), daemon=True)
    watcher.start()
    try:
        assert http.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=3)).status_code == 200
        wait_until(lambda: len(released) == 1)
        time.sleep(0.5)
        assert len(released) == 1  # still idle: nothing more to give back
        assert http.post(f"{base}/v1/chat/completions", json=chat_body(max_tokens=3)).status_code == 200
        wait_until(lambda: len(released) == 2)  # a new idle spell after the next generation
        assert b"chatflow_idle_releases_total 2.0" in http.get(f"{base}/metrics").content
    finally:
        stop.set()
        watcher.join(5)


def test_release_idle_s_zero_never_releases_and_a_negative_one_is_refused(serve, monkeypatch):
    _, state = serve(ServerConfig(release_idle_s=0))
    monkeypatch.setattr(state.host.model.runner, "release_programs", lambda: pytest.fail("released"))
    watcher = threading.Thread(target=state.release_when_idle, args=(threading.Event(), 0.01), daemon=True)
    watcher.start()
    watcher.join(1)
    assert not watcher.is_alive()  # nothing to watch for: it ended at once
    with pytest.raises(ChatflowError, match="--release-idle-s must be 0"):
        ServerConfig(release_idle_s=-1)
