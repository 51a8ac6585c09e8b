"""The network itself: the GGUF file and its metadata, the weights (dequantized with gguf's own code), the
decoder transformer (the Llama, Qwen, Gemma and Phi families) in Flax, its compiled XLA programs, and where the
model file is found.
"""

from typing import Any

from jupyter_chatflow import lazy

_NAMES = {
    "Footprint": ".memory",
    "GGUFModel": ".gguf_file",
    "Header": ".header",
    "KNOWN_MODELS": ".files",
    "KVCache": ".transformer",
    "KnownModel": ".files",
    "ModelConfig": ".config",
    "Transformer": ".transformer",
    "default_model_path": ".files",
    "file_config": ".config",
    "fit_text": ".memory",
    "footprint": ".memory",
    "read_gguf": ".gguf_file",
    "read_header": ".header",
    "read_metadata": ".gguf_file",
    "resolve_model_path": ".files",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    return lazy.attribute(__name__, _NAMES, name)
