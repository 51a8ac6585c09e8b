"""The opt-in python tool, the variable tool and the memory tools."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from jupyter_chatflow.events import Snippet
from jupyter_chatflow.pipeline.tools import Toolbox, memory_tools, python_tool, run_code, summarize, variable_tool
from jupyter_chatflow.pipeline.tools.python_tool import STOP_GRACE_S
from jupyter_chatflow.pipeline.tools.schema import ToolError


def test_runs_in_the_namespace_and_returns_output_and_last_value():
    namespace: dict = {"x": 20}
    python = python_tool(namespace)
    outcome = python.run({"code": "y = x + 1\nprint('y is', y)\ny * 2"})
    assert outcome.ok and outcome.output == "y is 21\n42"
    assert namespace["y"] == 21
    assert python.run({"code": "import sys\nprint('oops', file=sys.stderr)"}).output == "[stderr]\noops"
    assert python.run({"code": "z = 1"}).output == "(no output)"
    assert python.run({"code": "None"}).output == "(no output)"


def test_errors_come_back_as_text_with_the_users_traceback():
    python = python_tool({})
    outcome = python.run({"code": "print('before')\n1 / 0"})
    assert not outcome.ok
    assert "before" in outcome.error and "ZeroDivisionError: division by zero" in outcome.error
    assert "python_tool.py" not in outcome.error and '"<tool:python>", line 2' in outcome.error
    assert "SyntaxError" in python.run({"code": "def ("}).error
    assert "SystemExit: 1" in python.run({"code": "raise SystemExit(1)"}).error


@pytest.mark.parametrize(
    "code",
    [
        "while True:\n    pass",
        "while True:\n    try:\n        x = 1\n    except Exception:\n        pass",
        "def f():\n    return f()\nwhile True:\n    try:\n        f()\n    except BaseException:\n        pass",
    ],
)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # a stop may land in a gc callback
def test_runaway_code_is_stopped(code):
    python = python_tool({}, timeout_s=0.3)
    hook, sys.unraisablehook = sys.unraisablehook, lambda unraisable: None  # (a stop may land in pytest's own hook)
    try:
        start = time.perf_counter()
        outcome = python.run({"code": code})
        assert time.perf_counter() - start < 0.3 + STOP_GRACE_S + 1.0  # the grace bounds even code that catches it
        assert "0.3 s limit" in outcome.error
    finally:
        _wait_for_the_tools_threads(30)  # code that catches the stop may outlive the grace: it is stopped meanwhile
        sys.unraisablehook = hook  # (only once no stop can land any more)


def _wait_for_the_tools_threads(timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(t.name.startswith("chatflow-python") for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(t.name.startswith("chatflow-python") for t in threading.enumerate()), "the code was never stopped"


def test_code_stuck_in_c_is_reported_at_the_grace_and_stopped_once_back_in_python():
    namespace: dict = {}
    start = time.perf_counter()
    with pytest.raises(ToolError, match=r"0.2 s limit and had not ended 1 s later \(stuck in a call"):
        run_code("import time\nprint('before')\ntime.sleep(1.6)\nafter = True", namespace, timeout_s=0.2)
    assert time.perf_counter() - start < 0.2 + STOP_GRACE_S + 1.0
    time.sleep(1.0)  # the sleep has returned by now: the stop landed before the next line
    assert "time" in namespace and "after" not in namespace


@pytest.mark.slow  # ten stops of code that catches them, each waiting out STOP_GRACE_S (10 s)
def test_the_stop_never_lands_in_the_callers_thread():
    catcher = "while True:\n    try:\n        sum(range(100))\n    except BaseException:\n        pass"
    for _ in range(10):  # a stray stop would escape run_code here as a _Stop, not a ToolError
        with pytest.raises(ToolError, match="limit"):
            run_code(catcher, {}, timeout_s=0.02)
    time.sleep(0.1)  # and none arrives later


_TRACE_AFTER_RUNS = """
import sys
import threading
from jupyter_chatflow.pipeline.tools import run_code
from jupyter_chatflow.pipeline.tools.schema import ToolError

print(run_code("1 + 1", {}))
catcher = "while True:\\n    try:\\n        sum(range(100))\\n    except BaseException:\\n        pass"
try:  # stopped while it catches the stop: one may still be pending as the code ends
    run_code(catcher, {}, timeout_s=0.05)
except ToolError as error:
    print(error.args[0].split(":")[0])
