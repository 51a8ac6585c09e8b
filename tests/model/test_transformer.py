"""The JAX transformer against an independent NumPy forward pass, on the tiny random model."""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from jupyter_chatflow import load_model
from jupyter_chatflow.engine import chunks as engine
from jupyter_chatflow.model import attention
from jupyter_chatflow.model.gguf_file import read_gguf
from jupyter_chatflow.model.transformer import KVCache
from jupyter_chatflow.model.weights import unpermute_rotary
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf

from . import llama_numpy, test_architectures

IDS = [1, 120, 45, 260, 77, 3, 99, 261, 12, 200, 88, 5, 64, 31, 140, 2, 1, 50, 51, 52]


@pytest.fixture(scope="module")
def tiny_tensors(tiny_path):
    return read_gguf(tiny_path)


def test_logits_match_numpy_reference(tiny_model, tiny_tensors):
    expected, _ = llama_numpy.forward(tiny_tensors.tensors, tiny_tensors.config, IDS)
    np.testing.assert_allclose(tiny_model.logits(IDS), expected, atol=2e-4, rtol=1e-4)


@pytest.mark.parametrize("layer", [0, 1])
def test_attention_matches_numpy_reference(tiny_model, tiny_tensors, layer):
    _, expected = llama_numpy.forward(tiny_tensors.tensors, tiny_tensors.config, IDS)
    probs = tiny_model.attention(IDS, layer)
    assert probs.shape == (4, len(IDS), len(IDS)) and probs.dtype == np.float16
    np.testing.assert_allclose(probs.astype(np.float32), expected[layer], atol=2e-3)
    np.testing.assert_allclose(probs.astype(np.float32).sum(-1), 1.0, atol=5e-3)
    assert not np.triu(probs, k=1).any(), "a token attended to the future"


def test_untied_output_head(tmp_path):
    path = write_tiny_gguf(tmp_path / "untied.gguf", TinySpec(tied=False, seed=3))
    model, gguf_model = load_model(path), read_gguf(path)
    assert not model.config.tied_embeddings
    expected, _ = llama_numpy.forward(gguf_model.tensors, gguf_model.config, IDS[:9])
    np.testing.assert_allclose(model.logits(IDS[:9]), expected, atol=2e-4, rtol=1e-4)


def test_chunked_prefill_equals_one_chunk(tiny_model, monkeypatch):
    whole = tiny_model.logits(IDS)
    monkeypatch.setattr(engine, "PREFILL_CHUNK", 8)
    np.testing.assert_allclose(tiny_model.logits(IDS), whole, atol=1e-5)
    chunked_attention = tiny_model.attention(IDS, 1)
    monkeypatch.undo()
    np.testing.assert_allclose(chunked_attention, tiny_model.attention(IDS, 1), atol=1e-4)


def test_cached_decode_matches_full_forward(tiny_model):
    """Greedy tokens from prefill + KV-cached decode equal the argmax of a cache-free forward pass."""
    prompt = IDS[:7]
    steps = list(tiny_model.generate(prompt, max_tokens=12, temperature=0.0))
    generated = [s.token_id for s in steps]
    logits = tiny_model.logits(prompt + generated)[len(prompt) - 1 :]
    assert generated == list(logits.argmax(-1)[: len(generated)])
    logprobs = (
        logits
        - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
        - logits.max(-1, keepdims=True)
    )
    for step, row in zip(steps, logprobs, strict=False):
        assert step.logprob == pytest.approx(row[step.token_id], abs=1e-4)


