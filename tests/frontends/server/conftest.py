"""A live server on the tiny model: uvicorn on a free loopback port in a thread, per test (a fresh state each)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.frontends.server import ModelHost, ServerConfig, create_app


class Paced:
    """The Scheduler with each decode step slowed to `delay` seconds (a test can act between two steps); it
    remembers when each step ran and wraps each stream to count the steps its reader took."""

    def __init__(self, inner: Scheduler, delay: float):
        self.inner, self.delay = inner, delay
        self.streams: list[PacedStream] = []
        self.step_times: list[float] = []  # when each decode step (of every row) began
        step = inner._batch.step

        def paced(rows, *rest):
            time.sleep(delay)
            self.step_times.append(time.perf_counter())
            return step(rows, *rest)

        inner._batch.step = paced  # type: ignore[method-assign]

    @property
    def queued(self) -> int:
        return self.inner.queued

    @property
    def active(self) -> int:
        return self.inner.active

    def submit(self, prompt_ids, params=None, constraint=None, cancel=None):
        stream = PacedStream(self.inner.submit(prompt_ids, params, constraint, cancel))
        self.streams.append(stream)
        return stream

    def close(self) -> None:
        self.inner.close()


class PacedStream:
    def __init__(self, stream):
        self.stream, self.steps = stream, 0

    finish_reason = property(lambda self: self.stream.finish_reason)
    text = property(lambda self: self.stream.text)
    usage = property(lambda self: self.stream.usage)

    def cancel(self) -> None:
        self.stream.cancel()

    def __iter__(self):
        for step in self.stream:
            self.steps += 1
            yield step


@contextlib.contextmanager
def running(app) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 at a free port; yields the base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def wide_model(tmp_path_factory):
    """The tiny model with a 2,048-token window: its byte-level vocabulary spells a tools prompt in ~800 tokens."""
    from jupyter_chatflow import load_model
    from jupyter_chatflow.testing import TinySpec, write_tiny_gguf

    path = write_tiny_gguf(tmp_path_factory.mktemp("wide") / "wide.gguf", TinySpec(context_length=2048))
    return load_model(path, dtype="float32")


@pytest.fixture
def serve(tiny_model, tmp_path, monkeypatch):
    """serve(config=None, host=None, delay=None, model=None, max_batch=4) -> (base URL, app state): a live server for
    this test, on the engine `chatflow serve` runs (the batching Scheduler), closed at the end. Each test's servers
    have a database of their own (conversations and idempotent answers outlive a server: not a test)."""
    monkeypatch.setenv("CHATFLOW_DB", str(tmp_path / "server.db"))
    with contextlib.ExitStack() as stack:

        def start(config: ServerConfig | None = None, host: ModelHost | None = None, delay: float | None = None,
                  model=None, max_batch: int = 4):  # fmt: skip
            if host is None:
                scheduler = stack.enter_context(Scheduler(model or tiny_model, max_batch=max_batch))
                engine = scheduler if delay is None else Paced(scheduler, delay)
                host = ModelHost.ready(model or tiny_model, name="tiny", make_engine=lambda _: engine)
            app = create_app(host, config)
            return stack.enter_context(running(app)), app.state.chatflow

        yield start


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30) as client:
        yield client


def chat_body(content: str = "Hi", **fields) -> dict:
    """A chat completion body for the tiny model (greedy, 8 tokens unless changed)."""
    return {"model": "tiny", "messages": [{"role": "user", "content": content}], "temperature": 0, "max_tokens": 8,
            **fields}  # fmt: skip


def wait_until(condition, timeout: float = 10) -> None:
    """Poll `condition` until it holds (a server thread's state, say); fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
