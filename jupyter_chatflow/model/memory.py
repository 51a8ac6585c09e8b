"""What a model file is and how much memory it takes once loaded, and whether that fits now: said before every load,
and a load that would not fit is refused before any weight is dequantized (`check_fits`).

By default the engine dequantizes every weight to the dtype it runs in, so a model's weights take its parameter count
times 4 bytes as float32 and times 2 as bfloat16, whatever the file's quantization: a Q4 file of a model needs as much
as its Q8 file. (Fusing q/k/v and gate/up changes no count; a tied output head is the embedding, counted once.)
`weights="as-file"` keeps the file's quantized blocks (their bytes, Q4_K's scales unpacked: `quant/layout.py`) and
its float tensors in the dtype; `weights="int8"` one byte per matrix weight and a float32 scale per matrix row.

What a load holds at its peak, measured on SmolLM2-135M (0.50 GiB of float32 weights) under cgroup memory limits:

- a first load of a file dequantizes it to float32 arrays (0.50 GiB), which the prepared-weights cache writes to disk
  and memory-maps before the transformer is built, so the float32 arrays and the transformer's copy are not held at
  once: it loaded under a 750 MiB limit as float32 and as bfloat16;
- a later load reads the memory-mapped float32 file: as float32 the transformer uses those pages as they are, as
  bfloat16 it copies them (0.25 GiB) and the file's pages, clean page cache, are given back under pressure (it
  loaded under 500 MiB);
- with the cache off (`CHATFLOW_WEIGHTS_CACHE=off`) the float32 arrays stay until the transformer is built: 1.17
  GiB as float32, 0.97 GiB as bfloat16.

A first turn then adds the KV cache, the prompt cache and XLA's compiled programs (+0.25 GiB measured, float32 or
bfloat16): `EngineNeeds`. A longer conversation grows the KV cache, up to `kv_bytes(context_length)` per sequence.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections import Counter
from pathlib import Path

import gguf

from jupyter_chatflow.errors import ModelTooLargeError

from .config import ModelConfig, file_config
from .header import Header, TensorInfo, read_header
from .quant.layout import AS_FILE, packed_bytes

GIB, MIB = 1 << 30, 1 << 20
CHECK_ENV_VAR = "CHATFLOW_MEMORY_CHECK"
"""Set to `off` to load a model the check would refuse (its figures are estimates; swap may cover the rest)."""
ITEM_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# The engine's constants the first turn's memory follows (tests check they match engine/model.py and prompt_cache.py,
# which import JAX: this module must not, so `chatflow model info` stays fast).
FIRST_CACHE = 512  # engine.chunks.MIN_CACHE: the positions of a first KV cache
PROMPT_CACHE_BYTES = 64 << 20  # engine.prompt_cache.DEFAULT_MAX_BYTES: the kept KV caches' bound
PROGRAMS_BYTES = 192 << 20
"""XLA's compiled prefill and decode programs and their working buffers, beyond the KV and prompt caches: a first
turn of SmolLM2-135M added 0.25 GiB in all, with a 45 MiB KV cache and a prompt cache below its 64 MiB."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Footprint:
    """What a model file is, as one line says it before loading, and what its weights take once loaded."""

    path: Path
    config: ModelConfig
    parameters: int
    """Every weight the transformer holds (a tied output head once)."""
    tensor_types: dict[str, int]
    """Storage type -> parameters stored so, most first."""
    quantization: str
    """The file's quantization as its name says it (`Q4_K_M`), then the storage types of its tensors."""
    packed_parameters: int = 0
    """The parameters stored in a format `weights="as-file"` keeps packed (`quant.layout.AS_FILE`)."""
    packed_bytes: int = 0
    """Their bytes once decoded into fields (`quant.layout.packed_bytes`)."""
    matrix_parameters: int = 0
    """The parameters of the matrices (2-D tensors), which `weights="int8"` quantizes."""
    matrix_rows: int = 0
    """Their rows: one float32 scale each under `weights="int8"`."""

    def weight_bytes(self, dtype: str = "float32", weights: str = "float") -> int:
        """The transformer's weights once loaded as `dtype` and held as `weights` ("float", "as-file", "int8")."""
        if weights == "as-file":
            return self.packed_bytes + (self.parameters - self.packed_parameters) * ITEM_BYTES[dtype]
        if weights == "int8":
            floats = self.parameters - self.matrix_parameters
            return self.matrix_parameters + 4 * self.matrix_rows + floats * ITEM_BYTES[dtype]
        return self.parameters * ITEM_BYTES[dtype]

    def kv_bytes(self, positions: int, dtype: str = "float32") -> int:
        """The keys and values of `positions` positions of one sequence, every layer."""
        c = self.config
        return 2 * c.n_layers * c.n_kv_heads * c.head_dim * positions * ITEM_BYTES[dtype]

    def summary(self) -> str:
        """One line for people: "SmolLM2-135M-Instruct: llama, 135 M parameters, Q4_1 (Q4_1, Q8_0, F32), context
        8,192 tokens; weights 0.50 GiB as float32, 0.25 GiB as bfloat16, 0.09 GiB as-file" (the last where the file
        has tensors `weights="as-file"` keeps packed)."""
        c = self.config
        packed = f", {size_text(self.weight_bytes('float32', 'as-file'))} as-file" if self.packed_parameters else ""
        return (
            f"{c.name}: {c.architecture}, {count_text(self.parameters)} parameters, {self.quantization}, context "
            f"{c.context_length:,} tokens; weights {size_text(self.weight_bytes('float32'))} as float32, "
            f"{size_text(self.weight_bytes('bfloat16'))} as bfloat16{packed}"
        )


