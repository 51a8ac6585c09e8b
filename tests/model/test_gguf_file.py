"""Reading GGUF files: quant types via gguf's dequantizers, and clear errors for bad files."""

from __future__ import annotations

import re

import gguf
import numpy as np
import pytest

from jupyter_chatflow import ModelFormatError, ModelNotFoundError, load_model
from jupyter_chatflow.model.gguf_file import describe, read_gguf
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf


def test_reads_config_and_weights(tiny_path):
    model = read_gguf(tiny_path)
    config = model.config
    assert (config.n_layers, config.dim, config.n_heads, config.n_kv_heads, config.ffn_dim) == (2, 64, 4, 2, 128)
    assert config.vocab_size == 3 + 256 + 8 and config.tied_embeddings
    assert model.tensors["blk.0.attn_k.weight"].shape == (32, 64)
    assert model.tensors["blk.1.ffn_down.weight"].dtype == np.float32


@pytest.mark.parametrize("quant", ["F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"])
def test_quantized_weights_dequantize_close_to_originals(tmp_path, tiny_path, quant):
    path = write_tiny_gguf(tmp_path / f"{quant}.gguf", TinySpec(quant=quant))
    exact, quantized = read_gguf(tiny_path).tensors, read_gguf(path).tensors
    tolerance = {"F16": 1e-3, "BF16": 1e-2, "Q8_0": 0.02}.get(quant, 0.25)
    for name in ("blk.0.attn_q.weight", "blk.1.ffn_down.weight"):
        np.testing.assert_allclose(quantized[name], exact[name], atol=tolerance)
    assert load_model(path).logits([5, 6, 7]).shape == (3, 267)


@pytest.mark.parametrize("quant", ["Q4_K", "Q5_K", "Q6_K"])
def test_k_quants_use_gguf_dequantizers(tmp_path, quant):
    spec = TinySpec(quant=quant, n_layers=1, dim=256, n_heads=4, n_kv_heads=2, ffn_dim=256)
    path = write_tiny_gguf(tmp_path / f"{quant}.gguf", spec)
    reader = gguf.GGUFReader(path)
    raw = next(t for t in reader.tensors if t.name == "blk.0.ffn_up.weight")
    assert raw.tensor_type.name == quant
    loaded = read_gguf(path).tensors["blk.0.ffn_up.weight"]
    np.testing.assert_array_equal(loaded, gguf.quants.dequantize(raw.data, raw.tensor_type))
    assert np.isfinite(loaded).all() and loaded.shape == (256, 256)


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(ModelNotFoundError, match=r"No model file at .*nothing\.gguf"):
        read_gguf(tmp_path / "nothing.gguf")


def test_not_a_gguf_file(tmp_path):
    path = tmp_path / "notes.gguf"
    path.write_text("hello, I am a text file")
    with pytest.raises(ModelFormatError, match="not a GGUF file"):
        read_gguf(path)


@pytest.mark.parametrize("keep", [0.999, 0.6, 0.05, 0.0008])
def test_truncated_file_is_a_clear_error(tmp_path, tiny_path, keep):
    data = tiny_path.read_bytes()
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[: max(4, int(len(data) * keep))])
    with pytest.raises(ModelFormatError, match=r"truncated|corrupt"):
        read_gguf(path)


def test_corrupt_header_is_a_clear_error(tmp_path, tiny_path):
    data = bytearray(tiny_path.read_bytes())
    data[8:24] = b"\xff" * 16  # absurd tensor and key/value counts
    path = tmp_path / "corrupt.gguf"
    path.write_bytes(bytes(data))
    with pytest.raises(ModelFormatError):
        read_gguf(path)


def test_unsupported_architecture(tmp_path):
    writer = gguf.GGUFWriter(str(tmp_path / "mamba.gguf"), "mamba")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelFormatError, match="architecture 'mamba' is not supported"):
        read_gguf(tmp_path / "mamba.gguf")


def test_unsupported_quant_type_names_it(tmp_path, monkeypatch):
    path = write_tiny_gguf(tmp_path / "q.gguf", TinySpec(quant="Q5_0"))
    from jupyter_chatflow.model import gguf_file

    monkeypatch.setattr(gguf_file, "SUPPORTED_QUANTS", gguf_file.SUPPORTED_QUANTS - {gguf.GGMLQuantizationType.Q5_0})
    with pytest.raises(ModelFormatError, match="stored as Q5_0, which is not supported"):
        read_gguf(path)


def test_missing_layer_tensor(tmp_path, monkeypatch):
    from jupyter_chatflow import testing

    full = testing._tensor_shapes
    monkeypatch.setattr(
        testing,
        "_tensor_shapes",
        lambda spec, vocab: {k: v for k, v in full(spec, vocab).items() if k != "blk.1.attn_v.weight"},
    )
    path = write_tiny_gguf(tmp_path / "holes.gguf")
    with pytest.raises(ModelFormatError, match=r"lacks 1 tensor\(s\).*blk\.1\.attn_v\.weight"):
        read_gguf(path)


@pytest.mark.parametrize("n_kv_heads", [5, 1])
def test_head_count_that_does_not_divide_the_width_names_the_file_and_field(tmp_path, n_kv_heads):
    """64 wide with 5 heads: a ModelFormatError naming the file and the fields, from every entry point."""
    path = write_tiny_gguf(tmp_path / "five-heads.gguf", TinySpec(n_heads=5, n_kv_heads=n_kv_heads))
    message = (
        rf"^{re.escape(str(path))}: 'llama\.attention\.head_count' is 5, which does not divide "
        r"'llama\.embedding_length' 64 into equal heads"
    )
    for read in (read_gguf, describe, load_model):
        with pytest.raises(ModelFormatError, match=message):
            read(path)


def test_attention_shapes_that_contradict_the_head_counts_name_the_tensor(tmp_path, monkeypatch):
    from jupyter_chatflow import testing

    full = testing._tensor_shapes  # blk.1's keys written for one key/value head where the metadata says two
    monkeypatch.setattr(
        testing, "_tensor_shapes", lambda spec, vocab: full(spec, vocab) | {"blk.1.attn_k.weight": (16, 64)}
    )
    path = write_tiny_gguf(tmp_path / "shapes.gguf")
    message = (
        rf"^{re.escape(str(path))}: tensor blk\.1\.attn_k\.weight is \[16, 64\] but 'llama\.attention\.head_count' 4, "
        r"'llama\.attention\.head_count_kv' 2 and head width 16 make it \[32, 64\]"
    )
    with pytest.raises(ModelFormatError, match=message):
        read_gguf(path)


def test_describe_summarizes_the_file(tiny_path):
    info = describe(tiny_path)
    assert info["architecture"] == "llama" and info["layers"] == 2 and info["vocab_size"] == 267
    assert info["tensor_types"] == {"F32": 2 + 2 * 9}
    assert info["chat_template"] == "yes"
