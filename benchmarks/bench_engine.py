"""Engine benchmark: our JAX engine against llama.cpp and transformers, same GGUF, same token ids, this machine.

Usage:
    python benchmarks/bench_engine.py [--peers ours,llama_cpp,transformers] [--decode-tokens 128] [--repeats 3]
                                      [--model PATH] [--weights float|as-file] [--out bench-results/engine.json]

The parent builds the prompts once with our tokenizer (200 and 2000 tokens of the English and Python in the
standard library's argparse.py, and a short chat prompt), then runs each installed engine, one after another, in
its own subprocess (`--worker NAME`), so load time and peak RSS are that engine's own. Per engine it also times
two fresh processes from spawn to first token of the chat prompt: the first with empty caches (our XLA
compilation cache and prepared-weights cache), the second with the caches the first filled. It prints a table
and the ratios ours / peer, and writes everything to --out as JSON. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from peers import CHAT_MAX_TOKENS, RUNNERS, THREADS, Runner, Workload
from report import LONG_TOKENS, SHORT_TOKENS, ratios, report

ENGINES = ("ours", "llama_cpp", "transformers")
REQUIRES = {
    "ours": ("jax", "flax"),
    "llama_cpp": ("llama_cpp",),
    "transformers": ("transformers", "torch", "accelerate"),
}
VERSIONS = {
    "ours": ("jupyter_chatflow", "jax"),
    "llama_cpp": ("llama-cpp-python",),
    "transformers": ("transformers", "torch"),
}
INSTALL_HINT = 'pip install -e ".[bench]" accelerate torch==2.13.0'
CHAT = ({"role": "user", "content": "What is the capital of France?"},)
CACHE_VARS = ("CHATFLOW_XLA_CACHE", "CHATFLOW_WEIGHTS_CACHE")  # our compiled programs; our dequantized weights
RESULT_TAG, LOADED_TAG, FIRST_TOKEN_TAG, RSS_TAG = "BENCH_RESULT ", "BENCH_LOADED ", "BENCH_FIRST_TOKEN", "BENCH_RSS "


# --- worker: one engine in one process ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Timed:
    """One timed generation: seconds to the first token, seconds in all, the token ids."""

    first_s: float
    total_s: float
    tokens: list[int]

    @property
    def decode_tokens_per_s(self) -> float:
        return (len(self.tokens) - 1) / (self.total_s - self.first_s)


def timed(runner: Runner, ids: Sequence[int], n_tokens: int) -> Timed:
    """Run one generation, timing its first token and its whole stream."""
    tokens: list[int] = []
    start = first = time.perf_counter()
    for token in runner.stream(ids, n_tokens):
        if not tokens:
            first = time.perf_counter()
        tokens.append(token)
    return Timed(first - start, time.perf_counter() - start, tokens)


def prefill_first_token_s(runner: Runner, ids: Sequence[int], repeats: int) -> list[float]:
    """Seconds to the first token with a warm program: one run first (it compiles), then `repeats` timed."""
    timed(runner, ids, 1)
    return [timed(runner, ids, 1).first_s for _ in range(repeats)]


def measure(engine: str, work: Workload) -> dict[str, Any]:
    """All in-process figures of one engine."""
    start = time.perf_counter()
    runner = RUNNERS[engine](work)
    load_s = time.perf_counter() - start
    first = timed(runner, work.short, work.decode_tokens)  # compiles (ours); warms caches (all)
    warm = [timed(runner, work.short, work.decode_tokens) for _ in range(work.repeats)]
    short = prefill_first_token_s(runner, work.short, work.repeats)
    long = prefill_first_token_s(runner, work.long, work.repeats)
    median = statistics.median
    return {
        "load_s": load_s,
        "first_compile_s": max(0.0, first.total_s - median(t.total_s for t in warm)),  # peers: ~0 +- noise
        "prefill_short_tok_s": len(work.short) / median(short),
        "prefill_long_tok_s": len(work.long) / median(long),
        "ttft_short_ms": 1000 * median(t.first_s for t in warm),
        "decode_tok_s": median(t.decode_tokens_per_s for t in warm),
        "peak_rss_mib": peak_rss_mib(),
        "tokens": warm[0].tokens,
        "samples": {
            "first_call_s": first.total_s,
            "warm_total_s": [t.total_s for t in warm],
            "warm_first_token_s": [t.first_s for t in warm],
            "decode_tok_s": [t.decode_tokens_per_s for t in warm],
            "prefill_short_first_token_s": short,
            "prefill_long_first_token_s": long,
        },
        "versions": {name: version(name) for name in VERSIONS[engine]},
    }


def peak_rss_mib() -> float:
    """This process's peak resident memory: Linux's VmHWM, because ru_maxrss keeps the peak of the parent that
    spawned it (the kernel carries it across fork and exec), so every worker would report at least ours."""
    status = Path("/proc/self/status")
    lines = status.read_text().splitlines() if status.exists() else []
    hwm = [int(line.split()[1]) for line in lines if line.startswith("VmHWM:")]
    return hwm[0] / 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:  # e.g. run from a checkout through PYTHONPATH
        return "unknown"


def first_token_only(engine: str, work: Workload) -> None:
    """A fresh process's whole job for the start-up figures: load, report, first token of the chat, stop."""
    start = time.perf_counter()
    runner = RUNNERS[engine](work)
    print(f"{LOADED_TAG}{time.perf_counter() - start}", flush=True)
    for _ in runner.stream(work.chat, CHAT_MAX_TOKENS):
        print(FIRST_TOKEN_TAG, flush=True)
        break
    print(f"{RSS_TAG}{peak_rss_mib()}", flush=True)


