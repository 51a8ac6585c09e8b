"""The magics in a real notebook: nbclient runs cells on an ipykernel and we watch the kernel's messages.

Two kernels in all (each loads the model once): the first streams an answer, is interrupted mid-answer and
starts a named session; the second, a fresh process as after Kernel → Restart, continues that session.
"""

from __future__ import annotations

import asyncio
import html
import os
import re
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from jupyter_client.kernelspec import KernelSpec  # noqa: E402
from jupyter_client.manager import AsyncKernelManager  # noqa: E402

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CELL_TIMEOUT_S = 120  # per cell: a hang fails the test instead of blocking CI
INTERRUPT_AFTER_REDRAWS = 3  # redraws of the long answer with some of its text, seen before Kernel → Interrupt

LOAD = "%load_ext jupyter_chatflow"
SHORT = "%%chat --temperature 0 --max-tokens 40\nWhat is the capital of France?"
LONG = "%%chat --temperature 0.8 --seed 1 --max-tokens 400\nWrite a long story about a dragon who learns to bake bread."
ALIVE = "print('still alive', 6 * 7)"
WHERE = "import sys, jupyter_chatflow\nprint(sys.executable, jupyter_chatflow.__file__, sep='\\n')"
SESSION = "%%chat --session nbtest --temperature 0 --max-tokens 20\nWhat is the capital of France?"
HISTORY = "%chat_history nbtest"
HISTORY_DEFAULT = "%chat_history default"
SESSION_AGAIN = "%%chat --session nbtest --temperature 0 --max-tokens 20\nAnd of Italy?"


class _ThisPython(AsyncKernelManager):
    """An IPython kernel on the interpreter running pytest, whatever kernel specs are installed."""

    @property
    def kernel_spec(self) -> KernelSpec:
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        return KernelSpec(argv=argv, display_name="chatflow tests", language="python", interrupt_mode="signal")


@dataclass(frozen=True)
class Message:
    """One iopub message of a cell, as it arrived."""

    cell: int
    type: str
    display_id: str | None
    content: dict[str, Any]
    at: float


class RecordingClient(nbclient.NotebookClient):
    """A NotebookClient that keeps every iopub message and can interrupt the kernel while a cell streams."""

    def __init__(self, nb: Any, **kw: Any):
        super().__init__(nb, kernel_manager_class=_ThisPython, allow_errors=True, timeout=CELL_TIMEOUT_S, **kw)
        self.messages: list[Message] = []
        self.interrupt_cell: int | None = None
        self.interrupted = threading.Event()
        self._streaming = threading.Event()

    def process_message(self, msg: dict[str, Any], cell: Any, cell_index: int) -> Any:
        transient = msg["content"].get("transient") or {}
        self.messages.append(
            Message(cell_index, msg["msg_type"], transient.get("display_id"), msg["content"], time.monotonic())
        )
        if cell_index == self.interrupt_cell and not self._streaming.is_set() and self._has_streamed(cell_index):
            self._streaming.set()
            threading.Thread(target=self._interrupt, args=(asyncio.get_running_loop(),), daemon=True).start()
        return super().process_message(msg, cell, cell_index)

    def _has_streamed(self, cell: int) -> bool:
        """True once enough redraws carried answer text (not just the "…" placeholder)."""
        redraws = [m for m in self.updates(cell) if answer_of(m.content["data"]["text/markdown"]) != "…"]
        return len(redraws) >= INTERRUPT_AFTER_REDRAWS

    def _interrupt(self, loop: asyncio.AbstractEventLoop) -> None:
        """From another thread, as a user pressing Kernel → Interrupt while the answer streams."""
        assert self.km is not None
        asyncio.run_coroutine_threadsafe(self.km.interrupt_kernel(), loop).result(timeout=30)
        self.interrupted.set()

    def updates(self, cell: int, kind: str = "text/markdown") -> list[Message]:
        """The cell's update_display_data messages of one kind (the answer: Markdown; the status line: plain)."""
        return [
            m
            for m in self.messages
            if m.cell == cell and m.type == "update_display_data" and _kind(m.content["data"]) == kind
        ]

    def idle_at(self, cell: int) -> float:
        """When the kernel went idle after the cell (the cell finished)."""
        return next(m.at for m in self.messages if m.cell == cell and m.type == "status" and _is_idle(m))


