"""Run the server: load the model in the background, listen at once (`/health` says 503 until it is ready)."""

from __future__ import annotations

import uvicorn

from jupyter_chatflow.engine.scheduler import Scheduler

from . import log
from .app import create_app
from .config import ServerConfig
from .host import ModelHost


def serve(config: ServerConfig, model_path: str | None) -> None:
    """Listen on config.host:config.port until interrupted (Ctrl-C)."""
    log.setup()
    host = ModelHost(lambda model: Scheduler(model, max_batch=config.max_batch))
    host.load_in_background(model_path, config.model_name)
    app = create_app(host, config)
    uvicorn.run(app, host=config.host, port=config.port, log_level="warning", access_log=False)
