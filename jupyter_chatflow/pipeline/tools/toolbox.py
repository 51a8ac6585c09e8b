"""`Toolbox`: the registry of tools a chat may use, and the names a request picks them by.

Example:
    >>> box = Toolbox.builtin(namespace=get_ipython().user_ns, memory=memory)
    >>> box.add(my_tool)                      # a @tool function, or a plain typed function
    >>> [t.name for t in box.resolve(None)]   # the defaults: everything but the opt-in python tool
    ['calculator', 'variable', 'remember', 'recall', 'my_tool']
    >>> [t.name for t in box.resolve("calculator,python")]
    ['calculator', 'python']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .calculator import calculator
from .memory_tools import MemoryLike, memory_tools
from .python_tool import python_tool
from .schema import ToolError, prepare_validation
from .tool import Tool, tool
from .variables import variable_tool

__all__ = ["Toolbox"]


class Toolbox:
    """Tools by name; `resolve` picks some for a request. Opt-in tools are used only when named."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = (), *, opt_in: Iterable[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        self._opt_in: set[str] = set()
        for item in tools:
            self.add(item)
        for item in opt_in:
            self.add(item, opt_in=True)

    @classmethod
    def builtin(
        cls, *, namespace: dict[str, Any] | None = None, memory: MemoryLike | None = None, python_timeout_s: float = 10
    ) -> Toolbox:
        """The calculator; with a namespace, the variable tool and the opt-in python tool; with memory, its tools."""
        tools: list[Tool] = [calculator]
        if namespace is not None:
            tools.append(variable_tool(namespace))
        if memory is not None:
            tools.extend(memory_tools(memory))
        opt_in = [python_tool(namespace, timeout_s=python_timeout_s)] if namespace is not None else []
        return cls(tools, opt_in=opt_in)

    def add(self, item: Tool | Callable[..., Any], *, opt_in: bool = False) -> Tool:
        """Register a Tool (or a typed function, made one with @tool); a tool of the same name is replaced."""
        added = item if isinstance(item, Tool) else tool(item)
        prepare_validation()  # its first run must not wait for the validator's import
        self._tools[added.name] = added
        (self._opt_in.add if opt_in else self._opt_in.discard)(added.name)
        return added

    def remove(self, name: str) -> None:
        """Forget a tool (no error when there is none)."""
        self._tools.pop(name, None)
        self._opt_in.discard(name)

    @property
    def names(self) -> list[str]:
        """Every registered name, in the order added."""
        return list(self._tools)

    def __getitem__(self, name: str) -> Tool:
        """The tool called `name`; ToolError listing the known names otherwise."""
        if name not in self._tools:
            raise ToolError(f"unknown tool {name!r}; known tools: {', '.join(self._tools) or '(none)'}.")
        return self._tools[name]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def defaults(self) -> list[Tool]:
        """The tools used when a request names none: all but the opt-in ones."""
        return [t for n, t in self._tools.items() if n not in self._opt_in]

    def resolve(self, names: str | Sequence[str] | None) -> list[Tool]:
        """Tools from "a,b" or ["a", "b"] ("default" stands for `defaults()`); None or "" give the defaults.

        "none" gives no tools; an unknown name is a ToolError that lists the known ones.
        """
        wanted = [n.strip() for n in (names.split(",") if isinstance(names, str) else names or ())]
        wanted = [n for n in wanted if n] or ["default"]
        if wanted == ["none"]:
            return []
        unknown = [n for n in wanted if n not in self._tools and n != "default"]
        if unknown:
            raise ToolError(
                f"unknown tool(s) {', '.join(map(repr, unknown))}; known tools: {', '.join(self._tools) or '(none)'} "
                "(or 'default', 'none')."
            )
        chosen = [t.name for n in wanted for t in (self.defaults() if n == "default" else [self._tools[n]])]
        return [self._tools[n] for n in dict.fromkeys(chosen)]
