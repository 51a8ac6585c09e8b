"""What a model file is and what it takes in memory (model/memory.py, model/header.py), and the early refusal of a
model that would not fit: the figures a user reads before a load, checked against the file's own tensors."""

from __future__ import annotations

import re
from pathlib import Path

import gguf
import pytest

from jupyter_chatflow import load_model
from jupyter_chatflow.engine import loader
from jupyter_chatflow.errors import ModelFormatError, ModelNotFoundError, ModelTooLargeError
from jupyter_chatflow.model import memory
from jupyter_chatflow.model.gguf_file import describe, read_metadata
from jupyter_chatflow.model.header import Header, read_header
from jupyter_chatflow.model.memory import Available, EngineNeeds, LoadPlan, bytes_needed, footprint
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf

TINY_PARAMETERS = 267 * 64 + 64 + 2 * (2 * 64 + 64 * 64 + 2 * 32 * 64 + 64 * 64 + 3 * 128 * 64)
"""The tiny model's weights: the embedding (the head is tied to it), the final norm, and per layer two norms, q, k,
v, o and the three feed-forward matrices."""
NOTHING_MORE = EngineNeeds(first_cache=0, prompt_cache_bytes=0, programs_bytes=0)
MIB = 1 << 20


def test_the_header_agrees_with_ggufs_reader(tmp_path):
    """Tensor names, shapes and types, and the scalar metadata, as gguf's own reader reads them (which also builds
    the vocabulary: the header leaves long arrays out and only counts them)."""
    for spec in (TinySpec(), TinySpec(quant="Q8_0", tied=False), TinySpec(vocabulary="llama", rope_freqs=True)):
        path = write_tiny_gguf(tmp_path / f"{spec.quant}-{spec.vocabulary}.gguf", spec)
        header, reader = read_header(path), gguf.GGUFReader(path)
        assert [(t.name, t.shape, t.type_name) for t in header.tensors] == [
            (t.name, tuple(int(n) for n in reversed(t.shape)), t.tensor_type.name) for t in reader.tensors
        ]
        full = read_metadata(path)
        assert {k: v for k, v in full.items() if not isinstance(v, list) and not k.startswith("GGUF.")} == {
            k: v for k, v in header.metadata.items() if not isinstance(v, list)
        }
        assert header.array_lengths["tokenizer.ggml.tokens"] == len(full["tokenizer.ggml.tokens"])


def test_the_tiny_models_footprint(tiny_path):
    about = footprint(tiny_path)
    assert about.parameters == TINY_PARAMETERS == 91_136
    assert (about.weight_bytes("float32"), about.weight_bytes("bfloat16")) == (4 * TINY_PARAMETERS, 2 * TINY_PARAMETERS)
    assert about.kv_bytes(1024) == 2 * 2 * 2 * 16 * 1024 * 4  # keys and values, 2 layers, 2 kv heads of 16, float32
    assert about.summary() == (
        "tiny-random-llama: llama, 91,136 parameters, F32, context 512 tokens; weights 0.3 MiB as float32, 0.2 MiB as "
        "bfloat16"
    )


def test_an_untied_head_counts_and_a_tied_one_does_not(tmp_path, tiny_path):
    untied = write_tiny_gguf(tmp_path / "untied.gguf", TinySpec(tied=False))
    assert footprint(untied).parameters == TINY_PARAMETERS + 267 * 64
    assert describe(tiny_path)["parameters"] == TINY_PARAMETERS  # the embedding is the head: counted once
    assert describe(untied)["parameters"] == TINY_PARAMETERS + 267 * 64


