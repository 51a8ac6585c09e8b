"""The compiled programs: shared by every model of one architecture."""

from __future__ import annotations

from jupyter_chatflow import load_model
from jupyter_chatflow.model.compile_clock import compile_seconds
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf


def greedy(model, ids):
    return [step.token_id for step in model.generate(ids, max_tokens=6, temperature=0.0, ignore_eos=True)]


def test_a_second_model_of_the_same_architecture_compiles_nothing_and_keeps_its_own_weights(tmp_path):
    first = load_model(write_tiny_gguf(tmp_path / "a.gguf", TinySpec(seed=11)), dtype="float32")
    other = load_model(write_tiny_gguf(tmp_path / "b.gguf", TinySpec(seed=12)), dtype="float32")
    ids = [5, 6, 7, 8, 9]
    answer = greedy(first, ids)
    before = compile_seconds()
    other_answer = greedy(other, ids)  # the same programs, the other weights
    assert compile_seconds() == before  # (a persistent-cache load would count: this is the process's own)
    again = load_model(write_tiny_gguf(tmp_path / "c.gguf", TinySpec(seed=11)), dtype="float32")
    assert greedy(again, ids) == answer and other_answer != answer
    assert compile_seconds() == before


def test_another_architecture_gets_programs_of_its_own(tmp_path):
    model = load_model(write_tiny_gguf(tmp_path / "untied.gguf", TinySpec(tied=False)), dtype="float32")
    tiny = load_model(write_tiny_gguf(tmp_path / "tiny.gguf"), dtype="float32")
    greedy(tiny, [1, 2, 3])
    before = compile_seconds()
    assert len(greedy(model, [1, 2, 3])) == 6
    assert compile_seconds() > before  # its own programs (or loaded from the persistent cache: counted too)


def test_a_batch_shape_compiled_for_one_dtype_is_not_ready_for_another(tmp_path):
    """float32 and bfloat16 models of one file share their programs, each dtype compiled on its own."""
    path = write_tiny_gguf(tmp_path / "d.gguf", TinySpec(seed=13))
    wide, narrow = load_model(path, dtype="float32"), load_model(path, dtype="bfloat16")
    wide.runner.warm(2, 512)
    assert wide.runner.decode_ready(2, 512) and not narrow.runner.decode_ready(2, 512)
    greedy(narrow, [1, 2, 3])  # a batch-1 generation runs the one-row decode program of its cache's length
    assert narrow.runner.decode_ready(1, 512) and not narrow.runner.decode_ready(2, 512)
