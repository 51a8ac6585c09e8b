"""Compiled programs kept on disk: a new process loads the executable an earlier one compiled, instead of tracing,
lowering and compiling the program again.

JAX's persistent compilation cache saves only XLA's part: every new process still traces each program (0.5 s for
the default model's decode step) and lowers it to StableHLO (0.2 s) to compute the key it looks up. A
`StoredProgram` keys the executable by what it was built from instead, known before any tracing:

- the process: JAX's and jaxlib's versions, the backend's platform and version, the devices, the CPU's model and
  feature flags (XLA:CPU compiles for the host's instruction set), `XLA_FLAGS`, and a hash of the package's engine
  and model source (the code that is traced);
- the program: its name, its model architecture (the graph and weights' structure, `programs._Jitted`), its static
  arguments, and each argument's shape, dtype, weak type and placement.

A changed model, JAX version, device or line of the traced code is a new key: it compiles, never loads a stale
program. A file that fails to load (cut short, or from a jaxlib that reads it differently) is compiled again and
replaced. Files are written whole or not at all (a temporary file renamed).

An executable that JAX loaded from its persistent cache comes back from XLA:CPU's serializer incomplete ("Function
… not found" at its first run, after it loaded): so a stored program is compiled afresh, under compile options that
no cache entry has (`_FRESH`), with the persistent cache's writes off on this thread (the store holds it).

The folder is `programs/` inside the XLA cache folder (`loader.enable_compilation_cache`): `CHATFLOW_XLA_CACHE=off`
turns both off.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import logging
import os
import pickle
import platform
import re
import tempfile
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax import monitoring
from jax.experimental import serialize_executable

FORMAT = 1
"""Bumped when what a file holds changes."""

_BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"  # (what `compile_clock` adds up: a load is one)
_log = logging.getLogger(__name__)


class StoredProgram:
    """A jitted function whose executables are kept on disk (`folder`) and in memory, one per argument signature.

    Called like the jitted function; `prepare(*args)` (arrays or `jax.ShapeDtypeStruct`s) loads or compiles one
    signature without running it. Without a folder it still keeps its executables in memory (no disk)."""

    def __init__(
        self, jitted: Any, name: str, *, static_argnums: Sequence[int] = (), architecture: str = "",
        ends_first_turn: bool = False,
    ):  # fmt: skip
        """`ends_first_turn`: this program's first use (the decode step's) closes its architecture's list of the
        programs a first turn uses (`preload_in_background`), after one more (its cache write)."""
        self._jitted, self.__name__ = jitted, name
        self._ends = ends_first_turn
        self._static = tuple(static_argnums)
        self.architecture = architecture
        self._compiled: dict[tuple, Any] = {}
        self._lock = threading.Lock()
        self._weights: tuple[Any, tuple] | None = None  # (the last first argument that was a list, its signature)
        self._preloaded: dict[tuple, Path] = {}  # signatures preloaded and not used yet: their files
        _every.add(self)

    def __call__(self, *args: Any) -> Any:
        key = self._signature(args)
        if _sharded(key):  # (a mesh's: jit places each argument as the program needs; an executable would not)
            return self._jitted(*args)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled, _ = self._get(key, args)
        elif self._preloaded and key in self._preloaded:  # a preloaded program's first use: onto this process's list
            _used(self.architecture, self._preloaded.pop(key), self._ends)
        return compiled(*self._dynamic(args))

    def prepare(self, *args: Any, weights: Callable[[], list[list] | None] | None = None) -> Callable[[], None] | None:
        """Load (or compile and store) the executable for arguments like `args` (arrays or shapes); returns its first
        run on ones (`_run_once`), for the caller to make where that run's cost belongs, not at the first real call
        (a batch of two's first decode step took 235 ms against 45): beside a decoding batch, or once a loading
        model's weights exist. It runs with `args[0]`, or with what `weights()` gives (`_run_once`: for arguments
        that are only shapes). None where it had nothing to make (another thread loaded it meanwhile: a preload runs its
        own)."""
        key = self._signature(args)
        if _sharded(key):
            self._jitted.lower(*args).compile()  # (a mesh's programs are jit's: see `__call__`)
        elif key not in self._compiled:
            compiled, made = self._get(key, args)
            if made:
                return functools.partial(_run_once, key, compiled, weights or (lambda: [args[0]]))
        return None

    def shapes(self, *args: Any) -> Any:
        """The shapes and dtypes of what the program returns for `args` (arrays or shapes), traced, not compiled."""
        return jax.eval_shape(self._jitted, *args)

    def _cache_size(self) -> int:
        """How many executables this program holds in memory (a compile or a load adds one)."""
        return len(self._compiled)

    def clear(self) -> None:
        """Let go of the executables held in memory (the files stay)."""
        with self._lock:
            self._compiled.clear()
            self._preloaded.clear()
            self._weights = None

    def _dynamic(self, args: Sequence[Any]) -> list[Any]:
        return [a for i, a in enumerate(args) if i not in self._static] if self._static else list(args)

    def _signature(self, args: Sequence[Any]) -> tuple:
        """What the executable depends on in `args`: static values, and each array's shape, dtype, weak type and
        placement. A model's weights (a list passed first, the same list every call) are read once."""
        static = tuple(args[i] for i in self._static)
        dynamic = self._dynamic(args)
        first: tuple = ()
        if dynamic and isinstance(dynamic[0], list):
            held = self._weights
            if held is None or held[0] is not dynamic[0]:
                held = self._weights = (dynamic[0], _leaves_signature(dynamic[0]))
            first, dynamic = held[1], dynamic[1:]
        return static, first, _leaves_signature(dynamic)

    def _get(self, key: tuple, args: Sequence[Any]) -> tuple[Any, bool]:
        """The executable for `key`, and whether this call loaded or compiled it: one thread does that while others
        asking for it wait (the preloader among them: `_claim`), and the program's other signatures stay callable
        meanwhile."""
        folder = programs_folder()
        path = None if folder is None else folder / f"{self.__name__}-{_digest(self.architecture, key)}.xla"
        with _claim(path or (id(self), key), self.__name__):
            compiled = self._compiled.get(key)
            if compiled is not None:
                return compiled, False
            compiled = self._load_or_compile(key, args, path)
            self.add(key, compiled)
            return compiled, True

    def _load_or_compile(self, key: tuple, args: Sequence[Any], path: Path | None) -> Any:
        if path is not None and path.exists():
            loaded = _timed(self.__name__, "loaded", functools.partial(_load, path))
            if loaded is not None and loaded[0] == key:
                _used(self.architecture, path, self._ends)
                return loaded[1]
        compiled = _timed(self.__name__, "compiled", functools.partial(_compile, self._jitted, args), monitored=False)
        if path is not None and _save(path, key, compiled):
            _used(self.architecture, path, self._ends)
        return compiled

    def add(self, key: tuple, compiled: Any, preloaded_from: Path | None = None) -> None:
        """Hold `compiled` for `key`; `preloaded_from`: its file, loaded before anything asked for it (its first use
        then goes onto the list of a first turn's programs, as a load on demand does)."""
        with self._lock:
            if key not in self._compiled and preloaded_from is not None:
                self._preloaded[key] = preloaded_from
            self._compiled.setdefault(key, compiled)


