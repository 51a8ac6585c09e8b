"""Accelerator checks: run where JAX sees a GPU or TPU (skipped on CPU-only machines such as CI's)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(jax.default_backend() == "cpu", reason="JAX sees no GPU/TPU here"),
]


def test_default_dtype_is_bfloat16_on_accelerators(tiny_path):
    from jupyter_chatflow import load_model

    assert load_model(tiny_path).dtype == jnp.bfloat16


def test_greedy_answer_on_the_accelerator(real_model_path, greedy_reference):
    from jupyter_chatflow import load_model

    model = load_model(real_model_path, dtype="float32")
    for prompt in greedy_reference["prompts"]:
        expected = prompt["greedy_ids"][:6]
        ours = [s.token_id for s in model.generate(prompt["prompt_ids"], max_tokens=6, temperature=0.0)]
        assert ours == expected[: len(ours)] and len(ours) >= 5


ARCHS = __import__("pathlib").Path(__file__).parents[1] / "model" / "archs"
ARCH_NAMES = ["llama", "llama3-rope", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "phi3-partial", "phi3-longrope"]


@pytest.mark.parametrize("name", ARCH_NAMES)
def test_every_architecture_on_the_accelerator(name):
    """The tiny model of each architecture (tests/model/archs) on the accelerator: float32 at full matmul precision
    within 1e-4 of transformers' logits (relative to each position's largest), as on the CPU; bfloat16, the
    accelerator's default, picks transformers' argmax at 90 % of the positions or more. Also printed: float32 at
    XLA's default precision, which may multiply in TF32 on a GPU."""
    import numpy as np

    from jupyter_chatflow import load_model

    reference = np.load(ARCHS / f"{'phi3-longrope-long' if name == 'phi3-longrope' else name}.npz")
    tokens, expected = reference["tokens"].tolist(), reference["logits"]
    scale = np.abs(expected).max(-1)
    with jax.default_matmul_precision("highest"):
        exact = load_model(ARCHS / f"{name}.gguf", dtype="float32").logits(tokens)
    default = load_model(ARCHS / f"{name}.gguf", dtype="float32").logits(tokens)
    half = load_model(ARCHS / f"{name}.gguf", dtype="bfloat16").logits(tokens)
    error = lambda ours: float((np.abs(ours - expected).max(-1) / scale).max())  # noqa: E731
    agree = float((half.argmax(-1) == expected.argmax(-1)).mean())
    print(f"\n{name}: float32 highest {error(exact):.1e}, default {error(default):.1e}; bfloat16 {error(half):.1e}, "
          f"argmax agreement {agree:.0%} on {jax.devices()[0].device_kind}")  # fmt: skip
    assert error(exact) < 1e-4 and (exact.argmax(-1) == expected.argmax(-1)).all()
    assert agree >= 0.9


# --- issue 25: weights kept quantized, the mesh, fused attention, the device path -----------------------------------

QUESTIONS = ("What is the capital of France?", "Write a haiku about the sea.", "Explain what a CPU cache is.")
ANSWER_TOKENS = 24
AS_FILE_BOUND = 1e-4  # as-file holds the float model's values exactly: only summation order differs (CPU: 3.5e-6)
INT8_BOUND = 0.15  # int8 rounds each weight by up to max|row| / 254: measured 5.4-6.4e-2 on the CPU, 2.3x that here


def highest(compute):
    """`compute()` with float32 dots at full precision (a GPU's default float32 dot may multiply in TF32)."""
    with jax.default_matmul_precision("highest"):
        return compute()


@pytest.fixture(scope="module")
def float32_runs(real_model_path) -> list[tuple[list[int], list[int], object]]:
    """Per question: the prompt ids, float32's greedy answer and its logits over both, on the accelerator."""
    from jupyter_chatflow import load_model

    model, runs = load_model(real_model_path, dtype="float32"), []
    for question in QUESTIONS:
        ids = model.tokenizer.apply_chat_template([{"role": "user", "content": question}])
        answer = highest(lambda: greedy(model, ids))  # noqa: B023
        runs.append((ids, answer, highest(lambda: model.logits(ids + answer)[len(ids) - 1 :])))  # noqa: B023
    return runs


def greedy(model, ids: list[int], n: int = ANSWER_TOKENS) -> list[int]:
    return [s.token_id for s in model.generate(ids, max_tokens=n, temperature=0.0, ignore_eos=True)]


def relative_error(ours, expected) -> float:
    """The largest logit error of any position, relative to that position's largest logit."""
    import numpy as np

    return float((np.abs(ours - expected).max(-1) / np.abs(expected).max(-1)).max())


@pytest.mark.parametrize(("weights", "bound", "agree"), [("as-file", AS_FILE_BOUND, 1.0), ("int8", INT8_BOUND, 0.9)])
def test_quantized_weights_on_the_accelerator(real_model_path, float32_runs, weights, bound, agree):
    """as-file and int8 (float32 activations, full precision) against float32 weights on the accelerator, the bounds
    the CPU tests hold: as-file's logits equal float32's up to summation order with the same top-1 everywhere and
    the same greedy answer; int8's within its rounding, top-1 at 90 % of the positions or more."""
    import numpy as np

    from jupyter_chatflow import load_model

    model = load_model(real_model_path, dtype="float32", weights=weights)
    assert model.weights_format == weights
    for ids, answer, expected in float32_runs:
        logits = highest(lambda: model.logits(ids + answer)[len(ids) - 1 :])  # noqa: B023
        top1 = float((logits.argmax(-1) == expected.argmax(-1)).mean())
        print(f"\n{weights}: relative logit error {relative_error(logits, expected):.1e}, top-1 {top1:.0%}")
        assert relative_error(logits, expected) < bound and top1 >= agree
        if weights == "as-file":
            assert highest(lambda: greedy(model, ids)) == answer  # noqa: B023
    assert np.isfinite(logits).all()


