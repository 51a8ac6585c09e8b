"""On an accelerator: greedy parity, batch-1 decode and prefill against the memory-bandwidth limit, the serving curve,
compile times. Every figure goes to --out (JSON, rewritten after each one) and to stdout as Markdown as it comes, so a
run cut short still leaves what it measured.

    python benchmarks/bench_gpu.py [--quick] [--budget-s 420] [--bandwidth GBPS] [--devices N] [--out PATH]

In order: the default model's greedy answers against the reference ids (float32 at full matmul precision first: the
script stops there, exit status 2, when they disagree before the reference's first near-tie), then per model and
weights choice (`load_model(dtype=..., weights=...)`) the compile seconds of the prefill and decode programs (from
`compile_clock`, never inside a speed), decode tok/s (batch 1, median of the repeats after a warm-up) beside the
bandwidth limit (bytes read per token: the resident weights and the KV cache at the mean position, over the card's
peak), prefill tok/s; then the scheduler's aggregate and per-stream tok/s at 1-64 streams; then int8; then a mesh
of `--devices N` GPUs where the machine has them. Items past `--budget-s` are skipped (and listed). On the CPU
backend, or with --quick, a small version runs (24 s on 2 quiet cores). See benchmarks/README.md.
"""

from __future__ import annotations

import os

os.environ.setdefault("CHATFLOW_XLA_CACHE", "off")  # compile seconds are compiles, not loads from an earlier run

import argparse
import contextlib
import dataclasses
import datetime
import gc
import json
import math
import re
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
from bench_engine import git_revision, same_prefix
from bench_scheduler import QUESTIONS, prompts_for, run_level

from jupyter_chatflow import SamplingParams, load_model
from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.model.compile_clock import compile_seconds
from jupyter_chatflow.model.files import default_model_path
from jupyter_chatflow.model.header import read_header

ROOT = Path(__file__).resolve().parents[1]
REFERENCES = (ROOT / "shared", ROOT.parent / "shared", Path("/work/shared"))  # .../reference/greedy_f32.json
NEAR_TIE = 0.02  # logits closer than this at the reference's step: either answer is right (test_real_model.py)
STOP_ID = 2  # the default model's <|im_end|>: the reference lists it, a generation stops before it
PEAK_GBPS = (  # the card's peak memory bandwidth by `device_kind` (lowercase), first match; GB/s
    (r"\bh200\b", 4800.0), (r"h100.*nvl", 3900.0), (r"h100.*pcie", 2000.0), (r"\bh100\b", 3350.0),
    (r"a100.*80\s*gb", 2039.0), (r"\ba100\b", 1555.0), (r"\bl4\b", 300.0),
)  # fmt: skip
VARIANTS = {"float32": ("float32", None), "bfloat16": ("bfloat16", None), "as-file": (None, "as-file"),
            "int8": (None, "int8")}  # fmt: skip
# name -> load_model's path: given a path, load_model loads a model of its own, never the process's shared one
MODELS = {"SmolLM2-135M": default_model_path, "gemma-3-270m": lambda: "gemma-3-270m"}


@dataclasses.dataclass(frozen=True)
class Sizes:
    """How much each measurement runs."""

    decode_prompt: int  # prompt tokens before the batch-1 decode
    prefill_prompt: int  # prompt tokens of the prefill figure
    decode_tokens: int
    repeats: int
    streams: tuple[int, ...]
    stream_tokens: int
    rounds: int
    parity_tokens: int  # at most this many reference tokens per prompt


FULL = Sizes(200, 512, 128, 3, (1, 2, 4, 8, 16, 32, 64), 128, 2, 64)
QUICK = Sizes(128, 128, 16, 2, (1, 2, 4), 16, 1, 8)
FULL_PLAN = (("SmolLM2-135M", "float32"), ("SmolLM2-135M", "bfloat16"), ("SmolLM2-135M", "as-file"),
             ("gemma-3-270m", "bfloat16"), ("gemma-3-270m", "as-file"), "serving", ("SmolLM2-135M", "int8"),
             ("gemma-3-270m", "int8"), "devices")  # fmt: skip  # most wanted first: a short budget keeps those
QUICK_PLAN = (("SmolLM2-135M", "float32"), ("SmolLM2-135M", "as-file"), "serving")