def test_each_weights_choice_has_its_figures(tmp_path):
    """as-file: the file's blocks (Q8_0: 34 bytes per 32 weights) and its float tensors in the dtype; int8: a byte per
    matrix weight and a float32 scale per matrix row; neither dequantizes the file to float32 on the way."""
    about = footprint(write_tiny_gguf(tmp_path / "q8.gguf", TinySpec(quant="Q8_0")))
    layer_matrices = 2 * (64 * 64 + 2 * 32 * 64 + 64 * 64 + 3 * 128 * 64)
    floats = TINY_PARAMETERS - layer_matrices - 267 * 64  # (norms)
    assert about.weight_bytes("float32", "as-file") == layer_matrices // 32 * 34 + (267 * 64 + floats) * 4
    assert about.weight_bytes("bfloat16", "as-file") == layer_matrices // 32 * 34 + (267 * 64 + floats) * 2
    rows = 267 + 2 * (64 + 2 * 32 + 64 + 2 * 128 + 64)
    assert about.weight_bytes("float32", "int8") == layer_matrices + 267 * 64 + 4 * rows + floats * 4
    plan = LoadPlan()  # a first load: float dequantizes the whole file to float32 first, as-file and int8 do not
    assert bytes_needed(about, "float32", plan, NOTHING_MORE) == about.weight_bytes("float32")
    for held in ("as-file", "int8"):
        assert bytes_needed(about, "float32", plan, NOTHING_MORE, held) == about.weight_bytes("float32", held)
    room = Available(about.weight_bytes("float32", "as-file") - 1, "test")
    with pytest.raises(ModelTooLargeError, match=r"as bfloat16\) with weights='as-file' and"):
        memory.check_fits(about, "float32", LoadPlan(prepared=True), NOTHING_MORE, room, weights="as-file")
    assert describe(about.path)["weights_int8_gib"] == 0.0


def test_quantization_is_the_files_type_then_its_tensors_types(tmp_path):
    q8 = footprint(write_tiny_gguf(tmp_path / "q8.gguf", TinySpec(quant="Q8_0")))
    assert q8.quantization == "Q8_0 (Q8_0, F32)" and q8.weight_bytes() == 4 * TINY_PARAMETERS  # (dequantized all)
    header = Header(path=Path("x.gguf"), metadata={"general.file_type": 15}, array_lengths={}, tensors=())
    types = {"Q4_K": 9, "Q6_K": 3, "F32": 1, "Q8_0": 1}
    assert memory.quantization_text(header, types) == "Q4_K_M (Q4_K, Q6_K, F32, …)"
    assert memory.count_text(268_098_176) == "268 M" and memory.count_text(1_235_814_400) == "1.2 B"


def test_describe_gives_the_memory_figures(tiny_path, monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: Available(3 << 30, "test"))
    info = describe(tiny_path)
    assert info["summary"] == footprint(tiny_path).summary() and info["quantization"] == "F32"
    assert (info["weights_float32_gib"], info["weights_bfloat16_gib"], info["available_gib"]) == (0.0, 0.0, 3.0)
    assert info["kv_cache_per_1024_tokens_mib"] == 0.5
    assert info["needs_float32_gib"] == 0.25 and info["needs_bfloat16_gib"] == 0.25  # (the engine's first turn)
    assert info["layers"] == 2 and info["tensor_types"] == {"F32": 2 + 2 * 9}  # (the keys that were there stay)


def test_what_a_load_needs_follows_how_it_goes(tiny_path):
    """The peak of each way a load goes (model/memory.py's docstring has the measurements)."""
    about = footprint(tiny_path)
    f32, bf16 = 4 * TINY_PARAMETERS, 2 * TINY_PARAMETERS
    assert bytes_needed(about, "bfloat16", LoadPlan(prepared=True), NOTHING_MORE) == bf16  # float32 pages: page cache
    assert bytes_needed(about, "bfloat16", LoadPlan(), NOTHING_MORE) == f32  # a first load dequantizes to float32
    assert bytes_needed(about, "bfloat16", LoadPlan(weights_cache=False), NOTHING_MORE) == f32 + bf16
    assert bytes_needed(about, "float32", LoadPlan(weights_cache=False), NOTHING_MORE) == 2 * f32
    assert bytes_needed(about, "bfloat16", LoadPlan(on_host=False), NOTHING_MORE) == f32  # (weights on the device)
    first_turn = 2 * about.kv_bytes(512) + (64 << 20) + (192 << 20)
    assert bytes_needed(about, "float32", LoadPlan(prepared=True)) == f32 + first_turn


