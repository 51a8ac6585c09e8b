"""How much of a thread's time went to XLA compilation, from JAX's own monitoring events.

JAX traces, lowers and compiles a jitted program (or loads it from the persistent compilation cache) on the thread
that first calls it, and reports each phase's duration through `jax.monitoring`. A listener adds them to a
per-thread total, so a caller can read `compile_seconds()` before and after a call and attribute the difference to
that call: the timeline then draws compile time as compile, not as prefill or decode.
"""

from __future__ import annotations

import threading

from jax import monitoring

COMPILE_EVENTS = frozenset({
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",  # includes a persistent-cache load
})  # fmt: skip

_local = threading.local()
_registered = False
_lock = threading.Lock()


def compile_seconds() -> float:
    """Seconds this thread has spent compiling since the clock was installed (it only grows)."""
    install()
    return getattr(_local, "seconds", 0.0)


def install() -> None:
    """Register the listener once per process (idempotent)."""
    global _registered
    with _lock:
        if not _registered:
            monitoring.register_event_duration_secs_listener(_listen)
            _registered = True


def _listen(event: str, duration_secs: float, **_: str | int) -> None:
    if event in COMPILE_EVENTS:
        _local.seconds = getattr(_local, "seconds", 0.0) + duration_secs
