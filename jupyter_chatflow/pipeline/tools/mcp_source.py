"""MCP servers as an optional tool source: each tool a server lists becomes a `Tool` that calls it over stdio.

The `mcp` client is async. Jupyter already runs an event loop on the kernel's thread, so the connection gets a
private loop on its own daemon thread; `Tool.run` (on any thread) hands it coroutines and waits for the result.

Example:
    >>> source = MCPSource(["python", "my_server.py"])
    >>> toolbox.add(*source.tools)
    >>> source.close()                        # or use `with MCPSource(...) as source:`
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import re
import tempfile
import threading
from collections.abc import Sequence
from typing import Any

from .schema import ToolError
from .tool import Tool

__all__ = ["MCPSource", "mcp_tools"]


def mcp_tools(command: Sequence[str], *, timeout_s: float = 30.0, env: dict[str, str] | None = None) -> list[Tool]:
    """Start the MCP server `command` (stdio) and return its tools; it stops when the kernel exits."""
    return MCPSource(command, timeout_s=timeout_s, env=env).tools


class MCPSource:
    """One running MCP server (stdio) and the tools it offers."""

    def __init__(self, command: Sequence[str], *, timeout_s: float = 30.0, env: dict[str, str] | None = None):
        if not command:
            raise ToolError("give the MCP server's command line, e.g. ['python', 'server.py'].")
        try:
            import mcp  # noqa: F401 - only to fail early with the install hint
        except ImportError:
            raise ToolError("MCP tools need the mcp package: pip install mcp") from None
        self.command = list(command)
        self.timeout_s = timeout_s
        self._errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed by close()
        """The server's stderr: kept out of the notebook, quoted when the server fails to start."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chatflow-mcp", daemon=True)
        self._thread.start()
        self._closed: asyncio.Event | None = None
        self._session: Any = None
        self._serving = asyncio.run_coroutine_threadsafe(self._serve(env), self._loop)
        self._ready: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()
        try:
            listed = self._ready.result(timeout_s)
        except BaseException:
            self.close()
            raise
        self.tools = [self._wrap(t) for t in listed]
        """The server's tools as `Tool`s."""
        atexit.register(self.close)

    def __enter__(self) -> MCPSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the server and the private event loop (safe to call twice)."""
        if not self._loop.is_running():
            return
        if self._closed is not None:
            self._loop.call_soon_threadsafe(self._closed.set)
            with contextlib.suppress(BaseException):  # shutting down; the server may already be gone
                self._serving.result(5.0)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5.0)
        self._errlog.close()

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Call one of the server's tools and return its text; ToolError when the server reports an error."""
        future = asyncio.run_coroutine_threadsafe(self._session.call_tool(name, arguments), self._loop)
        try:
            result = future.result(self.timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolError(f"the MCP server did not answer within {self.timeout_s:g} s.") from None
        text = "\n".join(_content_text(block) for block in result.content)
        if getattr(result, "is_error", getattr(result, "isError", False)):
            raise ToolError(text or "the MCP tool reported an error.")
        return text

    async def _serve(self, env: dict[str, str] | None) -> None:
        """Open the stdio connection, list the tools, then hold the session open until close()."""
        from mcp import ClientSession, StdioServerParameters, stdio_client

        self._closed = asyncio.Event()
        params = StdioServerParameters(command=self.command[0], args=self.command[1:], env=env)
        try:
            async with stdio_client(params, self._errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                self._session = session
                self._ready.set_result(list(listed.tools))
                await self._closed.wait()
        except Exception as error:
            if not self._ready.done():
                message = f"could not start the MCP server {' '.join(self.command)!r}: {error}{self._stderr_tail()}"
                self._ready.set_exception(ToolError(message))

    def _stderr_tail(self, chars: int = 1000) -> str:
        """The end of what the server wrote to stderr, as a suffix for an error message."""
        self._errlog.flush()
        self._errlog.seek(0)
        text = self._errlog.read()[-chars:].strip()
        return f"; its stderr ends with:\n{text}" if text else ""

    def _wrap(self, listed: Any) -> Tool:
        """A Tool whose run calls the server."""
        schema = getattr(listed, "input_schema", None) or getattr(listed, "inputSchema", None) or {}
        schema = {"type": "object", "properties": {}, **schema}

        def call(**arguments: Any) -> str:
            return self.call(listed.name, arguments)

        return Tool(
            name=re.sub(r"[^A-Za-z0-9_-]", "_", listed.name),  # the server's name stays the one called
            description=listed.description or "",
            parameters=schema,
            function=call,
            timeout_s=self.timeout_s + 1.0,
        )


def _content_text(block: Any) -> str:
    """Text of one content block (images and other media are named, not inlined)."""
    text = getattr(block, "text", None)
    return text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')} content]"