def worker(engine: str, workload_file: Path, startup: bool) -> None:
    work = Workload(**json.loads(workload_file.read_text()))
    if startup:
        first_token_only(engine, work)
    else:
        print(RESULT_TAG + json.dumps(measure(engine, work)), flush=True)


# --- parent: prompts, subprocesses ----------------------------------------------------------------------------------


def build_workload(model: str | None, decode_tokens: int, repeats: int, weights: str = "float") -> Workload:
    """Prompts as our tokenizer's ids: real English and code (argparse.py ships with every Python)."""
    import jupyter_chatflow as cf
    from jupyter_chatflow.model.files import resolve_model_path

    path = resolve_model_path(model)
    with caches_off():  # the parent only needs the tokenizer: leave the user's caches alone
        tokenizer = cf.load_model(path).tokenizer
    ids = tokenizer.encode(Path(argparse.__file__).read_text(encoding="utf-8"))
    return Workload(
        model=str(path), short=ids[:SHORT_TOKENS], long=ids[:LONG_TOKENS],
        chat=tokenizer.apply_chat_template(list(CHAT)), decode_tokens=decode_tokens, repeats=repeats,
        weights=weights,
    )  # fmt: skip


@contextlib.contextmanager
def caches_off() -> Iterator[None]:
    """Our caches turned off inside the block (environment restored after)."""
    saved = {name: os.environ.get(name) for name in CACHE_VARS}
    os.environ.update(dict.fromkeys(CACHE_VARS, "off"))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def missing_package(engine: str) -> str | None:
    missing = [name for name in REQUIRES[engine] if importlib.util.find_spec(name) is None]
    return f"{', '.join(missing)} not installed ({INSTALL_HINT})" if missing else None


def worker_command(engine: str, workload_file: Path, *flags: str) -> list[str]:
    script = str(Path(__file__).resolve())
    return [sys.executable, script, "--worker", engine, "--workload", str(workload_file), *flags]


def run_worker(engine: str, workload_file: Path, env: dict[str, str]) -> dict[str, Any]:
    """The worker's figures, or {"error": ...} when it failed: a crashing peer must not stop the run."""
    done = subprocess.run(worker_command(engine, workload_file), capture_output=True, text=True, env=env)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            return json.loads(line.removeprefix(RESULT_TAG))
    return {"error": f"worker exited with {done.returncode}: ...{done.stderr.strip()[-800:]}"}


def fresh_process(engine: str, workload_file: Path, env: dict[str, str]) -> dict[str, float]:
    """A fresh process: seconds from spawn to its first token, its own load seconds and peak RSS ({}: failed)."""
    command = worker_command(engine, workload_file, "--startup")
    start, seen = time.perf_counter(), {}
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(LOADED_TAG):
                seen["load_s"] = float(line.removeprefix(LOADED_TAG))
            elif line.startswith(RSS_TAG):
                seen["peak_rss_mib"] = float(line.removeprefix(RSS_TAG))
            elif line.strip() == FIRST_TOKEN_TAG:
                seen["first_token_s"] = time.perf_counter() - start
    return seen if proc.returncode == 0 and "first_token_s" in seen else {}


