"""The one tool-call decoder: reading a call (whole or cut), max_tokens' rule for a call, and the answer's text
with the call held out, on the tiny model (the pipeline and the server each drive it: test_stream, test_tools)."""

from __future__ import annotations

import pytest

from jupyter_chatflow.pipeline.tools import calculator
from jupyter_chatflow.pipeline.tools.decode import (
    AnswerText,
    CallDecoder,
    call_prompt,
    call_room,
    forced_call_problem,
    least_call_tokens,
    read_call,
)

CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "17*23"}}\n</tool_call>'


def test_a_whole_call_reads_its_name_arguments_and_their_text():
    call = read_call(CALL)
    assert (call.status, call.name, call.arguments) == ("complete", "calculator", {"expression": "17*23"})
    assert call.arguments_text == '{"expression": "17*23"}'
    broken = read_call('<tool_call>\n{"name": "calculator", "arguments": [1]}\n</tool_call>')
    assert broken.status == "unreadable" and broken.name == "calculator" and "JSON object" in broken.error


@pytest.mark.parametrize(
    ("written", "name", "arguments"),
    [
        ('<tool_call>\n{"name": "calculator", "arguments": {"expression": "17*', "calculator", '{"expression": "17*'),
        ('<tool_call>\n{"name": "calculator", "arguments": ', "calculator", ""),
        ('<tool_call>\n{"name": "calculator", "argu', "calculator", ""),
        ('<tool_call>\n{"name": "calcul', "", ""),  # the name not whole: no tool to name
        ("<tool_", "", ""),
        # cut inside the call's fixed end: the arguments are whole, and the end is none of them
        (
            '<tool_call>\n{"name": "calculator", "arguments": {"expression": "17*23"}}\n</tool_c',
            "calculator",
            '{"expression": "17*23"}',
        ),
        (
            '<tool_call>\n{"name": "calculator", "arguments": {"expression": "17*23"}',
            "calculator",
            '{"expression": "17*23"}',
        ),
        # cut while the model wrote the call's end inside its open string (the unclosed rule ends it once whole)
        (
            '<tool_call>\n{"name": "calculator", "arguments": {"expression": "17*23}}</tool_',
            "calculator",
            '{"expression": "17*23',
        ),
        (
            '<tool_call>\n{"name": "calculator", "arguments": {"expression": "17*23}}\n</',
            "calculator",
            '{"expression": "17*23',
        ),
    ],
)
def test_a_cut_call_keeps_its_name_once_whole_and_the_arguments_written(written, name, arguments):
    call = read_call(written, complete=False)
    assert (call.status, call.name, call.arguments, call.arguments_text) == ("cut", name, {}, arguments)


def test_max_tokens_leaves_a_call_what_the_answer_before_it_did_not_use():
    assert call_room(256, used=0) == 256 and call_room(48, used=20) == 28 and call_room(10, used=10) == 0


def test_a_call_is_cut_inside_its_fixed_beginning_when_max_tokens_ends_there(tiny_model):
    tokenizer = tiny_model.tokenizer
    decoder = CallDecoder(tokenizer, [calculator], only=None, include_open=True,
                          vocab_size=tiny_model.config.vocab_size, room=5, seed=None)  # fmt: skip
    assert decoder.params is None  # nothing left to sample: the fixed text alone is longer than 5 tokens
    call = decoder.finish(None)
    assert (call.status, call.tokens, call.forced, call.name) == ("cut", 5, 5, "")


@pytest.mark.parametrize("more", [3, 120])
def test_a_calls_tokens_never_pass_its_room_and_it_is_complete_only_when_written_whole(tiny_model, more):
    """Fixed beginning, sampled tokens and a fixed end all count; a call whose fixed end would pass the room is cut
    at the room (its text up to there). `more`: the room past the fixed beginning (3: too little to finish)."""
    tokenizer, vocab = tiny_model.tokenizer, tiny_model.config.vocab_size
    fixed = len(CallDecoder(tokenizer, [calculator], only=None, include_open=True, vocab_size=vocab, room=1,
                            seed=None).fixed)  # fmt: skip
    decoder = CallDecoder(tokenizer, [calculator], only=None, include_open=True, vocab_size=vocab,
                          room=fixed + more, seed=0)  # fmt: skip
    assert decoder.params is not None and decoder.params.max_tokens == more
    assert decoder.params.temperature == 0.0  # greedy, whatever the request's sampling
    generation = tiny_model.submit([*tokenizer.encode("What is 17*23?"), *decoder.fixed], decoder.params,
                                   decoder.constraint)  # fmt: skip
    steps = list(generation)
    call = decoder.finish(generation.finish_reason)
    assert fixed + len(steps) <= call.tokens <= fixed + more and call.forced >= fixed
    if more == 3:
        assert call.status == "cut" and call.tokens == fixed + 3 and call.arguments_text.startswith('{"expression"')
    if call.status == "complete":
        assert call.name == "calculator" and set(call.arguments) == {"expression"}
    else:
        assert call.status == "cut" and call.name == "calculator" and call.arguments == {}


def test_the_least_a_call_needs_is_a_call_that_fits_and_a_forced_call_below_it_is_refused_naming_it(tiny_model):
    """The calculator's pattern wants a letter or an operator after its first character: the walk still finds the
    call's end. A forced call one token short of it is refused, naming it; at it, and when nothing is forced, not."""
    tokenizer, vocab = tiny_model.tokenizer, tiny_model.config.vocab_size
    least = least_call_tokens(tokenizer, [calculator], only=None, include_open=True, vocab_size=vocab)
    fixed = len(CallDecoder(tokenizer, [calculator], only=None, include_open=True, vocab_size=vocab, room=1,
                            seed=None).fixed)  # fmt: skip
    assert least is not None and fixed + 4 <= least <= fixed + 40  # `"`, two characters, `"`, then the fixed end
    problem = forced_call_problem(tokenizer, [calculator], choice="required", max_tokens=least - 1, vocab_size=vocab)
    assert f"max_tokens {least - 1} cannot hold" in problem and f"is {least} tokens" in problem
    assert f"Give max_tokens {least} or more" in problem
    fits = ("required", least), ("calculator", least + 50), ("auto", 1), ("none", 1)
    for choice, budget in fits:
        assert forced_call_problem(tokenizer, [calculator], choice=choice, max_tokens=budget, vocab_size=vocab) == ""


def test_the_answer_text_holds_a_call_out_and_a_partial_tag_until_it_is_known():
    answer = AnswerText(tools=True)
    assert [answer.shown(t) for t in ["Let me ", "see. <to", "ol_call>", '{"name"']] == ["Let me ", "see. ", "", ""]
    assert answer.called
    held = AnswerText(tools=True)
    assert held.shown("a <tool") == "a " and held.tail("a <tool box") == "<tool box" and not held.called
    kept = AnswerText(tools=True)  # a fork's kept step is shown, but is not the generation's text
    assert kept.shown("Hi", generated=False) == "Hi" and kept.tail(" there") == " there"
    plain = AnswerText(tools=False)
    assert plain.shown("<tool_call>") == "<tool_call>" and not plain.called


def test_a_call_after_text_is_decoded_from_the_text_and_its_tag(tiny_model):
    tokenizer = tiny_model.tokenizer
    ids = call_prompt([1, 2], "Let me see. ", tokenizer)
    assert ids == [1, 2, *tokenizer.encode("Let me see. <tool_call>")]
