"""benchmarks/bench_gpu.py's small version (--quick, what the CPU backend runs): it runs end to end on the default
model and writes every figure it prints, with values a reader would believe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_gpu.py"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, real_model_path) -> tuple[dict, str]:
    """One `--quick` run in a fresh process (its JSON and its stdout)."""
    out = tmp_path_factory.mktemp("bench-gpu") / "gpu.json"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(out), "--budget-s", "600"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(out.read_text()), done.stdout


def test_float32_parity_passes_the_gate(quick_run):
    report, _ = quick_run
    float32 = next(row for row in report["parity"] if row["variant"] == "float32")
    assert float32["exact"] and float32["agreed"] == float32["compared"] >= 3 * 8


def test_batch_one_figures_are_measured(quick_run):
    """Decode, prefill and compile figures of float32 (and as-file where this checkout has it), each in a range a
    2-core CPU gives for the default model; on the CPU no bandwidth limit is claimed."""
    report, _ = quick_run
    rows = {row["variant"]: row for row in report["speed"]}
    float32 = rows["float32"]
    assert 5 < float32["decode_tok_s"] < 2000 and 50 < float32["prefill_tok_s"] < 100_000
    assert 400 < float32["resident_weight_mib"] < float32["read_per_token_mib"] < 600  # + the KV cache's bytes
    assert float32["compile_prefill_s"] > 0.05 and float32["compile_decode_s"] > 0.05
    assert float32["limit_tok_s"] is None and report["machine"]["bandwidth_source"] == "unknown"
    if "as-file" in rows:
        assert rows["as-file"]["resident_weight_mib"] <= 0.3 * float32["resident_weight_mib"]
        assert rows["as-file"]["weights_format"] == "as-file" and rows["as-file"]["decode_tok_s"] > 1


def test_serving_curve_and_the_table(quick_run):
    """The scheduler's levels each measured (every stream its 16 tokens), and the Markdown rows printed."""
    report, stdout = quick_run
    levels = {row["streams"]: row for row in report["serving"]}
    assert sorted(levels) == [1, 2, 4]
    assert all(row["aggregate_tokens_per_s"] > 0 and row["ttft_ms_median"] > 0 for row in levels.values())
    assert all(row["tokens"] == streams * 16 and row["step_ms"] > 0 for streams, row in levels.items())
    assert "| SmolLM2-135M | float32 | float32 |" in stdout and "| streams | aggregate tok/s |" in stdout


def test_bandwidth_table():
    """The card's peak bandwidth by its `device_kind`, as JAX names the cards; --bandwidth wins."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from bench_gpu import peak_bandwidth
    finally:
        sys.path.remove(str(SCRIPT.parent))
    kinds = {"NVIDIA H100 80GB HBM3": 3350, "NVIDIA H100 PCIe": 2000, "NVIDIA H100 NVL": 3900, "NVIDIA H200": 4800,
             "NVIDIA A100-SXM4-40GB": 1555, "NVIDIA A100-SXM4-80GB": 2039, "NVIDIA L4": 300}  # fmt: skip
    assert {kind: peak_bandwidth(kind, None)[0] for kind in kinds} == kinds
    assert peak_bandwidth("NVIDIA L40S", None) == (None, "unknown") and peak_bandwidth("cpu", 50.0) == (
        50.0,
        "--bandwidth",
    )
