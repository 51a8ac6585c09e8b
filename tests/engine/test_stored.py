"""Compiled programs kept on disk (`engine/stored.py`): a new process loads instead of tracing, and never loads a
program compiled for something else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jupyter_chatflow.engine import stored
from jupyter_chatflow.engine.stored import StoredProgram

# A process that calls one stored program and says what it computed and whether it traced the function.
CALL = """
import json, sys
import jax, jax.numpy as jnp, numpy as np
from jupyter_chatflow.engine.loader import enable_compilation_cache
from jupyter_chatflow.engine.stored import StoredProgram
enable_compilation_cache()
traced = []
def scaled(x, factor):
    traced.append(1)
    return jnp.sin(x) * factor
program = StoredProgram(jax.jit(scaled, static_argnums=(1,)), "scaled", static_argnums=(1,))
out = program(np.arange(int(sys.argv[1]), dtype=np.float32), 3.0)
print(json.dumps({"out": np.asarray(out).tolist(), "traced": len(traced)}))
"""


def _run(folder: Path, size: int = 4, **env: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CALL, str(size)], capture_output=True, text=True, timeout=120,
        env={**os.environ, "CHATFLOW_XLA_CACHE": str(folder), **env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _files(folder: Path) -> list[Path]:
    return sorted((folder / "programs").glob("scaled-*.xla"))


def test_a_new_process_loads_the_program_an_earlier_one_compiled_and_traces_nothing(tmp_path):
    first = _run(tmp_path)
    second = _run(tmp_path)
    assert first["traced"] == 1 and second["traced"] == 0
    assert second["out"] == first["out"]
    np.testing.assert_allclose(second["out"], np.sin(np.arange(4)) * 3.0, rtol=1e-6)
    assert len(_files(tmp_path)) == 1


def test_other_shapes_and_other_xla_flags_compile_their_own(tmp_path):
    _run(tmp_path)
    assert _run(tmp_path, size=5)["traced"] == 1  # another shape
    assert _run(tmp_path, XLA_FLAGS="--xla_cpu_enable_fast_math=false")["traced"] == 1  # another XLA
    assert len(_files(tmp_path)) == 3
    assert _run(tmp_path, XLA_FLAGS="--xla_cpu_enable_fast_math=false")["traced"] == 0


def test_the_process_key_holds_the_versions_the_devices_the_cpu_and_the_source():
    parts = stored._process_parts()
    assert jax.__version__ in parts and stored._source_hash() in parts
    assert any("flags" in part or "model name" in part for part in parts)  # (Linux: the CPU's feature flags)


def test_a_file_that_does_not_load_is_compiled_again_and_replaced(tmp_path):
    _run(tmp_path)
    (path,) = _files(tmp_path)
    path.write_bytes(b"not a program")
    again = _run(tmp_path)
    assert again["traced"] == 1 and again["out"] == pytest.approx(list(np.sin(np.arange(4)) * 3.0), rel=1e-6)
    assert _run(tmp_path)["traced"] == 0  # (the file was written anew)


def test_a_program_keeps_one_executable_per_signature_and_prepare_runs_it_once_on_ones(tmp_path, monkeypatch):
    """`prepare` (a batch's decode step made ready beside a decoding batch) returns the executable's first run, on
    ones, for its caller to pay there; for a program already held, None. (Kept in memory only:
    an executable with a host callback does not serialize.)"""
    monkeypatch.setattr(stored, "programs_folder", lambda: None)
    calls, runs = [], []

    def double(x):
        calls.append(x.shape)
        jax.debug.callback(lambda v: runs.append(np.asarray(v).tolist()), x)
        return x * 2

    program = StoredProgram(jax.jit(double), "double")
    first_run = program.prepare(jax.ShapeDtypeStruct((3,), jnp.float32))
    assert program._cache_size() == 1 and calls == [(3,)] and runs == []  # traced once to compile, not run
    first_run()
    assert runs == [[1.0, 1.0, 1.0]]  # run once, on ones
    assert program.prepare(jax.ShapeDtypeStruct((3,), jnp.float32)) is None  # (held: nothing to run)
    assert len(runs) == 1
    assert np.asarray(program(np.full(3, 4.0, np.float32))).tolist() == [8.0, 8.0, 8.0]
    assert program._cache_size() == 1 and len(calls) == 1 and runs[-1] == [4.0, 4.0, 4.0]
    program(np.ones(2, np.float32))
    assert program._cache_size() == 2
    program.clear()
    assert program._cache_size() == 0


def test_a_first_turns_list_ends_one_program_after_the_decode_step_and_loads_the_largest_first(tmp_path, monkeypatch):
    monkeypatch.setattr(stored, "_first_turn", {})
    names = ["embed-a.xla", "layer-b.xla", "decode_rows-c.xla", "write-d.xla", "select_rows-e.xla"]
    for name, size in zip(names, [10, 20, 500, 5, 7], strict=True):
        (tmp_path / name).write_bytes(b"x" * size)
        stored._used("arch", tmp_path / name, ends=name.startswith("decode_rows"))
    listed = stored._read_list(stored._list_path(tmp_path, "arch"))
    assert listed == names[:4]  # (written once the decode step's cache write was used: the rest is not a first turn)
    assert stored._largest_first(tmp_path, listed) == ["decode_rows-c.xla", "embed-a.xla", "layer-b.xla", "write-d.xla"]


def test_a_model_loaded_again_in_a_new_process_preloads_its_first_turn_and_traces_no_model_program(tiny_path, tmp_path):
    """The first process compiles and lists what it used first; the second loads those on its preload threads before
    its first generation asks, which then traces nothing of the model's."""
    script = """
import json, logging, sys, time
import jax
jax.config.update("jax_log_compiles", True)
traced = []
class Traced(logging.Handler):
    def emit(self, record):
        if record.getMessage().startswith("Finished tracing"):
            traced.append(record.getMessage().split()[2])
logging.getLogger("jax").addHandler(Traced()); logging.getLogger("jax").setLevel(logging.WARNING)
import jupyter_chatflow as cf
from jupyter_chatflow.engine import stored
model = cf.load_model(sys.argv[1])
for thread in list(stored._preloaders):
    thread.join()
steps = list(model.generate(list(range(3, 30)), max_tokens=4, temperature=0.0))
model_programs = {"embed_chunk", "layer", "final_norm", "sample_after", "decode_rows", "write"}
print(json.dumps({"ids": [s.token_id for s in steps], "traced": sorted(set(traced) & model_programs)}))
"""
    env = {**os.environ, "CHATFLOW_XLA_CACHE": str(tmp_path)}
    runs, first_list = [], ""
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", script, str(tiny_path)], capture_output=True, text=True,
                              timeout=300, env=env)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        first_list = first_list or next((tmp_path / "programs").glob("*.first")).read_text()
    assert runs[0]["traced"] and not runs[1]["traced"]
    assert runs[1]["ids"] == runs[0]["ids"]
    (listed,) = (tmp_path / "programs").glob("*.first")
    assert any(line.startswith("decode_rows-") for line in listed.read_text().splitlines())
    assert listed.read_text() == first_list  # (the second process, which preloaded it, wrote the same list again)


