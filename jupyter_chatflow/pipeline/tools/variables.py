"""The `variable` tool: a short summary of one of the user's kernel variables, so the model can talk about data.

It reports the type, length, shape/dtype (numpy, pandas, JAX, torch alike, found by duck typing), a DataFrame's
columns, and a repr cut to a bound. It reads only; it never calls anything but `len`, `repr` and attribute access.
"""

from __future__ import annotations

import contextlib
import reprlib
from typing import Any

from .schema import ToolError
from .tool import Tool, tool

__all__ = ["summarize", "user_variables", "variable_tool"]

MAX_REPR_CHARS = 600
_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxdict = 200, 200, 20, 20


def variable_tool(namespace: dict[str, Any], *, name: str = "variable") -> Tool:
    """A tool that summarises a variable of `namespace` (the kernel's `user_ns`) by name."""

    def variable(name: str) -> dict[str, Any]:
        """Describe a variable of the user's notebook: its type, size, shape, dtype and a short preview.

        Args:
            name: The variable's name, as the user wrote it in a cell (e.g. "df").
        """
        if name not in namespace or name.startswith("_"):
            known = ", ".join(user_variables(namespace)[:30]) or "(none)"
            raise ToolError(f"no variable named {name!r} in the notebook; variables: {known}")
        return summarize(namespace[name])

    return tool(name=name, timeout_s=5.0)(variable)


def summarize(value: Any) -> dict[str, Any]:
    """Type, len, shape, dtype, columns (when present) and a truncated repr of a value."""
    kind = type(value)
    summary: dict[str, Any] = {"type": f"{kind.__module__}.{kind.__qualname__}".removeprefix("builtins.")}
    with contextlib.suppress(Exception):  # len() of a lazy or broken object may raise anything
        summary["len"] = len(value)
    for attribute in ("shape", "dtype", "columns"):
        found = _attribute(value, attribute)
        if found is not None:
            summary[attribute] = found
    summary["repr"] = _preview(value)
    return summary


def user_variables(namespace: dict[str, Any]) -> list[str]:
    """Names a user defined: no leading underscore, no modules, no IPython In/Out/exit helpers."""
    hidden = {"In", "Out", "exit", "quit", "get_ipython"}
    return sorted(
        n for n, v in namespace.items() if not n.startswith("_") and n not in hidden and type(v).__name__ != "module"
    )


def _attribute(value: Any, name: str) -> Any:
    """A shape/dtype/columns attribute as JSON-able data, or None when there is none (properties may raise)."""
    try:
        found = getattr(value, name, None)
    except Exception:
        return None
    if found is None or (callable(found) and name != "dtype"):
        return None
    if name == "shape":
        try:
            return [int(d) for d in found]
        except (TypeError, ValueError):
            return None
    if name == "columns":
        try:
            names = [str(c) for c in list(found)[:50]]
        except TypeError:
            return None
        return names
    return str(found)


def _preview(value: Any) -> str:
    """repr cut to MAX_REPR_CHARS; builtin containers through reprlib so a huge list is never fully rendered."""
    try:
        text = _REPR.repr(value) if isinstance(value, (list, tuple, dict, set, frozenset, str)) else repr(value)
    except Exception as error:
        return f"<repr failed: {type(error).__name__}: {error}>"
    return text if len(text) <= MAX_REPR_CHARS else f"{text[:MAX_REPR_CHARS]}… [{len(text) - MAX_REPR_CHARS} more]"
