"""MCP servers as a tool source: a tiny stdio server written by the test, listed and called through Tools."""

from __future__ import annotations

import asyncio
import sys
import textwrap

import pytest

from jupyter_chatflow.pipeline.tools import MCPSource, Toolbox, ToolError, mcp_tools

pytest.importorskip("mcp")

SERVER = textwrap.dedent(
    '''
    try:
        from mcp.server.mcpserver import MCPServer as Server
    except ImportError:  # mcp 1.x
        from mcp.server.fastmcp import FastMCP as Server

    server = Server("test")


    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b


    @server.tool()
    def fail(reason: str) -> str:
        """Always fails."""
        raise ValueError(reason)


    if __name__ == "__main__":
        server.run()
    '''
)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("mcp") / "server.py"
    path.write_text(SERVER)
    with MCPSource([sys.executable, str(path)], timeout_s=30.0) as running:
        yield running


def test_lists_and_calls_tools(source):
    tools = {t.name: t for t in source.tools}
    assert set(tools) == {"add", "fail"}
    add = tools["add"]
    assert add.description == "Add two integers."
    assert add.parameters["type"] == "object" and set(add.parameters["required"]) == {"a", "b"}
    assert add.run({"a": 2, "b": 40}).output == "42"
    assert "invalid arguments" in add.run({"a": "two", "b": 1}).error  # checked locally, before the server


def test_server_errors_become_error_results(source):
    fail = next(t for t in source.tools if t.name == "fail")
    outcome = fail.run({"reason": "no luck"})
    assert not outcome.ok and "fail" in outcome.error  # mcp 2 servers hide a crash's message


def test_works_while_an_event_loop_runs_in_this_thread(source):
    add = next(t for t in source.tools if t.name == "add")

    async def inside_a_running_loop():  # as in Jupyter, where the kernel's loop is running
        return add.run({"a": 1, "b": 1})

    assert asyncio.run(inside_a_running_loop()).output == "2"


def test_toolbox_takes_mcp_tools(source):
    box = Toolbox(source.tools)
    assert box.names == [t.name for t in source.tools]


def test_a_server_that_does_not_start_is_a_clear_error(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("raise SystemExit('no server here')")
    with pytest.raises(ToolError, match=r"could not start the MCP server(.|\n)*no server here"):
        mcp_tools([sys.executable, str(broken)], timeout_s=20.0)
    with pytest.raises(ToolError, match="command line"):
        MCPSource([])
