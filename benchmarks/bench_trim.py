"""A long conversation past the window: time to first token of follow-up turns once history is being trimmed.

Context assembly drops the oldest turns when the prompt would not fit. Ours cuts the history in blocks at points
that stay put as the conversation grows (`context.py`), so consecutive turns share their prompt's prefix and the
prompt cache serves it; the peer drops one turn at a time until the prompt fits (`trim_block=0`, what every turn
paid before), which moves the prompt's start at every turn. Both run the same turns on the default model, one
after the other in one process, beside a fresh short turn (system prompt + one message) as the yardstick.

Each turn is assembled exactly as the pipeline does it and generates one token (its time to first token is its
prefill); the history grows by synthetic turns of ~120 tokens. A real turn's answer is decoded into the KV cache
as it is generated, so before the next turn the benchmark puts it there too (untimed): the turn's prompt and its
answer are prefilled, as decoding the answer would have left them.

`--window` shrinks the model's 8,192-token window to keep a run short (the ratios are what count); `--window
8192` measures the full one (slow: ~55 s a turn for the peer on 2 cores).

    python benchmarks/bench_trim.py [--window 2048] [--turns 12]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from jupyter_chatflow import load_model
from jupyter_chatflow.pipeline.context import Inputs, assemble
from jupyter_chatflow.pipeline.local import DEFAULT_SYSTEM

RESERVED = 256


def conversation(turns: int) -> list[list[dict[str, str]]]:
    """Synthetic earlier turns, each ~120 tokens, all different."""
    return [
        [{"role": "user", "content": f"Question {k}: tell me one fact about the number {k * 7 + 3}."},
         {"role": "assistant", "content": f"Fact {k}: " + " ".join(f"the number {k * 7 + 3} plus {j} is "
                                                                   f"{k * 7 + 3 + j}." for j in range(9))}]
        for k in range(turns)
    ]  # fmt: skip


def first_token(model, ids: list[int]) -> dict:
    """Time to first token (ms), of it XLA compile (ms), and the prompt tokens computed (not from the cache)."""
    started = time.perf_counter()
    generation = model.generate(ids, max_tokens=1, temperature=0.0)
    for _ in generation:
        pass
    ms = (time.perf_counter() - started) * 1000
    usage = generation.usage
    return {"ttft_ms": round(ms, 1), "compile_ms": round(usage.compile_ms, 1),
            "computed": usage.prompt_tokens - usage.reused_tokens}  # fmt: skip


def ttft_ms(model, ids: list[int]) -> float:
    return first_token(model, ids)["ttft_ms"]


def follow_ups(model, history, first: int, turns: int, window: int, block: int | None) -> list[dict]:
    """Turns `first`…: each one's prompt, trimmed, then its first token; the model's cache starts cold."""
    model.prompt_cache.clear()
    rows = []
    for turn in range(first, first + turns + 1):
        user = history[turn][0]["content"]
        assembled = assemble(model.tokenizer, Inputs(system=DEFAULT_SYSTEM, user=user, history=history[:turn]),
                             window=window, reserved_output=RESERVED, trim_block=block)  # fmt: skip
        measured = first_token(model, assembled.ids)
        if turn > first:  # the first one only warms the cache, as the turn before would have
            rows.append({"turn": turn, "prompt_tokens": len(assembled.ids), **measured})
        answer = model.tokenizer.encode(history[turn][1]["content"]) + model.tokenizer.encode_template("<|im_end|>")
        model.prefill([*assembled.ids, *answer])  # this prompt + its answer, as decoding the answer leaves them
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=int, default=2048)
    parser.add_argument("--turns", type=int, default=12)
    args = parser.parse_args()
    model = load_model()
    history = conversation(args.window // 40 + args.turns + 2)  # enough turns to be well past the window
    first = args.window // 40
    short = assemble(model.tokenizer, Inputs(system=DEFAULT_SYSTEM, user=history[first][0]["content"]),
                     window=args.window, reserved_output=RESERVED).ids  # fmt: skip
    ttft_ms(model, short)  # compile what a short prompt needs
    fresh_runs = []
    for _ in range(3):
        model.prompt_cache.clear()  # a fresh turn: nothing of it cached
        fresh_runs.append(ttft_ms(model, short))
    fresh = statistics.median(fresh_runs)
    for block in (None, 0):  # compile the programs the long prompts need (chunk widths at this cache length)
        follow_ups(model, history, first, args.turns, args.window, block)
    ours = follow_ups(model, history, first, args.turns, args.window, None)
    peer = follow_ups(model, history, first, args.turns, args.window, 0)
    report = {
        "window": args.window,
        "fresh_short_turn_ttft_ms": round(fresh, 1),
        "ours_median_ttft_ms": statistics.median(r["ttft_ms"] for r in ours),
        "ours_max_ttft_ms": max(r["ttft_ms"] for r in ours),
        "ours_median_computed": statistics.median(r["computed"] for r in ours),
        "peer_median_ttft_ms": statistics.median(r["ttft_ms"] for r in peer),
        "peer_median_computed": statistics.median(r["computed"] for r in peer),
        "compile_ms_in_all": round(sum(r["compile_ms"] for r in ours + peer), 1),
        "ours": ours,
        "peer": peer,
    }
    report["ours_median_vs_fresh"] = round(report["ours_median_ttft_ms"] / fresh, 2)
    report["peer_median_vs_ours"] = round(report["peer_median_ttft_ms"] / report["ours_median_ttft_ms"], 2)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
