"""What the attention heatmap shows: one layer's attention over a finished turn, cut to what the view asked for.

A turn's sequence is its final prompt (the last `tokenized` event) followed by the tokens generated after it.
`Model.attention` gives float16 [heads, T, T] for one layer; here it becomes a matrix the front end can draw:

- "tokens": query positions × key positions (a head, or the mean over heads), averaged over `pool × pool`
  blocks when a side is longer than `MAX_SIDE`, so a 4,000-token context arrives as 2,000 × 2,000;
- "segments": query positions × context segments (system, memory, history…, user, generated), each cell the
  attention mass on that segment: the overview for long contexts, from which a cell drills down into "tokens".
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from jupyter_chatflow.events import ContextAssembled, Event, TokenDelta, Tokenized

from .protocol import AttentionMessage, AttentionRequest

MAX_SIDE = 2048
MODES = ("tokens", "segments")


class AttentionRequestError(ValueError):
    """The view asked for something this turn does not have."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TurnSequence:
    """A turn's token sequence and its segments as column groups."""

    ids: list[int]
    prompt_tokens: int
    segments: list[dict[str, Any]]
    """[{label, kind, start, end}]: the prompt's segments in order, then "generated" (token ranges, first to last)."""
    column: np.ndarray
    """int32 [T]: which of `segments` each position belongs to."""


def turn_sequence(events: Sequence[Event]) -> TurnSequence:
    """The sequence the model read and wrote in its last round, from a turn's events."""
    tokenized = [i for i, e in enumerate(events) if isinstance(e, Tokenized)]
    if not tokenized:
        raise AttentionRequestError("This turn has no prompt (it ended before the model ran): nothing to show.")
    last = tokenized[-1]
    prompt_event = events[last]
    assert isinstance(prompt_event, Tokenized)
    context = next(e for e in reversed(events[:last]) if isinstance(e, ContextAssembled))
    prompt = list(prompt_event.ids)
    ids = prompt + [e.token_id for e in events[last:] if isinstance(e, TokenDelta)]
    column = np.full(len(ids), -1, np.int32)
    used: dict[int, int] = {}
    for run in prompt_event.provenance:
        used.setdefault(run.segment, len(used))
        column[run.start : run.end] = used[run.segment]
    segments = [_segment(context.segments[index].label, context.segments[index].kind, column == col)
                for index, col in used.items()]  # fmt: skip
    column[column < 0] = len(segments)
    segments.append(_segment("generated", "generated", column == len(segments)))
    return TurnSequence(ids=ids, prompt_tokens=len(prompt), segments=segments, column=column)


def _segment(label: str, kind: str, mask: np.ndarray) -> dict[str, Any]:
    where = np.flatnonzero(mask)
    start, end = (int(where[0]), int(where[-1]) + 1) if where.size else (0, 0)
    return {"label": label, "kind": kind, "start": start, "end": end}


def attention_map(
    attention: np.ndarray,
    sequence: TurnSequence,
    *,
    head: int,
    mode: str,
    rows_range=None,
    cols_range=None,
    window: int = 0,
) -> tuple[dict[str, Any], bytes]:
    """The message fields and the float16 little-endian matrix for one request (see js/README.md). `window` is the
    layer's sliding window (0: a global layer); it goes out with the matrix so the view can show where a sliding
    layer's window ends, since its zeros there are the mask's, not weights the model chose."""
    heads, total, _ = attention.shape
    if mode not in MODES:
        raise AttentionRequestError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not -1 <= head < heads:
        raise AttentionRequestError(f"head must be -1 (the mean) or in [0, {heads}), got {head}")
    r0, r1 = _range(rows_range, total, "rows_range")
    matrix = attention[head] if head >= 0 else attention.mean(axis=0, dtype=np.float32)
    if mode == "tokens":
        c0, c1 = _range(cols_range, total, "cols_range")
        pool = math.ceil(max(r1 - r0, c1 - c0) / MAX_SIDE)
        out = block_mean(np.asarray(matrix[r0:r1, c0:c1], np.float32), pool)
    else:
        c0, c1 = 0, len(sequence.segments)
        pool = math.ceil((r1 - r0) / MAX_SIDE)
        out = block_mean(segment_mass(np.asarray(matrix[r0:r1], np.float32), sequence.column, c1), pool, cols=False)
    meta = {
        "mode": mode, "head": head, "shape": list(out.shape), "dtype": "float16", "tokens": total,
        "prompt_tokens": sequence.prompt_tokens, "pool": pool, "rows_range": [r0, r1], "cols_range": [c0, c1],
        "segments": sequence.segments, "window": window,
    }  # fmt: skip
    return meta, out.astype("<f2").tobytes()


def segment_mass(rows: np.ndarray, column: np.ndarray, count: int) -> np.ndarray:
    """float32 [R, count]: each row's attention summed over the positions of each segment."""
    onehot = np.zeros((column.size, count), np.float32)
    onehot[np.arange(column.size), column] = 1.0
    return rows @ onehot


def block_mean(matrix: np.ndarray, pool: int, cols: bool = True) -> np.ndarray:
    """Average `pool × pool` blocks (or `pool × 1` with cols=False); edge blocks average what they cover."""
    if pool <= 1:
        return matrix
    r, c = matrix.shape
    cp = pool if cols else 1
    padded = np.zeros((math.ceil(r / pool) * pool, math.ceil(c / cp) * cp), np.float32)
    padded[:r, :c] = matrix
    counts = np.zeros_like(padded)
    counts[:r, :c] = 1.0
    shape = (padded.shape[0] // pool, pool, padded.shape[1] // cp, cp)
    sums, sizes = padded.reshape(shape).sum(axis=(1, 3)), counts.reshape(shape).sum(axis=(1, 3))
    return sums / np.maximum(sizes, 1.0)


def _range(value: Sequence[int] | None, total: int, name: str) -> tuple[int, int]:
    if value is None:
        return 0, total
    start, end = (int(v) for v in value)
    if not 0 <= start < end <= total:
        raise AttentionRequestError(f"{name} must lie within [0, {total}] and not be empty, got {list(value)}")
    return start, end


class LayerAttention:
    """The panel's attention requests: the last layer computed over a turn is kept, since the view asks for its
    heads, modes and ranges in turn; a request for another layer or turn frees it before computing the next."""

    def __init__(self) -> None:
        self._kept: tuple[tuple[str, int], Any] | None = None

    def reply(self, model: Any, message: AttentionRequest, events: list[Event]) -> tuple[AttentionMessage, bytes]:
        """On the engine thread: the message to send and its buffer, for the request `message` over `events`."""
        sequence = turn_sequence(events)
        layer = message["layer"]
        key = (message["turn_id"], layer)
        if self._kept is None or self._kept[0] != key:
            self._kept = None  # free the last one before computing the next
            self._kept = (key, model.attention(sequence.ids, layer))
        meta, data = attention_map(
            self._kept[1], sequence, head=message["head"], mode=message["mode"], rows_range=message["rows_range"],
            cols_range=message["cols_range"], window=model.config.window_of(layer),
        )  # fmt: skip
        reply = {"type": "attention", "request_id": message["request_id"], "turn_id": key[0], "layer": layer}
        return cast(AttentionMessage, {**reply, **meta}), data
