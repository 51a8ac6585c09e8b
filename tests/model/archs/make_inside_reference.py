"""Make the references `tests/model/test_inside_reference.py` checks the lens, attribution and interventions against
(run by hand; CI needs no torch): Hugging Face transformers, float32, eager attention, on the same weights.

For each tiny model (`make_tiny_models.py` builds it again from its seed and config, and this script first checks
that its logits equal the stored `<name>.npz`, within 1e-4 (bit for bit with the transformers that made them), so
it is the model the GGUF was converted from) and for
a real GGUF that transformers loads (`--gguf PATH --name NAME`: SmolLM2-135M-Instruct, Gemma 3 270M), on the first
`T` tokens of the model's reference sequence, it writes `inside/<name>.npz`:

- `lens_top_ids`, `lens_top_logprobs` [L + 1, T, 5]: each hidden state through the final norm and the head
  (transformers' last hidden state is already normed: the model's own logits), soft-capped, log-softmaxed;
- `gxi`, `gxi_contrast` [T]: grad × input of log p(target) (less log p(contrast)) after the last position, with
  respect to the input of the first decoder layer (torch autograd);
- `ablated` [P, V]: the logits with `ablation`'s heads zeroed at the input of each layer's `o_proj` (a hook);
- `steered` [P, V]: the logits with `steer` added to the output of layer `steer_layer` (a hook);
  at `positions` P: every position for a tiny model, the last `LAST` for a real one (its vocabulary is large).

    # a Python with torch (CPU), transformers, gguf, sentencepiece, tokenizers:
    python tests/model/archs/make_inside_reference.py                 # the tiny models
    python tests/model/archs/make_inside_reference.py --gguf PATH --name smollm2 --tokens 16
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "inside"
T = 24
K = 5
SMALL_VOCAB = 4096
LAST = 1
"""A real model's vocabulary is large: its ablated and steered logits are kept for the last `LAST` positions."""


def ablation(n_layers: int, n_heads: int) -> dict[int, list[int]]:
    """The heads knocked out: one in the first layer, two in the last."""
    return {0: [1 % n_heads], n_layers - 1: [0, n_heads - 1]}


def steer_layer(n_layers: int) -> int:
    return min(1, n_layers - 1)


def tiny_model(name: str):
    import torch
    import transformers

    sys.path.insert(0, str(HERE))
    import make_tiny_models as tiny

    saved = json.loads((HERE / "manifest.json").read_text())[name]["hf_config_json"]
    ids = {key: saved.get(key) for key in ("bos_token_id", "eos_token_id", "pad_token_id")}
    config, _ = tiny.build_config(name, saved["vocab_size"], ids)
    torch.manual_seed(tiny._seed(name))
    model = getattr(transformers, tiny.MODELS[name]["model"])(config).float().eval()
    tiny.init_weights(model, name)
    stored = np.load(HERE / f"{name}.npz")
    drift = float(np.abs(tiny.logits_of(model, stored["tokens"]) - stored["logits"]).max())
    if drift > 1e-4:  # (bit for bit with the transformers that made it; another version's float ops: ~1e-5)
        raise SystemExit(f"{name}: the rebuilt model's logits differ from {name}.npz by {drift}: not the same model")
    return model, stored["tokens"][:T]


def gguf_model(path: Path):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    model.config._attn_implementation = "eager"
    return model.eval()


