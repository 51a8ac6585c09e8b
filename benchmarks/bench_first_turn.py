"""A fresh kernel's first turn: how soon the answer starts, and whether it streams without a stall.

    python benchmarks/bench_first_turn.py [--runs 3] [--tokens 40] [--llama-python /tmp/llama-venv/bin/python]
                                          [--out results.json]
    python benchmarks/bench_first_turn.py --cli [--runs 3] [--tokens 40]

Each run is a new Python process (as a new notebook kernel is) that loads the default model and sends the first
message of a new session with a `Chat` (greedy, `--tokens` tokens): the answer streams while the session's title
is written beside it, as in the notebook. The XLA cache is warm (a first, untimed run fills it), so what is left is
what every new kernel pays: tracing and loading each program the first time it runs. Reported per run: the time
to the first token (from the send), the longest gap between two tokens and where it fell, the median gap, and the
time to the last token. With `--llama-python`, llama-cpp-python's `create_chat_completion(stream=True)` on the
same GGUF, also in a fresh process each run, is timed the same way beside it (it compiles nothing).

With `--cli`: `chatflow chat --temperature 0 --max-tokens N QUESTION` as a user types it, timed from the spawn to
the answer's first byte on stdout and to the exit, first with cold caches (a new, empty `HOME`: no prepared
weights, no XLA cache, no stored programs), then warm (the same `HOME` again), `--runs` times each (a new `HOME`
per cold run).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUESTION = "Tell me about the history of Paris in a few sentences."

OURS = """
import json, sys, time
import jupyter_chatflow as cf
chat = cf.Chat(db=sys.argv[1], session="bench", new=True)
chat.model
started = time.perf_counter()
arrivals = [time.perf_counter() - started for e in chat.send(sys.argv[2], temperature=0, max_tokens=int(sys.argv[3]))
            if e.type == "token"]
print(json.dumps(arrivals))
"""

LLAMA = """
import json, sys, time
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=2048, n_threads=2, verbose=False)
started = time.perf_counter()
arrivals = []
for chunk in llm.create_chat_completion([{"role": "user", "content": sys.argv[2]}], temperature=0,
                                        max_tokens=int(sys.argv[3]), stream=True):
    if chunk["choices"][0]["delta"].get("content"):
        arrivals.append(time.perf_counter() - started)
print(json.dumps(arrivals))
"""


def timed(command: list[str]) -> dict:
    """One fresh process's token arrival times (seconds after the send), summarised."""
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
    arrivals = json.loads(done.stdout.strip().splitlines()[-1])
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    longest = max(gaps)
    return {"ttft_s": round(arrivals[0], 3), "max_gap_ms": round(longest * 1000), "max_gap_after_token":
            gaps.index(longest) + 1, "median_gap_ms": round(statistics.median(gaps) * 1000, 1),
            "last_token_s": round(arrivals[-1], 3), "tokens": len(arrivals)}  # fmt: skip


def cli_run(home: str, tokens: int) -> dict:
    """One `chatflow chat` from spawn to exit: when the answer's first byte reached stdout, and the exit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATFLOW_")} | {"HOME": home}
    command = [sys.executable, "-m", "jupyter_chatflow", "chat", "--temperature", "0", "--max-tokens", str(tokens),
               QUESTION]  # fmt: skip
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert process.stdout is not None
    first = os.read(process.stdout.fileno(), 1)
    first_s = time.perf_counter() - started
    rest = process.stdout.read()
    process.wait(timeout=600)
    assert process.returncode == 0 and (first + rest).strip(), process.returncode
    return {"first_byte_s": round(first_s, 3), "exit_s": round(time.perf_counter() - started, 3),
            "answer": (first + rest).decode(errors="replace").strip()[:60]}  # fmt: skip


def cli(runs: int, tokens: int) -> list[dict]:
    rows = []
    for run in range(runs):
        home = tempfile.mkdtemp(prefix="chatflow-home-")
        rows.append({"caches": "cold", "run": run} | cli_run(home, tokens))
        rows.append({"caches": "warm", "run": run} | cli_run(home, tokens))
    print("| caches | run | first byte of the answer s | exit s | answer |")
    print("|---|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['caches']} | {r['run']} | {r['first_byte_s']:.2f} | {r['exit_s']:.2f} | {r['answer']}… |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--llama-python", help="a Python with llama-cpp-python installed: time it beside ours")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cli", action="store_true", help="time `chatflow chat` with cold, then warm caches")
    args = parser.parse_args()
    if args.cli:
        rows = cli(args.runs, args.tokens)
        if args.out:
            args.out.write_text(json.dumps(rows, indent=1) + "\n")
        return
    from jupyter_chatflow.model.files import resolve_model_path

    gguf = str(resolve_model_path(None))
    folder = tempfile.mkdtemp()
    ours = [sys.executable, "-c", OURS, "", QUESTION, str(args.tokens)]
    print(f"load before: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    timed([*ours[:3], f"{folder}/warm.db", *ours[4:]])  # fills the XLA cache: not timed
    rows = []
    for run in range(args.runs):
        rows.append({"engine": "ours", "run": run} | timed([*ours[:3], f"{folder}/{run}.db", *ours[4:]]))
        if args.llama_python:
            rows.append({"engine": "llama.cpp", "run": run} | timed([args.llama_python, "-c", LLAMA, gguf, QUESTION,
                                                                     str(args.tokens)]))  # fmt: skip
    print(f"load after: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print("| engine | run | first token s | longest gap ms (after token) | median gap ms | last token s |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['engine']} | {r['run']} | {r['ttft_s']:.2f} | {r['max_gap_ms']} ({r['max_gap_after_token']}) "
            f"| {r['median_gap_ms']} | {r['last_token_s']:.2f} |"
        )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