_every: weakref.WeakSet[StoredProgram] = weakref.WeakSet()
_claims: dict[Any, threading.Lock] = {}
_claims_lock = threading.Lock()
_loaded: set[Path] = set()  # files loaded (or written) in this process since the last `clear_all`
PRELOAD_THREADS = 2
"""Loading releases the GIL: two loads side by side took 0.51 s where one after the other took 1.06 (2 cores)."""
FIRST_USED = 24
"""The most programs a model architecture's list of a first turn's programs holds (`preload_in_background`)."""
_first_turn: dict[str, tuple[list[str], int]] = {}  # architecture → (this process's first used files, how many
# more to add before the list is written: -1 until the program that ends a first turn is used, 0 once written)
_used_lock = threading.Lock()
_preloads = {"count": 0, "seconds": 0.0}  # programs preloaded in this process, and the seconds it took (`preloaded`)
_ahead = {"count": 0, "seconds": 0.0}  # programs made ready while their model loaded (`made_ahead`)
_stopping = threading.Event()
_preloaders: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


@contextlib.contextmanager
def _claim(what: Any, name: str = "") -> Iterator[None]:
    """Held while one thread loads or compiles `what` (a file's path): another asking for it waits, and when it
    is the program `name` that asks, the wait is its compile time (the first turn waited on a preload's load)."""
    with _claims_lock:
        lock = _claims.setdefault(what, threading.Lock())
    if not lock.acquire(blocking=False):
        _timed(name, "waited for", lock.acquire, monitored=bool(name))
    try:
        yield
    finally:
        lock.release()


