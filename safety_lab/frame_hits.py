"""Which hazard frames fire on which public rows: each frame's hits on harmful requests and on benign ones.

A frame that blocks benign requests in sources nobody here wrote is imprecise: `frame_precision.json` is what
`rules_audit` (below) reads to turn such frames into flags. Rows of the `dev` sources are never read here (they stay
unseen by every choice the lab makes).

    python safety_lab/frame_hits.py [--out safety_lab/.data/frame_hits.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

from corpus import ROOT, SOURCES, rows

from jupyter_chatflow.pipeline.safety.frames import match
from jupyter_chatflow.pipeline.safety.hazards import HAZARD_FRAMES

OUT = ROOT / ".data" / "frame_hits.json"


def hits(names: list[str]) -> dict[str, dict[str, list[str]]]:
    """Per frame ("S1 violence against a person"), the ids of the rows it fired on, by label."""
    found: dict[str, dict[str, list[str]]] = collections.defaultdict(lambda: {"harmful": [], "benign": []})
    for name in names:
        for example in rows(name):
            for frame in {f"{h.frame.category} {h.frame.name}" for h in match(example.text, HAZARD_FRAMES)}:
                found[frame][example.label].append(f"{example.source}:{example.id}")
    return dict(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    names = [s.name for s in SOURCES if s.use in ("train", "eval")]
    result = hits(names)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=0))
    for frame, got in sorted(result.items(), key=lambda kv: -len(kv[1]["benign"])):
        print(f"{len(got['harmful']):5d} harmful {len(got['benign']):5d} benign  {frame}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
