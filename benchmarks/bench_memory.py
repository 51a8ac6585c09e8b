"""Where a kernel's memory goes: resident memory after each stage of a session, and the peak so far.

Binder gives a user 1-2 GiB in all (Jupyter and the kernel), so the kernel must stay well under that. This script
runs, in a fresh process, the stages the quickstart notebook runs and reports after each one the resident set
(RSS, from /proc) and the process's peak (`ru_maxrss`), plus what the engine itself holds: the weights, the
prompt cache's KV caches, and every live JAX buffer. Peaks are what a memory limit kills on. The last stage lets
go of every compiled program and the prompt cache (`model.runner.release_programs()`, as the tour's chapters do
when a section is done), so the RSS it gives back is what those held.

    python benchmarks/bench_memory.py [--out bench-results/memory.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

MIB = 1 << 20


def rss_mib() -> float:
    """The resident set now (MiB)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / MIB


def peak_mib() -> float:
    """The process's peak resident set so far (MiB; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def engine_mib(model) -> dict[str, float]:
    """What the engine holds: weights, prompt cache, and all live JAX buffers (MiB)."""
    import jax

    weights = model.runner.weight_bytes
    live = sum(a.nbytes for a in jax.live_arrays())
    return {
        "weights_mib": round(weights / MIB, 1),
        "prompt_cache_mib": round(model.prompt_cache.nbytes / MIB, 1),
        "prompt_cache_entries": len(model.prompt_cache),
        "live_jax_buffers_mib": round(live / MIB, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench-results/memory.json")
    args = parser.parse_args()
    rows: list[dict] = []
    started = time.perf_counter()

    def stage(name: str, model=None) -> None:
        row = {"stage": name, "rss_mib": round(rss_mib(), 1), "peak_mib": round(peak_mib(), 1),
               "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip
        if model is not None:
            row.update(engine_mib(model))
        rows.append(row)
        print(json.dumps(row), flush=True)

    stage("python")
    import jupyter_chatflow as cf

    stage("import jupyter_chatflow (jax, flax)")
    model = cf.load_model()
    stage("load_model (float32 weights)", model)
    chat = cf.Chat(model=model, persist=False)
    chat.send("What is the capital of France?", max_tokens=40, temperature=0).events()
    stage("first turn (compile + 40 tokens)", model)
    chat.send("What is 17*23?", tools="calculator", tool_choice="required", max_tokens=40).events()
    stage("tool turn", model)
    chat.send("My e-mail is jane.doe@example.com, please repeat it.", max_tokens=40).events()
    stage("third turn (history)", model)
    turns = chat.history()
    ids = next((list(e.ids) for e in turns[-1].events if e.type == "tokenized"), []) if turns else []
    if ids:
        model.attention(ids, 0)
        stage("attention map of the last prompt", model)
    long = "Tell me a long story. " + "The dragon flew over the hills and rested by the river. " * 120
    chat.send(long, max_tokens=64).events()
    stage("a 1.5k-token prompt", model)
    model.runner.release_programs()  # what a tour chapter calls when a section is done with its programs
    stage("model.runner.release_programs()", model)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
