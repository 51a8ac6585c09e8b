"""A disk cache of weights already dequantized and arranged for the transformer, keyed by the model file.

Reading a GGUF means parsing ~100,000 metadata items and dequantizing every tensor (about 2 s for the
135M model on 2 cores); loading the prepared arrays back is a memory-mapped read. Together with the XLA
compilation cache this brings a fresh process's first token under 3 s. The cache costs the float32 size of
the model on disk (~540 MB for SmolLM2-135M); set CHATFLOW_WEIGHTS_CACHE=off to disable it, or to a folder.

Weights held quantized (`load_model(weights="as-file" | "int8")`) have entries of their own, each of the packed
fields as it is held (~90 and ~130 MB for SmolLM2-135M): decoding the blocks or quantizing to int8 happens once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from jupyter_chatflow.processes import alive

from .config import ModelConfig, RopeScaling
from .quant.packed import Packed, Part

ENV_VAR = "CHATFLOW_WEIGHTS_CACHE"
STAGING = ".writing-"
"""An entry being written: `.writing-<pid>-<random>`, renamed into place once whole."""
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


def entry_for(model_path: Path, weights: str = "float") -> Path | None:
    """The cache entry of one model file, its weights held as `weights` ("float", "as-file", "int8"): changes when
    the file's path, size or modification time does."""
    root = cache_root()
    if root is None:
        return None
    stat = model_path.stat()
    key = f"{model_path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{FORMAT_VERSION}"
    key += "" if weights == "float" else f"|{weights}"
    return root / hashlib.sha256(key.encode()).hexdigest()[:32]


def is_cached(model_path: Path, weights: str = "float") -> bool:
    """Whether the cache has a complete entry for this file (its weights held as `weights`)."""
    return _complete_entry(model_path, weights) is not None


def _complete_entry(model_path: Path, weights: str) -> Path | None:
    """The file's cache entry if it is complete (its manifest is written last), else None."""
    entry = entry_for(model_path, weights)
    return entry if entry is not None and (entry / "manifest.json").is_file() else None


def load(model_path: Path, weights: str = "float") -> Prepared | None:
    """The prepared model for this file (its weights held as `weights`), or None if there is no complete entry."""
    entry = _complete_entry(model_path, weights)
    if entry is None:
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
    arranged = _unflatten(_packed(arrays, manifest.get("packed", {})))
    return Prepared(metadata=manifest["metadata"], config=ModelConfig(**config), weights=arranged)


def save(model_path: Path, prepared: Prepared, weights: str = "float") -> Path | None:
    """Write the entry atomically (a temporary folder renamed into place); a failure only costs speed."""
    entry = entry_for(model_path, weights)
    if entry is None or entry.exists():
        return entry
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        sweep_staging(entry.parent)
        staging = Path(tempfile.mkdtemp(dir=entry.parent, prefix=f"{STAGING}{os.getpid()}-"))
    except OSError:
        return None
    try:
        _write_entry(staging, prepared)
        staging.rename(entry)  # fails if another process got there first: its entry is as good
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        return None
    return entry


def sweep_staging(root: Path) -> list[Path]:
    """Remove the staging folders of writes whose process has ended (a load killed mid-way left 144-496 MB each,
    never removed); returns them. A folder of a live process, or of an unknown one younger than a day, stays."""
    removed = []
    for folder in root.glob(f"{STAGING}*"):
        pid = folder.name[len(STAGING) :].split("-", 1)[0]
        if pid.isdigit() and alive(int(pid)):
            continue
        if not pid.isdigit() and time.time() - folder.stat().st_mtime < 86_400:  # (written before pids were named)
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _write_entry(folder: Path, prepared: Prepared) -> None:
    arrays = _flatten(prepared.weights)
    packed = {name: value.cols for name, value in arrays.items() if isinstance(value, Packed)}
    arrays = {name: array for name, value in arrays.items() for name, array in _fields(name, value)}
    for name, array in arrays.items():
        np.save(folder / f"{name}.npy", np.ascontiguousarray(array))
    manifest = {"metadata": prepared.metadata, "config": dataclasses.asdict(prepared.config), "arrays": list(arrays),
                "packed": packed}  # fmt: skip
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _fields(name: str, value: Any) -> list[tuple[str, np.ndarray]]:
    """A weight's arrays and their names: a float one as it is, a packed one's fields as `name.part.format.field`."""
    if not isinstance(value, Packed):
        return [(name, value)]
    return [(f"{name}.{i}.{part.format}.{field}", array) for i, part in enumerate(value.parts)
            for field, array in part.fields.items()]  # fmt: skip


def _packed(arrays: dict[str, np.ndarray], packed: dict[str, int]) -> dict[str, Any]:
    """The arrays with each packed weight's fields (`_fields`) gathered back into its `Packed` matrix; `packed`
    names those weights and their columns."""
    out: dict[str, Any] = {}
    parts: dict[str, dict[int, tuple[str, dict[str, np.ndarray]]]] = {}
    for key, array in arrays.items():
        owner, *place = key.rsplit(".", 3)  # "layers.0.wqkv", ["0", "Q4_K", "qs"]
        if owner in packed and len(place) == 3:
            index, fmt, field = place
            parts.setdefault(owner, {}).setdefault(int(index), (fmt, {}))[1][field] = array
        else:
            out[key] = array
    for name, by_index in parts.items():
        out[name] = Packed(tuple(Part(fmt, fields) for _, (fmt, fields) in sorted(by_index.items())), packed[name])
    return out


def _flatten(weights: dict[str, Any]) -> dict[str, Any]:
    flat = {name: weights[name] for name in ("embed", "norm", "head", "rope_freqs") if weights.get(name) is not None}
    for i, layer in enumerate(weights["layers"]):
        flat |= {f"layers.{i}.{name}": array for name, array in layer.items()}
    return flat


def _unflatten(arrays: dict[str, Any]) -> dict[str, Any]:
    weights: dict[str, Any] = {name: arrays.get(name) for name in ("embed", "norm", "head", "rope_freqs")}
    layers: dict[int, dict[str, Any]] = {}
    for name, array in arrays.items():
        if name.startswith("layers."):
            _, index, part = name.split(".", 2)
            layers.setdefault(int(index), {})[part] = array
    weights["layers"] = [layers[i] for i in sorted(layers)]
    return weights
