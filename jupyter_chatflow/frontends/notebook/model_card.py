"""What `%chat_model` says of the model in use, and where XLA's compiled programs are kept."""

from __future__ import annotations

from pathlib import Path

from jupyter_chatflow.engine.loader import enable_compilation_cache
from jupyter_chatflow.engine.model import Model
from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.model.memory import ITEM_BYTES, footprint, size_text


def model_card(model: Model) -> str:
    """What `%chat_model` says of the model in use: what the file is, where it is, and what it takes as loaded."""
    c = model.config
    shape = f"{c.n_layers} layers, d={c.dim}, window {c.context_length}"
    try:
        about = footprint(model.path) if model.path is not None else None
    except (ChatflowError, OSError):  # (the file is gone since it loaded)
        about = None
    if about is None:
        return f"{c.name}: {c.architecture}, {shape}, loaded as {model.dtype} from {model.path or 'memory'}"
    dtype = str(model.dtype)
    taken = size_text(about.weight_bytes(dtype)) if dtype in ITEM_BYTES else "?"
    return "\n".join([about.summary(), f"  file:   {model.path}",
                      f"  loaded: as {dtype}, its weights taking {taken} ({shape})"])  # fmt: skip


def cache_dir() -> str | None:
    """XLA's compilation cache folder, with ~ for the home folder (None when it is off)."""
    folder = enable_compilation_cache()
    return None if folder is None else str(folder).replace(str(Path.home()), "~", 1)
