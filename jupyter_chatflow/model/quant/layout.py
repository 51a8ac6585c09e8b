"""Which GGUF formats stay packed, and the bytes their fields take once decoded (no JAX: `memory` reads this to
estimate a load before anything is imported or read)."""

from __future__ import annotations

import gguf

AS_FILE = ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q6_K")
"""The GGUF formats `weights="as-file"` keeps packed (Q5_0 too: a K-quant file of a model whose rows are not a
multiple of 256, Gemma 3 270M's 640, stores most of its matrices in it)."""
FLOAT_FILE = ("F32", "F16", "BF16")
"""The GGUF formats kept as plain float arrays (in the model's dtype) by every weights choice."""
FIELD_BYTES = {"Q8_0": 34, "Q4_0": 18, "Q4_1": 20, "Q5_0": 22, "Q5_1": 24, "Q4_K": 148, "Q6_K": 210}
"""Bytes a block's decoded fields take (`formats.unpack`): the file's block, except Q4_K's 12 bytes of packed
6-bit scales and mins, which become 16 (one uint8 each)."""


def block_shape(fmt: str) -> tuple[int, int]:
    """(values per block, bytes per block) of a GGUF format, from the gguf package's table."""
    return gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[fmt]]


def packed_bytes(fmt: str, elements: int) -> int:
    """The resident bytes of `elements` values of an `AS_FILE` format once decoded."""
    return elements // block_shape(fmt)[0] * FIELD_BYTES[fmt]
