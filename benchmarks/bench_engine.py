"""Engine benchmark: our JAX engine against llama.cpp and transformers, same GGUF, same token ids, this machine.

Usage:
    python benchmarks/bench_engine.py [--peers ours,llama_cpp,transformers] [--decode-tokens 128] [--repeats 3]
                                      [--model PATH] [--out bench-results/engine.json]

The parent builds the prompts once with our tokenizer (about 200 and 2000 tokens of English and Python from the
standard library's argparse.py, and a short chat prompt), then runs each installed engine, one after another, in
its own subprocess (`--worker NAME`), so load time and peak RSS are that engine's own. It also times two fresh
processes per engine from spawn to first token: one with an empty XLA compilation cache, one with the cache that
run filled. It prints a table and the ratios ours / peer and writes everything to --out as JSON.
See benchmarks/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
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
from typing import Any, Protocol

ENGINES = ("ours", "llama_cpp", "transformers")
REQUIRES = {"ours": ("jax", "flax"), "llama_cpp": ("llama_cpp",), "transformers": ("transformers", "torch")}
INSTALL_HINT = 'pip install -e ".[bench]" (and pip install torch==2.13.0 for transformers)'
SHORT_TOKENS, LONG_TOKENS = 200, 2000
CHAT = ({"role": "user", "content": "What is the capital of France?"},)
CHAT_MAX_TOKENS = 256  # the CLI's default; it sizes our KV cache, so the start-up runs compile what `chatflow chat` does
THREADS = 2
N_BATCH = 512
RESULT_TAG, FIRST_TOKEN_TAG = "BENCH_RESULT ", "BENCH_FIRST_TOKEN"
TARGET_COLD_S, TARGET_WARM_S = 15.0, 3.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Workload:
    """What every engine runs: the model file and the prompts as token ids."""

    model: str
    short: list[int]
    long: list[int]
    chat: list[int]
    decode_tokens: int
    repeats: int

    @property
    def n_ctx(self) -> int:
        """A context (power of two) that holds every run."""
        longest = max(len(self.long) + 1, len(self.short) + self.decode_tokens, len(self.chat) + CHAT_MAX_TOKENS)
        return 1 << (longest - 1).bit_length()


# --- engines: each streams exactly n greedy token ids after a prompt, EOS ignored -------------------------------


class Runner(Protocol):
    def stream(self, ids: Sequence[int], n_tokens: int) -> Iterator[int]: ...


class Ours:
    """jupyter_chatflow: `load_model` then `generate` (greedy, ignore_eos)."""

    def __init__(self, work: Workload):
        import jupyter_chatflow as cf

        self.model = cf.load_model(work.model)

    def stream(self, ids: Sequence[int], n_tokens: int) -> Iterator[int]:
        generation = self.model.generate(list(ids), max_tokens=n_tokens, temperature=0.0, ignore_eos=True)
        return (step.token_id for step in generation)


class LlamaCpp:
    """llama-cpp-python: `Llama.eval` on the ids, argmax of the last logits, one `eval` per new token."""

    def __init__(self, work: Workload):
        import llama_cpp
        import numpy as np

        self.np, self.lib = np, llama_cpp
        self.llm = _llama_without_extra_bufts(
            model_path=work.model, n_ctx=work.n_ctx, n_batch=N_BATCH, n_ubatch=N_BATCH,
            n_threads=THREADS, n_threads_batch=THREADS, verbose=False,
        )  # fmt: skip

    def stream(self, ids: Sequence[int], n_tokens: int) -> Iterator[int]:
        self.llm.reset()
        self.llm.eval(list(ids))
        for i in range(n_tokens):
            token = self._argmax_last()
            yield token
            if i + 1 < n_tokens:
                self.llm.eval([token])

    def _argmax_last(self) -> int:
        logits = self.lib.llama_get_logits_ith(self.llm.ctx, -1)  # the batch's last row: the only one computed
        return int(self.np.argmax(self.np.ctypeslib.as_array(logits, shape=(self.llm.n_vocab(),))))


def _llama_without_extra_bufts(**kwargs: Any) -> Any:
    """`llama_cpp.Llama` with llama.cpp's extra CPU buffer types (weight repacking, AMX) turned off.

    llama.cpp's `--no-extra-bufts`: `Llama()` does not expose `use_extra_bufts`, so the default model params
    it starts from are patched while it loads. The repacked/AMX matmul path crashed on Q4_1 prompt batches
    on this machine's CPU (see README).
    """
    import llama_cpp.llama_cpp as lib

    default = lib.llama_model_default_params

    def params() -> Any:
        chosen = default()
        chosen.use_extra_bufts = False
        return chosen

    lib.llama_model_default_params = params
    try:
        return llama_cpp_class()(**kwargs)
    finally:
        lib.llama_model_default_params = default


def llama_cpp_class() -> Any:
    from llama_cpp import Llama

    return Llama


class Transformers:
    """Hugging Face transformers: the GGUF dequantized to float32, forward with a KV cache, argmax."""

    def __init__(self, work: Workload):
        import torch
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(THREADS)
        path = Path(work.model)
        self.torch = torch
        self.model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
        self.model.eval()

    def stream(self, ids: Sequence[int], n_tokens: int) -> Iterator[int]:
        with self.torch.inference_mode():
            out = self.model(self.torch.tensor([list(ids)]), use_cache=True, logits_to_keep=1)
            for i in range(n_tokens):
                token = int(out.logits[0, -1].argmax())
                yield token
                if i + 1 < n_tokens:
                    out = self.model(self.torch.tensor([[token]]), past_key_values=out.past_key_values, use_cache=True)


RUNNERS: dict[str, type] = {"ours": Ours, "llama_cpp": LlamaCpp, "transformers": Transformers}
VERSIONS = {"ours": ("jupyter_chatflow", "jax"), "llama_cpp": ("llama-cpp-python",), "transformers": ("transformers", "torch")}


# --- worker: one engine, one process ------------------------------------------------------------------------------


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
    """Run one generation, timing the first token and the whole stream."""
    tokens: list[int] = []
    start = time.perf_counter()
    first = start
    for token in runner.stream(ids, n_tokens):
        if not tokens:
            first = time.perf_counter()
        tokens.append(token)
    return Timed(first - start, time.perf_counter() - start, tokens)


def prefill_tokens_per_s(runner: Runner, ids: Sequence[int], repeats: int) -> tuple[float, list[float]]:
    """Prompt length / time to first token with a warm program (one run first compiles it); median of repeats."""
    timed(runner, ids, 1)
    samples = [timed(runner, ids, 1).first_s for _ in range(repeats)]
    return len(ids) / statistics.median(samples), samples


def measure(engine: str, work: Workload) -> dict[str, Any]:
    """All in-process figures of one engine."""
    start = time.perf_counter()
    runner = RUNNERS[engine](work)
    load_s = time.perf_counter() - start
    first = timed(runner, work.short, work.decode_tokens)  # compiles (ours) or warms caches (peers)
    warm = [timed(runner, work.short, work.decode_tokens) for _ in range(work.repeats)]
    prefill_short, short_samples = prefill_tokens_per_s(runner, work.short, work.repeats)
    prefill_long, long_samples = prefill_tokens_per_s(runner, work.long, work.repeats)
    return {
        "load_s": load_s,
        "first_compile_s": first.total_s - statistics.median(t.total_s for t in warm),
        "prefill_short_tok_s": prefill_short,
        "prefill_long_tok_s": prefill_long,
        "ttft_short_ms": 1000 * statistics.median(t.first_s for t in warm),
        "decode_tok_s": statistics.median(t.decode_tokens_per_s for t in warm),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "tokens": warm[0].tokens,
        "samples": {
            "first_call_s": first.total_s,
            "warm_total_s": [t.total_s for t in warm],
            "warm_first_token_s": [t.first_s for t in warm],
            "decode_tok_s": [t.decode_tokens_per_s for t in warm],
            "prefill_short_first_token_s": short_samples,
            "prefill_long_first_token_s": long_samples,
        },
        "versions": {name: importlib.metadata.version(name) for name in VERSIONS[engine]},
    }


def first_token_only(engine: str, work: Workload) -> None:
    """A fresh process's whole job for the start-up figure: load, say "first token", stop."""
    runner = RUNNERS[engine](work)
    for _ in runner.stream(work.chat, CHAT_MAX_TOKENS):
        print(FIRST_TOKEN_TAG, flush=True)
        break


