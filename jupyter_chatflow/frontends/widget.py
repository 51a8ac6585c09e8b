"""`ChatWidget`: the inspector panel, an anywidget over a `Chat` whose event stream is its only input.

>>> import jupyter_chatflow as cf
>>> panel = cf.ChatWidget(session="demo")      # or cf.ChatWidget(chat), or %%chat --inspect
>>> panel                                      # type in its box, or:
>>> panel.ask("What is the capital of France?")

State that must survive a page reload (the finished turns, the settings, the title) lives in synced traits; the
live turn's events go out as custom messages batched every ~40 ms (`relay.py`); attention matrices as float16
binary buffers. The protocol is written down in js/README.md. The panel's own requests (send, stop, draft,
attention, fork) arrive on the kernel's shell thread while the turn runs on the engine thread, so Stop works
while tokens stream.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import html
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anywidget
import traitlets
from IPython.display import display

from jupyter_chatflow.engine.loader import load_model
from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.events import event_from_dict
from jupyter_chatflow.model.files import resolve_model_path
from jupyter_chatflow.pipeline.chat import Chat, Prewarm
from jupyter_chatflow.pipeline.request import RequestError
from jupyter_chatflow.pipeline.response import Response
from jupyter_chatflow.settings import OPTIONS
from jupyter_chatflow.store.sessions import TurnRecord

from .attention_map import AttentionRequestError, attention_map, turn_sequence
from .comm_route import route_to_live_subshells
from .options import panel_settings
from .progress import LoadProgress, StatusLine
from .relay import Relay, token_pieces
from .render import TurnView

STATIC = Path(__file__).parents[1] / "static"


def _check_built() -> None:
    if not (STATIC / "widget.js").exists():
        raise ChatflowError(
            f"The inspector panel's front end is not built ({STATIC / 'widget.js'} is missing): install the package "
            f"with `pip install .` (it runs npm), or build it by hand with `cd js && npm install && npm run build`."
        )


class ChatWidget(anywidget.AnyWidget):
    """The inspector panel for one chat session: live tokens, context window, attention, tools, safety, timeline."""

    _esm = STATIC / "widget.js"
    _css = STATIC / "widget.css"

    turns = traitlets.List(traitlets.Dict()).tag(sync=True)
    live = traitlets.Dict(allow_none=True, default_value=None).tag(sync=True)
    settings = traitlets.Dict().tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    session = traitlets.Unicode("").tag(sync=True)
    status = traitlets.Unicode("idle").tag(sync=True)
    model_info = traitlets.Dict().tag(sync=True)
    prewarm = traitlets.Dict(allow_none=True, default_value=None).tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)

    def __init__(self, chat: Chat | None = None, *, settings: dict[str, Any] | None = None, **chat_options: Any):
        """A panel over `chat` (or a new `Chat(**chat_options)`), showing the session's earlier turns."""
        _check_built()
        if chat is None:
            if chat_options.get("model") is None:  # the default model, its load shown in the cell
                chat_options["model"] = _load_shown()
            chat = Chat(**chat_options)
        super().__init__(
            model_info=_model_info(chat), session=chat.session.name, title=chat.title,
            settings={**panel_settings(), **(settings or {})}, turns=[self._record(r, chat) for r in chat.history()],
        )  # fmt: skip
        self.chat = chat
        self._relay: Relay | None = None
        self._lock = threading.Lock()  # the turns trait and the relay change on the shell, relay and engine threads
        self._session_id = chat.session.id
        self._following = False  # this panel's own turn is live (set and read under the lock)
        self._stored: list[TurnRecord] = []  # turns stored meanwhile: that turn, or ones that ran before it
        self._unused_prewarm: dict[str, Any] | None = None
        self._drafts = 0
        self._attention: tuple[tuple[str, int], Any] | None = None  # the last layer computed, per turn
        self._displays: list[Any] = []
        self.on_msg(self._on_message)
        route_to_live_subshells(self.comm)
        chat.watch(self._turn_stored)  # turns sent from another panel, %%chat or code show here too

    # ---- the Python API ----------------------------------------------------------------------------------------

    def ask(self, text: str, **options: Any) -> Response:
        """Send a message with the panel's settings (`options` override them); the panel streams the turn.
        (`send` is the widget's own method for messages to the front end.)"""
        self._check_idle()
        response = self.chat.send(text, **{**self.options(), **options})
        self._follow(response, fork_of="")
        return response

    def fork(self, turn_id: str, index: int, token_id: int) -> Response:
        """Regenerate the latest answer from its token `index` with `token_id` there (see `Chat.fork`)."""
        self._check_idle()
        response = self.chat.fork(turn_id, index, token_id)
        self._follow(response, fork_of=turn_id)
        return response

    def stop(self) -> None:
        """Stop the live turn between two decode steps."""
        self.chat.stop()

    def wait(self, timeout: float | None = None) -> None:
        """Block until the live turn has ended and the panel has its last event (for scripts and tests)."""
        if self._relay is not None:
            self._relay.join(timeout)

    def options(self) -> dict[str, Any]:
        """The settings as `Chat.send` options (every option of a turn, `settings.OPTIONS`; None: its default)."""
        given = {o: self.settings[o.name] for o in OPTIONS if self.settings.get(o.name) is not None}
        return {o.name: tuple(value) if o.many else value for o, value in given.items()}

    # ---- what the front end asks for (on the kernel's shell thread) ------------------------------------------

    def _on_message(self, _widget: Any, content: dict[str, Any], _buffers: list[Any]) -> None:
        handlers = {
            "send": lambda m: self.ask(str(m.get("text", ""))),
            "stop": lambda m: self.stop(),
            "new_session": lambda m: self._new_session(),
            "draft": self._draft,
            "resume": self._resume,
            "attention": self._attention_request,
            "fork": lambda m: self.fork(str(m["turn_id"]), int(m["index"]), int(m["token_id"])),
        }
        handler = handlers.get(content.get("type", ""))
        if handler is None:
            self.error = f"The panel sent an unknown request {content.get('type')!r}."
            return
        try:
            handler(content)
        except (ChatflowError, KeyError, ValueError, TypeError) as error:
            self.error = str(error) if isinstance(error, ChatflowError) else f"Bad request from the panel: {error!r}"

    def _new_session(self) -> None:
        self._check_idle()
        self.chat.new_session()
        with self._lock:
            self._session_id = self.chat.session.id
            self.turns, self.title, self.session, self.error = [], "", self.chat.session.name, ""

    def _draft(self, message: dict[str, Any]) -> None:
        text = str(message.get("text", ""))
        if not text.strip() or self.status == "generating":
            return
        self._drafts += 1
        number = self._drafts
        future = self.chat.prewarm(text, **self.options())
        future.add_done_callback(lambda done: self._prewarmed(done, number))

    def _prewarmed(self, future: concurrent.futures.Future[Prewarm], number: int) -> None:
        if number != self._drafts or future.exception() is not None:  # a newer draft came, or it failed: no matter
            return
        info = dataclasses.asdict(future.result())
        self._unused_prewarm = self.prewarm = info
        self.send({"type": "prewarmed", "prewarm": info})

    def _resume(self, message: dict[str, Any]) -> None:
        relay = self._relay
        if relay is not None and relay.turn_id == message.get("turn_id"):
            relay.resend(after=int(message.get("after", -1)))

    def _attention_request(self, message: dict[str, Any]) -> None:
        request_id = message.get("request_id")
        events = self._events_of(str(message.get("turn_id", "")))
        job = self.chat.submit(self._attention_job, message, events)
        job.add_done_callback(lambda done: self._attention_failed(done, request_id))

    def _attention_failed(self, job: concurrent.futures.Future[None], request_id: Any) -> None:
        error = job.exception()
        if error is not None:
            self.send({"type": "attention_error", "request_id": request_id, "message": str(error)})

    def _attention_job(self, message: dict[str, Any], events: list[dict[str, Any]]) -> None:
        """On the engine thread: the layer's attention over the turn (kept for the next request), cut and sent."""
        sequence = turn_sequence(events)
        layer = int(message["layer"])
        key = (str(message["turn_id"]), layer)
        if self._attention is None or self._attention[0] != key:
            self._attention = None  # free the last one before computing the next
            self._attention = (key, self.chat.model.attention(sequence.ids, layer))
        meta, data = attention_map(
            self._attention[1], sequence, head=int(message.get("head", -1)), mode=str(message.get("mode", "tokens")),
            rows_range=message.get("rows_range"), cols_range=message.get("cols_range"),
        )  # fmt: skip
        reply = {"type": "attention", "request_id": message.get("request_id"), "turn_id": key[0], "layer": layer}
        self.send({**reply, **meta}, buffers=[data])

    # ---- the live turn -------------------------------------------------------------------------------------------

    def _check_idle(self) -> None:
        if self._relay is not None and not self._relay.done:
            raise RequestError("A turn is still generating: press Stop, or wait for it to end.")

    def _follow(self, response: Response, fork_of: str) -> None:
        prewarm, self._unused_prewarm = self._unused_prewarm, None
        self.error, self.status = "", "generating"
        relay = Relay(
            response, self.chat.model.tokenizer, send=self.send,
            on_start=lambda turn_id: setattr(self, "live", {"turn_id": turn_id, "prewarm": prewarm,
                                                            "fork_of": fork_of}),
            on_end=lambda turn: self._ended({**turn, "prewarm": prewarm, "fork_of": fork_of}), on_late=self._late,
        )  # fmt: skip
        with self._lock:
            self._relay, self._following = relay, True
        relay.start()

    def _ended(self, turn: dict[str, Any]) -> None:
        """On the relay's thread, after the last batch went out: the turn joins the log, after any turn that ran
        before it from elsewhere (the engine runs one turn at a time, in order)."""
        with self._lock:
            stored, self._stored, self._following = self._stored, [], False
            self._add(stored, own=turn)
            self.live = None  # type: ignore[assignment]  # traitlets: allow_none
            self.status = "idle"
        self._refresh_fallback()

    def _late(self, rows: list[dict[str, Any]]) -> None:
        """On the relay's thread: events that followed the turn's end (the session's title) join its record."""
        with self._lock:
            turns = list(self.turns)
            if any(t["turn_id"] == rows[0]["turn_id"] for t in turns):  # (not if a new session began meanwhile)
                _put(turns, {"turn_id": rows[0]["turn_id"], "events": rows, "pieces": {}})
                self.turns = turns
            self.title = next((r["title"] for r in rows if r["type"] == "title_generated"), self.title)
        self._refresh_fallback()

    def _turn_stored(self, record: TurnRecord) -> None:
        """On the engine thread: a turn of the chat was stored. While this panel's own turn is live, it waits for
        that turn's end (it is that turn, or one that ran before it)."""
        with self._lock:
            if self._following:
                self._stored.append(record)
                return
            self._add([record])
        self._refresh_fallback()

    def _add(self, records: list[TurnRecord], own: dict[str, Any] | None = None) -> None:
        """Append turns not shown yet (with the lock held); a turn of a newer session starts the log afresh; a
        shown turn that gained events (the title, written after the answer) takes them in.
        `own`: this panel's turn as its relay sent it (its record is among `records`, unless storing failed)."""
        turns, title = list(self.turns), self.title
        for record in records:
            if record.session_id != self._session_id:
                self._session_id, turns, title = record.session_id, [], ""
            row = own if own is not None and record.id == own["turn_id"] else self._record(record, self.chat)
            _put(turns, {**row, "events": _merged(row["events"], record.events)})
        if own is not None:
            _put(turns, own)
        self.turns = turns
        # (the title is written after the answer: until the chat has stored it, keep the one the relay brought)
        self.session, self.title = self.chat.session.name, self.chat.title or title

    def _refresh_fallback(self) -> None:
        """The static copy (nbconvert, GitHub) follows the conversation. Only the copy's display is updated: an
        update of the panel's own display would make the front end build a new view (tab, scroll, open popover
        lost at every turn's end)."""
        data, metadata = self.static_bundle()
        for handle in self._displays:
            handle.update(data, metadata=metadata, raw=True)

    def _events_of(self, turn_id: str) -> list[dict[str, Any]]:
        turn = next((t for t in self.turns if t["turn_id"] == turn_id), None)
        if turn is not None:
            return list(turn["events"])
        if self._relay is not None and self._relay.turn_id == turn_id:
            return self._relay.dicts()
        raise AttentionRequestError(f"No turn {turn_id!r} in this panel.")

    @staticmethod
    def _record(record: TurnRecord, chat: Chat) -> dict[str, Any]:
        events = list(record.events)
        fork_of = events[0].get("fork_of", "") if events else ""
        return {"turn_id": record.id, "events": events, "pieces": token_pieces(chat.model.tokenizer, events),
                "prewarm": None, "fork_of": fork_of}  # fmt: skip

    def __repr__(self) -> str:
        """Also the panel output's text/plain (where no widget runs): the static copy beside it has the turns."""
        return f"ChatWidget(session={self.session!r}): the inspector panel; its turns are in the copy below"

    # ---- display: the live panel, and a static copy for nbconvert, nbviewer and GitHub -------------------------

    def static_bundle(self) -> tuple[dict[str, str], dict]:
        """The conversation as HTML (answers rendered from Markdown, sanitized; see `safe_markdown`), also as the
        text/markdown of the same output. Wrapped in `.cf-static-copy`, which the panel's stylesheet hides while
        the panel itself is shown (the stylesheet only loads with a live panel)."""
        views = [(t, _view(t["events"])) for t in self.turns]
        turns = "".join(view.html(_user(t)) for t, view in views) or "<p>(no turns yet)</p>"
        heading = f"<p><b>jupyter_chatflow</b> · session {html.escape(self.session)} · {html.escape(self.title)}</p>"
        marks = f'data-model-id="{self.model_id}" data-turns="{len(views)}"'  # (which panel, for tests of exports)
        copy = f'<div class="cf-static-copy" {marks}>{heading}{turns}</div>'
        plain = "\n\n".join([f"jupyter_chatflow · session {self.session} · {self.title}".rstrip(" ·"),
                               *(f"> {_user(t)}\n{view.plain()}" for t, view in views)])  # fmt: skip
        return {"text/html": copy, "text/markdown": copy, "text/plain": plain}, {}

    def _ipython_display_(self) -> None:
        """Two outputs: the live panel (never updated from the kernel, so its view is never rebuilt) and its
        static copy, updated when a turn ends."""
        data, metadata = self._repr_mimebundle_() or ({}, {})
        display(data, metadata=metadata, raw=True)
        copy, copy_metadata = self.static_bundle()
        self._displays.append(display(copy, metadata=copy_metadata, raw=True, display_id=True))


