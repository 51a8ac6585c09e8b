"""Continuous batching: aggregate tokens/s and per-step latency at 1, 2, 4, 8 and 16 concurrent sequences.

    python benchmarks/bench_scheduler.py [--model PATH] [--streams 1,2,4,8,16] [--tokens 128] [--max-batch 16]
                                         [--rounds 3] [--out results.json]

Each level submits that many different chat prompts at once to one `Scheduler` (greedy, EOS ignored, exactly
`--tokens` tokens each) and reads every stream on its own thread, as a server's connections would. Reported per
level, the median of `--rounds` runs with the levels interleaved: aggregate tokens/s (all tokens over the wall
time from the first submit to the last token, prefills included), the median time between two tokens of a stream
(one decode step of the whole batch while it is full), the median time to first token, and the batch cache's
size mid-run; ratios against one stream in the same run. A warm-up pass at each level compiles its programs first.
`Model.generate` alone (the single-sequence path) is timed too. The load average before and after is printed:
on a shared machine, compare ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import threading
import time
from pathlib import Path

from jupyter_chatflow import SamplingParams, load_model
from jupyter_chatflow.engine.scheduler import Scheduler

QUESTIONS = [
    "What is the capital of France?", "Write a haiku about the sea.", "Explain what a CPU cache is.",
    "How do plants make food?", "Give me three tips for learning to cook.", "What causes the seasons?",
    "Describe a cat to someone who has never seen one.", "Why is the sky blue?", "What is a prime number?",
    "Suggest a name for a small bakery.", "How does a bicycle stay upright?", "What is recursion?",
    "Summarise the water cycle.", "What should I pack for a day hike?", "Explain gravity to a child.",
    "What is the difference between weather and climate?",
]  # fmt: skip


def run_level(scheduler: Scheduler, prompts: list[list[int]], params: SamplingParams) -> dict:
    """Submit every prompt at once, read each on its own thread; timings of every token."""
    arrivals: list[list[float]] = [[] for _ in prompts]
    peak = [0]
    start = time.perf_counter()
    generations = [scheduler.submit(p, params) for p in prompts]

    def read(i: int) -> None:
        for step in generations[i]:
            arrivals[i].append(time.perf_counter())
            if step.index == params.max_tokens // 2:  # mid-run: every stream in its row, none left yet
                peak[0] = max(peak[0], scheduler.nbytes)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    end = max(a[-1] for a in arrivals)
    tokens = sum(len(a) for a in arrivals)
    full = max(a[0] for a in arrivals)  # from here on every stream is decoding (until the first one ends)
    gaps = [b - a for times in arrivals for a, b in itertools.pairwise(times) if a >= full]
    return {
        "streams": len(prompts),
        "tokens": tokens,
        "aggregate_tokens_per_s": tokens / (end - start),
        "step_ms": 1000 * statistics.median(gaps),
        "ttft_ms_median": 1000 * statistics.median(a[0] - start for a in arrivals),
        "cache_mib": peak[0] / 2**20,
    }


def prompts_for(prompts: list[list[int]], n: int) -> list[list[int]]:
    return [prompts[i % len(prompts)] for i in range(n)]


def single_sequence_ms(model, prompt: list[int], n: int) -> float:
    """Decode ms/step of `Model.generate` alone (the scalar-position path), median of 3."""
    times = []
    for _ in range(3):
        steps = list(model.generate(prompt, max_tokens=n, temperature=0.0, ignore_eos=True))
        times.append((steps[-1].elapsed_ms - steps[0].elapsed_ms) / (len(steps) - 1))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--streams", default="1,2,4,8,16")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--max-batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    levels = [int(n) for n in args.streams.split(",")]
    model = load_model(args.model) if args.model else load_model()
    model.prompt_cache.max_bytes = 0  # every stream prefills its own prompt: no level gets a head start
    prompts = [model.tokenizer.apply_chat_template([{"role": "user", "content": q}]) for q in QUESTIONS]
    params = SamplingParams(temperature=0.0, max_tokens=args.tokens, ignore_eos=True)
    load_before = os.getloadavg()
    runs: dict[int, list[dict]] = {n: [] for n in levels}
    with Scheduler(model, max_batch=args.max_batch) as scheduler:
        for n in levels:  # compile each level's programs
            run_level(
                scheduler, prompts_for(prompts, n), SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
            )
        for _ in range(args.rounds):  # levels interleaved: a change in the machine's load hits them all alike
            for n in levels:
                runs[n].append(run_level(scheduler, prompts_for(prompts, n), params))
                print(json.dumps(runs[n][-1]), flush=True)
    rows = [{k: statistics.median(r[k] for r in runs[n]) for k in runs[n][0]} for n in levels]
    alone_ms = single_sequence_ms(model, prompts[0], args.tokens)
    load_after = os.getloadavg()
    report(rows, alone_ms, load_before, load_after)
    if args.out:
        args.out.write_text(json.dumps({"levels": rows, "alone_step_ms": alone_ms, "load": [load_before, load_after]}))


def report(rows: list[dict], alone_ms: float, load_before, load_after) -> None:
    base = next((r for r in rows if r["streams"] == 1), rows[0])
    print(f"\nload average before {load_before[0]:.1f}, after {load_after[0]:.1f} (1 min)")
    print("| streams | aggregate tok/s | ratio vs 1 | step ms (median gap) | TTFT ms (median) | batch cache MiB |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        ratio = r["aggregate_tokens_per_s"] / base["aggregate_tokens_per_s"]
        print(
            f"| {r['streams']} | {r['aggregate_tokens_per_s']:.1f} | {ratio:.2f}x | {r['step_ms']:.1f} | "
            f"{r['ttft_ms_median']:.0f} | {r['cache_mib']:.0f} |"
        )
    print(f"\n`Model.generate` alone: {alone_ms:.1f} ms/step ({1000 / alone_ms:.1f} tok/s)")


if __name__ == "__main__":
    main()
