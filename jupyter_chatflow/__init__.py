"""jupyter_chatflow: what happens when you press Send, real and visible in Jupyter.

>>> import jupyter_chatflow as cf
>>> model = cf.load_model()
>>> ids = model.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}])
>>> for step in model.generate(ids, max_tokens=32, temperature=0.0):
...     print(step.text, end="")
"""

from .engine import Model
from .errors import ChatflowError, GenerationError, ModelFormatError, ModelNotFoundError
from .generation import Alternative, Generation, Step
from .loader import load_model
from .sampling import SamplingParams

__version__ = "0.1.0"
__all__ = [
    "Alternative",
    "ChatflowError",
    "Generation",
    "GenerationError",
    "Model",
    "ModelFormatError",
    "ModelNotFoundError",
    "SamplingParams",
    "Step",
    "load_model",
]
