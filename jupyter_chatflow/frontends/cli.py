"""The `chatflow` command: chat with the model in a terminal, look at tokens, describe the model.

chatflow chat "What is the capital of France?"          # streams the answer
chatflow chat --json --temperature 0 "Hi"               # one JSON object per line: the events, then the account
echo "Why is the sky blue?" | chatflow chat -            # the prompt from stdin (also when PROMPT is left out)
chatflow tokens "Hello world"                           # ids and pieces
chatflow model info                                      # what the model file holds, what it needs in memory
chatflow serve --port 8000                               # an OpenAI-compatible server (the `serve` extra)
chatflow serve --devices 2 --weights as-file             # weights kept quantized, spread over 2 devices
chatflow lens "The capital of Italy is"                  # what each layer predicts next (frontends/inside.py)
chatflow why "The capital of Italy is"                   # which tokens made the next one
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from jupyter_chatflow.engine.loader import DTYPES, WEIGHTS
from jupyter_chatflow.errors import ChatflowError

from . import inside
from .options import add_flags, options_given


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = argparse.ArgumentParser(prog="chatflow", description="A real chat model pipeline, made visible.")
    commands = parser.add_subparsers(dest="command", required=True)
    chat = commands.add_parser("chat", help="stream the model's answer to PROMPT")
    chat.add_argument(
        "prompt", nargs="?", help="the user message; - (or nothing, with stdin not a terminal) reads stdin"
    )
    chat.add_argument("--system", default=None, help="system prompt (default: the chat template's own)")
    chat.add_argument("--session", default=None, help="keep the conversation in this stored session")
    add_flags(chat.add_argument)  # every option of a turn (`settings.OPTIONS`)
    each = "print one JSON object per line: each event, then the turn's account (its figures)"
    chat.add_argument("--json", action="store_true", help=each)
    tokens = commands.add_parser("tokens", help="show the token ids and pieces of TEXT")
    tokens.add_argument("text")
    tokens.add_argument("--json", action="store_true", help='print {"ids": [...], "pieces": [...]}')
    model = commands.add_parser("model", help="about the model")
    model.add_argument("action", choices=["info"])
    model.add_argument("--json", action="store_true")
    serve = _serve_parser(commands)
    looks = inside.add_parsers(commands)
    for sub in (chat, tokens, model, serve, *looks):
        sub.add_argument("--model", default=None, metavar="PATH", help="a GGUF file (default: SmolLM2-135M)")
    for sub in (chat, serve):
        sub.add_argument("--dtype", choices=DTYPES, default=None,
                         help="what the weights are dequantized to (default: float32 on CPU, bfloat16 on GPU); "
                              "bfloat16 takes half the memory")  # fmt: skip
        add_device_flags(sub.add_argument)
    return parser


def add_device_flags(add: Any) -> None:
    """--devices and --weights (`load_model`'s), with `add` an `add_argument` (`chatflow chat` and `serve`)."""
    add("--devices", type=_devices, default=None, metavar="N",
        help="spread the weights and KV caches over N devices (a tensor-parallel mesh; default: one device). "
             "On CPU, set XLA_FLAGS=--xla_force_host_platform_device_count=N first")  # fmt: skip
    add("--weights", choices=WEIGHTS, default=None,
        help="how the weights are held: float (dequantized to --dtype, the default), as-file (the GGUF's own "
             "quantized blocks, dequantized next to each matmul), int8 (per output row); the quantized ones take "
             "a quarter to an eighth of the memory but decode slower on CPU")  # fmt: skip


def _devices(text: str) -> int:
    """--devices: a whole number of devices, at least 1."""
    try:
        devices = int(text)
    except ValueError:
        devices = 0
    if devices < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of devices, at least 1; got {text!r}")
    return devices


def _serve_parser(commands: Any) -> argparse.ArgumentParser:
    """`chatflow serve`'s flags (the server's own, not a turn's: see frontends/server/config.py)."""
    serve = commands.add_parser("serve", help="an OpenAI-compatible HTTP server (needs the `serve` extra)")
    serve.add_argument("--host", type=_host, default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8000, help="port, 1 to 65535 (default: 8000)")
    serve.add_argument("--api-key", action="append", metavar="KEY", dest="api_key",
                       help="a key clients must send as 'Authorization: Bearer KEY' (repeatable; also "
                            "CHATFLOW_API_KEYS=KEY[,KEY…]); required to listen beyond loopback")  # fmt: skip
    serve.add_argument("--rate-limit", type=int, metavar="N", help="requests per minute per key (default: no limit)")
    serve.add_argument("--token-limit", type=int, metavar="N", help="tokens per minute per key (default: no limit)")
    serve.add_argument("--max-batch", type=int, default=8, metavar="N", help="sequences decoded together (default: 8)")
    serve.add_argument("--release-idle-s", type=float, default=300.0, metavar="S",
                       help="give back compiled programs and the prompt cache after S idle seconds (0: never; "
                       "default: 300)")  # fmt: skip
    return serve


def _host(text: str) -> str:
    """--host: an address or name to listen on; an empty one is refused here (uvicorn would take it for every
    interface)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must name an address to listen on, such as 127.0.0.1 (this machine only) "
                                         "or 0.0.0.0 (every interface); got an empty one")  # fmt: skip
    return text.strip()


def _port(text: str) -> int:
    """--port: a TCP port, 1 to 65535 (a port past that would be accepted and then listen nowhere)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:  # 0 too: uvicorn would take a free port the banner could not name
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to 65535; got {text!r}")
    return port


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `chatflow` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        commands = {"chat": run_chat, "tokens": run_tokens, "model": run_model_info, "serve": run_serve,
                    "lens": run_look, "why": run_look}  # fmt: skip
        return commands[args.command](args)
    except KeyboardInterrupt:  # Ctrl-C before streaming started (while loading, say): no traceback
        print("\nchatflow: interrupted", file=sys.stderr)
        return 130
    except ChatflowError as error:
        if getattr(args, "json", False):
            _emit({"type": "error", "error": type(error).__name__, "message": str(error)}, sys.stdout)
        print(f"chatflow: {error}", file=sys.stderr)
        return 1


def run_look(args: argparse.Namespace) -> int:
    """`chatflow lens` / `chatflow why`: the model loaded (float32: what the references are checked in), then the
    look (`inside.py`)."""
    model, _ = _load(args.model, quiet=args.json)
    return inside.run_lens(args, model) if args.command == "lens" else inside.run_why(args, model)


def _load(path: str | None, quiet: bool = False, dtype: str | None = None, devices=None, weights=None):
    """The model, after one line on stderr says what the file is (unless `quiet`); a file that is not a supported
    GGUF, or one too large for the memory available, is refused before anything is dequantized."""
    started = time.perf_counter()
    resolved = _about(path, quiet)
    if not quiet:
        print(f"Loading {resolved.name}…", file=sys.stderr, flush=True)
    from jupyter_chatflow.engine.loader import load_model  # JAX is imported only once a command needs the model

    model = load_model(resolved, dtype=dtype, devices=devices, weights=weights)
    return model, (time.perf_counter() - started) * 1000


def _about(path: str | None, quiet: bool = False):
    """The model file's path, once one line on stderr has said what it is (`memory.Footprint.summary`)."""
    from jupyter_chatflow.model.files import resolve_model_path
    from jupyter_chatflow.model.memory import footprint

    resolved = resolve_model_path(path)
    about = footprint(resolved)
    if not quiet:
        print(f"chatflow: {about.summary()}", file=sys.stderr, flush=True)
    return resolved


def run_chat(args: argparse.Namespace) -> int:
    """`chatflow chat`: one turn through the whole pipeline; text, or every event as a JSON line with --json."""
    from jupyter_chatflow.account import account_of
    from jupyter_chatflow.pipeline.chat import Chat

    prompt = _prompt(args.prompt, sys.stdin)
    model, _ = _load(args.model, quiet=args.json, dtype=args.dtype, devices=args.devices, weights=args.weights)
    chat = Chat(model=model, session=args.session or "cli", system=args.system, persist=args.session is not None,
                db=_database(args.session))  # fmt: skip
    response = chat.send(prompt, **options_given(args))
    out = sys.stdout
    response.follow(lambda event: _print_event(event, args.json, out))  # Ctrl-C: ends with a Cancelled event
    last = response.terminal()
    if not args.json:
        _print_ending(last, out)
    else:
        if args.session is not None:  # a stored session's first turn: its title follows the answer
            _print_late(response, out)
        _emit({"type": "account", **account_of(response.seen()).to_dict()}, out)
    return {"completed": 0, "cancelled": 130}.get(last.type if last else "", 1)


def _database(session: str | None) -> Any:
    """The user's database; without --session, where nothing is stored, one in memory when that one cannot be
    opened (a full or read-only disk): the answer comes, and the note says what failed."""
    from jupyter_chatflow.store.database import Database, StorageError

    try:
        return Database()
    except StorageError as error:
        if session is not None:
            raise
        print(f"chatflow: memory is off for this run: {error}", file=sys.stderr, flush=True)
        return Database(":memory:")


def _prompt(given: str | None, stdin: TextIO) -> str:
    """The message: PROMPT, or all of stdin for `-` (or no PROMPT with stdin piped), without surrounding blank lines."""
    if given is not None and given != "-":
        return given
    if given is None and stdin.isatty():
        raise ChatflowError("Give a PROMPT, or pipe one in: echo 'Hi' | chatflow chat -")
    return stdin.read().strip()


def _print_event(event, as_json: bool, out: TextIO) -> None:
    if as_json:
        _emit(event.to_dict(), out)
    elif event.type == "token":
        out.write(event.text)
        out.flush()


def _print_late(response, out: TextIO) -> None:
    """The events written after the terminal one (the session's title), one JSON line each; Ctrl-C skips them."""
    try:
        for event in response.after_end():
            _emit(event.to_dict(), out)
    except KeyboardInterrupt:
        pass


def _print_ending(last, out: TextIO) -> None:
    if last is None:
        return
    if last.type == "cancelled":
        out.write("\n[stopped]\n")
    elif last.type == "error":
        print(f"chatflow: {last.message}", file=sys.stderr)
    else:
        if last.finish_reason == "content_filter":
            out.write(last.text)
        out.write("\n")


def run_serve(args: argparse.Namespace) -> int:
    """`chatflow serve`: the OpenAI-compatible server until Ctrl-C (exit 0)."""
    try:
        from jupyter_chatflow.frontends.server.config import ServerConfig, base_url, keys_from
        from jupyter_chatflow.frontends.server.main import serve
    except ImportError as error:
        extra = "pip install 'jupyter_chatflow[serve]'"
        raise ChatflowError(f"chatflow serve needs the serve extra: {extra} ({error})") from None
    config = ServerConfig(
        host=args.host, port=args.port, api_keys=keys_from(args.api_key), rate_limit=args.rate_limit,
        token_limit=args.token_limit, max_batch=args.max_batch, dtype=args.dtype, devices=args.devices,
        weights=args.weights, release_idle_s=args.release_idle_s,
    )  # fmt: skip
    _about(args.model)
    url = f"{base_url(config.host, config.port)}/v1"
    print(f"chatflow serve: {url} (GET /health says when the model is ready)", file=sys.stderr, flush=True)
    serve(config, args.model)
    return 0


def run_tokens(args: argparse.Namespace) -> int:
    """`chatflow tokens`: the ids and pieces of TEXT as user text (special-token text stays plain)."""
    tokenizer = _load_tokenizer(args.model)
    ids = tokenizer.encode(args.text)
    pieces = [tokenizer.piece(i) for i in ids]
    if args.json:
        _emit({"ids": ids, "pieces": pieces}, sys.stdout)
    else:
        for token_id, piece in zip(ids, pieces, strict=True):
            print(f"{token_id:>7}  {piece!r}")
        print(f"{len(ids)} tokens")
    return 0


def _load_tokenizer(path: str | None):
    """The tokenizer alone: reads the file's metadata, skips the weights and JAX."""
    from jupyter_chatflow.model.files import resolve_model_path
    from jupyter_chatflow.model.gguf_file import read_metadata
    from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

    return Tokenizer.from_metadata(read_metadata(resolve_model_path(path)))


def run_model_info(args: argparse.Namespace) -> int:
    """`chatflow model info`: architecture, sizes, quantization, tokenizer and where the file is."""
    from jupyter_chatflow.model.files import resolve_model_path
    from jupyter_chatflow.model.gguf_file import described

    info, metadata = described(resolve_model_path(args.model))
    info |= _template_info(metadata)
    if args.json:
        _emit(info, sys.stdout)
    else:
        rest = {key: value for key, value in info.items() if key != "summary"}
        width = max(len(k) for k in rest)
        print(info["summary"])
        for key, value in rest.items():
            print(f"{key:<{width}}  {'unknown' if value is None else value}")
    return 0


SPECIAL_TOKEN_TYPES = (3, 4)  # gguf.TokenType CONTROL and USER_DEFINED: the turn markers a fallback is told by


def _template_info(metadata: dict[str, Any]) -> dict[str, str]:
    """Which chat template a chat on this file renders (the file's, or its family's turns when it has none) and how
    its tool calls go."""
    from jupyter_chatflow.tokenizer.chat_template import chat_template_of, tool_call_format

    texts, types = metadata.get("tokenizer.ggml.tokens") or (), metadata.get("tokenizer.ggml.token_type") or ()
    special = {text for text, kind in zip(texts, types, strict=False) if kind in SPECIAL_TOKEN_TYPES}
    source, origin = chat_template_of(metadata.get("tokenizer.chat_template"), special)
    return {"chat_template": origin, "tool_calls": tool_call_format(source)}


def _emit(obj: dict[str, Any], out: TextIO) -> None:
    out.write(json.dumps(obj, ensure_ascii=False) + "\n")
    out.flush()


if __name__ == "__main__":
    sys.exit(main())