def preloaded() -> tuple[int, float]:
    """The count of programs this process's preload threads loaded ahead of their use, and the seconds it took."""
    with _used_lock:
        return int(_preloads["count"]), _preloads["seconds"]


def made_ahead() -> tuple[int, float]:
    """The count of programs this process made ready while their model loaded (`ahead.py`: compiled, or loaded),
    and the seconds it took."""
    with _used_lock:
        return int(_ahead["count"]), _ahead["seconds"]


def count_ahead(count: int, seconds: float) -> None:
    """`count` programs made ready in `seconds` while their model loaded (`made_ahead`)."""
    with _used_lock:
        _ahead["count"] += count
        _ahead["seconds"] += seconds


def clear_all() -> None:
    """Let go of every stored program's executables held in memory (`programs.release_all`)."""
    for program in list(_every):
        program.clear()
    _loaded.clear()


def architecture_key(*parts: Any) -> str:
    """A model architecture's part of its programs' keys: a hash of the reprs of its graph and weights' structure
    (the same in every process: no addresses in them), each mapping's entries sorted (`_sorted_mappings`)."""
    return hashlib.sha256("|".join(_sorted_mappings(repr(part)) for part in parts).encode()).hexdigest()


def _sorted_mappings(text: str) -> str:
    """`text` with the entries of each `PrettyMapping({...})` in it sorted: a Variable's metadata lists the same
    entries in another order when `nnx.merge` made the Variable (an abstract model, `ahead.py`) than when its module
    did (a loaded one), and the two models' programs are the same ones."""
    return _MAPPING.sub(lambda m: f"PrettyMapping({{{','.join(sorted(m[1].rstrip().rstrip(',').split(',')))}}})", text)


_MAPPING = re.compile(r"PrettyMapping\(\{([^{}]*)\}\)")


def preload_in_background(architecture: str, weights: Callable[[], list[list] | None]) -> list[threading.Thread]:
    """Load, on threads of their own, the programs the latest process's first turn used with this model
    architecture (`_used`: the input scan's, the prefill's, the first decode step and its cache write), and run
    each once on ones: a loaded executable's first run took ~0.1 s more than its next ones (the default model's
    decode step: 142 ms, then 35). A first turn then finds them ready; a program asked for meanwhile waits for its
    load rather than loading twice. The largest file (the decode step's) is taken first: its load is the longest
    (0.5 s of the default model's ~0.7 s), and the smaller ones load beside it. Each thread runs its programs once
    after its loads: `weights()` gives the weights the model's programs run with, whole and each kind of layer's,
    waiting while the model loads (None once it is gone): a program runs with the one its signature names. At exit
    the threads stop after the load in hand (a thread killed inside XLA aborts the process)."""
    folder = programs_folder()
    listed = [] if folder is None else _largest_first(folder, _read_list(_list_path(folder, architecture)))
    if not listed or folder is None:
        return []
    pending, lock = iter(listed), threading.Lock()

    def work() -> None:
        _process_key()  # (hashing the package's source: here, not in the first turn)
        loaded = []
        while not _stopping.is_set():
            with lock:
                name = next(pending, None)
            if name is None:
                break
            loaded.append(_preload(architecture, folder / name, weights))
        for first_run in loaded:  # (after the loads: `weights()` may wait for a model still loading)
            if _stopping.is_set():
                return
            first_run()

    threads = [threading.Thread(target=work, name="chatflow-preload", daemon=True) for _ in range(PRELOAD_THREADS)]
    for thread in threads:
        keep_until_exit(thread).start()
    return threads


