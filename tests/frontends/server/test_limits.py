"""Per-key limits over a sliding minute, on a clock the test moves."""

from __future__ import annotations

import pytest

from jupyter_chatflow.frontends.server.errors import APIError
from jupyter_chatflow.frontends.server.limits import Limiter, duration


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_requests_are_counted_per_key_and_come_back_as_the_minute_slides():
    clock = Clock()
    limiter = Limiter(requests=2, tokens=None, clock=clock)
    assert limiter.admit("a")["x-ratelimit-remaining-requests"] == "1"
    clock.now += 20
    headers = limiter.admit("a")
    assert headers["x-ratelimit-remaining-requests"] == "0" and headers["x-ratelimit-reset-requests"] == "1m0s"
    assert limiter.admit("b")["x-ratelimit-remaining-requests"] == "1"  # another key has its own minute
    with pytest.raises(APIError) as refused:
        limiter.admit("a")
    assert refused.value.status == 429 and refused.value.headers["Retry-After"] == "40"  # the first leaves at 60 s
    clock.now += 40
    assert limiter.admit("a")["x-ratelimit-remaining-requests"] == "0"


def test_tokens_count_once_spent_and_hold_requests_until_the_minute_frees_them():
    clock = Clock()
    limiter = Limiter(requests=None, tokens=100, clock=clock)
    assert limiter.admit("a") == {"x-ratelimit-limit-tokens": "100", "x-ratelimit-remaining-tokens": "100",
                                  "x-ratelimit-reset-tokens": "0s"}  # fmt: skip
    limiter.spend_tokens("a", 70)
    clock.now += 30
    limiter.spend_tokens("a", 50)
    with pytest.raises(APIError) as refused:
        limiter.admit("a")
    assert refused.value.type == "tokens" and refused.value.headers["Retry-After"] == "30"
    assert refused.value.headers["x-ratelimit-remaining-tokens"] == "0"
    clock.now += 30  # the 70 leave; 50 of 100 remain spent
    assert limiter.admit("a")["x-ratelimit-remaining-tokens"] == "50"


def test_past_both_limits_the_retry_waits_for_the_later_one():
    """Requests free up after 20 s, tokens after 50 s: a retry after 20 s would be refused again, for the tokens."""
    clock = Clock()
    limiter = Limiter(requests=2, tokens=100, clock=clock)
    limiter.admit("a")
    clock.now += 10
    limiter.admit("a")
    clock.now += 20
    limiter.spend_tokens("a", 120)
    clock.now += 10
    with pytest.raises(APIError) as refused:
        limiter.admit("a")
    assert refused.value.headers["Retry-After"] == "50"
    assert "2 requests and 100 tokens per minute" in str(refused.value.message)
    clock.now += 20  # the requests are free again, the tokens not yet
    with pytest.raises(APIError) as refused:
        limiter.admit("a")
    assert refused.value.headers["Retry-After"] == "30" and refused.value.type == "tokens"
    clock.now += 30
    assert limiter.admit("a")["x-ratelimit-remaining-tokens"] == "100"


def test_no_limits_means_no_headers():
    assert Limiter(None, None).admit("a") == {}


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (0.25, "250ms"), (12.5, "12.5s"), (60, "1m0s"), (61.25, "1m1.25s")]
)
def test_durations_are_written_as_openai_writes_them(seconds, text):
    assert duration(seconds) == text
