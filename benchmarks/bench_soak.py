"""What `chatflow serve`'s memory holds under a soak of concurrent clients, and what it gives back when idle.

    python benchmarks/bench_soak.py [--clients 16] [--seconds 60] [--idle 40] [--max-batch 8] [--model PATH]
                                    [--out bench-results/soak.json]

A fresh process serves the model (the app `chatflow serve` runs, on a `Scheduler` of `--max-batch` rows) on a
loopback port; `--clients` threads send chat completions (4 to 48 tokens, streamed or not, greedy or sampled)
and conversation turns for `--seconds`. The server process samples its anonymous resident memory (`RssAnon`)
each second and reports, per phase: the model loaded, the soak's peak and end, after `--idle` seconds with no
request (the server's idle release, `--release-idle-s`, included: 0 turns it off), and after
`runner.release_programs()`; with the programs XLA compiled (JAX's compile events: those loaded from the persistent
XLA cache are not counted), the prompt cache's bytes, the threads and the conversations held.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SERVER = r"""
import gc, json, os, random, sys, threading, time
import httpx, uvicorn
from jax import monitoring
import jupyter_chatflow as cf
from jupyter_chatflow.engine.programs import release_freed_memory
from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.frontends.server import ModelHost, ServerConfig, create_app

clients, seconds, idle, max_batch = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
path, release_s = sys.argv[5] or None, float(sys.argv[6])
compiled = []

def began(event, _value, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
        compiled.append(str(kwargs.get("fun_name", "")))

monitoring.register_scalar_listener(began)

def anon():
    status = dict(line.split(":", 1) for line in open(f"/proc/{os.getpid()}/status"))
    return int(status["RssAnon"].split()[0]) / 1024

model = cf.load_model(path)
scheduler = Scheduler(model, max_batch=max_batch)
host = ModelHost.ready(model, name="m", make_engine=lambda _: scheduler)
app = create_app(host, ServerConfig(release_idle_s=release_s))  # its lifespan runs the idle release
server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
threading.Thread(target=server.run, daemon=True).start()
while not server.started:
    time.sleep(0.05)
port = server.servers[0].sockets[0].getsockname()[1]
base = f"http://127.0.0.1:{port}"
state = app.state.chatflow
phases, samples = [], []

def phase(name):
    gc.collect(); release_freed_memory()
    phases.append({"phase": name, "anon_mib": round(anon(), 1), "programs_compiled": len(compiled),
                   "prompt_cache_mib": round(model.runner.prompt_cache.nbytes / 2**20, 1),
                   "kv_rows_mib": round(scheduler._batch.nbytes / 2**20, 1),
                   "threads": threading.active_count(), "conversations": len(state.conversations._open)})

phase("model loaded")
stop = time.monotonic() + seconds
errors = []

def client(n):
    rng = random.Random(n)
    with httpx.Client(timeout=300) as http:
        while time.monotonic() < stop:
            try:
                if rng.random() < 0.2:
                    options = {"max_tokens": rng.randint(4, 32)}
                    body = {"message": f"Tell me about topic {rng.randint(0, 999)}.", "options": options}
                    http.post(f"{base}/v1/chatflow/conversation", json=body).raise_for_status()
                else:
                    ask = [{"role": "user", "content": f"Question {rng.randint(0, 9999)}: why?"}]
                    body = {"model": "m", "messages": ask, "max_tokens": rng.randint(4, 48),
                            "temperature": rng.choice([0, 0.7]), "stream": rng.random() < 0.5}
                    http.post(f"{base}/v1/chat/completions", json=body).raise_for_status()
            except Exception as error:
                errors.append(repr(error))

def sample():
    while time.monotonic() < stop + idle:
        samples.append(anon()); time.sleep(1)

threading.Thread(target=sample, daemon=True).start()
workers = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
[w.start() for w in workers]
[w.join() for w in workers]
peak = max(samples) if samples else anon()
phase("soak ended")
phases[-1]["peak_anon_mib"] = round(peak, 1)
time.sleep(idle)
phase(f"after {idle:.0f} s idle")
model.runner.release_programs()
phase("runner.release_programs()")
print(json.dumps({"phases": phases, "errors": len(errors), "first_errors": errors[:3]}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--idle", type=float, default=40.0, help="seconds with no request after the soak")
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--release-idle-s", type=float, default=10.0, help="the server's idle release (0: off)")
    parser.add_argument("--model", default="", help="GGUF file (default: the default model's)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "soak.json")
    args = parser.parse_args()
    command = [sys.executable, "-c", SERVER, str(args.clients), str(args.seconds), str(args.idle), str(args.max_batch),
               args.model, str(args.release_idle_s)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=os.environ | {"CHATFLOW_DB": ":memory:"})
    if done.returncode:
        print(done.stderr[-3000:], file=sys.stderr)
        return 1
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{'phase':<28} {'RssAnon MiB':>12} {'peak':>8} {'compiled':>9} {'prompt cache MiB':>17} "
          f"{'KV rows MiB':>12} {'threads':>8} {'conversations':>14}")  # fmt: skip
    for row in result["phases"]:
        peak = f"{row['peak_anon_mib']:.0f}" if "peak_anon_mib" in row else ""
        print(f"{row['phase']:<28} {row['anon_mib']:>12.0f} {peak:>8} {row['programs_compiled']:>9} "
              f"{row['prompt_cache_mib']:>17.1f} {row['kv_rows_mib']:>12.1f} {row['threads']:>8} "
              f"{row['conversations']:>14}")  # fmt: skip
    print(f"client errors: {result['errors']} {result['first_errors']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)}, **result}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
