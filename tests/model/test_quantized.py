"""Weights kept quantized (model/quant/, `load_model(weights="as-file" | "int8")`) against float32 of the same file.

The bounds, and why:
- each format's in-program dequantizer repeats `gguf.quants`' numpy operations in float32: its values are the same
  bits (asserted exactly);
- so an as-file model computes with the very values a float32 load holds, and only the order of the sums differs
  (the matmul against a dequantized [out, in] block instead of a prepared [in, out] array): logits within 1e-5 of
  their largest magnitude, and the same top-1 token at every position;
- int8 rounds each weight to its row's step (max |w| / 127), an error of at most half a step: a matrix's relative
  (Frobenius) error eps_i is what its codes give, ~0.6% for these Gaussian rows. To first order the relative errors
  of the matrices a token passes through add, so the logits' RMS relative error is at most the sum of the eps_i;
  the tiny model's random logits are nearly flat (their top two often within that error), so its top-1 agreement is
  asserted at 85%; the real model's (tests/integration/test_quantized_real.py) is the telling figure.
"""

from __future__ import annotations

import gguf
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jupyter_chatflow import load_model, testing
from jupyter_chatflow.engine.programs import layer_kinds
from jupyter_chatflow.errors import ChatflowError, ModelFormatError
from jupyter_chatflow.model import memory, prepared
from jupyter_chatflow.model.gguf_file import read_gguf
from jupyter_chatflow.model.quant.formats import AS_FILE, dequantize, quantize_int8, unpack
from jupyter_chatflow.model.quant.layout import block_shape, packed_bytes
from jupyter_chatflow.model.quant.packed import Packed
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf

IDS = list(range(5, 45))


def _f16(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float16)[..., None].view(np.uint8)


def _pack_k_scales(sc: np.ndarray, mins: np.ndarray) -> np.ndarray:
    """Q4_K's 12 bytes of 6-bit scales and mins (the inverse of `gguf.quants.Q4_K.get_scale_min`): sc, mins
    [..., 8], each below 64."""
    low = sc[..., :4] | ((sc[..., 4:] >> 4) << 6)
    mid = mins[..., :4] | ((mins[..., 4:] >> 4) << 6)
    high = (sc[..., 4:] & 0x0F) | ((mins[..., 4:] & 0x0F) << 4)
    return np.concatenate([low, mid, high], axis=-1).astype(np.uint8)


