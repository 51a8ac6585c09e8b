"""Forking an answer from a token: time to the fork's first generated token, in a fresh process each run.

A fork keeps the answer up to the chosen token; the prompt cache holds the prompt and the kept tokens, so one
token (the chosen one) is computed before generation goes on. Ours runs that token as a decode step (a program
the forked turn already compiled); the peer is the same fork through the chunked-prefill program (the last two
tokens recomputed, so the one-token path does not apply): what every fork paid before. Both alternate, one fresh
process per run (with the persistent XLA cache warm, as a user's kernel has it), on the default model.

    python benchmarks/bench_fork.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, tempfile
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.engine.runner import Runner
from jupyter_chatflow.events import PrefillDone
from jupyter_chatflow.store.database import Database

if sys.argv[1] == "peer":
    general = Runner.prefill
    Runner.prefill = lambda self, run, reused, c=None: general(self, run, max(reused - 1, 0), c)
chat = Chat(session="bench-fork", new=True, db=Database(tempfile.mktemp()))
options = {"temperature": 0, "max_tokens": 120, "memory": False}
chat.send("Count from 1 to 20, one number per line.", **options).events()
parent = chat.send("Now count from 20 down to 1, one number per line.", **options)
tokens = [e for e in parent.events() if e.type == "token"]
alternative = next(a for a in tokens[2].alternatives if a.token_id != tokens[2].token_id)
out = []
for _ in range(2):
    fork = chat.fork(chat._active()[-1].id, 2, alternative.token_id).events()
    prefill = next(e for e in fork if isinstance(e, PrefillDone))
    out.append({"ttft_ms": fork[-1].timings.ttft_ms, "prefill_ms": prefill.latency_ms})
print(json.dumps(out))
"""


def run_once(mode: str) -> list[dict]:
    result = subprocess.run([sys.executable, "-c", CHILD, mode], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[list[dict]]] = {"ours": [], "peer": []}
    for _ in range(args.runs):
        for mode in results:
            results[mode].append(run_once(mode))
    print("| figure | ours (decode step) | peer (chunked prefill) | peer/ours |")
    print("|---|---|---|---|")
    for fork, label in ((0, "first fork in the process"), (1, "second fork")):
        for key in ("prefill_ms", "ttft_ms"):
            ours = statistics.median(r[fork][key] for r in results["ours"])
            peer = statistics.median(r[fork][key] for r in results["peer"])
            print(f"| {label}: {key.replace('_ms', '')} ms | {ours:.0f} | {peer:.0f} | {peer / ours:.1f}x |")
    print(f"\nmedians of {args.runs} fresh processes each, alternating")


if __name__ == "__main__":
    main()
