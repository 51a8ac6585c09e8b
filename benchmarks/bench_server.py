"""Our OpenAI-compatible server against llama.cpp's, through the official openai client, at 1 to 16 concurrent streams.

    python benchmarks/bench_server.py [--levels 1,2,4,8,16] [--max-tokens 64] [--only ours|llama] [--max-batch 8]
                                      [--rounds 3] [--model PATH] [--llama-python PATH] [--json PATH]

Starts `chatflow serve` (the engine's continuous-batching Scheduler) and llama-cpp-python's server
(`python -m llama_cpp.server`, from the interpreter `--llama-python`, skipped with a message when it lacks
`llama_cpp.server`) on the same GGUF file, each a subprocess on a free loopback port, and waits until each says it
is ready (/health 200 for ours, /v1/models for llama.cpp). A warm-up round at every level first (XLA compiles one
decode program per batch size; first calls are slow on both), then `--rounds` rounds with levels and servers
interleaved, so a change in the machine's load hits both alike. Each level sends that many chat questions at once,
each numbered so that no earlier request asked it (`stream=True`, `temperature=0`, `max_tokens`; ours with vLLM's
`ignore_eos`, llama.cpp with its own `min_tokens` = `max_tokens`, which masks EOS until then), and stamps every
chunk as it arrives.

Per server and level: aggregate tokens/s (all completion tokens over the wall time from the first request to the
last token; median of the rounds), TTFT and inter-token latency p50/p95 (every stream and gap of every round),
tokens per stream (fewer than `max_tokens` means an answer ended early), each server process's CPU use over the
level's wall time, and the ratio of aggregate tokens/s against one stream in the same run. For ours, the request
log's server-side timings too (queue, prefill, decode ms per token). See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import importlib.metadata
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from bench_engine import git_revision, machine
from bench_scheduler import QUESTIONS
from openai import AsyncOpenAI
from peers import THREADS

from jupyter_chatflow.model.files import default_model_path

TARGETS = {8: 2.5, 16: 4.0}  # issue 13: aggregate tokens/s against one stream, ours
LEVEL_TIMEOUT_S = 600.0


@dataclasses.dataclass
class Server:
    """One server under test: how to start it, where it listens, what each request adds for a fixed length."""

    name: str
    argv: list[str]
    ready_path: str
    port: int
    log: Path
    knobs: dict[str, Any]
    process: subprocess.Popen[bytes] | None = None
    ready_s: float = 0.0
    model_id: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, timeout_s: float) -> None:
        """Spawn the server and poll until it answers `ready_path` with 200 (it exiting meanwhile is an error)."""
        started = time.perf_counter()
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT)
        async with httpx.AsyncClient(timeout=5.0) as http:
            while time.perf_counter() - started < timeout_s:
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.log_tail()}")
                try:
                    if (await http.get(self.url + self.ready_path)).status_code == 200:
                        self.ready_s = time.perf_counter() - started
                        return
                except httpx.TransportError:
                    pass  # not listening yet
                await asyncio.sleep(0.5)
        raise RuntimeError(f"{self.name} not ready after {timeout_s:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def cpu_s(self) -> float:
        """The server process's CPU seconds so far (user + system, all its threads)."""
        assert self.process is not None
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def ours(args: argparse.Namespace, model: Path, logs: Path) -> Server:
    port = free_port()
    argv = [sys.executable, "-m", "jupyter_chatflow.frontends.cli", "serve", "--port", str(port),
            "--max-batch", str(args.max_batch), "--model", str(model)]  # fmt: skip
    knobs = {"extra_body": {"ignore_eos": True}, "stream_options": {"include_usage": True}}
    return Server("ours", argv, "/health", port, logs / "ours.log", knobs)


def llama(args: argparse.Namespace, model: Path, logs: Path) -> Server:
    """llama-cpp-python's server: 2 threads for decode too (its default is half the cores), and a request that
    arrives mid-stream waits (its default, `interrupt_requests`, would end the running stream early)."""
    port = free_port()
    argv = [args.llama_python, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
            "--port", str(port), "--n_threads", str(THREADS), "--n_threads_batch", str(THREADS),
            "--n_ctx", "2048", "--interrupt_requests", "false"]  # fmt: skip
    knobs = {"extra_body": {"min_tokens": args.max_tokens}}  # no ignore_eos: EOS is masked until max_tokens
    return Server("llama.cpp", argv, "/v1/models", port, logs / "llama.log", knobs)


