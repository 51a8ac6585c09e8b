"""jupyter_chatflow: what happens when you press Send, real and visible in Jupyter.

>>> import jupyter_chatflow as cf
>>> model = cf.load_model()
>>> ids = model.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}])
>>> for step in model.generate(ids, max_tokens=32, temperature=0.0):
...     print(step.text, end="")
"""

import importlib
import sys
from typing import Any

from . import lazy
from .errors import ChatflowError, GenerationError, ModelFormatError, ModelNotFoundError, ModelTooLargeError

__version__ = "0.1.0"
_NAMES = {
    "Alternative": ".engine.generation", "Generation": ".engine.generation", "Step": ".engine.generation",
    "load_model": ".engine.loader", "Model": ".engine.model", "SamplingParams": ".engine.sampling",
    "Chat": ".pipeline.chat", "Response": ".pipeline.response", "ChatWidget": ".frontends.panel.widget",
}  # fmt: skip
_SUBPACKAGES = {"adapters": ".frontends.server.adapters", "safety": ".pipeline.safety", "tools": ".pipeline.tools"}
__all__ = [
    "Alternative", "Chat", "ChatWidget", "ChatflowError", "Generation", "GenerationError", "Model",
    "ModelFormatError", "ModelNotFoundError", "ModelTooLargeError", "Response", "SamplingParams", "Step",
    "load_model",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    """Every public name is imported on first use: `import jupyter_chatflow` alone does not import JAX (the engine,
    the pipeline and the panel come with the first name that needs them)."""
    if name in _SUBPACKAGES:
        return importlib.import_module(_SUBPACKAGES[name], __name__)
    return lazy.attribute(__name__, _NAMES, name)


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
