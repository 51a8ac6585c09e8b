"""Another server's exact wire bytes, recorded once and replayed in the fast tier.

A remote chat's client (`pipeline/remote.py`, `pipeline/wire.py`) is tested live against our own server; other
OpenAI-compatible servers send other bytes (no usage chunk, other error bodies, tool calls in other pieces). A
`Recorder` transport, put under a remote chat's `httpx.Client`, keeps every request the chat sends and every chunk
of every answer as it arrived; `Replayer` answers the same requests from the file, chunk by chunk, so a test sees
what the chat made of that server's bytes without running it.

Record (the servers' commands are in each fixture's "server" field):

    python -m tests.pipeline.wire_replay http://127.0.0.1:8091/v1 tests/pipeline/wire/llama_cpp_plain.json plain
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

WIRE = Path(__file__).parent / "wire"
KEPT_HEADERS = ("content-type", "x-request-id", "retry-after", "server")


class Recorder(httpx.BaseTransport):
    """A transport that passes each request to `inner` and keeps it, with its answer's chunks, in `exchanges`."""

    def __init__(self, inner: httpx.BaseTransport):
        self.inner = inner
        self.exchanges: list[dict[str, Any]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        started = time.perf_counter()
        response = self.inner.handle_request(request)
        chunks: list[dict[str, Any]] = []
        self.exchanges.append({
            "request": {"method": request.method, "path": request.url.path, "body": body},
            "response": {"status": response.status_code, "chunks": chunks,
                         "headers": {k: v for k, v in response.headers.items() if k in KEPT_HEADERS}},
        })  # fmt: skip

        def recorded() -> Iterator[bytes]:
            for chunk in response.stream:
                chunks.append({"ms": round((time.perf_counter() - started) * 1000, 1), "text": chunk.decode()})
                yield chunk

        return httpx.Response(response.status_code, headers=response.headers, stream=_Stream(recorded(), response),
                              extensions=response.extensions)  # fmt: skip


class Replayer(httpx.BaseTransport):
    """A transport that answers each request with the next recorded exchange (its method and path must match)."""

    def __init__(self, exchanges: Sequence[dict[str, Any]]):
        self.exchanges = list(exchanges)
        self.requests: list[dict[str, Any]] = []
        """The requests the chat sent, as `Recorder` keeps them."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.requests.append({"method": request.method, "path": request.url.path, "body": body})
        if not self.exchanges:
            raise AssertionError(f"no recorded answer left for {request.method} {request.url.path}")
        recorded = self.exchanges.pop(0)
        wanted = recorded["request"]
        assert (request.method, request.url.path) == (wanted["method"], wanted["path"]), wanted
        answer = recorded["response"]
        chunks = [chunk["text"].encode() for chunk in answer["chunks"]]
        return httpx.Response(answer["status"], headers=answer["headers"], stream=httpx.ByteStream(b"")
                              if not chunks else _Stream(iter(chunks)))  # fmt: skip


class _Stream(httpx.SyncByteStream):
    def __init__(self, chunks: Iterator[bytes], response: httpx.Response | None = None):
        self.chunks, self.response = chunks, response

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks

    def close(self) -> None:
        if self.response is not None:
            self.response.close()


def load(name: str) -> dict[str, Any]:
    """A fixture from `tests/pipeline/wire/`."""
    return json.loads((WIRE / f"{name}.json").read_text())


def replaying(chat: Any, fixture: dict[str, Any]) -> Replayer:
    """Point a remote chat's HTTP client at the fixture's recorded answers."""
    replayer = Replayer(fixture["exchanges"])
    chat.answerer.server._client = httpx.Client(transport=replayer)
    return replayer


# ---- recording -----------------------------------------------------------------------------------------------

SCENARIOS: dict[str, dict[str, Any]] = {
    "plain": {"text": "What is the capital of France?", "options": {"temperature": 0, "max_tokens": 24}},
    "tools": {"text": "What is 17*23?", "options": {"temperature": 0, "max_tokens": 64, "tools": "calculator"}},
    "tools_required": {"text": "What is 17*23?", "options": {"temperature": 0, "max_tokens": 64,
                                                           "tools": "calculator", "tool_choice": "required"}},
    "tools_named": {"text": "What is 17*23?", "options": {"temperature": 0, "max_tokens": 64,
                                                        "tools": "calculator", "tool_choice": "calculator"}},
    "too_long": {"text": "Repeat after me: " + "apple banana " * 1500, "options": {"temperature": 0,
                                                                                  "max_tokens": 8}},
}  # fmt: skip


def record(base_url: str, out: Path, scenario: str, server: str) -> None:
    """Send one scenario's turn to a live server through a `Recorder`; write what went over the wire."""
    from jupyter_chatflow import Chat

    spec = SCENARIOS[scenario]
    chat = Chat(base_url=base_url, persist=False)
    recorder = Recorder(httpx.HTTPTransport())
    chat.answerer.server._client = httpx.Client(transport=recorder, timeout=120)
    response = chat.send(spec["text"], safety="off", **spec["options"])
    fixture = {"server": server, "scenario": scenario, "text": spec["text"], "options": spec["options"],
               "answer": response.text(), "terminal": response.terminal().to_dict(),
               "exchanges": recorder.exchanges}  # fmt: skip
    out.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
    print(f"{out}: {len(recorder.exchanges)} exchanges; answer {response.text()!r}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base_url")
    parser.add_argument("out", type=Path)
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--server", required=True, help="the server and the command that started it")
    args = parser.parse_args(argv)
    record(args.base_url, args.out, args.scenario, args.server)


if __name__ == "__main__":
    main()
