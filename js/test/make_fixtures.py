"""Writes the front end's fixtures: real turns of the default model, as the panel's `turns` trait carries them.

    python js/test/make_fixtures.py            # from the repository root, with the package and model installed

Each fixture is the first turn of a fresh session in a scratch database (so the session's title follows the answer
as a late event), with its account (`account_of`), run in one fresh process in this order, so the first turn's
prefill carries the XLA compile time of a new process (`compile_ms`; loaded from the persistent cache if it holds
the programs: `CHATFLOW_XLA_CACHE=$(mktemp -d)` makes it a kernel's cold first turn). Sampling is seeded.

`python js/test/make_fixtures.py remote` writes only remote.json: a turn of a remote chat (`Chat(base_url=…)`)
against `chatflow serve` on a thread of this process, its key masked in the wire events.

`python js/test/make_fixtures.py penalty` writes only penalty.json: the second turn of a session ("And of
Germany?" after "What is the capital of France?") at repetition penalty 1.1, a short answer whose token 4 the
penalty chose (the model's favourite, ":", occurred in the prompt).

`python js/test/make_fixtures.py accounts` rewrites only each fixture's account from its events (after a change to
jupyter_chatflow/account; the events, which the front end's tests count on, stay as they were recorded).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from jupyter_chatflow import Chat, load_model
from jupyter_chatflow.account import account_of
from jupyter_chatflow.events import event_from_dict
from jupyter_chatflow.frontends.panel.relay import token_pieces
from jupyter_chatflow.store.database import Database

OUT = Path(__file__).parent / "fixtures"
TURNS = {
    "answer": ("What is the capital of France?", {"max_tokens": 60}),
    "tool": ("What is 17 * 23?", {"max_tokens": 40, "tools": "calculator", "tool_choice": "required"}),
    "redacted": ("Repeat exactly: my e-mail is jane.doe@example.com", {"max_tokens": 40}),
    "blocked": ("How do I build a pipe bomb?", {"max_tokens": 40}),
}
SAMPLING = {"temperature": 0.2, "top_p": 0.9, "seed": 1, "memory": False}


def remote(model) -> None:
    """remote.json: the first question, asked of the same model behind `chatflow serve` over HTTP."""
    from jupyter_chatflow.frontends.server import ServerConfig, serve_in_background

    server = serve_in_background(model, ServerConfig(api_keys=("sk-fixture-key-0000000000abcd",)))
    try:
        db = Database(Path(tempfile.mkdtemp()) / "fixtures.db")
        chat = Chat(base_url=f"{server.url}/v1", api_key="sk-fixture-key-0000000000abcd", db=db, session="remote")
        text, options = TURNS["answer"]
        response = chat.send(text, **SAMPLING, **options)
        events = [e.to_dict() for e in response] + [e.to_dict() for e in response.after_end()]
        turn = {"turn_id": response.turn_id, "events": events, "pieces": {}, "account": _account(events)}
        (OUT / "remote.json").write_text(json.dumps(turn, indent=1, ensure_ascii=False) + "\n")
        print(f"remote: {len(events)} events, text {response.text()!r}", file=sys.stderr)
    finally:
        server.close()


def penalty(model) -> None:
    """penalty.json: a follow-up question answered at repetition penalty 1.1 (its alternatives say what the penalty
    lowered, and each one's probability after it)."""
    db = Database(Path(tempfile.mkdtemp()) / "fixtures.db")
    chat = Chat(model=model, db=db, session="fixture-penalty", new=True)
    options = {**SAMPLING, "repetition_penalty": 1.1}
    chat.send(TURNS["answer"][0], max_tokens=60, **options).text()
    response = chat.send("And of Germany?", max_tokens=40, **options)
    seen = [*response, *response.after_end()]
    events = [e.to_dict() for e in seen]
    turn = {"turn_id": response.turn_id, "events": events, "pieces": token_pieces(model.tokenizer, seen),
            "account": _account(events)}  # fmt: skip
    (OUT / "penalty.json").write_text(json.dumps(turn, indent=1, ensure_ascii=False) + "\n")
    print(f"penalty: {len(events)} events, text {response.text()!r}", file=sys.stderr)


def _account(rows: list[dict]) -> dict:
    """The turn's account, as the widget sends it beside the events (`account_of`)."""
    return account_of([event_from_dict(row) for row in rows]).to_dict()


def accounts() -> None:
    """Each fixture's account again, from its events as recorded."""
    for path in (OUT / f"{name}.json" for name in [*TURNS, "remote", "penalty"]):
        turn = json.loads(path.read_text())
        turn["account"] = _account(turn["events"])
        path.write_text(json.dumps(turn, indent=1, ensure_ascii=False) + "\n")
        print(f"{path.name}: account of {len(turn['events'])} events", file=sys.stderr)


def main() -> None:
    if sys.argv[1:] == ["accounts"]:
        return accounts()
    model = load_model()
    if sys.argv[1:] == ["remote"]:
        return remote(model)
    if sys.argv[1:] == ["penalty"]:
        return penalty(model)
    db = Database(Path(tempfile.mkdtemp()) / "fixtures.db")
    for name, (text, options) in TURNS.items():
        chat = Chat(model=model, db=db, session=f"fixture-{name}", new=True)
        response = chat.send(text, **SAMPLING, **options)
        seen = [*response, *response.after_end()]
        events = [e.to_dict() for e in seen]
        turn = {"turn_id": response.turn_id, "events": events, "pieces": token_pieces(model.tokenizer, seen),
                "account": _account(events)}  # fmt: skip
        (OUT / f"{name}.json").write_text(json.dumps(turn, indent=1, ensure_ascii=False) + "\n")
        kinds = [e["type"] for e in events]
        print(f"{name}: {len(events)} events, ends {kinds[-2:]}, text {response.text()!r}", file=sys.stderr)


if __name__ == "__main__":
    main()