def test_unpermute_rotary_inverts_llama_cpp_permutation():
    heads, head_dim, dim = 3, 8, 5
    hf = np.arange(heads * head_dim * dim, dtype=np.float32).reshape(heads * head_dim, dim)
    # what llama.cpp's converter does to HF q/k rows
    gguf_rows = hf.reshape(heads, 2, head_dim // 2, dim).swapaxes(1, 2).reshape(hf.shape)
    np.testing.assert_array_equal(unpermute_rotary(gguf_rows, heads), hf)


def test_chunked_prompt_generates_the_same_answer(tiny_model, monkeypatch):
    """A prompt longer than one prefill chunk: earlier chunks go through `forward`, the last is fused."""
    whole = [s.token_id for s in tiny_model.generate(IDS, max_tokens=8, temperature=0.0, ignore_eos=True)]
    monkeypatch.setattr(engine, "PREFILL_CHUNK", 8)
    chunked = [s.token_id for s in tiny_model.generate(IDS, max_tokens=8, temperature=0.0, ignore_eos=True)]
    assert chunked == whole


def test_rope_frequency_factors_of_llama_3_1_files(tmp_path):
    """A `rope_freqs.weight` tensor divides the rotary frequencies (llama.cpp's Llama 3.1+ scaling)."""
    path = write_tiny_gguf(tmp_path / "llama31.gguf", TinySpec(rope_freqs=True, seed=5))
    model, gguf_model = load_model(path), read_gguf(path)
    assert "rope_freqs.weight" in gguf_model.tensors
    expected, _ = llama_numpy.forward(gguf_model.tensors, gguf_model.config, IDS)
    np.testing.assert_allclose(model.logits(IDS), expected, atol=2e-4, rtol=1e-4)
    plain, _ = llama_numpy.forward(
        {k: v for k, v in gguf_model.tensors.items() if k != "rope_freqs.weight"}, gguf_model.config, IDS
    )
    assert np.abs(plain - expected).max() > 1e-3, "the factors made no difference: the test would prove nothing"


def test_a_cache_write_at_a_position_per_row_touches_only_that_position_of_each_row():
    cache = KVCache(keys=(jnp.zeros((3, 2, 8, 4)),), values=(jnp.zeros((3, 2, 8, 4)),))
    chunk = KVCache(
        keys=(jnp.arange(3.0)[:, None, None, None] + 1 + jnp.zeros((3, 2, 1, 4)),), values=(jnp.ones((3, 2, 1, 4)),)
    )
    written = cache.write(chunk, jnp.array([0, 5, 7]))
    keys = np.asarray(written.keys[0])
    assert [list(np.flatnonzero(keys[b, 0, :, 0])) for b in range(3)] == [[0], [5], [7]]
    assert [keys[b, 1, p, 3] for b, p in enumerate([0, 5, 7])] == [1.0, 2.0, 3.0]


ARCHS = Path(__file__).parent / "archs"
FAST_ARCHS = ("llama", "gemma3")  # (plain GQA; sliding layers with a rope of their own and q/k norms)


@pytest.mark.parametrize(
    "name",
    [n if n in FAST_ARCHS else pytest.param(n, marks=pytest.mark.slow) for n in test_architectures.NAMES],
)
def test_dot_product_attention_gives_the_streaming_paths_logits(name, monkeypatch):
    """Both attention paths (model/attention.py): the whole prompt, a prefill in chunks of 8 after a cached prefix,
    and the KV-cached decode agree within float32's summation order."""
    tokens = np.load(ARCHS / f"{name}.npz")["tokens"].tolist()
    seen = {}
    for fused in (False, True):
        monkeypatch.setattr(attention, "FUSED", fused)
        model = load_model(ARCHS / f"{name}.gguf", dtype="float32")
        capped = bool(model.config.attn_softcap)  # (Gemma 2's soft cap: always the streaming path)
        assert [b.attn.fused for b in model.runner.transformer.blocks] == [fused and not capped] * model.config.n_layers
        whole = model.logits(tokens)
        with monkeypatch.context() as chunked:
            chunked.setattr(engine, "PREFILL_CHUNK", 8)
            model.prefill(tokens[:13])
            after_prefix = model.next_logits(tokens)
        steps = list(model.generate(tokens[:9], max_tokens=16, temperature=0.0, ignore_eos=True))
        seen[fused] = whole, after_prefix, [s.token_id for s in steps], np.array([s.logprob for s in steps])
    (whole, after, greedy, logprobs), (whole_f, after_f, greedy_f, logprobs_f) = seen[False], seen[True]
    assert (np.abs(whole_f - whole).max(-1) / np.abs(whole).max(-1)).max() < 1e-5
    assert np.abs(after_f - after).max() / np.abs(after).max() < 1e-5
    assert greedy_f == greedy
    np.testing.assert_allclose(logprobs_f, logprobs, atol=1e-5)
