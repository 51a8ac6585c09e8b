"""32 concurrent streams, some cut off midway, on the batching Scheduler `chatflow serve` runs (four rows at a time
here): every finished one is its prompt's own answer, none lost or mixed, and /health answers throughout."""

from __future__ import annotations

import asyncio
import json

import httpx

from jupyter_chatflow.engine.sampling import SamplingParams

from .conftest import chat_body, wait_until

STREAMS = 32


def test_32_concurrent_streams_some_disconnecting(serve, tiny_model):
    base, state = serve()
    prompts = [f"Question number {i}?" for i in range(STREAMS)]
    expected = {p: _alone(tiny_model, p) for p in prompts}
    assert len(set(expected.values())) > STREAMS // 2  # answers differ, so a mixed-up stream would show
    quitters = set(range(0, STREAMS, 5))  # these read two chunks and hang up

    async def stream(client: httpx.AsyncClient, index: int) -> str | None:
        body = chat_body(prompts[index], max_tokens=8, ignore_eos=True, stream=True)
        async with client.stream("POST", f"{base}/v1/chat/completions", json=body) as reply:
            text, chunks = "", 0
            async for line in reply.aiter_lines():
                if not line.startswith("data: {"):
                    continue
                chunks += 1
                text += json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                if index in quitters and chunks == 2:
                    return None
        return text

    async def health(client: httpx.AsyncClient, done: asyncio.Event) -> list[int]:
        codes = []
        while not done.is_set():
            codes.append((await client.get(f"{base}/health")).status_code)
            await asyncio.sleep(0.02)
        return codes

    async def main() -> tuple[list[str | None], list[int]]:
        limits = httpx.Limits(max_connections=STREAMS + 2)
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:
            done = asyncio.Event()
            probe = asyncio.ensure_future(health(client, done))
            texts = await asyncio.gather(*(stream(client, i) for i in range(STREAMS)))
            done.set()
            return list(texts), await probe

    texts, codes = asyncio.run(main())
    for index, text in enumerate(texts):
        if index not in quitters:
            assert text == expected[prompts[index]], index
    assert len(codes) >= 3 and set(codes) == {200}
    engine = state.host.engine
    wait_until(lambda: engine.active == 0 and engine.queued == 0)  # (a quitter's row is freed at the next step)


def _alone(model, prompt: str) -> str:
    ids = model.tokenizer.apply_chat_template([{"role": "user", "content": prompt}])
    generation = model.generate(ids, params=SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True))
    list(generation)
    return generation.text
