"""How much of a thread's time went to XLA compilation, and what is compiling now, from JAX's own monitoring events.

JAX traces, lowers and compiles a jitted program (or loads it from the persistent compilation cache) on the thread
that first calls it. It reports each phase's start (`record_scalar`, with the function's name) and its duration
(`record_event_duration_secs`) through `jax.monitoring`. One listener adds the durations to a per-thread total, so
a caller can read `compile_seconds()` before and after a call and attribute the difference to that call: the
timeline then draws compile time as compile, not as prefill or decode. Another keeps, per thread, the program being
compiled and since when, so a view can say what is compiling while it happens (`compiling_now`).
"""

from __future__ import annotations

import threading
import time

from jax import monitoring

COMPILE_EVENTS = frozenset({
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",  # includes a persistent-cache load
})  # fmt: skip

_local = threading.local()
_registered = False
_lock = threading.Lock()
_active: dict[int, tuple[str, float, float | None]] = {}  # thread → (program, began, its last phase's end or None)
JOIN_S = 1.0  # a phase of the same program that begins this soon after the last one ended continues its compile


def compile_seconds() -> float:
    """Seconds this thread has spent compiling since the clock was installed (it only grows)."""
    install()
    return getattr(_local, "seconds", 0.0)


def compiling_now() -> list[tuple[str, float]]:
    """The programs being traced, lowered or compiled right now, one per thread, with the seconds each has taken so
    far (a jitted function's name: `decode_rows`, `layer`, …); [] when nothing compiles."""
    install()
    now = time.monotonic()
    with _lock:
        return [(name, now - since) for name, since, ended in _active.values() if ended is None]


def install() -> None:
    """Register the listeners once per process (idempotent)."""
    global _registered
    with _lock:
        if not _registered:
            monitoring.register_event_duration_secs_listener(_listen)
            monitoring.register_scalar_listener(_began)
            _registered = True


def _began(event: str, value: float, **kwargs: str | int) -> None:
    """A phase of a compile began (its start time is the value): the thread's program, kept from its first phase."""
    if event not in COMPILE_EVENTS:
        return
    name = _program(str(kwargs.get("fun_name", "a program")))
    now = time.monotonic()
    with _lock:
        last = _active.get(threading.get_ident())
        same = last is not None and last[0] == name and (last[2] is None or now - last[2] < JOIN_S)
        _active[threading.get_ident()] = (name, last[1] if same and last else now, None)


def _program(name: str) -> str:
    """A jitted function's name as every phase reports it: `decode_rows` (also `jit(decode_rows)`, `jit_…`)."""
    return name.removeprefix("jit(").removesuffix(")").removeprefix("jit_")


def _listen(event: str, duration_secs: float, **_: str | int) -> None:
    if event in COMPILE_EVENTS:
        _local.seconds = getattr(_local, "seconds", 0.0) + duration_secs
        with _lock:  # a phase ended: nothing compiles on this thread until another begins
            last = _active.get(threading.get_ident())
            if last is not None:
                _active[threading.get_ident()] = (last[0], last[1], time.monotonic())
