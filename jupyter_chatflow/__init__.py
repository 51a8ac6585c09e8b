"""jupyter_chatflow: what happens when you press Send, real and visible in Jupyter.

>>> import jupyter_chatflow as cf
>>> model = cf.load_model()
>>> ids = model.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}])
>>> for step in model.generate(ids, max_tokens=32, temperature=0.0):
...     print(step.text, end="")
"""

import importlib

from .engine import Model
from .errors import ChatflowError, GenerationError, ModelFormatError, ModelNotFoundError
from .generation import Alternative, Generation, Step
from .loader import load_model
from .response import Response
from .sampling import SamplingParams

__version__ = "0.1.0"
__all__ = [
    "Alternative",
    "Chat",
    "ChatWidget",
    "ChatflowError",
    "Generation",
    "GenerationError",
    "Model",
    "ModelFormatError",
    "ModelNotFoundError",
    "Response",
    "SamplingParams",
    "Step",
    "load_model",
]


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    """`Chat`, `ChatWidget` and the pipeline's subpackages are imported on first use (the engine needs none)."""
    if name == "Chat":
        from .chat import Chat

        return Chat
    if name == "ChatWidget":
        from .widget import ChatWidget

        return ChatWidget
    if name in ("adapters", "safety", "tools"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'jupyter_chatflow' has no attribute {name!r}")


def load_ipython_extension(ipython) -> None:  # type: ignore[no-untyped-def]
    """`%load_ext jupyter_chatflow` registers the %%chat magics."""
    from .magics import load_ipython_extension as load

    load(ipython)
