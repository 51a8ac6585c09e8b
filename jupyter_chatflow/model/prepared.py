"""A disk cache of weights already dequantized and arranged for the transformer, keyed by the model file.

Reading a GGUF means parsing ~100,000 metadata items and dequantizing every tensor (about 2 s for the
135M model on 2 cores); loading the prepared arrays back is a memory-mapped read. Together with the XLA
compilation cache this brings a fresh process's first token under 3 s. The cache costs the float32 size of
the model on disk (~540 MB for SmolLM2-135M); set CHATFLOW_WEIGHTS_CACHE=off to disable it, or to a folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .config import ModelConfig, RopeScaling

ENV_VAR = "CHATFLOW_WEIGHTS_CACHE"
FORMAT_VERSION = 3
"""Bumped when what an entry holds changes (2: the config's `name` is the name people know, `display_name`; 3: the
config's architecture fields and a layer's optional tensors), so an older entry is prepared again rather than
read."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Prepared:
    """What the loader needs besides the file: metadata, config, arranged weights (memory-mapped)."""

    metadata: dict[str, Any]
    config: ModelConfig
    weights: dict[str, Any]


def cache_root() -> Path | None:
    """The cache folder, or None when disabled."""
    setting = os.environ.get(ENV_VAR, "")
    if setting.lower() == "off":
        return None
    return Path(setting).expanduser() if setting else Path.home() / ".cache" / "jupyter_chatflow" / "weights"


def entry_for(model_path: Path) -> Path | None:
    """The cache entry of one model file: changes when the file's path, size or modification time does."""
    root = cache_root()
    if root is None:
        return None
    stat = model_path.stat()
    key = f"{model_path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{FORMAT_VERSION}"
    return root / hashlib.sha256(key.encode()).hexdigest()[:32]


def load(model_path: Path) -> Prepared | None:
    """The prepared model for this file, or None if there is no complete entry."""
    entry = entry_for(model_path)
    if entry is None or not (entry / "manifest.json").is_file():
        return None
    try:
        manifest = json.loads((entry / "manifest.json").read_text())
        arrays = {name: np.load(entry / f"{name}.npy", mmap_mode="r") for name in manifest["arrays"]}
    except (OSError, ValueError, KeyError):
        shutil.rmtree(entry, ignore_errors=True)  # damaged: drop it; the caller reads the GGUF and writes it anew
        return None
    config = dict(manifest["config"])
    config["rope_scaling"] = RopeScaling(**config["rope_scaling"])
    config["sliding_layers"] = tuple(config.get("sliding_layers", ()))
    return Prepared(metadata=manifest["metadata"], config=ModelConfig(**config), weights=_unflatten(arrays))


def save(model_path: Path, prepared: Prepared) -> Path | None:
    """Write the entry atomically (a temporary folder renamed into place); a failure only costs speed."""
    entry = entry_for(model_path)
    if entry is None or entry.exists():
        return entry
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".writing-"))
    except OSError:
        return None
    try:
        _write_entry(staging, prepared)
        staging.rename(entry)  # fails if another process got there first: its entry is as good
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        return None
    return entry


def _write_entry(folder: Path, prepared: Prepared) -> None:
    arrays = _flatten(prepared.weights)
    for name, array in arrays.items():
        np.save(folder / f"{name}.npy", np.ascontiguousarray(array))
    manifest = {"metadata": prepared.metadata, "config": dataclasses.asdict(prepared.config), "arrays": list(arrays)}
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _flatten(weights: dict[str, Any]) -> dict[str, np.ndarray]:
    flat = {name: weights[name] for name in ("embed", "norm", "head", "rope_freqs") if weights.get(name) is not None}
    for i, layer in enumerate(weights["layers"]):
        flat |= {f"layers.{i}.{name}": array for name, array in layer.items()}
    return flat


def _unflatten(arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    weights: dict[str, Any] = {name: arrays.get(name) for name in ("embed", "norm", "head", "rope_freqs")}
    layers: dict[int, dict[str, np.ndarray]] = {}
    for name, array in arrays.items():
        if name.startswith("layers."):
            _, index, part = name.split(".", 2)
            layers.setdefault(int(index), {})[part] = array
    weights["layers"] = [layers[i] for i in sorted(layers)]
    return weights
