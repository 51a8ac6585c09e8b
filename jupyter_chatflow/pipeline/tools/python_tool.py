"""The opt-in `python` tool: the model runs code in the user's kernel namespace, with output captured.

It is never in the default toolbox: running model-written code in your kernel can change or delete anything
the kernel can reach. Turn it on explicitly, e.g. `python_tool(get_ipython().user_ns)`.

The code runs like a notebook cell: statements run in order, the last expression's value is shown (its repr),
and what it prints to stdout/stderr is captured (only the code's writes; other threads' output still goes
where it went). The code runs on a thread of its own; once it runs past `timeout_s`, an exception is raised in
that thread again and again (the interpreter checks for it at function entries and loop back-edges), so tight
loops stop too, and so do loops that catch it, once it lands outside their `try`. The caller never receives it.

Limit: code stuck inside one C call that never returns to Python (a huge `10**10**8`, `time.sleep(1e9)`, a
blocking socket read) cannot be stopped this way. The call returns `STOP_GRACE_S` after the limit all the same,
reporting the code stopped; the code goes on being stopped in the background and ends once it is back in Python.
"""

from __future__ import annotations

import ast
import ctypes
import io
import sys
import threading
import traceback
from typing import Any, TextIO

from .schema import ToolError
from .tool import MAX_OUTPUT_CHARS, Tool, tool

__all__ = ["python_tool", "run_code"]

_FILENAME = "<tool:python>"
STOP_EVERY_S = 0.005  # how often the stop is raised again in code that runs past its limit
STOP_GRACE_S = 1.0  # how long the caller waits for such code to end before reporting it stopped
_NOT_ENDED = "stuck in a call that does not return to Python, or catching the stop: it is stopped in the background"


class _Stop(BaseException):
    """Raised in the code's thread at the deadline; a BaseException so that `except Exception` misses it."""


class _Settled(BaseException):
    """Raised in the code's thread by itself once it has ended, to take the place of a stop still pending."""


def _checkpoint() -> None:
    """Nothing: entering a Python function is where the interpreter delivers a pending async exception."""


def python_tool(namespace: dict[str, Any], *, timeout_s: float = 10.0, name: str = "python") -> Tool:
    """A tool that runs Python code in `namespace` (the kernel's `user_ns`), stopped after `timeout_s`."""

    def python(code: str) -> str:
        """Run Python code in the user's notebook kernel and return what it printed and its last value.

        Args:
            code: Python statements; the value of a final expression is returned, like a notebook cell.
        """
        return run_code(code, namespace, timeout_s=timeout_s)

    # The outer limit is a backstop: run_code itself returns at most STOP_GRACE_S after the code's limit.
    return tool(name=name, timeout_s=timeout_s + STOP_GRACE_S + 1.0)(python)


def run_code(code: str, namespace: dict[str, Any], *, timeout_s: float = 10.0) -> str:
    """Run `code` in `namespace`; return captured output plus the last expression's repr (ToolError on failure).

    The code runs on a thread of its own, so the exception that stops it can never land in the caller's."""
    try:
        body, last = _compile(code)
    except SyntaxError as error:
        raise ToolError(f"SyntaxError: {error.msg} (line {error.lineno})") from None
    run = _Run(body, last, namespace)
    run.start()
    ended = run.wait(timeout_s)
    if run.stopped or not ended:
        stopped = f"stopped: the code ran longer than its {timeout_s:g} s limit"
        if not ended:
            stopped += f" and had not ended {STOP_GRACE_S:g} s later ({_NOT_ENDED})"
        raise ToolError(_report(run.out, run.err, stopped))
    if run.error is not None:
        raise ToolError(_report(run.out, run.err, _user_traceback(run.error)))
    shown = "" if run.value is None else _safe_repr(run.value)
    return _report(run.out, run.err, shown) or "(no output)"


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


class _Run:
    """The code on its own thread, stopped at its deadline by raising _Stop in that thread.

    The exception is delivered with `PyThreadState_SetAsyncExc`, which the interpreter checks at function entries
    and loop back-edges; it is raised again every few milliseconds until the thread has ended, so code that
    catches it (`except BaseException: pass` in a loop) stops too, once one lands outside its `try`. The caller
    waits at most `STOP_GRACE_S` past the deadline: code still running then (stuck in C, or catching the stop
    again and again) is reported as stopped and goes on being stopped in the background.
    """

    def __init__(self, body: Any, last: Any, namespace: dict[str, Any]):
        self.body, self.last, self.namespace = body, last, namespace
        self.out, self.err = io.StringIO(), io.StringIO()
        self.value: Any = None
        self.error: BaseException | None = None
        self.stopped = False
        self.running = False  # a _Stop is raised in the thread only while this is set (checked under the lock)
        self.lock = threading.Lock()
        self.finished = threading.Event()
        self.thread = threading.Thread(target=self._main, name="chatflow-python", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def wait(self, timeout_s: float) -> bool:
        """Wait for the code; at `timeout_s` start stopping it; False if it still runs `STOP_GRACE_S` later."""
        if self.finished.wait(timeout_s):
            return True
        threading.Thread(target=self._stop, name="chatflow-python-stop", daemon=True).start()
        return self.finished.wait(STOP_GRACE_S)

    def _stop(self) -> None:
        while True:
            with self.lock:
                if self.running:
                    _async_raise(self.thread.ident or 0, _Stop)
            if self.finished.wait(STOP_EVERY_S):
                return

    def _main(self) -> None:
        try:
            with _captured(self.out, self.err):
                self._execute()
        finally:
            self.finished.set()

    def _execute(self) -> None:
        try:
            self.running = True
            exec(self.body, self.namespace)
            if self.last is not None:
                self.value = eval(self.last, self.namespace)
        except _Stop:
            self.stopped = True
        except BaseException as error:  # SystemExit too: the code's error, reported like any other
            self.error = error
        finally:
            # Inline, before any call (calls are where a _Stop lands): from here the stopper raises at most once
            # more, and one may be pending already; one that lands before _settle has replaced it is caught here.
            self.running = False
            while True:
                try:
                    self._settle()
                    break
                except _Stop:
                    pass

    def _settle(self) -> None:
        """End with no exception pending for this thread, and the interpreter's "async exception" signal off.

        Cancelling with `PyThreadState_SetAsyncExc(id, NULL)` is not enough: in CPython 3.11 and 3.12 that call
        turns on the interpreter-wide signal as well, and only an exception delivered turns it off. Left on, it
        sends every thread to the eval breaker at each call and loop from then on, and on 3.11 a tracer
        (`sys.settrace`: pdb, coverage) then spins forever at the next function entry. So a pending stop is
        replaced by a marker, which is delivered and caught here; its signal is set again until it arrives, in case
        another thread's delivery turned it off first.
        """
        while True:
            try:
                with self.lock:  # a raise in progress has finished, and none follows (running is unset)
                    _async_raise(threading.get_ident(), _Settled)
                _checkpoint()
            except _Settled:
                return


def _async_raise(thread_id: int, exception: type[BaseException]) -> None:
    """Make `exception` be raised in the thread at its next check (replacing one still pending there)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exception))


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