def test_a_folder_that_cannot_be_written_costs_speed_not_the_answer(tmp_path):
    (tmp_path / "programs").write_text("a file where the folder would be: nothing can be written under it")
    first, second = _run(tmp_path), _run(tmp_path)
    assert first["traced"] == second["traced"] == 1  # (compiled in each process: nothing kept)
    assert second["out"] == pytest.approx(list(np.sin(np.arange(4)) * 3.0), rel=1e-6)


def test_a_program_that_waits_for_another_threads_load_counts_the_wait_as_its_compile_time():
    """The first turn asks for a program a preload thread is loading: it waits, and its thread's compile clock
    (what the turn's account reads) has that wait, not zero."""
    import threading
    import time

    from jupyter_chatflow.model.compile_clock import compile_seconds

    held, release = threading.Event(), threading.Event()

    def loader() -> None:
        with stored._claim("a file being loaded"):
            held.set()
            release.wait()

    thread = threading.Thread(target=loader)
    thread.start()
    held.wait()
    threading.Timer(0.3, release.set).start()
    before, started = compile_seconds(), time.perf_counter()
    with stored._claim("a file being loaded", "decode_rows"):
        waited = time.perf_counter() - started
    thread.join()
    assert 0.25 <= compile_seconds() - before <= waited + 0.01


def test_a_preloaded_program_runs_once_on_ones_with_the_weights_its_signature_names():
    """The preload's first run: the weights whose structure the program was stored for (a layer's, not the whole
    model's), and ones for the rest (a decode step at position 0 left its first-run cost to the first real step)."""
    whole = [jnp.zeros((4, 4)), jnp.zeros((4,))]
    layer = [jnp.zeros((2, 2))]
    pos, x = jnp.zeros((), jnp.int32), jnp.zeros((3,), jnp.float32)
    key = ((), stored._leaves_signature(layer), stored._leaves_signature((x, pos)))
    ran = []
    stored._run_once(key, lambda weights, x, pos: ran.append((weights, x, pos)) or x, lambda: [whole, layer])
    ((weights, x_run, pos_run),) = ran
    assert weights is layer
    assert np.asarray(x_run).tolist() == [1.0, 1.0, 1.0] and int(pos_run) == 1
    stored._run_once(key, lambda *args: ran.append(args), lambda: [whole])  # no weights of its structure: not run
    assert len(ran) == 1


def test_a_first_run_whose_ones_would_be_large_is_left_to_the_first_real_call():
    ran = []
    big = jax.ShapeDtypeStruct((stored.RUN_ONCE_MAX_BYTES // 4 + 1,), jnp.float32)
    key = ((), None, stored._leaves_signature((big,)))
    stored._run_once(key, lambda x: ran.append(x), lambda: [])
    assert ran == []
