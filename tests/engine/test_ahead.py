"""A first turn's programs compiled while the model loads (`engine/ahead.py`): the abstract transformer built from a
file's header has the loaded one's architecture, for every supported family, and a first turn after it compiles
none of the programs prepared ahead."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np
import pytest

from jupyter_chatflow import SamplingParams, load_model
from jupyter_chatflow.engine import ahead, programs, stored
from jupyter_chatflow.engine.chunks import MID_CHUNK, MIN_BUCKET
from jupyter_chatflow.engine.programs import Programs, architecture_of
from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.model.memory import footprint
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf

ARCHS = Path(__file__).parents[1] / "model" / "archs"
FAMILIES = ["llama", "llama3-rope", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "phi3-partial", "phi3-longrope"]


@pytest.mark.parametrize("name", FAMILIES)
def test_the_header_alone_gives_the_loaded_models_architecture(name):
    path = ARCHS / f"{name}.gguf"
    _same_programs(load_model(path, dtype="float32"), path)


def test_and_its_weights_dtype(tiny_path):
    model = load_model(tiny_path, dtype="bfloat16")
    assert "bfloat16" in {str(w.dtype) for w in _same_programs(model, tiny_path).weights}


def _same_programs(model, path: Path) -> Programs:
    """The abstract transformer's programs, checked to be the loaded model's: the same architecture, and weights of
    the same shapes and dtypes, in the same order (the signatures its programs were compiled for)."""
    transformer = ahead.abstract_transformer(path, model.runner.dtype)
    assert architecture_of(transformer) == architecture_of(model.runner.transformer)  # (their stored programs' key)
    abstract, loaded = Programs(transformer), Programs(model.runner.transformer)
    assert abstract.architecture == loaded.architecture  # (one set of programs in this process)
    assert [(w.shape, w.dtype) for w in abstract.weights] == [(w.shape, w.dtype) for w in loaded.weights]
    return abstract


@pytest.fixture
def cold(tmp_path, monkeypatch):
    """Compiling ahead on, with an empty store of programs (a first load on a new machine)."""
    monkeypatch.setenv(ahead.ENV_VAR, "on")
    monkeypatch.setattr(stored, "programs_folder", lambda: tmp_path / "programs")
    return tmp_path


def _joined_ahead() -> None:
    for thread in threading.enumerate():
        if thread.name == "chatflow-ahead":
            thread.join(timeout=120)


GREEDY = SamplingParams(temperature=0.0, max_tokens=6, ignore_eos=True)
FIRST_TURN = {"embed_chunk", "layer", "final_norm", "write", "sample_after", "decode_rows", "write_row", "set_row"}


def test_a_first_turn_after_the_load_compiles_nothing_prepared_ahead(cold, caplog):
    caplog.set_level(logging.DEBUG, logger="jupyter_chatflow.engine.stored")
    path = write_tiny_gguf(cold / "ahead.gguf", TinySpec(n_layers=3, seed=11))  # (an architecture of its own)
    model = load_model(path, dtype="float32")
    _joined_ahead()
    assert _compiled(caplog, "chatflow-ahead") == FIRST_TURN
    caplog.clear()

    prompt = list(range(100, 130))  # (17-64 tokens: one middle chunk, as a first chat turn's prompt)
    assert MIN_BUCKET < len(prompt) <= MID_CHUNK
    with Scheduler(model, max_batch=2) as scheduler:  # (a chat's: its row takes the prefilled prompt)
        tokens = [s.token_id for s in scheduler.submit(np.array(prompt), GREEDY)]
    assert not _compiled(caplog) & FIRST_TURN
    assert tokens == _argmax_chain(model, prompt, 6)  # (the whole-prompt logits program: not one prepared ahead)


def _compiled(caplog, thread: str | None = None) -> set[str]:
    """The programs compiled (by `thread`, or any) in the records captured."""
    return {r.getMessage().split()[1] for r in caplog.records
            if r.getMessage().startswith("compiled ") and thread in (None, r.threadName)}  # fmt: skip


def _argmax_chain(model, prompt: list[int], n: int) -> list[int]:
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(np.asarray(model.logits(ids))[-1].argmax()))
    return ids[len(prompt) :]


def test_an_exiting_interpreter_does_not_wait_for_the_compiles(cold, monkeypatch, caplog):
    """The exit waits for the thread (a compile stopped inside XLA aborts the process): it stops between programs."""
    caplog.set_level(logging.DEBUG, logger="jupyter_chatflow.engine.stored")
    path = write_tiny_gguf(cold / "exiting.gguf", TinySpec(n_layers=3, seed=13))
    monkeypatch.setattr(programs, "stopping", lambda: True)
    assert Programs(ahead.abstract_transformer(path, np.float32)).first_turn(footprint(path).config, np.float32) == []
    assert not _compiled(caplog)


def test_off_starts_nothing(tiny_path, monkeypatch):
    monkeypatch.setenv(ahead.ENV_VAR, "off")
    assert ahead.start(tiny_path, np.float32) is None


def test_a_file_it_cannot_arrange_is_left_to_the_load(cold, caplog):
    broken = cold / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    thread = ahead.start(broken, np.float32)
    assert thread is not None
    thread.join(timeout=30)
    assert not thread.is_alive()  # (it ended quietly: the load itself says what is wrong with the file)
