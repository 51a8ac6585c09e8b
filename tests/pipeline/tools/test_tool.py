"""@tool schemas from hints and docstrings, Tool.run's validation/time limit/error capture, and the Toolbox."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Literal

import pytest

from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.pipeline.tools import Tool, Toolbox, ToolError, calculator, tool
from jupyter_chatflow.pipeline.tools.tool import format_output


@tool
def search(query: str, limit: int = 5, mode: Literal["fast", "exact"] = "fast", tags: list[str] | None = None) -> str:
    """Search the notes.

    Longer explanation that belongs to the description too.

    Args:
        query: What to look for,
            over two lines.
        limit (int): How many results.
        mode: Fast or exact.

    Returns:
        The matches.
    """
    return f"{query}:{limit}:{mode}:{tags}"


def test_schema_from_hints_and_docstring():
    assert search.name == "search"
    assert search.description == "Search the notes. Longer explanation that belongs to the description too."
    params = search.parameters
    assert params["type"] == "object" and params["required"] == ["query"] and params["additionalProperties"] is False
    props = params["properties"]
    assert props["query"] == {"type": "string", "description": "What to look for, over two lines."}
    assert props["limit"] == {"type": "integer", "description": "How many results.", "default": 5}
    assert props["mode"]["enum"] == ["fast", "exact"] and props["mode"]["type"] == "string"
    options = [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]
    assert props["tags"] == {"anyOf": options, "default": None}


def test_more_types_and_decorator_options():
    @tool(name="stats", timeout_s=1.0, description="Custom.")
    def f(xs: list[float], flag: bool, table: dict[str, int], anything=None) -> dict:
        return {"n": len(xs)}

    assert f.name == "stats" and f.description == "Custom." and f.timeout_s == 1.0
    props = f.parameters["properties"]
    assert props["xs"] == {"type": "array", "items": {"type": "number"}}
    assert props["flag"] == {"type": "boolean"}
    assert props["table"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert props["anything"] == {"default": None}
    assert f.run({"xs": [1, 2.5], "flag": True, "table": {}}).output == '{"n": 2}'
    assert f([1.0], True, {}) == {"n": 1}  # still callable directly


def test_unsupported_definitions_name_the_fix():
    with pytest.raises(ToolError, match="no JSON schema"):

        @tool
        def bad(x: complex) -> None: ...

    with pytest.raises(ToolError, match="named, typed parameters"):

        @tool
        def star(*args: int) -> None: ...

    with pytest.raises(ToolError, match="name"):
        tool(name="has space")(lambda: None)
    assert issubclass(ToolError, ChatflowError)


def test_run_validates_arguments_with_clear_errors():
    assert search.run({"query": "jax"}).output == "jax:5:fast:None"
    missing = search.run({})
    assert not missing.ok and "'query' is a required property" in missing.error and missing.output == ""
    wrong = search.run({"query": "x", "limit": "many"})
    assert "at 'limit'" in wrong.error and "'many' is not of type 'integer'" in wrong.error
    assert "not one of" in search.run({"query": "x", "mode": "slow"}).error
    assert "Additional properties" in search.run({"query": "x", "extra": 1}).error
    assert "must be a JSON object" in search.run(["x"]).error


def test_a_raising_tool_becomes_an_error_result():
    @tool
    def broken(x: int) -> int:
        """Always fails."""
        raise ValueError(f"cannot handle {x}")

    @tool
    def exits() -> None:
        """Calls sys.exit."""
        raise SystemExit(3)

    outcome = broken.run({"x": 7})
    assert outcome.error == "broken failed: ValueError: cannot handle 7" and outcome.latency_ms >= 0
    assert "SystemExit" in exits.run({}).error


def test_timeout_returns_promptly():
    @tool(timeout_s=0.2)
    def slow() -> str:
        """Sleeps."""
        time.sleep(3)
        return "done"

    start = time.perf_counter()
    outcome = slow.run({})
    assert time.perf_counter() - start < 1.5
    assert "timed out" in outcome.error and "0.2 s" in outcome.error


def test_output_conversion_and_truncation():
    assert format_output("text") == "text"
    assert format_output(None) == ""
    assert format_output({"a": [1, 2]}) == '{"a": [1, 2]}'
    assert format_output({1, 2}) in ("{1, 2}", "{2, 1}")
    cut = format_output("x" * 5000, 100)
    assert cut.startswith("x" * 100) and "4900 more characters cut" in cut

    @tool
    def huge() -> str:
        """Too much output."""
        return "y" * 100_000

    assert len(huge.run({}).output) < 4100


def test_tool_validates_itself():
    with pytest.raises(ToolError, match="type 'object'"):
        Tool(name="t", description="", parameters={"type": "string"}, function=lambda: 0)
    with pytest.raises(ToolError, match="positive"):
        Tool(name="t", description="", parameters={"type": "object"}, function=lambda: 0, timeout_s=0)
    assert calculator.spec()["name"] == "calculator"


def test_toolbox_resolve():
    namespace: dict = {"x": 1}
    box = Toolbox.builtin(namespace=namespace)
    assert [t.name for t in box.resolve(None)] == ["calculator", "variable"]
    assert [t.name for t in box.resolve("calculator, python")] == ["calculator", "python"]
    assert [t.name for t in box.resolve(["default", "python", "calculator"])] == ["calculator", "variable", "python"]
    assert box.resolve("none") == []
    with pytest.raises(ToolError, match=r"unknown tool\(s\) 'shell'; known tools: calculator, variable, python"):
        box.resolve("calculator,shell")
    with pytest.raises(ToolError, match="known tools"):
        box["nope"]


def test_toolbox_add_and_replace():
    box = Toolbox()
    assert "calculator" not in box and len(box) == 0

    def greet(name: str) -> str:
        """Say hello."""
        return f"hi {name}"

    added = box.add(greet)
    assert added.name == "greet" and box["greet"].run({"name": "Ada"}).output == "hi Ada"
    box.add(tool(name="greet")(lambda name: "replaced"))
    assert box.names == ["greet"] and box["greet"].run({"name": "x"}).output == "replaced"
    box.remove("greet")
    assert box.names == []


@pytest.mark.slow  # a fresh Python that imports JAX and the package: seconds of CPU before the test starts
def test_a_process_first_tool_run_does_not_wait_for_imports():
    """Registering tools imports the argument validator (jsonschema, ~0.9 s), in the registering thread (a
    background thread raced cell compiles on Python 3.11.7): the first run of a fresh process was ~0.9-1.7 s of
    `tool_result` latency for a one-line calculation."""
    code = (
        "import sys, threading\n"
        "from jupyter_chatflow.pipeline.tools import Toolbox\n"
        "box = Toolbox.builtin()\n"
        "assert not [t for t in threading.enumerate() if t.name == 'chatflow-jsonschema']\n"
        "print('jsonschema.validators' in sys.modules, box['calculator'].run({'expression': '17*23'}).latency_ms)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    imported, latency_ms = done.stdout.split()
    assert imported == "True" and float(latency_ms) < 100.0


@pytest.mark.slow  # a fresh Python that imports JAX and the package
def test_a_tool_run_without_a_toolbox_skips_the_iri_grammars():
    """A tool run on its own (`python_tool(...).run`) imported jsonschema at its first validation, with
    `rfc3987_syntax` building 38 Lark grammars: 2.2 s here, 3.5 s on CI, counted in the tool's latency."""
    code = (
        "import sys\n"
        "from jupyter_chatflow.pipeline.tools import calculator\n"
        "outcome = calculator.run({'expression': '17*23'})\n"
        "print(repr(outcome.output), 'rfc3987_syntax' in sys.modules, outcome.latency_ms)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    output, grammars, latency_ms = done.stdout.rsplit(maxsplit=2)
    assert output == "'17*23 = 391'" and grammars == "False" and float(latency_ms) < 1000.0
