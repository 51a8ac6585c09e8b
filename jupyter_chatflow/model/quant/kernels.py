"""Quantized matrix-vector kernels for a decode step on CPU: `kernels.cc`, compiled on this machine, called from the
XLA program through `jax.ffi`.

XLA:CPU has no fast product of a few rows with packed weights: it dequantizes the whole matrix first, so a model
loaded with `weights="as-file"` decoded at ~4.5 tokens/s (float32 weights: ~24-30 on the 2-core machine). These
kernels read the file's Q4_0, Q4_1 and Q8_0 blocks as they are and widen each block's codes to float in registers: the
products are of the values float32 weights hold, in another order (`tests/model/test_kernels.py`), so an as-file
model answers as a float32 one does, reading a fifth of the bytes (figures: docs/results.md, issue 37).

The first use compiles `kernels.cc` with the system's C++ compiler (`c++ -O3 -march=native`, ~6 s) into the folder
of XLA's cache (`kernels/`, keyed by the source, jaxlib's version, the CPU's flags and the code chosen) and later
processes load it. Where that cannot happen (no compiler, not x86-64 with AVX2, FMA and F16C, another backend than
CPU, or `CHATFLOW_KERNELS=off`), `available()` is False, `unavailable_reason()` says why, and the product
dequantizes as before: slower, never wrong. `CHATFLOW_KERNELS=avx2` builds the AVX2 code on a CPU with AVX-512 (the
code other CPUs run; tested here).
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import jax
import jax.numpy as jnp

__all__ = ["FORMATS", "MAX_ROWS", "available", "matvec", "prepare", "unavailable_reason", "version"]

FORMATS = {"Q4_0": ("d", "qs"), "Q4_1": ("d", "m", "qs"), "Q8_0": ("d", "qs")}
"""The formats with a kernel, and the fields it takes, in order (its FFI target: `_target`; its symbol in the
library: `Chatflow` and the format, `kernels.cc`'s handlers)."""
MAX_ROWS = 8
"""Rows of x a kernel takes (a decode step of up to 8 sequences); more go through the dequantized product."""
SOURCE = Path(__file__).with_name("kernels.cc")
_CPU_FLAGS = ("avx2", "fma", "f16c")
_lock = threading.Lock()
_reason: str | None = None  # why the kernels are not available ("": they are); None until the first `available()`


def available() -> bool:
    """Whether the kernels are built, loaded and registered with XLA (building them on the first call)."""
    global _reason
    with _lock:
        if _reason is None:
            _reason = _load()
        return not _reason


def prepare() -> None:
    """Start `available()` on a thread of its own: a first build (a compiler's subprocess) then runs while the caller
    goes on, e.g. reads the weights; the first `available()` after waits for it."""
    threading.Thread(target=available, name="chatflow-kernels", daemon=True).start()


def unavailable_reason() -> str:
    """Why `available()` is False ("" when it is True)."""
    available()
    return str(_reason)


def matvec(fmt: str, x: jax.Array, fields: dict[str, jax.Array]) -> jax.Array:
    """x [..., in] (at most `MAX_ROWS` rows in all) @ W.T for W [out, in] in `fmt` blocks: [..., out] float32."""
    out = fields["d"].shape[0]
    rows = x.reshape(-1, x.shape[-1]).astype(jnp.float32)
    y = jax.ffi.ffi_call(_target(fmt), jax.ShapeDtypeStruct((rows.shape[0], out), jnp.float32))(
        rows, *(fields[name] for name in FORMATS[fmt])
    )
    return y.reshape(*x.shape[:-1], out)


def _load() -> str:
    """Build (or find) the library and register its targets; "" on success, else why not."""
    problem = _unsupported()
    if problem:
        return problem
    try:
        library = ctypes.cdll.LoadLibrary(str(_built()))
        for fmt in FORMATS:
            handler = jax.ffi.pycapsule(getattr(library, f"Chatflow{fmt}"))
            jax.ffi.register_ffi_target(_target(fmt), handler, platform="cpu")
    except (OSError, subprocess.SubprocessError, AttributeError) as error:
        return f"the kernels did not build or load: {str(error).strip()[-400:]}"
    return ""


def _target(fmt: str) -> str:
    return f"chatflow_{fmt.lower()}"


def _unsupported() -> str:
    if os.environ.get("CHATFLOW_KERNELS", "").lower() in ("0", "off", "false", "no"):
        return "CHATFLOW_KERNELS is off"
    if jax.default_backend() != "cpu":
        return f"the backend is {jax.default_backend()}, not CPU (there XLA fuses the dequantization into the dot)"
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"the CPU is {platform.machine()}, not x86-64"
    missing = [flag for flag in _CPU_FLAGS if flag not in _cpu_flags()]
    if missing:
        return f"the CPU lacks {', '.join(missing)}"
    if not shutil.which(_compiler()):
        return f"no C++ compiler ({_compiler()}; set CXX to name one)"
    return ""


def _code_flags() -> tuple[str, ...]:
    """Compiler flags beyond the CPU's own: `CHATFLOW_KERNELS=avx2` leaves AVX-512 out."""
    return ("-mno-avx512f",) if os.environ.get("CHATFLOW_KERNELS", "").lower() == "avx2" else ()


def version() -> str:
    """A short hash of the kernels' source and the code chosen: part of a program's key wherever a program calls
    them."""
    return hashlib.sha256(f"{_source_hash()}|{_code_flags()}".encode()).hexdigest()[:12]


def _compiler() -> str:
    return os.environ.get("CXX", "c++")


@functools.cache
def _cpu_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return frozenset(line.partition(":")[2].split())


@functools.cache
def _source_hash() -> str:
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()


def _built() -> Path:
    """The library for this source, jaxlib and CPU: found in the folder, or compiled into it (atomically)."""
    import jaxlib

    parts = (version(), jaxlib.__version__, sorted(_cpu_flags()))
    key = hashlib.sha256(repr(parts).encode()).hexdigest()
    folder = _folder()
    library = folder / f"kernels-{key[:24]}.so"
    if library.exists():
        return library
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        partial = Path(scratch) / library.name
        command = [_compiler(), "-O3", "-march=native", *_code_flags(), "-std=c++17", "-shared", "-fPIC", "-w",
                   f"-I{jax.ffi.include_dir()}", str(SOURCE), "-o", str(partial)]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise OSError(f"{' '.join(command[:2])} … failed: {done.stderr}")
        os.replace(partial, library)
    return library


def _folder() -> Path:
    """`kernels/` in XLA's cache folder when there is one (and it can be written), else a folder of this process,
    removed at its exit."""
    cache = getattr(jax.config, "jax_compilation_cache_dir", None)
    if cache:
        folder = Path(cache) / "kernels"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if os.access(folder, os.W_OK):
                return folder
        except OSError:
            pass
    scratch = Path(tempfile.mkdtemp(prefix="chatflow-kernels-"))  # (no cache: the library lives as long as the process)
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)  # (a loaded library stays mapped once its file goes)
    return scratch
