"""What a cell shows while the model loads and its XLA programs compile: one status line, never stderr.

In Jupyter the line is one display updated in place (a text bar while the weights load, a ticking clock while
the first turn compiles); in terminal IPython it prints a line when the stage changes. A kernel's first turn
traces and compiles the model's prefill and decode programs with XLA, which takes seconds (on a first load of the
file, mostly beside the load: `engine/ahead.py`); XLA's cache on disk makes that shorter in later kernels. The line
says so while it happens (which program, for how long: `compile_clock.compiling_now`), and afterwards how long it
took, as the turn's account measured it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from IPython.display import Pretty, display

from jupyter_chatflow.account import TurnAccount
from jupyter_chatflow.engine.loader import ALREADY_LOADED
from jupyter_chatflow.engine.stored import made_ahead, preloaded
from jupyter_chatflow.events import TERMINAL, Event, TokenDelta
from jupyter_chatflow.model.compile_clock import compiling_now

BAR_WIDTH = 20
TICK_S = 0.25  # how often the compile clock redraws
REDRAW_S = 0.1  # the load bar redraws at most this often
MENTION_MS = 50  # XLA compile time below this is not worth a line
SHOW_AFTER_S = 0.5  # after a kernel's first turn, a compile is shown once it has taken this long (a blink is noise)


def bar(fraction: float) -> str:
    """A text progress bar: `▕██████░░░░▏  60 %`."""
    fraction = min(max(fraction, 0.0), 1.0)
    filled = round(fraction * BAR_WIDTH)
    return f"▕{'█' * filled}{'░' * (BAR_WIDTH - filled)}▏ {fraction * 100:3.0f} %"


class StatusLine:
    """One line of status in the cell, "chatflow: " first: a display updated in place (Jupyter), or in a terminal
    a printed line each time the stage changes (`plain`: the words without the bar or clock)."""

    def __init__(self, rich: bool):
        self.rich = rich
        self.text = ""
        self._handle: Any = None
        self._printed: set[str] = set()
        self._lock = threading.Lock()  # the compile clock draws from its own thread

    def show(self, text: str, plain: str | None = None) -> None:
        """Show `text` (Jupyter), or print `plain` (a terminal) unless this line printed it already."""
        with self._lock:
            self.text = f"chatflow: {text}"
            if not self.rich:
                line = f"chatflow: {text if plain is None else plain}"
                if line not in self._printed:
                    print(line, flush=True)
                    self._printed.add(line)
            elif self._handle is None:
                self._handle = display(Pretty(self.text), display_id=True)
            else:
                self._handle.update(Pretty(self.text))

    def clear(self) -> None:
        """Empty the line (Jupyter): what it said is over and nothing took its place. A terminal keeps its lines."""
        with self._lock:
            self.text = ""
            if self.rich and self._handle is not None:
                self._handle.update(Pretty(""))


class LoadProgress:
    """The `load_model(progress=…)` callback drawing the load as a bar on a `StatusLine`."""

    def __init__(self, line: StatusLine, name: str):
        self.line, self.name = line, name
        self.started = time.perf_counter()
        self._drawn = 0.0
        self._stage = ""

    def __call__(self, stage: str, fraction: float) -> None:
        now = time.perf_counter()
        if stage == ALREADY_LOADED:  # nothing to draw: `done` says so
            self._stage = stage
            return
        if stage == self._stage and fraction < 1 and now - self._drawn < REDRAW_S:
            return
        self._stage, self._drawn = stage, now
        text = f"loading {self.name} {bar(fraction)} · {stage} · {now - self.started:.1f} s"
        slow = stage.startswith("dequantizing")  # the one stage long enough to tell a terminal about
        self.line.show(text, f"loading {self.name}: {stage}…" if slow else f"loading {self.name}…")

    def done(self) -> str:
        """The line's last word on the load: how long it took (or that the process had it already)."""
        if self._stage == ALREADY_LOADED:
            summary = f"using {self.name}, {ALREADY_LOADED}"
        else:
            summary = f"loaded {self.name} in {time.perf_counter() - self.started:.1f} s"
        self.line.show(summary)
        return summary


PROGRAMS = {
    "layer": "a prefill layer", "embed_chunk": "the prefill's embedding", "final_norm": "the prefill's last norm",
    "sample_after": "the first token's sampler", "sample_rows_after": "the first tokens' sampler",
    "decode_rows": "the decode step", "decode_step": "the decode step", "write_row": "copying a prompt into its row",
    "read_row": "reading a row back", "select_rows": "resizing the batch", "logits": "the logits",
    "_threefry_seed": "the sampler's random seed", "_threefry_split": "the sampler's random keys",
    "_threefry_fold_in": "the sampler's random keys",
}  # fmt: skip
"""The model's jitted programs (engine/programs.py), and JAX's own the sampler calls, in words."""


