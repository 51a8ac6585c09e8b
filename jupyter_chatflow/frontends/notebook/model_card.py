"""What `%chat_model` says of the model in use, and where XLA's compiled programs are kept."""

from __future__ import annotations

from pathlib import Path

from jupyter_chatflow.engine import mesh
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
    held, spread = _held(model), _spread(model)
    if about is None:
        return f"{c.name}: {c.architecture}, {shape}, loaded {held} from {model.path or 'memory'}{spread}"
    dtype = str(model.dtype)
    taken = size_text(about.weight_bytes(dtype, model.weights_format)) if dtype in ITEM_BYTES else "?"
    return "\n".join([about.summary(), f"  file:   {model.path}",
                      f"  loaded: {held}, its weights taking {taken} ({shape}){spread}"])  # fmt: skip


def _held(model: Model) -> str:
    """How the weights are held: "as float32", or "as-file weights, the rest as float32"."""
    if model.weights_format == "float":
        return f"as {model.dtype}"
    return f"{model.weights_format} weights, the rest as {model.dtype}"


def _spread(model: Model) -> str:
    """ "; on 2 devices: MLP, vocabulary sharded" for a model on a mesh ("" on one device)."""
    return "" if model.devices == 1 else f"; on {mesh.describe(model.config, model.devices)}"


def cache_dir() -> str | None:
    """XLA's compilation cache folder, with ~ for the home folder (None when it is off)."""
    folder = enable_compilation_cache()
    return None if folder is None else str(folder).replace(str(Path.home()), "~", 1)