def bench_engine(engine: str, workload_file: Path, scratch: Path) -> dict[str, Any]:
    """One engine: the worker's figures (empty caches), then a cold and a warm fresh process to first token."""
    before = os.getloadavg()[0]
    env = {**os.environ, **{name: str(scratch / f"{engine}-worker-{name}") for name in CACHE_VARS}}
    print(f"[{engine}] measuring in a worker process...", flush=True)
    result = run_worker(engine, workload_file, env)
    if "error" in result:
        return result
    for name in CACHE_VARS:  # empty for the cold process, filled by it for the warm one
        env[name] = str(scratch / f"{engine}-startup-{name}")
    print(f"[{engine}] fresh processes to first token, cold caches then warm...", flush=True)
    cold, warm = fresh_process(engine, workload_file, env), fresh_process(engine, workload_file, env)
    result |= {"cold_start_s": cold.get("first_token_s"), "warm_start_s": warm.get("first_token_s")}
    result |= {"cold_load_s": cold.get("load_s"), "warm_load_s": warm.get("load_s")}
    result["chat_peak_rss_mib"] = warm.get("peak_rss_mib")
    result["load_average"] = [before, os.getloadavg()[0]]
    return result


def git_revision() -> str:
    """The checkout's commit (with -dirty when it has changes): what "ours" was."""
    folder = Path(__file__).resolve().parent
    done = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=folder)
    return done.stdout.strip() or "unknown"


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    """Every requested engine that is installed, one after another; the report as a dict."""
    started, revision = time.perf_counter(), git_revision()  # before the run: the tree may change under it
    work = build_workload(args.model, args.decode_tokens, args.repeats, args.weights)
    skipped = {name: reason for name in args.peers if (reason := missing_package(name))}
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as scratch:
        workload_file = Path(scratch) / "workload.json"
        workload_file.write_text(json.dumps(dataclasses.asdict(work)))
        for name in (name for name in args.peers if name not in skipped):
            results[name] = bench_engine(name, workload_file, Path(scratch))
    add_prefixes(results)
    return {
        "date": datetime.date.today().isoformat(), "command": " ".join(["python", *sys.argv]), "machine": machine(),
        "revision": revision, "model": work.model, "threads": THREADS, "decode_tokens": work.decode_tokens,
        "repeats": work.repeats, "weights": work.weights, "prompt_tokens": {"short": len(work.short),
        "long": len(work.long), "chat": len(work.chat)}, "results": results, "skipped": skipped,
        "ratios": ratios(results), "run_s": time.perf_counter() - started,
    }  # fmt: skip


def machine() -> dict[str, Any]:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    cpu = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.machine())
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "system": platform.platform()}


def add_prefixes(results: dict[str, dict[str, Any]]) -> None:
    """How many greedy ids each engine shares with ours from the start (float math differs, so they drift)."""
    ours = results.get("ours", {}).get("tokens")
    for figures in results.values():
        if ours and "tokens" in figures:
            figures["same_prefix"] = same_prefix(ours, figures["tokens"])


def same_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peers", default=",".join(ENGINES), help="engines to run, comma-separated")
    parser.add_argument("--decode-tokens", type=int, default=128, help="tokens to decode at batch 1")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per figure (the median is kept)")
    parser.add_argument("--model", default=None, help="GGUF file (default: $CHATFLOW_MODEL or the default model)")
    parser.add_argument("--weights", choices=("float", "as-file"), default="float",
                        help="how ours holds the weights: float32 (the default) or the file's blocks")  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("bench-results/engine.json"), help="JSON report")
    parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--workload", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--startup", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.peers = [name.strip() for name in args.peers.split(",") if name.strip()]
    if unknown := sorted(set(args.peers) - set(ENGINES)):
        parser.error(f"unknown engines {unknown}; choose from {', '.join(ENGINES)}")
    if args.decode_tokens < 2 or args.repeats < 1:
        parser.error("--decode-tokens must be at least 2 and --repeats at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        worker(args.worker, args.workload, args.startup)
        return
    summary = run_all(args)
    print(report(summary))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