def llama_version(python: str) -> tuple[str | None, str]:
    """llama-cpp-python's version in that interpreter, or None and why it can't serve."""
    probe = "import llama_cpp, llama_cpp.server.app; print(llama_cpp.__version__)"
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, str(error)
    if done.returncode != 0:
        return None, (done.stderr.strip().splitlines() or ["no output"])[-1]
    return done.stdout.strip(), ""


async def one_stream(client: AsyncOpenAI, server: Server, question: str, max_tokens: int, request_id: str) -> dict:
    """One streamed answer: when it was sent, when each content chunk came, how many tokens it had."""
    start = time.perf_counter()
    stream = await client.chat.completions.create(
        model=server.model_id, messages=[{"role": "user", "content": question}], stream=True, temperature=0,
        max_tokens=max_tokens, extra_headers={"X-Client-Request-Id": request_id}, **server.knobs,
    )  # fmt: skip
    arrivals: list[float] = []
    usage = None
    async for chunk in stream:
        now = time.perf_counter()
        if chunk.usage is not None:
            usage = chunk.usage.completion_tokens
        if any(choice.delta.content for choice in chunk.choices):
            arrivals.append(now)
    return {"start": start, "arrivals": arrivals, "tokens": usage if usage is not None else len(arrivals)}


def question(tag: str, i: int) -> str:
    """A question no earlier request asked (so no prompt cache holds all of it; the template's system prompt it
    shares with every other request, as on a real server)."""
    return f"Request {tag}-{i}: {QUESTIONS[i % len(QUESTIONS)]}"


async def run_level(client: AsyncOpenAI, server: Server, n: int, max_tokens: int, tag: str) -> dict:
    """`n` different questions at once; the level's figures (raw lists kept for pooling over rounds)."""
    cpu, own_cpu = server.cpu_s(), time.process_time()
    streams = [one_stream(client, server, question(tag, i), max_tokens, f"{tag}-{i}") for i in range(n)]
    done = await asyncio.wait_for(asyncio.gather(*streams), LEVEL_TIMEOUT_S)
    start = min(s["start"] for s in done)
    wall = max(s["arrivals"][-1] if s["arrivals"] else s["start"] for s in done) - start
    tokens = sum(s["tokens"] for s in done)
    return {
        "streams": n, "tokens": tokens, "wall_s": wall, "aggregate_tokens_per_s": tokens / wall,
        "ttft_s": [s["arrivals"][0] - s["start"] for s in done if s["arrivals"]],
        "gaps_s": [b - a for s in done for a, b in zip(s["arrivals"], s["arrivals"][1:], strict=False)],
        "tokens_per_stream": [s["tokens"] for s in done],
        "chunks_per_stream": [len(s["arrivals"]) for s in done],  # content chunks: tokens whose text is empty send none
        "server_cpu_s": server.cpu_s() - cpu, "client_cpu_s": time.process_time() - own_cpu,
    }  # fmt: skip


def pct(values: list[float], q: int) -> float:
    """The q-th percentile (linear between samples); nan when there are none."""
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def summarize(runs: list[dict]) -> dict:
    """One level of one server over the rounds: median throughput, percentiles over every stream and gap."""
    ttft = [t for r in runs for t in r["ttft_s"]]
    gaps = [g for r in runs for g in r["gaps_s"]]
    wall = sum(r["wall_s"] for r in runs)
    per_stream = [t for r in runs for t in r["tokens_per_stream"]]
    return {
        "streams": runs[0]["streams"],
        "aggregate_tokens_per_s": statistics.median(r["aggregate_tokens_per_s"] for r in runs),
        "aggregate_tokens_per_s_rounds": [r["aggregate_tokens_per_s"] for r in runs],
        "ttft_ms_p50": 1000 * pct(ttft, 50), "ttft_ms_p95": 1000 * pct(ttft, 95),
        "itl_ms_p50": 1000 * pct(gaps, 50), "itl_ms_p95": 1000 * pct(gaps, 95),
        "tokens_per_stream_min": min(per_stream), "tokens_per_stream_mean": statistics.mean(per_stream),
        "server_cpu_pct": 100 * sum(r["server_cpu_s"] for r in runs) / wall,
        "client_cpu_pct": 100 * sum(r["client_cpu_s"] for r in runs) / wall,
    }  # fmt: skip


