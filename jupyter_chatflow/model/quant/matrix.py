"""A quantized weight matrix in the model (Flax NNX): packed integer fields on the device, dequantized inside the
compiled program right next to the matmul that reads them.

`project`, `gather_rows` and `dense` are what the transformer calls for any weight, float or packed, so its code
reads the same either way. A float layer matrix is an `nnx.Param` in [in, out] order (`x @ w`); the embedding and
a float head are [V, d]; a `QuantizedMatrix` is always [out, in], the file's order, and projects as `x @ W.T`.
On GPU/TPU XLA fuses the dequantization into the dot (the weights' bytes are read once, packed); XLA:CPU
materializes the dequantized matrix first, so there it is slower than float32 weights (measured:
docs/models.md#weights-kept-quantized). On CPU, a product of a few rows (a decode step) with Q4_0, Q4_1 or Q8_0
rows goes through `kernels.py` instead, where it could be built: the blocks are read as they are.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from . import kernels
from .formats import dequantize
from .packed import MATRICES, Packed, Part


class Quants(nnx.Variable):
    """A field of a quantized matrix: packed integer codes, or their scales."""


class QuantizedPart(nnx.Module):
    """Consecutive rows of a matrix in one format (`formats`), its fields as device arrays."""

    def __init__(self, part: Part, dtype: Any):
        self.format = part.format
        kept = dtype if part.format == "float" else None  # (the integer codes and scales stay as they are)
        self.fields = nnx.Dict({name: Quants(jnp.asarray(a, kept)) for name, a in part.fields.items()})
        self.kernel = kernels.version() if part.format in kernels.FORMATS and kernels.available() else ""
        """The version of the kernel a decode step's product runs (`kernels.py`; "": none): in the graph, so a
        program that calls it is keyed apart from one that does not."""

    def values(self, fields: dict[str, jax.Array] | None = None) -> jax.Array:
        """float32 values [..., cols] of these rows (or of `fields`: some of its rows, gathered)."""
        return dequantize(self.format, fields if fields is not None else self._arrays())

    def project(self, x: jax.Array) -> jax.Array:
        """x [..., in] @ these rows transposed: [..., rows]."""
        if self.kernel and math.prod(x.shape[:-1]) <= kernels.MAX_ROWS:  # a decode step's few rows
            return _kernel_product(self.format, x, self._arrays()).astype(x.dtype)
        if self.format == "int8":  # the integer codes through the dot, each output scaled after it
            f = self._arrays()
            return jnp.einsum("...i,oi->...o", x, f["codes"].astype(x.dtype)) * f["scale"].astype(x.dtype)
        return jnp.einsum("...i,oi->...o", x, self.values().astype(x.dtype))

    def _arrays(self) -> dict[str, jax.Array]:
        return {name: variable[...] for name, variable in self.fields.items()}


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _kernel_product(fmt: str, x: jax.Array, fields: dict[str, jax.Array]) -> jax.Array:
    """`kernels.matvec`, differentiable in `x` (`jax.grad` through a decode-sized input of an as-file model): the
    backward pass is the dequantized matrix's product, as a prefill's forward pass is."""
    return kernels.matvec(fmt, x, fields)


def _kernel_forward(fmt: str, x: jax.Array, fields: dict[str, jax.Array]) -> tuple[jax.Array, Any]:
    return kernels.matvec(fmt, x, fields), (fields, x)  # (x: a few rows, kept for its dtype)


def _kernel_backward(fmt: str, saved: Any, grad: jax.Array) -> tuple[jax.Array, None]:
    fields, x = saved
    return jnp.einsum("...o,oi->...i", grad, dequantize(fmt, fields)).astype(x.dtype), None  # (the codes: none)


_kernel_product.defvjp(_kernel_forward, _kernel_backward)


class QuantizedMatrix(nnx.Module):
    """A weight matrix [out, in] kept quantized (`Packed`): one `QuantizedPart` per run of rows in one format."""

    def __init__(self, packed: Packed, dtype: Any):
        self.parts = nnx.List([QuantizedPart(part, dtype) for part in packed.parts])
        self.shape, self.dtype = packed.shape, jnp.dtype(dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        """x [..., in] @ W.T: [..., out], each part's rows dequantized next to its dot."""
        outs = [part.project(x) for part in self.parts]
        return outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=-1)

    def rows(self, index: jax.Array) -> jax.Array:
        """The rows `index` (any shape) dequantized, in the model's dtype: [*index.shape, in] (an embedding's
        lookup: only the gathered rows are dequantized)."""
        (part,) = self.parts  # (an embedding is one tensor of the file: one format)
        gathered = {name: jnp.take(a, index, axis=0) for name, a in part._arrays().items()}
        return part.values(gathered).astype(self.dtype)

    def dense(self) -> jax.Array:
        """The whole matrix [out, in] dequantized, in the model's dtype."""
        values = [part.values().astype(self.dtype) for part in self.parts]
        return values[0] if len(values) == 1 else jnp.concatenate(values)

    def __getitem__(self, index: Any) -> jax.Array:
        """`dense()[index]`, as a float Param reads (the whole matrix is dequantized: for inspection, not for
        programs)."""
        return self.dense()[index]


Weight = nnx.Param | QuantizedMatrix


def weight(value: Any, dtype: Any) -> Weight:
    """A weight of the model: a float array as an `nnx.Param` in `dtype`, a `Packed` one as a `QuantizedMatrix`."""
    if isinstance(value, Packed):
        return QuantizedMatrix(value, dtype)
    return nnx.Param(jnp.asarray(value, dtype))


def project(x: jax.Array, w: Weight) -> jax.Array:
    """x [..., in] through a layer matrix: `x @ w` for a float one ([in, out]), `x @ W.T` for a packed one."""
    return w(x) if isinstance(w, QuantizedMatrix) else x @ w[...]


def gather_rows(w: Weight, index: jax.Array) -> jax.Array:
    """Rows `index` of an embedding table [V, d]: [*index.shape, d]."""
    return w.rows(index) if isinstance(w, QuantizedMatrix) else jnp.take(w[...], index, axis=0)


def head_logits(hidden: jax.Array, w: Weight) -> jax.Array:
    """hidden [b, d] through an output head [V, d] (or the tied embedding): [b, V]."""
    return w(hidden) if isinstance(w, QuantizedMatrix) else jnp.einsum("bd,vd->bv", hidden, w[...])


def layer_weights(layer: dict[str, Any], dtype: Any) -> dict[str, Any]:
    """A layer's weights for `transformer.Block`: its matrices as `weight`s, the rest (norms, biases) as arrays in
    `dtype`."""
    return {n: weight(w, dtype) if n in MATRICES else jnp.asarray(w, dtype) for n, w in layer.items()}
