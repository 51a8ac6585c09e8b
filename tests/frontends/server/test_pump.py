"""The pump on a scripted generation (the engine's `Generation`, its tokens chosen here): what a stop string that
cuts a token in part leaves of the logprobs."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np

from jupyter_chatflow.engine.generation import Generation, RawStep
from jupyter_chatflow.frontends.server.completions import completion
from jupyter_chatflow.frontends.server.pump import ChunkOptions, Pump

VOCAB = {1: b"The capital is", 2: b" Paris", 3: b".", 4: b" \xc3", 5: b"\xa9t\xc3\xa9"}  # 4 and 5: " été" split
NONE = np.zeros(0)


class Vocab:
    """What a Generation and the logprobs need of a tokenizer, over VOCAB."""

    stop_ids = frozenset({0})

    def token_bytes(self, token_id: int) -> bytes:
        return VOCAB[token_id]


def generation(ids: list[int], stop: tuple[str, ...]) -> Generation:
    def raw_steps(_stop: threading.Event, _usage: object):
        for i, token_id in enumerate(ids):
            yield RawStep(token_id=token_id, logprob=-0.5 * (i + 1), entropy=0.0, top_ids=NONE, top_logprobs=NONE,
                          top_sampling_probs=NONE)  # fmt: skip

    return Generation(raw_steps, Vocab(), prompt_tokens=3, stop=stop)  # type: ignore[arg-type]


def answered(ids: list[int], stop: tuple[str, ...] = (), stream: bool = False) -> tuple[str, list[str]]:
    """The content and the logprob entries' tokens the server answers for this generation (joined from the chunks,
    as a streaming client would, or made whole)."""

    async def run() -> list:
        options = ChunkOptions(model="m", completion_id="chatcmpl-1", created=0, include_usage=True, logprobs=True,
                               top_logprobs=0, tokenizer=Vocab())  # fmt: skip
        pump = Pump(generation(ids, stop), threading.Event(), options, time.perf_counter(), lambda _: None)
        return [item async for item in pump]

    items = asyncio.run(run())
    if stream:
        choices = [c["choices"][0] for c in items if isinstance(c, dict) and c["choices"]]
        entries = [e for c in choices if c["logprobs"] for e in c["logprobs"]["content"]]
        return "".join(c["delta"].get("content") or "" for c in choices), [e["token"] for e in entries]
    body = completion(items, logprobs=True)["choices"][0]
    return body["message"]["content"], [e["token"] for e in body["logprobs"]["content"]]


def test_a_token_the_stop_string_cut_in_part_has_no_logprob():
    for stream in (False, True):
        assert answered([1, 2, 3], stop=("Paris",), stream=stream) == ("The capital is ", ["The capital is"])


def test_a_token_held_back_for_a_stop_string_that_never_came_has_its_logprob():
    for stream in (False, True):  # " Paris" waits (it could begin "Paris."), then the answer ends without it
        assert answered([1, 2], stop=("Paris.",), stream=stream) == ("The capital is Paris", ["The capital is",
                                                                                              " Paris"])  # fmt: skip


def test_a_character_split_over_two_tokens_keeps_both_logprobs():
    for stream in (False, True):  # each entry's token is its own bytes, U+FFFD for the half character
        assert answered([1, 4, 5], stream=stream) == ("The capital is été", ["The capital is", " �", "�té"])