def server_side(log: Path, levels: list[int]) -> dict[int, dict[str, float]]:
    """Ours' request log lines of the measured rounds, per level: medians of queue, prefill and decode ms/token."""
    lines = [json.loads(line) for line in log.read_text(errors="replace").splitlines() if line.startswith("{")]
    out = {}
    for n in levels:
        mine = [r for r in lines if re.fullmatch(rf"bench-r\d+-n{n}-\d+", r.get("request_id", ""))]
        if mine:
            out[n] = {
                "queue_ms_p50": statistics.median(r.get("queue_ms", 0.0) for r in mine),
                "prefill_ms_p50": statistics.median(r.get("prefill_ms", 0.0) for r in mine),
                "decode_ms_per_token_p50": statistics.median(
                    r["decode_ms"] / max(1, r["completion_tokens"] - 1) for r in mine if "decode_ms" in r
                ),
            }
    return out


async def idle_cpu_pct(servers: list[Server], seconds: float = 3.0) -> dict[str, float]:
    """What each server burns doing nothing (it runs beside the other one's measurements)."""
    before = {s.name: s.cpu_s() for s in servers}
    await asyncio.sleep(seconds)
    return {s.name: 100 * (s.cpu_s() - before[s.name]) / seconds for s in servers}


async def measure(servers: list[Server], args: argparse.Namespace) -> dict[str, Any]:
    clients = {
        s.name: AsyncOpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=600) for s in servers
    }
    for s in servers:
        s.model_id = (await clients[s.name].models.list()).data[0].id
        for n in args.levels:  # warm-up: compile each batch size, first calls
            await run_level(clients[s.name], s, n, args.max_tokens, f"warm-n{n}")
    idle = await idle_cpu_pct(servers)
    runs: dict[str, dict[int, list[dict]]] = {s.name: {n: [] for n in args.levels} for s in servers}
    for r in range(args.rounds):
        for n in args.levels:
            for s in servers:
                result = await run_level(clients[s.name], s, n, args.max_tokens, f"bench-r{r}-n{n}")
                runs[s.name][n].append(result)
                print(f"round {r} {s.name} {n} streams: {result['aggregate_tokens_per_s']:.1f} tok/s", flush=True)
    for client in clients.values():
        await client.close()
    return {"idle_cpu_pct": idle, "runs": runs}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    model = Path(args.model) if args.model else default_model_path()
    skipped, versions = {}, {"openai": importlib.metadata.version("openai")}
    with tempfile.TemporaryDirectory(prefix="bench-server-") as scratch:
        logs = Path(args.logs) if args.logs else Path(scratch)
        logs.mkdir(parents=True, exist_ok=True)
        servers = []
        if args.only in (None, "ours"):
            servers.append(ours(args, model, logs))
        if args.only in (None, "llama"):
            version, why = llama_version(args.llama_python)
            if version is None:
                skipped["llama.cpp"] = f"llama_cpp.server does not import in {args.llama_python}: {why}"
                print(f"skipping llama.cpp: {skipped['llama.cpp']}", file=sys.stderr)
            else:
                versions["llama-cpp-python"] = version
                servers.append(llama(args, model, logs))
        load_before = os.getloadavg()
        try:
            for s in servers:
                await s.start(args.ready_timeout)
            measured = await measure(servers, args)
        finally:
            for s in servers:
                s.stop()
        load_after = os.getloadavg()
        results = {s.name: [summarize(measured["runs"][s.name][n]) for n in args.levels] for s in servers}
        ours_side = server_side(logs / "ours.log", args.levels) if args.only in (None, "ours") else {}
    return {
        "date": datetime.date.today().isoformat(), "command": " ".join(["python", *sys.argv]), "machine": machine(),
        "revision": git_revision(), "model": str(model), "versions": versions, "max_tokens": args.max_tokens,
        "max_batch": args.max_batch, "rounds": args.rounds, "load_average": [load_before, load_after],
        "ready_s": {s.name: s.ready_s for s in servers}, "idle_cpu_pct": measured["idle_cpu_pct"],
        "results": results, "ours_server_side": ours_side, "skipped": skipped, "runs": measured["runs"],
    }  # fmt: skip


def ratio_vs_one(rows: list[dict]) -> dict[int, float]:
    base = next((r for r in rows if r["streams"] == 1), rows[0])["aggregate_tokens_per_s"]
    return {r["streams"]: r["aggregate_tokens_per_s"] / base for r in rows}


