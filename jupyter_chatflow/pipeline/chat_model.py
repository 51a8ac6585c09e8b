"""The model a local chat runs on, and the scheduler every chat on that model shares."""

from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path

from jupyter_chatflow.engine.loader import load_model
from jupyter_chatflow.engine.model import Model
from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.model.files import KNOWN_MODELS

CHAT_BATCH = 2  # rows of the chats' scheduler: an answer and its title (each batch size compiled costs memory)
_SCHEDULERS: weakref.WeakValueDictionary[int, Scheduler] = weakref.WeakValueDictionary()  # id(model): its chats'
_SCHEDULERS_LOCK = threading.Lock()


def local_model(model: Model | str | os.PathLike[str] | None) -> Model:
    """The model a local chat runs on: the one given, the GGUF file at a path (`load_model`), or the default."""
    if model is None or isinstance(model, Model):
        return model or load_model()
    text = os.fspath(model)
    named = any(known.name.lower() == text.strip().lower() for known in KNOWN_MODELS)
    if (
        isinstance(model, str)
        and not named
        and not text.lower().endswith(".gguf")
        and not Path(text).expanduser().is_file()
    ):
        raise ChatflowError(f"model={model!r} is not a GGUF file nor a known model's name "
                            f"({', '.join(m.name for m in KNOWN_MODELS)}): pass a model file's path or a "
                            "cf.load_model(…), or base_url= too if it names a server's model.")  # fmt: skip
    return load_model(text)


def shared_scheduler(model: Model) -> Scheduler:
    """The scheduler of every chat on `model` (`CHAT_BATCH` rows). One scheduler owns the model: chats whose turns
    run at once (a notebook's Run All, two panels) are batched together rather than each holding its own KV cache
    and compiling its own programs at the same time (100-250 MiB more at the quickstart's peak). It lives while a chat
    uses it or its loop thread runs (`IDLE_EXIT_S`); a closed one is replaced."""
    with _SCHEDULERS_LOCK:
        scheduler = _SCHEDULERS.get(id(model))
        if scheduler is None or scheduler.model is not model or scheduler.closed:
            scheduler = _SCHEDULERS[id(model)] = Scheduler(model, max_batch=CHAT_BATCH)
        return scheduler
