"""Run the server: load the model in the background, listen at once (`/health` says 503 until it is ready)."""

from __future__ import annotations

import contextlib
import signal
import threading

import uvicorn

from jupyter_chatflow.engine.loader import check_memory, default_dtype
from jupyter_chatflow.engine.mesh import make_mesh
from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.model.files import resolve_model_path

from . import log
from .app import create_app
from .config import ServerConfig
from .host import ModelHost


def serve(config: ServerConfig, model_path: str | None) -> None:
    """Listen on config.host:config.port until interrupted (Ctrl-C). A model file that is missing, not a supported
    GGUF or too large for the memory available fails before listening; one that fails to load later stops the
    server: either raises ChatflowError."""
    log.setup()
    check_memory(resolve_model_path(model_path), config.dtype or default_dtype(), config.weights)  # (its header only)
    make_mesh(config.devices)  # (more devices than JAX sees: refused before listening)
    host = ModelHost(lambda model: Scheduler(model, max_batch=config.max_batch))
    loading = host.load_in_background(
        model_path, config.model_name, dtype=config.dtype, devices=config.devices, weights=config.weights
    )
    app = create_app(host, config)
    server = uvicorn.Server(uvicorn.Config(app, host=config.host, port=config.port, log_level="warning",
                                           access_log=False))  # fmt: skip
    threading.Thread(target=_stop_on_failure, args=(loading, host, server), name="chatflow-load-watch",
                     daemon=True).start()  # fmt: skip
    # uvicorn stops on SIGINT and SIGTERM alike (it stops accepting, the app's lifespan cancels and stores what is
    # in flight), then raises the signal again under the handler that was there before: SIGTERM's default would end
    # the process at once, so it becomes an exception here, as Ctrl-C is, and the engine is closed before exit
    before = signal.signal(signal.SIGTERM, _terminated)
    try:
        with contextlib.suppress(KeyboardInterrupt, _Terminated):
            server.run()
    finally:
        signal.signal(signal.SIGTERM, before)
        if host.engine is not None:
            host.engine.close()
    if host.status == "failed":
        raise ChatflowError(f"The model did not load, so the server stopped: {host.error}")


class _Terminated(Exception):
    """SIGTERM, once uvicorn has stopped the server."""


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated


def _stop_on_failure(loading: threading.Thread, host: ModelHost, server: uvicorn.Server) -> None:
    loading.join()
    if host.status == "failed":
        server.should_exit = True
