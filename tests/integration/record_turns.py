"""Records a turn of every kind on the real model, whole, as a panel's view holds it once the kernel sent its events
(row, events, pieces, account).

    CHATFLOW_XLA_CACHE=$(mktemp -d) python -m tests.integration.record_turns OUT.json

Run in a fresh process with an empty XLA cache, so its first turn is a kernel's cold first turn: it compiles every
program it runs. Then, in this order: a warm turn (the same session), a forced tool call, a turn prewarmed while
"typing", a fork of the warm turn from one of its tokens (as the panel's fork does it), a turn whose history is
trimmed to a small window, a turn stopped after a few tokens, and a turn sent to `chatflow serve` (on a thread of
this process) over `base_url`. Each record is what `ChatWidget` sends of a finished turn (its row, `turn_rows.row`,
and its `events` message; together `turn_rows.record`), so the consistency suite (test_consistency.py) draws exactly
what a panel would.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from jupyter_chatflow import Chat, load_model
from jupyter_chatflow.events import TokenDelta
from jupyter_chatflow.frontends.panel import turn_rows
from jupyter_chatflow.pipeline.response import Response
from jupyter_chatflow.store.database import Database

KINDS = ("cold", "warm", "tool", "prewarm", "fork", "trimmed", "stopped", "remote")
GREEDY = {"temperature": 0.0, "memory": False}


def record(response: Response, chat: Chat, prewarm: dict[str, Any] | None = None) -> dict[str, Any]:
    """A finished turn as the panel holds it: its events (the title after the answer too), pieces, account."""
    events = list(response) + response.after_end()
    tokenizer = None if chat.abilities.server else chat.model.tokenizer
    return turn_rows.record(response.turn_id, events, tokenizer, prewarm)


def stopped_after(chat: Chat, text: str, tokens: int) -> Response:
    """A turn stopped (as Stop or Ctrl-C stops it) once `tokens` tokens were shown."""
    response = chat.send(text, **GREEDY, max_tokens=200)
    shown = 0
    for event in response:
        shown += isinstance(event, TokenDelta)
        if shown == tokens:
            chat.stop()
    return response


def fork_of(chat: Chat, parent: dict[str, Any]) -> Response:
    """The latest turn forked at its third token, its second alternative chosen there (the panel's popover)."""
    token = [e for e in parent["events"] if e["type"] == "token"][2]
    other = next(a for a in token["alternatives"] if a["token_id"] != token["token_id"])
    return chat.fork(parent["turn_id"], token["index"], other["token_id"])


def remote_turn(model: Any, db: Database) -> dict[str, Any]:
    from jupyter_chatflow.frontends.server import ServerConfig, serve_in_background

    server = serve_in_background(model, ServerConfig(api_keys=("sk-consistency-0000000000abcd",)))
    try:
        chat = Chat(base_url=f"{server.url}/v1", api_key="sk-consistency-0000000000abcd", db=db, session="remote")
        return record(chat.send("What is the capital of France?", **GREEDY, max_tokens=40), chat)
    finally:
        server.close()


def main(out: Path) -> None:
    model = load_model()
    db = Database(Path(tempfile.mkdtemp()) / "turns.db")
    turns: dict[str, dict[str, Any]] = {}
    paris = Chat(model=model, db=db, session="capitals", new=True)
    turns["cold"] = record(paris.send("What is the capital of France?", **GREEDY, max_tokens=40), paris)
    turns["warm"] = record(paris.send("And of Germany?", **GREEDY, max_tokens=40), paris)
    tools = Chat(model=model, db=db, session="tools", new=True)
    ask = tools.send("What is 17 * 23?", tools=("calculator",), tool_choice="required", max_tokens=40)
    turns["tool"] = record(ask, tools)
    colours = Chat(model=model, db=db, session="colours", new=True)
    text = "Name three primary colours."
    prewarm = colours.prewarm(text, **GREEDY, max_tokens=40).result()
    turns["prewarm"] = record(colours.send(text, **GREEDY, max_tokens=40), colours, vars(prewarm))
    turns["fork"] = record(fork_of(paris, turns["warm"]), paris)
    small = Chat(model=model, db=db, session="small", new=True, context_window=128)  # 80 for the prompt
    small.send("Tell me about the sea.", **GREEDY, max_tokens=48, ignore_eos=True).text()  # 48 tokens of history
    turns["trimmed"] = record(small.send("And about mountains?", **GREEDY, max_tokens=48), small)
    count = Chat(model=model, db=db, session="count", new=True)
    turns["stopped"] = record(stopped_after(count, "Count from 1 to 50, one number per line.", 6), count)
    turns["remote"] = remote_turn(model, db)
    out.write_text(json.dumps(turns, ensure_ascii=False))
    for kind, turn in turns.items():
        print(f"{kind}: {len(turn['events'])} events, {turn['account']['generated_note']}", file=sys.stderr)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
