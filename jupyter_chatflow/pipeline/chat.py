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

`Chat(base_url="http://127.0.0.1:8000/v1", api_key=…)` sends each turn to an OpenAI-compatible server instead of
the local model (which is then never loaded): see `remote.py`.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from jupyter_chatflow.engine.generation import Step
from jupyter_chatflow.engine.model import Model
from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.events import TERMINAL, Completed, ContextAssembled, Emitter, Event, TitleGenerated, TurnStarted
from jupyter_chatflow.store.database import Database
from jupyter_chatflow.store.memory import Memory
from jupyter_chatflow.store.sessions import Sessions, TurnRecord
from jupyter_chatflow.store.telemetry import Telemetry, turn_record

from .chat_model import local_model, shared_scheduler
from .fork import fork_request
from .keeper import TurnKeeper
from .remote import RemoteTurn, prompted_user_text, remote_title
from .remote_server import RemoteServer, RemoteSetup
from .request import ChatRequest, RequestError
from .response import Response, WrittenLog
from .safety import SafetyPolicy
from .safety.pii import redact
from .safety.policy import REMOTE_NOTE
from .stages import turn_policy
from .title import write_title
from .title_task import TitleTask
from .tools import Toolbox
from .tools.decode import forced_call_problem
from .turn import Turn, TurnSetup, default_system

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
    ):
        self.remote = RemoteServer(base_url, api_key, model if isinstance(model, str) else None) if base_url else None
        """The OpenAI-compatible server the turns go to (`base_url`; `model` may name its model), or None."""
        self._model = None if self.remote else local_model(model)
        own = None if self._model is None else scheduler or shared_scheduler(self._model)
        self.scheduler: Scheduler | None = own
        """Runs the generations (answers, the title, prewarms): the one every chat on this model shares, or the
        one passed (a server's); None for a remote chat."""
        self._own_scheduler = scheduler is None  # (a scheduler passed in, a server's, stays with its model)
        self._asked_window = context_window
        self.context_window = 0 if self._model is None else _window(context_window, self._model.config.context_length)
        """The tokens a turn's prompt and answer may take: the model's window, or less (to see trimming early); 0 for
        a remote chat (the server's window applies)."""
        self.db = db if isinstance(db, Database) else Database(db)
        self.sessions, self.memory = Sessions(self.db), Memory(self.db)
        self.telemetry = Telemetry(self.db)
        self.toolbox = toolbox or Toolbox.builtin(namespace=namespace, memory=self.memory)
        # (remote: the server's template decides)
        self.system = system or ("" if self._model is None else default_system(self._model.tokenizer.chat_template))
        self.persist = persist
        self.policy = policy or SafetyPolicy()  # (its lexicon is built now, not in the first turn's time)
        """Guards and PII actions of the safety layers (e.g. with `ModelGuard`); the request picks the mode. The
        input layer's intent probe is the one trained for the chat's model (`SafetyPolicy.with_model`); a remote chat
        has no local model to read with: its input layer is the rules alone, and its decisions say so."""
        if self._model is not None:
            self.policy = self.policy.with_model(self._model)
        else:
            self.policy = self.policy.without_model(REMOTE_NOTE)
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
    def model(self) -> Model:
        """The local model; a remote chat (`base_url=`) has none."""
        if self._model is None:
            raise ChatflowError(f"This chat's turns go to {self.remote.base_url if self.remote else 'a server'}: "
                                "it has no local model (the remote server does not provide one).")  # fmt: skip
        return self._model

    def use_model(self, model: Model) -> None:
        """Run this chat's next turns on `model`: the session, its history, memory, tools and settings stay (a turn
        already running ends on the model it began on). Called on the engine thread (`submit`), it comes after the
        turns queued before it. A `ModelGuard` in the policy keeps scoring with the model it was given. The default
        system prompt follows the model (SmolLM2's own is not Gemma's: told it was SmolLM, Gemma said so); one the
        chat was given stays."""
        if self.remote is not None or not self._own_scheduler:
            where = "go to a server, whose model is the server's" if self.remote else "run on a scheduler passed in"
            raise ChatflowError(f"This chat's turns {where}: make a new Chat(model=…) to use another model.")
        window = model.config.context_length
        self.context_window = _window(None if self._asked_window is None else min(self._asked_window, window), window)
        if self._model is not None and self.system == default_system(self._model.tokenizer.chat_template):
            self.system = default_system(model.tokenizer.chat_template)  # (a given one stays)
        if self.scheduler is not None and self.scheduler.model is not model:
            self.scheduler.rest()  # the old model goes once nothing else holds it (it held 1.3 GB 30 s longer)
        self._model, self.scheduler = model, shared_scheduler(model)
        self.policy = self.policy.with_model(model)

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
        self._check_call_room(request, tools)
        log = WrittenLog(lambda: self._submit(self._run, request, tools, log, cancel), cancel)
        self._current = cancel
        return Response(log)

    def fork(self, turn_id: str, index: int, token_id: int) -> Response:
        """Regenerate the latest turn's answer from its token `index`, with `token_id` (one of the alternatives the
        sampler saw there) in its place. The answer before it is kept and comes from the prompt cache, so only the
        new token is computed. The fork is a new turn (`fork_of` set) that replaces the forked one in the history.
        """
        active = self._active()
        if not active or active[-1].id != turn_id:
            raise RequestError("Only the latest turn of the session can be forked (later turns build on it).")
        parent = active[-1]
        request, prefix = fork_request(parent, index, token_id, self.model.tokenizer, self.session.name)
        tools, cancel, history = self._tools(request), threading.Event(), self._history(exclude=parent.id)
        log = WrittenLog(lambda: self._submit(self._run, request, tools, log, cancel, history, prefix), cancel)
        self._current = cancel
        return Response(log)

    def prewarm(self, text: str, **options: Any) -> Future[Prewarm]:
        """Put the prompt that `text` would make into the prompt cache (a draft being typed: the turn that sends it
        then prefills only what changed). Options as `send`. It runs beside the turns, never before one: a newer
        draft, or a send of other text, cancels it."""
        request, cancel = self._request(text, options), threading.Event()
        if self.remote is not None:
            raise ChatflowError("A remote chat cannot prewarm: the prompt cache is the server's.")
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
        window = None if self._model is None else self._model.config.context_length  # remote: the server checks
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
             history: list | None = None, prefix: tuple[Step, ...] = (), *, submitted: float) -> None:  # fmt: skip
        """On the worker thread: run the turn, stamping each event; store the turn before its last event goes out.
        A session's first answer gets the session's title written beside it (`TitleTask`): mid-answer, or after
        the end for a short answer (a late event); the engine is done with the turn once the title is out."""
        emitter, lock = Emitter(f"turn_{uuid.uuid4().hex[:16]}"), threading.Lock()
        log: list[Event] = []
        kept = TurnKeeper(self.sessions if self.persist else None, self.session.id, out.note)

        setup = self._setup(request, tools, self._history() if history is None else history, prefix)
        setup.queued_ms = (time.perf_counter() - submitted) * 1000
        title = TitleTask(self._title_writer(request), lambda event: emit(event))

        def emit(event: Event) -> None:  # from the turn's thread, and the title's
            with lock:
                late = bool(log) and isinstance(log[-1], TERMINAL)  # after the turn's end (it is stored)
                log.append(stamped := emitter(event))
                if isinstance(stamped, TERMINAL):
                    if problem := self._store(log):
                        out.note(problem)  # (warned to the reader once it has read the end, not inside the answer)
                elif not late:
                    kept.see(log)
                out.append(stamped)
                self._tell(stamped)
            if isinstance(stamped, TitleGenerated):
                self._titled(log[0], stamped, late)
            elif isinstance(setup, TurnSetup) and setup.needs_title:
                title.see(stamped)

        try:
            if isinstance(setup, RemoteSetup):
                RemoteTurn(setup, request, emit, cancel).run()
                self._remote_title(log, emit, request)
            else:
                Turn(setup, request, emit, cancel).run()
                if setup.needs_title:
                    title.finish(log[-1])
        finally:
            out.end()  # readers never wait forever, whatever happened

    def _remote_title(self, log: list[Event], emit: Callable[[Event], None], request: ChatRequest) -> None:
        """A remote session's first completed answer: its title from the user's words, after the answer."""
        last = log[-1] if log else None
        user = prompted_user_text(log)
        if not self.persist or self.session.title or not isinstance(last, Completed) or user is None:
            return
        if last.finish_reason != "content_filter" and (event := remote_title(user, self._policy(request))) is not None:
            emit(event)

    def _policy(self, request: ChatRequest) -> SafetyPolicy:
        return turn_policy(self.policy, request.features.safety)

    def _title_writer(self, request: ChatRequest) -> Callable[[str, str, threading.Event], TitleGenerated | None]:
        """Title the session from what the model saw (the redacted message) and showed (the answer so far)."""
        policy = self._policy(request)
        return lambda user, answer, cancel: write_title(self.model, user, answer, policy, cancel, self.scheduler)

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

    def _check_call_room(self, request: ChatRequest, tools: list) -> None:
        """A RequestError when the call a forced tool_choice asks for cannot fit in max_tokens (a remote chat's
        server says so itself)."""
        if self._model is None:
            return
        model, choice = self._model, request.features.tool_choice
        problem = forced_call_problem(model.tokenizer, tools, choice=choice, max_tokens=request.params.max_tokens,
                                      vocab_size=model.config.vocab_size)  # fmt: skip
        if problem:
            raise RequestError(problem)

    def _tools(self, request: ChatRequest) -> list:
        """The tools the request names, from this chat's toolbox."""
        return self.toolbox.resolve(",".join(request.features.tools)) if request.features.tools else []

    def _setup(
        self, request: ChatRequest, tools: list, history: list, prefix: tuple[Step, ...] = ()
    ) -> TurnSetup | RemoteSetup:
        if self.remote is not None:
            return RemoteSetup(server=self.remote, session_id=self.session.id, system=self.system, history=history,
                               memory=self.memory if request.features.memory else None, tools=tools,
                               policy=self.policy)  # fmt: skip
        return TurnSetup(
            model=self.model, session_id=self.session.id, system=self.system, history=history,
            memory=self.memory if request.features.memory else None, tools=tools,
            needs_title=self.persist and not self.session.title and not request.fork_of,  # unstored: no title
            policy=self.policy, prefix=prefix, window=self.context_window, engine=self.scheduler,
        )  # fmt: skip

    def _prewarm(self, request: ChatRequest, cancel: threading.Event) -> Prewarm:
        """On the prewarm thread: the turn's stages up to the prompt ids (no events kept), then their prefill on
        the scheduler (a one-token generation: its keys/values stay in the prompt cache)."""
        started = time.perf_counter()
        setup = self._setup(request, self._tools(request), self._history())
        assert isinstance(setup, TurnSetup) and self.scheduler is not None  # (a remote chat does not prewarm)
        ids, computed = Turn(setup, request, lambda _: None, cancel).prompt_ids(), 0
        if ids and not cancel.is_set():
            prefill = self.scheduler.submit(ids, SamplingParams(temperature=0.0, max_tokens=1), cancel=cancel)
            list(prefill)
            computed = 0 if prefill.finish_reason == "cancelled" else len(ids) - prefill.usage.reused_tokens
        ms = (time.perf_counter() - started) * 1000
        return Prewarm(chars=len(request.text), prompt_tokens=len(ids), computed_tokens=computed,
                       cached_before=len(ids) - computed, latency_ms=ms)  # fmt: skip

    def _drop_prewarm(self, unless: str | None = None) -> None:
        """Cancel the latest draft's prewarm (unless it is of the text now sent: the send reuses its prefill)."""
        if self._prewarming is not None and self._prewarming[0] != unless:
            self._prewarming[1].set()
        self._prewarming = None

    def _active(self) -> list[TurnRecord]:
        """The session's turns without those a fork replaced."""
        records = self.history()
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
        name = (self.remote.model or "") if self.remote else self.model.config.name
        self.telemetry.log(turn_record(events, model=name, redact=redact))


def _prompted_user_text(record: TurnRecord) -> str | None:
    """The user's message as it went into the prompt (its `user` segment), or None if no prompt was built."""
    context = next((e for e in record.events if isinstance(e, ContextAssembled)), None)
    if context is None:
        return prompted_user_text(record.events)  # a remote turn's: what its request carried
    return context.user_text if context.user_text is not None else record.user


def _window(asked: int | None, model_window: int) -> int:
    if asked is None:
        return model_window
    if isinstance(asked, bool) or not isinstance(asked, int) or not 16 <= asked <= model_window:
        raise RequestError(f"context_window must be a whole number from 16 to the model's window ({model_window}), "
                           f"got {asked!r}")  # fmt: skip
    return asked
