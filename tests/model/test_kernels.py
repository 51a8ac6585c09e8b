"""The decode step's quantized matrix-vector kernels (model/quant/kernels.py, kernels.cc) against the dequantized
product: the same values (gguf's dequantization), summed in another order, so within float32 rounding (1e-5 of the
largest output), for one to eight rows, on blocks gguf's own quantizer wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gguf
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jupyter_chatflow import load_model
from jupyter_chatflow.model.quant import kernels
from jupyter_chatflow.model.quant.formats import unpack
from jupyter_chatflow.model.quant.matrix import QuantizedMatrix
from jupyter_chatflow.model.quant.packed import Packed, Part
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf

UNSUPPORTED = kernels._unsupported()  # (the machine's reason, if any: a machine that can build them must)
needs_kernels = pytest.mark.skipif(bool(UNSUPPORTED), reason=f"the kernels cannot be built here: {UNSUPPORTED}")


def blocks(fmt: str, rows: int, cols: int, seed: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """A Gaussian matrix [rows, cols] as gguf quantizes it to `fmt`: its fields and the values they dequantize to."""
    kind = gguf.GGMLQuantizationType[fmt]
    data = gguf.quants.quantize(np.random.default_rng(seed).normal(0, 0.05, (rows, cols)).astype(np.float32), kind)
    return unpack(fmt, data), gguf.quants.dequantize(data, kind).reshape(rows, cols)


@needs_kernels
def test_the_kernels_build_here():
    assert kernels.available(), kernels.unavailable_reason()
    assert kernels.unavailable_reason() == ""


@needs_kernels
@pytest.mark.parametrize("fmt", sorted(kernels.FORMATS))
@pytest.mark.parametrize("rows", [1, 3, 8])
def test_a_kernel_gives_the_dequantized_product(fmt, rows):
    fields, values = blocks(fmt, 200, 96)  # (200 output rows: not a whole number of the kernel's chunks)
    x = np.random.default_rng(1).normal(size=(rows, 96)).astype(np.float32)
    got = np.asarray(jax.jit(lambda x, f: kernels.matvec(fmt, x, f))(x, {k: jnp.asarray(v) for k, v in fields.items()}))
    want = x.astype(np.float64) @ values.T.astype(np.float64)
    assert got.shape == (rows, 200)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


@needs_kernels
def test_a_packed_matrix_takes_the_kernel_for_a_few_rows_only():
    """A decode step's rows go through the kernel; a prefill chunk's (more than `MAX_ROWS`) through XLA's product
    of the dequantized matrix: the two agree."""
    fields, _ = blocks("Q4_1", 64, 128)
    matrix = QuantizedMatrix(Packed((Part("Q4_1", fields),), 128), jnp.float32)
    assert matrix.parts[0].kernel == kernels.version()
    x = np.random.default_rng(2).normal(size=(1, 9, 128)).astype(np.float32)
    many = np.asarray(jax.jit(lambda x: matrix(x))(x))  # 9 rows: the dequantized product
    few = np.asarray(jax.jit(lambda x: matrix(x))(x[:, :1]))  # 1 row: the kernel
    assert "ffi_call" not in jax.jit(lambda x: matrix(x)).lower(x).as_text()
    assert "chatflow_q4_1" in jax.jit(lambda x: matrix(x)).lower(x[:, :1]).as_text()
    assert np.abs(few[0, 0] - many[0, 0]).max() <= 1e-5 * np.abs(many).max()


@needs_kernels
@pytest.mark.parametrize("fmt", sorted(kernels.FORMATS))
def test_an_as_file_model_decodes_as_a_float32_one(tmp_path, fmt):
    path = write_tiny_gguf(tmp_path / f"{fmt}.gguf", TinySpec(quant=fmt, seed=3))
    exact, packed = load_model(path, dtype="float32"), load_model(path, dtype="float32", weights="as-file")
    prompt = list(range(5, 25))

    def steps(model):
        return list(model.generate(prompt, max_tokens=12, temperature=0.0, ignore_eos=True))

    want, got = steps(exact), steps(packed)
    assert [s.token_id for s in got] == [s.token_id for s in want]
    assert np.allclose([s.logprob for s in got], [s.logprob for s in want], atol=1e-4)


@needs_kernels
def test_the_kernels_product_has_the_dequantized_matrixs_gradient():
    """A gradient through a few rows' product (`jax.grad` of an as-file model's decode-sized input) is the
    dequantized matrix's: the FFI call alone has no backward pass."""
    fields, values = blocks("Q4_1", 64, 128)
    matrix = QuantizedMatrix(Packed((Part("Q4_1", fields),), 128), jnp.float32)
    x, w = (np.random.default_rng(seed).normal(size=(2, n)).astype(np.float32) for seed, n in ((0, 128), (1, 64)))
    grad = np.asarray(jax.jit(jax.grad(lambda x: (matrix(x) * w).sum()))(x))
    assert np.abs(grad - w @ values).max() <= 1e-5 * np.abs(w @ values).max()


