"""What every route shares: the settings, the model host, keys, limits, stored answers and metrics."""

from __future__ import annotations

import threading
import time
import weakref

from jupyter_chatflow.store.database import Database

from .auth import Keys
from .config import ServerConfig
from .conversations import Conversations
from .host import ModelHost
from .idempotency import IdempotencyStore
from .limits import Limiter
from .log import RequestRecord
from .metrics import Metrics
from .pump import Pump, RequestTimings


class ServerState:
    """One server's parts, made from its config."""

    def __init__(self, host: ModelHost, config: ServerConfig):
        self.host = host
        self.config = config
        self.keys = Keys(config.api_keys)
        self.limiter = Limiter(config.rate_limit, config.token_limit)
        self._db: Database | None = None
        self._db_lock = threading.Lock()
        self.generated = 0
        """Generations ended so far (chat completions and conversation turns): the idle release's clock."""
        self.pumps: weakref.WeakSet[Pump] = weakref.WeakSet()
        """The chat completions generating now (`drain` stops them)."""
        self.answers = IdempotencyStore(config.idempotency_ttl_s, database=self.database)
        self.conversations = Conversations(self.database)
        self.metrics = Metrics(
            queued=lambda: host.engine.queued if host.engine else 0,
            active=lambda: host.engine.active if host.engine else 0,
        )

    def database(self) -> Database:
        """The server's database (`$CHATFLOW_DB`, else the user's): conversations, their owners, idempotent answers.
        Opened on first use, so a server that never needs it never touches the disk."""
        with self._db_lock:
            if self._db is None:
                self._db = Database()
            return self._db

    def release_when_idle(self, stop: threading.Event, poll_s: float = 1.0) -> None:
        """Until `stop`: once nothing has been generating for `config.release_idle_s` seconds, give back the
        compiled programs and the prompt cache (`runner.release_programs()`), once per idle spell. Runs on a thread
        of its own (the app's lifespan starts it)."""
        if self.config.release_idle_s <= 0:
            return
        busy_at, released, seen = time.monotonic(), False, self.generated
        while not stop.wait(poll_s):
            engine, model = self.host.engine, self.host.model
            # busy: generating now, or a generation ended since the last look (one shorter than a poll)
            if engine is None or model is None or engine.active or engine.queued or self.generated != seen:
                busy_at, released, seen = time.monotonic(), False, self.generated
            elif not released and time.monotonic() - busy_at >= self.config.release_idle_s:
                model.runner.release_programs()
                released = True
                self.metrics.releases.inc()

    def drain(self, bound_s: float) -> int:
        """Stop what is generating (the server is stopping and takes no more requests): every conversation turn and
        chat completion in flight is cancelled, and waited for up to `bound_s` seconds in all, so that each turn is
        stored as cancelled with what it had and each request writes its log line. Returns how many it stopped."""
        deadline = time.monotonic() + bound_s
        turns = self.conversations.cancel_all()
        pumps = [pump for pump in self.pumps if pump.running]  # (the set holds ended ones until they are collected)
        for pump in pumps:
            pump.cancel()
        for pump in pumps:
            pump.join(max(0.0, deadline - time.monotonic()))
        for turn in turns:
            while not turn.ended and time.monotonic() < deadline:
                time.sleep(0.01)
        return len(turns) + len(pumps)

    def finished(self, record: RequestRecord, timings: RequestTimings) -> None:
        """A generation ended (on its thread): count its tokens and latencies, fill its log line."""
        self.generated += 1
        if timings.first_token_s is not None:
            self.metrics.ttft.observe(timings.first_token_s)
        for gap in timings.gaps_s:
            self.metrics.itl.observe(gap)
        self.metrics.count_tokens(timings.prompt_tokens, timings.completion_tokens)
        self.limiter.spend_tokens(record.key_id, timings.prompt_tokens + timings.completion_tokens)
        record.prompt_tokens, record.completion_tokens = timings.prompt_tokens, timings.completion_tokens
        record.finish_reason = timings.finish_reason
        record.queue_ms, record.prefill_ms, record.decode_ms = timings.queue_ms, timings.prefill_ms, timings.decode_ms
