"""Generation bookkeeping: stop strings, stop tokens, whole UTF-8 characters, finish reasons."""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_chatflow.engine.generation import Generation, RawStep, tokens_per_s


def raw(token_id: int) -> RawStep:
    return RawStep(
        token_id=token_id,
        logprob=-0.5,
        entropy=1.0,
        top_ids=np.array([token_id, 7]),
        top_logprobs=np.array([-0.5, -1.5]),
        top_sampling_probs=np.array([0.9, 0.1]),
    )


def run(tokenizer, ids, stop=()):
    generation = Generation(lambda cancel, usage: (raw(i) for i in ids), tokenizer, prompt_tokens=3, stop=tuple(stop))
    return generation, list(generation)


@pytest.fixture(scope="module")
def tokenizer(tiny_model):
    return tiny_model.tokenizer


def test_text_is_the_concatenation_of_step_texts(tokenizer):
    generation, steps = run(tokenizer, tokenizer.encode("Hello there, the end"))
    assert "".join(s.text for s in steps) == generation.text == "Hello there, the end"
    assert generation.finish_reason == "length"
    assert generation.usage.completion_tokens == len(steps)


def test_stop_token_ends_without_showing_it(tokenizer):
    ids = [*tokenizer.encode("Hi"), tokenizer.eos_id, *tokenizer.encode("never")]
    generation, steps = run(tokenizer, ids)
    assert generation.text == "Hi" and generation.finish_reason == "stop"
    assert [s.token_id for s in steps] == tokenizer.encode("Hi")


def test_stop_string_cuts_the_answer_and_is_never_shown(tokenizer):
    generation, steps = run(tokenizer, tokenizer.encode("Hello world. Bye"), stop=["world"])
    assert generation.text == "Hello " and generation.finish_reason == "stop"
    assert "w" not in "".join(s.text for s in steps)


def test_partial_stop_string_is_held_back_then_released(tokenizer):
    generation, steps = run(tokenizer, tokenizer.encode("a wor wore"), stop=["world"])
    assert generation.text == "a wor wore" and generation.finish_reason == "length"
    shown = [s.text for s in steps]
    assert "".join(shown) == "a wor wore"
    assert shown[-1] == "wore"[-1] or shown[-1].endswith("e")


def test_multibyte_character_is_emitted_whole(tokenizer):
    ids = tokenizer.encode("é🙂")
    assert len(ids) == 6  # tiny vocabulary: one token per byte
    _, steps = run(tokenizer, ids)
    assert [s.text for s in steps] == ["", "é", "", "", "", "🙂"]


def test_steps_carry_alternatives(tokenizer):
    _, steps = run(tokenizer, tokenizer.encode("ab"))
    first = steps[0].top_alternatives
    assert [a.token_id for a in first] == [tokenizer.encode("a")[0], 7]
    assert first[0].sampling_prob == pytest.approx(0.9) and first[1].logprob == pytest.approx(-1.5)


def test_iterating_twice_continues_the_same_run(tokenizer):
    generation, _ = run(tokenizer, tokenizer.encode("xyz"))
    assert list(generation) == []


def test_stop_token_is_an_ordinary_token_when_eos_is_ignored(tokenizer):
    ids = [*tokenizer.encode("Hi"), tokenizer.eos_id, *tokenizer.encode("on")]
    generation = Generation(
        lambda cancel, usage: (raw(i) for i in ids), tokenizer, prompt_tokens=1, stop=(), stop_ids=frozenset()
    )
    assert [s.token_id for s in generation] == ids and generation.finish_reason == "length"


def test_interrupt_inside_the_engine_marks_the_generation_cancelled(tokenizer):
    def interrupted(cancel, usage):
        yield from (raw(i) for i in tokenizer.encode("ab"))
        raise KeyboardInterrupt

    generation = Generation(interrupted, tokenizer, prompt_tokens=1, stop=())
    with pytest.raises(KeyboardInterrupt):
        list(generation)
    assert generation.finish_reason == "cancelled" and generation.text == "ab"
    assert generation._cancel.is_set()


def test_tokens_per_s_leaves_compile_time_out():
    assert tokens_per_s(6, 1_200.0, 1_000.0) == pytest.approx(30.0)  # 6 steps in 200 ms of decoding
    assert tokens_per_s(6, 1_200.0) == pytest.approx(5.0)
    assert tokens_per_s(0, 100.0) == 0.0 and tokens_per_s(3, 50.0, 50.0) == 0.0  # nothing decoded: no speed


def test_usage_keeps_the_prefills_compile_time_apart_from_the_decode_steps(tokenizer, monkeypatch):
    """A decode program's first call compiles (seconds) inside decode_ms: its speed must not count it (a tour
    chapter showed 12.7 tokens/s for a turn that decoded at 46). The prefill's compiling is not the decode's."""
    import jupyter_chatflow.engine.generation as generation_module

    clock = iter([0.0, 0.030, 1.030, 1.030, 1.030, 1.030])  # at start; after the prefill; after each step
    monkeypatch.setattr(generation_module, "compile_seconds", lambda: next(clock))
    generation, steps = run(tokenizer, tokenizer.encode("abcde"))
    usage = generation.usage
    assert [s.compile_ms for s in steps] == pytest.approx([30.0, 1_000.0, 0.0, 0.0, 0.0])
    assert usage.compile_ms == pytest.approx(1_030.0) and usage.decode_compile_ms == pytest.approx(1_000.0)
    assert usage.completion_tokens == 5 and usage.decode_steps == 4
    assert usage.decode_ms == pytest.approx(steps[-1].elapsed_ms - steps[0].elapsed_ms)
    assert usage.decode_tokens_per_s == tokens_per_s(4, usage.decode_ms, 1_000.0)
