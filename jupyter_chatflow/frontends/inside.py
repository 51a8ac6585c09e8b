"""`chatflow lens` and `chatflow why`: what each layer predicted after a text, and which of its tokens made the next
one (`Model.lens`, `Model.attribution`; docs/inside.md).

chatflow lens "The capital of France is Paris. The capital of Italy is"          # layer by layer, at the end
chatflow lens --json --k 3 "…"                                                   # every layer and position
chatflow why "The capital of France is Paris. The capital of Italy is"           # what made the next token
chatflow why --target " Rome" --contrast " Paris" --json "…"                     # why this rather than that

The text is the model's input as written (`--chat`: as the user's message in the chat template, with the
assistant's turn opened, which is what a chat turn's answer is predicted from).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from jupyter_chatflow.errors import ChatflowError

METHODS = ("grad_x_input", "integrated_gradients")


def add_parsers(commands: Any) -> list[argparse.ArgumentParser]:
    """`lens` and `why` on the `chatflow` parser's subcommands; the two parsers."""
    lens = commands.add_parser("lens", help="what each layer predicts after TEXT (the logit lens)")
    lens.add_argument("--k", type=int, default=5, help="how many top tokens per layer and position (default: 5)")
    why = commands.add_parser("why", help="which tokens of TEXT made the model's next token (attribution)")
    why.add_argument("--target", default=None, metavar="TOKEN", help="the next token to explain, as text "
                     "(one token, e.g. ' Rome'; default: the model's own top choice)")  # fmt: skip
    why.add_argument("--contrast", default=None, metavar="TOKEN", help="explain the target rather than this token")
    why.add_argument("--method", choices=METHODS, default="grad_x_input", help="default: grad_x_input")
    why.add_argument("--steps", type=int, default=32, help="integrated gradients' steps (default: 32)")
    for sub in (lens, why):
        sub.add_argument("text", help="the model's input (-: standard input)")
        sub.add_argument("--chat", action="store_true", help="TEXT as the message of a chat turn, in its template")
        sub.add_argument("--json", action="store_true", help="print one JSON object")
    return [lens, why]


def run_lens(args: argparse.Namespace, model: Any) -> int:
    ids, pieces = _input(args, model)
    lens = model.lens(ids, k=args.k)
    top = [[[model.tokenizer.decode([int(t)]) for t in row] for row in layer] for layer in lens.top_ids]
    if args.json:
        said = {"ids": ids, "pieces": pieces, "top_ids": lens.top_ids.tolist(), "top_pieces": top,
                "top_logprobs": np.round(lens.top_logprobs, 5).tolist()}  # fmt: skip
        json.dump(said, sys.stdout, ensure_ascii=False)
        print()
        return 0
    print(f"After {pieces[-1]!r} (position {len(ids) - 1}), each layer's top {args.k}:")
    for layer, (choices, logprobs) in enumerate(zip(top, lens.top_logprobs, strict=True)):
        name = "embeddings" if layer == 0 else f"layer {layer}"
        row = "  ".join(f"{p!r} {np.exp(v):.0%}" for p, v in zip(choices[-1], logprobs[-1], strict=True))
        print(f"  {name:>10}  {row}")
    return 0


def run_why(args: argparse.Namespace, model: Any) -> int:
    ids, pieces = _input(args, model)
    logits = model.logits(ids)[-1]
    target = _token(model, args.target) if args.target is not None else int(logits.argmax())
    contrast = _token(model, args.contrast) if args.contrast is not None else None
    values = model.attribution(ids, target, method=args.method, steps=args.steps, contrast_id=contrast)
    logprobs = logits - np.logaddexp.reduce(logits)
    said = {"ids": ids, "pieces": pieces, "target": {"id": target, "piece": model.tokenizer.decode([target]),
            "logprob": round(float(logprobs[target]), 5)}, "method": args.method,
            "attribution": np.round(values, 6).tolist()}  # fmt: skip
    if contrast is not None:
        said["contrast"] = {"id": contrast, "piece": model.tokenizer.decode([contrast]),
                            "logprob": round(float(logprobs[contrast]), 5)}  # fmt: skip
    if args.json:
        json.dump(said, sys.stdout, ensure_ascii=False)
        print()
        return 0
    rather = f" rather than {said['contrast']['piece']!r}" if contrast is not None else ""
    print(f"Why {said['target']['piece']!r} (p = {np.exp(logprobs[target]):.1%}){rather} ({args.method}):")
    scale = float(np.abs(values).max()) or 1.0
    for position in np.argsort(-np.abs(values))[:10]:
        bar = "█" * max(1, round(abs(values[position]) / scale * 20))
        sign = "+" if values[position] >= 0 else "−"
        print(f"  {position:>4}  {pieces[position]!r:<16} {sign}{abs(values[position]):.4f}  {bar}")
    return 0


def _input(args: argparse.Namespace, model: Any) -> tuple[list[int], list[str]]:
    text = sys.stdin.read() if args.text == "-" else args.text
    if not text:
        raise ChatflowError("give the text to look at (or - to read it from stdin)")
    tokenizer = model.tokenizer
    message = [{"role": "user", "content": text}]
    ids = tokenizer.apply_chat_template(message) if args.chat else tokenizer.encode(text)
    return list(ids), [tokenizer.decode([i]) for i in ids]


def _token(model: Any, text: str) -> int:
    ids = model.tokenizer.encode(text)
    if len(ids) != 1:
        pieces = [model.tokenizer.decode([i]) for i in ids]
        raise ChatflowError(f"{text!r} is {len(ids)} tokens here ({pieces}): give one token, such as {pieces[0]!r}")
    return int(ids[0])
