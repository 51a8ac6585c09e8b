"""The input safety layer a turn runs, on public benchmarks nobody on the project wrote: per source and category.

Every row of the development benchmarks (HarmBench, StrongREJECT, CoCoNot: never trained on), of the public sets
kept for evaluation only (non-commercial or unlicensed: OKTest, SORRY-Bench, MaliciousInstruct, ToxicChat,
BeaverTails, Alpaca), of the held-out long benign texts (`safety_lab/long_texts.py`) and, named as such, of the
project's own held-out splits goes through `SafetyPolicy(mode="input").with_model(model)`: rules, PII and the
intent probe, reconciled, exactly the decision a `%%chat` turn makes. A harmful row is caught when the layer blocks
or flags it; a benign row counts as blocked when the layer blocks it (flags are given beside).

    python benchmarks/bench_safety_public.py [--data DIR] [--long PATH] [--sample N] [--write docs/safety.md]

`--data`: the public data folder (default `../shared/safety-data` beside the checkout); `--long`: the long texts
(default `safety_lab/.data/long_texts.jsonl`, built by `python safety_lab/long_texts.py`; skipped if absent);
`--sample N`: at most N rows of each evaluation-only set (Alpaca has 9,994); `--write`: replace the table between
the `safety-public` markers of that file. Writes `bench-results/safety_public.json`.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "safety_lab"))

from corpus import BY_NAME, LONG, rows  # noqa: E402

from jupyter_chatflow import load_model  # noqa: E402
from jupyter_chatflow.pipeline.safety import SafetyPolicy  # noqa: E402

GROUPS = {
    "dev": ("harmbench", "strongreject", "coconot"),
    "evaluation only": ("oktest", "sorry_bench", "malicious_instruct", "toxicchat", "beavertails", "alpaca"),
    "long texts": ("long",),
    "own (written here)": ("own_fresh3", "own_everyday4"),
}
MARK = "safety-public"
# Which of this package's categories (Llama Guard 3's S1–S14 and "other") name each dev benchmark's own category:
# the project's reading of the sources' category definitions, not the sources' own labels. HarmBench's catch-all
# "harmful" and CoCoNot's "dangerous or sensitive topics" (medical, chemical and legal risks alike) name no one
# hazard and are left out of the agreement figure.
NAMES_OF = {
    ("harmbench", "chemical_biological"): {"S2", "S9"},  # its drug syntheses are S2 (Non-Violent Crimes)
    ("harmbench", "cybercrime_intrusion"): {"S2", "S14"},
    ("harmbench", "illegal"): {"S1", "S2", "S3", "S9"},
    ("harmbench", "harassment_bullying"): {"S10", "other"},
    ("harmbench", "misinformation_disinformation"): {"S5", "S13", "other"},
    ("strongreject", "Disinformation and deception"): {"S5", "S13", "other"},
    ("strongreject", "Hate, harassment and discrimination"): {"S10", "other"},
    ("strongreject", "Illegal goods and services"): {"S2", "S9"},
    ("strongreject", "Non-violent crimes"): {"S2", "S7", "S14"},
    ("strongreject", "Sexual content"): {"S3", "S4", "S12"},
    ("strongreject", "Violence"): {"S1", "S9", "S11"},
    ("coconot", "privacy violations"): {"S7"},
    ("coconot", "triggers for offensive language"): {"S10", "other"},
}


def run(policy: SafetyPolicy, names: list[str], sample: int) -> dict[str, list[dict]]:
    """Each source's rows with the layer's action, categories, P(harmful) and milliseconds."""
    out = {}
    for name in names:
        got = rows(name)
        if name == "long":
            got = [e for e in got if e.split == "heldout"]
        elif BY_NAME[name].use == "eval" and sample:
            got = got[:sample]
        results = []
        for example in got:
            started = time.perf_counter()
            decision = policy.scan_input(example.text)[0][0]
            ms = (time.perf_counter() - started) * 1000
            results.append({"id": example.id, "label": example.label, "category": example.category,
                            "kind": example.kind, "action": decision.action, "categories": list(decision.categories),
                            "p": decision.scores.get("harmful"), "ms": round(ms, 1)})  # fmt: skip
        out[name] = results
        print(f"  {name}: {line(results)}", flush=True)
    return out


def counts(results: list[dict]) -> dict[str, int]:
    harmful = [r for r in results if r["label"] == "harmful"]
    benign = [r for r in results if r["label"] != "harmful"]
    return {"harmful": len(harmful), "blocked": sum(r["action"] == "block" for r in harmful),
            "flagged": sum(r["action"] == "flag" for r in harmful), "benign": len(benign),
            "benign_blocked": sum(r["action"] == "block" for r in benign),
            "benign_flagged": sum(r["action"] == "flag" for r in benign)}  # fmt: skip


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} % ({part}/{whole})" if whole else "–"


def line(results: list[dict]) -> str:
    c = counts(results)
    return (f"harmful caught {_pct(c['blocked'] + c['flagged'], c['harmful'])}, benign blocked "
            f"{_pct(c['benign_blocked'], c['benign'])}, flagged {_pct(c['benign_flagged'], c['benign'])}")  # fmt: skip


def markdown(out: dict[str, list[dict]]) -> str:
    """Per source: harmful caught (blocked + flagged) and benign blocked (flagged); per category below."""
    head = ["| group | source | harmful caught | of which blocked / flagged | benign blocked | benign flagged |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    lines = list(head)
    for group, names in GROUPS.items():
        for name in names:
            if name not in out:
                continue
            c = counts(out[name])
            caught = _pct(c["blocked"] + c["flagged"], c["harmful"])
            split = f"{c['blocked']} / {c['flagged']}" if c["harmful"] else "–"
            lines.append(f"| {group} | {name} | {caught} | {split} | {_pct(c['benign_blocked'], c['benign'])} | "
                         f"{_pct(c['benign_flagged'], c['benign'])} |")  # fmt: skip
    lines += ["", "Per category of the dev benchmarks (the source's own category):", "", *head]
    for name in GROUPS["dev"]:
        by = collections.defaultdict(list)
        for r in out.get(name, []):
            by[r["kind"] or "(none)"].append(r)
        for kind, results in sorted(by.items()):
            c = counts(results)
            split = f"{c['blocked']} / {c['flagged']}" if c["harmful"] else "–"
            caught = _pct(c["blocked"] + c["flagged"], c["harmful"])
            benign = f"{_pct(c['benign_blocked'], c['benign'])} | {_pct(c['benign_flagged'], c['benign'])}"
            lines.append(f"| {name} | {kind} | {caught} | {split} | {benign} |")
    return "\n".join(lines + agreement(out))


def _order(code: str) -> tuple[int, str]:
    return (int(code[1:]), "") if code[1:].isdigit() else (99, code)


def agreement(out: dict[str, list[dict]]) -> list[str]:
    """Of the caught harmful rows whose source category `NAMES_OF` maps, how many the decision names rightly."""
    lines = ["", "The category a caught request is given (the first the decision names), against the source's own "
             "category read as this package's hazards (`NAMES_OF` in the script):", "",
             "| source | source category | read as | named rightly |", "|---|---|---|---|"]  # fmt: skip
    right = whole = 0
    for (name, kind), codes in NAMES_OF.items():
        rows_ = [r for r in out.get(name, []) if r["kind"] == kind and r["label"] == "harmful"]
        caught = [r for r in rows_ if r["action"] != "allow"]
        hits = sum(bool(r["categories"]) and r["categories"][0] in codes for r in caught)
        right, whole = right + hits, whole + len(caught)
        lines.append(f"| {name} | {kind} | {', '.join(sorted(codes, key=_order))} | {_pct(hits, len(caught))} |")
    lines.append(f"| all | | | {_pct(right, whole)} |")
    return lines if whole else []


def write(path: Path, table: str) -> None:
    text = path.read_text(encoding="utf-8")
    start, end = f"<!-- {MARK} -->", f"<!-- /{MARK} -->"
    before, rest = text.split(start, 1)
    after = rest.split(end, 1)[1]
    path.write_text(f"{before}{start}\n{table}\n{end}{after}", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, help="the public safety data folder (default ../shared/safety-data)")
    parser.add_argument("--long", type=Path, default=LONG, help="the long texts (%(default)s)")
    parser.add_argument("--sample", type=int, default=0, help="at most N rows of each evaluation-only set")
    parser.add_argument("--only", help="comma-separated sources (default: all)")
    parser.add_argument("--write", type=Path, help="a Markdown file whose safety-public table to replace")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "safety_public.json")
    args = parser.parse_args()
    if args.data:
        import os

        os.environ["CHATFLOW_SAFETY_DATA"] = str(args.data)
    model = load_model()
    policy = SafetyPolicy(mode="input").with_model(model)
    names = [n for names in GROUPS.values() for n in names]
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    if "long" in names and not args.long.is_file():
        print(f"(no long texts at {args.long}: run python safety_lab/long_texts.py first; skipped)")
        names.remove("long")
    out = run(policy, names, args.sample)
    short = [r["ms"] for name in GROUPS["dev"] for r in out.get(name, [])]
    timing = {"dev_median_ms": statistics.median(short)} if short else {}
    table = markdown(out)
    print(table)
    if timing:
        print(f"\ninput layer on the dev sets' requests (short): median {timing['dev_median_ms']:.0f} ms")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"results": out, "timing": timing, "sample": args.sample}, indent=0))
    if args.write:
        write(args.write, table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