def worker(engine: str, workload_file: Path, startup: bool) -> None:
    work = Workload(**json.loads(workload_file.read_text()))
    if startup:
        first_token_only(engine, work)
    else:
        print(RESULT_TAG + json.dumps(measure(engine, work)), flush=True)


# --- parent: prompts, subprocesses, table -------------------------------------------------------------------------


def build_workload(model: str | None, decode_tokens: int, repeats: int) -> Workload:
    """Prompts as our tokenizer's ids: real English and code (argparse.py ships with every Python)."""
    import jupyter_chatflow as cf
    from jupyter_chatflow.model_files import resolve_model_path

    path = resolve_model_path(model)
    tokenizer = cf.load_model(path).tokenizer
    text = Path(argparse.__file__).read_text(encoding="utf-8")
    ids = tokenizer.encode(text)
    return Workload(
        model=str(path), short=ids[:SHORT_TOKENS], long=ids[:LONG_TOKENS],
        chat=tokenizer.apply_chat_template(list(CHAT)), decode_tokens=decode_tokens, repeats=repeats,
    )  # fmt: skip


def missing_package(engine: str) -> str | None:
    missing = [name for name in REQUIRES[engine] if importlib.util.find_spec(name) is None]
    return f"{', '.join(missing)} not installed: {INSTALL_HINT}" if missing else None


