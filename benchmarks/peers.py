"""The engines the benchmark compares: each loads the model and streams exactly n greedy token ids (EOS ignored)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

CHAT_MAX_TOKENS = 256  # the CLI's default: it sizes our KV cache, so start-up compiles what `chatflow chat` does
THREADS, N_BATCH = 2, 512


@dataclasses.dataclass(frozen=True, kw_only=True)
class Workload:
    """What every engine runs: the model file and the prompts as token ids."""

    model: str
    short: list[int]
    long: list[int]
    chat: list[int]
    decode_tokens: int
    repeats: int
    weights: str = "float"
    """How ours holds the weights (`load_model(weights=…)`): "float", or "as-file" (the file's blocks)."""

    @property
    def n_ctx(self) -> int:
        """A context (power of two) that holds every run."""
        longest = max(len(self.long) + 1, len(self.short) + self.decode_tokens, len(self.chat) + CHAT_MAX_TOKENS)
        return 1 << (longest - 1).bit_length()


class Runner(Protocol):
    """An engine with a model loaded."""

    def stream(self, ids: Sequence[int], n_tokens: int) -> Iterator[int]: ...


class Ours:
    """jupyter_chatflow: `load_model`, then `generate` (greedy, ignore_eos)."""

    def __init__(self, work: Workload):
        import jupyter_chatflow as cf
        from jupyter_chatflow.engine.prompt_cache import PromptCache

        self.model = cf.load_model(work.model, weights=work.weights)
        # Repeats send the same prompt: with the prompt cache on, prefill would be measured as a cache hit.
        self.model.prompt_cache = PromptCache(max_bytes=0)

    def stream(self, ids: Sequence[int], n_tokens: int) -> Iterator[int]:
        generation = self.model.generate(list(ids), max_tokens=n_tokens, temperature=0.0, ignore_eos=True)
        return (step.token_id for step in generation)


class LlamaCpp:
    """llama-cpp-python: `Llama.eval` of the ids, argmax of the last logits, one `eval` per new token."""

    def __init__(self, work: Workload):
        import llama_cpp
        import numpy as np

        self.np, self.lib = np, llama_cpp
        self.llm = llama_without_extra_bufts(
            model_path=work.model, n_ctx=work.n_ctx, n_batch=N_BATCH, n_ubatch=N_BATCH,
            n_threads=THREADS, n_threads_batch=THREADS, verbose=False,
        )  # fmt: skip

    def stream(self, ids: Sequence[int], n_tokens: int) -> Iterator[int]:
        self.llm.reset()
        self.llm.eval(list(ids))
        for i in range(n_tokens):
            token = self._argmax_last()
            yield token
            if i + 1 < n_tokens:
                self.llm.eval([token])

    def _argmax_last(self) -> int:
        logits = self.lib.llama_get_logits_ith(self.llm.ctx, -1)  # the batch's last row: the only one computed
        return int(self.np.argmax(self.np.ctypeslib.as_array(logits, shape=(self.llm.n_vocab(),))))


def llama_without_extra_bufts(**kwargs: Any) -> Any:
    """`llama_cpp.Llama` with llama.cpp's extra CPU buffer types (AMX, weight repacking) off: `--no-extra-bufts`.

    `Llama()` takes no `use_extra_bufts`, so the default model params it starts from are patched while it
    loads. llama.cpp's AMX path was reported to crash on Q4_1 prompt batches on one of our machines (see README).
    """
    import llama_cpp.llama_cpp as lib
    from llama_cpp import Llama

    default = lib.llama_model_default_params

    def params() -> Any:
        chosen = default()
        chosen.use_extra_bufts = False
        return chosen

    lib.llama_model_default_params = params
    try:
        return Llama(**kwargs)
    finally:
        lib.llama_model_default_params = default


class Transformers:
    """Hugging Face transformers: the GGUF dequantized to float32, forward with a KV cache, argmax."""

    def __init__(self, work: Workload):
        import torch
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(THREADS)
        path = Path(work.model)
        self.torch = torch
        self.model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
        self.model.eval()

    def stream(self, ids: Sequence[int], n_tokens: int) -> Iterator[int]:
        tensor = self.torch.tensor
        with self.torch.inference_mode():
            out = self.model(tensor([list(ids)]), use_cache=True, logits_to_keep=1)
            for i in range(n_tokens):
                token = int(out.logits[0, -1].argmax())
                yield token
                if i + 1 < n_tokens:
                    out = self.model(tensor([[token]]), past_key_values=out.past_key_values, use_cache=True)


RUNNERS: dict[str, type] = {"ours": Ours, "llama_cpp": LlamaCpp, "transformers": Transformers}