class FloatParityError(Exception):
    """float32 on this device does not give the reference's greedy answers: nothing after it would mean much."""


class Record:
    """What was measured, written to `path` after every figure, and printed as Markdown rows as they come."""

    def __init__(self, path: Path, data: dict[str, Any]):
        self.path, self.data, self.started = path, data, time.perf_counter()
        self.headers: dict[str, str] = {}  # section -> its table's title and column lines
        self.printing = ""  # the section whose table the last rows went to
        path.parent.mkdir(parents=True, exist_ok=True)

    def table(self, section: str, title: str, columns: list[str]) -> None:
        """The table `section`'s rows go to (its header is printed again when rows of another came between)."""
        self.headers[section] = f"\n### {title}\n\n| {' | '.join(columns)} |\n|{'---|' * len(columns)}"
        self.printing = ""

    def add(self, section: str, row: dict[str, Any], cells: list[Any]) -> None:
        self.data.setdefault(section, []).append(row)
        if self.printing != section:
            print(self.headers[section], flush=True)
            self.printing = section
        print("| " + " | ".join(_cell(c) for c in cells) + " |", flush=True)
        self.save()

    def note(self, text: str) -> None:
        self.data.setdefault("notes", []).append(text)
        print(f"\n> {text}", flush=True)
        self.save()

    def save(self) -> None:
        self.data["run_s"] = time.perf_counter() - self.started
        self.path.write_text(json.dumps(self.data, indent=1, default=str))


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "-" if value != value else f"{value:.3g}" if abs(value) < 10 else f"{value:.0f}"
    return "-" if value is None else str(value)


def peak_bandwidth(kind: str, override: float | None) -> tuple[float | None, str]:
    """The card's peak memory bandwidth in GB/s and where the figure comes from ("unknown": None)."""
    if override:
        return override, "--bandwidth"
    found = next((gbps for pattern, gbps in PEAK_GBPS if re.search(pattern, kind.lower())), None)
    return found, "table" if found else "unknown"


def machine(args: argparse.Namespace) -> dict[str, Any]:
    device = jax.devices()[0]
    gbps, source = peak_bandwidth(device.device_kind, args.bandwidth)
    return {"backend": jax.default_backend(), "device_kind": device.device_kind, "devices": len(jax.devices()),
            "bandwidth_gbps": gbps, "bandwidth_source": source, "jax": jax.__version__}  # fmt: skip


def load(name: str, variant: str, **extra: Any) -> Any:
    """`load_model` of `name` as `variant` says; ChatflowError saying why when this checkout cannot."""
    dtype, weights = VARIANTS[variant]
    kwargs = {**({"weights": weights} if weights else {}), **extra}
    try:
        return load_model(MODELS[name](), dtype=dtype, **kwargs)
    except TypeError as error:  # a keyword this checkout's load_model does not take yet
        raise ChatflowError(f"load_model does not take {sorted(kwargs)} here ({error})") from None


def resident_bytes(model: Any) -> int:
    """The weight bytes the device holds (packed arrays and scales where the weights stay quantized)."""
    held = model.runner.weight_bytes
    return int(held() if callable(held) else held)


def streamed_share(path: Path) -> float:
    """The share of the weights a decode step reads: all of them when the head is the embedding (both models here);
    without the embedding table (one row is gathered) where the file has its own head (by parameter count)."""
    shapes = {t.name: math.prod(t.shape) for t in read_header(path).tensors}
    return 1 - shapes["token_embd.weight"] / sum(shapes.values()) if "output.weight" in shapes else 1.0


def kv_bytes_read(model: Any, position: int) -> int:
    """Keys and values a decode step reads at `position`: every layer's, each within its sliding window."""
    c, itemsize = model.config, jax.numpy.dtype(model.dtype).itemsize
    spans = [min(position, c.window_of(layer) or position) for layer in range(c.n_layers)]
    return 2 * c.n_kv_heads * c.head_dim * itemsize * sum(spans)


