"""The opt-in `python` tool: the model runs code in the user's kernel namespace, with output captured.

It is never in the default toolbox: running model-written code in your kernel can change or delete anything
the kernel can reach. Turn it on explicitly, e.g. `python_tool(get_ipython().user_ns)`.

The code runs like a notebook cell: statements run in order, the last expression's value is shown (its repr),
and what it prints to stdout/stderr is captured (only this thread's writes; other threads' output still goes
where it went). A watchdog stops the code once it runs past `timeout_s` by raising an exception in the
executing thread, which the interpreter checks between bytecodes, so tight loops stop too.

Limit: code stuck inside one C call that never returns to Python (a huge `10**10**8`, `time.sleep(1e9)`, a
blocking socket read) cannot be stopped this way; the tool's outer time limit then abandons it and reports a
timeout, but it keeps running in the background until the C call returns (and is stopped right after).
"""

from __future__ import annotations

import ast
import ctypes
import io
import sys
import threading
import traceback
from typing import Any, TextIO

from jupyter_chatflow.tools.schema import ToolError
from jupyter_chatflow.tools.tool import MAX_OUTPUT_CHARS, Tool, tool

__all__ = ["python_tool", "run_code"]

_FILENAME = "<tool:python>"


class _Stop(BaseException):
    """Raised in the code's thread at the deadline; a BaseException so that `except Exception` misses it."""


def python_tool(namespace: dict[str, Any], *, timeout_s: float = 10.0, name: str = "python") -> Tool:
    """A tool that runs Python code in `namespace` (the kernel's `user_ns`), stopped after `timeout_s`."""

    def python(code: str) -> str:
        """Run Python code in the user's notebook kernel and return what it printed and its last value.

        Args:
            code: Python statements; the value of a final expression is returned, like a notebook cell.
        """
        return run_code(code, namespace, timeout_s=timeout_s)

    # The outer limit is a backstop for code stuck in C; the watchdog normally stops it first.
    return tool(name=name, timeout_s=timeout_s + 2.0)(python)


def run_code(code: str, namespace: dict[str, Any], *, timeout_s: float = 10.0) -> str:
    """Run `code` in `namespace`; return captured output plus the last expression's repr (ToolError on failure)."""
    try:
        body, last = _compile(code)
    except SyntaxError as error:
        raise ToolError(f"SyntaxError: {error.msg} (line {error.lineno})") from None
    out, err = io.StringIO(), io.StringIO()
    value: Any = None
    try:
        with _captured(out, err), _deadline(timeout_s):
            exec(body, namespace)
            if last is not None:
                value = eval(last, namespace)
    except _Stop:
        raise ToolError(_report(out, err, f"stopped: the code ran longer than its {timeout_s:g} s limit")) from None
    except Exception as error:
        raise ToolError(_report(out, err, _user_traceback(error))) from None
    shown = "" if value is None else _safe_repr(value)
    return _report(out, err, shown) or "(no output)"


def _compile(code: str) -> tuple[Any, Any]:
    """The statements, and the final expression (compiled for eval) when there is one."""
    tree = ast.parse(code, filename=_FILENAME)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        final = tree.body.pop()
        assert isinstance(final, ast.Expr)
        last = compile(ast.Expression(final.value), _FILENAME, "eval")
    return compile(tree, _FILENAME, "exec"), last


def _report(out: io.StringIO, err: io.StringIO, tail: str) -> str:
    """Stdout, stderr (marked) and the tail (value or error), joined and cut to the output bound."""
    parts = [out.getvalue().rstrip("\n")]
    if err.getvalue():
        parts.append("[stderr]\n" + err.getvalue().rstrip("\n"))
    parts.append(tail)
    text = "\n".join(p for p in parts if p)
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    half = MAX_OUTPUT_CHARS // 2  # keep the start and the end (the error or value comes last)
    return f"{text[:half]}\n… [{len(text) - 2 * half} characters cut] …\n{text[-half:]}"


def _user_traceback(error: BaseException) -> str:
    """The traceback from the tool's code down, without this module's frames."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename != __file__]
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(error), error)
    return "Traceback (most recent call last):\n" + "".join(lines).rstrip("\n")


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception as error:
        return f"<{type(value).__name__} whose repr failed: {error}>"


class _deadline:
    """Stop this thread's Python code after `timeout_s`: a watchdog raises _Stop in it, again and again.

    The exception is delivered with `PyThreadState_SetAsyncExc`, checked by the interpreter between bytecodes,
    and repeated every 50 ms so that code which catches it (`except BaseException: pass`) still stops.
    """

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.thread_id = threading.get_ident()
        self.finished = threading.Event()
        self.lock = threading.Lock()
        self.armed = False

    def __enter__(self) -> None:
        self.armed = True
        threading.Thread(target=self._watch, name="chatflow-python-deadline", daemon=True).start()

    def __exit__(self, *exc: object) -> None:
        while True:  # a _Stop may land here too, until the watchdog is disarmed
            try:
                with self.lock:
                    self.armed = False
                    _async_raise(self.thread_id, None)  # drop one that is pending but not yet raised
                self.finished.set()
                return
            except _Stop:
                continue

    def _watch(self) -> None:
        if self.finished.wait(self.timeout_s):
            return
        while True:
            with self.lock:
                if not self.armed:
                    return
                _async_raise(self.thread_id, _Stop)
            if self.finished.wait(0.05):
                return


def _async_raise(thread_id: int, exception: type[BaseException] | None) -> None:
    """Make `exception` be raised in the thread (None: cancel a pending one)."""
    target = None if exception is None else ctypes.py_object(exception)  # None passes NULL
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), target)


class _ThreadStream:
    """Stands in for sys.stdout/stderr: writes from capturing threads go to their buffer, others pass through."""

    def __init__(self, original: TextIO):
        self.original = original
        self.buffers: dict[int, io.StringIO] = {}

    def write(self, text: str) -> int:
        target = self.buffers.get(threading.get_ident())
        return target.write(text) if target is not None else self.original.write(text)

    def flush(self) -> None:
        if threading.get_ident() not in self.buffers:
            self.original.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.original, name)


_ROUTER_LOCK = threading.Lock()


class _captured:
    """Route this thread's writes to sys.stdout/sys.stderr into `out`/`err` for the duration."""

    def __init__(self, out: io.StringIO, err: io.StringIO):
        self.targets = {"stdout": out, "stderr": err}

    def __enter__(self) -> None:
        with _ROUTER_LOCK:
            for stream, buffer in self.targets.items():
                current = getattr(sys, stream)
                if not isinstance(current, _ThreadStream):
                    current = _ThreadStream(current)
                    setattr(sys, stream, current)
                current.buffers[threading.get_ident()] = buffer

    def __exit__(self, *exc: object) -> None:
        with _ROUTER_LOCK:
            for stream in self.targets:
                current = getattr(sys, stream)
                if isinstance(current, _ThreadStream):
                    current.buffers.pop(threading.get_ident(), None)
                    if not current.buffers:
                        setattr(sys, stream, current.original)
