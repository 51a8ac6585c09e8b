"""Each subpackage re-exports its public names, each imported on first use (`jupyter_chatflow/lazy.py`)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PACKAGES = [
    "jupyter_chatflow", "jupyter_chatflow.engine", "jupyter_chatflow.model", "jupyter_chatflow.tokenizer",
    "jupyter_chatflow.store", "jupyter_chatflow.pipeline", "jupyter_chatflow.frontends.panel",
    "jupyter_chatflow.frontends.notebook",
]  # fmt: skip


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_name_is_there_and_is_its_modules_own(name):
    package = importlib.import_module(name)
    assert package.__all__ == sorted(package.__all__) or name == "jupyter_chatflow"
    for public in package.__all__:
        value = getattr(package, public)
        home = getattr(value, "__module__", None)
        assert home is None or home.startswith("jupyter_chatflow"), (public, home)
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        package.Nope  # noqa: B018


def test_a_script_that_reads_a_model_file_or_text_never_imports_jax():
    """The file's header, its footprint, the tokenizer and the errors are read without JAX (seconds of import that a
    command that only looks at a file does not need); the engine's names bring it. (The stores read events, whose
    `Alternative` is the engine's: they bring it too.)"""
    code = (
        "import sys\n"
        "import jupyter_chatflow as cf\n"
        "from jupyter_chatflow.model import ModelConfig, read_header, footprint, fit_text, KNOWN_MODELS\n"
        "from jupyter_chatflow.tokenizer import Tokenizer\n"
        "from jupyter_chatflow import ChatflowError, ModelNotFoundError\n"
        "print('jax' in sys.modules)\n"
        "cf.SamplingParams\n"
        "print('jax' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