def reference(path: Path | None) -> dict[str, Any]:
    """The reference greedy answers: --reference, shared/reference, else our own float32 ones on the CPU."""
    found = [p for p in [path, *(r / "reference" / "greedy_f32.json" for r in REFERENCES)] if p and p.is_file()]
    if found:
        return {**json.loads(found[0].read_text()), "source": str(found[0])}
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "cpu.json"
        env = {**os.environ, "JAX_PLATFORMS": "cpu"}
        subprocess.run([sys.executable, __file__, "--cpu-reference", str(out)], check=True, env=env, timeout=300)
        return {**json.loads(out.read_text()), "source": "this checkout, float32 on the CPU (no shared/reference)"}


def cpu_reference(out: Path) -> None:
    """Our float32 greedy answers on the CPU in the reference's format (top5: [id, logprob, logprob]); the CPU's
    float32 equals transformers' greedy ids (tests/integration/test_real_model.py)."""
    model, prompts = load_model(dtype="float32"), []
    for question in ("What is the capital of France?", "Write a haiku about the sea.", "What is recursion?"):
        ids = model.tokenizer.apply_chat_template([{"role": "user", "content": question}])
        generation = model.generate(ids, max_tokens=40, temperature=0.0)
        steps = list(generation)
        greedy = [s.token_id for s in steps] + ([STOP_ID] if generation.finish_reason == "stop" else [])
        top = [[[a.token_id, a.logprob, a.logprob] for a in s.top_alternatives] for s in steps]
        prompts.append({"user": question, "prompt_ids": ids, "greedy_ids": greedy, "top5_per_step": top})
    out.write_text(json.dumps({"prompts": prompts}))


def agreed_prefix(prompt: dict[str, Any]) -> int:
    """Reference steps up to (and including) the first near-tie, where either answer is right."""
    ties = [i + 1 for i, top in enumerate(prompt["top5_per_step"]) if len(top) > 1 and top[0][1] - top[1][1] < NEAR_TIE]
    return min([*ties, len(prompt["greedy_ids"])])


def parity(model: Any, ref: dict[str, Any], sizes: Sizes) -> dict[str, Any]:
    """Greedy ids on this device against the reference's, per prompt: how many agree from the start."""
    prompts: list[dict[str, Any]] = []
    for prompt in ref["prompts"]:
        expected = prompt["greedy_ids"][: sizes.parity_tokens]
        generation = model.generate(prompt["prompt_ids"], max_tokens=len(expected), temperature=0.0)
        ours = [step.token_id for step in generation]
        ours += [STOP_ID] if generation.finish_reason == "stop" else []
        prompts.append({"agreed": same_prefix(ours, expected), "compared": len(expected),
                        "needed": min(agreed_prefix(prompt), len(expected)), "ours": ours})  # fmt: skip
    return {"agreed": sum(p["agreed"] for p in prompts), "compared": sum(p["compared"] for p in prompts),
            "exact": all(p["agreed"] >= p["needed"] for p in prompts), "prompts": prompts}  # fmt: skip


def first_token_s(model: Any, ids: list[int]) -> float:
    start = time.perf_counter()
    next(iter(model.generate(ids, max_tokens=1, temperature=0.0, ignore_eos=True)))
    return time.perf_counter() - start


def decode_tok_s(model: Any, ids: list[int], n: int) -> float:
    """(n - 1) tokens over the time from the first token to the last: decode only."""
    times = [time.perf_counter() for _ in model.generate(ids, max_tokens=n, temperature=0.0, ignore_eos=True)]
    return (len(times) - 1) / (times[-1] - times[0])


@contextlib.contextmanager
def compiling(seconds: list[float]) -> Iterator[None]:
    """Appends the seconds this thread spent compiling inside the block."""
    before = compile_seconds()
    yield
    seconds.append(compile_seconds() - before)


