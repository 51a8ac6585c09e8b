"""The IPython magics: `%%chat` / `%chat` send a turn and stream it into the cell; the others manage the session.

    %load_ext jupyter_chatflow

    %%chat --session demo --temperature 0.7
    What is the capital of France? Also, remember that I prefer short answers.

Defaults are traitlets: `%config ChatMagics.temperature = 0.5`. This module only parses arguments and hands
them on; the turn itself is `Chat.send`, the cell's output `render.TurnView`.

`%%chat --server http://127.0.0.1:8000/v1` (or `%config ChatMagics.server = …`) sends the turn to an
OpenAI-compatible server instead of the local model; its key comes from `--api-key`, `ChatMagics.api_key`,
`$CHATFLOW_API_KEY` or `$OPENAI_API_KEY`, and is never shown (`%config ChatMagics` prints it masked).
"""

from __future__ import annotations

import re
import sys
import threading
import time
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import Markdown, Pretty, display
from traitlets import Bool, Enum, Int, TraitType, Unicode
from traitlets.config import Configurable

from jupyter_chatflow.engine.loader import DTYPES, WEIGHTS, load_model
from jupyter_chatflow.engine.model import Model
from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.events import Cancelled, Event
from jupyter_chatflow.model.files import resolve_model_path
from jupyter_chatflow.model.memory import footprint
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.pipeline.request import ChatRequest
from jupyter_chatflow.pipeline.response import Response
from jupyter_chatflow.pipeline.safety import ModelGuard, SafetyPolicy
from jupyter_chatflow.pipeline.wire import mask_key
from jupyter_chatflow.settings import OPTIONS

from ..options import add_flags, options_given, trait
from ..progress import CompileWatch, LoadProgress, StatusLine
from .model_card import cache_dir, model_card
from .render import TurnView

UPDATE_EVERY_S = 0.05  # redraw the streaming answer at most this often
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_]\w*)\}")


def _option_flags(magic: Any) -> Any:
    """The `%%chat` flags of every option of a turn (`settings.OPTIONS`), as `chatflow chat` has them."""
    add_flags(lambda *flags, **kwargs: argument(*flags, **kwargs)(magic))
    return magic


class Secret(str):
    """A key that prints masked (`sk-…abcd`): `%config ChatMagics` and reprs never show it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(mask_key(self)) if self else "''"


class SecretUnicode(TraitType[str, str]):
    """A Unicode trait whose value is a `Secret`."""

    default_value = Secret("")
    info_text = "a key (shown masked)"

    def validate(self, obj: Any, value: Any) -> Secret:
        if not isinstance(value, str):
            self.error(obj, value)
        return Secret(value)


TurnOptions: type[Configurable] = type("TurnOptions", (Configurable,), {o.name: trait(o) for o in OPTIONS})
"""`%config ChatMagics.<name>` for every option of a turn: this kernel's defaults for %%chat."""


