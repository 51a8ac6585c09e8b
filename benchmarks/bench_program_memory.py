"""What compiled decode programs cost in memory: one by one, and in a notebook chapter's session.

    python benchmarks/bench_program_memory.py [--shapes 1x512,2x512,8x512,1x1024,8x1024] [--skip-shapes]
                                              [--out results.json]

The default model's decode step is one fused program per batch shape (rows x cache length). Each is compiled the
first time a process meets its shape, or loaded from the XLA cache a previous process filled. Two fresh
processes share a new, empty cache folder: the first compiles, the second loads.

Per shape (`--shapes`): each process warms the shapes one at a time (`Runner.warm`: the decode step and its cache
write, nothing run) and reports the growth of its anonymous resident memory (`RssAnon`) after each, once glibc has
returned what the compiler freed; at the end, what `jax.clear_caches()` gives back.

A chapter's session: each process loads the model, then runs what a tour chapter runs, in order: a batch-1
`Model.generate` (32 tokens of a chat prompt), one chat turn on a two-row `Scheduler` (as `Chat` runs it), an
answer and a title decoded together (two rows), and `model.runner.release_programs()` at the end (what a chapter
calls when its lab is done). After each: `RssAnon`, and the decode programs XLA compiled or loaded meanwhile
(`decode_rows` calls of a new shape), counted from JAX's own compile events.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

COMMON = """
import gc, json, os, sys
import jax
from jax import monitoring
import jupyter_chatflow as cf
from jupyter_chatflow.engine.programs import release_freed_memory

def anon():
    status = dict(line.split(":", 1) for line in open(f"/proc/{os.getpid()}/status"))
    return int(status["RssAnon"].split()[0]) / 1024

def settled():
    gc.collect(); release_freed_memory()
    return anon()

compiled = []
def began(event, _value, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
        compiled.append(str(kwargs.get("fun_name", "")))
monitoring.register_scalar_listener(began)
model = cf.load_model()
"""

SHAPES = """
rows = []
for shape in sys.argv[1].split(","):
    n, length = map(int, shape.split("x"))
    before = anon()
    model.runner.warm(n, length)
    rows.append({"shape": shape, "mib": round(settled() - before, 1)})
before = anon()
jax.clear_caches()
print(json.dumps({"programs": rows, "clear_caches_mib": round(before - settled(), 1)}))
"""

SESSION = """
from jupyter_chatflow import SamplingParams
from jupyter_chatflow.engine.scheduler import Scheduler

params = SamplingParams(temperature=0.0, max_tokens=32, ignore_eos=True)
ask = lambda q: model.tokenizer.apply_chat_template([{"role": "user", "content": q}])
phases, start = [], settled()

def phase(name):
    decode = sum("decode" in program for program in compiled)
    phases.append({"phase": name, "anon_mib": round(settled(), 1), "decode_programs": decode,
                   "programs": len(compiled)})

phase("model loaded")
list(model.generate(ask("What is the capital of France?"), params=params))
phase("Model.generate, batch 1")
with Scheduler(model, max_batch=2) as scheduler:
    list(scheduler.submit(ask("Write a haiku about the sea."), params))
    phase("a chat turn: the scheduler's single row")
    pair = [scheduler.submit(ask(q), params) for q in ("Why is the sky blue?", "Name this chat in three words.")]
    [list(g) for g in pair]
    phase("answer and title: two rows")
model.runner.release_programs()
phase("runner.release_programs()")
print(json.dumps({"phases": phases}))
"""


def probe(script: str, arg: str, cache: Path) -> dict:
    env = {**os.environ, "CHATFLOW_XLA_CACHE": str(cache)}
    done = subprocess.run([sys.executable, "-c", COMMON + script, arg], capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def shapes_table(shapes: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        compiled, loaded = probe(SHAPES, shapes, Path(cache)), probe(SHAPES, shapes, Path(cache))
    print(f"{'shape':<8} {'compiled MiB':>13} {'loaded from cache MiB':>22}")
    for a, b in zip(compiled["programs"], loaded["programs"], strict=True):
        print(f"{a['shape']:<8} {a['mib']:>13.1f} {b['mib']:>22.1f}")
    gave = f"{compiled['clear_caches_mib']:.1f} / {loaded['clear_caches_mib']:.1f}"
    print(f"jax.clear_caches() gave back {gave} MiB (compiled / loaded)\n")
    return {"compiled": compiled, "loaded": loaded}


def session_table() -> dict:
    with tempfile.TemporaryDirectory() as cache:
        compiled, loaded = probe(SESSION, "", Path(cache)), probe(SESSION, "", Path(cache))
    print("| step of a chapter | anon MiB, compiled | anon MiB, loaded | decode programs so far | programs so far |")
    print("|---|---:|---:|---:|---:|")
    for a, b in zip(compiled["phases"], loaded["phases"], strict=True):
        counts = f"{a['decode_programs']} | {a['programs']}"
        print(f"| {a['phase']} | {a['anon_mib']:.0f} | {b['anon_mib']:.0f} | {counts} |")
    return {"compiled": compiled, "loaded": loaded}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shapes", default="1x512,2x512,8x512,1x1024,8x1024", help="rows x cache length, comma-separated"
    )
    parser.add_argument("--skip-shapes", action="store_true", help="only the chapter's session")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = {} if args.skip_shapes else {"shapes": shapes_table(args.shapes)}
    results["session"] = session_table()
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
