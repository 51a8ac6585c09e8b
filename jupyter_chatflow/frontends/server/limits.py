"""Per-key rate limits over a sliding minute: requests (--rate-limit) and tokens (--token-limit).

Every answer to a limited route carries OpenAI's headers (`x-ratelimit-limit-requests`, `-remaining-requests`,
`-reset-requests` and the same for `-tokens`); past a limit the request gets 429 with `Retry-After`. A request is
let in while the key's tokens of the last minute are under the limit; its tokens (prompt + completion) count once
it ends.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from collections.abc import Callable

from .errors import APIError

WINDOW_S = 60.0


class _Window:
    """Amounts spent in the last minute, oldest first."""

    def __init__(self) -> None:
        self.spent: collections.deque[tuple[float, int]] = collections.deque()

    def total(self, now: float) -> int:
        while self.spent and self.spent[0][0] <= now - WINDOW_S:
            self.spent.popleft()
        return sum(amount for _, amount in self.spent)

    def reset_s(self, now: float) -> float:
        """Seconds until the window is empty again (its newest amount leaves it)."""
        return max(0.0, self.spent[-1][0] + WINDOW_S - now) if self.total(now) else 0.0

    def wait_s(self, now: float, limit: int) -> float:
        """Seconds until the window is back under `limit` (0 if it is)."""
        total = self.total(now)
        for when, amount in self.spent:
            if total < limit:
                break
            total -= amount
            if total < limit:
                return max(0.0, when + WINDOW_S - now)
        return 0.0


class Limiter:
    """Counts each key's requests and tokens; `admit` lets a request in or raises 429."""

    def __init__(self, requests: int | None, tokens: int | None, clock: Callable[[], float] = time.monotonic):
        self.requests = requests
        self.tokens = tokens
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: dict[tuple[str, str], _Window] = collections.defaultdict(_Window)

    def admit(self, key: str) -> dict[str, str]:
        """Count one request of `key` and return the rate-limit headers; 429 (with them) past a limit."""
        with self._lock:
            now = self._clock()
            over = self._over(key, now)
            if not over:
                self._windows[(key, "requests")].spent.append((now, 1))
            headers = self._headers(key, now)
        if over:
            kinds, retry = " and ".join(f"{limit} {kind}" for kind, limit, _ in over), max(w for *_, w in over)
            retry_s = str(max(1, math.ceil(retry)))
            raise APIError(
                429, f"Rate limit reached: {kinds} per minute for this key. Retry after {retry_s} s.",
                type=over[0][0], code="rate_limit_exceeded", headers=headers | {"Retry-After": retry_s},
            )  # fmt: skip
        return headers

    def spend_tokens(self, key: str, tokens: int) -> None:
        """Count a finished request's tokens."""
        if self.tokens is not None and tokens > 0:
            with self._lock:
                self._windows[(key, "tokens")].spent.append((self._clock(), tokens))

    def _over(self, key: str, now: float) -> list[tuple[str, int, float]]:
        """(kind, limit, seconds to wait) of each limit `key` is at: a retry must wait for all of them."""
        over = []
        for kind, limit in (("requests", self.requests), ("tokens", self.tokens)):
            window = self._windows[(key, kind)]
            if limit is not None and window.total(now) >= limit:
                over.append((kind, limit, window.wait_s(now, limit)))
        return over

    def _headers(self, key: str, now: float) -> dict[str, str]:
        headers = {}
        for kind, limit in (("requests", self.requests), ("tokens", self.tokens)):
            if limit is None:
                continue
            window = self._windows[(key, kind)]
            headers[f"x-ratelimit-limit-{kind}"] = str(limit)
            headers[f"x-ratelimit-remaining-{kind}"] = str(max(0, limit - window.total(now)))
            headers[f"x-ratelimit-reset-{kind}"] = duration(window.reset_s(now))
        return headers


def duration(seconds: float) -> str:
    """A wait as OpenAI writes it: "0s", "250ms", "12.5s", "1m0s"."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        return f"{math.ceil(seconds * 1000)}ms"
    minutes, rest = divmod(seconds, 60)
    rest_text = f"{rest:.3f}".rstrip("0").rstrip(".")
    return f"{int(minutes)}m{rest_text}s" if minutes else f"{rest_text}s"
