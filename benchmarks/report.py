"""The benchmark's report: the table of figures, ratios ours / peer, targets, and noisy figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

SHORT_TOKENS, LONG_TOKENS = 200, 2000
TARGET_COLD_S, TARGET_WARM_S = 15.0, 3.0


class Row(NamedTuple):
    label: str
    key: str
    fmt: str
    better: str  # "lower" or "higher"; "" for information only
    ratio: bool = True  # False where the peer's figure is about zero, so ours / peer means nothing


ROWS = (
    Row("load: file -> ready model, cold (s)", "load_s", "{:.2f}", "lower"),
    Row("load: warm caches (s)", "warm_load_s", "{:.2f}", "lower"),
    Row("first compile (s)", "first_compile_s", "{:.2f}", "lower", ratio=False),
    Row("cold start: spawn -> 1st token (s)", "cold_start_s", "{:.2f}", "lower"),
    Row("warm start: spawn -> 1st token (s)", "warm_start_s", "{:.2f}", "lower"),
    Row(f"prefill {SHORT_TOKENS} tokens (tok/s)", "prefill_short_tok_s", "{:.0f}", "higher"),
    Row(f"prefill {LONG_TOKENS} tokens (tok/s)", "prefill_long_tok_s", "{:.0f}", "higher"),
    Row(f"time to first token, {SHORT_TOKENS}-token prompt (ms)", "ttft_short_ms", "{:.0f}", "lower"),
    Row("decode, batch 1 (tok/s)", "decode_tok_s", "{:.1f}", "higher"),
    Row("peak RSS, benchmark worker (MiB)", "peak_rss_mib", "{:.0f}", "lower"),
    Row("peak RSS, warm start to 1st token (MiB)", "chat_peak_rss_mib", "{:.0f}", "lower"),
    Row("greedy ids equal to ours (prefix)", "same_prefix", "{:d}", "", ratio=False),
)


def ratios(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """ours / peer for every figure both engines have (none without ours)."""
    ours = results.get("ours", {})
    if not ours or "error" in ours:
        return {}
    return {name: _ratio(ours, peer) for name, peer in results.items() if name != "ours" and "error" not in peer}


def _ratio(ours: dict[str, Any], peer: dict[str, Any]) -> dict[str, float]:
    keys = [row.key for row in ROWS if row.ratio]
    number = (int, float)
    return {k: ours[k] / peer[k] for k in keys if isinstance(ours.get(k), number) and isinstance(peer.get(k), number)}


def cell(figures: dict[str, Any], key: str, fmt: str) -> str:
    value = figures.get(key)
    return fmt.format(value) if isinstance(value, (int, float)) and value == value else "-"


def table(results: dict[str, dict[str, Any]], ratio: dict[str, dict[str, float]]) -> str:
    """Plain text: one row per figure, one column per engine, then ours / peer and which way is better."""
    engines = [name for name in results if "error" not in results[name]]
    rows = [["figure", *engines, *(f"ours/{peer}" for peer in ratio), "better"]]
    for row in ROWS:
        ratio_cells = [cell(ratio[peer], row.key, "{:.2f}x") for peer in ratio]
        rows.append([row.label, *(cell(results[name], row.key, row.fmt) for name in engines), *ratio_cells, row.better])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join([row[0].ljust(widths[0]), *(text.rjust(w) for text, w in zip(row[1:], widths[1:], strict=True))])
        for row in rows
    )


def targets(ours: dict[str, Any]) -> list[str]:
    """Our start-up figures against the project's targets."""
    lines = []
    for key, limit, caches in (("cold_start_s", TARGET_COLD_S, "empty"), ("warm_start_s", TARGET_WARM_S, "warm")):
        value = ours.get(key)
        verdict = "not measured" if value is None else f"{value:.2f} s, {'met' if value <= limit else 'MISSED'}"
        lines.append(f"target: a fresh process's first token within {limit:g} s with {caches} caches: {verdict}")
    return lines


def noisy(results: dict[str, dict[str, Any]], spread: float = 1.25) -> list[str]:
    """Warnings for repeated timings that disagree (slowest / fastest above `spread`): the CPU was shared."""
    lines = []
    for name, figures in results.items():
        for key, samples in figures.get("samples", {}).items():
            if isinstance(samples, list) and min(samples) > 0 and max(samples) / min(samples) > spread:
                values = ", ".join(f"{value:.3g}" for value in samples)
                lines.append(f"noisy: {name} {key} = [{values}]; rerun when the machine is quiet")
    return lines


def report(summary: dict[str, Any]) -> str:
    results = summary["results"]
    lines = [f"{Path(summary['model']).name} on {summary['machine']['cpu']}, {summary['threads']} threads", ""]
    lines += [table(results, summary["ratios"]), "", "ratio = ours / peer; 'better' says which way is better", ""]
    lines += [f"skipped {name}: {reason}" for name, reason in summary["skipped"].items()]
    lines += [f"failed {name}: {figures['error']}" for name, figures in results.items() if "error" in figures]
    loads = {name: figures["load_average"] for name, figures in results.items() if "load_average" in figures}
    lines += [f"load average (1 min) before/after {name}: {a:.1f} / {b:.1f}" for name, (a, b) in loads.items()]
    lines += noisy(results)
    lines += [*targets(results.get("ours", {})), f"run took {summary['run_s']:.0f} s"]
    return "\n".join(lines)
