"""Every notebook on a fresh kernel: its run time and the kernel's peak resident memory.

Binder gives a user 1-2 GiB in all (Jupyter and the kernel), so what counts is the peak of the kernel process that
ran a chapter. Each notebook (by default `examples/quickstart.ipynb` and every `examples/tour/NN*_*.ipynb`) is
executed top to bottom with nbclient in a kernel of its own. The kernel's peak so far (VmHWM from
/proc/<kernel pid>/status) is read after every cell and once more just before the kernel is shut down (a turn
can run on past its cell); a thread also samples its resident set (VmRSS) every `--interval` seconds. The peak
reported is the highest of these. Outputs are thrown away (nothing is written back), and the kernels use a
scratch history database, not the user's.

    python benchmarks/bench_tour.py [NOTEBOOK ...] [--limit-mib 1536] [--out bench-results/tour.json]

Exits 1 when a notebook fails or a kernel's peak passes `--limit-mib`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
KIB_PER_MIB = 1024
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def default_notebooks() -> list[Path]:
    """The quickstart, then the tour's chapters in order."""
    return [EXAMPLES / "quickstart.ipynb", *sorted((EXAMPLES / "tour").glob("[0-9][0-9]*_*.ipynb"))]


def status_mib(pid: int) -> dict[str, float]:
    """VmRSS, VmHWM and RssAnon of a process (MiB); empty once it is gone."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    fields = (line.split(":", 1) for line in lines)
    return {k: int(v.split()[0]) / KIB_PER_MIB for k, v in fields if k in ("VmRSS", "VmHWM", "RssAnon")}


@dataclasses.dataclass
class Watch:
    """The kernel's memory as the notebook runs: a sampled RSS, and its peak after each cell."""

    interval: float
    pid: int | None = None
    samples: list[tuple[float, float, float]] = dataclasses.field(default_factory=list)  # (seconds, RSS, anon MiB)
    cell_peaks: list[tuple[int, float]] = dataclasses.field(default_factory=list)  # (cell index, VmHWM MiB)
    final_peak: float | None = None  # VmHWM just before the kernel is shut down (turns may run past their cell)
    started: float = dataclasses.field(default_factory=time.perf_counter)
    _stop: threading.Event = dataclasses.field(default_factory=threading.Event)

    def start(self, pid: int) -> None:
        self.pid = pid
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            status = status_mib(self.pid) if self.pid else {}
            if "VmRSS" in status:
                self.samples.append((time.perf_counter() - self.started, status["VmRSS"], status["RssAnon"]))

    def after_cell(self, index: int) -> None:
        peak = status_mib(self.pid).get("VmHWM") if self.pid else None
        if peak is not None:
            self.cell_peaks.append((index, peak))

    def before_shutdown(self) -> None:
        self.final_peak = status_mib(self.pid).get("VmHWM") if self.pid else None

    def stop(self) -> None:
        self._stop.set()

    def summary(self) -> dict[str, Any]:
        peaks = [p for _, p in self.cell_peaks]
        rises = [(p - before, i) for (i, p), before in zip(self.cell_peaks, [0.0, *peaks], strict=False)]
        rss, anon = [r for _, r, _ in self.samples], [a for _, _, a in self.samples]
        every = [*peaks, *rss, *([self.final_peak] if self.final_peak is not None else [])]
        return {
            "peak_mib": round(max(every), 1) if every else None,
            "peak_before_shutdown_mib": self.final_peak,
            "max_sampled_rss_mib": round(max(rss), 1) if rss else None,
            "max_sampled_anon_mib": round(max(anon), 1) if anon else None,
            "last_rss_mib": round(rss[-1], 1) if rss else None,
            "peak_raised_most_by_cell": max(rises)[1] if rises else None,
            "peak_after_cell": [[i, round(p, 1)] for i, p in self.cell_peaks],
            "rss_samples": [
                [round(t, 2), round(r, 1), round(a, 1)] for t, r, a in self.samples[:: max(1, len(self.samples) // 200)]
            ],
        }


def run_notebook(path: Path, *, timeout: int, interval: float) -> dict[str, Any]:
    """Execute one notebook on a fresh kernel; its wall time and the kernel's memory."""
    notebook = nbformat.read(path, as_version=4)
    watch = Watch(interval)
    client = _Client(
        notebook, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.before_shutdown = watch.before_shutdown
    client.on_notebook_start = lambda **_: watch.start(client.km.provisioner.pid)
    client.on_cell_executed = lambda cell_index, **_: watch.after_cell(cell_index)
    started = time.perf_counter()
    error = None
    try:
        client.execute()
    except Exception as exc:  # a failing cell: reported, and the run goes on with the next notebook
        last = ANSI.sub("", str(exc)).strip().splitlines()[-1:]  # a CellExecutionError ends with the cell's error
        error = f"{type(exc).__name__}: {last[0] if last else ''}"
    finally:
        watch.stop()
    code_cells = sum(c.cell_type == "code" for c in notebook.cells)
    return {
        "notebook": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
        "wall_s": round(time.perf_counter() - started, 1),
        "code_cells": code_cells,
        "error": error,
        **watch.summary(),
    }


class _Client(nbclient.NotebookClient):
    """Calls `before_shutdown()` as the last cell is done and the kernel is about to be shut down."""

    before_shutdown: Any = None

    async def _async_cleanup_kernel(self) -> None:
        if self.before_shutdown is not None:
            self.before_shutdown()
        await super()._async_cleanup_kernel()


def table(rows: list[dict[str, Any]], limit: float | None) -> str:
    header = [
        "notebook",
        "wall s",
        "peak MiB",
        "max sampled RSS",
        "max sampled anon",
        "cell raising peak most",
        "status",
    ]
    lines = [header]
    for row in rows:
        over = limit is not None and row["peak_mib"] is not None and row["peak_mib"] > limit
        status = "error: " + row["error"] if row["error"] else ("OVER LIMIT" if over else "ok")
        lines.append([row["notebook"], f"{row['wall_s']:.1f}", _mib(row["peak_mib"]),
                      _mib(row["max_sampled_rss_mib"]), _mib(row["max_sampled_anon_mib"]),
                      str(row["peak_raised_most_by_cell"]), status])  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines)


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: the quickstart and every tour chapter")
    parser.add_argument("--limit-mib", type=float, help="fail (exit 1) when a kernel's peak passes this")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "tour.json")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a cell may run")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between RSS samples")
    args = parser.parse_args()
    notebooks = [p.resolve() for p in args.notebooks] or default_notebooks()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        os.environ.setdefault("CHATFLOW_DB", str(Path(scratch) / "bench_tour.db"))  # not the user's history
        for path in notebooks:
            row = run_notebook(path, timeout=args.timeout, interval=args.interval)
            rows.append(row)
            print(f"{row['notebook']}: {row['wall_s']:.1f} s, peak {_mib(row['peak_mib'])} MiB"
                  + (f", {row['error']}" if row["error"] else ""), flush=True)  # fmt: skip
    print()
    print(table(rows, args.limit_mib))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"limit_mib": args.limit_mib, "cpus": os.cpu_count(), "python": platform.python_version(),
            "when": time.strftime("%Y-%m-%d %H:%M:%S")}  # fmt: skip
    args.out.write_text(json.dumps({"meta": meta, "notebooks": rows}, indent=1))
    failed = [r for r in rows if r["error"]]
    over = [r for r in rows if args.limit_mib is not None and (r["peak_mib"] or 0) > args.limit_mib]
    if over:
        print(f"\n{len(over)} kernel(s) peaked above {args.limit_mib:,.0f} MiB", file=sys.stderr)
    return 1 if failed or over else 0


if __name__ == "__main__":
    sys.exit(main())
