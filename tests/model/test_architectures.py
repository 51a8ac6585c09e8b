"""Every supported architecture against Hugging Face transformers, on tiny random models that llama.cpp's own
converter turned into GGUF files (tests/model/archs: the files, transformers' float32 logits, and the script that
made them). The logits at every position must match; the KV-cached decode, the chunked prefill, the batch of the
scheduler and the attention view must agree with them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from jupyter_chatflow import SamplingParams, load_model
from jupyter_chatflow.engine import chunks as engine
from jupyter_chatflow.engine.scheduler import Scheduler

ARCHS = Path(__file__).parent / "archs"
NAMES = ["llama", "llama3-rope", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "phi3-partial", "phi3-longrope"]
REFERENCE = {"phi3-longrope": "phi3-longrope-long"}
"""The engine serves phi3-longrope's whole 1,024-token window, longer than the 256 it was trained on without scaling,
so it rotates by the long factors (as llama.cpp does for a context over 256); transformers switches to them for a
sequence over 256 tokens: that reference has 264 (its 48-token one has the short factors)."""
GREEDY = SamplingParams(temperature=0.0, max_tokens=20, ignore_eos=True)
MAX_RELATIVE_ERROR = 1e-4
"""Of a position's logits, against the largest of transformers' at that position: float32 on both sides, summed in
another order (XLA's fused dots and online softmax against torch's), measured at 1e-6 to 3e-6."""


def manifest() -> dict:
    return json.loads((ARCHS / "manifest.json").read_text())


@pytest.fixture(scope="module", params=NAMES)
def arch(request):
    """(name, the model loaded from its GGUF, transformers' tokens and logits)."""
    name = request.param
    reference = np.load(ARCHS / f"{REFERENCE.get(name, name)}.npz")
    model = load_model(ARCHS / f"{name}.gguf", dtype="float32")
    return name, model, reference["tokens"].tolist(), reference["logits"]


def relative_error(ours: np.ndarray, theirs: np.ndarray) -> float:
    return float((np.abs(ours - theirs).max(-1) / np.abs(theirs).max(-1)).max())


def test_every_architecture_has_its_fixture():
    listed = set(manifest())
    assert set(NAMES) <= listed, f"missing from tests/model/archs: {set(NAMES) - listed}"
    architectures = {entry["architecture"] for entry in manifest().values()}
    assert architectures >= {"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"}


def test_logits_match_transformers_at_every_position(arch):
    name, model, tokens, expected = arch
    ours = model.logits(tokens)
    assert ours.shape == expected.shape
    assert relative_error(ours, expected) < MAX_RELATIVE_ERROR, name
    np.testing.assert_array_equal(ours.argmax(-1), expected.argmax(-1))


def test_the_config_reads_what_makes_each_family_differ(arch):
    name, model, _, _ = arch
    config = model.config
    if name.startswith("gemma"):
        assert config.sliding_window == 8 and config.sliding_layers and config.family.activation == "gelu_tanh"
        assert len(config.sliding_layers) < config.n_layers  # at least one global layer
        assert config.final_softcap == (30.0 if name == "gemma2" else config.final_softcap)
    if name == "gemma2":
        assert config.attn_softcap == 50.0 and config.sliding_layers == tuple(range(0, config.n_layers, 2))
    if name == "gemma3":
        assert config.local_rope_base == 10000.0 and config.rope_base == 1e6
    if name == "qwen3":
        assert config.head_dim * config.n_heads != config.dim  # the key length comes from the file
    if name == "phi3-partial":
        assert config.rope_dim < config.head_dim


def test_chunked_prefill_equals_one_chunk(arch, monkeypatch):
    _, model, tokens, expected = arch
    monkeypatch.setattr(engine, "PREFILL_CHUNK", 8)  # chunks smaller than the sliding window's reach
    assert relative_error(model.logits(tokens), expected) < MAX_RELATIVE_ERROR


def test_cached_decode_follows_the_full_forward_pass(arch):
    """Greedy tokens from a prefill and KV-cached decode steps past the sliding window equal the argmax of a
    cache-free pass over the whole sequence."""
    _, model, tokens, _ = arch
    prompt = tokens[:5]
    generated = [step.token_id for step in model.generate(prompt, params=GREEDY)]
    full = model.logits(prompt + generated)[len(prompt) - 1 : -1]
    assert generated == full.argmax(-1).tolist()


def test_the_scheduler_batch_decodes_each_sequence_as_alone(arch):
    """Rows at their own positions (a per-row window mask) give each sequence its own greedy answer."""
    _, model, tokens, _ = arch
    prompts = [tokens[:3], tokens[10:21], tokens[5:12]]
    model.prompt_cache.clear()
    expected = [[s.token_id for s in model.generate(p, params=GREEDY)] for p in prompts]
    model.prompt_cache.clear()
    with Scheduler(model, max_batch=4) as scheduler:
        runs = [scheduler.submit(p, GREEDY) for p in prompts]
        assert [[s.token_id for s in run] for run in runs] == expected


@pytest.mark.parametrize("name", ["gemma2", "gemma3"])
def test_a_sliding_layers_attention_map_shows_its_window(name):
    model = load_model(ARCHS / f"{name}.gguf", dtype="float32")
    tokens, config = np.load(ARCHS / f"{name}.npz")["tokens"].tolist(), model.config
    window, n = config.sliding_window, len(tokens)
    distance = np.arange(n)[:, None] - np.arange(n)[None, :]
    local = model.attention(tokens, config.sliding_layers[0]).astype(np.float32)
    np.testing.assert_allclose(local.sum(-1), 1.0, atol=5e-3)
    assert not local[:, distance >= window].any(), "a sliding layer attended outside its window"
    assert not local[:, distance < 0].any(), "a token attended to the future"
    global_layer = next(i for i in range(config.n_layers) if i not in config.sliding_layers)
    far = model.attention(tokens, global_layer).astype(np.float32)[:, distance >= window]
    assert far.sum() > 0.1, "a global layer should see past the window"
