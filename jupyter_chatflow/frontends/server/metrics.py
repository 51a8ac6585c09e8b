"""Prometheus metrics (`GET /metrics`): requests by status, queue depth, active slots, tokens, TTFT and ITL.

Each app has a registry of its own, so two servers in one process (tests) count apart.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """The server's counters, gauges and histograms."""

    def __init__(self, queued: Callable[[], float], active: Callable[[], float]):
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "chatflow_requests", "HTTP requests answered, by route and status.", ["route", "status"],
            registry=self.registry,
        )  # fmt: skip
        self.queue_depth = Gauge("chatflow_queue_depth", "Sequences waiting for the engine.", registry=self.registry)
        self.queue_depth.set_function(queued)
        self.active_slots = Gauge("chatflow_active_slots", "Sequences decoding now.", registry=self.registry)
        self.active_slots.set_function(active)
        self.tokens = Counter("chatflow_tokens", "Tokens processed, by kind.", ["kind"], registry=self.registry)
        self.releases = Counter(
            "chatflow_idle_releases", "Times the idle server gave back its compiled programs and prompt cache.",
            registry=self.registry,
        )  # fmt: skip
        self.ttft = Histogram(
            "chatflow_time_to_first_token_seconds", "From a request's arrival to its first generated token.",
            buckets=_LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.itl = Histogram(
            "chatflow_inter_token_latency_seconds", "Between two generated tokens of one request.",
            buckets=_LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip

    def count_tokens(self, prompt: int, completion: int) -> None:
        """Add one request's token counts."""
        self.tokens.labels(kind="prompt").inc(prompt)
        self.tokens.labels(kind="completion").inc(completion)

    def exposition(self) -> bytes:
        """The text format Prometheus scrapes."""
        return generate_latest(self.registry)
