"""The inspector panel: an anywidget (`ChatWidget`) and what feeds it."""

from typing import Any

from jupyter_chatflow import lazy

_NAMES = {
    "ChatWidget": ".widget",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    return lazy.attribute(__name__, _NAMES, name)
