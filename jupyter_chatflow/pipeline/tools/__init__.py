"""Tools the model can call: `@tool`, the built-ins, the model's call format, constrained decoding, MCP.

Pieces for the pipeline's tool loop (call → run → result back into the context → resume):

- `Toolbox.builtin(namespace=..., memory=...)` and `toolbox.resolve("calculator,python")` pick the tools;
- `tools_system_prompt(tools, tool_choice=...)` lists them for the model;
- `ToolCallDetector` finds `<tool_call>` in the streamed text; `ToolCallConstraint` masks the tokens of the call
  so its JSON is valid for the tool's schema; `parse_tool_call` reads it;
- `Tool.run(arguments)` returns a `ToolOutcome` (output or error text, never an exception);
- `call_message` and `result_message` put the call and its result into the history.
"""

from __future__ import annotations

from .calculator import CalculatorError, calculator, evaluate
from .calls import (
    CALL_CLOSE,
    CALL_OPEN,
    ToolCallDetector,
    ToolCallError,
    call_message,
    check_tool_choice,
    parse_tool_call,
    result_message,
    tool_role,
    tools_system_prompt,
)
from .constrained import ToolCallConstraint, call_schema
from .mcp_source import MCPSource, mcp_tools
from .memory_tools import MemoryLike, memory_tools
from .python_tool import python_tool, run_code
from .schema import ToolError, function_schema
from .tool import Tool, ToolOutcome, tool
from .toolbox import Toolbox
from .variables import summarize, variable_tool

__all__ = [
    "CALL_CLOSE",
    "CALL_OPEN",
    "CalculatorError",
    "MCPSource",
    "MemoryLike",
    "Tool",
    "ToolCallConstraint",
    "ToolCallDetector",
    "ToolCallError",
    "ToolError",
    "ToolOutcome",
    "Toolbox",
    "calculator",
    "call_message",
    "call_schema",
    "check_tool_choice",
    "evaluate",
    "function_schema",
    "mcp_tools",
    "memory_tools",
    "parse_tool_call",
    "python_tool",
    "result_message",
    "run_code",
    "summarize",
    "tool",
    "tool_role",
    "tools_system_prompt",
    "variable_tool",
]