@pytest.mark.parametrize("weights", ["as-file", "int8"])
def test_bfloat16_is_the_default_with_quantized_weights(real_model_path, float32_runs, weights):
    """On the accelerator a quantized model computes in bfloat16 unless told otherwise, and still answers the first
    question as float32 does for its first words (as the CPU's bfloat16 test asks of float weights)."""
    import jax.numpy as jnp

    from jupyter_chatflow import load_model

    model = load_model(real_model_path, weights=weights)
    assert model.dtype == jnp.bfloat16
    ids, answer, _ = float32_runs[0]
    assert greedy(model, ids, 4) == answer[:4]


def test_attention_goes_through_dot_product_attention(real_model_path, float32_runs, monkeypatch):
    """Without an attention map, prefill and decode attend through `jax.nn.dot_product_attention` on the
    accelerator (traced once per layer), and its logits equal the streaming path's (float32, full precision; in
    bfloat16, the default, the same top-1 at 90 % of the positions or more)."""
    from jupyter_chatflow import load_model

    attention = pytest.importorskip("jupyter_chatflow.model.attention")
    assert attention.use_fused(0.0)
    calls: list[object] = []
    fused = jax.nn.dot_product_attention
    monkeypatch.setattr(jax.nn, "dot_product_attention", lambda *a, **k: calls.append(k) or fused(*a, **k))
    model = load_model(real_model_path, dtype="float32")
    model.runner.release_programs()  # every program is traced again, through the counting wrapper
    ids, answer, expected = float32_runs[0]
    assert highest(lambda: greedy(model, ids, 4)) == answer[:4]
    assert len(calls) >= 1 + model.config.n_layers  # the prefill layer program, and every layer of the decode step
    monkeypatch.setattr(attention, "FUSED", False)
    streaming = load_model(real_model_path, dtype="float32")
    ours = highest(lambda: model.logits(ids + answer)[len(ids) - 1 :])
    theirs = highest(lambda: streaming.logits(ids + answer)[len(ids) - 1 :])
    implementation = calls[0].get("implementation")  # type: ignore[attr-defined]
    print(f"\nfused against streaming: {relative_error(ours, theirs):.1e} (implementation {implementation})")
    assert relative_error(ours, theirs) < AS_FILE_BOUND and relative_error(ours, expected) < AS_FILE_BOUND
    half_streaming = load_model(real_model_path, dtype="bfloat16")  # bfloat16: where cuDNN's fused kernel may serve
    monkeypatch.undo()
    half = [m.logits(ids + answer)[len(ids) - 1 :] for m in (load_model(real_model_path), half_streaming)]
    assert (half[0].argmax(-1) == half[1].argmax(-1)).mean() >= 0.9  # (as bfloat16 is held to on every architecture)


def test_decode_keeps_the_cache_on_the_device(real_model_path):
    """Decode steps copy nothing from the device to the host (the guard refuses even an explicit copy): the cache
    stays on the accelerator and each sampled token feeds the next step from there; only the caller reads tokens."""
    import numpy as np

    from jupyter_chatflow import SamplingParams, load_model

    model = load_model(real_model_path)
    runner, device = model.runner, jax.devices()[0]
    ids = model.tokenizer.apply_chat_template([{"role": "user", "content": QUESTIONS[0]}])
    run = runner.start(np.asarray(ids, np.int32), SamplingParams(temperature=0.0, max_tokens=16))
    runner.take_cache(run)
    for _ in runner.prefill(run, 0):
        pass
    with jax.transfer_guard_device_to_host("disallow_explicit"):
        for step in range(1, 9):
            runner.decode(run, step)
    assert all(a.devices() == {device} for a in [*run.cache.keys, *run.cache.values, run.out.token])
    assert run.host(run.out).token_id == greedy(model, ids, 9)[8]  # the tokens fed on the device: generate's


def test_mesh_over_several_gpus(real_model_path, float32_runs):
    """devices=N on N accelerators (skipped with fewer than 2): the single-device logits (float32, full precision,
    collectives change only the order of sums) and greedy answers, the cache spread over every device."""
    import numpy as np

    from jupyter_chatflow import SamplingParams, load_model

    n = min(len(jax.devices()), 4)
    if n < 2:
        pytest.skip(f"one {jax.devices()[0].device_kind} here: the mesh needs 2 or more")
    model = load_model(real_model_path, dtype="float32", devices=n)
    assert model.devices == n
    for ids, answer, expected in float32_runs:
        assert relative_error(highest(lambda: model.logits(ids + answer)[len(ids) - 1 :]), expected) < 1e-4  # noqa: B023
        assert highest(lambda: greedy(model, ids)) == answer  # noqa: B023
    run = model.runner.start(np.asarray(float32_runs[0][0], np.int32), SamplingParams(temperature=0.0))
    model.runner.take_cache(run)
    for _ in model.runner.prefill(run, 0):
        pass
    model.runner.decode(run, 1)
    assert all(len(k.devices()) == n for k in run.cache.keys)
