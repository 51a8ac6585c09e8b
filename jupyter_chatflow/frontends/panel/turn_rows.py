"""The panel's finished turns: each as the row its `turns` trait holds, as the whole record a view gathers, and as
its part of the static copy.

A row (`protocol.TurnRow`) is what a view needs before it has a turn's events: its ids, the user's message for the
turn picker and the footer's figures. The events, their pieces and the whole account cross once, in `events`
messages (live, or in reply to a view's `fetch`). The static copy (HTML, Markdown and plain text, for nbconvert and
GitHub) is rendered turn by turn as each ends, and joined when it is shown.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Sequence
from typing import Any

from jupyter_chatflow.account import account_of
from jupyter_chatflow.events import Completed, Event, TurnStarted
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

from ..notebook.render import TurnView
from .protocol import USER_CHARS, TurnRow
from .relay import token_pieces


def row(
    turn_id: str,
    events: Sequence[Event],
    account: dict[str, Any] | None = None,
    prewarm: dict[str, Any] | None = None,
) -> TurnRow:
    """A finished turn as the `turns` trait holds it: its ids, the user's message (cut) and the footer's figures
    from its account (`account_of`, unless the caller has it)."""
    started = events[0] if events and isinstance(events[0], TurnStarted) else None
    account = account if account is not None else account_of(events, prewarm).to_dict()
    user = started.user if started else ""
    ended = next((e for e in reversed(events) if isinstance(e, Completed)), None)
    return TurnRow(
        turn_id=turn_id, fork_of=started.fork_of if started else "", prewarm=prewarm,
        user=user if len(user) <= USER_CHARS else user[: USER_CHARS - 1] + "…",
        status=account["status"], finish_reason=ended.finish_reason if ended else "",
        answer_tokens=account["answer_tokens"], call_tokens=account["call_tokens"],
        tokens_per_s=account["tokens_per_s"], ttft_ms=account["ttft_ms"], generated_note=account["generated_note"],
    )  # fmt: skip


def record(
    turn_id: str,
    events: Sequence[Event],
    tokenizer: Tokenizer | None,
    prewarm: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A finished turn whole, as a view holds it once its events came: its row, its events as dicts, its tokens'
    pieces and its account (recorded turns for tests and fixtures; `ChatWidget.show_records` shows them)."""
    account = account_of(events, prewarm).to_dict()
    pieces = {} if tokenizer is None else token_pieces(tokenizer, events)
    return {**row(turn_id, events, account, prewarm), "events": [e.to_dict() for e in events], "pieces": pieces,
            "account": account}  # fmt: skip


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


@dataclasses.dataclass
class _Part:
    """One turn's part of the static copy, as rendered."""

    events: Sequence[Event]
    prewarm: dict[str, Any] | None
    fork_of: str
    fork_index: int = -1
    intervened: str = ""
    """An intervened turn's change, in words (`Intervened.describe`; "": none)."""
    html: str = ""
    plain: str = ""


class StaticCopy:
    """The conversation as a static copy for nbconvert, nbviewer and GitHub, kept turn by turn: a turn's part is
    rendered when it ends (`add`), again only when late events join it (its title) or a fork replaces it, and the
    parts are joined when the copy is shown (`bundle`)."""

    def __init__(self) -> None:
        self._parts: dict[str, _Part] = {}
        self.renders = 0
        """How many turn parts have been rendered (for tests: once per turn)."""

    def clear(self) -> None:
        self._parts = {}

    def add(self, turn_id: str, events: Sequence[Event], prewarm: dict[str, Any] | None = None) -> None:
        """Render a finished turn's part (again, if it had one: its later events came); a fork marks the turn it
        replaced, whose part is rendered again with the mark."""
        started = events[0] if events and isinstance(events[0], TurnStarted) else None
        part = _Part(events, prewarm, started.fork_of if started else "")
        self._parts[turn_id] = part
        self._render(part)
        replaced = self._parts.get(part.fork_of)
        if replaced is not None and (part.fork_index >= 0 or part.intervened):
            self._render(replaced)

    def _render(self, part: _Part) -> None:
        view = TurnView(prewarm=part.prewarm)
        for event in part.events:
            view.add(event)
        part.fork_index = view.fork_index
        part.intervened = view.intervened.describe() if view.intervened is not None else ""
        view.replaced_by = next((p.intervened for p in self._parts.values() if p.intervened
                                 and self._parts.get(p.fork_of) is part), "")  # fmt: skip
        view.replaced_at = next((p.fork_index for p in self._parts.values() if p.fork_of and p.fork_index >= 0
                                 and self._parts.get(p.fork_of) is part), -1)  # fmt: skip
        user = next((e.user for e in part.events[:1] if isinstance(e, TurnStarted)), "")
        note = view.fork_note()
        part.html = view.html(user)
        part.plain = f"{f'[{note}]' + chr(10) if note else ''}> {user}\n{view.plain()}"
        self.renders += 1

    def bundle(self, session: str, title: str, model_id: str) -> dict[str, str]:
        """The copy as HTML (answers rendered from Markdown, sanitized; see `safe_markdown`), also as the
        text/markdown of the same output, and plain text. Wrapped in `.cf-static-copy`, which the panel's
        stylesheet hides while the panel itself is shown (the stylesheet only loads with a live panel)."""
        parts = list(self._parts.values())
        shown = "".join(p.html for p in parts) or "<p>(no turns yet)</p>"
        heading = f"<p><b>jupyter_chatflow</b> · session {html.escape(session)} · {html.escape(title)}</p>"
        marks = f'data-model-id="{model_id}" data-turns="{len(parts)}"'  # (which panel, for tests of exports)
        copy = f'<div class="cf-static-copy" {marks}>{heading}{shown}</div>'
        plain = "\n\n".join([f"jupyter_chatflow · session {session} · {title}".rstrip(" ·"), *(p.plain for p in parts)])
        return {"text/html": copy, "text/markdown": copy, "text/plain": plain}
