"""The panel's finished turns: each as the row its `turns` trait holds, and all of them as the static copy.

A row is a turn's events as dicts, its tokens' pieces and its account; the static copy (HTML, Markdown and plain
text) is rebuilt from the rows, so an exported notebook shows what the panel showed without a kernel.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from jupyter_chatflow.account import account_of
from jupyter_chatflow.events import Event, TurnStarted, event_from_dict
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

from ..notebook.render import TurnView
from .relay import token_pieces


def row(
    turn_id: str,
    events: Sequence[Event],
    tokenizer: Tokenizer | None,
    prewarm: dict[str, Any] | None = None,
    account: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A finished turn as the `turns` trait holds it: its events as dicts, with its tokens' pieces and its
    account (`account_of`, unless the caller has it)."""
    started = events[0] if events and isinstance(events[0], TurnStarted) else None
    pieces = {} if tokenizer is None else token_pieces(tokenizer, events)
    account = account if account is not None else account_of(events, prewarm).to_dict()
    return {"turn_id": turn_id, "events": [e.to_dict() for e in events], "pieces": pieces, "prewarm": prewarm,
            "fork_of": started.fork_of if started else "", "account": account}  # fmt: skip


def tokenizer_of(chat: Chat) -> Tokenizer | None:
    """The local tokenizer (None for a remote chat: its tokens come with their text, and no ids)."""
    return None if chat.abilities.server else chat.model.tokenizer


def pieces(chat: Chat, events: Sequence[Event], known: set[int] | None = None) -> dict:
    """The text of the tokens in `events` the panel has not had yet (`known` grows with them)."""
    tokenizer = tokenizer_of(chat)
    return {} if tokenizer is None else token_pieces(tokenizer, events, known)


def by_turn(events: list[Event]) -> list[tuple[str, list[Event]]]:
    """Consecutive runs of one turn's events (a batch may hold the end of one turn and the start of the next)."""
    runs: list[tuple[str, list[Event]]] = []
    for event in events:
        if runs and runs[-1][0] == event.turn_id:
            runs[-1][1].append(event)
        else:
            runs.append((event.turn_id, [event]))
    return runs


def static_copy(turns: Sequence[dict[str, Any]], session: str, title: str, model_id: str) -> dict[str, str]:
    """The conversation as HTML (answers rendered from Markdown, sanitized; see `safe_markdown`), also as the
    text/markdown of the same output. Wrapped in `.cf-static-copy`, which the panel's stylesheet hides while
    the panel itself is shown (the stylesheet only loads with a live panel)."""
    views = [_view([event_from_dict(row) for row in t["events"]], t.get("prewarm")) for t in turns]
    _mark_forks(turns, [view for _, view in views])
    shown = "".join(view.html(user) for user, view in views) or "<p>(no turns yet)</p>"
    heading = f"<p><b>jupyter_chatflow</b> · session {html.escape(session)} · {html.escape(title)}</p>"
    marks = f'data-model-id="{model_id}" data-turns="{len(views)}"'  # (which panel, for tests of exports)
    copy = f'<div class="cf-static-copy" {marks}>{heading}{shown}</div>'
    plain = "\n\n".join([f"jupyter_chatflow · session {session} · {title}".rstrip(" ·"),
                           *(f"{_noted(view)}> {user}\n{view.plain()}" for user, view in views)])  # fmt: skip
    return {"text/html": copy, "text/markdown": copy, "text/plain": plain}


def _view(events: list[Event], prewarm: dict[str, Any] | None = None) -> tuple[str, TurnView]:
    """A turn's user message and its static view."""
    view = TurnView(prewarm=prewarm)
    for event in events:
        view.add(event)
    return next((e.user for e in events[:1] if isinstance(e, TurnStarted)), ""), view


def _mark_forks(turns: Sequence[dict[str, Any]], views: Sequence[TurnView]) -> None:
    """Each turn a fork replaced learns the token the fork regenerated from (its view says so)."""
    index = {t["turn_id"]: view for t, view in zip(turns, views, strict=True)}
    for turn, view in zip(turns, views, strict=True):
        replaced = index.get(turn.get("fork_of") or "")
        if replaced is not None and view.fork_index >= 0:
            replaced.replaced_at = view.fork_index


def _noted(view: TurnView) -> str:
    """The plain copy's line above a fork or a turn it replaced, bracketed ("" for any other turn)."""
    return f"[{view.fork_note()}]\n" if view.fork_note() else ""