def _largest_first(folder: Path, listed: list[str]) -> list[str]:
    """The files of `listed` that exist, the largest first (the decode step's), the others in their order."""
    sizes = {name: (folder / name).stat().st_size for name in listed if (folder / name).exists()}
    if not sizes:
        return []
    largest = max(sizes, key=sizes.__getitem__)
    return [largest, *(name for name in sizes if name != largest)]


def _preload(architecture: str, path: Path, weights: Callable[[], list[list] | None]) -> Callable[[], None]:
    """Load the program stored at `path` for the programs of `architecture`; returns its first run, with the
    weights `weights()` gives (`_run_once`), as `StoredProgram.prepare` does."""
    program = path.name.split("-", 1)[0]
    owners = [p for p in list(_every) if p.__name__ == program and p.architecture == architecture]
    with _claim(path):
        if not owners or path in _loaded or not path.exists():
            return _nothing
        started = time.perf_counter()
        loaded = _timed(program, "preloaded", functools.partial(_load, path))
        if loaded is None or path.name != f"{program}-{_digest(architecture, loaded[0])}.xla":  # (not this process's)
            return _nothing
        with _used_lock:
            _preloads["count"] += 1
            _preloads["seconds"] += time.perf_counter() - started
        for owner in owners:
            owner.add(loaded[0], loaded[1], preloaded_from=path)
        _loaded.add(path)
    return functools.partial(_run_once, loaded[0], loaded[1], weights)


def _nothing() -> None:
    """A first run with nothing to run (`_preload`)."""


def stopping() -> bool:
    """Whether the interpreter is exiting: work on threads of its own stops at its next step."""
    return _stopping.is_set()


def keep_until_exit(thread: threading.Thread) -> threading.Thread:
    """Have the interpreter's exit wait for `thread` (a compile or load on a daemon thread: one stopped inside XLA
    aborts the process, "FATAL: exception not rethrown")."""
    _preloaders.add(thread)
    return thread


@atexit.register
def _stop_preloading() -> None:
    _stopping.set()
    for thread in list(_preloaders):
        thread.join(timeout=30.0)


def _run_once(key: tuple, compiled: Any, weights: Callable[[], list[list] | None]) -> None:
    """Run a loaded executable on ones (and the model's weights), for the first run's cost; not on a mesh (its
    programs run one at a time: `Programs._serial`) nor where the arguments are not plain arrays. Ones, not zeros:
    the decode step run at position 0 left ~60 ms of first-run cost to the first real step, at position 1 none."""
    _, first, (structure, leaves) = key
    held = next((w for w in weights() or [] if _leaves_signature(w) == first), None) if first else None
    if (first and held is None) or sum(_nbytes(leaf) for leaf in leaves) > RUN_ONCE_MAX_BYTES:
        return
    rest = [_ones(leaf) for leaf in leaves]
    if any(value is None for value in rest):
        return
    try:
        jax.block_until_ready(compiled(*([held] if first else []), *jax.tree.unflatten(structure, rest)))
    except Exception as error:  # (nothing depends on it: the first real call pays the cost instead)
        _log.debug("did not run a preloaded program once: %s", error)


RUN_ONCE_MAX_BYTES = 64 << 20
"""The most the ones of a first run may take (a long cache's copy would be memory the kernel does not have)."""


def _nbytes(leaf: tuple) -> int:
    if len(leaf) == 1:
        return 0
    try:
        return int(np.prod(leaf[0])) * np.dtype(leaf[1]).itemsize
    except TypeError:  # (a typed PRNG key)
        return 0


