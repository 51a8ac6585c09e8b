"""The model behind the server as it comes up: loading, then compiling (a first short generation), then ready.

`/health` answers 503 until `status` is "ready"; the routes that need the model answer 503 too. Loading runs on
a thread of its own so the server listens (and says it is loading) from the start.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from jupyter_chatflow.engine.model import Model
from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.engine.scheduler import Scheduler

from .engine import Engine
from .errors import APIError

Status = Literal["loading", "compiling", "ready", "failed"]


class ModelHost:
    """Holds the model, its engine and the served name once they are there."""

    def __init__(self, make_engine: Callable[[Model], Engine] = Scheduler):
        self.status: Status = "loading"
        self.error = ""
        self.model: Model | None = None
        self.engine: Engine | None = None
        self.name = ""
        self.created = 0
        """Unix time (whole seconds) the model was installed: the `created` of its card in GET /v1/models."""
        self._make_engine = make_engine

    @classmethod
    def ready(cls, model: Model, name: str | None = None, make_engine: Callable[[Model], Engine] = Scheduler):
        """A host over a model already loaded (compiled on its first request)."""
        host = cls(make_engine)
        host.install(model, name)
        host.status = "ready"
        return host

    def load_in_background(
        self, path: str | None, name: str | None = None, warm: bool = True, dtype: str | None = None,
        **options: Any,
    ) -> threading.Thread:  # fmt: skip
        """Load (as `dtype`; None: the backend's default; `options`: `load_model`'s `devices` and `weights`) and
        compile (with `warm`) the model on a thread; `status` tells how far it got."""
        thread = threading.Thread(
            target=self._load, args=(path, name, warm, dtype), kwargs=options, name="chatflow-load", daemon=True
        )
        thread.start()
        return thread

    def _load(self, path: str | None, name: str | None, warm: bool, dtype: str | None = None, **options: Any) -> None:
        from jupyter_chatflow.engine.loader import load_model

        try:
            model = load_model(path, dtype=dtype, **options)
            self.status = "compiling"
            self.install(model, name)
            if warm:
                self._warm()
            self.status = "ready"
        except Exception as error:  # the server stays up and says why in /health
            self.error = f"{type(error).__name__}: {error}"
            self.status = "failed"

    def _warm(self) -> None:
        """Compile (or read from the XLA cache) the prefill and the batch-of-one decode before any request; other
        batch sizes compile when that many streams first run together, on a thread of their own while the running
        streams go on (`engine/plan.py`: a newcomer waits while its batch compiles)."""
        assert self.model is not None and self.engine is not None
        prompt = self.model.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}])
        list(self.engine.submit(prompt, SamplingParams(temperature=0.0, max_tokens=3, ignore_eos=True)))

    def install(self, model: Model, name: str | None = None) -> None:
        """Serve `model` (loaded elsewhere) under `name`; `status` is left to the caller."""
        self.model = model
        self.engine = self._make_engine(model)
        self.created = int(time.time())
        self.name = name or (Path(model.path).name.removesuffix(".gguf") if model.path else "chatflow")

    def require(self) -> tuple[Model, Engine]:
        """The model and engine, or 503 while they are not ready."""
        if self.status == "failed":
            raise APIError(503, f"The model failed to load ({self.error.rstrip('.')}): restart the server with a model "
                           "that loads.", type="server_error", code="model_failed")  # fmt: skip
        if self.status != "ready" or self.model is None or self.engine is None:
            raise APIError(503, f"Not ready: the model is {self.status}. Poll GET /health until it answers 200.",
                           type="server_error", code="model_not_ready", headers={"Retry-After": "1"})  # fmt: skip
        return self.model, self.engine
