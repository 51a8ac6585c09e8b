"""Time to first token through a 5-turn conversation, with the prompt cache and without it, in one run.

    python benchmarks/bench_prompt_cache.py [--model PATH] [--turns 5] [--answer-tokens 96] [--repeats 3]

Every turn goes through the whole pipeline (`Chat.send`: safety, memory, context assembly, tokenizer, engine),
greedy, so both modes see the same conversation. The cache-off mode is the same model with
`PromptCache(max_bytes=0)`: every turn prefills its whole prompt. The first pass of each mode is a warm-up
(it compiles the prefill buckets it needs); the medians of the later passes are reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from jupyter_chatflow import load_model
from jupyter_chatflow.engine.prompt_cache import PromptCache
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.store.database import Database

MESSAGES = [
    "I'm planning a week-long trip to Portugal in May. Where should I start?",
    "What should I see in Lisbon if I only have two days there?",
    "How do I get from Lisbon to Porto, and how long does it take?",
    "What food should I try in Porto?",
    "Can you summarise a day-by-day plan for the whole week?",
    "What should I pack for the weather in May?",
    "Any tips for saving money on the trip?",
]


def conversation(model, turns: int, answer_tokens: int, cache_on: bool) -> list[dict]:
    """One fresh session of `turns` turns; per turn: prompt size, reused tokens, prefill and first-token times."""
    model.prompt_cache = PromptCache() if cache_on else PromptCache(max_bytes=0)
    with tempfile.TemporaryDirectory() as folder:
        chat = Chat(model=model, db=Database(Path(folder) / "bench.db"), session="bench")
        rows = []
        for message in MESSAGES[:turns]:
            response = chat.send(message, temperature=0.0, max_tokens=answer_tokens, memory=False)
            prefill = next(e for e in response if e.type == "prefill")
            completed = response.terminal()
            rows.append(
                {
                    "prompt_tokens": prefill.prompt_tokens,
                    "reused_tokens": prefill.reused_tokens,
                    "prefill_ms": prefill.latency_ms,
                    "ttft_ms": completed.timings.ttft_ms or float("nan"),
                    "answer": response.text(),
                }
            )
        chat.db.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--answer-tokens", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="bench-results/prompt_cache.json")
    args = parser.parse_args()
    model = load_model(args.model)
    runs: dict[str, list[list[dict]]] = {"cache on": [], "cache off": []}
    for _ in range(args.repeats + 1):  # the first pass of each mode warms up the compiled programs
        for mode in runs:
            runs[mode].append(conversation(model, args.turns, args.answer_tokens, mode == "cache on"))
    report = summarize(runs, args.turns)
    print_table(report)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"summary": report, "runs": runs}, indent=2))
    print(f"\nfull results: {args.out}")


def summarize(runs: dict[str, list[list[dict]]], turns: int) -> list[dict]:
    """Per turn: the medians over the measured passes (the warm-up pass left out)."""
    rows = []
    for turn in range(turns):
        row: dict = {"turn": turn + 1}
        for mode, passes in runs.items():
            measured = [p[turn] for p in passes[1:]]
            row[mode] = {
                key: statistics.median(r[key] for r in measured)
                for key in ("prompt_tokens", "reused_tokens", "prefill_ms", "ttft_ms")
            }
        row["same answers"] = all(
            a[turn]["answer"] == b[turn]["answer"] for a, b in zip(runs["cache on"], runs["cache off"], strict=True)
        )
        rows.append(row)
    return rows


def print_table(report: list[dict]) -> None:
    print("turn | prompt tokens | reused (on) | prefill ms on / off | first token ms on / off | off/on | same answer")
    print("---|---|---|---|---|---|---")
    for row in report:
        on, off = row["cache on"], row["cache off"]
        ratio = off["ttft_ms"] / on["ttft_ms"] if on["ttft_ms"] else float("nan")
        print(
            f"{row['turn']} | {on['prompt_tokens']:.0f} | {on['reused_tokens']:.0f} | "
            f"{on['prefill_ms']:.0f} / {off['prefill_ms']:.0f} | {on['ttft_ms']:.0f} / {off['ttft_ms']:.0f} | "
            f"{ratio:.2f}x | {row['same answers']}"
        )


if __name__ == "__main__":
    main()