def _ones(leaf: tuple) -> Any:
    """Ones as the signature's leaf says: an array, a Python scalar of its kind; None for a sharded array."""
    if len(leaf) == 1:
        return {"int": 1, "float": 1.0, "bool": True}.get(leaf[0])
    shape, dtype, weak, placement = leaf
    if placement is not None or (weak and shape):
        return None
    try:
        kind = np.dtype(dtype).kind
    except TypeError:  # (a typed PRNG key: no ones of it)
        return None
    if weak:
        return {"i": 1, "f": 1.0, "b": True}.get(kind)
    return jax.device_put(np.ones(shape, dtype))  # (not jnp.ones: that compiles a program per shape, ~50 ms each)


def _used(architecture: str, path: Path, ends: bool = False) -> None:
    """`path` was used in this process: onto this process's list of its architecture's first turn, which is
    written (replacing the one on disk) once the program that `ends` it and one more were used, or at `FIRST_USED`
    entries. A process that never decodes writes none."""
    _loaded.add(path)
    if not architecture:
        return
    with _used_lock:
        listed, left = _first_turn.get(architecture, ([], -1))
        if left == 0 or path.name in listed:
            return
        listed.append(path.name)
        left = 1 if ends and left < 0 else left - 1 if left > 0 else left
        _first_turn[architecture] = (listed, 0 if len(listed) >= FIRST_USED else left)
        if left == 0 or len(listed) >= FIRST_USED:
            with contextlib.suppress(OSError):  # (a full or read-only disk: the next process preloads nothing)
                _write_atomically(_list_path(path.parent, architecture), "".join(f"{n}\n" for n in listed).encode())


def _list_path(folder: Path, architecture: str) -> Path:
    """The list of first used programs of `architecture` in processes like this one (`_process_key`)."""
    return folder / f"{_digest(architecture, ('first used',))}.first"


def _read_list(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text().splitlines() if line.endswith(".xla")][:FIRST_USED]
    except OSError:
        return []


def _sharded(key: tuple) -> bool:
    """Whether a signature places any array elsewhere than the first device (on a mesh: not stored, its programs are
    jit's: `StoredProgram.__call__`)."""
    _, first, rest = key
    return any(leaf[-1] is not None for part in (first, rest) if part for leaf in part[1] if len(leaf) > 1)


def _leaves_signature(tree: Any) -> tuple:
    leaves, structure = jax.tree.flatten(tree)
    return structure, tuple(_leaf(x) for x in leaves)


def _leaf(x: Any) -> tuple:
    shape = getattr(x, "shape", None)
    if shape is None:  # a Python scalar: a weak-typed scalar of its kind
        return (type(x).__name__,)
    sharding = getattr(x, "sharding", None)
    placement = None if sharding is None or sharding == _default_placement() else str(sharding)
    return tuple(shape), str(x.dtype), bool(getattr(x, "weak_type", False)), placement


@functools.cache
def _default_placement() -> jax.sharding.Sharding:
    """Where an array is when nothing placed it: the first device. Only programs of arrays placed there (or on the
    host) are stored; one on another device, or on several, is jit's (`_sharded`)."""
    return jax.sharding.SingleDeviceSharding(jax.devices()[0])


def _timed(name: str, done: str, work: Callable[[], Any], *, monitored: bool = True) -> Any:
    """`work()`, logged as `done` with its time. `monitored` (a load): also reported to JAX's monitoring as a
    backend compile of `name`, as a persistent-cache hit is, so the compile clock counts it and views show it as
    compiling. (A compile reports its own phases there.)"""
    if monitored:
        monitoring.record_scalar(_BACKEND_COMPILE, time.time(), fun_name=name)
    started = time.perf_counter()
    try:
        return work()
    finally:
        seconds = time.perf_counter() - started
        if monitored:
            monitoring.record_event_duration_secs(_BACKEND_COMPILE, seconds, fun_name=name)
        _log.debug("%s %s in %.0f ms", done, name, seconds * 1000)


