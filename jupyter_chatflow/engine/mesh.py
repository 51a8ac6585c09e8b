"""A device mesh: one model's weights and KV caches spread over N devices (`load_model(path, devices=N)`).

The mesh has the axes ("batch", "tp") shaped (1, N). Weights are placed with `NamedSharding` and the programs are
jitted as they are for one device: XLA's SPMD partitioner follows the arrays' shardings and places the collectives
(no hand-written psum or shard_map). Tensor parallel ("tp"), where the dimension divides by N:

- attention over heads, when both the query and the kv heads divide: wqkv's (and bqkv's) columns, wo's rows;
- the MLP over its inner dimension: w_gate_up's columns, w_down's rows;
- the vocabulary: the embedding's (and an untied head's) rows.

Everything else (norms, rope tables, what does not divide) is replicated on every device. The KV caches [b, k, T, e]
are sharded over kv heads on "tp" when those divide, and their rows over "batch".

wqkv holds q, k and v side by side and w_gate_up holds gate and up: a contiguous split of their columns gives a
device a slice that straddles the model's own split (at N=2, one device holds all of gate, the other all of up), so
XLA reshards between the projection and the attention (or the gated product). That costs a collective per layer; a
layout interleaving the halves per device would keep the split local, at the price of a weight layout of its own
for the mesh (not built: correctness first, on CPU meshes).

SmolLM2-135M (9 heads, 3 kv heads, inner 1,536, vocabulary 49,152) shards its MLP and vocabulary at N=2 and N=4;
its attention weights and KV caches stay replicated (neither 9 nor 3 divides by 2 or 4).

Quantized weights (`model/quant`: packed codes and their scales, [out rows, ...]) are placed by the same roles: a
leaf under one of the names above that is not the float weight's shape shards its output rows (axis 0) where they
divide by N. For wo and w_down that is the other way round from their float rows (the output, d, split rather than
the input): XLA then gathers after the dot instead of summing; either is correct.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.model.config import ModelConfig

AXES = ("batch", "tp")


def make_mesh(devices: int | None) -> Mesh | None:
    """A ("batch", "tp") mesh of shape (1, N) over the first N of `jax.devices()`; None for one device (or None)."""
    if devices is None or devices == 1:
        return None
    if not isinstance(devices, int) or devices < 1:
        raise ChatflowError(f"devices must be a whole number of devices, at least 1; got {devices!r}")
    available = jax.devices()
    if devices > len(available):
        raise ChatflowError(
            f"devices={devices} asks for more devices than JAX sees ({len(available)} {available[0].platform}). "
            f"On CPU, start Python with XLA_FLAGS=--xla_force_host_platform_device_count={devices} set (before "
            "jax is imported) to split the host into that many devices."
        )
    return Mesh(np.array(available[:devices]).reshape(1, devices), AXES)


@dataclasses.dataclass(frozen=True)
class Split:
    """Which of a model's dimensions are sharded over "tp" on a mesh of `n` devices."""

    n: int
    heads: bool
    """Attention (wqkv's columns, wo's rows): the query and the kv heads both divide by n."""
    mlp: bool
    """The MLP's inner dimension divides by n."""
    vocab: bool
    """The vocabulary divides by n."""

    @classmethod
    def of(cls, config: ModelConfig, n: int) -> Split:
        """What a model of `config` shards on n devices."""
        heads = config.n_heads % n == 0 and config.n_kv_heads % n == 0
        return cls(n=n, heads=heads, mlp=config.ffn_dim % n == 0, vocab=config.vocab_size % n == 0)

    def roles(self, config: ModelConfig) -> dict[str, Role]:
        """Per weight name: its role (`Role`)."""
        h, k, e, d, f, v = (
            config.n_heads,
            config.n_kv_heads,
            config.head_dim,
            config.dim,
            config.ffn_dim,
            config.vocab_size,
        )
        qkv = (h + 2 * k) * e
        return {
            "wqkv": Role((d, qkv), 1, self.heads),  # columns: the heads' q, k, v
            "bqkv": Role((qkv,), 0, self.heads),
            "wo": Role((h * e, d), 0, self.heads),  # rows: the heads' outputs
            "w_gate_up": Role((d, 2 * f), 1, self.mlp),  # columns: gate | up
            "w_down": Role((f, d), 0, self.mlp),  # rows: the inner dimension
            "embed": Role((v, d), 0, self.vocab),  # rows: the vocabulary
            "head": Role((v, d), 0, self.vocab),
        }


@dataclasses.dataclass(frozen=True)
class Role:
    """How one weight is split: its float shape ([in, out]; the embedding and head [V, d]), the axis of that shape
    sharded over "tp", and whether it is split at all."""

    shape: tuple[int, ...]
    axis: int
    on: bool


def leaf_spec(names: Sequence[str], shape: tuple[int, ...], roles: dict[str, Role], n: int) -> PartitionSpec:
    """The PartitionSpec of one weight leaf: a float weight its role's axis on "tp"; a leaf of another shape (a
    quantized matrix's packed codes or scales, [out rows, ...] as `model/quant` holds them) its output rows;
    replicated without a role, where the role is off, or where the axis does not divide by n."""
    role = next((roles[name] for name in reversed(names) if name in roles), None)
    if role is None or not role.on or not shape:
        return PartitionSpec()
    axis = role.axis if tuple(shape) == role.shape else 0
    if shape[axis] % n:
        return PartitionSpec()
    return PartitionSpec(*[("tp" if i == axis else None) for i in range(len(shape))])


def shard_transformer(transformer: nnx.Module, config: ModelConfig, mesh: Mesh) -> None:
    """Place every array of `transformer` on `mesh`, in place: each weight by its role (`leaf_spec`), the rest
    replicated."""
    roles, n = Split.of(config, mesh.size).roles(config), mesh.size
    state = nnx.state(transformer)

    def place(path: tuple[Any, ...], array: jax.Array) -> jax.Array:
        names = [str(getattr(p, "key", getattr(p, "name", getattr(p, "idx", p)))) for p in path]
        return jax.device_put(array, NamedSharding(mesh, leaf_spec(names, np.shape(array), roles, n)))

    nnx.update(transformer, jax.tree_util.tree_map_with_path(place, state))


def cache_sharding(config: ModelConfig, mesh: Mesh | None) -> NamedSharding | None:
    """The sharding of a KV cache array [b, k, T, e] on `mesh`: rows over "batch", kv heads over "tp" where they
    divide (else replicated on "tp"); None without a mesh (the default device)."""
    if mesh is None:
        return None
    heads = "tp" if config.n_kv_heads % mesh.size == 0 else None
    return NamedSharding(mesh, PartitionSpec("batch", heads, None, None))


def describe(config: ModelConfig, n: int) -> str:
    """What a model of `config` shards on n devices, in words (for a model card and the docs)."""
    split = Split.of(config, n)
    parts = [name for name, on in (("heads", split.heads), ("MLP", split.mlp), ("vocabulary", split.vocab)) if on]
    return f"{n} devices: " + (", ".join(parts) + " sharded" if parts else "replicated")
