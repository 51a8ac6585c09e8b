"""The `chatflow` command: chat with the model in a terminal, look at tokens, describe the model.

chatflow chat "What is the capital of France?"          # streams the answer
chatflow chat --json --temperature 0 "Hi"               # one JSON object per line
chatflow tokens "Hello world"                           # ids and pieces
chatflow model info                                      # what the model file holds
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, TextIO

from .errors import ChatflowError
from .sampling import SamplingParams


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = argparse.ArgumentParser(prog="chatflow", description="A real chat model pipeline, made visible.")
    commands = parser.add_subparsers(dest="command", required=True)
    chat = commands.add_parser("chat", help="stream the model's answer to PROMPT")
    chat.add_argument("prompt", help="the user message")
    chat.add_argument("--system", default=None, help="system prompt (default: the chat template's own)")
    # Defaults from SmolLM2's model card (temperature 0.2, top-p 0.9): small models ramble when sampled hotter.
    chat.add_argument("--temperature", type=float, default=0.2, help="0 is greedy (default 0.2)")
    chat.add_argument("--top-p", type=float, default=0.9, help="nucleus sampling mass (default 0.9)")
    chat.add_argument("--top-k", type=int, default=0, help="keep the k likeliest tokens; 0 keeps all (default)")
    chat.add_argument("--min-p", type=float, default=0.0, help="drop tokens below min_p x the top one")
    chat.add_argument("--repetition-penalty", type=float, default=1.0, help="1 is off")
    chat.add_argument("--max-tokens", type=int, default=256, help="most tokens to generate (default 256)")
    chat.add_argument("--seed", type=int, default=None, help="same seed, same answer")
    chat.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    chat.add_argument("--ignore-eos", action="store_true", help="keep going past stop tokens (for benchmarks)")
    chat.add_argument("--json", action="store_true", help="print one JSON object per line")
    tokens = commands.add_parser("tokens", help="show the token ids and pieces of TEXT")
    tokens.add_argument("text")
    tokens.add_argument("--json", action="store_true", help='print {"ids": [...], "pieces": [...]}')
    model = commands.add_parser("model", help="about the model")
    model.add_argument("action", choices=["info"])
    model.add_argument("--json", action="store_true")
    for sub in (chat, tokens, model):
        sub.add_argument("--model", default=None, metavar="PATH", help="a GGUF file (default: SmolLM2-135M)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `chatflow` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return {"chat": run_chat, "tokens": run_tokens, "model": run_model_info}[args.command](args)
    except KeyboardInterrupt:  # Ctrl-C before streaming started (while loading, say): no traceback
        print("\nchatflow: interrupted", file=sys.stderr)
        return 130
    except ChatflowError as error:
        if getattr(args, "json", False):
            _emit({"type": "error", "error": type(error).__name__, "message": str(error)}, sys.stdout)
        print(f"chatflow: {error}", file=sys.stderr)
        return 1


def _load(path: str | None, quiet: bool = False):
    from .loader import load_model  # JAX is imported only once a command needs the model
    from .model_files import resolve_model_path

    started = time.perf_counter()
    resolved = resolve_model_path(path)
    if not quiet:
        print(f"Loading {resolved.name}…", file=sys.stderr, flush=True)
    model = load_model(resolved)
    return model, (time.perf_counter() - started) * 1000


def run_chat(args: argparse.Namespace) -> int:
    """`chatflow chat`: stream the answer (text, or JSON lines with --json)."""
    knobs = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "max_tokens", "seed", "ignore_eos")
    params = SamplingParams(stop=tuple(args.stop), **{name: getattr(args, name) for name in knobs})
    model, load_ms = _load(args.model, quiet=args.json)
    messages = ([{"role": "system", "content": args.system}] if args.system else []) + [
        {"role": "user", "content": args.prompt}
    ]
    prompt_ids = model.tokenizer.apply_chat_template(messages)
    cancel = threading.Event()
    generation = model.generate(prompt_ids, params=params, cancel=cancel)
    out = sys.stdout
    try:
        for step in generation:
            if args.json:
                _emit(_token_event(step), out)
            else:
                out.write(step.text)
                out.flush()
    except KeyboardInterrupt:
        cancel.set()
        for _ in generation:  # drain: the engine stops at the next step boundary and records why
            pass
    if args.json:
        _emit(_completed_event(generation, load_ms), out)
    else:
        out.write("\n" if generation.finish_reason != "cancelled" else "\n[stopped]\n")
    return 130 if generation.finish_reason == "cancelled" else 0


def _token_event(step) -> dict[str, Any]:
    return {
        "type": "token",
        "index": step.index,
        "token_id": step.token_id,
        "text": step.text,
        "logprob": step.logprob,
        "entropy": step.entropy,
        "top_alternatives": [
            {"token_id": a.token_id, "text": a.text, "logprob": a.logprob, "sampling_prob": a.sampling_prob}
            for a in step.top_alternatives
        ],
        "elapsed_ms": round(step.elapsed_ms, 3),
    }


def _completed_event(generation, load_ms: float) -> dict[str, Any]:
    usage = generation.usage
    return {
        "type": "completed",
        "finish_reason": generation.finish_reason,
        "text": generation.text,
        "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens},
        "timings": {
            "load_ms": round(load_ms, 1),
            "time_to_first_token_ms": round(usage.prefill_ms, 1),
            "decode_ms": round(usage.decode_ms, 1),
            "decode_tokens_per_s": round(usage.decode_tokens_per_s, 2),
        },
    }


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
    from .gguf_file import read_metadata
    from .model_files import resolve_model_path
    from .tokenizer import Tokenizer

    return Tokenizer.from_metadata(read_metadata(resolve_model_path(path)))


def run_model_info(args: argparse.Namespace) -> int:
    """`chatflow model info`: architecture, sizes, quantization, tokenizer and where the file is."""
    from .gguf_file import describe
    from .model_files import resolve_model_path

    info = describe(resolve_model_path(args.model))
    if args.json:
        _emit(info, sys.stdout)
    else:
        width = max(len(k) for k in info)
        for key, value in info.items():
            print(f"{key:<{width}}  {value}")
    return 0


def _emit(obj: dict[str, Any], out: TextIO) -> None:
    out.write(json.dumps(obj, ensure_ascii=False) + "\n")
    out.flush()


if __name__ == "__main__":
    sys.exit(main())
