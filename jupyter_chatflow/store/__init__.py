"""What outlives a kernel: one SQLite database with the sessions and their turns, the memories (FTS5 recall)
and the request log.
"""

from typing import Any

from jupyter_chatflow import lazy

_NAMES = {
    "Database": ".database",
    "Memory": ".memory",
    "Sessions": ".sessions",
    "StorageError": ".database",
    "Telemetry": ".telemetry",
    "TurnRecord": ".sessions",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    return lazy.attribute(__name__, _NAMES, name)
