"""A package's public names, each imported from its module on first use (PEP 562's module `__getattr__`).

>>> from jupyter_chatflow.model import ModelConfig   # reads config.py alone: no JAX
>>> from jupyter_chatflow.model import Transformer   # imports JAX and Flax now

Every subpackage re-exports its public names this way, so `jupyter_chatflow.model.ModelConfig` is the name a
newcomer reads in the docs and a script that only reads a GGUF file's header never pays for JAX's import
(`tests/test_exports.py` checks both).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


def attribute(package: str, names: Mapping[str, str], name: str) -> Any:
    """`name` of `package`, imported from the module `names` gives for it (relative to the package)."""
    module = names.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, package), name)
