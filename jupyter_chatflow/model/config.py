"""The shape of a transformer, read from a GGUF file's metadata as llama.cpp writes it.

One decoder serves every family here; what differs is data (`FAMILIES`): whether the file's q/k rows are
permuted for interleaved RoPE (only llama's converter does that), the activation, the embedding scale, the
default pattern of sliding-window layers, and whether a rope base of the local layers applies. Which optional
tensors a layer has (q/k/v biases, per-head q/k norms, norms after attention and after the MLP, a fused qkv or
gate/up matrix) is read from the file's tensors in `weights.py`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jupyter_chatflow.errors import ModelFormatError


@dataclasses.dataclass(frozen=True, kw_only=True)
class Family:
    """What a `general.architecture` value means beyond the shared metadata keys (llama.cpp's `src/models/*.cpp`)."""

    examples: str
    permuted_rope: bool = False
    """llama.cpp's converter permutes llama q/k rows for interleaved RoPE; every other family keeps HF's halves."""
    activation: str = "silu"
    """The MLP's gate: SwiGLU ("silu") or GeGLU with tanh-approximated GELU ("gelu_tanh")."""
    embed_scale: bool = False
    """Gemma multiplies the embedding by sqrt(d)."""
    swa_pattern: int = 0
    """Every n-th layer attends globally, the others through the sliding window (0: no sliding window)."""
    local_rope_base: float = 0.0
    """The rope base of the sliding-window layers when the file has no `rope.freq_base_swa` (0: the global base)."""
    ignores_sliding_window: bool = False
    """llama.cpp reads the key and attends globally all the same (Phi-3: its SWA is disabled upstream)."""


FAMILIES: dict[str, Family] = {
    "llama": Family(examples="Llama 2/3.x, SmolLM, Mistral, TinyLlama", permuted_rope=True),
    "qwen2": Family(examples="Qwen 2 / 2.5"),
    "qwen3": Family(examples="Qwen 3"),
    "gemma2": Family(examples="Gemma 2", activation="gelu_tanh", embed_scale=True, swa_pattern=2),
    "gemma3": Family(
        examples="Gemma 3 (text)", activation="gelu_tanh", embed_scale=True, swa_pattern=6, local_rope_base=10000.0
    ),
    "phi3": Family(examples="Phi-3, Phi-3.5, Phi-4-mini", ignores_sliding_window=True),
}
SUPPORTED_ARCHITECTURES = tuple(FAMILIES)

# Keys whose presence asks for computation this engine does not do: refused by name rather than ignored.
_UNSUPPORTED_KEYS = {
    "expert_count": "mixture-of-experts layers",
    "attention.q_lora_rank": "low-rank (MLA) attention",
    "ssm.conv_kernel": "state-space layers",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class RopeScaling:
    """Frequency scaling of rotary embeddings (`none`, `linear` or Llama 3's `llama3`)."""

    kind: str = "none"
    factor: float = 1.0
    original_context_length: int = 0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    attn_factor: float = 1.0
    """Phi-3's LongRoPE scales cos and sin by this (`rope.scaling.attn_factor`)."""


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
    attention_scale: float = 0.0
    """Queries are multiplied by this before the dot product (0: 1/sqrt(head_dim))."""
    attn_softcap: float = 0.0
    """Gemma 2 caps attention scores at +-this with tanh (0: no cap)."""
    final_softcap: float = 0.0
    """Gemma 2/3 cap the logits at +-this with tanh (0: no cap)."""
    sliding_window: int = 0
    """A sliding layer's query at position p sees keys at p - window + 1 .. p (0: no sliding layers)."""
    sliding_layers: tuple[int, ...] = ()
    """The indices of the layers that attend through the sliding window."""
    local_rope_base: float = 0.0
    """The rope base of the sliding layers (0: `rope_base`); their rope is never scaled."""

    def __post_init__(self) -> None:
        if self.n_kv_heads < 1 or self.n_heads % self.n_kv_heads:
            raise ModelFormatError(
                f"head_count {self.n_heads} is not a multiple of head_count_kv {self.n_kv_heads}: "
                "the GGUF metadata is inconsistent."
            )
        if self.head_dim % 2:
            raise ModelFormatError(f"the head width {self.head_dim} is odd: rotary embeddings rotate pairs of values.")
        if self.rope_dim % 2 or not 0 < self.rope_dim <= self.head_dim:
            raise ModelFormatError(
                f"the rotary dimension {self.rope_dim} must be even and at most the head width {self.head_dim}."
            )

    @property
    def group_size(self) -> int:
        """Query heads that share one key/value head."""
        return self.n_heads // self.n_kv_heads

    @property
    def family(self) -> Family:
        """What the architecture means beyond the shared keys."""
        return FAMILIES[self.architecture]

    @property
    def query_scale(self) -> float:
        """The factor queries are scaled by before attention."""
        return self.attention_scale or self.head_dim**-0.5

    def window_of(self, layer: int) -> int:
        """The sliding window of layer `layer`, or 0 when it attends to every position before it."""
        return self.sliding_window if layer in self.sliding_layers else 0

    @classmethod
    def from_metadata(
        cls, metadata: Mapping[str, Any], *, vocab_size: int, tied: bool, file_name: str = ""
    ) -> ModelConfig:
        """Build the config from GGUF key/values (and the file's name, for `display_name`); raise ModelFormatError
        naming a missing key."""
        arch = metadata.get("general.architecture")
        if arch not in FAMILIES:
            families = "; ".join(f"{name} ({family.examples})" for name, family in FAMILIES.items())
            raise ModelFormatError(
                f"architecture {arch!r} is not supported (general.architecture); jupyter_chatflow runs {families}."
            )
        _refuse_unsupported(metadata, arch)

        def key(name: str, default: Any = None) -> Any:
            value = metadata.get(f"{arch}.{name}", default)
            if value is None:
                raise ModelFormatError(f"GGUF metadata has no '{arch}.{name}': the file is incomplete.")
            return value

        dim, n_heads = int(key("embedding_length")), int(key("attention.head_count"))
        head_dim = int(metadata.get(f"{arch}.attention.key_length", 0)) or _head_width(arch, dim, n_heads)
        n_layers = int(key("block_count"))
        return cls(
            name=display_name(metadata, file_name),
            architecture=arch,
            vocab_size=vocab_size,
            dim=dim,
            n_layers=n_layers,
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
            attention_scale=_attention_scale(arch, dim, n_heads, head_dim, n_layers),
            attn_softcap=float(metadata.get(f"{arch}.attn_logit_softcapping") or 0.0),
            final_softcap=float(metadata.get(f"{arch}.final_logit_softcapping") or 0.0),
            **_sliding(metadata, arch, n_layers),
        )


def file_config(
    path: Path, metadata: Mapping[str, Any], shapes: Mapping[str, tuple[int, ...]], vocab_size: int | None
) -> ModelConfig:
    """The config of the GGUF file at `path` from its metadata and its tensors' shapes (numpy order): the vocabulary's
    size is `vocab_size` (the token list's length) or the embedding's rows, the head is tied when the file has no
    `output.weight`. ModelFormatError naming the file when it is no decoder model or its metadata falls short."""
    if "token_embd.weight" not in shapes:
        raise ModelFormatError(f"{path} has no token_embd.weight tensor: not a decoder language model file.")
    vocab = vocab_size or shapes["token_embd.weight"][0]
    try:
        return ModelConfig.from_metadata(
            metadata, vocab_size=vocab, tied="output.weight" not in shapes, file_name=path.name
        )
    except ModelFormatError as error:  # the config knows the fields, not the file
        raise ModelFormatError(f"{path}: {error}") from None


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
    """Read rope scaling keys. Llama 3.1+ files mark theirs by shipping `rope_freqs.weight` instead, and Phi-3's
    LongRoPE files by `rope_factors_long/short.weight` (chosen in `weights.py`) with an attention factor here."""
    kind = str(metadata.get(f"{arch}.rope.scaling.type", "none"))
    if kind not in ("none", "linear"):
        raise ModelFormatError(
            f"rope scaling {kind!r} ('{arch}.rope.scaling.type') is not supported: only none and linear "
            "(Llama 3's per-frequency factors and Phi-3's LongRoPE factors come as tensors and are supported)."
        )
    return RopeScaling(
        kind=kind,
        factor=float(metadata.get(f"{arch}.rope.scaling.factor", 1.0)),
        original_context_length=int(metadata.get(f"{arch}.rope.scaling.original_context_length", 0)),
        attn_factor=float(metadata.get(f"{arch}.rope.scaling.attn_factor", 1.0)),
    )


def _refuse_unsupported(metadata: Mapping[str, Any], arch: str) -> None:
    """Refuse a file whose metadata asks for computation this engine does not do, naming the key."""
    for suffix, what in _UNSUPPORTED_KEYS.items():
        if metadata.get(f"{arch}.{suffix}"):
            raise ModelFormatError(f"'{arch}.{suffix}' asks for {what}, which jupyter_chatflow does not implement.")
    window = metadata.get(f"{arch}.attention.sliding_window")
    family = FAMILIES[arch]
    if window and not family.swa_pattern and not family.ignores_sliding_window:
        raise ModelFormatError(
            f"'{arch}.attention.sliding_window' is {window}: sliding-window attention is implemented for Gemma 2 "
            f"and 3, not for {arch}."
        )


def _attention_scale(arch: str, dim: int, n_heads: int, head_dim: int, n_layers: int) -> float:
    """llama.cpp's query scale: 1/sqrt(head width), except Gemma 2/3 27B, whose `query_pre_attn_scalar` is
    d / heads (llama.cpp recognises it by its layer count; no GGUF key carries the scalar)."""
    if (arch, n_layers) in (("gemma2", 46), ("gemma3", 62)):
        return (dim / n_heads) ** -0.5
    return head_dim**-0.5


def _sliding(metadata: Mapping[str, Any], arch: str, n_layers: int) -> dict[str, Any]:
    """The sliding window, which layers use it, and their rope base (llama.cpp's `set_swa_pattern`: layer i
    slides unless i % n == n - 1; `attention.sliding_window_pattern` overrides n, or lists a flag per layer)."""
    family, window = FAMILIES[arch], int(metadata.get(f"{arch}.attention.sliding_window") or 0)
    if not window or not family.swa_pattern:
        return {}
    pattern = metadata.get(f"{arch}.attention.sliding_window_pattern", family.swa_pattern)
    if isinstance(pattern, (list, tuple)):
        layers = tuple(i for i, flag in enumerate(pattern[:n_layers]) if flag)
    else:
        n = int(pattern)
        layers = tuple(i for i in range(n_layers) if n == 0 or i % n < n - 1)
    base = float(metadata.get(f"{arch}.rope.freq_base_swa") or family.local_rope_base)
    return {"sliding_window": window, "sliding_layers": layers, "local_rope_base": base}
