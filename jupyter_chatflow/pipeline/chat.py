"""`Chat`: a conversation with the model, turn by turn; `send` returns the turn's `Response` (its events).

>>> import jupyter_chatflow as cf
>>> chat = cf.Chat(session="demo")
>>> response = chat.send("What is the capital of France?", temperature=0.7)
>>> for event in response:
...     if event.type == "token":
...         print(event.text, end="")
>>> response.text()

Turns run on one engine worker thread (the caller's thread stays free: a widget's Stop is handled while tokens
stream); their generations, the session's title and prewarms run on the chat's `Scheduler`, batched together
(the title is written beside the answer; a prewarm never holds up a send). Iterating a Response waits for its
events; Ctrl-C / Kernel → Interrupt while waiting stops the turn (the KeyboardInterrupt still reaches the caller)
and the Response ends with a `Cancelled` event that keeps the partial answer: iterate it again to read the rest.

Who answers is the chat's `Answerer` (`answerer.py`), picked here once: the local model (`local.py`), or with
`Chat(base_url="http://127.0.0.1:8000/v1", api_key=…)` an OpenAI-compatible server (`remote.py`; no local model
is then loaded). Everything else a turn does is the same `Turn` (`turn.py`) for either.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from jupyter_chatflow.account import settled
from jupyter_chatflow.engine.generation import Step
from jupyter_chatflow.engine.intervention import Steer
from jupyter_chatflow.engine.model import Model
from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.events import (
    TERMINAL,
    Cancelled,
    Completed,
    ContextAssembled,
    Emitter,
    Event,
    Intervened,
    TitleGenerated,
    TurnStarted,
)
from jupyter_chatflow.store.database import Database
from jupyter_chatflow.store.memory import Memory
from jupyter_chatflow.store.sessions import Sessions, TurnRecord
from jupyter_chatflow.store.telemetry import Telemetry, turn_record

from .answerer import Abilities, Answerer, TurnSetup
from .chat_model import local_model
from .fork import fork_request, intervened_event, repeat_request
from .keeper import TurnKeeper
from .local import LocalAnswerer
from .remote import ServerAnswerer, prompted_user_text
from .remote_server import RemoteServer
from .request import ChatRequest, RequestError
from .response import Response, WrittenLog
from .safety import SafetyPolicy
from .safety.pii import redact
from .tools import Toolbox
from .turn import Turn, turn_policy

STOPPED_MARK = " [stopped]"
T = TypeVar("T")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Prewarm:
    """A draft's prompt put into the prompt cache before it is sent (see `Chat.prewarm`)."""

    chars: int
    prompt_tokens: int
    computed_tokens: int
    cached_before: int
    """Prompt tokens already cached before the prewarm: a turn that reuses more than these used the prewarm."""
    latency_ms: float


