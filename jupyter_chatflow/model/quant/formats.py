"""Quantized weight formats: a GGUF tensor's blocks decoded into their fields once, at load, and the fields turned back
into values inside the compiled program (jnp), next to the matmul that reads them.

Each format keeps its value bits packed as the file has them (two 4-bit values a byte, Q5's fifth bits 32 to a
block, Q6_K's low nibbles and high bit pairs apart) and its scales unpacked: float16 block scales, Q4_K's 6-bit
sub-block scales and mins as uint8, Q6_K's int8 sub-block scales. Every field's leading axis is the matrix row (GGUF
blocks run along a row, the input dimension), so row operations (q/k/v concatenation, the rotary row permutation, an
embedding's gather) act on the fields without touching a block.

The dequantizers repeat the `gguf` package's numpy ones (`gguf.quants`) operation for operation in float32, so the
values are the file's values: tests/model/test_quantized.py compares them on random blocks.

Also `int8`: codes per output row with one float32 scale (max |w| / 127), made at load from float weights.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import gguf
import jax
import jax.numpy as jnp
import numpy as np

from .layout import AS_FILE, FLOAT_FILE, block_shape

__all__ = ["AS_FILE", "FLOAT_FILE", "block_shape", "dequantize", "quantize_int8", "unpack"]

Fields = dict[str, np.ndarray]


def unpack(fmt: str, data: np.ndarray) -> Fields:
    """The fields of a [rows, bytes] tensor of `fmt` blocks (as `gguf.GGUFReader` maps them), decoded into arrays
    whose leading axis is the row."""
    _, type_size = block_shape(fmt)
    rows = data.shape[0]
    blocks = np.asarray(data, np.uint8).reshape(rows, -1, type_size)  # [r, nb, bytes]
    return _UNPACK[fmt](blocks)


def _f16(blocks: np.ndarray, at: int) -> np.ndarray:
    """The float16 at byte `at` of every block: [r, nb]."""
    return np.ascontiguousarray(blocks[..., at : at + 2]).view(np.float16)[..., 0]


def _bytes(blocks: np.ndarray, start: int, stop: int, dtype=np.uint8) -> np.ndarray:
    """Bytes start..stop of every block, a row's blocks run together: [r, nb * (stop - start)]."""
    part = np.ascontiguousarray(blocks[..., start:stop]).view(dtype)
    return part.reshape(blocks.shape[0], -1)


def _unpack_q4_k(blocks: np.ndarray) -> Fields:
    rows, nb, _ = blocks.shape
    scales = np.ascontiguousarray(blocks[..., 4:16]).reshape(rows * nb, 12)
    sc, mins = gguf.quants.Q4_K.get_scale_min(scales)  # the 6-bit scales and mins, [r nb, 8] each
    return {"d": _f16(blocks, 0), "dmin": _f16(blocks, 2), "sc": sc.reshape(rows, nb, 8),
            "m": mins.reshape(rows, nb, 8), "qs": _bytes(blocks, 16, 144)}  # fmt: skip


def _unpack_q6_k(blocks: np.ndarray) -> Fields:
    scales = _bytes(blocks, 192, 208, np.int8).reshape(blocks.shape[0], -1, 16)  # [r, nb, 16]
    return {"ql": _bytes(blocks, 0, 128), "qh": _bytes(blocks, 128, 192), "sc": scales, "d": _f16(blocks, 208)}


_UNPACK: dict[str, Callable[[np.ndarray], Fields]] = {
    "Q8_0": lambda b: {"d": _f16(b, 0), "qs": _bytes(b, 2, 34, np.int8)},
    "Q4_0": lambda b: {"d": _f16(b, 0), "qs": _bytes(b, 2, 18)},
    "Q4_1": lambda b: {"d": _f16(b, 0), "m": _f16(b, 2), "qs": _bytes(b, 4, 20)},
    "Q5_0": lambda b: {"d": _f16(b, 0), "qh": _bytes(b, 2, 6), "qs": _bytes(b, 6, 22)},
    "Q5_1": lambda b: {"d": _f16(b, 0), "m": _f16(b, 2), "qh": _bytes(b, 4, 8), "qs": _bytes(b, 8, 24)},
    "Q4_K": _unpack_q4_k,
    "Q6_K": _unpack_q6_k,
}


# ---- in the program: fields -> float32 values [..., cols] -------------------------------------------------------


def dequantize(fmt: str, fields: Mapping[str, jax.Array]) -> jax.Array:
    """float32 values [..., cols] of fields with any leading axes (a matrix's rows [out], or gathered rows
    [b, s])."""
    return _DEQUANTIZE[fmt](fields)


def _nibbles(qs: jax.Array, width: int) -> jax.Array:
    """Bytes [..., n * width] -> 4-bit values [..., n, 2 * width]: each group of `width` bytes gives its low
    nibbles, then its high ones (ggml's order)."""
    q = qs.reshape(*qs.shape[:-1], -1, 1, width)
    return jnp.concatenate([q & 0x0F, q >> 4], axis=-2).reshape(*qs.shape[:-1], -1, 2 * width)