for thread in threading.enumerate():  # the code may go on being stopped after the call returns: let it end
    if thread.name.startswith("chatflow-python"):
        thread.join()
calls = []
def traced():
    return 1
sys.settrace(lambda frame, event, arg: calls.append(frame.f_code.co_name) if event == "call" else None)
traced()
sys.settrace(None)
print(calls)
"""


def test_a_tracer_set_after_the_tool_ran_is_not_stuck():
    """No signal is left on once the code has ended: on Python 3.11 one made `sys.settrace` (pdb, coverage) spin
    forever at the next call. In a subprocess, so that a hang fails this test instead of hanging the suite."""
    try:
        result = subprocess.run([sys.executable, "-c", _TRACE_AFTER_RUNS], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("a function call under sys.settrace did not return after the python tool had run")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["2", "stopped", "['traced']"]


def test_output_of_other_threads_is_not_captured(capsys):
    stop = threading.Event()

    def chatter():
        while not stop.is_set():
            sys.stdout.write("other\n")
            time.sleep(0.01)

    thread = threading.Thread(target=chatter)
    thread.start()
    try:
        output = run_code("import time\nfor i in range(3):\n    print(i)\n    time.sleep(0.02)", {})
    finally:
        stop.set()
        thread.join()
    assert output == "0\n1\n2"
    assert "other" in capsys.readouterr().out
    assert type(sys.stdout).__name__ != "_ThreadStream"


def test_run_code_raises_tool_error():
    with pytest.raises(ToolError, match="NameError"):
        run_code("undefined_name", {})


def test_python_is_opt_in():
    box = Toolbox.builtin(namespace={})
    assert "python" in box and "python" not in [t.name for t in box.defaults()]


def test_variable_tool_summaries():
    class Frame:
        shape = (3, 2)
        columns = ("a", "b")

        def __len__(self):
            return 3

        def __repr__(self):
            return "Frame(...)"

    namespace = {"arr": np.arange(12, dtype=np.float32).reshape(3, 4), "df": Frame(), "big": list(range(10**5))}
    namespace.update(_hidden=1, np=np)
    variable = variable_tool(namespace)
    assert summarize(namespace["arr"]) | {"repr": ""} == {
        "type": "numpy.ndarray", "len": 3, "shape": [3, 4], "dtype": "float32", "repr": ""
    }  # fmt: skip
    frame = summarize(namespace["df"])
    assert frame["shape"] == [3, 2] and frame["columns"] == ["a", "b"] and frame["repr"] == "Frame(...)"
    big = summarize(namespace["big"])
    assert big["len"] == 10**5 and len(big["repr"]) < 200 and big["type"] == "list"
    assert '"shape": [3, 4]' in variable.run({"name": "arr"}).output
    missing = variable.run({"name": "nope"})
    assert "no variable named 'nope'" in missing.error and "arr, big, df" in missing.error
    assert "np" not in missing.error.split("variables:")[1] and "_hidden" not in missing.error
    assert not variable.run({"name": "_hidden"}).ok


def test_summary_survives_hostile_objects():
    class Hostile:
        @property
        def shape(self):
            raise RuntimeError("no shape")

        def __len__(self):
            raise RuntimeError("no len")

        def __repr__(self):
            raise RuntimeError("no repr")

    summary = summarize(Hostile())
    assert "shape" not in summary and "len" not in summary and "repr failed" in summary["repr"]


class FakeMemory:
    """Duck-typed like jupyter_chatflow.store.memory.Memory."""

    def __init__(self):
        self.texts: list[str] = []

    def remember(self, text: str) -> int:
        self.texts.append(text)
        return len(self.texts)

    def recall(self, query: str, limit: int = 3) -> list[Snippet]:
        found = [(i + 1, t) for i, t in enumerate(self.texts) if query.lower() in t.lower()]
        return [Snippet(memory_id=i, text=t, score=1.0) for i, t in found[:limit]]


def test_memory_tools():
    memory = FakeMemory()
    remember, recall = memory_tools(memory)
    assert (remember.name, recall.name) == ("remember", "recall")
    assert recall.parameters["required"] == ["query"]
    assert remember.run({"text": "The user's name is Ada."}).output == "Remembered (memory 1)."
    assert recall.run({"query": "name"}).output == "[1] The user's name is Ada."
    assert recall.run({"query": "cats"}).output == "No memories match."
    box = Toolbox.builtin(memory=memory)
    assert [t.name for t in box.resolve(None)] == ["calculator", "remember", "recall"]