def speed(model: Any, text: str, sizes: Sizes, gbps: float | None) -> dict[str, Any]:
    """Compile seconds, then batch-1 decode and prefill (medians after a warm-up), and the bandwidth limit."""
    model.prompt_cache.max_bytes = 0  # every run computes its whole prompt
    ids, compiled = model.tokenizer.encode(text), list[float]()
    short, long = ids[: sizes.decode_prompt], ids[: sizes.prefill_prompt]
    with compiling(compiled):  # the prefill programs of both prompts' cache lengths
        first_token_s(model, long), first_token_s(model, short)
    with compiling(compiled):  # the decode step and its cache write
        decode_tok_s(model, short, sizes.decode_tokens)
    decode = [decode_tok_s(model, short, sizes.decode_tokens) for _ in range(sizes.repeats)]
    prefill = [first_token_s(model, long) for _ in range(sizes.repeats)]
    weights = resident_bytes(model)
    per_token = weights * streamed_share(model.path) + kv_bytes_read(model, len(short) + sizes.decode_tokens // 2)
    limit = gbps * 1e9 / per_token if gbps else None
    tok_s = statistics.median(decode)
    return {
        "dtype": str(model.dtype), "weights_format": getattr(model, "weights_format", "float"),
        "resident_weight_mib": weights / 2**20, "read_per_token_mib": per_token / 2**20, "limit_tok_s": limit,
        "decode_tok_s": tok_s, "of_limit": tok_s / limit if limit else None,
        "prefill_tok_s": len(long) / statistics.median(prefill), "prefill_tokens": len(long),
        "compile_prefill_s": compiled[0], "compile_decode_s": compiled[1],
        "samples": {"decode_tok_s": decode, "prefill_first_token_s": prefill},
    }  # fmt: skip


SPEED_COLUMNS = ["model", "weights", "dtype", "resident weights MiB", "read/token MiB", "limit tok/s", "decode tok/s",
                 "of limit", "prefill tok/s", "compile prefill s", "compile decode s"]  # fmt: skip


def speed_cells(row: dict[str, Any]) -> list[Any]:
    keys = ("resident_weight_mib", "read_per_token_mib", "limit_tok_s", "decode_tok_s", "of_limit", "prefill_tok_s",
            "compile_prefill_s", "compile_decode_s")  # fmt: skip
    return [row["model"], row["variant"], row.get("dtype"), *(row.get(k) for k in keys)]


def serving(record: Record, model: Any, sizes: Sizes, levels: tuple[int, ...], over: Callable[[], bool]) -> None:
    """Each level: a warm-up pass (its programs compile), then the median of `rounds` runs (bench_scheduler.py)."""
    model.prompt_cache.max_bytes = 0
    prompts = [model.tokenizer.apply_chat_template([{"role": "user", "content": q}]) for q in QUESTIONS]
    params = SamplingParams(temperature=0.0, max_tokens=sizes.stream_tokens, ignore_eos=True)
    warm = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    record.table("serving", f"Serving, {model.dtype} ({getattr(model, 'devices', 1)} device(s))",
                 ["streams", "aggregate tok/s", "per-stream tok/s", "TTFT ms", "step ms", "warm-up s"])  # fmt: skip
    with Scheduler(model, max_batch=max(levels)) as scheduler:
        for n in levels:
            if over():
                record.note(f"serving at {n} streams and more: skipped, out of the time budget")
                return
            start = time.perf_counter()
            run_level(scheduler, prompts_for(prompts, n), warm)
            warm_s = time.perf_counter() - start
            runs = [run_level(scheduler, prompts_for(prompts, n), params) for _ in range(sizes.rounds)]
            row = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            row |= {"per_stream_tok_s": 1000 / row["step_ms"], "warm_up_s": warm_s}
            cells = [n, row["aggregate_tokens_per_s"], row["per_stream_tok_s"], row["ttft_ms_median"], row["step_ms"]]
            record.add("serving", row, [*cells, warm_s])


def measure_variant(record: Record, name: str, variant: str, text: str, ref: dict, args: argparse.Namespace) -> None:
    """Load one model as one variant: the default model's parity first (float32 is the gate), then its speed."""
    try:
        model = load(name, variant)
    except ChatflowError as error:
        record.note(f"{name} {variant}: not measured: {error}")
        return
    if name == "SmolLM2-135M":
        full = variant == "float32" and jax.default_backend() != "cpu"  # (a GPU's default float32 dot is TF32)
        with jax.default_matmul_precision("highest") if full else contextlib.nullcontext():
            check = parity(model, ref, args.sizes)
        per_prompt = ", ".join(f"{p['agreed']}/{p['compared']}" for p in check["prompts"])
        record.add("parity", {"model": name, "variant": variant, **check},
                   [name, variant, f"{check['agreed']}/{check['compared']}", per_prompt, check["exact"]])  # fmt: skip
        if variant == "float32" and not check["exact"]:
            kind = record.data["machine"]["device_kind"]
            raise FloatParityError(
                f"float32 on {kind} disagrees with the reference before its first near-tie "
                f"({per_prompt}): the device path is wrong; stopped (see {record.path})"
            )
        model.runner.release_programs()  # the speed figures' compile seconds are of programs compiled for them
    row = {"model": name, "variant": variant, **speed(model, text, args.sizes, args.gbps)}
    record.add("speed", row, speed_cells(row))
    del model
    gc.collect()


def mesh(record: Record, text: str, args: argparse.Namespace, over: Callable[[], bool]) -> None:
    """bfloat16 over `--devices N` GPUs: batch 1, then the serving curve's first and last levels."""
    if args.devices < 2 or len(jax.devices()) < args.devices:
        record.note(f"--devices {args.devices}: skipped ({len(jax.devices())} device(s) here; it needs 2 or more)")
        return
    try:
        model = load("SmolLM2-135M", "bfloat16", devices=args.devices)
    except ChatflowError as error:
        record.note(f"--devices {args.devices}: not measured: {error}")
        return
    # (no bandwidth limit: what each device reads depends on what divides by N and is sharded, see engine/mesh.py)
    row = {"model": "SmolLM2-135M", "variant": f"bfloat16, {args.devices} devices",
           **speed(model, text, args.sizes, None)}  # fmt: skip
    record.add("speed", row, speed_cells(row))
    serving(record, model, args.sizes, (1, max(args.sizes.streams)), over)


def run(args: argparse.Namespace) -> int:
    quick = args.quick or jax.default_backend() == "cpu"
    args.sizes, plan = (QUICK, QUICK_PLAN) if quick else (FULL, FULL_PLAN)
    info = machine(args)
    args.gbps = info["bandwidth_gbps"]
    record = Record(args.out, {"date": datetime.date.today().isoformat(), "command": " ".join(["python", *sys.argv]),
                               "revision": git_revision(), "machine": info, "quick": quick,
                               "sizes": dataclasses.asdict(args.sizes)})  # fmt: skip
    gbps = f"{args.gbps:g} GB/s" if args.gbps else "unknown"
    print(f"{info['device_kind']} x{info['devices']} ({info['backend']}), peak bandwidth {gbps}; quick={quick}")
    ref = reference(args.reference)
    record.data["reference"] = ref["source"]
    text = Path(argparse.__file__).read_text(encoding="utf-8")[:8000]  # English and code, as bench_engine.py's
    over = lambda: time.perf_counter() - record.started > args.budget_s  # noqa: E731
    record.table("parity", "Greedy parity (default model)", ["model", "weights", "agree", "per prompt", "exact"])
    record.table("speed", "Batch 1", SPEED_COLUMNS)
    failed = 0
    for item in plan:
        try:
            if over():
                record.note(f"{item}: skipped, out of the time budget ({args.budget_s:.0f} s)")
            elif isinstance(item, tuple):
                measure_variant(record, *item, text, ref, args)
            elif item == "serving":
                model = load("SmolLM2-135M", "float32" if quick else "bfloat16")  # (float32: XLA:CPU's fast dtype)
                serving(record, model, args.sizes, args.sizes.streams, over)
            else:
                mesh(record, text, args, over)
        except FloatParityError as error:
            record.note(str(error))
            return 2
        except Exception as error:  # one broken item must not cost the figures of the others (a GPU's minutes)
            traceback.print_exc()
            record.note(f"{item}: failed: {type(error).__name__}: {error}")
            failed += 1
    record.note(f"done in {time.perf_counter() - record.started:.0f} s, {failed} item(s) failed; wrote {args.out}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the small version (automatic on the CPU backend)")
    parser.add_argument("--budget-s", type=float, default=420.0, help="skip what is left after this many seconds")
    parser.add_argument("--bandwidth", type=float, default=None, help="the card's peak memory bandwidth, GB/s")
    parser.add_argument("--devices", type=int, default=2, help="GPUs for the mesh item (skipped with fewer)")
    parser.add_argument("--reference", type=Path, default=None, help="greedy_f32.json (default: shared/reference)")
    parser.add_argument("--out", type=Path, default=Path("bench-results/gpu.json"), help="the JSON report")
    parser.add_argument("--cpu-reference", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cpu_reference:
        cpu_reference(args.cpu_reference)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
