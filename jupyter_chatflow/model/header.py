"""A GGUF file's header, read fast: its metadata (long arrays only counted), and its tensors' names, shapes and types.

Saying what a file is and whether it fits in memory happens before every load, so it must cost far less than the
load. `gguf.GGUFReader` turns every item of every array into Python objects: 0.55 s for SmolLM2's 49,152-token
vocabulary on a 2-core machine, more than a whole load from the prepared-weights cache (0.3 s). This walks the same
bytes and keeps only numbers (~20 ms). It validates little: the loader still reads and checks the whole file
(`gguf_file.read_gguf`) when it dequantizes it.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import struct
from pathlib import Path
from typing import Any

import gguf

from jupyter_chatflow.errors import ModelFormatError, ModelNotFoundError

GGUF_MAGIC = b"GGUF"
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
KEPT_ARRAY_ITEMS = 4096
"""Numeric arrays up to this long are kept whole (per-layer head counts, say); longer ones, and every array of
strings (the vocabulary, the merges), are only counted (`Header.array_lengths`)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TensorInfo:
    """One tensor as the header lists it."""

    name: str
    shape: tuple[int, ...]
    """Numpy order ([out, in]), as `gguf_file` gives its arrays."""
    type_name: str
    """The storage type's name (`Q4_K`, `F32`), or `type N` for one the gguf package does not know."""

    @property
    def elements(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count


@dataclasses.dataclass(frozen=True, kw_only=True)
class Header:
    """What `read_header` keeps of a GGUF file."""

    path: Path
    metadata: dict[str, Any]
    """Every key whose value is a scalar, a string or a short numeric array."""
    array_lengths: dict[str, int]
    """Every array's length (those left out of `metadata` too)."""
    tensors: tuple[TensorInfo, ...]


def check_gguf_file(path: Path) -> Path:
    """`path`, when a file is there that starts as a GGUF file does; ModelNotFoundError or ModelFormatError else."""
    if not path.is_file():
        raise ModelNotFoundError(f"No model file at {path}. Check the path, or omit it to use the default model.")
    with path.open("rb") as handle:
        if handle.read(4) != GGUF_MAGIC:
            raise ModelFormatError(f"{path} is not a GGUF file (it does not start with b'GGUF').")
    return path


def read_header(path: str | os.PathLike[str]) -> Header:
    """The header of the GGUF file at `path`; ModelNotFoundError or ModelFormatError (saying what to do) otherwise."""
    path = check_gguf_file(Path(path))
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
        try:
            return _Cursor(buffer, path).header()
        except (struct.error, UnicodeDecodeError, ValueError, OverflowError) as error:
            raise ModelFormatError(
                f"{path} is a corrupt or truncated GGUF file ({error}). Download it again."
            ) from None


class _Cursor:
    """Reads the header's fields one after another (little-endian, or big-endian where the version says so)."""

    def __init__(self, buffer: mmap.mmap, path: Path):
        self.buffer, self.path, self.at, self.order = buffer, path, 4, "<"

    def header(self) -> Header:
        version = self.number("I")
        if version & 0xFFFF == 0:  # written big-endian: the version reads byte-swapped
            self.order, version = ">", int.from_bytes(version.to_bytes(4, "little"), "big")
        if version not in (2, 3):
            raise ModelFormatError(f"{self.path} is GGUF version {version}; only versions 2 and 3 can be read.")
        n_tensors, n_fields = self.number("Q"), self.number("Q")
        metadata: dict[str, Any] = {}
        lengths: dict[str, int] = {}
        for _ in range(n_fields):
            key, kind = self.string(), self.number("I")
            if kind == _ARRAY:
                kept, lengths[key] = self.array()
                if kept is not None:
                    metadata[key] = kept
            else:
                metadata[key] = self.value(kind)
        tensors = tuple(self.tensor() for _ in range(n_tensors))
        return Header(path=self.path, metadata=metadata, array_lengths=lengths, tensors=tensors)

    def number(self, code: str) -> Any:
        (value,) = struct.unpack_from(self.order + code, self.buffer, self.at)
        self.at += struct.calcsize(code)
        return value

    def string(self) -> str:
        size = self.number("Q")
        self.need(size)
        text = bytes(self.buffer[self.at : self.at + size]).decode("utf-8", errors="replace")
        self.at += size
        return text

    def value(self, kind: int) -> Any:
        if kind == _STRING:
            return self.string()
        if kind not in _SCALARS:
            raise ValueError(f"unknown metadata value type {kind}")
        return self.number(_SCALARS[kind])

    def array(self) -> tuple[list[Any] | None, int]:
        """(the items, or None where only counted; the length)."""
        kind, count = self.number("I"), self.number("Q")
        if kind == _STRING:
            self.need(8 * count)  # (each item is at least its 8-byte length)
            if count > KEPT_ARRAY_ITEMS:
                for _ in range(count):
                    size = self.number("Q")
                    self.at += size
                return None, count
            return [self.string() for _ in range(count)], count
        if kind not in _SCALARS:
            raise ValueError(f"unknown array item type {kind}")
        size = struct.calcsize(_SCALARS[kind]) * count
        self.need(size)
        if count > KEPT_ARRAY_ITEMS:
            self.at += size
            return None, count
        items = list(struct.unpack_from(f"{self.order}{count}{_SCALARS[kind]}", self.buffer, self.at))
        self.at += size
        return items, count

    def tensor(self) -> TensorInfo:
        name, n_dims = self.string(), self.number("I")
        if n_dims > 8:
            raise ValueError(f"tensor {name} has {n_dims} dimensions")
        dims = [self.number("Q") for _ in range(n_dims)]
        kind = self.number("I")
        self.number("Q")  # its offset in the data section
        try:
            type_name = gguf.GGMLQuantizationType(kind).name
        except ValueError:
            type_name = f"type {kind}"
        return TensorInfo(name=name, shape=tuple(reversed(dims)), type_name=type_name)

    def need(self, size: int) -> None:
        if self.at + size > len(self.buffer):
            raise ValueError(f"a field at byte {self.at:,} runs past the end of the file ({len(self.buffer):,} bytes)")
