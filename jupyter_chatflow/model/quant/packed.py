"""A weight matrix kept quantized, on the host side: its rows in one or more formats, each part's fields in numpy.

`weights.transformer_weights` arranges these as it arranges float arrays, with row operations only: q/k/v and
gate/up stacked (`Packed.stack`; a Q4_K_M file's attn_v in Q6_K beside Q4_K q and k makes a matrix of two parts),
llama.cpp's rotary row permutation undone (`Packed.take`). A packed matrix stays in the file's [out, in] layout,
where a float one is transposed to [in, out]. `transformer.Transformer` turns each into a `QuantizedMatrix`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .formats import quantize_int8, unpack

MATRICES = ("wqkv", "wo", "w_gate_up", "w_down")
"""A layer's matrices, [in, out] in the float weights dict."""


@dataclasses.dataclass(frozen=True)
class Part:
    """Consecutive rows of a matrix in one format: `fields` name -> array whose leading axis is the row."""

    format: str
    fields: Mapping[str, np.ndarray]

    @property
    def rows(self) -> int:
        return next(iter(self.fields.values())).shape[0]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.fields.values())


@dataclasses.dataclass(frozen=True)
class Packed:
    """A quantized weight matrix [rows, cols]: its parts' rows stacked in order."""

    parts: tuple[Part, ...]
    cols: int

    @classmethod
    def from_file(cls, fmt: str, data: np.ndarray, cols: int) -> Packed:
        """A GGUF tensor of `fmt` blocks ([rows, bytes], as the reader maps it) of `cols` values a row."""
        return cls((Part(fmt, unpack(fmt, data)),), cols)

    @classmethod
    def floats(cls, weight: np.ndarray) -> Packed:
        """A float matrix [rows, cols] as one part (the rows of a stack whose other parts are quantized)."""
        return cls((Part("float", {"w": np.asarray(weight, np.float32)}),), weight.shape[1])

    @classmethod
    def int8(cls, weight: np.ndarray) -> Packed:
        """A float matrix [out, in] quantized per output row (`formats.quantize_int8`)."""
        return cls((Part("int8", quantize_int8(weight)),), weight.shape[1])

    @property
    def rows(self) -> int:
        return sum(part.rows for part in self.parts)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    @property
    def nbytes(self) -> int:
        return sum(part.nbytes for part in self.parts)

    def take(self, index: np.ndarray) -> Packed:
        """The rows `index` (a permutation of one part's rows: every field's rows taken alike)."""
        (part,) = self.parts
        return Packed((Part(part.format, {n: a[index] for n, a in part.fields.items()}),), self.cols)

    @staticmethod
    def stack(matrices: Sequence[Packed | np.ndarray]) -> Packed:
        """Matrices ([rows, cols] each, float ones as they come from the file) stacked by rows; neighbouring parts of
        one format are joined into one."""
        parts: list[Part] = []
        for matrix in matrices:
            for part in (matrix if isinstance(matrix, Packed) else Packed.floats(matrix)).parts:
                if parts and parts[-1].format == part.format:
                    last = parts.pop()
                    part = Part(part.format, {n: np.concatenate([a, part.fields[n]]) for n, a in last.fields.items()})
                parts.append(part)
        return Packed(tuple(parts), matrices[0].shape[1])


def stack_rows(matrices: Sequence[Any]) -> Any:
    """Float matrices (or vectors) concatenated by rows, or a `Packed` stack where any of them is packed; JAX
    arrays, tracers among them, by `jnp.concatenate` (`engine/ahead.py` arranges a header's shapes so)."""
    if all(isinstance(m, np.ndarray) for m in matrices):
        return np.concatenate(matrices)
    if any(isinstance(m, Packed) for m in matrices):
        return Packed.stack(matrices)
    import jax.numpy as jnp  # (not at import: the header's readers run before JAX loads)

    return jnp.concatenate(matrices)


def int8_weights(weights: Mapping[str, Any]) -> dict[str, Any]:
    """The transformer's float weights dict with every layer matrix, the embedding and the head quantized to int8
    per output channel (norms, biases and rope factors stay float)."""
    layers = [
        layer | {name: Packed.int8(np.asarray(layer[name]).T) for name in MATRICES} for layer in weights["layers"]
    ]
    out = dict(weights) | {"layers": layers, "embed": Packed.int8(weights["embed"])}
    if weights.get("head") is not None:
        out["head"] = Packed.int8(weights["head"])
    return out


class Int8Tensors(Mapping[str, Any]):
    """A file's float tensors ([out, in], dequantized as they are read) with every matrix quantized to int8 as it is
    read: a load that holds one float32 tensor at a time, never the whole model's."""

    def __init__(self, tensors: Mapping[str, np.ndarray]):
        self._tensors = tensors

    def __getitem__(self, name: str) -> Any:
        value = self._tensors[name]
        return Packed.int8(value) if value.ndim == 2 else value

    def __contains__(self, name: object) -> bool:  # (without reading the tensor, as Mapping's own would)
        return name in self._tensors

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)