def _view(events: list[dict[str, Any]]) -> TurnView:
    view = TurnView()
    for row in events:
        view.add(event_from_dict(row))
    return view


def _user(turn: dict[str, Any]) -> str:
    first = turn["events"][0] if turn["events"] else {}
    return str(first.get("user", ""))


def _merged(shown: Sequence[dict[str, Any]], stored: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A turn's events from two sources (what the relay sent, what was stored), by sequence number."""
    by_number = {row["sequence_number"]: row for row in [*stored, *shown]}
    return [by_number[n] for n in sorted(by_number)]


def _put(turns: list[dict[str, Any]], turn: dict[str, Any]) -> None:
    """Add `turn` to the log, or merge it into the shown turn with its id (keeping that turn's place)."""
    index = next((i for i, t in enumerate(turns) if t["turn_id"] == turn["turn_id"]), None)
    if index is None:
        turns.append(turn)
    else:
        shown = turns[index]
        turns[index] = {**shown, "events": _merged(shown["events"], turn["events"]),
                        "pieces": {**turn["pieces"], **shown["pieces"]}}  # fmt: skip


def _model_info(chat: Chat) -> dict[str, Any]:
    config = chat.model.config
    return {"name": config.name, "layers": config.n_layers, "heads": config.n_heads, "kv_heads": config.n_kv_heads,
            "context_length": config.context_length, "vocab_size": config.vocab_size,
            "tools": chat.toolbox.names}  # fmt: skip


def _load_shown(path: str | None = None) -> Any:
    """The model for a panel made without a chat, its load drawn as a status line in the cell above the panel
    (a bar in Jupyter, a line in a terminal; never stderr)."""
    from IPython import get_ipython

    shell = get_ipython()
    progress = LoadProgress(StatusLine(rich=shell is not None and hasattr(shell, "kernel")),
                            resolve_model_path(path).name)  # fmt: skip
    model = load_model(path, progress=progress)
    progress.done()
    return model