def _beside_the_load() -> str:
    """The programs a first load compiled (or loaded) beside it, in words (`engine/ahead.py`); "" when none."""
    count, seconds = made_ahead()
    return f"{count} compiled beside the model's load in {seconds:.1f} s" if count else ""


def compiling(at_least: float = 0.0) -> str:
    """What XLA is compiling now, in words, with the seconds it has taken so far ("" when nothing compiles, or
    nothing for `at_least` seconds): "the decode step (decode_rows), 2.3 s so far"."""
    now = [(name, seconds) for name, seconds in compiling_now() if seconds >= at_least]
    if not now:
        return ""
    name, seconds = max(now, key=lambda item: item[1])
    what = PROGRAMS.get(name, "a small JAX operation" if name.startswith("_") else "a program")
    return f"{what} ({name}), {seconds:.1f} s so far"


class CompileWatch:
    """Around a turn: until its first token, a clock saying what XLA is compiling (always on a kernel's first
    turn, on a later one whenever a compile lasts `SHOW_AFTER_S`); then the compile time the turn's account
    measured, or, where it compiled nothing worth a mention, no trace of the clock."""

    def __init__(
        self, line: StatusLine, account: Callable[[], TurnAccount], *, first_turn: bool, cache: str | None,
        before: str = "", local: bool = True,
    ):  # fmt: skip
        """`account`: the turn's account so far (the cell's view keeps it)."""
        self.line, self.account, self.first_turn, self.cache, self.before = line, account, first_turn, cache, before
        self.local = local  # a remote turn compiles nothing here (a server in this kernel compiles its own)
        self._stop = threading.Event()
        self._started = time.perf_counter()
        self._thread: threading.Thread | None = None
        self._ticked = False  # the clock drew on the line

    def __enter__(self) -> CompileWatch:
        if not self.local:
            return self
        self._tick()
        self._thread = threading.Thread(target=self._run, name="chatflow-compile-clock", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt()
        note = self.summary()
        if note:
            self.line.show(" · ".join(filter(None, [self.before, note])), note)
        elif self._ticked and self.before:  # the clock's last tick must not stay: the line says what it said before
            self.line.show(self.before)
        elif self._ticked:
            self.line.clear()

    def see(self, event: Event) -> None:
        """One of the turn's events; the first token (or the end) stops the clock."""
        if isinstance(event, (TokenDelta, *TERMINAL)):
            self._halt()

    def summary(self) -> str:
        """What XLA compiling cost this turn, from its account ("" when it compiled nothing worth a mention)."""
        account = self.account()
        if account.compile_ms < MENTION_MS:
            return self._ready() if self.first_turn and self.local else ""
        before = account.compile_before_first_ms if account.ttft_ms is not None else None
        first = f", {before / 1000:.1f} s of it before the first token" if before is not None else ""
        why = "the first turn in this kernel" if self.first_turn else "a prompt or answer size new to this kernel"
        cache = f"kept in XLA's cache at {self.cache} for later kernels" if self.cache else "XLA's disk cache is off"
        beside = f", after {ahead}" if self.first_turn and (ahead := _beside_the_load()) else ""
        return (f"XLA compiled the model's programs in {account.compile_ms / 1000:.1f} s{first}{beside} ({why}; "
                f"{cache})")  # fmt: skip

    def _ready(self) -> str:
        """A first turn that compiled nothing: what made its programs ready ("" when nothing did)."""
        count, seconds = preloaded()
        where = f"XLA's cache at {self.cache}" if self.cache else "XLA's cache"
        loaded = f"{count} loaded ahead from {where} in {seconds:.1f} s (compiled by an earlier kernel)"
        ready = ", ".join(filter(None, [_beside_the_load(), loaded if count else ""]))
        return f"the model's programs were ready: {ready}, none compiled by this turn" if ready else ""

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            self._tick()

    def _tick(self) -> None:
        if self._stop.is_set():
            return
        waited = time.perf_counter() - self._started
        now = compiling(at_least=0.0 if self.first_turn else SHOW_AFTER_S)
        if self.first_turn:
            text = "first turn in this kernel: XLA is compiling the model's programs" + (f": {now}" if now else "")
            plain = "first turn in this kernel: XLA is compiling the model's programs (prefill, decode; once)…"
        elif now:
            text, plain = f"XLA is compiling {now} (a shape new to this kernel)", "XLA is compiling…"
        else:
            return
        self._ticked = True
        self.line.show(" · ".join(filter(None, [self.before, f"{text} · {waited:.1f} s"])), plain)

    def _halt(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
            self._thread = None
