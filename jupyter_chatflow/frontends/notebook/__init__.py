"""The notebook front end: the `%%chat` magics and the cell's rendered turn."""

from typing import Any

from jupyter_chatflow import lazy

_NAMES = {
    "ChatMagics": ".magics",
    "load_ipython_extension": ".magics",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    return lazy.attribute(__name__, _NAMES, name)
