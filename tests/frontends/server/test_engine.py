"""Today's engine: one generation at a time, in arrival order; a cancelled one leaves the line."""

from __future__ import annotations

import threading

from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.frontends.server.engine import SerialEngine

GREEDY = SamplingParams(temperature=0.0, max_tokens=6, ignore_eos=True)


def test_generations_wait_their_turn_and_match_running_alone(tiny_model):
    ids = tiny_model.tokenizer.encode("Hello")
    alone = list(tiny_model.generate(ids, params=GREEDY))
    engine = SerialEngine(tiny_model)
    first, second = engine.submit(ids, GREEDY), engine.submit(ids, GREEDY)
    assert (engine.queued, engine.active) == (2, 0)
    started = iter(first)
    next(started)
    assert (engine.queued, engine.active) == (1, 1)
    results = {}
    waiter = threading.Thread(target=lambda: results.update(second=[s.token_id for s in second]))
    waiter.start()
    waiter.join(timeout=0.3)
    assert waiter.is_alive()  # the second waits while the first holds the model
    rest = [s.token_id for s in started]
    waiter.join(timeout=30)
    assert [alone[0].token_id, *rest] == [s.token_id for s in alone] == results["second"]
    assert (engine.queued, engine.active) == (0, 0) and second.finish_reason == "length"


def test_a_cancelled_generation_leaves_the_line(tiny_model):
    engine = SerialEngine(tiny_model)
    ids = tiny_model.tokenizer.encode("Hi")
    running = iter(engine.submit(ids, GREEDY))
    next(running)
    cancel = threading.Event()
    waiting = engine.submit(ids, GREEDY, cancel=cancel)
    dropped = engine.submit(ids, GREEDY)
    assert engine.queued == 2
    dropped.cancel()
    assert engine.queued == 1 and dropped.finish_reason == "cancelled"
    cancel.set()
    assert list(waiting) == [] and waiting.finish_reason == "cancelled" and engine.queued == 0
    list(running)
    assert engine.active == 0
