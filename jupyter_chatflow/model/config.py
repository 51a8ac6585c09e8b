"""The shape of a Llama-family transformer, read from a GGUF file's metadata."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from jupyter_chatflow.errors import ModelFormatError

SUPPORTED_ARCHITECTURES = ("llama",)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RopeScaling:
    """Frequency scaling of rotary embeddings (`none`, `linear` or Llama 3's `llama3`)."""

    kind: str = "none"
    factor: float = 1.0
    original_context_length: int = 0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Hyper-parameters of one model; every field comes from the GGUF metadata."""

    name: str
    """The model's name as people know it (`display_name`)."""
    architecture: str
    vocab_size: int
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_dim: int
    context_length: int
    norm_eps: float
    rope_base: float
    rope_dim: int
    rope_scaling: RopeScaling = RopeScaling()
    tied_embeddings: bool = True

    def __post_init__(self) -> None:
        if self.n_kv_heads < 1 or self.n_heads % self.n_kv_heads:
            raise ModelFormatError(
                f"head_count {self.n_heads} is not a multiple of head_count_kv {self.n_kv_heads}: "
                "the GGUF metadata is inconsistent."
            )
        if self.head_dim % 2:
            raise ModelFormatError(f"the head width {self.head_dim} is odd: rotary embeddings rotate pairs of values.")
        if self.rope_dim != self.head_dim:
            raise ModelFormatError(
                f"partial rotary embeddings (rope dim {self.rope_dim} < head dim {self.head_dim}) "
                "are not supported yet."
            )

    @property
    def group_size(self) -> int:
        """Query heads that share one key/value head."""
        return self.n_heads // self.n_kv_heads

    @classmethod
    def from_metadata(
        cls, metadata: Mapping[str, Any], *, vocab_size: int, tied: bool, file_name: str = ""
    ) -> ModelConfig:
        """Build the config from GGUF key/values (and the file's name, for `display_name`); raise ModelFormatError
        naming a missing key."""
        arch = metadata.get("general.architecture")
        if arch not in SUPPORTED_ARCHITECTURES:
            raise ModelFormatError(
                f"architecture {arch!r} is not supported; jupyter_chatflow runs Llama-family GGUF files "
                f"(general.architecture in {SUPPORTED_ARCHITECTURES}), e.g. SmolLM2, Llama 3, TinyLlama."
            )

        def key(name: str, default: Any = None) -> Any:
            value = metadata.get(f"{arch}.{name}", default)
            if value is None:
                raise ModelFormatError(f"GGUF metadata has no '{arch}.{name}': the file is incomplete.")
            return value

        dim, n_heads = int(key("embedding_length")), int(key("attention.head_count"))
        head_dim = int(metadata.get(f"{arch}.attention.key_length", 0)) or _head_width(arch, dim, n_heads)
        return cls(
            name=display_name(metadata, file_name),
            architecture=arch,
            vocab_size=vocab_size,
            dim=dim,
            n_layers=int(key("block_count")),
            n_heads=n_heads,
            n_kv_heads=int(key("attention.head_count_kv", n_heads)),
            head_dim=head_dim,
            ffn_dim=int(key("feed_forward_length")),
            context_length=int(key("context_length")),
            norm_eps=float(key("attention.layer_norm_rms_epsilon")),
            rope_base=float(key("rope.freq_base", 10000.0)),
            rope_dim=int(key("rope.dimension_count", head_dim)),
            rope_scaling=_rope_scaling(metadata, arch),
            tied_embeddings=tied,
        )


# A GGUF file name's tail after the model's name (llama.cpp's naming convention, and the common "name.Q4_K_M"):
# the shard ("-00001-of-00003"), the weights' encoding ("Q4_1", "Q4_K_M", "IQ2_XS", "F16", "BF16") and ".gguf".
_FILE_TAIL = re.compile(r"(?:-\d{5}-of-\d{5})?(?:[.-](?:[IK]?Q\d\w*|B?F16|F32))?(?:-\d{5}-of-\d{5})?\.gguf$", re.I)


def display_name(metadata: Mapping[str, Any], file_name: str = "") -> str:
    """The model's name as people know it, e.g. "SmolLM2-135M-Instruct".

    A GGUF file is usually named after its model by whoever published it (the Hugging Face repository's spelling, or
    llama.cpp's `<BaseName>-<SizeLabel>-<FineTune>-<Version>-<Encoding>.gguf`): that name, less its encoding, when it
    contains the metadata's `general.basename`. `general.name` is often a converter's guess from a folder name
    ("Smollm2 135M 8k Lc100K Mix1 Ep2"), so next come the metadata's parts joined as llama.cpp joins them, then
    `general.name`, then the file's name whatever it is."""
    stem = _FILE_TAIL.sub("", file_name) if file_name.lower().endswith(".gguf") else file_name
    basename = str(metadata.get("general.basename") or "")
    if basename and _letters(basename) in _letters(stem):
        return stem
    if basename:
        parts = (metadata.get(f"general.{key}") for key in ("basename", "size_label", "finetune", "version"))
        return "-".join(str(part) for part in parts if part)
    return str(metadata.get("general.name") or stem or "unnamed")


def _letters(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", text.lower())


def _head_width(arch: str, dim: int, n_heads: int) -> int:
    """The width of one attention head when the file does not give it: the embedding split evenly over the heads."""
    if n_heads < 1 or dim % n_heads:
        raise ModelFormatError(
            f"'{arch}.attention.head_count' is {n_heads}, which does not divide '{arch}.embedding_length' {dim} "
            f"into equal heads (and no '{arch}.attention.key_length' gives the head width): the metadata is "
            "inconsistent."
        )
    return dim // n_heads


def _rope_scaling(metadata: Mapping[str, Any], arch: str) -> RopeScaling:
    """Read rope scaling keys; Llama 3.1+ files mark theirs by shipping `rope_freqs.weight` instead."""
    kind = str(metadata.get(f"{arch}.rope.scaling.type", "none"))
    if kind not in ("none", "linear"):
        raise ModelFormatError(f"rope scaling {kind!r} is not supported (only none and linear).")
    return RopeScaling(
        kind=kind,
        factor=float(metadata.get(f"{arch}.rope.scaling.factor", 1.0)),
        original_context_length=int(metadata.get(f"{arch}.rope.scaling.original_context_length", 0)),
    )
