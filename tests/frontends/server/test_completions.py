"""/v1/chat/completions through the official openai client: whole answers, streams, usage, logprobs, seed, stop."""

from __future__ import annotations

import math
import time

import openai
import pytest

from jupyter_chatflow.engine.sampling import SamplingParams

PROMPT = [{"role": "user", "content": "Hi"}]


@pytest.fixture
def client(serve):
    base, _ = serve()
    return openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)


def alone(model, max_tokens: int = 8, **knobs):
    """What Model.generate gives for PROMPT with these knobs: (steps, generation)."""
    ids = model.tokenizer.apply_chat_template(PROMPT)
    generation = model.generate(ids, params=SamplingParams(max_tokens=max_tokens, **knobs))
    return list(generation), generation


def test_a_whole_answer_is_the_models_own_greedy_answer(client, tiny_model):
    _, generation = alone(tiny_model, temperature=0.0, ignore_eos=True)
    answer = client.chat.completions.create(model="tiny", messages=PROMPT, temperature=0, max_tokens=8,
                                            extra_body={"ignore_eos": True})  # fmt: skip
    choice = answer.choices[0]
    assert choice.message.role == "assistant" and choice.message.content == generation.text
    assert choice.finish_reason == "length" and answer.object == "chat.completion" and answer.model == "tiny"
    prompt_tokens = len(tiny_model.tokenizer.apply_chat_template(PROMPT))
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (prompt_tokens, 8)
    assert answer.usage.total_tokens == prompt_tokens + 8 and answer.id.startswith("chatcmpl-")


def test_a_stream_is_the_same_answer_in_chunks_then_usage(client, tiny_model):
    _, generation = alone(tiny_model, temperature=0.0, ignore_eos=True)
    chunks = list(client.chat.completions.create(model="tiny", messages=PROMPT, temperature=0, max_tokens=8,
                                                 stream=True, stream_options={"include_usage": True},
                                                 extra_body={"ignore_eos": True}))  # fmt: skip
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == generation.text
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 8
    assert len({c.id for c in chunks}) == 1


def test_a_stream_without_include_usage_has_no_usage_chunk(client):
    chunks = list(client.chat.completions.create(model="tiny", messages=PROMPT, max_tokens=3, stream=True))
    assert all(c.choices for c in chunks) and all(c.usage is None for c in chunks)


def test_logprobs_are_the_models_with_the_top_alternatives(client, tiny_model):
    steps, _ = alone(tiny_model, temperature=0.0, ignore_eos=True, max_tokens=5)
    answer = client.chat.completions.create(model="tiny", messages=PROMPT, temperature=0, max_tokens=5,
                                            logprobs=True, top_logprobs=3, extra_body={"ignore_eos": True})  # fmt: skip
    entries = answer.choices[0].logprobs.content
    assert len(entries) == 5
    for entry, step in zip(entries, steps, strict=True):
        assert math.isclose(entry.logprob, step.logprob, abs_tol=1e-4)
        assert bytes(entry.bytes) == tiny_model.tokenizer.token_bytes(step.token_id)
        assert len(entry.top_logprobs) == 3
        assert math.isclose(entry.top_logprobs[0].logprob, step.top_alternatives[0].logprob, abs_tol=1e-4)


