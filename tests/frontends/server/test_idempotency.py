"""Stored answers for retries (`idempotency.py`): kept in memory at once, written to the database off the event loop."""

from __future__ import annotations

import asyncio
import threading
import time

from jupyter_chatflow.frontends.server.idempotency import Answer, Claim, IdempotencyStore


def test_storing_an_answer_does_not_hold_the_event_loop_while_the_database_writes():
    """A slow SQLite write (a busy disk's fsync) runs on a worker thread: the loop goes on meanwhile, and a retry
    already gets the answer from memory."""
    writing = threading.Event()

    class SlowStore(IdempotencyStore):
        def persist(self, slot, digest, answer) -> None:
            writing.set()
            time.sleep(0.3)

    async def main() -> tuple[int, Answer | Claim]:
        store = SlowStore(60.0)
        claim = await store.claim("key", "retry-1", {"messages": []})
        assert isinstance(claim, Claim)
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.ensure_future(tick())
        stored = asyncio.ensure_future(claim.store(Answer(200, "application/json", b'{"id": 1}')))
        while not writing.is_set():
            await asyncio.sleep(0.01)
        retry = await store.claim("key", "retry-1", {"messages": []})
        await stored
        ticker.cancel()
        return ticks, retry

    ticks, retry = asyncio.run(main())
    assert ticks >= 10  # the loop ran through the 0.3 s write
    assert retry == Answer(200, "application/json", b'{"id": 1}')
