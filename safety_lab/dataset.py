"""Rows and their cached features together: what the lab fits and scores (`features.py` computes the cache).

`table(names, model_key)` gives, for the sources named, the examples and their window features; `aggregate` turns
a row's windows into what a probe reads of the whole text (`Reading`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
from corpus import BY_NAME, Example, path_of, rows
from features import CACHE, load


@dataclasses.dataclass(frozen=True)
class Table:
    """Examples with their windows' features: `windows[starts[i]:starts[i + 1]]` are example i's."""

    examples: list[Example]
    starts: np.ndarray
    windows: np.ndarray  # float16 [windows, features]

    def mean(self) -> np.ndarray:
        """Each example's windows averaged: [n, features] float32."""
        sums = np.add.reduceat(self.windows.astype(np.float32), self.starts[:-1], axis=0)
        return sums / np.diff(self.starts)[:, None]

    def select(self, keep: Sequence[int]) -> Table:
        parts = [self.windows[self.starts[i] : self.starts[i + 1]] for i in keep]
        starts = np.concatenate([[0], np.cumsum([len(p) for p in parts])])
        return Table([self.examples[i] for i in keep], starts, np.concatenate(parts))


def table(names: Sequence[str], key: str, cache=CACHE) -> Table:
    """The examples of the sources `names` with their cached windows (a source's file stem names its cache)."""
    examples, starts, windows = [], [0], []
    for name in names:
        stem = path_of(BY_NAME[name]).stem
        ids, file_starts, feats = load(key, stem, cache)
        got = rows(name)
        by_id = {i: n for n, i in enumerate(ids)}
        for example in got:
            n = by_id[example.id]
            examples.append(example)
            windows.append(feats[file_starts[n] : file_starts[n + 1]])
            starts.append(starts[-1] + len(windows[-1]))
    return Table(examples, np.array(starts), np.concatenate(windows))