class Chat:
    """A session with the model: history, memory, tools, safety and the prompt cache, kept across turns."""

    def __init__(
        self,
        *,
        model: Model | str | os.PathLike[str] | None = None,
        session: str = "default",
        new: bool = False,
        system: str | None = None,
        db: Database | str | None = None,
        toolbox: Toolbox | None = None,
        namespace: dict[str, Any] | None = None,
        persist: bool = True,
        policy: SafetyPolicy | None = None,
        context_window: int | None = None,
        scheduler: Scheduler | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        answerer: Answerer | None = None,
    ):
        self.answerer: Answerer = answerer or _answerer(model, scheduler, context_window, base_url, api_key)
        """Who writes the model's part of each turn: the local model, the server at `base_url` (`model` may then
        name the server's model), or the one passed (a scripted one in tests). The front ends ask its `abilities`."""
        self.db = db if isinstance(db, Database) else Database(db)
        self.sessions, self.memory = Sessions(self.db), Memory(self.db)
        self.telemetry = Telemetry(self.db)
        self.toolbox = toolbox or Toolbox.builtin(namespace=namespace, memory=self.memory)
        self.system = system or self.answerer.default_system()
        self.persist = persist
        self.policy = self.answerer.bound(policy or SafetyPolicy())  # (its lexicon is built now, not in a turn)
        """Guards and PII actions of the safety layers (e.g. with `ModelGuard`); the request picks the mode. The
        input layer's intent probe is the one trained for the chat's model (`SafetyPolicy.with_model`); a remote chat
        has no local model to read with: its input layer is the rules alone, and its decisions say so."""
        # an unstored chat's session is not written either (a one-off `chatflow chat` left an empty one each run)
        self.session = self.sessions.open(session, new=new) if persist else self.sessions.unstored(session)
        self.sessions.recover()  # turns a killed process left running: "interrupted", with what they had streamed
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chatflow-engine")
        self._prewarmer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chatflow-prewarm")
        self._prewarming: tuple[str, threading.Event] | None = None  # the latest draft's text and its cancel
        self._current: threading.Event | None = None
        self._unsaved: list[TurnRecord] = []
        self._watchers: list[weakref.WeakMethod] = []

    @property
    def abilities(self) -> Abilities:
        """What this chat's answerer can do (prewarm, fork, attention, the title, the window)."""
        return self.answerer.abilities

    @property
    def model(self) -> Model:
        """The local model; a remote chat (`base_url=`) has none (a ChatflowError says so)."""
        return self.answerer.model

    @property
    def scheduler(self) -> Scheduler | None:
        """Runs the generations (answers, the title, prewarms): the one every chat on this model shares, or the
        one passed (a server's); None for a remote chat."""
        return self.answerer.scheduler

    @property
    def context_window(self) -> int:
        """The tokens a turn's prompt and answer may take: the model's window, or less (to see trimming early); 0 for
        a remote chat (the server's window applies)."""
        return self.answerer.abilities.window

    def use_model(self, model: Model) -> None:
        """Run this chat's next turns on `model`: the session, its history, memory, tools and settings stay (a turn
        already running ends on the model it began on). Called on the engine thread (`submit`), it comes after the
        turns queued before it. A `ModelGuard` in the policy keeps scoring with the model it was given. The default
        system prompt follows the model (SmolLM2's own is not Gemma's: told it was SmolLM, Gemma said so); one the
        chat was given stays."""
        before = self.answerer
        self.answerer = before.with_model(model)  # (a ChatflowError where the turns cannot move: a server's)
        if self.system == before.default_system():
            self.system = self.answerer.default_system()  # (a given one stays)
        self.policy = self.answerer.bound(self.policy)

    @property
    def title(self) -> str:
        """The session's title ("" until the model has written one beside the first answer)."""
        return self.session.title

    def history(self) -> list[TurnRecord]:
        """The session's turns, oldest first (kept in this object only when `persist` is False)."""
        return self.sessions.turns(self.session.id) if self.persist else list(self._unsaved)

    def send(self, text: str, **options: Any) -> Response:
        """Start a turn (lazily: it runs when the Response is first iterated); options as `ChatRequest.build`."""
        request = self._request(text, options)
        self._drop_prewarm(unless=request.text)
        tools, cancel = self._tools(request), threading.Event()
        self.answerer.check(request, tools)  # (a forced call that cannot fit in max_tokens: said before it queues)
        log = WrittenLog(lambda: self._submit(self._run, request, tools, log, cancel), cancel)
        self._current = cancel
        return Response(log)

    def fork(self, turn_id: str, index: int, token_id: int) -> Response:
        """Regenerate the latest turn's answer from its token `index`, with `token_id` (one of the alternatives the
        sampler saw there) in its place. The answer before it is kept and comes from the prompt cache, so only the
        new token is computed. The fork is a new turn (`fork_of` set) that replaces the forked one in the history.
        """
        if not self.abilities.fork:
            raise RequestError(f"This chat's turns go to {self.abilities.where}, which sends no token ids: its "
                               "answers cannot be forked.")  # fmt: skip
        parent = self._latest(turn_id, "forked")
        request, prefix = fork_request(parent, index, token_id, self.model.tokenizer, self.session.name)
        tools, cancel, history = self._tools(request), threading.Event(), self._history(exclude=parent.id)
        log = WrittenLog(lambda: self._submit(self._run, request, tools, log, cancel, history, prefix), cancel)
        self._current = cancel
        return Response(log)

    def intervene(
        self, turn_id: str, *, ablate_heads: Mapping[int, Sequence[int]] | None = None,
        steer: Mapping[int, np.ndarray | Steer] | None = None,
    ) -> Response:  # fmt: skip
        """Answer the latest turn again on this chat's model with attention heads knocked out (`ablate_heads=
        {layer: [heads]}`) or the residual steered (`steer={layer: model.direction(…) * strength}`, or a vector of
        the model's width): `Model.intervened`, which shares the weights and the compiled programs. The new turn is
        a fork of that turn from its start (`fork_of` set): it starts with an `Intervened` event saying what
        changed, and replaces the turn in the history, as a fork does; the model is as it was for later turns."""
        if not self.abilities.fork:
            raise RequestError(f"This chat's turns go to {self.abilities.where}, whose model cannot be changed from "
                               "here: interventions need this process's model.")  # fmt: skip
        parent = self._latest(turn_id, "changed and answered again")
        model = self.model.intervened(ablate_heads, steer)
        assert model.intervention is not None
        if model.intervention.empty:
            raise RequestError("That intervention changes nothing: name heads to knock out, or a steering vector "
                               "that is not zero.")  # fmt: skip
        request = repeat_request(parent, self.session.name)
        answerer = LocalAnswerer(model, window=self.answerer.abilities.window)
        tools, cancel, history = self._tools(request), threading.Event(), self._history(exclude=parent.id)
        run = functools.partial(self._run, answerer=answerer, intervened=intervened_event(model.intervention))
        log = WrittenLog(lambda: self._submit(run, request, tools, log, cancel, history), cancel)
        self._current = cancel
        return Response(log)

    def prewarm(self, text: str, **options: Any) -> Future[Prewarm]:
        """Put the prompt that `text` would make into the prompt cache (a draft being typed: the turn that sends it
        then prefills only what changed). Options as `send`. It runs beside the turns, never before one: a newer
        draft, or a send of other text, cancels it."""
        request, cancel = self._request(text, options), threading.Event()
        if not self.abilities.prewarm:
            raise ChatflowError(f"This chat cannot prewarm: its turns go to {self.abilities.where}, whose prompt "
                                "cache is the server's.")  # fmt: skip
        self._drop_prewarm()
        self._prewarming = (request.text, cancel)
        return self._prewarmer.submit(self._prewarm, request, cancel)

    def _request(self, text: str, options: dict[str, Any]) -> ChatRequest:
        """The validated request; a `session` option must name this chat's session (a turn goes to it)."""
        session = options.setdefault("session", self.session.name)
        if session != self.session.name:
            raise RequestError(
                f"This chat is on session {self.session.name!r}, not {session!r}: use "
                f"cf.Chat(session={session!r}) or chat.new_session({session!r}) to talk in another session."
            )
        window = self.abilities.model_window or None  # (0: the server's window, which it checks)
        return ChatRequest.build(text, window=window, **options)

    def submit(self, work: Callable[..., T], *args: Any) -> Future[T]:
        """Run `work(*args)` on the engine thread, after the turns already queued (e.g. an attention pass)."""
        return self._worker.submit(work, *args)

    def watch(self, method: Callable[[Event], Any]) -> None:
        """Call `method(event)` with every event of every turn of this chat, whoever sent it, in order: a turn's
        events from `TurnStarted` to its terminal event, then its late ones (the session's title). Called on the
        engine thread, once the event is in the turn's `Response` (and a terminal event once the turn is stored):
        keep it short, hand the event on. Held weakly: a panel that is gone is no longer called."""
        self._watchers.append(weakref.WeakMethod(method))

    def stop(self) -> None:
        """Stop the running turn between two decode steps (from any thread)."""
        if self._current is not None:
            self._current.set()

    def close(self) -> None:
        """Take no more turns; the chat's threads end once what is queued has run (a server forgets idle
        conversations this way: one worker thread each, kept otherwise). Its session stays stored."""
        self._drop_prewarm()
        self._prewarmer.shutdown(wait=False, cancel_futures=True)
        self._worker.shutdown(wait=False)

    def reset(self) -> None:
        """Forget this session's turns (memories stay)."""
        self.sessions.reset(self.session.id)
        self._unsaved.clear()

    def new_session(self, name: str | None = None) -> None:
        """Archive the session and start a fresh one with the same (or a new) name."""
        self.session = self.sessions.open(name or self.session.name, new=True)

    def _submit(self, run: Callable[..., None], *args: Any) -> Future[None]:
        """Queue a turn on the engine thread; it learns how long it waited there (`TurnStarted.queued_ms`)."""
        return self._worker.submit(run, *args, submitted=time.perf_counter())

    def _run(self, request: ChatRequest, tools: list, out: WrittenLog, cancel: threading.Event,
             history: list | None = None, prefix: tuple[Step, ...] = (), *, submitted: float,
             answerer: Answerer | None = None, intervened: Intervened | None = None) -> None:  # fmt: skip
        """On the worker thread: run the turn, stamping each event; store the turn before its last event goes out.
        A session's first answer gets the session's title written beside it (`TitleTask`): mid-answer, or after
        the end for a short answer (a late event); the engine is done with the turn once the title is out. The
        turn is this chat's answerer's, or `answerer`'s (an intervened model's: its scheduler rests after)."""
        emitter, lock = Emitter(f"turn_{uuid.uuid4().hex[:16]}"), threading.Lock()
        log: list[Event] = []
        kept = TurnKeeper(self.sessions if self.persist else None, self.session.id, out.note)
        answering = answerer or self.answerer

        setup = self._setup(request, tools, self._history() if history is None else history, prefix)
        setup.queued_ms, setup.intervened = (time.perf_counter() - submitted) * 1000, intervened
        # unstored: no title; a fork keeps its parent's
        needed = self.persist and not self.session.title and not request.fork_of
        title = answering.titler(turn_policy(self.policy, request.features.safety), needed, lambda e: emit(e))

        def emit(event: Event) -> None:  # from the turn's thread, and the title's
            with lock:
                late = bool(log) and isinstance(log[-1], TERMINAL)  # after the turn's end (it is stored)
                log.append(stamped := emitter(event))
                if isinstance(stamped, (Completed, Cancelled)):  # its times and tokens/s: the account's
                    log[-1] = stamped = settled(stamped, log)
                if isinstance(stamped, TERMINAL):
                    if problem := self._store(log):
                        out.note(problem)  # (warned to the reader once it has read the end, not inside the answer)
                elif not late:
                    kept.see(log)
                out.append(stamped)
                self._tell(stamped)
            if isinstance(stamped, TitleGenerated):
                self._titled(log[0], stamped, late)
            else:
                title.see(stamped)

        try:
            Turn(answering, setup, request, emit, cancel).run()
            title.finish(log)
        finally:
            out.end()  # readers never wait forever, whatever happened
            if answerer is not None and answerer.scheduler is not None:
                answerer.scheduler.rest()

    def _titled(self, started: Event, event: TitleGenerated, late: bool) -> None:
        """The title went out (mid-answer, or after a short answer): it goes to the turn's session too, and to
        the stored turn when it came `late` (after the turn's end, when the turn was stored). The session is the
        turn's own: a new one may have begun while the title was written."""
        session_id = started.session_id if isinstance(started, TurnStarted) else self.session.id
        try:
            if not late or self.sessions.add_event(started.turn_id, event):  # else: reset while it was written
                self.sessions.set_title(session_id, event.title)
                if self.session.id == session_id:
                    self.session = self.sessions.get(session_id)
        except Exception as error:
            warnings.warn(f"jupyter_chatflow could not store the session's title ({error}).", stacklevel=1)

    def _tools(self, request: ChatRequest) -> list:
        """The tools the request names, from this chat's toolbox."""
        return self.toolbox.resolve(",".join(request.features.tools)) if request.features.tools else []

    def _setup(self, request: ChatRequest, tools: list, history: list, prefix: tuple[Step, ...] = ()) -> TurnSetup:
        return TurnSetup(session_id=self.session.id, system=self.system, history=history,
                         memory=self.memory if request.features.memory else None, tools=tools, policy=self.policy,
                         prefix=prefix)  # fmt: skip

    def _prewarm(self, request: ChatRequest, cancel: threading.Event) -> Prewarm:
        """On the prewarm thread: the turn's stages up to the prompt ids (no events kept), then their prefill
        (`Answerer.prewarm`: its keys/values stay in the prompt cache)."""
        started = time.perf_counter()
        setup = self._setup(request, self._tools(request), self._history())
        ids, computed = self.answerer.prewarm(Turn(self.answerer, setup, request, lambda _: None, cancel))
        ms = (time.perf_counter() - started) * 1000
        return Prewarm(chars=len(request.text), prompt_tokens=ids, computed_tokens=computed,
                       cached_before=ids - computed, latency_ms=ms)  # fmt: skip

    def _drop_prewarm(self, unless: str | None = None) -> None:
        """Cancel the latest draft's prewarm (unless it is of the text now sent: the send reuses its prefill)."""
        if self._prewarming is not None and self._prewarming[0] != unless:
            self._prewarming[1].set()
        self._prewarming = None

    def _latest(self, turn_id: str, done: str) -> TurnRecord:
        """The session's latest turn, which must be `turn_id`: only it can be forked or answered again."""
        records = self.history()
        active = self._active(records)
        if not any(record.id == turn_id for record in records):
            raise RequestError(f"This session has no ended turn {turn_id!r} (a turn is kept once it has ended: read "
                               "its response to the end first).")  # fmt: skip
        if not active or active[-1].id != turn_id:
            raise RequestError(f"Only the latest turn of the session can be {done} (later turns build on it).")
        return active[-1]

    def _active(self, records: list[TurnRecord] | None = None) -> list[TurnRecord]:
        """The session's turns (`records`, read if not given) without those a fork replaced."""
        records = self.history() if records is None else records
        forked = {e.fork_of for r in records for e in r.events[:1] if isinstance(e, TurnStarted)}
        return [r for r in records if r.id not in forked]

    def _history(self, exclude: str = "") -> list[list[dict[str, str]]]:
        """Earlier turns as the model saw them (the user's text after input redaction); turns the model never
        saw (blocked at the input, failed before the prompt was built) and forked-away turns are left out."""
        turns = []
        for record in self._active():
            if record.id == exclude:
                continue
            user = _prompted_user_text(record)
            if user is None or record.status == "error":
                continue
            answer = record.answer + (STOPPED_MARK if record.status in ("cancelled", "interrupted") else "")
            turns.append([{"role": "user", "content": user}, {"role": "assistant", "content": answer}])
        return turns

    def _store(self, events: list[Event]) -> str:
        """Save the turn and its telemetry record; "" or, when storing failed, what to tell the reader (the answer
        still goes out)."""
        record = TurnRecord.from_events(events, session_id=self.session.id)
        if not self.persist:
            self._unsaved.append(record)
            return ""
        try:
            self._save(record, events)
        except Exception as error:
            return (f"jupyter_chatflow could not store this turn ({error}); the answer is not lost from the output, "
                    "but the session will not remember it.")  # fmt: skip
        return ""

    def _tell(self, event: Event) -> None:
        self._watchers = [ref for ref in self._watchers if ref() is not None]
        for ref in self._watchers:
            method = ref()
            try:
                if method is not None:
                    method(event)
            except Exception as error:  # a watcher's bug must not break the turn
                warnings.warn(f"jupyter_chatflow: a watcher of this chat failed: {error!r}", stacklevel=1)

    def _save(self, record: TurnRecord, events: list[Event]) -> None:
        self.sessions.add_turn(record)
        self.telemetry.log(turn_record(events, model=self.answerer.model_name, redact=redact))


def _prompted_user_text(record: TurnRecord) -> str | None:
    """The user's message as it went into the prompt (its `user` segment), or None if no prompt was built."""
    context = next((e for e in record.events if isinstance(e, ContextAssembled)), None)
    if context is None:
        return prompted_user_text(record.events)  # a remote turn's: what its request carried
    return context.user_text if context.user_text is not None else record.user


def _answerer(model: Model | str | os.PathLike[str] | None, scheduler: Scheduler | None, window: int | None,
              base_url: str | None, api_key: str | None) -> Answerer:  # fmt: skip
    """Who answers a chat made without one: the server at `base_url` (no local model is loaded then; `model` may
    name the server's), else the local model."""
    if base_url:
        return ServerAnswerer(RemoteServer(base_url, api_key, model if isinstance(model, str) else None))
    return LocalAnswerer(local_model(model), scheduler, window)
