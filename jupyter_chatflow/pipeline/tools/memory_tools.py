"""`remember` and `recall` tools over a memory store, so the model can save and look up facts itself.

The store is duck-typed (`MemoryLike`): anything with `remember(text) -> int` and
`recall(query, limit=3) -> list[Snippet]`, such as `jupyter_chatflow.store.memory.Memory`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from jupyter_chatflow.events import Snippet

from .tool import Tool, tool

__all__ = ["MemoryLike", "memory_tools"]


class MemoryLike(Protocol):
    """What the memory tools need of a store."""

    def remember(self, text: str) -> int:
        """Store `text`; return its id."""
        ...

    def recall(self, query: str, *, limit: int = 3) -> Sequence[Snippet]:
        """The stored texts most relevant to `query`."""
        ...


def memory_tools(memory: MemoryLike) -> list[Tool]:
    """The `remember` and `recall` tools bound to `memory`."""

    def remember(text: str) -> str:
        """Save a fact about the user or the work for later conversations.

        Args:
            text: The fact, in one short sentence (e.g. "The user's name is Ada.").
        """
        memory_id = memory.remember(text)
        return f"Remembered (memory {memory_id})."

    def recall(query: str, limit: int = 3) -> str:
        """Search saved memories for facts relevant to a query.

        Args:
            query: What to look for (e.g. "user's name").
            limit: How many memories to return at most.
        """
        snippets = memory.recall(query, limit=max(1, min(limit, 20)))
        if not snippets:
            return "No memories match."
        return "\n".join(f"[{s.memory_id}] {s.text}" for s in snippets)

    return [tool(timeout_s=10.0)(remember), tool(timeout_s=10.0)(recall)]
