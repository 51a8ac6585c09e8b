"""The compile clock: XLA compile time per thread, and what is compiling while it happens."""

from __future__ import annotations

import threading
import time

import jax
import jax.numpy as jnp

from jupyter_chatflow.model.compile_clock import compile_seconds, compiling_now


def test_what_compiles_is_named_while_it_compiles_and_forgotten_once_done():
    """A view polls `compiling_now` from another thread (the panel's clock, the cell's): it sees the jitted
    function's name and its seconds so far, growing, then nothing."""
    seen: list[list[tuple[str, float]]] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            seen.append(compiling_now())
            time.sleep(0.002)

    @jax.jit
    def many_layers(x):  # long enough to compile that the poll sees it
        for _ in range(80):
            x = jnp.tanh(x @ x.T + 1.0)
        return x

    poller = threading.Thread(target=poll)
    poller.start()
    before = compile_seconds()
    many_layers(jnp.ones((64, 64), jnp.float32) * (time.time() % 1)).block_until_ready()
    stop.set()
    poller.join()
    named = [seconds for now in seen for name, seconds in now if name == "many_layers"]
    assert named and named == sorted(named) and named[-1] > 0  # its seconds so far, growing
    assert compile_seconds() > before and compiling_now() == []