def test_the_first_turns_figures_are_the_engines():
    from jupyter_chatflow.engine.model import MIN_CACHE
    from jupyter_chatflow.engine.prompt_cache import DEFAULT_MAX_BYTES

    assert (memory.FIRST_CACHE, memory.PROMPT_CACHE_BYTES) == (MIN_CACHE, DEFAULT_MAX_BYTES)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_available_memory_is_the_least_of_meminfo_and_the_cgroup_limits(tmp_path):
    """Binder's cgroup v2: the room under memory.max (its own and its parents'), the inactive page cache counted as
    free; "max" is no limit."""
    proc = _tree(tmp_path / "proc", {"meminfo": "MemTotal: 8000000 kB\nMemAvailable: 4000000 kB\n",
                                     "self/cgroup": "0::/user.slice/notebook\n"})  # fmt: skip
    cgroups = _tree(tmp_path / "cg", {
        "user.slice/notebook/memory.max": "max\n", "user.slice/notebook/memory.current": "100\n",
        "user.slice/memory.max": f"{2048 * MIB}\n", "user.slice/memory.current": f"{1800 * MIB}\n",
        "user.slice/memory.stat": f"anon 1\ninactive_file {200 * MIB}\nactive_file 5\n",
    })  # fmt: skip
    room = memory.available_memory(proc, cgroups)
    assert room == Available(448 * MIB, f"{cgroups / 'user.slice' / 'memory.max'} less the cgroup's use")
    (cgroups / "user.slice/memory.max").write_text("max\n")
    assert memory.available_memory(proc, cgroups) == Available(4_000_000 * 1024, "MemAvailable in /proc/meminfo")


def test_available_memory_reads_cgroup_v1_and_ignores_its_no_limit(tmp_path):
    proc = _tree(tmp_path / "proc", {"meminfo": "MemAvailable: 4000000 kB\n", "self/cgroup": "4:memory:/jobs/a\n"})
    cgroups = _tree(tmp_path / "cg", {
        "memory/jobs/a/memory.limit_in_bytes": f"{1024 * MIB}\n",
        "memory/jobs/a/memory.usage_in_bytes": f"{900 * MIB}\n",
        "memory/jobs/a/memory.stat": f"total_inactive_file {100 * MIB}\n",
        "memory/memory.limit_in_bytes": "9223372036854771712\n", "memory/memory.usage_in_bytes": "5\n",
    })  # fmt: skip
    assert memory.available_memory(proc, cgroups).bytes == 224 * MIB  # type: ignore[union-attr]
    assert memory.available_memory(tmp_path / "nothing", tmp_path / "nothing") is None  # (not Linux: no check)


def test_a_model_too_large_is_refused_with_both_figures_and_the_fix(tiny_path):
    about = footprint(tiny_path)
    plan = LoadPlan(prepared=True)
    need32, need16 = (bytes_needed(about, dtype, plan, NOTHING_MORE) for dtype in ("float32", "bfloat16"))
    between = Available(need16 + 1, "MemAvailable in /proc/meminfo")
    with pytest.raises(ModelTooLargeError) as refused:
        memory.check_fits(about, "float32", plan, NOTHING_MORE, between)
    assert str(refused.value) == (
        "tiny-random-llama needs 0.3 MiB as float32 (0.2 MiB as bfloat16) and 0.2 MiB are available (MemAvailable in "
        "/proc/meminfo): load it with dtype='bfloat16' (--dtype bfloat16 for chatflow and %chat_model), or free "
        "memory (close other kernels, or models you no longer use), or set CHATFLOW_MEMORY_CHECK=off to try anyway."
    )
    memory.check_fits(about, "bfloat16", plan, NOTHING_MORE, between)  # fits
    with pytest.raises(ModelTooLargeError, match=r"free memory \(close .*\), or choose a model with fewer parameters"):
        memory.check_fits(about, "bfloat16", plan, NOTHING_MORE, Available(need16 - 1, "test"))
    assert need32 == 2 * need16


def test_the_check_can_be_turned_off(tiny_path, monkeypatch):
    monkeypatch.setenv("CHATFLOW_MEMORY_CHECK", "off")
    memory.check_fits(footprint(tiny_path), "float32", available=Available(0, "test"))


