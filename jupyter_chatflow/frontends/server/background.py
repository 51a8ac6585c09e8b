"""The server in this process, on a thread: `chatflow serve` for a notebook (the tour's "The wire") or a test.

>>> from jupyter_chatflow.frontends.server import ServerConfig, serve_in_background
>>> server = serve_in_background(chat.model, ServerConfig(api_keys=("sk-demo",), max_batch=4))
>>> httpx.get(f"{server.url}/health").json()
{'status': 'ready'}
>>> server.close()

It serves the model object it is given, so the kernel holds one copy of the weights (Binder has 1–2 GiB in all),
on a `Scheduler` of its own. It listens on 127.0.0.1 at a free port unless told otherwise.
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from jupyter_chatflow.engine.loader import load_model
from jupyter_chatflow.engine.model import Model
from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.errors import ChatflowError

from .app import create_app
from .config import ServerConfig, base_url
from .host import ModelHost
from .state import ServerState

START_TIMEOUT_S = 30.0


class BackgroundServer:
    """A running server: its `url`, its `state` (limits, metrics, the engine), and `close()`."""

    def __init__(self, model: Model, config: ServerConfig, listening: socket.socket):
        self.scheduler = Scheduler(model, max_batch=config.max_batch)
        host = ModelHost.ready(model, name=config.model_name, make_engine=lambda _: self.scheduler)
        app = create_app(host, config)
        self.state: ServerState = app.state.chatflow
        self.url = base_url(config.host, listening.getsockname()[1])
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._socket = listening
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [listening]},
                                        name="chatflow-serve", daemon=True)  # fmt: skip

    def start(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.close()
                raise ChatflowError(f"The server at {self.url} did not start within {START_TIMEOUT_S:.0f} s.")
            time.sleep(0.01)
        return self

    def close(self) -> None:
        """Stop listening (open streams end) and stop the scheduler; safe to call twice."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._socket.close()
        self.scheduler.close()

    def __enter__(self) -> BackgroundServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<chatflow server at {self.url}>"


def serve_in_background(
    model: Model | None = None, config: ServerConfig | None = None, port: int | None = None
) -> BackgroundServer:
    """Start the server on a thread of this process over `model` (default: the default model, shared with
    `cf.Chat()`); `port` None: a free one. Returns once it listens."""
    config = config or ServerConfig()
    listening = _listen(config.host, 0 if port is None else port)
    return BackgroundServer(model if model is not None else load_model(), config, listening).start()


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound here (so a taken port is an error in the caller's thread, not uvicorn's)."""
    listening = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        listening.bind((host, port))
    except OSError as error:
        listening.close()
        raise ChatflowError(f"Cannot listen on {host}:{port} ({error.strerror}): is the port taken? Pass another "
                            "port, or port=None for a free one.") from None  # fmt: skip
    return listening
