"""The prepared-weights cache: same model, no GGUF parsing on the second load, safe invalidation."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from jupyter_chatflow import load_model
from jupyter_chatflow.engine import loader
from jupyter_chatflow.model import prepared


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CHATFLOW_WEIGHTS_CACHE", str(tmp_path / "weights"))
    return tmp_path / "weights"


@pytest.fixture
def model_file(tmp_path, tiny_path):
    return shutil.copy(tiny_path, tmp_path / "model.gguf")


def test_second_load_uses_the_cache_and_matches(cache_dir, model_file, monkeypatch):
    first = load_model(model_file)
    assert prepared.entry_for(model_file).is_dir()
    monkeypatch.setattr(loader, "read_gguf", lambda path: pytest.fail("the GGUF was parsed again"))
    second = load_model(model_file)
    ids = [1, 40, 50, 60, 2]
    np.testing.assert_array_equal(second.logits(ids), first.logits(ids))
    assert second.tokenizer.encode("the hello") == first.tokenizer.encode("the hello")
    assert second.config == first.config


def test_a_changed_file_is_read_again(cache_dir, model_file):
    load_model(model_file)
    before = prepared.entry_for(model_file)
    stat = os.stat(model_file)
    os.utime(model_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert prepared.entry_for(model_file) != before
    load_model(model_file)
    assert prepared.entry_for(model_file).is_dir()


def test_damaged_entry_falls_back_to_the_gguf(cache_dir, model_file):
    load_model(model_file)
    entry = prepared.entry_for(model_file)
    (entry / "embed.npy").write_bytes(b"garbage")
    assert prepared.load(model_file) is None
    assert load_model(model_file).logits([1, 2, 3]).shape == (3, 267)
    assert prepared.load(model_file) is not None, "the entry was not written anew"


def test_off_disables_the_cache(monkeypatch, model_file, tmp_path):
    monkeypatch.setenv("CHATFLOW_WEIGHTS_CACHE", "off")
    load_model(model_file)
    assert prepared.entry_for(model_file) is None and prepared.cache_root() is None


@pytest.mark.parametrize("weights", ["as-file", "int8"])
def test_weights_held_quantized_have_entries_of_their_own(cache_dir, tmp_path, weights, monkeypatch):
    """The packed fields round-trip through an entry of their own (the float entry is not touched by as-file, and
    int8 from the file writes none), and the second load parses no GGUF."""
    from jupyter_chatflow.testing import TinySpec, write_tiny_gguf

    path = write_tiny_gguf(tmp_path / "q4.gguf", TinySpec(quant="Q4_1", seed=9))
    first = load_model(path, weights=weights)
    entry = prepared.entry_for(path, weights)
    assert entry.is_dir() and entry != prepared.entry_for(path) and prepared.load(path) is None
    monkeypatch.setattr(loader, "read_gguf", lambda *a, **k: pytest.fail("the GGUF was parsed again"))
    second = load_model(path, weights=weights)
    ids = [1, 40, 50, 60, 2]
    np.testing.assert_array_equal(second.logits(ids), first.logits(ids))
    assert second.runner.weight_bytes == first.runner.weight_bytes and second.weights_format == weights


KILLED_MID_WRITE = """
import sys, time
from jupyter_chatflow import load_model
from jupyter_chatflow.model import prepared

def slow(folder, arranged):  # the entry's first array, then a pause the kill lands in
    (folder / "first.npy").write_bytes(b"x" * 4096)
    print("WRITING", flush=True)
    time.sleep(60)

prepared._write_entry = slow
load_model(sys.argv[1], dtype="float32")
"""


@pytest.mark.slow  # a fresh process importing JAX and the package
def test_a_load_killed_mid_write_leaves_a_staging_folder_the_next_write_removes(cache_dir, model_file):
    import signal
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", KILLED_MID_WRITE, str(model_file)], stdout=subprocess.PIPE,
                             text=True, env=os.environ | {prepared.ENV_VAR: str(cache_dir)})  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "WRITING"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        child.kill()
    [left] = list(cache_dir.glob(f"{prepared.STAGING}{child.pid}-*"))  # the killed write's, named by its pid
    assert (left / "first.npy").is_file()
    live = cache_dir / f"{prepared.STAGING}{os.getpid()}-mine"  # a write of a live process (this one) stays
    live.mkdir()
    load_model(model_file, dtype="float32")  # prepares the file again: the dead write's folder goes
    assert not left.exists() and live.exists()
    assert [p.name for p in cache_dir.iterdir() if not p.name.startswith(".")] == [prepared.entry_for(model_file).name]
