"""Read a GGUF file: metadata, config and float weights, dequantized by the `gguf` package's own code (or, for
`weights="as-file"`, the quantized tensors' blocks decoded into their packed fields: `quant/formats.py`).

A truncated or corrupt file raises ModelFormatError (never a hang, never a segfault): sizes are checked
against the file before any tensor is touched.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from jupyter_chatflow.errors import ModelFormatError

from . import memory
from .config import ModelConfig, file_config
from .header import check_gguf_file
from .quant.layout import AS_FILE, FLOAT_FILE
from .quant.packed import Packed
from .weights import required_layer_tensors

# Quant types whose dequantizer the gguf package ships and our tests cover.
SUPPORTED_QUANTS = frozenset(
    gguf.GGMLQuantizationType[name]
    for name in (
        "F32",
        "F16",
        "BF16",
        "Q8_0",
        "Q4_0",
        "Q4_1",
        "Q5_0",
        "Q5_1",
        "Q2_K",
        "Q3_K",
        "Q4_K",
        "Q5_K",
        "Q6_K",
    )
)


class _Reader(gguf.GGUFReader):
    """gguf's reader over a plain ndarray view of its memory map.

    Slicing an `np.memmap` builds a memmap subclass per slice; the reader slices once per metadata item
    (about 100,000 for a vocabulary), which made parsing 2.5x slower than over a plain view of the same memory.
    """

    @property  # type: ignore[override]  # a plain view of the same memory map
    def data(self) -> np.ndarray:
        return self._plain

    @data.setter
    def data(self, value: np.ndarray) -> None:
        self._plain = value.view(np.ndarray) if isinstance(value, np.memmap) else value


@dataclasses.dataclass(frozen=True, kw_only=True)
class GGUFModel:
    """What a GGUF file holds, ready for the transformer: float32 weights in [out, in] order (or packed ones)."""

    path: Path
    config: ModelConfig
    metadata: Mapping[str, Any]
    tensors: Mapping[str, np.ndarray]
    quant_types: Mapping[str, str]


def read_gguf(path: str | os.PathLike[str], *, packed: bool = False) -> GGUFModel:
    """Open and validate a GGUF model file of a supported architecture; its tensors are dequantized when first read.

    Lazily, so a loader that arranges one layer at a time never holds every float32 tensor at once (the
    peak memory of a first load matters on small machines such as Binder's). With `packed`, a tensor in one of
    the formats `weights="as-file"` keeps (`quant.formats.AS_FILE`) reads as a `Packed` matrix instead, and a
    file with a tensor in any other quantized format is refused, by name.
    """
    path = Path(path)
    reader = _open_reader(path)
    metadata, config = _metadata_and_config(path, reader)
    by_name = {tensor.name: tensor for tensor in reader.tensors}
    for tensor in by_name.values():
        _check_quant(path, tensor)
        if packed:
            check_as_file(path, tensor.name, tensor.tensor_type.name)
    quants = {name: tensor.tensor_type.name for name, tensor in by_name.items()}
    tensors = _Dequantized(path, by_name, packed)
    return GGUFModel(path=path, config=config, metadata=metadata, tensors=tensors, quant_types=quants)


def check_as_file(path: Path, name: str, fmt: str) -> None:
    """ModelFormatError unless `weights="as-file"` can hold tensor `name`, stored as `fmt`, as the file has it."""
    if fmt not in AS_FILE + FLOAT_FILE:
        raise ModelFormatError(
            f"{path}: tensor {name} is stored as {fmt}, which weights='as-file' cannot keep packed (it keeps "
            f"{', '.join(AS_FILE)}, and {', '.join(FLOAT_FILE)} as floats). Load it with weights=None (dequantized "
            "to the dtype) or weights='int8', or re-quantize the file to one of those formats (e.g. Q4_K_M)."
        )


class _Dequantized(Mapping[str, Any]):
    """Tensor name -> float32 array in numpy order ([out, in]), dequantized on each read (not kept); or, `packed`,
    a `Packed` matrix for a tensor in one of `AS_FILE`'s formats."""

    def __init__(self, path: Path, by_name: Mapping[str, Any], packed: bool = False):
        self._path, self._by_name, self._packed = path, by_name, packed  # the reader's tensors: memory-map views

    def __getitem__(self, name: str) -> Any:
        tensor = self._by_name[name]
        fmt = tensor.tensor_type.name
        if self._packed and fmt in AS_FILE:
            return Packed.from_file(fmt, tensor.data, int(tensor.shape[0]))  # (GGUF lists the row's length first)
        return _dequantize(self._path, tensor)

    def __contains__(self, name: object) -> bool:  # (Mapping's own would dequantize the tensor to find out)
        return name in self._by_name

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)


def read_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Only the key/value metadata of a GGUF file (validated like `read_gguf`, no weights dequantized)."""
    path = Path(path)
    return _metadata_and_config(path, _open_reader(path))[0]


def describe(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A summary of a model file for people: architecture, sizes, storage, tokenizer."""
    return described(path)[0]