@magics_class
class ChatMagics(Magics, TurnOptions):  # type: ignore[misc,valid-type]
    """`%%chat`, `%chat`, `%chat_memory`, `%chat_history`, `%chat_reset`, `%chat_tokens`, `%chat_model`."""

    session = Unicode("default", help="Session name used when --session is not given.").tag(config=True)
    system = Unicode("", help="System prompt ('' keeps the model's default).").tag(config=True)
    format = Enum(["markdown", "text", "code"], "markdown", help="How the answer is shown.").tag(config=True)
    model_guard = Bool(False, help="Also score input and answers with the loaded model (Llama-Guard-style).").tag(
        config=True
    )
    model_path = Unicode("", help="GGUF file to load ('' = the default model).").tag(config=True)
    dtype = Enum(["", *DTYPES], "", help="What the weights are dequantized to ('' = the "
                 "backend's default: float32 on CPU, bfloat16 on GPU); bfloat16 takes half the memory.").tag(
        config=True
    )  # fmt: skip
    devices = Int(0, help="Devices to spread the weights and KV caches over (a tensor-parallel mesh; 0 or 1 = one "
                  "device). On CPU, start the kernel with XLA_FLAGS=--xla_force_host_platform_device_count=N.").tag(
        config=True
    )  # fmt: skip
    weights = Enum(["", *WEIGHTS], "", help="How the weights are held ('' = float: dequantized to "
                   "dtype; as-file: the GGUF's own quantized blocks; int8: per output row). The quantized ones take a "
                   "quarter to an eighth of the memory but decode slower on CPU.").tag(config=True)  # fmt: skip
    server = Unicode("", help="An OpenAI-compatible server's URL (http://host:8000/v1) the turns go to instead of the "
                     "local model ('' = the local model).").tag(config=True)  # fmt: skip
    api_key = SecretUnicode(help="The --server's key ('' = $CHATFLOW_API_KEY or $OPENAI_API_KEY); shown masked.").tag(
        config=True
    )

    def __init__(self, shell: Any = None, **kwargs: Any):
        super().__init__(shell=shell, **kwargs)
        self._model: Model | None = None
        self._chats: dict[str, Chat] = {}
        self._status: StatusLine | None = None  # the current cell's status line (loading, compiling)
        self._loaded = ""  # "loaded … in 0.2 s", said once, in the cell that loaded the model

    # ---- %%chat / %chat ----------------------------------------------------------------------------------------

    @magic_arguments()
    @argument("--session", help="Session name: the conversation continues across cells and kernel restarts.")
    @argument("--new", action="store_true", help="Start the session afresh (the old one is archived).")
    @argument("--system", help="System prompt for this session.")
    @argument("--server", metavar="URL", help="Send the turn to this OpenAI-compatible server (…/v1).")
    @argument("--api-key", dest="api_key", metavar="KEY", help="The server's key (never shown).")
    @_option_flags
    @argument("--format", choices=["markdown", "text", "code"])
    @argument("-o", dest="output", metavar="VAR", help="Store the turn's Response in this variable.")
    @argument("--inspect", action="store_true", help="Open the inspector panel (needs the widget).")
    @argument("text", nargs="*", help="The message (%%chat line); in a %%%%chat cell the cell is the message.")
    @line_cell_magic
    def chat(self, line: str, cell: str | None = None) -> None:
        """Send a message to the model and stream the answer here."""
        self._status, self._loaded = StatusLine(_has_display(self.shell)), ""
        try:
            args = parse_argstring(self.chat, line)
            if cell is not None and args.text:
                raise ChatflowError(
                    f"Unexpected words on the %%chat line: {' '.join(args.text)!r}; put them in the cell."
                )
            # IPython has already expanded {name} on the line; the cell body is ours to expand. The message is
            # what the cell says, without the blank lines around it (they would change the prompt's tokens).
            message = self._interpolate(cell) if cell is not None else " ".join(args.text)
            self._send(args, message.strip())
        except UsageError as error:
            print(f"chatflow: {error} (see %chat? for the options)", file=sys.stderr)
        except ChatflowError as error:
            print(f"chatflow: {error}", file=sys.stderr)
        finally:
            self._status = None  # a later magic must not draw into this cell's output

    def _send(self, args: Any, message: str) -> None:
        chat = self._chat(args.session or self.session, new=args.new, system=args.system, server=args.server,
                          api_key=args.api_key)  # fmt: skip
        if args.inspect:  # the panel streams the turn; the cell returns at once, so the panel's Stop is heard
            return self._inspect(chat, message, args)
        response = chat.send(message, **self._options(args))
        if args.output:
            self._namespace()[args.output] = response
        fmt = args.format or self.format
        session = chat.session.name + ("" if args.session else " (no --session: shared by every %%chat without one)")
        local = not chat.abilities.server  # (a server's turn compiles nothing here)
        first = local and not chat.model.runner.has_decoded()
        view = self._stream(response, fmt, TurnView(session=session), local=local, first=first)
        if fmt == "code" and view.end is not None and self.shell is not None:
            self.shell.set_next_input(_code_of(view.text), replace=False)

    def _inspect(self, chat: Chat, message: str, args: Any) -> None:
        from ..panel.widget import ChatWidget

        options = self._options(args)
        window = chat.abilities.model_window or None  # (0: the server checks max_tokens itself)
        request = ChatRequest.build(message, window=window, **options)  # mistakes first
        settings = {**options, "tools": list(request.features.tools), "stop": list(request.params.stop)}
        panel = ChatWidget(chat, settings=settings)
        display(panel)
        response = panel.ask(message)
        if args.output:
            self._namespace()[args.output] = response

    def _options(self, args: Any) -> dict[str, Any]:
        """Every option of the turn: the cell's flag where given, else this kernel's `%config` trait."""
        flags = options_given(args)
        return {o.name: flags.get(o.name, getattr(self, o.name)) for o in OPTIONS}

    def _stream(self, response: Response, fmt: str, view: TurnView, *, local: bool = True,
                first: bool = False) -> TurnView:  # fmt: skip
        """Show events as they arrive; Kernel → Interrupt stops the turn and keeps what was written. Above the
        answer, the status line says what XLA compiling cost (a clock while a kernel's `first` turn compiles: the
        model's programs have not decoded in this process yet, through a cell, a panel or code)."""
        status = self._status or StatusLine(_has_display(self.shell))
        loaded = self._loaded if status.rich else ""  # a terminal has printed it already
        watch = CompileWatch(status, lambda: view.account, first_turn=first, cache=cache_dir(), before=loaded,
                             local=local)  # fmt: skip
        self._loaded = ""
        with watch:
            handle = display(Markdown("…"), display_id=True) if status.rich else None
            drawn = 0.0

            def show(event: Event) -> None:
                nonlocal drawn
                watch.see(event)
                view.add(event)
                if handle is None:
                    _print_token(event)
                elif time.monotonic() - drawn > UPDATE_EVERY_S or view.end is not None:
                    handle.update(_bundle(view, fmt))
                    drawn = time.monotonic()

            response.follow(show)
            if handle is None:
                ending = "\n[stopped]" if isinstance(view.end, Cancelled) else ""
                print(ending + "\n\n" + "\n".join(view.details()))
            else:  # a title still being written (after a short answer): the cell is done, its display shows it later
                threading.Thread(target=_show_late, args=(response, view, handle, fmt), daemon=True).start()
        return view

    # ---- the other magics --------------------------------------------------------------------------------------

    @line_magic
    def chat_memory(self, line: str) -> None:
        """%chat_memory [list] | remember TEXT | forget TEXT_OR_ID | clear"""
        verb, _, rest = line.strip().partition(" ")
        memory = self._chat(self.session).memory
        try:
            if verb in ("", "list"):
                records = memory.list()
                print("\n".join(f"#{r.id}  {r.text}" for r in records) or "(no memories)")
            elif verb == "remember":
                print(f"remembered #{memory.remember(rest)}")
            elif verb == "forget":
                ids = memory.forget(int(rest) if rest.strip().isdigit() else rest)
                print(f"forgot {', '.join(f'#{i}' for i in ids) or 'nothing'}")
            elif verb == "clear":
                print(f"forgot all {memory.clear()} memories")
            else:
                print("usage: %chat_memory [list] | remember TEXT | forget TEXT_OR_ID | clear", file=sys.stderr)
        except (ChatflowError, ValueError) as error:
            print(f"chatflow: {error}", file=sys.stderr)

    @line_magic
    def chat_history(self, line: str) -> None:
        """%chat_history [SESSION]: the session's turns."""
        chat = self._chat(line.strip() or self.session)
        for turn in chat.history():
            mark = "" if turn.status == "completed" else f" [{turn.status}]"
            print(f"[{turn.seq}] user: {turn.user}\n    assistant: {turn.answer}{mark}")
        if chat.title:
            print(f"title: {chat.title}")

    @line_magic
    def chat_reset(self, line: str) -> None:
        """%chat_reset [SESSION]: forget the session's turns (memories stay)."""
        chat = self._chat(line.strip() or self.session)
        chat.reset()
        print(f"session {chat.session.name!r} reset")

    @line_magic
    def chat_tokens(self, line: str) -> None:
        """%chat_tokens TEXT: how the model's tokenizer splits TEXT."""
        tokenizer = self._load().tokenizer
        ids = tokenizer.encode(self._interpolate(line))
        print(f"{len(ids)} tokens")
        print(" ".join(f"{tokenizer.piece(i)!r}:{i}" for i in ids))

    @magic_arguments()
    @argument("--dtype", choices=DTYPES,
              help="What the weights are dequantized to (default: ChatMagics.dtype, else float32 on CPU, bfloat16 "
                   "on GPU); bfloat16 takes half the memory.")  # fmt: skip
    @argument("--devices", type=int, metavar="N", help="Spread the weights and KV caches over N devices (default: "
              "ChatMagics.devices, else one).")  # fmt: skip
    @argument("--weights", choices=WEIGHTS, help="How the weights are held (default: "
              "ChatMagics.weights, else float).")  # fmt: skip
    @argument("path", nargs="*", help="A GGUF file to load instead of the model in use.")
    @line_magic
    def chat_model(self, line: str) -> None:
        """%chat_model [PATH] [--dtype bfloat16] [--devices N] [--weights as-file]: show the loaded model, or load
        another GGUF file (or the one in use, as --devices/--weights ask), after one line says what it is (if it
        does not load, the model in use stays)."""
        try:
            args = parse_argstring(self.chat_model, line)
            path = " ".join(args.path)
            if path or args.devices is not None or args.weights is not None:
                dtype, devices = args.dtype or self.dtype, self.devices if args.devices is None else args.devices
                weights = args.weights or self.weights
                status = StatusLine(_has_display(self.shell))
                model = self._load_file(path or self.model_path or None, status, dtype, devices, weights)
                self.model_path, self._model, self._chats = path or self.model_path, model, {}
                self.dtype, self.devices, self.weights = dtype, devices, weights
            model = self._load()
        except UsageError as error:
            print(f"chatflow: {error} (see %chat_model? for the options)", file=sys.stderr)
            return
        except (ChatflowError, OSError) as error:
            print(f"chatflow: {error}" + (self._still_in_use() if line.strip() else ""), file=sys.stderr)
            return
        print(model_card(model))

    # ---- helpers -----------------------------------------------------------------------------------------------

    def _load(self) -> Model:
        if self._model is None:
            status = self._status or StatusLine(_has_display(self.shell))
            self._model = self._load_file(self.model_path or None, status, self.dtype, self.devices, self.weights)
        return self._model

    def _load_file(
        self, path: str | None, status: StatusLine, dtype: str = "", devices: int = 0, weights: str = ""
    ) -> Model:
        """Load a model once a line has said what the file is (name, architecture, size, quantization, context,
        memory), its progress drawn on `status` (a bar in Jupyter, lines in a terminal; not stderr). A file that is
        not a supported GGUF, or too large for the memory available, is refused before anything is dequantized."""
        resolved = resolve_model_path(path)
        print(f"chatflow: {footprint(resolved).summary()}", flush=True)
        progress = LoadProgress(status, resolved.name)
        model = load_model(
            path, dtype=dtype or None, devices=devices or None, weights=weights or None, progress=progress
        )
        self._loaded = progress.done()
        return model

    def _still_in_use(self) -> str:
        return f" The model in use is still {self._model.config.name}." if self._model is not None else ""

    def _chat(self, session: str, *, new: bool = False, system: str | None = None, server: str | None = None,
              api_key: str | None = None) -> Chat:  # fmt: skip
        """The session's chat: on the local model, or on `server` (the flag, else `ChatMagics.server`)."""
        url = server or self.server or None
        chat = self._chats.get(f"{session}\n{url or ''}")
        if chat is None or new:
            system = system or self.system or None
            if url:
                if self.model_guard:
                    raise ChatflowError("model_guard scores with the local model: turn it off to use --server.")
                chat = Chat(base_url=url, api_key=api_key or self.api_key or None, session=session, new=new,
                            system=system, namespace=self._namespace())  # fmt: skip
            else:
                model = self._load()
                policy = SafetyPolicy(model_guard=ModelGuard(model=model)) if self.model_guard else None
                chat = Chat(model=model, session=session, new=new, system=system, namespace=self._namespace(),
                            policy=policy)  # fmt: skip
            self._chats[f"{session}\n{url or ''}"] = chat
        elif system:
            chat.system = system
        return chat

    def _namespace(self) -> dict[str, Any]:
        return self.shell.user_ns if self.shell is not None else {}

    def _interpolate(self, text: str) -> str:
        """Replace {name} with the value of `name` in the user's namespace ({{ and }} are literal braces)."""
        namespace = self._namespace()

        def swap(match: re.Match[str]) -> str:
            if match[1] is None:
                return match[0][0]
            if match[1] not in namespace:
                raise ChatflowError(f"{{{match[1]}}} is not a variable in this notebook; define it or write {{{{…}}}}.")
            return str(namespace[match[1]])

        return _PLACEHOLDER.sub(swap, text)


def _show_late(response: Response, view: TurnView, handle: Any, fmt: str) -> None:
    """Add the turn's late events (the session's title) to its display when they arrive."""
    late = response.after_end()
    for event in late:
        view.add(event)
    if late:
        handle.update(_bundle(view, fmt))


def _bundle(view: TurnView, fmt: str) -> Any:
    if fmt == "markdown":
        return Markdown(view.markdown())
    return Pretty(view.plain())


def _has_display(shell: Any) -> bool:
    """True in a Jupyter kernel (a display can be updated in place); False in terminal IPython."""
    return shell is not None and hasattr(shell, "kernel")


def _print_token(event: Any) -> None:
    if event.type == "token":
        print(event.text, end="", flush=True)


def _code_of(text: str) -> str:
    """The code blocks of an answer (or all of it when it has none)."""
    blocks = re.findall(r"```[\w+-]*\n(.*?)```", text, re.S)
    return "\n\n".join(b.rstrip() for b in blocks) if blocks else text


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext jupyter_chatflow`."""
    ipython.register_magics(ChatMagics)