def _kind(data: dict[str, Any]) -> str:
    return "text/markdown" if "text/markdown" in data else "text/plain"


def _is_idle(message: Message) -> bool:
    return message.content.get("execution_state") == "idle"


def run_notebook(sources: list[str], db: Path, *, interrupt_cell: int | None = None) -> RecordingClient:
    """Execute the cells in a fresh kernel whose database is `db`; returns the client (notebook and messages)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])
    client = RecordingClient(nb, startup_timeout=60, shutdown_kernel="immediate")
    client.interrupt_cell = interrupt_cell
    env = {
        **os.environ,
        "CHATFLOW_DB": str(db),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    client.execute(env=env)
    return client


def markdown(cell: Any) -> str:
    """The Markdown the cell's chat display shows now (after every in-place update)."""
    shown = [o["data"]["text/markdown"] for o in cell.outputs if "text/markdown" in o.get("data", {})]
    assert len(shown) == 1, f"expected one chat display, got outputs {cell.outputs}"
    return shown[0]


def text_of(cell: Any) -> str:
    """Everything the cell printed (stdout and stderr)."""
    return "".join(o["text"] for o in cell.outputs if o["output_type"] == "stream")


def assert_no_error(cell: Any) -> None:
    errors = [o for o in cell.outputs if o["output_type"] == "error"]
    assert not errors, f"cell {cell.source!r} raised: {errors}"
    assert "Traceback" not in text_of(cell), text_of(cell)


def answer_of(markdown_text: str) -> str:
    """The answer part of a chat display's Markdown (before the pipeline details), as text."""
    answer = markdown_text.split("<details>")[0]
    return html.unescape(re.sub(r"<[^>]+>", "", answer)).strip()


def details_of(markdown_text: str) -> list[str]:
    """The pipeline details' lines."""
    return [html.unescape(line) for line in re.findall(r"<li>(.*?)</li>", markdown_text)]


def status_of(cell: Any) -> str:
    """The status line the cell shows now (loading, compiling): its only plain-text display."""
    shown = [o["data"]["text/plain"] for o in cell.outputs if set(o.get("data", {})) == {"text/plain"}]
    assert len(shown) == 1, f"expected one status line, got outputs {cell.outputs}"
    return shown[0]


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("chatflow") / "chatflow.db"


@pytest.fixture(scope="module")
def first_kernel(real_model_path, db) -> RecordingClient:
    """One kernel: a short answer, a long answer interrupted mid-stream, a live cell, a named session's turn."""
    return run_notebook([LOAD, SHORT, LONG, ALIVE, SESSION, WHERE], db, interrupt_cell=2)


def test_kernel_runs_this_python_and_this_checkout(first_kernel):
    executable, package = text_of(first_kernel.nb.cells[5]).splitlines()
    assert Path(executable).resolve() == Path(sys.executable).resolve()
    assert Path(package).resolve().parent == REPO / "jupyter_chatflow"


def test_chat_cell_streams_into_one_display_updated_in_place(first_kernel):
    cell, updates = first_kernel.nb.cells[1], first_kernel.updates(1)
    assert_no_error(cell)
    shown = markdown(cell)
    assert "Paris" in answer_of(shown)
    assert "<details><summary>pipeline · session default (no --session: shared by every %%chat" in shown
    details = details_of(shown)
    assert details[0] == "session: default (no --session: shared by every %%chat without one)", details
    assert any(re.match(r"context: [\d,]+/[\d,]+ tokens in the prompt \(system \d+", line) for line in details), details
    assert any(re.match(r"tokens: \d+ tokens generated: \d+ in the answer", line) for line in details), details
    assert any(re.match(r"speed: first token .* · \w+", line) for line in details), details
    display_id = next(
        m.display_id
        for m in first_kernel.messages
        if m.cell == 1 and m.type == "display_data" and "text/markdown" in m.content["data"]
    )
    assert display_id and all(m.display_id == display_id for m in updates)
    # several redraws while tokens arrived, the answer growing, all before the cell finished
    answers = [answer_of(m.content["data"]["text/markdown"]) for m in updates]
    assert len(set(answers)) >= 3, answers
    assert len(answers[0]) < len(answers[-1])
    assert updates[-1].at <= first_kernel.idle_at(1)
    assert answers[-1] == answer_of(shown)


