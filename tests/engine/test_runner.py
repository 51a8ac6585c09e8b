"""The runner's primitives: one sequence driven by hand answers as `Model.generate` does; one decode program serves
`generate` and a scheduler's single row; compiled programs can be let go; no engine module reaches into another's
private members."""

from __future__ import annotations

import ast
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from jax import monitoring

from jupyter_chatflow import GenerationError, SamplingParams, load_model
from jupyter_chatflow.engine import chunks
from jupyter_chatflow.engine.scheduler import Scheduler
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf

GREEDY = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)
PROMPT = [1, 50, 60, 70, 80, 90, 100, 110, 120]
ENGINE = Path(__file__).resolve().parents[2] / "jupyter_chatflow" / "engine"


@contextlib.contextmanager
def compiled() -> Iterator[list[str]]:
    """The names of the programs XLA compiles (or loads from the persistent cache) meanwhile, on any thread."""
    names: list[str] = []

    def began(event: str, _value: float, **kwargs) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            names.append(str(kwargs.get("fun_name", "")).removeprefix("jit(").removesuffix(")"))

    monitoring.register_scalar_listener(began)
    try:
        yield names
    finally:
        monitoring.unregister_scalar_listener(began)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A tiny model of an architecture no other test uses: its programs are compiled in front of these tests."""
    path = write_tiny_gguf(tmp_path_factory.mktemp("fresh") / "fresh.gguf", TinySpec(n_layers=3, seed=21))
    return load_model(path, dtype="float32")


def test_one_sequence_driven_through_the_primitives_answers_as_generate(tiny_model):
    runner = tiny_model.runner
    expected = [s.token_id for s in tiny_model.generate(PROMPT, params=GREEDY)]
    prompt = runner.check_prompt(PROMPT)
    run = runner.start(prompt, GREEDY)
    reused = runner.take_cache(run)
    widths = [width for width, _last in runner.prefill(run, reused)]
    got = [run.host(run.out).token_id]
    for step in range(1, GREEDY.max_tokens):
        runner.decode(run, step)
        got.append(run.host(run.out).token_id)
    runner.release(run)
    assert got == expected and sum(widths) >= prompt.size - reused
    assert run.fed == GREEDY.max_tokens - 1 and run.written().tolist() == [*PROMPT, *got[:-1]]
    assert runner.shared_prefix(np.array([*PROMPT, *got], np.int32)) == len(PROMPT) + len(got) - 1  # kept


def test_generate_and_a_schedulers_single_row_share_one_decode_program(fresh):
    """The lever on a notebook's memory (each decode program holds 50-80 MiB on the default model): a batch-1
    generation and a scheduler's one row run the same program, compiled once."""
    decode = fresh.runner._programs._jitted.decode_rows  # (compiled, or loaded: `stored.py`)
    assert len(list(fresh.generate(PROMPT, params=GREEDY))) == 12
    assert decode._cache_size() == 1 and fresh.runner.decode_ready(1, chunks.MIN_CACHE)
    with compiled() as names, Scheduler(fresh, max_batch=4, background=False) as scheduler:
        generation = scheduler.submit([*PROMPT, 7, 8], GREEDY)
        while not scheduler.step().idle:
            pass
        assert len(list(generation)) == 12
    assert "decode_rows" not in names and decode._cache_size() == 1, names


def test_a_warm_in_the_background_compiles_the_batch_and_says_when_it_is_done(fresh):
    done: list[bool] = []
    finished = threading.Event()
    assert not fresh.runner.decode_ready(3, chunks.MIN_CACHE)
    thread = fresh.runner.warm_in_background(3, chunks.MIN_CACHE, lambda ok: done.append(ok) or finished.set())
    thread.join(120)
    assert finished.is_set() and done == [True] and fresh.runner.decode_ready(3, chunks.MIN_CACHE)


