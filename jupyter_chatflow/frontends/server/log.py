"""One JSON line per request on the `jupyter_chatflow.server` logger: who (a hashed key id), what, how it went.

Never the prompt, the answer or a key: only ids, counts and timings.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from typing import Any

LOGGER = logging.getLogger("jupyter_chatflow.server")


@dataclasses.dataclass
class RequestRecord:
    """What the request's handlers learned about it, for its log line."""

    request_id: str
    method: str
    path: str
    started: float = dataclasses.field(default_factory=time.perf_counter)
    key_id: str = ""
    model: str = ""
    status: int = 0
    stream: bool | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    queue_ms: float | None = None
    prefill_ms: float | None = None
    decode_ms: float | None = None
    error: str | None = None  # the error's code or type, never its text (which may quote the request)

    def line(self) -> str:
        """The record as one JSON line, empty fields left out."""
        fields: dict[str, Any] = {"event": "request"} | {
            k: v for k, v in dataclasses.asdict(self).items() if v not in (None, "") and k != "started"
        }
        fields["total_ms"] = round((time.perf_counter() - self.started) * 1000, 1)
        for name in ("queue_ms", "prefill_ms", "decode_ms"):
            if name in fields:
                fields[name] = round(fields[name], 1)
        return json.dumps(fields, separators=(",", ":"))


def write(record: RequestRecord) -> None:
    """Log the request's line (level INFO)."""
    LOGGER.info(record.line())


def setup(level: int = logging.INFO) -> None:
    """Send the server's lines to stderr as they are (no prefix), for `chatflow serve`."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    LOGGER.addHandler(handler)
    LOGGER.setLevel(level)
    LOGGER.propagate = False