def worker_command(engine: str, workload_file: Path, startup: bool = False) -> list[str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", engine, "--workload", str(workload_file)]
    return [*command, "--startup"] if startup else command


def run_worker(engine: str, workload_file: Path, env: dict[str, str]) -> dict[str, Any]:
    """The worker's metrics, or {"error": ...} when it failed (a crash in a peer must not stop the run)."""
    done = subprocess.run(worker_command(engine, workload_file), capture_output=True, text=True, env=env)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG) :])
    return {"error": f"worker exited with {done.returncode}: {done.stderr.strip()[-600:]}"}


def seconds_to_first_token(engine: str, workload_file: Path, env: dict[str, str]) -> float | None:
    """Seconds from spawning a fresh process to its first token (None when it failed)."""
    start = time.perf_counter()
    command = worker_command(engine, workload_file, startup=True)
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == FIRST_TOKEN_TAG:
                elapsed = time.perf_counter() - start
                proc.wait()
                return elapsed if proc.returncode == 0 else None
    return None


def bench_engine(engine: str, workload_file: Path, scratch: Path) -> dict[str, Any]:
    """One engine: the worker's figures, then a cold and a warm fresh process to first token."""
    env = {**os.environ, "CHATFLOW_XLA_CACHE": str(scratch / f"{engine}-worker-xla")}
    print(f"[{engine}] measuring in a worker process...", flush=True)
    result = run_worker(engine, workload_file, env)
    if "error" in result:
        return result
    env["CHATFLOW_XLA_CACHE"] = str(scratch / f"{engine}-startup-xla")  # empty: the cold run fills it
    print(f"[{engine}] fresh processes to first token (cold, then warm cache)...", flush=True)
    result["cold_start_s"] = seconds_to_first_token(engine, workload_file, env)
    result["warm_start_s"] = seconds_to_first_token(engine, workload_file, env)
    return result


# label, key, format, which is better
ROWS = (
    ("load: file -> ready model (s)", "load_s", "{:.2f}", "lower"),
    ("first compile (s)", "first_compile_s", "{:.2f}", "lower"),
    ("cold start: spawn -> 1st token (s)", "cold_start_s", "{:.2f}", "lower"),
    ("warm start: spawn -> 1st token (s)", "warm_start_s", "{:.2f}", "lower"),
    (f"prefill {SHORT_TOKENS} tokens (tok/s)", "prefill_short_tok_s", "{:.0f}", "higher"),
    (f"prefill {LONG_TOKENS} tokens (tok/s)", "prefill_long_tok_s", "{:.0f}", "higher"),
    (f"time to first token, {SHORT_TOKENS} (ms)", "ttft_short_ms", "{:.0f}", "lower"),
    ("decode, batch 1 (tok/s)", "decode_tok_s", "{:.1f}", "higher"),
    ("peak RSS (MiB)", "peak_rss_mib", "{:.0f}", "lower"),
    ("greedy ids equal to ours (prefix)", "same_prefix", "{:d}", "-"),
)


def same_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def ratios(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """ours / peer for every numeric figure both have."""
    ours = results.get("ours", {})
    return {
        peer: {key: ours[key] / value for _, key, _, better in ROWS if better != "-" and _ratio_ok(ours, value, key)}
        for peer, figures in results.items()
        if peer != "ours" and "error" not in figures
        for value in [None]
        for value in [figures]  # noqa: B020
    }


def _ratio_ok(ours: dict[str, Any], value: Any, key: str) -> bool:
    return isinstance(ours.get(key), (int, float)) and isinstance(value, (int, float)) and value > 0


def cell(figures: dict[str, Any], key: str, fmt: str) -> str:
    value = figures.get(key)
    return fmt.format(value) if isinstance(value, (int, float)) else "-"


def table(results: dict[str, dict[str, Any]], ratio: dict[str, dict[str, float]]) -> str:
    """A plain-text table: one row per figure, one column per engine, then ours / peer."""
    engines = [name for name in results if "error" not in results[name]]
    header = ["figure", *engines, *(f"ours/{peer}" for peer in ratio), "better"]
    lines = [header]
    for label, key, fmt, better in ROWS:
        values = [cell(results[name], key, fmt) for name in engines]
        lines.append([label, *values, *(cell(ratio[peer], key, "{:.2f}x") for peer in ratio), better])
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    return "\n".join("  ".join(text.ljust(w) if i == 0 else text.rjust(w) for i, (text, w) in enumerate(zip(row, widths))) for row in lines)
