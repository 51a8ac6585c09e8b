"""What looking inside costs: the logit lens over an answer, grad × input over a prompt, integrated gradients and a
forward with heads knocked out, on the default model, side by side with Hugging Face transformers (torch, CPU,
float32, the same GGUF dequantized) doing the same in one run.

    python benchmarks/bench_inside.py [--lens-tokens 100] [--prompt-tokens 300] [--steps 32] [--repeats 3]
                                      [--torch-python /tmp/torchvenv/bin/python] [--out results.json]

Each figure is the median of `--repeats` calls after a first, untimed one (its compile is reported apart: ours
compiles a program per call shape, and lets it go after). transformers runs in its own process (`--torch-python`:
a Python with torch, transformers and gguf), on the same token ids; both use the machine's cores as they find them.
The lens is top-5 at every layer and position; attribution is of the model's own next token after the prompt.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

TEXT = (
    "The history of Paris spans more than two thousand years. It began as a settlement of the Parisii, a Celtic "
    "tribe, on an island in the Seine; the Romans called it Lutetia. Under the Capetian kings it became the seat "
    "of the French monarchy, and its university drew scholars from all over Europe. "
)

TORCH = r"""
import json, statistics, sys, time
import numpy as np, torch
from transformers import AutoModelForCausalLM
path, lens_ids, prompt_ids = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
steps, repeats = int(sys.argv[4]), int(sys.argv[5])
from pathlib import Path
p = Path(path)
model = AutoModelForCausalLM.from_pretrained(p.parent, gguf_file=p.name, dtype=torch.float32).eval()
model.config._attn_implementation = "eager"

def lens():
    with torch.no_grad():
        out = model(input_ids=torch.tensor([lens_ids]), output_hidden_states=True, use_cache=False)
        for h in out.hidden_states:
            torch.topk(torch.log_softmax(model.lm_head(model.model.norm(h)).float(), -1), 5, dim=-1)

def grads(alpha_count):
    ids = torch.tensor([prompt_ids])
    embeds = model.model.embed_tokens(ids).detach()
    target = int(model(input_ids=ids, use_cache=False).logits[0, -1].argmax())
    total = torch.zeros_like(embeds)
    for k in range(alpha_count):
        alpha = (k + 0.5) / alpha_count if alpha_count > 1 else 1.0
        x = (alpha * embeds).requires_grad_(True)
        logp = torch.log_softmax(model(inputs_embeds=x, use_cache=False).logits[0, -1].float(), -1)[target]
        (g,) = torch.autograd.grad(logp, x)
        total += g
    return (total / alpha_count * embeds).sum(-1)

def ablated():
    with torch.no_grad():
        model(input_ids=torch.tensor([prompt_ids]), use_cache=False)

def timed(f):
    f()
    runs = []
    for _ in range(repeats):
        t = time.perf_counter(); f(); runs.append(time.perf_counter() - t)
    return round(statistics.median(runs), 3)

print(json.dumps({"lens_s": timed(lens), "grad_x_input_s": timed(lambda: grads(1)),
                  "integrated_gradients_s": timed(lambda: grads(steps)), "forward_s": timed(ablated),
                  "threads": torch.get_num_threads()}))
"""


def ours(lens_ids: list[int], prompt_ids: list[int], steps: int, repeats: int) -> dict:
    from jupyter_chatflow import load_model

    model = load_model()
    target = int(model.logits(prompt_ids)[-1].argmax())
    looks = {
        "lens_s": lambda: model.lens(lens_ids, k=5),
        "grad_x_input_s": lambda: model.attribution(prompt_ids, target),
        "integrated_gradients_s": lambda: model.attribution(
            prompt_ids, target, method="integrated_gradients", steps=steps
        ),
        "forward_s": lambda: model.logits(prompt_ids, ablate_heads={3: [0, 5]}),
    }
    figures: dict[str, float] = {}
    for name, look in looks.items():
        started = time.perf_counter()
        look()  # the first call: compiles its programs
        figures[name.replace("_s", "_first_s")] = round(time.perf_counter() - started, 3)
        runs = []
        for _ in range(repeats):
            started = time.perf_counter()
            look()
            runs.append(time.perf_counter() - started)
        figures[name] = round(statistics.median(runs), 3)
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lens-tokens", type=int, default=100)
    parser.add_argument("--prompt-tokens", type=int, default=300)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--torch-python", default=None, help="a Python with torch, transformers and gguf")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    import warnings

    from jupyter_chatflow.model.files import default_model_path

    warnings.simplefilter("ignore", RuntimeWarning)  # (integrated gradients' completeness: docs/inside.md)
    from jupyter_chatflow import load_model

    tokenizer = load_model().tokenizer
    ids = tokenizer.encode(TEXT * 8)
    lens_ids, prompt_ids = ids[: args.lens_tokens], ids[: args.prompt_tokens]
    result = {"lens_tokens": len(lens_ids), "prompt_tokens": len(prompt_ids), "steps": args.steps,
              "ours": ours(lens_ids, prompt_ids, args.steps, args.repeats)}  # fmt: skip
    if args.torch_python:
        command = [args.torch_python, "-c", TORCH, str(default_model_path()), json.dumps(lens_ids),
                   json.dumps(prompt_ids), str(args.steps), str(args.repeats)]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=3600)
        result["transformers"] = json.loads(done.stdout.strip().splitlines()[-1])
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