def test_load_model_refuses_before_dequantizing_anything(tiny_path, monkeypatch):
    def no_reading(*args, **kwargs):
        raise AssertionError("the weights were read")

    monkeypatch.setattr(loader, "read_gguf", no_reading)
    monkeypatch.setattr(loader.prepared, "load", no_reading)
    monkeypatch.setattr(memory, "available_memory", lambda: Available(1000, "the limit in /sys/fs/cgroup/memory.max"))
    with pytest.raises(ModelTooLargeError) as refused:
        load_model(tiny_path, dtype="float32")
    # (on a GPU this memory holds only the float32 weights dequantized, the GPU the rest: other figures, same words)
    said = (r"tiny-random-llama needs [\d.]+ [GM]iB as float32 \([\d.]+ [GM]iB as bfloat16\) and 0\.0 MiB are "
            r"available \(the limit in /sys/fs/cgroup/memory\.max\): free memory")  # fmt: skip
    assert re.match(said, str(refused.value)), str(refused.value)


def test_a_file_that_is_not_a_model_is_refused_by_its_header(tmp_path):
    with pytest.raises(ModelNotFoundError, match="No model file at"):
        footprint(tmp_path / "missing.gguf")
    (tmp_path / "notes.gguf").write_text("not a model")
    with pytest.raises(ModelFormatError, match="is not a GGUF file"):
        footprint(tmp_path / "notes.gguf")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(write_tiny_gguf(tmp_path / "whole.gguf").read_bytes()[:3000])  # inside the vocabulary
    with pytest.raises(ModelFormatError, match=r"cut\.gguf is a corrupt or truncated GGUF file .*Download it again"):
        footprint(cut)


def test_the_default_models_summary(real_model_path):
    """What a user reads before SmolLM2-135M-Instruct loads, and that the header reads it as gguf's reader does."""
    about = footprint(real_model_path)
    assert about.summary() == (
        "SmolLM2-135M-Instruct: llama, 135 M parameters, Q4_1 (Q4_1, Q8_0, F32), context 8,192 tokens; weights 0.50 "
        "GiB as float32, 0.25 GiB as bfloat16, 92.1 MiB as-file"
    )
    reader = gguf.GGUFReader(real_model_path)
    assert about.parameters == sum(int(t.n_elements) for t in reader.tensors) == 134_515_008


def test_figures_that_would_read_the_same_are_given_in_mib(tiny_path):
    about, plan = footprint(tiny_path), LoadPlan(prepared=True)
    need = bytes_needed(about, "float32", plan)  # 256.8 MiB: "0.25 GiB", as 256.3 MiB would read
    said = r"needs 256\.8 MiB as float32 \(256\.4 MiB as bfloat16\) and 256\.3 MiB are available \(test\): free"
    with pytest.raises(ModelTooLargeError, match=said):
        memory.check_fits(about, "float32", plan, available=Available(need - MIB // 2, "test"))


ARCHS = sorted((Path(__file__).parent / "archs").glob("*.gguf"))


@pytest.mark.parametrize("path", ARCHS, ids=[path.stem for path in ARCHS])
def test_the_header_gives_the_config_the_loader_reads_for_every_architecture(path):
    """The header's short metadata makes the same config as the whole file does (qwen2, qwen3, gemma2, gemma3, phi3…),
    and its parameters are every tensor's."""
    from jupyter_chatflow.model.gguf_file import read_gguf

    about = footprint(path)
    assert about.config == read_gguf(path).config
    assert about.parameters == sum(int(t.n_elements) for t in gguf.GGUFReader(path).tensors)


def test_which_dtypes_fit_is_said_from_the_memory_available(tiny_path):
    """Said when a model is chosen in the panel (Binder has 2 GiB in all): float32 and bfloat16, bfloat16 only, or
    neither, from the same figures as the load's own check."""
    about = memory.footprint(tiny_path)
    need = {dtype: memory.bytes_needed(about, dtype) for dtype in ("float32", "bfloat16")}
    room = lambda n: memory.Available(n, "test")  # noqa: E731
    assert memory.fit_text(about, room(need["float32"])).endswith("fits as float32 or bfloat16")
    only = memory.fit_text(about, room(need["float32"] - 1))
    assert only.endswith("fits as bfloat16 only (choose it: dtype='bfloat16')") and "available now" in only
    assert memory.fit_text(about, room(need["bfloat16"] - 1)).endswith("too large as float32 or bfloat16")
