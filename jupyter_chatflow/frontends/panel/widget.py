"""`ChatWidget`: the inspector panel, an anywidget over a `Chat` whose event stream is its only input.

>>> import jupyter_chatflow as cf
>>> panel = cf.ChatWidget(session="demo")      # or cf.ChatWidget(chat), or %%chat --inspect
>>> panel                                      # type in its box, or:
>>> panel.ask("What is the capital of France?")

The panel follows one path: every event of every turn of its chat (`Chat.watch`: turns sent from this panel,
another panel, `%%chat` or code alike), batched every ~40 ms by `relay.py`. Every event crosses to the front end
once: the live turn's go out as custom messages (`events`); when a turn ends, the `turns` trait gains its row (ids
and the figures the row shows, not its events), and a view that lacks a turn's events (a reload, a second view)
asks for them by id (`fetch`). The settings, the title and the other state a reload needs live in synced traits;
attention matrices go out as float16 binary buffers. The protocol is declared in `protocol.py` (the view's
TypeScript types are generated from it); a message from the view it does not describe gets a `request_error` reply.
The panel's own requests (send, stop, draft, attention, fork, the looks inside a turn: lens, why) arrive on the
kernel's shell thread while the turn runs on the engine thread, so Stop works while tokens stream.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import threading
import time
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import anywidget
import traitlets
from IPython.display import display

from jupyter_chatflow.account import account_of
from jupyter_chatflow.engine.intervention import Steer
from jupyter_chatflow.engine.loader import load_model
from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.events import TERMINAL, ContextAssembled, Event, TitleGenerated, TurnStarted, event_from_dict
from jupyter_chatflow.model.files import resolve_model_path
from jupyter_chatflow.model.memory import fit_text, footprint
from jupyter_chatflow.pipeline.chat import Chat, Prewarm
from jupyter_chatflow.pipeline.request import RequestError
from jupyter_chatflow.pipeline.response import Response
from jupyter_chatflow.settings import OPTIONS

from ..options import panel_settings
from ..progress import compiling
from .attention_map import AttentionRequestError, LayerAttention
from .comm_route import route_to_live_subshells
from .inside_requests import InsideLooks
from .model_setting import PanelProgress, load_shown, model_info, steerable_layers, steering_probe
from .protocol import (
    AttentionErrorMessage,
    AttentionRequest,
    DraftRequest,
    EventsMessage,
    FetchRequest,
    InterveneRequest,
    LensRequest,
    LiveTurn,
    PrewarmedMessage,
    ProbeSteer,
    ProtocolError,
    RequestErrorMessage,
    TextSteer,
    WhyRequest,
    view_message,
)
from .relay import Relay
from .turn_rows import StaticCopy, by_turn, pieces, row

STATIC = Path(__file__).parents[2] / "static"
COMPILE_TICK_S = 0.25
JOIN_WAIT_S = 2.0  # at a turn's end, how long to wait for the prewarm it joined to report (it ended long before)
ACCOUNT_EVERY_S = 0.2  # while a turn streams, its account goes out at most this often (the panel redraws as often)


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
    compiling = traitlets.Unicode("").tag(sync=True)
    """While a turn runs: what XLA is compiling now and for how long ("" when nothing is)."""
    loading = traitlets.Unicode("").tag(sync=True)
    """While a model chosen in the settings loads: what the file is, and how far the load is ("" otherwise)."""

    def __init__(self, chat: Chat | None = None, *, settings: dict[str, Any] | None = None, **chat_options: Any):
        """A panel over `chat` (or a new `Chat(**chat_options)`), showing the session's earlier turns."""
        _check_built()
        if chat is None:
            model = chat_options.get("model")
            if not chat_options.get("base_url") and (model is None or isinstance(model, (str, os.PathLike))):
                chat_options["model"] = load_shown(model)  # the default model or a file's, shown loading
            chat = Chat(**chat_options)
        history = chat.history()
        super().__init__(
            model_info=dict(model_info(chat)), session=chat.session.name, title=chat.title,
            settings={**panel_settings(), **(settings or {})}, turns=[dict(row(r.id, r.events)) for r in history],
        )  # fmt: skip
        self.chat = chat
        self._events: dict[str, list[Event]] = {r.id: list(r.events) for r in history}  # the session's turns
        self._pieces: dict[str, dict] = {}  # per turn shown from a record (`show_records`): its pieces as recorded
        self._copy = StaticCopy()  # the static copy, rendered turn by turn
        for r in history:
            self._copy.add(r.id, self._events[r.id])
        self._session_id = chat.session.id
        self._lock = threading.Lock()  # the panel's state: changed on the relay's thread and the shell's
        self._relay = Relay(self._show)
        self._known: dict[str, set[int]] = {}  # per turn: token ids whose pieces went out with that turn (the
        # front end keeps each turn's pieces apart, so a fork's prompt needs its own, though its parent sent them)
        self._own: Response | None = None  # the latest turn sent from this panel
        self._own_prewarm: dict[str, Any] | None = None
        self._unused_prewarm: dict[str, Any] | None = None
        self._drafts = 0
        self._draft_job: tuple[int, str, concurrent.futures.Future[Prewarm]] | None = None  # the latest draft's
        self._joined: concurrent.futures.Future[Prewarm] | None = None  # the prewarm the live turn joined
        self._attention = LayerAttention()
        self._looks = InsideLooks(chat, lambda content, buffers=None: self.send(content, buffers=buffers))
        self._displays: list[Any] = []
        self._compile_clock: threading.Thread | None = None
        self._account_sent: dict[str, float] = {}  # per turn: when its account last went out
        self._accounts: dict[str, tuple[int, dict[str, Any]]] = {}  # the live or latest turn's account, of how
        # many events (the turn's last batch and its row share it; a fetch of an older turn derives it again)
        self._handlers: dict[str, Callable[[Any], object]] = {
            "send": lambda m: self.ask(m["text"]), "stop": lambda m: self.stop(),
            "new_session": lambda m: self._new_session(), "draft": self._draft, "fetch": self._fetch,
            "attention": self._attention_request, "fork": lambda m: self.fork(m["turn_id"], m["index"], m["token_id"]),
            "intervene": self._intervene_request,
            "load_model": lambda m: self.load_model(m["path"], m["dtype"] or None), "lens": self._look,
            "why": self._look,
        }  # fmt: skip
        self.on_msg(self._on_message)
        route_to_live_subshells(self.comm)
        chat.watch(self._relay.push)  # every turn of the chat streams here: this panel's, %%chat's, code's

    # ---- the Python API ----------------------------------------------------------------------------------------

    def ask(self, text: str, **options: Any) -> Response:
        """Send a message with the panel's settings (`options` override them); the panel streams the turn.
        (`send` is the widget's own method for messages to the front end.)"""
        self._check_idle()
        return self._started(self.chat.send(text, **{**self.options(), **options}), text)

    def fork(self, turn_id: str, index: int, token_id: int) -> Response:
        """Regenerate the latest answer from its token `index` with `token_id` there (see `Chat.fork`)."""
        self._check_idle()
        return self._started(self.chat.fork(turn_id, index, token_id))

    def intervene(
        self, turn_id: str, ablate_heads: Mapping[int, Iterable[int]] | None = None,
        steer: Mapping[int, Steer] | None = None,
    ) -> Response:  # fmt: skip
        """Answer the latest turn again with attention heads knocked out (`{layer: [heads]}`) and/or the residual
        steered after a layer (`{layer: direction * strength}`; see `Chat.intervene`). The panel draws the new turn
        beside the one it replaces: the two answers side by side, where they part, what else changed."""
        self._check_idle()
        heads = None if ablate_heads is None else {layer: list(h) for layer, h in ablate_heads.items()}
        return self._started(self.chat.intervene(turn_id, ablate_heads=heads, steer=steer))

    def stop(self) -> None:
        """Stop the live turn between two decode steps."""
        self.chat.stop()

    def load_model(self, path: str, dtype: str | None = None) -> threading.Thread:
        """Load the GGUF file at `path` (the settings' model field) for this panel's next turns, on a thread of its
        own: the `loading` trait says what the file is, then how far the load is. A file that is missing, not a
        supported GGUF or too large for the memory available is refused (the `error` trait says why and what to
        do) and the model in use stays. Returns the loading thread (join it to wait)."""
        self._check_idle()
        if self.chat.abilities.server:
            raise ChatflowError("This panel's turns go to a server, whose model is the server's: make a panel over "
                                "a local chat (ChatWidget(model=…)) to load a model file.")  # fmt: skip
        if not path.strip():
            raise ChatflowError("Type the path of a GGUF file in the model field, then press Load.")
        resolved = resolve_model_path(path.strip())
        about = footprint(resolved)  # (raises now for a file that is not a supported GGUF)
        said = "; ".join(part for part in (about.summary(), fit_text(about)) if part)
        self.error, self.status, self.loading = "", "loading", said
        thread = threading.Thread(target=self._load_model, args=(resolved, said, dtype),
                                  name="chatflow-panel-load", daemon=True)  # fmt: skip
        thread.start()
        return thread

    def _load_model(self, path: Path, summary: str, dtype: str | None) -> None:
        """On the loading thread: load, then swap the chat's model on its engine thread (after any queued turn)."""
        try:
            model = load_model(path, dtype=dtype, progress=PanelProgress(self, summary, path.name))
            self.chat.submit(self.chat.use_model, model).result()
        except Exception as error:  # (on this thread, nobody else would hear of it)
            said = str(error) if isinstance(error, ChatflowError) else f"The model did not load: {error!r}."
            self.error = f"{said} The model in use is still {self.chat.model.config.name}."
        else:
            self.model_info = dict(model_info(self.chat))
        finally:
            self.loading = ""
            self._check_status()

    def wait(self, timeout: float | None = None) -> None:
        """Block until this panel's latest turn has ended, its title included, and the panel shows all of it
        (for scripts and tests)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._own is not None:
            self._own.wait(timeout)
        self._relay.sync(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def options(self) -> dict[str, Any]:
        """The settings as `Chat.send` options (every option of a turn, `settings.OPTIONS`; None: its default)."""
        given = {o: self.settings[o.name] for o in OPTIONS if self.settings.get(o.name) is not None}
        return {o.name: tuple(value) if o.many else value for o, value in given.items()}

    # ---- what the front end asks for (on the kernel's shell thread) ------------------------------------------

    def _on_message(self, _widget: Any, content: object, _buffers: list[Any]) -> None:
        """A view's message: checked against the protocol (what it does not describe gets a `request_error` reply),
        then handled; a request the user must change (a turn still generating, a bad setting) says why in the
        `error` trait."""
        try:
            message = view_message(content)
        except ProtocolError as error:
            kind = content.get("type") if isinstance(content, Mapping) else None
            self._refuse(kind if isinstance(kind, str) else "", str(error))
            return
        try:
            self._handlers[message["type"]](message)
        except ChatflowError as error:
            self.error = str(error)
        except (LookupError, ValueError, TypeError) as error:  # (asks for what is not there: a turn, a layer)
            self._refuse(message["type"], f"The panel's {message['type']!r} request failed: {error}")

    def _intervene_request(self, message: InterveneRequest) -> None:
        """The Attention tab's "answer again": its heads as `{layer: [heads]}`, its steering form as a `Steer`."""
        heads: dict[int, list[int]] = {}
        for layer, head in message["heads"]:
            heads.setdefault(layer, []).append(head)
        spec = message["steer"]
        if not heads and spec is None:
            raise RequestError("Nothing to change: select heads in the Attention tab's grid to knock out, or fill in "
                               "the steering form.")  # fmt: skip
        steer = None if spec is None else {spec["layer"]: self._steer(spec)}
        self.intervene(message["turn_id"], ablate_heads=heads or None, steer=steer)

    def _steer(self, spec: TextSteer | ProbeSteer) -> Steer:
        """A steering form's vector: along contrasting texts (computed on the engine thread) or a probe category."""
        self._check_idle()
        layer, strength = spec["layer"], spec["strength"]
        if "category" in spec:
            probe = steering_probe(self.chat.model)
            if probe is None:
                raise RequestError("No safety probe was trained for this model: steer along two contrasting texts.")
            category = typing.cast(ProbeSteer, spec)["category"]
            if category not in probe.classes[1:]:
                raise RequestError(f"The probe reads the categories {', '.join(probe.classes[1:])}; not "
                                   f"{category!r}: pick one of them.")  # fmt: skip
            if layer not in steerable_layers(probe):
                readable = ", ".join(map(str, steerable_layers(probe)))
                raise RequestError(f"The probe steers after layers {readable}; not after layer {layer}: pick one of "
                                   "them.")  # fmt: skip
            return probe.direction(category, layer) * strength
        texts = typing.cast(TextSteer, spec)
        toward, away = texts["toward"].strip(), texts["away"].strip()
        if not toward or not away:
            raise RequestError("Steering along texts needs both: type a text to steer toward and one to steer away "
                               "from.")  # fmt: skip
        last = self.chat.model.config.n_layers - 1
        if not 0 <= layer <= last:
            raise RequestError(f"Steer after a layer from 0 to {last}; not {layer}.")
        return self.chat.submit(self.chat.model.direction, layer, toward, away).result() * strength

    def _refuse(self, kind: str, why: str) -> None:
        self.send(RequestErrorMessage(type="request_error", request=kind, message=why))

    def _new_session(self) -> None:
        self._check_idle()
        self.chat.new_session()
        with self._lock:
            self._session_id, self._events, self._accounts, self._pieces = self.chat.session.id, {}, {}, {}
            self._copy.clear()
            self.turns, self.title, self.session, self.error = [], "", self.chat.session.name, ""

    def show_records(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Show recorded turns (`turn_rows.record`'s: events as dicts, pieces, prewarm) as this panel's finished
        turns, in place of its session's: for demonstrations and tests of the views, which draw them as a chat's.
        A view asks for their events as for any turn's; their pieces are the recorded ones."""
        records = list(records)
        with self._lock:
            self._events = {r["turn_id"]: [event_from_dict(e) for e in r["events"]] for r in records}
            self._pieces = {r["turn_id"]: dict(r.get("pieces") or {}) for r in records}
            self._accounts = {}
            self._copy.clear()
            for r in records:
                self._copy.add(r["turn_id"], self._events[r["turn_id"]], r.get("prewarm"))
            self.turns = [dict(row(r["turn_id"], self._events[r["turn_id"]], r.get("account"), r.get("prewarm")))
                          for r in records]  # fmt: skip
        self._refresh_fallback()

    def _draft(self, message: DraftRequest) -> None:
        text = message["text"]
        if not text.strip() or self.status == "generating" or not self.chat.abilities.prewarm:
            return
        self._drafts += 1
        number = self._drafts
        future = self.chat.prewarm(text, **self.options())
        self._draft_job = (number, text, future)
        future.add_done_callback(lambda done: self._prewarmed(done, number))

    def _prewarmed(self, future: concurrent.futures.Future[Prewarm], number: int) -> None:
        """A draft's prewarm ended: the box under the input shows it; it is the next turn's, or the live turn's when
        that turn joined it (sent while it ran: the Timeline then says what the box says)."""
        if future.cancelled() or future.exception() is not None:  # it failed: no matter
            return
        info = dataclasses.asdict(future.result())
        with self._lock:
            if future is self._joined:
                self._own_prewarm = info
                self._give_live_prewarm(info)
            elif number != self._drafts:  # a newer draft came
                return
            else:
                self._unused_prewarm = info
        self.prewarm = info
        self.send(PrewarmedMessage(type="prewarmed", prewarm=info))

    def _give_live_prewarm(self, info: dict[str, Any]) -> None:
        """The joined prewarm's figures go to the live turn (its account is derived again with them)."""
        live, own = self.live, self._own.seen()[:1] if self._own is not None else []
        if live is not None and own and live["turn_id"] == own[0].turn_id and live.get("prewarm") is None:
            self.live = {**live, "prewarm": info}
            self._accounts.pop(live["turn_id"], None)

    def _fetch(self, message: FetchRequest) -> None:
        """A view that lacks a turn's events (it reloaded, mid-stream or not; it was opened after the turn; the
        user picked the turn): the turn's events after the last sequence number it has, with their pieces and the
        turn's account, in one `events` message (only that turn's)."""
        turn_id, after = message["turn_id"], message["after"]
        with self._lock:
            held = self._events.get(turn_id)
            if held is None:
                raise LookupError(f"no turn {turn_id!r} in this panel (a new session has begun since?)")
            events = [e for e in held if e.sequence_number > after]
            recorded = self._pieces.get(turn_id)
            shown = pieces(self.chat, events) if recorded is None else recorded
            self.send(EventsMessage(type="events", turn_id=turn_id, events=[e.to_dict() for e in events],
                                    pieces=shown, account=self._account(turn_id)))  # fmt: skip

    def _attention_request(self, message: AttentionRequest) -> None:
        request_id = message["request_id"]
        try:
            events = self._events_of(message["turn_id"])
        except AttentionRequestError as error:
            self._attention_error(request_id, error)
            return
        job = self.chat.submit(self._attention_job, message, events)
        job.add_done_callback(lambda done: self._attention_failed(done, request_id))

    def _attention_failed(self, job: concurrent.futures.Future[None], request_id: str) -> None:
        error = job.exception()
        if error is not None:
            self._attention_error(request_id, error)

    def _attention_error(self, request_id: str, error: BaseException) -> None:
        self.send(AttentionErrorMessage(type="attention_error", request_id=request_id, message=str(error)))

    def _attention_job(self, message: AttentionRequest, events: list[Event]) -> None:
        """On the engine thread: the layer's attention over the turn, cut and sent."""
        reply, data = self._attention.reply(self.chat.model, message, events)
        self.send(reply, buffers=[data])

    def _look(self, message: LensRequest | WhyRequest) -> None:
        """A look inside a finished turn (`inside_requests.py`): the lens over its answer, or why one of its tokens;
        computed on the engine thread, with progress messages, then a `lens` / `why` or `inside_error` reply."""
        with self._lock:
            events = self._events.get(message["turn_id"])
        self._looks.request(message, None if events is None else list(events))

    # ---- the live turn: the chat's events, as the relay hands them on ------------------------------------------

    def _check_idle(self) -> None:
        if self.loading:
            raise RequestError("A model is loading: wait for it to finish (the settings say how far it is).")
        own = self._own
        if own is not None and not any(isinstance(e, TERMINAL) for e in own.seen()):
            raise RequestError("A turn is still generating: press Stop, or wait for it to end.")

    def _started(self, response: Response, text: str | None = None) -> Response:
        """A turn sent from here: its prewarm is the draft's that ran before it, or, when that draft's prewarm of
        the same text still runs (a long paste sent at once), that prewarm: the turn joins it (`Chat.send` lets it
        run, and the scheduler starts the turn's prefill from its keys and values)."""
        job = self._draft_job
        running = job is not None and text is not None and job[1] == text and not job[2].done()
        self._joined = job[2] if running and job is not None else None
        self._own, self._own_prewarm = response, None if running else self._unused_prewarm
        self._unused_prewarm = None
        self.error, self.status = "", "generating"
        response.start()
        return response

    def _show(self, events: list[Event]) -> None:
        """On the relay's thread: a batch of the chat's events, turn by turn, to the front end and the traits."""
        with self._lock:
            for turn_id, group in by_turn(events):
                self._show_turn(turn_id, group)
        if any(isinstance(e, (*TERMINAL, TitleGenerated)) for e in events):
            self._refresh_fallback()

    def _show_turn(self, turn_id: str, events: list[Event]) -> None:
        """A turn begins (`TurnStarted`), streams, ends at its terminal event; late events (the title) join it."""
        if isinstance(events[0], TurnStarted):
            self._begin(events[0])
        if turn_id not in self._events:  # it began before this panel was made, or in a session since left
            return
        self._events[turn_id] += events
        self._send_events(turn_id, events, pieces(self.chat, events, self._known.setdefault(turn_id, set())))
        live = self.live is not None and self.live["turn_id"] == turn_id
        if live and any(isinstance(e, TERMINAL) for e in events):
            self._end(turn_id)
        elif not live:
            self._late(turn_id, events)
        self.title = next((e.title for e in events if isinstance(e, TitleGenerated)), self.title)

    def _begin(self, started: TurnStarted) -> None:
        if started.session_id != self._session_id:  # a new session (from here or elsewhere): the log starts afresh
            self._session_id, self._events, self._accounts, self._pieces = started.session_id, {}, {}, {}
            self._copy.clear()
            self.turns, self.title = [], ""
        first = self._own.seen()[:1] if self._own is not None else []
        own = bool(first) and first[0].turn_id == started.turn_id
        self._events[started.turn_id] = []
        self._known = {started.turn_id: set()}  # (later events of earlier turns, a title, carry no tokens)
        self._account_sent = {}
        self.live = dict(LiveTurn(turn_id=started.turn_id, prewarm=self._own_prewarm if own else None,
                                  fork_of=started.fork_of))  # fmt: skip
        self.session, self.status = self.chat.session.name, "generating"
        self._watch_compiling()

    def _watch_compiling(self) -> None:
        """While a turn is live, say what XLA compiles (a kernel's first turn compiles for seconds, silently
        otherwise), every `COMPILE_TICK_S`, on a thread of its own that ends with the turn."""
        if self._compile_clock is not None and self._compile_clock.is_alive():
            return

        def tick() -> None:
            while self.live is not None:
                now = compiling()
                if now != self.compiling:
                    self.compiling = now
                time.sleep(COMPILE_TICK_S)
            self.compiling = ""

        self._compile_clock = threading.Thread(target=tick, name="chatflow-panel-compile", daemon=True)
        self._compile_clock.start()

    def _end(self, turn_id: str) -> None:
        joined = self._joined
        if joined is not None and concurrent.futures.wait([joined], JOIN_WAIT_S).done and not joined.exception():
            self._give_live_prewarm(dataclasses.asdict(joined.result()))  # (if its callback has not yet)
        prewarm = (self.live or {}).get("prewarm")
        events = self._events[turn_id]
        self.turns = [*self.turns, dict(row(turn_id, events, self._account(turn_id), prewarm))]  # (not its events)
        self._copy.add(turn_id, events, prewarm)
        self.live = None  # type: ignore[assignment]  # traitlets: allow_none
        if self.chat.abilities.server:  # the server's model is known once a turn has asked for it
            self.model_info = dict(model_info(self.chat))
        self._check_status()

    def _late(self, turn_id: str, events: list[Event]) -> None:
        """Events that follow a turn's end (the session's title) went out as messages; its row changes only if its
        figures did, and its part of the static copy is rendered again."""
        held = next((t for t in self.turns if t["turn_id"] == turn_id), None)
        if held is None:
            return
        fresh = dict(row(turn_id, self._events[turn_id], self._account(turn_id), held["prewarm"]))
        if fresh != held:
            self.turns = [fresh if t["turn_id"] == turn_id else t for t in self.turns]
        self._copy.add(turn_id, self._events[turn_id], held["prewarm"])

    def _check_status(self) -> None:
        if self.loading:  # (a turn from elsewhere ended while a model loads: still loading)
            return
        own = self._own
        waiting = own is not None and not any(isinstance(e, TERMINAL) for e in own.seen())
        self.status = "generating" if waiting else "idle"

    def _send_events(self, turn_id: str, events: list[Event], pieces: dict) -> None:
        """A batch of a turn's events, with the turn's account when it is due: every `ACCOUNT_EVERY_S` while it
        streams (a long answer's account is tens of kB, and the panel redraws its figures as often), and with
        every batch that holds a new round's context (its gauge is the account's: the Context tab draws it at once,
        not after a cold prefill's compile), the turn's end or its title."""
        now, last = time.monotonic(), self._account_sent.get(turn_id, 0.0)
        ends = any(isinstance(e, (*TERMINAL, TitleGenerated, ContextAssembled)) for e in events)
        due = ends or now - last >= ACCOUNT_EVERY_S
        if due:
            self._account_sent[turn_id] = now
        self.send(EventsMessage(type="events", turn_id=turn_id, events=[e.to_dict() for e in events], pieces=pieces,
                                account=self._account(turn_id) if due else None))  # fmt: skip

    def _account(self, turn_id: str) -> dict[str, Any]:
        """The account of the turn's events so far (with the prewarm that ran before it, if any), derived once
        per count of events: the live turn's last batch and its row share it. Only the latest one asked for is
        kept (a fetch of an earlier turn derives that turn's again)."""
        events = self._events.get(turn_id, [])
        held = self._accounts.get(turn_id)
        if held is not None and held[0] == len(events):
            return held[1]
        live = self.live if self.live is not None and self.live.get("turn_id") == turn_id else None
        shown = next((t for t in self.turns if t["turn_id"] == turn_id), None)
        account = account_of(events, (live or shown or {}).get("prewarm")).to_dict()
        self._accounts = {turn_id: (len(events), account)}
        return account

    def _refresh_fallback(self) -> None:
        """The static copy (nbconvert, GitHub) follows the conversation. Only the copy's display is updated: an
        update of the panel's own display would make the front end build a new view (tab, scroll, open popover
        lost at every turn's end)."""
        data, metadata = self.static_bundle()
        for handle in self._displays:
            handle.update(data, metadata=metadata, raw=True)

    def _events_of(self, turn_id: str) -> list[Event]:
        with self._lock:
            events = self._events.get(turn_id)
        if events is None:
            raise AttentionRequestError(f"No turn {turn_id!r} in this panel.")
        return list(events)

    def __repr__(self) -> str:
        """Also the panel output's text/plain (where no widget runs): the static copy beside it has the turns."""
        return f"ChatWidget(session={self.session!r}): the inspector panel; its turns are in the copy below"

    # ---- display: the live panel, and a static copy for nbconvert, nbviewer and GitHub -------------------------

    def static_bundle(self) -> tuple[dict[str, str], dict]:
        """The conversation as a static copy for nbconvert, nbviewer and GitHub (`turn_rows.StaticCopy`: each turn
        rendered once, when it ended)."""
        return self._copy.bundle(self.session, self.title, self.model_id), {}

    def _ipython_display_(self) -> None:
        """Two outputs: the live panel (never updated from the kernel, so its view is never rebuilt) and its
        static copy, updated when a turn ends."""
        data, metadata = self._repr_mimebundle_() or ({}, {})
        display(data, metadata=metadata, raw=True)
        copy, copy_metadata = self.static_bundle()
        self._displays.append(display(copy, metadata=copy_metadata, raw=True, display_id=True))
