"""jupyter_chatflow: what happens when you press Send, real and visible in Jupyter.

>>> import jupyter_chatflow as cf
>>> model = cf.load_model()
>>> ids = model.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}])
>>> for step in model.generate(ids, max_tokens=32, temperature=0.0):
...     print(step.text, end="")
"""

import importlib
import sys

from .engine.generation import Alternative, Generation, Step
from .engine.loader import load_model
from .engine.model import Model
from .engine.sampling import SamplingParams
from .errors import ChatflowError, GenerationError, ModelFormatError, ModelNotFoundError, ModelTooLargeError
from .pipeline.response import Response

__version__ = "0.1.0"
_SUBPACKAGES = {"adapters": ".frontends.server.adapters", "safety": ".pipeline.safety", "tools": ".pipeline.tools"}
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
    "ModelTooLargeError",
    "Response",
    "SamplingParams",
    "Step",
    "load_model",
]


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    """`Chat`, `ChatWidget` and the pipeline's subpackages are imported on first use (the engine needs none)."""
    if name == "Chat":
        from .pipeline.chat import Chat

        return Chat
    if name == "ChatWidget":
        from .frontends.panel.widget import ChatWidget

        return ChatWidget
    if name in _SUBPACKAGES:
        return importlib.import_module(_SUBPACKAGES[name], __name__)
    raise AttributeError(f"module 'jupyter_chatflow' has no attribute {name!r}")


def load_ipython_extension(ipython) -> None:  # type: ignore[no-untyped-def]
    """`%load_ext jupyter_chatflow` registers the %%chat magics (and how a `Response` shows)."""
    from .frontends.notebook.magics import load_ipython_extension as load
    from .frontends.notebook.render import register_display

    register_display(ipython)
    load(ipython)


def _show_responses_in_ipython() -> None:
    """In a running IPython (a notebook's kernel), a cell that ends in `chat.send(…)` shows the turn as `%%chat`
    does. The front ends register that (the pipeline knows nothing of them); outside IPython nothing is imported."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:
        from .frontends.notebook.render import register_display

        register_display(shell)


_show_responses_in_ipython()
