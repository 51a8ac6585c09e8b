"""What one compiled decode program costs in memory: compiled by XLA, and loaded from the persistent XLA cache.

    python benchmarks/bench_program_memory.py [--shapes 1x512,2x512,8x512,1x1024,8x1024] [--out results.json]

The default model's decode step is one fused program per batch shape (rows x cache length: `Programs`). Each
is compiled the first time a process meets its shape, or loaded from the XLA cache a previous process filled.
Two fresh processes share a new, empty cache folder: the first compiles every shape, the second loads them.
Each warms the shapes one at a time (`Programs.warm`: the decode step and its cache write, nothing run) and
reports the growth of its anonymous resident memory (`RssAnon`) after each, once glibc has returned what the
compiler freed; at the end, what `jax.clear_caches()` gives back (every compiled program).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = """
import gc, json, os, sys
import jax
import jupyter_chatflow as cf
from jupyter_chatflow.engine.programs import release_freed_memory

def anon():
    status = dict(line.split(":", 1) for line in open(f"/proc/{os.getpid()}/status"))
    return int(status["RssAnon"].split()[0]) / 1024

model = cf.load_model()
rows = []
for shape in sys.argv[1].split(","):
    n, length = map(int, shape.split("x"))
    before = anon()
    model._programs.warm(n, length, model.config, model.dtype)
    gc.collect(); release_freed_memory()
    rows.append({"shape": shape, "mib": round(anon() - before, 1)})
before = anon()
jax.clear_caches(); gc.collect(); release_freed_memory()
print(json.dumps({"programs": rows, "clear_caches_mib": round(before - anon(), 1)}))
"""


def probe(shapes: str, cache: Path) -> dict:
    env = {**os.environ, "CHATFLOW_XLA_CACHE": str(cache)}
    done = subprocess.run([sys.executable, "-c", PROBE, shapes], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shapes", default="1x512,2x512,8x512,1x1024,8x1024", help="rows x cache length, comma-separated"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        compiled, loaded = probe(args.shapes, Path(cache)), probe(args.shapes, Path(cache))
    print(f"{'shape':<8} {'compiled MiB':>13} {'loaded from cache MiB':>22}")
    for a, b in zip(compiled["programs"], loaded["programs"], strict=True):
        print(f"{a['shape']:<8} {a['mib']:>13.1f} {b['mib']:>22.1f}")
    gave = f"{compiled['clear_caches_mib']:.1f} / {loaded['clear_caches_mib']:.1f}"
    print(f"jax.clear_caches() gave back {gave} MiB (compiled / loaded)")
    if args.out:
        args.out.write_text(json.dumps({"compiled": compiled, "loaded": loaded}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
