"""Run by test_mesh.py in a process of its own, with XLA_FLAGS splitting the CPU into 4 devices (set before jax is
imported): loads a model on one device and on meshes of the sizes asked for, and prints what the test compares as
JSON on its last line.

    python tests/engine/mesh_check.py MODEL.gguf 2 4 [--weights=as-file]
"""

from __future__ import annotations

import json
import os
import sys

# (and collectives given minutes, not XLA:CPU's 40 s, to meet: a loaded 2-core CI machine runs 4 devices' threads)
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + (
    " --xla_force_host_platform_device_count=4"
    " --xla_cpu_collective_timeout_seconds=600 --xla_cpu_collective_call_terminate_timeout_seconds=600"
)

import jax
import numpy as np
from flax import nnx

from jupyter_chatflow import SamplingParams, load_model
from jupyter_chatflow.engine.scheduler import Scheduler

GREEDY = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)


def prompts(vocab: int) -> list[list[int]]:
    rng = np.random.default_rng(0)
    return [rng.integers(3, vocab, n).tolist() for n in (40, 7, 23)]


def greedy(model, ids: list[int]) -> list[int]:
    model.prompt_cache.clear()
    return [s.token_id for s in model.generate(ids, params=GREEDY)]


def decoded_cache(model, ids: list[int], steps: int = 3):
    """A run's cache after its prefill and `steps` decode steps, and whether each step's write took the cache
    before it in place (donated: its buffers given to the new one)."""
    runner = model.runner
    run = runner.start(np.asarray(ids, np.int32), GREEDY)
    runner.take_cache(run)
    for _ in runner.prefill(run, 0):
        pass
    before = []
    for step in range(1, steps + 1):
        before.append(run.cache)
        runner.decode(run, step)
    return run.cache, all(cache.keys[0].is_deleted() for cache in before)  # (each write donated the one before)


def check(path: str, sizes: list[int], weights: str | None = None) -> dict:
    one = load_model(path, dtype="float32", weights=weights)
    vocab = one.config.vocab_size
    asks = prompts(vocab)
    reference = {
        "logits": one.logits(asks[0]),
        "greedy": [greedy(one, p) for p in asks],
        "attention": one.attention(asks[0], one.config.n_layers - 1).astype(np.float32),
        "hidden": one.runner.hidden_states(asks[1], 1),
    }
    results = {}
    for n in sizes:
        model = load_model(path, dtype="float32", devices=n, weights=weights)
        logits = model.logits(asks[0])
        error = np.abs(logits - reference["logits"]).max(-1) / np.abs(reference["logits"]).max(-1)
        model.prompt_cache.clear()
        with Scheduler(model, max_batch=4) as scheduler:
            runs = [scheduler.submit(p, GREEDY) for p in asks]
            batched = [[s.token_id for s in run] for run in runs]
        attention = model.attention(asks[0], model.config.n_layers - 1).astype(np.float32)
        cache, donated = decoded_cache(model, asks[0])
        hidden = model.runner.hidden_states(asks[1], 1)
        results[str(n)] = {
            "devices": model.devices,
            "logits_error": float(error.max()),
            "greedy_equal": [greedy(model, p) for p in asks] == reference["greedy"],
            "batch_equal": batched == reference["greedy"],
            "attention_error": float(np.abs(attention - reference["attention"]).max()),
            "hidden_error": float(np.abs(hidden - reference["hidden"]).max() / np.abs(reference["hidden"]).max()),
            "cache_spec": [str(a) for a in cache.keys[0].sharding.spec],
            "cache_devices": len(cache.keys[0].devices()),
            "cache_donated": donated,
            "weights": weight_specs(model),
            "weight_specs": sorted(
                {str(a.sharding.spec) for a in jax.tree.leaves(nnx.state(model.runner.transformer))}
            ),
        }
    return {"n_heads": one.config.n_heads, "n_kv_heads": one.config.n_kv_heads, "results": results}


def weight_specs(model) -> dict[str, list[str]]:
    """Each named weight of the first layer (and the embedding): its PartitionSpec, one entry per axis (of a
    quantized matrix: of its first packed field)."""
    block = model.runner.transformer.blocks[0]
    named = {
        "wqkv": block.attn.wqkv, "wo": block.attn.wo, "w_gate_up": block.ffn.w_gate_up, "w_down": block.ffn.w_down,
        "embed": model.runner.transformer.embed,
    }  # fmt: skip
    first = lambda w: w[...] if isinstance(w, nnx.Variable) else jax.tree.leaves(nnx.state(w))[0]  # noqa: E731
    return {name: [str(a) for a in first(w).sharding.spec] for name, w in named.items()}


if __name__ == "__main__":
    options = [a.removeprefix("--weights=") for a in sys.argv[2:] if a.startswith("--weights=")]
    sizes = [int(n) for n in sys.argv[2:] if not n.startswith("--")]
    print(json.dumps(check(sys.argv[1], sizes, options[0] if options else None)))