def described(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`describe`'s summary and the file's metadata, read once (a 262k-token vocabulary takes seconds to read)."""
    path = Path(path)
    reader = _open_reader(path)
    metadata, config = _metadata_and_config(path, reader)
    quants = Counter(tensor.tensor_type.name for tensor in reader.tensors)
    sizes = memory.footprint(path)
    return {
        "summary": sizes.summary(),
        "name": config.name,
        "file": str(path),
        "file_size_mb": round(path.stat().st_size / 2**20, 1),
        "architecture": config.architecture,
        "parameters": sizes.parameters,  # (a tied head is the embedding: one tensor, counted once)
        "tensor_types": dict(quants.most_common()),
        "quantization": sizes.quantization,
        **memory.figures(sizes),
        "layers": config.n_layers,
        "embedding_dim": config.dim,
        "ffn_dim": config.ffn_dim,
        "heads": config.n_heads,
        "kv_heads": config.n_kv_heads,
        "head_dim": config.head_dim,
        "context_length": config.context_length,
        "vocab_size": config.vocab_size,
        "rope_base": config.rope_base,
        "sliding_window": _sliding_summary(config),
        "tied_embeddings": config.tied_embeddings,
        "tokenizer": f"{metadata.get('tokenizer.ggml.model')} (pre-tokenizer {metadata.get('tokenizer.ggml.pre')})",
        "chat_template": "yes" if metadata.get("tokenizer.chat_template") else "no",
        "license": metadata.get("general.license", "unknown"),
    }, metadata


def _sliding_summary(config: ModelConfig) -> str:
    if not config.sliding_layers:
        return "none: every layer attends to the whole window"
    return f"{config.sliding_window} tokens, in {len(config.sliding_layers)} of {config.n_layers} layers"


def _metadata_and_config(path: Path, reader: gguf.GGUFReader) -> tuple[dict[str, Any], ModelConfig]:
    metadata = {name: _field_value(field) for name, field in reader.fields.items()}
    by_name = {tensor.name: tensor for tensor in reader.tensors}
    shapes = {name: tuple(int(n) for n in reversed(tensor.shape)) for name, tensor in by_name.items()}
    config = file_config(path, metadata, shapes, len(metadata.get("tokenizer.ggml.tokens") or ()))
    _check_tensor_names(path, config, by_name)
    _check_attention_shapes(path, config, by_name)
    return metadata, config


def _open_reader(path: Path) -> gguf.GGUFReader:
    check_gguf_file(path)
    try:
        reader = _Reader(path, "r")
    except Exception as error:  # the reader raises many types on corrupt input; all mean the same here
        raise ModelFormatError(f"{path} is a corrupt or truncated GGUF file ({error}). Download it again.") from error
    _check_sizes(path, reader)
    return reader


def _check_sizes(path: Path, reader: gguf.GGUFReader) -> None:
    """Every tensor must lie wholly inside the file: catches truncated downloads up front."""
    file_size = path.stat().st_size
    for tensor in reader.tensors:
        end = tensor.data_offset + tensor.n_bytes
        if end > file_size or tensor.data.nbytes != tensor.n_bytes:
            raise ModelFormatError(
                f"{path} is truncated: tensor {tensor.name} needs bytes up to {end:,} but the file has "
                f"{file_size:,}. Download or install the model again."
            )


def _field_value(field: Any) -> Any:
    value = field.contents()
    return value.item() if isinstance(value, np.generic) else value


def _check_tensor_names(path: Path, config: ModelConfig, by_name: Mapping[str, Any]) -> None:
    needed = (name for i in range(config.n_layers) for name in required_layer_tensors(by_name, i))
    missing = [name for name in needed if name not in by_name]
    if "output_norm.weight" not in by_name:
        missing.append("output_norm.weight")
    if missing:
        shown = ", ".join(missing[:4]) + (" …" if len(missing) > 4 else "")
        raise ModelFormatError(f"{path} lacks {len(missing)} tensor(s) a {config.architecture} model needs: {shown}")


def _check_attention_shapes(path: Path, config: ModelConfig, by_name: Mapping[str, Any]) -> None:
    """The attention matrices must have the rows the head counts say (numpy order: [out, in])."""
    arch, q_rows, kv_rows = config.architecture, config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
    expected = {"attn_q": (q_rows, config.dim), "attn_k": (kv_rows, config.dim), "attn_v": (kv_rows, config.dim),
                "attn_qkv": (q_rows + 2 * kv_rows, config.dim), "attn_output": (config.dim, q_rows)}  # fmt: skip
    for i in range(config.n_layers):
        for part, shape in expected.items():
            if f"blk.{i}.{part}.weight" not in by_name:  # (q, k, v or the fused qkv: the names checked that)
                continue
            actual = tuple(int(n) for n in reversed(by_name[f"blk.{i}.{part}.weight"].shape))
            if actual != shape:
                raise ModelFormatError(
                    f"{path}: tensor blk.{i}.{part}.weight is {list(actual)} but '{arch}.attention.head_count' "
                    f"{config.n_heads}, '{arch}.attention.head_count_kv' {config.n_kv_heads} and head width "
                    f"{config.head_dim} make it {list(shape)}: the metadata does not match the weights."
                )


def _check_quant(path: Path, tensor: Any) -> None:
    qtype = gguf.GGMLQuantizationType(tensor.tensor_type)
    if qtype not in SUPPORTED_QUANTS:
        names = ", ".join(sorted(q.name for q in SUPPORTED_QUANTS))
        raise ModelFormatError(
            f"{path}: tensor {tensor.name} is stored as {qtype.name}, which is not supported. "
            f"Supported: {names}. Re-quantize the model (e.g. to Q8_0 or Q4_K_M)."
        )


def _dequantize(path: Path, tensor: Any) -> np.ndarray:
    """float32 values of a tensor whose type `_check_quant` accepted."""
    shape = tuple(int(n) for n in reversed(tensor.shape))  # GGUF lists dims innermost first
    values = gguf.quants.dequantize(tensor.data, gguf.GGMLQuantizationType(tensor.tensor_type))
    return np.ascontiguousarray(values, dtype=np.float32).reshape(shape)
