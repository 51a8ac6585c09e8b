"""What the intent probe reads of each row of a data file, computed once and kept: the lab's feature cache.

For every text, each window of it (as `probe.prompt_reading` cuts it: the text as the user's message in the chat
template, at most `probe.MAX_WINDOWS` windows) is read once through the model's first `max(MEANS + LASTS)` layers,
and kept: the mean states over the text's tokens at each of `MEANS`, and the state at the prompt's last token at
each of `LASTS`, side by side, float16 [windows, (len(MEANS) + len(LASTS)) x d]. A probe over any subset of these
layers is then fitted and compared without running the model again (`columns`).

A window runs at the narrowest of the widths 64 and 128 that holds it, as in a chat (the padding changes no state).

    python safety_lab/features.py FILE.jsonl [FILE.jsonl ...] [--cache DIR]

Each file's features go to `<cache>/<model key>/<file stem>.npz` (`ids`, `starts`: each row's first window,
`features`); a file already there is skipped, so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jupyter_chatflow.pipeline.safety.intent import model_key
from jupyter_chatflow.pipeline.safety.probe import prompt_reading

MEANS = (4, 8, 12, 16, 20)
LASTS = (8, 12, 16, 20)
CACHE = Path(__file__).resolve().parent / ".features"


def read(model: Any, text: str) -> np.ndarray:
    """Every window of `text` as the run time reads it (`probe.prompt_reading`), at all of `MEANS` and `LASTS`:
    float16 [windows, (len(MEANS) + len(LASTS)) x d]."""
    return prompt_reading(model, text, MEANS, LASTS).astype(np.float16)


def columns(d: int, means: Sequence[int] = MEANS, lasts: Sequence[int] = LASTS) -> np.ndarray:
    """The feature columns of the cache that hold the means at `means` and the last states at `lasts`, in order."""
    blocks = [MEANS.index(n) for n in means] + [len(MEANS) + LASTS.index(n) for n in lasts]
    return np.concatenate([np.arange(b * d, (b + 1) * d) for b in blocks])


def extract(model: Any, path: Path, out: Path, *, log: Any = print) -> None:
    """Read every row of the JSON-lines file `path` (`id`, `text`) and write its features to `out`."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    feats, starts, started = [], [0], time.perf_counter()
    for index, row in enumerate(rows):
        feats.append(read(model, row["text"]))
        starts.append(starts[-1] + len(feats[-1]))
        if index % 500 == 499:
            log(f"  {path.name}: {index + 1}/{len(rows)} in {time.perf_counter() - started:.0f} s")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp.npz")
    np.savez(tmp, ids=np.array([r["id"] for r in rows]), starts=np.array(starts, np.int64),
             features=np.concatenate(feats))  # fmt: skip
    tmp.replace(out)
    log(f"{path.name}: {len(rows)} rows, {starts[-1]} windows, {time.perf_counter() - started:.0f} s")


def load(model_name: str, stem: str, cache: Path = CACHE) -> tuple[list[str], np.ndarray, np.ndarray]:
    """A file's cached (ids, starts, features)."""
    with np.load(cache / model_name / f"{stem}.npz") as data:
        return [str(i) for i in data["ids"]], data["starts"], data["features"]


def main(argv: Sequence[str] | None = None) -> int:
    from jupyter_chatflow import load_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--model", help="a GGUF file or a known model's name (default: the default model)")
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args(argv)
    model = load_model(args.model)
    key = model_key(model)
    for path in args.files:
        out = args.cache / key / f"{path.stem}.npz"
        if out.is_file():
            print(f"{path.name}: cached")
            continue
        extract(model, path, out, log=lambda s: print(s, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