def test_logprobs_in_a_stream(client):
    extra = {"ignore_eos": True}
    chunks = list(client.chat.completions.create(model="tiny", messages=PROMPT, temperature=0, max_tokens=4,
                                                 logprobs=True, stream=True, extra_body=extra))  # fmt: skip
    entries = [e for c in chunks if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    assert len(entries) == 4 and all(e.top_logprobs == [] and e.logprob <= 0 for e in entries)


def test_the_same_seed_gives_the_same_sampled_answer(client):
    def ask(seed: int) -> str:
        answer = client.chat.completions.create(model="tiny", messages=PROMPT, temperature=1.0, seed=seed,
                                                max_tokens=12, extra_body={"ignore_eos": True})  # fmt: skip
        return answer.choices[0].message.content

    first = ask(7)
    assert ask(7) == first and {ask(8), ask(9), ask(10)} != {first}


def test_a_stop_string_ends_the_answer_before_it(client, tiny_model):
    _, generation = alone(tiny_model, temperature=0.0, ignore_eos=True, max_tokens=12)
    stop = generation.text[3:5]
    answer = client.chat.completions.create(model="tiny", messages=PROMPT, temperature=0, max_tokens=12, stop=[stop],
                                            extra_body={"ignore_eos": True})  # fmt: skip
    assert answer.choices[0].finish_reason == "stop"
    assert answer.choices[0].message.content == generation.text[: generation.text.index(stop)]


def test_vllms_top_k_of_minus_one_and_an_empty_stop_list_are_accepted_as_off(client):
    def ask(**knobs) -> tuple[str, str]:
        answer = client.chat.completions.create(model="tiny", messages=PROMPT, temperature=1.0, seed=3, max_tokens=12,
                                                **knobs)  # fmt: skip
        return answer.choices[0].message.content, answer.choices[0].finish_reason

    plain = ask()
    assert ask(extra_body={"top_k": -1}) == plain == ask(extra_body={"top_k": 0})
    assert ask(stop=[]) == plain


def test_temperature_two_and_max_tokens_of_all_but_one_of_the_window_are_accepted(client, tiny_model):
    window = tiny_model.config.context_length
    answer = client.chat.completions.create(model="tiny", messages=PROMPT, temperature=2, max_tokens=window - 1)
    assert answer.choices[0].finish_reason in ("stop", "length") and answer.usage.completion_tokens >= 1


def test_max_completion_tokens_bounds_the_answer(client):
    answer = client.chat.completions.create(model="tiny", messages=PROMPT, max_completion_tokens=3,
                                            extra_body={"ignore_eos": True})  # fmt: skip
    assert answer.usage.completion_tokens == 3 and answer.choices[0].finish_reason == "length"


def test_models_lists_the_served_model(client, tiny_model):
    models = client.models.list().data
    assert [m.id for m in models] == ["tiny"] and models[0].owned_by == "chatflow"


def test_models_says_when_the_model_was_loaded_in_unix_seconds(serve, http):
    before = int(time.time())
    base, _ = serve()
    card = http.get(f"{base}/v1/models").json()["data"][0]
    assert isinstance(card["created"], int) and before <= card["created"] <= time.time()
    assert card == {"id": "tiny", "object": "model", "created": card["created"], "owned_by": "chatflow",
                    "max_model_len": 512}  # fmt: skip


def test_logprobs_stop_at_the_stop_string_as_the_content_does(client, tiny_model):
    tiny_model.prompt_cache.clear()  # (what earlier tests in this worker left there plays no part)
    steps, generation = alone(tiny_model, temperature=0.0, ignore_eos=True, max_tokens=12)
    stop = generation.text[3:5]  # the text of tokens 3 and 4 (one byte each): both cut, token 3 after a holdback
    assert "".join(s.text for s in steps[3:5]) == stop and stop not in generation.text[:4]
    knobs = {"model": "tiny", "messages": PROMPT, "temperature": 0, "max_tokens": 12, "stop": stop, "logprobs": True,
             "top_logprobs": 2, "extra_body": {"ignore_eos": True}}  # fmt: skip
    whole = client.chat.completions.create(**knobs).choices[0]
    chunks = [c for c in client.chat.completions.create(**knobs, stream=True) if c.choices]
    streamed = [e for c in chunks if c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    kept = [tiny_model.tokenizer.token_bytes(s.token_id) for s in steps[:3]]
    assert whole.message.content == "".join(c.choices[0].delta.content or "" for c in chunks) == generation.text[:3]
    assert whole.finish_reason == "stop" and [bytes(e.bytes) for e in whole.logprobs.content] == kept
    # Same tokens and alternatives; the logprobs to float32's last bits (the second request may reuse the first's
    # prompt cache, a different but equal-valued computation).
    assert _flat(streamed) == pytest.approx(_flat(whole.logprobs.content), abs=1e-5)
    assert b"".join(kept).decode("utf-8", "replace") == whole.message.content


def _flat(entries: list) -> list:
    """Each entry's token, bytes and logprob, then its alternatives', in one flat list (approx compares numbers)."""
    flat = []
    for entry in entries:
        for e in [entry, *(entry.top_logprobs or [])]:
            flat += [e.token, bytes(e.bytes or []).hex(), e.logprob]
    return flat