@needs_kernels
def test_attribution_on_an_as_file_model_is_the_float32_ones(tmp_path):
    path = write_tiny_gguf(tmp_path / "q8.gguf", TinySpec(quant="Q8_0", seed=3))
    exact, packed = load_model(path, dtype="float32"), load_model(path, dtype="float32", weights="as-file")
    prompt = [5, 9, 14, 20]
    want, got = exact.attribution(prompt, 7), packed.attribution(prompt, 7)
    assert np.allclose(got, want, atol=1e-4 * np.abs(want).max()), (got, want)


@pytest.mark.slow  # a second build of the library (~6 s), in a fresh process
@needs_kernels
def test_the_avx2_code_gives_the_same_products():
    """`CHATFLOW_KERNELS=avx2`: the code a CPU without AVX-512 runs, built and checked on this one. With XLA's
    cache off the library is built in a folder of the process's own, gone when it exits."""
    code = (
        "import numpy as np, jax, jax.numpy as jnp\n"
        "from jupyter_chatflow.model.quant import kernels\n"
        "from tests.model.test_kernels import blocks\n"
        "assert kernels.available(), kernels.unavailable_reason()\n"
        "for fmt in sorted(kernels.FORMATS):\n"
        "    fields, values = blocks(fmt, 200, 96)\n"
        "    x = np.random.default_rng(1).normal(size=(3, 96)).astype(np.float32)\n"
        "    got = np.asarray(kernels.matvec(fmt, jnp.asarray(x), {k: jnp.asarray(v) for k, v in fields.items()}))\n"
        "    want = x.astype(np.float64) @ values.T.astype(np.float64)\n"
        "    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max(), fmt\n"
        "print(kernels._built().parent)\n"
    )
    env = os.environ | {"CHATFLOW_KERNELS": "avx2", "CHATFLOW_XLA_CACHE": "off"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    folder = Path(done.stdout.strip().splitlines()[-1])
    assert folder.name.startswith("chatflow-kernels-") and not folder.exists()


def test_without_the_kernels_the_product_is_xlas(monkeypatch):
    monkeypatch.setenv("CHATFLOW_KERNELS", "off")
    monkeypatch.setattr(kernels, "_reason", None)
    assert not kernels.available() and kernels.unavailable_reason() == "CHATFLOW_KERNELS is off"
    fields, values = blocks("Q8_0", 32, 64)
    matrix = QuantizedMatrix(Packed((Part("Q8_0", fields),), 64), jnp.float32)
    assert matrix.parts[0].kernel == ""
    x = np.random.default_rng(3).normal(size=(1, 64)).astype(np.float32)
    assert "ffi_call" not in jax.jit(lambda x: matrix(x)).lower(x).as_text()
    assert np.allclose(np.asarray(matrix(x)), x @ values.T, rtol=1e-5, atol=1e-5)