def footprint(path: str | os.PathLike[str]) -> Footprint:
    """The footprint of the GGUF file at `path`, from its header alone (~20 ms; kept per file while it is unchanged).

    Raises what the loader would for a missing file, one that is not a GGUF, or an architecture that is not
    supported, so a frontend that says what the file is refuses those before loading too."""
    path = Path(path)
    stat = path.stat() if path.is_file() else None
    if stat is None:
        return _footprint(path, 0, 0)  # (raises ModelNotFoundError, uncached)
    return _footprint(path.resolve(), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _footprint(path: Path, size: int, mtime_ns: int) -> Footprint:
    """(`size` and `mtime_ns` are only the cache's key: a file written anew is read anew.)"""
    header = read_header(path)
    shapes = {tensor.name: tensor.shape for tensor in header.tensors}
    config = file_config(path, header.metadata, shapes, header.array_lengths.get("tokenizer.ggml.tokens"))
    stored = Counter[str]()
    for tensor in header.tensors:
        stored[tensor.type_name] += tensor.elements
    types = dict(stored.most_common())
    return Footprint(path=path, config=config, parameters=sum(types.values()), tensor_types=types,
                     quantization=quantization_text(header, types), **_held(header.tensors))  # fmt: skip


def _held(tensors: tuple[TensorInfo, ...]) -> dict[str, int]:
    """The footprint's counts of what `weights="as-file"` and `weights="int8"` hold."""
    packed = [t for t in tensors if t.type_name in AS_FILE]
    matrices = [t for t in tensors if len(t.shape) == 2]
    return {
        "packed_parameters": sum(t.elements for t in packed),
        "packed_bytes": sum(packed_bytes(t.type_name, t.elements) for t in packed),
        "matrix_parameters": sum(t.elements for t in matrices),
        "matrix_rows": sum(t.shape[0] for t in matrices),
    }


def quantization_text(header: Header, types: dict[str, int]) -> str:
    """ "Q4_K_M (Q4_K, Q6_K, F32)": the file's type as `general.file_type` names it (else the type of most of its
    parameters), then its tensors' types, most parameters first (three at most)."""
    named = _file_type(header.metadata.get("general.file_type"))
    label = named or next(iter(types), "?")
    listed = list(types)
    if listed == [label]:
        return label
    shown = ", ".join(listed[:3]) + (", …" if len(listed) > 3 else "")
    return f"{label} ({shown})"


def _file_type(value: object) -> str:
    """`general.file_type`'s name without llama.cpp's prefix ("MOSTLY_Q4_K_M" -> "Q4_K_M"); "" when unknown."""
    try:
        name = gguf.LlamaFileType(int(value)).name  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return ""
    return "" if name == "GUESSED" else name.removeprefix("MOSTLY_").removeprefix("ALL_")


def count_text(n: int) -> str:
    """A parameter count as people say it: "135 M", "1.2 B" ("107,776" below a million)."""
    if n >= 10**9:
        return f"{n / 10**9:.1f} B"
    return f"{n / 10**6:.0f} M" if n >= 10**6 else f"{n:,}"


def size_text(n: int) -> str:
    """Bytes in GiB with two decimals ("0.50 GiB"), or in MiB below a tenth of a GiB ("0.4 MiB")."""
    return f"{n / GIB:.2f} GiB" if n >= GIB // 10 else f"{n / MIB:.1f} MiB"


def figures(model: Footprint) -> dict[str, float | None]:
    """The memory figures `chatflow model info` shows (GiB; the KV cache in MiB): the weights as float32 and
    bfloat16; what loading it and a first turn need, as `load_model` counts before it refuses a model (the file
    already prepared, the weights in this memory); what is available now (None where it cannot be read)."""
    available = available_memory()
    needed = {dtype: bytes_needed(model, dtype, LoadPlan(prepared=True)) for dtype in ("float32", "bfloat16")}
    return {
        "weights_float32_gib": _gib(model.weight_bytes("float32")),
        "weights_bfloat16_gib": _gib(model.weight_bytes("bfloat16")),
        "weights_as_file_gib": _gib(model.weight_bytes("float32", "as-file")),
        "weights_int8_gib": _gib(model.weight_bytes("float32", "int8")),
        "kv_cache_per_1024_tokens_mib": round(model.kv_bytes(1024) / MIB, 1),
        "needs_float32_gib": _gib(needed["float32"]),
        "needs_bfloat16_gib": _gib(needed["bfloat16"]),
        "available_gib": None if available is None else _gib(available.bytes),
    }


def _gib(n: int) -> float:
    return round(n / GIB, 2)


# ---- what a load needs, and what there is ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class EngineNeeds:
    """The engine's memory beyond the weights in a first turn (the loader passes the engine's own figures)."""

    first_cache: int = FIRST_CACHE
    prompt_cache_bytes: int = PROMPT_CACHE_BYTES
    programs_bytes: int = PROGRAMS_BYTES

    def bytes_for(self, model: Footprint, dtype: str) -> int:
        """A first turn's: the KV cache twice (the prompt's own, and its row in the decoding batch), the prompt
        cache's bound and the compiled programs."""
        return 2 * model.kv_bytes(self.first_cache, dtype) + self.prompt_cache_bytes + self.programs_bytes


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoadPlan:
    """How a load will go, which decides its peak (see the module's docstring)."""

    prepared: bool = False
    """The prepared-weights cache holds this file: no dequantizing."""
    weights_cache: bool = True
    """The prepared-weights cache is on (a first load writes it, and builds the transformer from its memory map)."""
    on_host: bool = True
    """The transformer's weights live in this memory (the CPU backend), not an accelerator's."""


def bytes_needed(
    model: Footprint,
    dtype: str,
    plan: LoadPlan = LoadPlan(),
    engine: EngineNeeds = EngineNeeds(),
    weights: str = "float",
) -> int:
    """This process's memory to load `model` as `dtype`, its weights held as `weights`, and run a first turn: the
    load's peak or the weights with the engine's first turn, whichever is more. (`as-file` decodes the blocks from
    the file's memory map and `int8` quantizes one tensor at a time, or the prepared float32 weights' memory map:
    neither holds the model in float32, and both build their arrays in this memory, even for an accelerator.)"""
    float32 = model.weight_bytes("float32")
    kept = model.weight_bytes(dtype, weights) if plan.on_host else 0
    if weights != "float":
        peak = model.weight_bytes(dtype, weights)
    elif plan.prepared:
        peak = kept
    elif plan.weights_cache:
        peak = max(float32, kept)  # dequantized, written to disk and memory-mapped, then built
    else:
        peak = float32 + kept  # dequantized and kept while the transformer is built
    running = kept + engine.bytes_for(model, dtype) if plan.on_host else 0
    return max(peak, running)


@dataclasses.dataclass(frozen=True)
class Available:
    """Memory this process may still take, and which limit says so."""

    bytes: int
    source: str


def available_memory(proc: Path = Path("/proc"), cgroups: Path = Path("/sys/fs/cgroup")) -> Available | None:
    """The least of: the system's MemAvailable, and the room under each memory limit of this process's cgroup and
    its parents (Binder runs a notebook in a cgroup: `memory.max` in v2, `memory.limit_in_bytes` in v1), less what
    each uses beyond its inactive page cache (which the kernel reclaims before it refuses memory). None where none
    of them can be read (not Linux)."""
    found = [_meminfo(proc / "meminfo"), *_cgroup_rooms(proc / "self" / "cgroup", cgroups)]
    known = [room for room in found if room is not None]
    return min(known, key=lambda room: room.bytes) if known else None


def _meminfo(path: Path) -> Available | None:
    for line in _lines(path):
        if line.startswith("MemAvailable:"):
            return Available(int(line.split()[1]) * 1024, "MemAvailable in /proc/meminfo")
    return None


def _cgroup_rooms(membership: Path, root: Path) -> list[Available]:
    """The room under each limit of the cgroups this process is in (v2 `0::/path`, v1 `N:memory:/path`)."""
    rooms = []
    for line in _lines(membership):
        number, controllers, where = [*line.split(":", 2), "", ""][:3]
        if number == "0" and not controllers:
            rooms += _rooms_up(root, where, "memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):
            rooms += _rooms_up(root / "memory", where, "memory.limit_in_bytes", "memory.usage_in_bytes",
                               "total_inactive_file")  # fmt: skip
    return rooms


def _rooms_up(base: Path, where: str, limit_file: str, usage_file: str, inactive_key: str) -> list[Available]:
    """The room under the limit of the cgroup at `where` and of each of its parents up to `base`."""
    rooms = []
    folder = base / where.strip().lstrip("/")
    while True:
        limit, usage = _number(folder / limit_file), _number(folder / usage_file)
        if limit is not None and usage is not None and limit < 1 << 60:  # (v1 writes "no limit" as ~2**63)
            inactive = _stat(folder / "memory.stat", inactive_key)
            rooms.append(Available(max(0, limit - usage + inactive), f"{folder / limit_file} less the cgroup's use"))
        if folder == base or base not in folder.parents:
            return rooms
        folder = folder.parent


def _number(path: Path) -> int | None:
    text = next(iter(_lines(path)), "").strip()
    return int(text) if text.isdigit() else None  # ("max": no limit)


def _stat(path: Path, key: str) -> int:
    for line in _lines(path):
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except OSError:
        return []


def fit_text(model: Footprint, room: Available | None = None, weights: str = "float") -> str:
    """Which dtypes the memory available now holds `model` in, for people ("" where it cannot be read): said when
    a model is chosen, so that a user on Binder (2 GiB in all) picks bfloat16 before a float32 load is refused."""
    room = room if room is not None else available_memory()
    if room is None:
        return ""
    fits = [dtype for dtype in ("float32", "bfloat16") if bytes_needed(model, dtype, weights=weights) <= room.bytes]
    said = {2: "fits as float32 or bfloat16", 1: "fits as bfloat16 only (choose it: dtype='bfloat16')"}
    return f"{size_text(room.bytes)} available now: {said.get(len(fits), 'too large as float32 or bfloat16')}"


def check_fits(
    model: Footprint,
    dtype: str,
    plan: LoadPlan = LoadPlan(),
    engine: EngineNeeds = EngineNeeds(),
    available: Available | None = None,
    weights: str = "float",
) -> None:
    """Raise ModelTooLargeError, naming the figures and what to do, when loading `model` as `dtype` would need more
    memory than is available (`available_memory()` unless given). Nothing is checked when `CHATFLOW_MEMORY_CHECK`
    is `off`, or where the memory available cannot be read."""
    if os.environ.get(CHECK_ENV_VAR, "").strip().lower() == "off":
        return
    room = available if available is not None else available_memory()
    needed = bytes_needed(model, dtype, plan, engine, weights)
    if room is None or needed <= room.bytes:
        return
    raise ModelTooLargeError(refusal(model, dtype, plan, engine, room, weights))


def refusal(
    model: Footprint, dtype: str, plan: LoadPlan, engine: EngineNeeds, room: Available, weights: str = "float"
) -> str:
    """The message of a refused load: what it needs as float32 and as bfloat16 (with its weights held as
    `weights`), what there is, and what to do."""
    need = {name: bytes_needed(model, name, plan, engine, weights) for name in ("float32", "bfloat16")}
    close = size_text(need.get(dtype, need["bfloat16"])) == size_text(room.bytes)
    text = (lambda n: f"{n / MIB:,.1f} MiB") if close else size_text  # (never "needs 0.25 GiB and 0.25 GiB are …")
    figures = f"{text(need['float32'])} as float32 ({text(need['bfloat16'])} as bfloat16)"
    figures += "" if weights == "float" else f" with weights='{weights}'"
    smaller = dtype == "float32" and need["bfloat16"] <= room.bytes
    free = "free memory (close other kernels, or models you no longer use)"
    fix = (
        f"load it with dtype='bfloat16' (--dtype bfloat16 for chatflow and %chat_model), or {free}"
        if smaller
        else f"{free}, or choose a model with fewer parameters (every weight is dequantized, so a smaller "
        "quantization of this model needs as much)"
    )
    return (
        f"{model.config.name} needs {figures} and {text(room.bytes)} are available ({room.source}): {fix}, "
        f"or set {CHECK_ENV_VAR}=off to try anyway."
    )