def test_the_sessions_title_arrives_after_the_answer_and_updates_its_display(first_kernel):
    """The first turn of the session "default": the cell ends with the answer; the title, written after it, is
    drawn into the same display when it arrives (while the next cell runs)."""
    cell = first_kernel.nb.cells[1]
    titled = [
        m for m in first_kernel.messages
        if m.type == "update_display_data" and "title: " in m.content["data"].get("text/markdown", "")
    ]  # fmt: skip
    assert titled, "the session's title never reached the cell"
    assert titled[0].at > first_kernel.idle_at(1)  # the cell did not wait for it
    title = next(line for line in details_of(markdown(cell)) if line.startswith("title: "))
    assert 2 <= len(title.removeprefix("title: ").split()) <= 6, title
    assert "France" in title or "Paris" in title or "Capital" in title, title


def test_first_turn_shows_loading_and_compiling_in_the_cell_not_on_stderr(first_kernel):
    """The kernel's first %%chat: a bar while the weights load, a clock while XLA compiles, then the measured
    compile time, in one plain-text display above the answer; nothing on stderr."""
    cell = first_kernel.nb.cells[1]
    assert not [o for o in cell.outputs if o.get("name") == "stderr"], cell.outputs
    kinds = [_kind(o["data"]) for o in cell.outputs if "data" in o]
    assert kinds == ["text/plain", "text/markdown"], kinds  # the status line above the answer
    drawn = [m.content["data"]["text/plain"] for m in first_kernel.updates(1, "text/plain")]
    assert any(re.search(r"chatflow: loading \S+\.gguf ▕[█░]+▏ +\d+ %", text) for text in drawn), drawn
    assert any("XLA is compiling the model's programs" in text for text in drawn), drawn
    final = status_of(cell)
    compiled = (r"XLA compiled the model's programs in \d+\.\d s, \d+\.\d s of it before the first token "
                r"\(the first turn in this kernel; .*\)")  # fmt: skip
    ready = (
        r"the model's programs were ready: \d+ loaded ahead from XLA's cache at .* in \d+\.\d s "
        r"\(compiled by an earlier kernel\), none compiled by this turn"
    )  # (an earlier test's kernel compiled them)
    assert re.fullmatch(rf"chatflow: loaded \S+\.gguf in \d+\.\d s · ({compiled}|{ready})", final), final


def test_interrupt_stops_the_answer_and_keeps_it(first_kernel):
    assert first_kernel.interrupted.is_set(), "the long answer ended before it could be interrupted"
    cell = first_kernel.nb.cells[2]
    assert_no_error(cell)
    shown = markdown(cell)
    answer = answer_of(shown)
    assert answer.endswith(" [stopped]"), shown
    assert len(answer.split()) >= 3, shown  # the partial answer is kept
    assert any(re.fullmatch(r"speed: .*· stopped|finish: stopped", line) for line in details_of(shown)), shown
    alive = first_kernel.nb.cells[3]
    assert_no_error(alive)
    assert text_of(alive) == "still alive 42\n"


def test_session_continues_after_kernel_restart(first_kernel, db):
    first = first_kernel.nb.cells[4]
    assert_no_error(first)
    first_answer = answer_of(markdown(first))
    restarted = run_notebook([LOAD, HISTORY, SESSION_AGAIN, HISTORY_DEFAULT], db)
    history, again, interrupted = restarted.nb.cells[1:4]
    assert_no_error(history)
    printed = text_of(history)
    assert "[0] user: What is the capital of France?" in printed, printed
    assert "Paris" in printed and "Paris" in first_answer
    assert_no_error(again)
    context = r"context: [\d,]+/[\d,]+ tokens in the prompt \(system \d+ \+ history \d+ \+ user \d+"
    assert any(re.match(context, line) for line in details_of(markdown(again))), markdown(again)
    # the interrupted turn of the first kernel was kept, marked as such
    assert re.search(r"^\[1\] user: Write a long story", text_of(interrupted), re.M), text_of(interrupted)
    assert "[cancelled]" in text_of(interrupted)
