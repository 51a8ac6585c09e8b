"""A first turn's programs compiled while the model loads.

A model's programs need only its shapes, which the GGUF's header gives: on a thread of its own, the loader arranges
the header's tensor shapes as the weights will be (`weights.transformer_weights` on `jax.ShapeDtypeStruct`s), builds
an abstract transformer (`nnx.eval_shape`) and prepares its programs (`Programs`: the same architecture key, so the
same shared programs the loaded model then calls).

It runs where the file's weights are not prepared yet, a first load, whose reading and dequantizing take seconds.
Where an earlier process stored a first turn's programs (the weights cache was cleared) they are loaded
(`stored.preload_in_background`); else the programs of a first turn's usual shapes are compiled
(`Programs.first_turn`) beside the load instead of after it. Each then runs once with the loaded weights. A program
asked for meanwhile waits for its compile (`stored._claim`) rather than compiling it twice; a prompt of other shapes
compiles its own as before.

Measured on the default model, cold caches, 2 cores:
docs/results.md#2026-11-29--compiling-while-the-model-loads-issue-37.
`CHATFLOW_COMPILE_AHEAD=off` turns it off (the tests do, but for the ones of this module).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import jax
from flax import nnx

from jupyter_chatflow.model import prepared
from jupyter_chatflow.model.header import read_header
from jupyter_chatflow.model.memory import footprint
from jupyter_chatflow.model.transformer import Transformer
from jupyter_chatflow.model.weights import transformer_weights

from .programs import Programs
from .stored import count_ahead, keep_until_exit, stopping

ENV_VAR = "CHATFLOW_COMPILE_AHEAD"
_log = logging.getLogger(__name__)


def start(model_path: Path, dtype: Any) -> threading.Thread | None:
    """Prepare, on a thread of its own, the programs of the model at `model_path` held as float `dtype` on one
    device, while it loads the file; None when its prepared weights are cached (the load is then a memory-mapped
    read of ~0.5 s, and the stored programs' preload beside it made a warm `chatflow chat` ~0.2 s slower, not
    faster), or when `CHATFLOW_COMPILE_AHEAD=off`."""
    if os.environ.get(ENV_VAR, "").lower() == "off" or prepared.is_cached(model_path):
        return None
    thread = threading.Thread(target=_prepare, args=(model_path, dtype), name="chatflow-ahead", daemon=True)
    keep_until_exit(thread).start()  # (an exit waits for the compile in hand: one stopped inside XLA aborts)
    return thread


def _prepare(model_path: Path, dtype: Any) -> None:
    try:
        config = footprint(model_path).config
        programs = Programs(abstract_transformer(model_path, dtype))
        if programs.preloading:  # (an earlier process's first turn: its programs, loading)
            return
        started = time.perf_counter()
        first_runs = programs.first_turn(config, dtype)
        count_ahead(len(first_runs), time.perf_counter() - started)  # (what a first turn's status line says)
        for first_run in first_runs:
            if stopping():
                return
            first_run()
    except Exception as error:  # (nothing depends on it: the first turn compiles what it needs, as without it)
        _log.debug("did not compile a first turn's programs ahead: %s", error, exc_info=True)


def abstract_transformer(model_path: Path, dtype: Any) -> Transformer:
    """The transformer the file's float weights build, as shapes (`nnx.eval_shape`): from its header alone."""
    config = footprint(model_path).config
    tensors = {t.name: jax.ShapeDtypeStruct(t.shape, dtype) for t in read_header(model_path).tensors}

    def build(tensors: dict[str, Any]) -> Transformer:  # (tracers: arranged as the float arrays would be)
        weights = transformer_weights(config, tensors)
        return Transformer(config, weights | {"rope_freqs": None}, dtype)  # (its tables' shape is the same)

    return nnx.eval_shape(build, tensors)