def report(summary: dict[str, Any]) -> str:
    """Markdown tables: both servers per level, ours against llama.cpp, ours' server-side timings, the targets."""
    results = summary["results"]
    head = "| server | streams | aggregate tok/s | ratio vs 1 | TTFT p50 ms | TTFT p95 ms | ITL p50 ms | ITL p95 ms |"
    lines = [head + " tokens/stream (min) | server CPU % |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, rows in results.items():
        ratio = ratio_vs_one(rows)
        for r in rows:
            lines.append(
                f"| {name} | {r['streams']} | {r['aggregate_tokens_per_s']:.1f} | {ratio[r['streams']]:.2f}x | "
                f"{r['ttft_ms_p50']:.0f} | {r['ttft_ms_p95']:.0f} | {r['itl_ms_p50']:.1f} | {r['itl_ms_p95']:.1f} | "
                f"{r['tokens_per_stream_mean']:.0f} ({r['tokens_per_stream_min']}) | {r['server_cpu_pct']:.0f} |"
            )
    lines += versus(results) + server_side_table(summary["ours_server_side"]) + targets(results.get("ours"))
    load = summary["load_average"]
    lines += ["", f"load average (1 min) before {load[0][0]:.2f}, after {load[1][0]:.2f}; idle server CPU % "
              + ", ".join(f"{k} {v:.1f}" for k, v in summary["idle_cpu_pct"].items())
              + "; ready after " + ", ".join(f"{k} {v:.1f} s" for k, v in summary["ready_s"].items())]  # fmt: skip
    lines += [f"skipped {name}: {why}" for name, why in summary["skipped"].items()]
    return "\n".join(lines)


def versus(results: dict[str, list[dict]]) -> list[str]:
    if "ours" not in results or "llama.cpp" not in results:
        return []
    lines = ["", "| streams | ours tok/s | llama.cpp tok/s | ours / llama.cpp |", "|---:|---:|---:|---:|"]
    for a, b in zip(results["ours"], results["llama.cpp"], strict=True):
        ratio = a["aggregate_tokens_per_s"] / b["aggregate_tokens_per_s"]
        lines.append(f"| {a['streams']} | {a['aggregate_tokens_per_s']:.1f} | {b['aggregate_tokens_per_s']:.1f} | "
                     f"{ratio:.2f}x |")  # fmt: skip
    return lines


def server_side_table(side: dict[int, dict[str, float]]) -> list[str]:
    if not side:
        return []
    lines = ["", "| streams (ours, request log) | queue ms p50 | prefill ms p50 | decode ms/token p50 |",
             "|---:|---:|---:|---:|"]  # fmt: skip
    for n, s in side.items():
        lines.append(f"| {n} | {s['queue_ms_p50']:.0f} | {s['prefill_ms_p50']:.0f} | "
                     f"{s['decode_ms_per_token_p50']:.1f} |")  # fmt: skip
    return lines


def targets(rows: list[dict] | None) -> list[str]:
    if not rows:
        return []
    ratio = ratio_vs_one(rows)
    lines = [""]
    for n, goal in TARGETS.items():
        verdict = "not measured" if n not in ratio else f"{ratio[n]:.3f}x, {'met' if ratio[n] >= goal else 'MISSED'}"
        lines.append(f"target: ours at {n} streams >= {goal}x one stream: {verdict}")
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--levels", default="1,2,4,8,16", help="concurrent streams per level (default 1,2,4,8,16)")
    parser.add_argument("--max-tokens", type=int, default=64, help="completion tokens per stream (default 64)")
    parser.add_argument("--only", choices=("ours", "llama"), help="run one server only")
    parser.add_argument("--max-batch", type=int, default=8, help="ours: chatflow serve --max-batch (default 8)")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds after the warm-up (default 3)")
    parser.add_argument("--model", help="GGUF file (default: the default model's)")
    parser.add_argument("--llama-python", default=sys.executable, help="interpreter with llama-cpp-python[server]")
    parser.add_argument("--ready-timeout", type=float, default=600.0, help="seconds to wait for each server")
    parser.add_argument("--logs", help="folder for the servers' logs (default: a temporary one)")
    parser.add_argument("--json", help="write the full report (every round) as JSON here")
    args = parser.parse_args(argv)
    args.levels = [int(n) for n in args.levels.split(",")]
    return args


def main() -> None:
    args = parse_args()
    summary = asyncio.run(run(args))
    print()
    print(report(summary))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