def references(model, tokens: np.ndarray) -> dict[str, np.ndarray]:
    import torch

    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    layers, heads = config.num_hidden_layers, config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    cap = getattr(config, "final_logit_softcapping", None) or 0.0
    ids = torch.from_numpy(tokens.astype(np.int64))[None]
    decoder = model.model.layers

    def head(hidden):
        logits = model.lm_head(hidden).float()
        return cap * torch.tanh(logits / cap) if cap else logits

    with torch.no_grad():
        out = model(input_ids=ids, output_hidden_states=True, use_cache=False)
        logits = out.logits[0].float()
        hidden = out.hidden_states
        assert len(hidden) == layers + 1
        rows = [head(model.model.norm(h)) for h in hidden[:-1]] + [logits[None]]
        lens = torch.log_softmax(torch.cat(rows).float(), dim=-1)  # [L + 1, T, V]
        top = torch.topk(lens, K, dim=-1)
    target = int(logits[-1].argmax())
    contrast = int(logits[-1].argsort()[-2])

    first_input: list = []

    def take(_module, args, kwargs):  # the first layer's input, as a leaf to differentiate
        x = (args[0] if args else kwargs["hidden_states"]).detach().requires_grad_(True)
        first_input.append(x)
        return ((x, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": x})

    def gxi(minus: int | None) -> np.ndarray:
        first_input.clear()
        handle = decoder[0].register_forward_pre_hook(take, with_kwargs=True)
        try:
            logprobs = torch.log_softmax(model(input_ids=ids, use_cache=False).logits[0, -1].float(), dim=-1)
            f = logprobs[target] - (logprobs[minus] if minus is not None else 0.0)
            (grad,) = torch.autograd.grad(f, first_input[0])
        finally:
            handle.remove()
        return (grad * first_input[0]).sum(-1)[0].detach().numpy().astype(np.float32)

    knocked = ablation(layers, heads)
    hooks = []
    for layer, chosen in knocked.items():

        def zero(_module, args, chosen=chosen):
            x = args[0].clone()
            for h in chosen:
                x[..., h * head_dim : (h + 1) * head_dim] = 0.0
            return (x, *args[1:])

        hooks.append(decoder[layer].self_attn.o_proj.register_forward_pre_hook(zero))
    try:
        with torch.no_grad():
            ablated = model(input_ids=ids, use_cache=False).logits[0].float().numpy()
    finally:
        for h in hooks:
            h.remove()

    steer = np.random.default_rng(7).normal(0.0, 1.0, config.hidden_size).astype(np.float32)
    where = steer_layer(layers)

    def add(_module, _args, output):
        if isinstance(output, tuple):
            return (output[0] + torch.from_numpy(steer), *output[1:])
        return output + torch.from_numpy(steer)

    handle = decoder[where].register_forward_hook(add)
    try:
        with torch.no_grad():
            steered = model(input_ids=ids, use_cache=False).logits[0].float().numpy()
    finally:
        handle.remove()
    kept = np.arange(len(tokens))[-LAST:] if ablated.shape[-1] > SMALL_VOCAB else np.arange(len(tokens))
    ablated, steered = ablated[kept], steered[kept]
    return {
        "positions": kept.astype(np.int32), "tokens": tokens.astype(np.int32), "target": np.int32(target),
        "contrast": np.int32(contrast),
        "lens_top_ids": top.indices.numpy().astype(np.int32), "lens_top_logprobs": top.values.numpy(),
        "gxi": gxi(None), "gxi_contrast": gxi(contrast),
        "ablate_layers": np.array(list(knocked), np.int32),
        "ablate_heads": np.array([h for hs in knocked.values() for h in hs], np.int32),
        "ablate_counts": np.array([len(hs) for hs in knocked.values()], np.int32),
        "ablated": ablated.astype(np.float32), "steer": steer, "steer_layer": np.int32(where),
        "steered": steered.astype(np.float32),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", type=Path, help="a real model's GGUF file (else: every tiny model)")
    parser.add_argument("--name", help="the fixture's name for --gguf")
    parser.add_argument("--tokens", type=int, default=16, help="--gguf: how many tokens of its text")
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    if args.gguf is not None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.gguf.parent, gguf_file=args.gguf.name)
        text = "The capital of France is Paris. The capital of Italy is"
        tokens = np.asarray(tokenizer(text)["input_ids"][: args.tokens], np.int64)
        np.savez_compressed(OUT / f"{args.name}.npz", **references(gguf_model(args.gguf), tokens))
        print(args.name, "written")
        return
    for name in json.loads((HERE / "manifest.json").read_text()):
        model, tokens = tiny_model(name)
        np.savez_compressed(OUT / f"{name}.npz", **references(model, tokens))
        print(name, "written")


if __name__ == "__main__":
    main()
