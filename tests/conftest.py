"""Shared fixtures: a tiny random-weight GGUF model for fast tests, the real default model for integration."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from jupyter_chatflow.errors import ModelNotFoundError
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"
# Tests do not write prepared-weight caches into the home folder; test_prepared.py turns it on in a tmp dir.
os.environ["CHATFLOW_WEIGHTS_CACHE"] = "off"
# Nor do they touch the user's database (memories, sessions, the request log): one scratch file per test run.
os.environ["CHATFLOW_DB"] = os.path.join(tempfile.mkdtemp(prefix="chatflow-tests-"), "chatflow.db")


@pytest.fixture(scope="session")
def tiny_path(tmp_path_factory) -> Path:
    """A tiny random Llama (2 layers, dim 64, byte-level vocabulary) as a real GGUF file."""
    return write_tiny_gguf(tmp_path_factory.mktemp("tiny") / "tiny.gguf")


@pytest.fixture(scope="session")
def tiny_model(tiny_path):
    """The tiny model loaded through the public loader, float32."""
    from jupyter_chatflow import load_model

    return load_model(tiny_path, dtype="float32")


@pytest.fixture(scope="session")
def real_model_path() -> Path:
    """The default model's GGUF file (installed by the README's test command)."""
    from jupyter_chatflow.model.files import default_model_path

    try:
        return default_model_path()
    except ModelNotFoundError as error:
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def real_model(real_model_path):
    """SmolLM2-135M-Instruct, loaded once for the whole session."""
    from jupyter_chatflow import load_model

    return load_model(real_model_path)


@pytest.fixture(scope="session")
def greedy_reference() -> dict:
    """Hugging Face transformers float32 greedy outputs for three chat prompts (shared/reference)."""
    path = REFERENCE / "greedy_f32.json"
    if not path.exists():
        pytest.skip(f"reference outputs not found at {path}")
    return json.loads(path.read_text())


def tiny_spec(**changes) -> TinySpec:
    """A TinySpec with some fields changed."""
    return TinySpec(**changes)
