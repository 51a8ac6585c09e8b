"""What the panel says about its model, and a model's load drawn while it runs.

`model_info` is the `model_info` trait (the header, the settings and the attention view read it); `PanelProgress`
draws a load started from the settings' model field in the `loading` trait; `load_shown` loads the model of a
panel made without a chat, drawn as a status line in the cell above it.
"""

from __future__ import annotations

import os
import time
from typing import Any, Protocol

from jupyter_chatflow.engine.loader import load_model
from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.model.files import resolve_model_path
from jupyter_chatflow.model.memory import footprint
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.pipeline.safety.intent import IntentGuard
from jupyter_chatflow.pipeline.safety.probe import Probe
from jupyter_chatflow.pipeline.safety.taxonomy import describe

from ..progress import REDRAW_S, LoadProgress, StatusLine, bar
from .protocol import ModelInfo


class _Loading(Protocol):
    loading: str


def model_info(chat: Chat) -> ModelInfo:
    """The `model_info` trait: what the header, the settings and the attention view say about the model. The
    attention view labels each layer by its kind (Gemma's sliding-window layers see only the last
    `sliding_window` positions, the others every position), so the layers' kinds go out with the sizes."""
    if chat.abilities.server:  # the server does not say how its model is built: 0, "not known"
        return ModelInfo(name=chat.answerer.model_name or "remote model", layers=0, heads=0, kv_heads=0,
                         context_length=0, vocab_size=0, tools=list(chat.toolbox.names), remote=chat.abilities.server,
                         file="", dtype="", summary="", architecture="", sliding_window=0,
                         sliding_layers=[], probe_layers=[], probe_categories=[])  # fmt: skip
    model, config = chat.model, chat.model.config
    probe = steering_probe(model)
    categories = [(code, describe(code)) for code in (probe.classes[1:] if probe is not None else ())]
    return ModelInfo(name=config.name, layers=config.n_layers, heads=config.n_heads, kv_heads=config.n_kv_heads,
                     context_length=config.context_length, vocab_size=config.vocab_size,
                     tools=list(chat.toolbox.names), remote="", file=str(model.path or ""), dtype=str(model.dtype),
                     summary=summary(model), architecture=config.architecture,
                     sliding_window=config.sliding_window, sliding_layers=list(config.sliding_layers),
                     probe_layers=steerable_layers(probe), probe_categories=categories)  # fmt: skip


def steering_probe(model: Any) -> Probe | None:
    """The safety probe trained for `model`'s file (the intent guard's), whose directions the panel offers to steer
    along; None where there is none (or it was trained on a model of another width)."""
    guard = IntentGuard.for_model(model)
    return guard.probe if guard is not None else None


def steerable_layers(probe: Probe | None) -> list[int]:
    """The layers after which `probe.direction` steers (the residuals it reads, counted from 0 as `steer` counts)."""
    if probe is None:
        return []
    return sorted({n - 1 for n in (*probe.layers, *probe.prompt_layers) if n > 0})


def summary(model: Any) -> str:
    """The line on what the model's file is (its name alone where it has no file, or the file is gone)."""
    try:
        return footprint(model.path).summary() if model.path else model.config.name
    except (ChatflowError, OSError):
        return str(model.config.name)


class PanelProgress:
    """The `load_model(progress=…)` callback of a load from the settings: the `loading` trait, at most every
    `REDRAW_S`, says what the file is and how far the load is."""

    def __init__(self, panel: _Loading, summary: str, name: str):
        self.panel, self.summary, self.name = panel, summary, name
        self.started, self.drawn = time.perf_counter(), 0.0

    def __call__(self, stage: str, fraction: float) -> None:
        now = time.perf_counter()
        if fraction < 1 and now - self.drawn < REDRAW_S:
            return
        self.drawn = now
        took = now - self.started
        self.panel.loading = f"{self.summary}\nloading {self.name} {bar(fraction)} · {stage} · {took:.1f} s"


def load_shown(path: str | os.PathLike[str] | None = None) -> Any:
    """The model for a panel made without a chat, its load drawn as a status line in the cell above the panel
    (a bar in Jupyter, a line in a terminal; never stderr)."""
    from IPython import get_ipython

    shell = get_ipython()
    resolved = resolve_model_path(path)
    print(f"chatflow: {footprint(resolved).summary()}", flush=True)  # what the file is, before it loads
    progress = LoadProgress(StatusLine(rich=shell is not None and hasattr(shell, "kernel")), resolved.name)
    model = load_model(path, progress=progress)
    progress.done()
    return model