def _compile(jitted: Any, args: Sequence[Any]) -> Any:
    """Trace, lower and compile afresh (see the module's docstring: not from the persistent cache)."""
    from jax._src import config  # (the thread-local form of the setting; the public one is process-wide)

    lowered = jitted.lower(*args)
    with config.persistent_cache_min_compile_time_secs(float("inf")):  # (this thread's compile is not written there)
        return lowered.compile(compiler_options={_FRESH: 10**9 + uuid.uuid4().int % 10**9})


_FRESH = "xla_debug_buffer_assignment_show_max"
"""A compile option that changes no code XLA emits (how many buffers a debug dump lists), set to a value of its own
per compile: a key no persistent-cache entry has."""


def _load(path: Path) -> tuple[tuple, Any] | None:
    """(the signature it was compiled for, the executable) from a file `_save` wrote; None if it does not load."""
    try:
        data = pickle.loads(path.read_bytes())
        if data[0] != FORMAT:
            return None
        _, key, payload, in_tree, out_tree = data
        return key, serialize_executable.deserialize_and_load(
            payload, in_tree, out_tree, execution_devices=jax.devices()[:1]
        )
    except Exception as error:  # cut short, or unreadable by this jaxlib: compiled again and replaced
        warnings.warn(f"jupyter_chatflow compiles {path.name} again: the stored program did not load ({error}).",
                      stacklevel=3)  # fmt: skip
        return None


def _save(path: Path, key: tuple, compiled: Any) -> bool:
    """Write the executable and the signature it was compiled for; False if it could not be written."""
    try:
        _write_atomically(path, pickle.dumps((FORMAT, key, *serialize_executable.serialize(compiled))))
        return True
    except (OSError, ValueError, pickle.PicklingError):  # a full or read-only disk: the next process compiles
        return False


def _write_atomically(path: Path, payload: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".", suffix=".part", delete=False) as file:
        file.write(payload)
    os.replace(file.name, path)


def programs_folder() -> Path | None:
    """Where stored programs live: `programs/` in the XLA cache folder; None when that cache is off."""
    configured = getattr(jax.config, "jax_compilation_cache_dir", None)
    if not configured or os.environ.get("CHATFLOW_XLA_CACHE", "").lower() == "off":
        return None
    return Path(configured) / "programs"


def _digest(architecture: str, key: tuple) -> str:
    return hashlib.sha256(f"{_process_key()}|{architecture}|{key!r}".encode()).hexdigest()[:32]


_process: str | None = None


def _process_key() -> str:
    """A hash of `_process_parts`, computed once per process."""
    global _process
    if _process is None:
        _process = hashlib.sha256("|".join(_process_parts()).encode()).hexdigest()
    return _process


def _process_parts() -> list[str]:
    """Everything about this process that a compiled program depends on (see the module's docstring)."""
    import jaxlib

    backend = jax.devices()[0].client
    return [
        f"format {FORMAT}", jax.__version__, jaxlib.__version__, backend.platform, backend.platform_version,
        repr([(d.platform, d.device_kind) for d in jax.devices()]), _cpu(), os.environ.get("XLA_FLAGS", ""),
        _source_hash(),
    ]  # fmt: skip


def _cpu() -> str:
    """The CPU's model name and feature flags (Linux), else what `platform` knows."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    wanted = [line for line in lines if line.startswith(("model name", "flags", "Features"))]
    return "\n".join(dict.fromkeys(wanted))  # (one of each: every core lists the same)


def _source_hash() -> str:
    """A hash of the Python files of the package's engine and model (the code its programs trace: the
    transformer, attention, the quantized matrices, the sampler, the programs): a changed line there may change a
    traced program. (An edit elsewhere, the pipeline's or a front end's, keeps the stored programs.)"""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted([*(root / "engine").rglob("*.py"), *(root / "model").rglob("*.py")]):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()