def _rows(values: jax.Array, lead: tuple[int, ...]) -> jax.Array:
    return values.reshape(*lead, -1)


def _q8_0(f: Mapping[str, jax.Array]) -> jax.Array:
    lead = f["d"].shape[:-1]
    q = f["qs"].reshape(*f["d"].shape, 32).astype(jnp.float32)
    return _rows(q * f["d"].astype(jnp.float32)[..., None], lead)


def _q4_0(f: Mapping[str, jax.Array]) -> jax.Array:
    q = (_nibbles(f["qs"], 16).astype(jnp.int8) - jnp.int8(8)).astype(jnp.float32)  # [..., nb, 32]
    return _rows(f["d"].astype(jnp.float32)[..., None] * q, f["d"].shape[:-1])


def _q4_1(f: Mapping[str, jax.Array]) -> jax.Array:
    q = _nibbles(f["qs"], 16).astype(jnp.float32)  # [..., nb, 32]
    d, m = f["d"].astype(jnp.float32)[..., None], f["m"].astype(jnp.float32)[..., None]
    return _rows(d * q + m, f["d"].shape[:-1])


def _five_bits(f: Mapping[str, jax.Array]) -> jax.Array:
    """Q5_0/Q5_1's 5-bit values [..., nb, 32]: the 4 low bits in nibbles, the top bit of value i at bit i of the
    block's 4 `qh` bytes (a little-endian uint32)."""
    bits = jnp.arange(8, dtype=jnp.uint8)
    qh = f["qh"].reshape(*f["d"].shape, 4, 1) >> bits  # [..., nb, 4, 8]
    return _nibbles(f["qs"], 16) | ((qh & 0x01).reshape(*f["d"].shape, 32) << 4)


def _q5_0(f: Mapping[str, jax.Array]) -> jax.Array:
    q = (_five_bits(f).astype(jnp.int8) - jnp.int8(16)).astype(jnp.float32)
    return _rows(f["d"].astype(jnp.float32)[..., None] * q, f["d"].shape[:-1])


def _q5_1(f: Mapping[str, jax.Array]) -> jax.Array:
    d, m = f["d"].astype(jnp.float32)[..., None], f["m"].astype(jnp.float32)[..., None]
    return _rows(d * _five_bits(f).astype(jnp.float32) + m, f["d"].shape[:-1])


def _q4_k(f: Mapping[str, jax.Array]) -> jax.Array:
    lead = f["d"].shape[:-1]
    q = _nibbles(f["qs"], 32).reshape(*f["sc"].shape, 32).astype(jnp.float32)  # [..., nb, 8, 32]
    scale = f["d"].astype(jnp.float32)[..., None] * f["sc"].astype(jnp.float32)  # [..., nb, 8]
    low = f["dmin"].astype(jnp.float32)[..., None] * f["m"].astype(jnp.float32)
    return _rows(scale[..., None] * q - low[..., None], lead)


def _q6_k(f: Mapping[str, jax.Array]) -> jax.Array:
    lead = f["d"].shape[:-1]
    low = _nibbles(f["ql"], 64).reshape(*f["d"].shape, 8, 32)  # 4 bits of each value
    shifts = jnp.array([0, 2, 4, 6], jnp.uint8)[:, None]
    high = (f["qh"].reshape(*f["qh"].shape[:-1], -1, 1, 32) >> shifts) & 0x03  # its top 2 bits: [..., nb 2, 4, 32]
    q = (low | (high.reshape(low.shape) << 4)).astype(jnp.int8) - jnp.int8(32)
    q = q.reshape(*f["d"].shape, 16, 16).astype(jnp.float32)
    scale = f["d"].astype(jnp.float32)[..., None] * f["sc"].astype(jnp.float32)  # [..., nb, 16]
    return _rows(scale[..., None] * q, lead)


def _int8(f: Mapping[str, jax.Array]) -> jax.Array:
    return f["codes"].astype(jnp.float32) * f["scale"][..., None]


_DEQUANTIZE: dict[str, Callable[[Mapping[str, jax.Array]], jax.Array]] = {
    "Q8_0": _q8_0, "Q4_0": _q4_0, "Q4_1": _q4_1, "Q5_0": _q5_0, "Q5_1": _q5_1, "Q4_K": _q4_k, "Q6_K": _q6_k,
    "int8": _int8, "float": lambda f: f["w"],
}  # fmt: skip


def quantize_int8(weight: np.ndarray) -> Fields:
    """Symmetric int8 codes per row of a float matrix [out, in] and one float32 scale per row (max |w| / 127):
    each value is off by at most half its row's scale."""
    weight = np.asarray(weight, np.float32)
    scale = np.abs(weight).max(axis=1) / 127.0
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)  # (a row of zeros: codes 0, any scale)
    codes = np.clip(np.rint(weight / scale[:, None]), -127, 127).astype(np.int8)
    return {"codes": codes, "scale": scale}