def valid_blocks(fmt: str, rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    """Random blocks [rows, bytes] of `fmt` with finite float16 scales, values of about +-0.2 (a Q4_K block's mins
    centre its values, as a quantizer's would)."""
    size, type_size = block_shape(fmt)
    blocks = rng.integers(0, 256, (rows, cols // size, type_size), dtype=np.uint8)
    scale = lambda low, high: _f16(rng.uniform(low, high, blocks.shape[:2]))  # noqa: E731
    if fmt == "Q6_K":
        blocks[..., 208:210] = scale(2e-5, 5e-5)
    elif fmt == "Q4_K":
        sc = rng.integers(1, 9, (*blocks.shape[:2], 8))
        d = scale(1e-3, 3e-3)
        blocks[..., 0:2], blocks[..., 2:4] = d, d
        blocks[..., 4:16] = _pack_k_scales(sc, np.rint(7.5 * sc).astype(np.int64))
    else:
        blocks[..., 0:2] = scale(0.005, 0.02)
        if fmt in ("Q4_1", "Q5_1"):
            blocks[..., 2:4] = _f16(rng.uniform(-0.15, -0.05, blocks.shape[:2]))
    return blocks.reshape(rows, -1)


@pytest.mark.parametrize("fmt", AS_FILE)
def test_each_formats_dequantizer_in_the_program_gives_ggufs_values_bit_for_bit(fmt):
    rng = np.random.default_rng(7)
    data = valid_blocks(fmt, 6, 3 * block_shape(fmt)[0], rng)
    reference = gguf.quants.dequantize(data, gguf.GGMLQuantizationType[fmt])
    fields = {name: jnp.asarray(a) for name, a in unpack(fmt, data).items()}
    values = np.asarray(jax.jit(lambda f: dequantize(fmt, f))(fields))
    assert np.isfinite(reference).all() and np.array_equal(values, reference)
    rows = jax.jit(lambda f: dequantize(fmt, {n: a[jnp.array([[4, 1]])] for n, a in f.items()}))(fields)
    assert np.array_equal(np.asarray(rows)[0], reference[[4, 1]])  # (gathered rows, as an embedding's lookup)
    assert Packed.from_file(fmt, data, reference.shape[1]).nbytes == packed_bytes(fmt, reference.size)


def test_int8_codes_are_within_half_a_step_of_each_row():
    weight = np.random.default_rng(3).standard_normal((5, 64)).astype(np.float32)
    fields = quantize_int8(weight)
    step = np.abs(weight).max(axis=1) / 127
    assert np.allclose(fields["scale"], step) and np.abs(fields["codes"]).max() == 127
    assert (np.abs(fields["codes"] * fields["scale"][:, None] - weight) <= step[:, None] / 2 + 1e-7).all()


def tiny_file(tmp_path, monkeypatch, fmt: str, overrides: dict[str, str] | None = None, n_layers: int = 2):
    """A tiny model whose layer matrices are `fmt` blocks (valid random ones for the K formats, gguf's own
    quantization of random floats for the others), its embedding Q8_0, and `overrides` (tensor name -> format)."""
    chosen = {"token_embd.weight": "Q8_0", **(overrides or {})}
    original = testing._add_matrix

    def add(writer, name, values, quant, rng):
        quant = chosen.get(name, quant)
        if quant.endswith("_K"):
            return writer.add_tensor(
                name, valid_blocks(quant, *values.shape, rng), raw_dtype=gguf.GGMLQuantizationType[quant]
            )
        return original(writer, name, values, quant, rng)

    monkeypatch.setattr(testing, "_add_matrix", add)
    dim = 256 if fmt.endswith("_K") or any(q.endswith("_K") for q in chosen.values()) else 64
    spec = TinySpec(quant=fmt, dim=dim, ffn_dim=2 * dim, n_layers=n_layers, seed=5)
    return write_tiny_gguf(tmp_path / f"{fmt}.gguf", spec)


def made_bytes(model) -> int:
    """The bytes of what is made at load, not a tensor of the file: the rope table, and each layer's heads' weights
    and steering vector (what an intervention changes)."""
    transformer = model.runner.transformer
    layers = sum(b.attn.keep[...].nbytes + b.steer[...].nbytes for b in transformer.blocks)
    return transformer.inv_freq[...].nbytes + layers


def relative(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.mark.parametrize("fmt", AS_FILE)
def test_an_as_file_model_gives_float32s_logits(tmp_path, monkeypatch, fmt):
    path = tiny_file(tmp_path, monkeypatch, fmt)
    exact, packed = load_model(path, dtype="float32"), load_model(path, dtype="float32", weights="as-file")
    assert (exact.weights_format, packed.weights_format) == ("float", "as-file")
    want, got = exact.logits(IDS), packed.logits(IDS)
    assert relative(got, want) <= 1e-5
    assert (got.argmax(-1) == want.argmax(-1)).all()
    held = packed.runner.weight_bytes  # the packed fields and scales, the norms as float32, what is made at load
    assert held - made_bytes(packed) == memory.footprint(path).weight_bytes("float32", "as-file")
    assert held < 0.35 * exact.runner.weight_bytes


def test_layers_of_different_formats_get_one_layer_program_per_structure(tmp_path, monkeypatch):
    """A Q4_K_M file's mix: layer 1's ffn_down in Q6_K, every other matrix Q4_K."""
    path = tiny_file(tmp_path, monkeypatch, "Q4_K", {"blk.1.ffn_down.weight": "Q6_K"}, n_layers=3)
    exact, packed = load_model(path, dtype="float32"), load_model(path, dtype="float32", weights="as-file")
    kinds, kind_of = layer_kinds(packed.runner.transformer)
    assert len(kinds) == 2 and kind_of == [0, 1, 0]
    assert len(layer_kinds(exact.runner.transformer)[0]) == 1  # (a float model: one layer program, as before)
    want = exact.logits(IDS)
    assert relative(packed.logits(IDS), want) <= 1e-5
    prefix = packed.runner.hidden_states(IDS[:8], 3)  # (`Programs.layer` picks each layer's program)
    assert np.allclose(prefix, exact.runner.hidden_states(IDS[:8], 3), rtol=1e-4, atol=1e-4 * np.abs(prefix).max())


def test_q_k_and_v_of_different_formats_make_one_matrix_of_two_parts(tmp_path, monkeypatch):
    path = tiny_file(tmp_path, monkeypatch, "Q4_K", {"blk.0.attn_v.weight": "Q6_K"}, n_layers=1)
    packed = read_gguf(path, packed=True).tensors
    wq, wv = packed["blk.0.attn_q.weight"], packed["blk.0.attn_v.weight"]
    stacked = Packed.stack([wq, packed["blk.0.attn_k.weight"], wv])
    assert [part.format for part in stacked.parts] == ["Q4_K", "Q6_K"] and stacked.rows == 256 + 2 * 128
    exact, model = load_model(path, dtype="float32"), load_model(path, dtype="float32", weights="as-file")
    assert relative(model.logits(IDS), exact.logits(IDS)) <= 1e-5


def test_int8_weights_stay_within_the_bound_their_steps_give(tmp_path):
    path = write_tiny_gguf(tmp_path / "f32.gguf", TinySpec(seed=2))
    tensors = read_gguf(path).tensors
    matrices = [tensors[name] for name in tensors if tensors[name].ndim == 2]
    eps = []
    for w in matrices:
        fields = quantize_int8(w)
        eps.append(np.linalg.norm(fields["codes"] * fields["scale"][:, None] - w) / np.linalg.norm(w))
    exact, int8 = load_model(path, dtype="float32"), load_model(path, dtype="float32", weights="int8")
    want, got = exact.logits(IDS), int8.logits(IDS)
    rms = np.sqrt(((got - want) ** 2).mean() / (want**2).mean())
    assert 0 < rms <= sum(eps)  # (about 0.045 against a bound of 0.09 here)
    assert (got.argmax(-1) == want.argmax(-1)).mean() >= 0.85
    assert int8.weights_format == "int8"
    held = int8.runner.weight_bytes
    assert held - made_bytes(int8) == memory.footprint(path).weight_bytes("float32", "int8")
    assert held < 0.3 * exact.runner.weight_bytes


def test_int8_from_the_prepared_weights_is_int8_from_the_file(tmp_path, monkeypatch):
    """Quantized from the float32 weights the cache holds, or from the file a tensor at a time: the same codes."""
    path = write_tiny_gguf(tmp_path / "f32.gguf", TinySpec(seed=4))
    from_file = load_model(path, weights="int8").logits(IDS)
    monkeypatch.setenv("CHATFLOW_WEIGHTS_CACHE", str(tmp_path / "cache"))
    load_model(path)  # (prepares the float32 weights)
    assert prepared.load(path) is not None
    assert np.array_equal(load_model(path, weights="int8").logits(IDS), from_file)


@pytest.mark.parametrize("fmt", ["Q5_K", "Q3_K", "Q2_K"])
def test_formats_as_file_cannot_keep_are_refused_by_name(tmp_path, fmt):
    path = write_tiny_gguf(tmp_path / f"{fmt}.gguf", TinySpec(quant=fmt, dim=256, ffn_dim=256))
    with pytest.raises(ModelFormatError) as refused:
        load_model(path, weights="as-file")
    said = str(refused.value)
    assert f"tensor blk.0.attn_q.weight is stored as {fmt}" in said
    assert "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K" in said and "weights=None" in said and "re-quantize" in said
    assert load_model(path, weights="int8").weights_format == "int8"  # (int8 takes any file)


def test_an_unknown_weights_choice_is_refused(tiny_path):
    with pytest.raises(ChatflowError, match="weights must be one of float, as-file, int8"):
        load_model(tiny_path, weights="int4")
