"""A model on a device mesh (`load_model(devices=N)`): the single-device numbers, its weights and caches sharded.

The multi-device checks run `mesh_check.py` in a process of its own: the flag that splits the CPU into 4 devices
(`XLA_FLAGS=--xla_force_host_platform_device_count=4`) must be set before jax is imported, which this process has
done already.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from jax.sharding import PartitionSpec

from jupyter_chatflow import load_model
from jupyter_chatflow.engine import mesh
from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf

CHECK = Path(__file__).with_name("mesh_check.py")
ARCHS = Path(__file__).parents[1] / "model" / "archs"
MAX_RELATIVE_ERROR = 1e-5
"""Of a position's logits against the single-device ones (float32): the same sums, split over devices and added
in another order (measured at 6e-7 to 1.1e-6)."""
MAX_ATTENTION_ERROR = 5e-4
"""Of the float16 attention map (probabilities in [0, 1]): a float16 rounding step of the largest (measured 1.2e-4)."""


def run_check(path: Path, *args: int | str) -> dict:
    done = subprocess.run(
        [sys.executable, str(CHECK), str(path), *map(str, args)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_same_as_one_device(result: dict, n: int) -> None:
    assert result["devices"] == n
    assert result["logits_error"] < MAX_RELATIVE_ERROR
    assert result["greedy_equal"], "greedy answers differ from the single device's"
    assert result["batch_equal"], "the scheduler's batch differs from each stream alone"
    assert result["attention_error"] < MAX_ATTENTION_ERROR
    assert result["hidden_error"] < MAX_RELATIVE_ERROR  # (`Runner.hidden_states`, what the safety probe reads)
    assert result["cache_devices"] == n  # (the cache's shards, after its prefill and 3 decode writes)
    assert result["cache_donated"], "a decode step's cache write copied the cache instead of updating it in place"


def test_a_model_whose_heads_divide_shards_everything_and_gives_the_single_device_answers(tmp_path):
    path = write_tiny_gguf(tmp_path / "heads4.gguf", TinySpec(n_heads=4, n_kv_heads=4))
    check = run_check(path, 2, 4)
    for n in (2, 4):
        result = check["results"][str(n)]
        assert_same_as_one_device(result, n)
        assert result["cache_spec"] == ["batch", "tp", "None", "None"]  # kv heads over "tp", rows over "batch"
        assert result["weights"]["wqkv"] == ["None", "tp"] and result["weights"]["wo"] == ["tp", "None"]
        assert result["weights"]["w_gate_up"] == ["None", "tp"] and result["weights"]["w_down"] == ["tp", "None"]
        assert result["weights"]["embed"] == []  # (267 tokens: the vocabulary does not divide)


@pytest.mark.slow
def test_gemma3_shards_its_kv_heads_on_2_devices_and_replicates_them_on_4():
    """Gemma 3's tiny model: 4 query heads, 2 kv heads, sliding layers, a 384-token vocabulary."""
    check = run_check(ARCHS / "gemma3.gguf", 2, 4)
    two, four = check["results"]["2"], check["results"]["4"]
    assert_same_as_one_device(two, 2)
    assert_same_as_one_device(four, 4)
    assert two["cache_spec"] == ["batch", "tp", "None", "None"] and two["weights"]["wqkv"] == ["None", "tp"]
    assert four["cache_spec"] == ["batch", "None", "None", "None"] and four["weights"]["wqkv"] == []
    assert four["weights"]["w_down"] == ["tp", "None"] and four["weights"]["embed"] == ["tp", "None"]


@pytest.mark.slow
@pytest.mark.parametrize("weights", ["as-file", "int8"])
def test_quantized_weights_shard_their_output_rows_and_give_the_single_device_answers(tmp_path, weights):
    path = write_tiny_gguf(tmp_path / "q8.gguf", TinySpec(n_heads=4, n_kv_heads=4, quant="Q8_0"))
    result = run_check(path, 2, f"--weights={weights}")["results"]["2"]
    assert_same_as_one_device(result, 2)
    assert result["weights"]["wqkv"][0] == "tp" and result["weights"]["w_down"][0] == "tp"  # [out rows, ...]
    assert "P('tp', None)" in result["weight_specs"]


def test_more_devices_than_jax_sees_names_the_flag(tiny_path):
    with pytest.raises(ChatflowError, match="XLA_FLAGS=--xla_force_host_platform_device_count=64"):
        load_model(tiny_path, devices=64)
    with pytest.raises(ChatflowError, match="at least 1"):
        load_model(tiny_path, devices=0)


def test_one_device_is_no_mesh(tiny_model, tiny_path):
    assert tiny_model.devices == 1 and tiny_model.runner.mesh is None
    assert load_model(tiny_path, devices=1).devices == 1


def test_smollm2_135m_shards_its_mlp_and_vocabulary_but_not_its_9_heads(tiny_model):
    config = dataclasses.replace(tiny_model.config, n_heads=9, n_kv_heads=3, ffn_dim=1536, vocab_size=49152)
    for n in (2, 4):
        split = mesh.Split.of(config, n)
        assert (split.heads, split.mlp, split.vocab) == (False, True, True)
    assert mesh.describe(config, 2) == "2 devices: MLP, vocabulary sharded"


def test_a_packed_leaf_shards_its_output_rows(tiny_model):
    config = dataclasses.replace(tiny_model.config, n_heads=4, n_kv_heads=4, ffn_dim=128, dim=64, head_dim=16)
    roles = mesh.Split.of(config, 4).roles(config)
    assert mesh.leaf_spec(["w_down", "value"], (128, 64), roles, 4) == PartitionSpec("tp", None)  # float: inner rows
    assert mesh.leaf_spec(["w_gate_up", "value"], (64, 256), roles, 4) == PartitionSpec(None, "tp")  # float: columns
    # a quantized matrix's codes [out, blocks, bytes] and scales [out, blocks] (model/quant): split by output row
    assert mesh.leaf_spec(["w_down", "parts", "0", "codes"], (64, 4, 32), roles, 4) == PartitionSpec("tp", None, None)
    assert mesh.leaf_spec(["wqkv", "parts", "1", "scale"], (64, 2), roles, 4) == PartitionSpec("tp", None)
    assert mesh.leaf_spec(["wqkv", "parts", "1", "scale"], (18, 2), roles, 4) == PartitionSpec()  # does not divide
    assert mesh.leaf_spec(["attn_norm", "scale"], (64,), roles, 4) == PartitionSpec()


CHAT_ON_A_MESH = """
import json, os
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
import jupyter_chatflow as cf
model = cf.load_model(devices=2)
chat = cf.Chat(model=model)
for text in ("What is the capital of France?", "Name three primary colours."):
    print(json.dumps(chat.send(text, max_tokens=24, temperature=0.0).text()))
"""


@pytest.mark.slow
def test_a_chat_on_a_two_device_cpu_mesh_answers_without_hanging(real_model_path):
    """The default model's chat turns (safety probe, prefill, decode, title: several threads) on 2 CPU devices.
    With its programs in flight side by side, XLA:CPU aborted at a collective on a 2-core machine after 40 s; the
    runner now waits for each program on a CPU mesh (`Programs(one_at_a_time=True)`)."""
    done = subprocess.run([sys.executable, "-c", CHAT_ON_A_MESH], capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = map(json.loads, done.stdout.strip().splitlines()[-2:])
    assert "Paris" in first
    assert second.strip()
