"""`@tool`: a typed Python function becomes a `Tool` the model can call; `Tool.run` never raises.

Example:
    >>> @tool
    ... def add(a: int, b: int = 1) -> int:
    ...     '''Add two integers.
    ...
    ...     Args:
    ...         a: The first number.
    ...         b: The second number.
    ...     '''
    ...     return a + b
    >>> add.parameters["required"]
    ['a']
    >>> add.run({"a": 2})
    ToolOutcome(output='3', error='', latency_ms=...)

A run validates the arguments against the schema, calls the function on a worker thread with a time limit,
and turns the return value into text (str as is, else JSON, else repr; cut to `max_output_chars`). Any
exception, a timeout included, becomes `ToolOutcome.error`: the model reads it and may try again. A Python
thread cannot be killed, so a function that runs past its limit is abandoned (it keeps running in the
background until it returns); tools that can stop themselves (`python_tool`) do so.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from typing import Any, overload

from .schema import ToolError, function_schema, validate_arguments

__all__ = ["Tool", "ToolOutcome", "format_output", "tool"]

DEFAULT_TIMEOUT_S = 30.0
MAX_OUTPUT_CHARS = 4000
_JSON_NAMES = {str: "a string", list: "an array", int: "a number", float: "a number", bool: "a boolean"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToolOutcome:
    """What one tool run gave back: output text, or error text (never both), and how long it took."""

    output: str = ""
    error: str = ""
    latency_ms: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the run succeeded."""
        return not self.error


@dataclasses.dataclass(frozen=True, kw_only=True)
class Tool:
    """A callable the model may use: name, description, JSON-schema parameters, and the function itself."""

    name: str
    description: str
    parameters: dict[str, Any]
    """A JSON schema of type "object" (OpenAI's `parameters`, MCP's `inputSchema`)."""
    function: Callable[..., Any] = dataclasses.field(repr=False, compare=False)
    """Called with the arguments as keywords."""
    timeout_s: float | None = DEFAULT_TIMEOUT_S
    """Seconds a run may take (None: no limit)."""
    max_output_chars: int = MAX_OUTPUT_CHARS
    """Longer output is cut to this, with a note saying how much was left out."""

    def __post_init__(self) -> None:
        if not self.name.replace("_", "").replace("-", "").isalnum():
            raise ToolError(f"tool name {self.name!r} must be letters, digits, '_' or '-'; pass name=... to @tool.")
        if not isinstance(self.parameters, dict) or self.parameters.get("type") != "object":
            params = self.parameters
            got = f"type {params.get('type')!r}" if isinstance(params, dict) else _JSON_NAMES.get(type(params), "?")
            raise ToolError(f"tool {self.name!r}: parameters must be a JSON schema with type 'object', got {got}.")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ToolError(f"tool {self.name!r}: timeout_s must be positive (or None for no limit).")

    def spec(self) -> dict[str, Any]:
        """The tool as the model's prompt lists it: {"name", "description", "parameters"}."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (no validation, no time limit)."""
        return self.function(*args, **kwargs)

    def run(self, arguments: Any) -> ToolOutcome:
        """Validate, call with the time limit, and return the output or the error as text; never raises."""
        start = time.perf_counter()
        problem = validate_arguments(self.parameters, arguments)
        if problem:
            return ToolOutcome(error=f"{self.name}: {problem}", latency_ms=_ms(start))
        try:
            value = _call_with_timeout(self.function, arguments, self.timeout_s)
            output = format_output(value, self.max_output_chars)
        except Exception as error:  # a tool's failure is the model's to read, not a crash
            return ToolOutcome(error=_error_text(self.name, error), latency_ms=_ms(start))
        return ToolOutcome(output=output, latency_ms=_ms(start))


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None, timeout_s: float | None = DEFAULT_TIMEOUT_S
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a `Tool` of a typed function: bare `@tool`, or `@tool(name=..., timeout_s=...)`."""

    def make(fn: Callable[..., Any]) -> Tool:
        summary, parameters = function_schema(fn)
        text = description if description is not None else summary
        return Tool(name=name or fn.__name__, description=text, parameters=parameters, function=fn, timeout_s=timeout_s)

    return make if function is None else make(function)


def format_output(value: Any, limit: int = MAX_OUTPUT_CHARS) -> str:
    """A return value as text: str as is, None as "", JSON when it is JSON-able, else repr; cut to `limit`."""
    if isinstance(value, str):
        text = value
    elif value is None:
        text = ""
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(value)
    if len(text) > limit:
        text = f"{text[:limit]}… [{len(text) - limit} more characters cut]"
    return text


class _Timeout(Exception):
    """A tool ran past its time limit."""


class _Failed(Exception):
    """A tool raised (anything, SystemExit included); `cause` is what it raised."""

    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause


def _call_with_timeout(function: Callable[..., Any], arguments: dict[str, Any], timeout_s: float | None) -> Any:
    """Call on a daemon thread and wait up to `timeout_s`; the caller's thread is never blocked for longer."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = function(**arguments)
        except BaseException as error:
            box["error"] = error

    worker = threading.Thread(target=target, name="chatflow-tool", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise _Timeout(f"it ran longer than its {timeout_s:g} s limit and was abandoned")
    if "error" in box:
        raise _Failed(box["error"])
    return box.get("value")


def _error_text(name: str, error: BaseException) -> str:
    """One line for the model: which tool, what kind of error, the message."""
    if isinstance(error, _Timeout):
        return f"{name} timed out: {error}"
    if isinstance(error, _Failed):
        error = error.cause
    message = str(error) or "(no message)"
    return f"{name} failed: {type(error).__name__}: {message}"


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0
