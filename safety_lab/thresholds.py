"""Choose the probe's block threshold, flag threshold and veto floor on leave-one-source-out scores.

The input layer joins the probe and the hazard frames (`intent.reconcile`): the probe blocks at P(harmful) >=
`block`, flags at >= `flag`; a frame's block stands where P >= `veto`, else it is lowered to a flag. Each choice is
made on the scores of public training sources each scored by a probe that never saw it (`train_probe.py --loso`),
and on which frames fire on those rows (`frame_hits.py`); the dev sets are never read here.

- `block`: the lowest threshold at which the layer blocks at most `MAX_LOOKALIKE` of the benign rows of every source
  that has look-alikes (WildGuardMix, the OpenAI moderation set, Aegis) and at most `MAX_EVERYDAY` of Dolly's
  everyday questions;
- `flag`: the lowest at which at most `MAX_FLAGGED_EVERYDAY` of Dolly's questions are flagged;
- `veto`: the lowest floor (at least `flag`) at which the frames' blocks keep the look-alike caps.

    python safety_lab/thresholds.py SCORES.json [OUT.json]     # OUT: safety_lab/.data/thresholds.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from corpus import ROOT

GRID = tuple(round(0.3 + 0.025 * i, 3) for i in range(28))  # 0.3 … 0.975
LOOKALIKE = ("wildguardmix", "openai_moderation", "aegis")
EVERYDAY = "dolly"
MAX_LOOKALIKE = 0.04
MAX_EVERYDAY = 0.005
MAX_FLAGGED_EVERYDAY = 0.02
FRAMES = ROOT / ".data" / "frame_hits.json"


def framed(loso: dict) -> dict[str, np.ndarray]:
    """Per LOSO source, whether a blocking hazard frame (not S6's, which flag) fired on each row."""
    hits = json.loads(FRAMES.read_text())
    fired = {key for frame, got in hits.items() if not frame.startswith("S6 ") for ids in got.values() for key in ids}
    return {name: np.array([f"{name}:{i}" in fired for i in got["id"]]) for name, got in loso.items()}


def actions(p: np.ndarray, frame: np.ndarray, block: float, flag: float, veto: float) -> tuple[np.ndarray, np.ndarray]:
    """(blocked, caught = blocked or flagged) of each row."""
    blocked = (p >= block) | (frame & (p >= veto))
    return blocked, blocked | (p >= flag) | frame


def choose(loso: dict) -> dict[str, float]:
    frames = framed(loso)
    p = {n: np.array(g["mean"]) for n, g in loso.items()}
    harm = {n: np.array(g["label"]) == "harmful" for n, g in loso.items()}

    def blocked_rate(name: str, block: float, veto: float) -> float:
        b, _ = actions(p[name], frames[name], block, block, veto)
        return float(b[~harm[name]].mean())

    def ok(block: float, veto: float) -> bool:
        return (
            all(blocked_rate(n, block, veto) <= MAX_LOOKALIKE for n in LOOKALIKE)
            and blocked_rate(EVERYDAY, block, veto) <= MAX_EVERYDAY
        )

    block = next(t for t in GRID if ok(t, 1.0))
    flag = next(t for t in GRID if (p[EVERYDAY][~harm[EVERYDAY]] >= t).mean() <= MAX_FLAGGED_EVERYDAY)
    flag = min(flag, block)
    veto = next((t for t in GRID if flag <= t <= block and ok(block, t)), block)
    return {"block": block, "flag": flag, "veto": veto}


def report(loso: dict, chosen: dict[str, float]) -> list[str]:
    frames = framed(loso)
    lines = []
    for name, got in loso.items():
        p, harm = np.array(got["mean"]), np.array(got["label"]) == "harmful"
        b, c = actions(p, frames[name], chosen["block"], chosen["flag"], chosen["veto"])
        parts = [f"{name:18}"]
        if harm.any():
            parts.append(f"harmful caught {c[harm].mean():.3f} (blocked {b[harm].mean():.3f}) of {harm.sum()}")
        if (~harm).any():
            parts.append(f"benign blocked {b[~harm].mean():.3f}, flagged {c[~harm].mean():.3f} of {(~harm).sum()}")
        lines.append("  ".join(parts))
    return lines


def main(argv: list[str] | None = None) -> int:
    args = argv or sys.argv[1:]
    loso = json.loads(Path(args[0]).read_text())["loso"]
    chosen = choose(loso)
    out = Path(args[1]) if len(args) > 1 else ROOT / ".data" / "thresholds.json"
    out.write_text(json.dumps(chosen))
    print(chosen, f"(written to {out})")
    print("\n".join(report(loso, chosen)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