def test_release_programs_lets_go_of_compiled_programs_and_cached_prefixes_and_the_next_generation_compiles(fresh):
    fresh.prompt_cache.clear()
    first = [s.token_id for s in fresh.generate(PROMPT, params=GREEDY)]
    assert len(fresh.prompt_cache) == 1 and fresh.runner.decode_ready(1, chunks.MIN_CACHE)
    assert fresh.runner.has_decoded()  # (a cell's next turn is not the kernel's first)
    fresh.runner.release_programs()
    assert len(fresh.prompt_cache) == 0 and not fresh.runner.decode_ready(1, chunks.MIN_CACHE)
    assert not fresh.runner.has_decoded()
    with compiled() as names:
        again = [s.token_id for s in fresh.generate(PROMPT, params=GREEDY)]
    assert again == first and "decode_rows" in names and fresh.runner.has_decoded()


def test_hidden_states_are_causal_and_the_same_at_any_chunk_width(tiny_model):
    """A layer's states of a short text (a classifier's features): token i's state depends on tokens <= i only,
    whatever the chunk's padding; layer 0 is the embedding (the same token, the same state anywhere)."""
    runner, ids = tiny_model.runner, [5, 9, 5, 40, 41, 42]
    states = runner.hidden_states(ids, 2)
    assert states.shape == (6, tiny_model.config.dim)
    np.testing.assert_allclose(runner.hidden_states(ids[:3], 2), states[:3], atol=1e-5)
    np.testing.assert_allclose(runner.hidden_states(ids, 2, width=128), states, rtol=1e-5, atol=1e-4)
    embedded = runner.hidden_states(ids, 0)
    np.testing.assert_array_equal(embedded[0], embedded[2])
    assert not np.allclose(states[0], states[2])  # (after the layers, position and context count)
    with pytest.raises(GenerationError, match="1 to 16 tokens"):
        runner.hidden_states(list(range(20)), 2, width=16)
    both = runner.layer_states(ids, (2, 0))  # several layers from one pass, in the order asked
    np.testing.assert_array_equal(both[0], states)
    np.testing.assert_array_equal(both[1], embedded)
    with pytest.raises(GenerationError, match="layers are 0 to"):
        runner.layer_states(ids, (tiny_model.config.n_layers + 1,))


def test_the_model_is_an_engine_that_never_queues_and_counts_what_it_runs(tiny_model):
    generation = iter(tiny_model.submit(PROMPT, GREEDY))
    assert (tiny_model.queued, tiny_model.active) == (0, 0)  # nothing runs before the first read
    next(generation)
    assert tiny_model.active == 1
    generation.close()
    assert tiny_model.active == 0
    tiny_model.close()  # (nothing to stop)


def private_accesses(path: Path) -> list[str]:
    """`x._name` in a module where `x` is not `self`/`cls` (another object's private member), by line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    return found


def test_no_engine_module_reaches_into_another_objects_private_members():
    """The runner owns the programs, weights and prompt cache; the scheduler, the group prefill and `Model` use its
    public primitives (the reason for runner.py). A module may use its own objects' private members only."""
    found = [hit for path in sorted(ENGINE.glob("*.py")) for hit in private_accesses(path)]
    assert found == []


def test_every_decode_step_updates_the_cache_in_place(tiny_model):
    """Each decode step's write donates the cache (its buffers become the new one's: no copy of the whole cache per
    token); the runner's empty caches are zeros."""
    runner = tiny_model.runner
    empty = runner.empty_cache(2, 512)
    assert (empty.length, empty.keys[0].shape[0]) == (512, 2) and not np.asarray(empty.values[-1]).any()
    run = runner.start(np.asarray(PROMPT, np.int32), GREEDY)
    runner.take_cache(run)
    for _ in runner.prefill(run, 0):
        pass
    before = []
    for step in range(1, 4):
        before.append(run.cache)
        runner.decode(run, step)  # (dispatched: nothing read back yet)
    assert all(cache.keys[0].is_deleted() and cache.values[-1].is_deleted() for cache in before)
    assert not run.cache.keys[0].is_deleted()
    runner.release(run)
