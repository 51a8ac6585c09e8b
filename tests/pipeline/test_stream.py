"""The streaming round on its own: a model that starts a tool call mid-answer (scripted) hands over to the mask."""

from __future__ import annotations

import threading

import pytest

from jupyter_chatflow.engine.generation import GenerationCounts, Step
from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.events import TokenDelta, ToolCall
from jupyter_chatflow.events import Usage as TurnUsage
from jupyter_chatflow.pipeline.stream import Round, Streamer, usage_of
from jupyter_chatflow.pipeline.tools import calculator


class ScriptedGeneration:
    """What Model.submit returns, with fixed texts (closing it early is how the streamer stops it)."""

    def __init__(self, texts: list[str]):
        self.texts, self.text, self.finish_reason = texts, "", None
        self.usage = GenerationCounts(prompt_tokens=3)

    def __iter__(self):
        for index, text in enumerate(self.texts):
            self.usage.completion_tokens = index + 1
            self.text += text
            yield Step(index=index, token_id=40 + index, text=text, logprob=-0.1, entropy=0.5, top_alternatives=(),
                       elapsed_ms=float(index))  # fmt: skip
        self.finish_reason = "stop"


class Scripted:
    """The tiny model, except that free generation says `texts`; masked generation is the real engine's."""

    def __init__(self, model, texts):
        self.model, self.texts = model, texts
        self.tokenizer, self.config = model.tokenizer, model.config

    def submit(self, ids, params=None, constraint=None, cancel=None):
        if constraint is not None:
            return self.model.submit(ids, params, constraint, cancel)
        return ScriptedGeneration(self.texts)


def run(model, texts, tools=(calculator,)):
    events, cancel = [], threading.Event()
    streamer = Streamer(Scripted(model, texts), events.append, cancel, gate=None)
    result = streamer.free([1, 2, 3], SamplingParams(temperature=0.0), list(tools))
    streamer.finish()
    return result, events, cancel


def test_a_call_started_mid_answer_is_decoded_under_the_mask(tiny_model):
    result, events, cancel = run(tiny_model, ["Let me ", "compute. <to", "ol_call>", '{"name": "x"', " never read"])
    assert result.text == "Let me compute. " and result.finish_reason == "tool_calls"
    name, arguments = result.call
    assert name == "calculator" and set(arguments) == {"expression"}
    assert "".join(e.text for e in events if isinstance(e, TokenDelta)) == "Let me compute. "
    assert not cancel.is_set()  # closing the free generation must not stop the turn


def test_a_partial_tag_that_is_not_a_call_is_shown(tiny_model):
    result, events, _ = run(tiny_model, ["a <tool", " box"])
    assert result.call is None and result.text == "a <tool box"
    assert "".join(e.text for e in events if isinstance(e, TokenDelta)) == "a <tool box"


def test_without_tools_the_tag_is_just_text(tiny_model):
    result, _, _ = run(tiny_model, ["<tool_call>", "{}"], tools=())
    assert result.call is None and result.text == "<tool_call>{}"


def test_events_name_the_call_only_once_the_turn_emits_it(tiny_model):
    _, events, _ = run(tiny_model, ["<tool_call>"])
    assert not any(isinstance(e, ToolCall) for e in events)  # the streamer returns the call; the turn runs it


def test_a_forced_call_prefills_its_fixed_text_and_says_what_it_cost(tiny_model):
    events: list = []
    streamer = Streamer(tiny_model, events.append, threading.Event(), gate=None)
    prompt = tiny_model.tokenizer.encode("What is 6*7?")
    result = streamer.forced(prompt, SamplingParams(temperature=0.0), [calculator], None)
    fixed = tiny_model.tokenizer.encode('<tool_call>\n{"name": "calculator", "arguments": {"expression":')
    prefill = next(e for e in events if e.type == "prefill")
    # one prefill, not one decode step per fixed token (with bytes for tokens, ` "` has no token to heal into)
    assert len(fixed) <= prefill.prompt_tokens - len(prompt) <= len(fixed) + 2
    assert result.call is not None and result.call[0] == "calculator" and result.finish_reason == "tool_calls"
    assert result.call_forced >= len(fixed) and result.call_tokens > result.call_forced  # the value is the model's
    assert result.completion_tokens >= result.call_tokens - len("}}\n</tool_call>")  # the fixed end is not generated
    assert 0.0 < result.prefill_ms + result.decode_ms <= result.call_ms


def test_xla_compiling_during_decode_is_kept_apart_from_decoding_time(tiny_model):
    """A decode program's first call compiles (seconds) inside decode_ms: tokens/s must not count it as decoding
    (a tour chapter showed 12.7 tokens/s for a turn that decoded at 46). The round takes the engine's split, and a
    server's request reports its speed from it (`Round.counts`)."""
    generation = ScriptedGeneration(list("abcdefg"))  # 7 tokens: the first from the prefill, then 6 steps
    generation.usage = GenerationCounts(prompt_tokens=3, prefill_ms=50.0, decode_ms=1_200.0, compile_ms=1_030.0,
                             decode_compile_ms=1_000.0)  # fmt: skip  # the decode program compiled for 1 s
    model = Scripted(tiny_model, [])
    model.submit = lambda *args, **options: generation  # type: ignore[method-assign]
    streamer = Streamer(model, lambda event: None, threading.Event(), None)
    result = streamer.free([1, 2, 3], SamplingParams(temperature=0.0), [])
    assert result.decode_ms == 1_200.0 and result.decode_compile_ms == 1_000.0
    assert result.decode_steps == 6 and result.completion_tokens == 7 and result.prefill_ms == 50.0
    assert result.counts().decode_tokens_per_s == pytest.approx(30.0)  # 6 steps in 200 ms of decoding, not 5/s


def test_a_turns_usage_sums_its_rounds():
    """A tool call and the answer from its result are two requests to the model: the usage counts both (the times
    are the account's, from the events: tests/account)."""
    call = Round(prompt_tokens=100, reused_tokens=90, completion_tokens=20, decode_steps=12, prefill_ms=40.0,
                 decode_ms=130.0, decode_compile_ms=10.0)  # fmt: skip
    answer = Round(prompt_tokens=140, reused_tokens=118, completion_tokens=9, decode_steps=8, prefill_ms=25.0,
                   decode_ms=80.0)  # fmt: skip
    usage = usage_of([call, answer])
    assert usage == TurnUsage(prompt_tokens=240, completion_tokens=29, reused_tokens=208)
    assert usage.total_tokens == 269
    assert usage_of([]) == TurnUsage()  # blocked before any round


def test_max_tokens_cuts_a_forced_call_which_is_emitted_as_cut_and_not_returned_to_run(tiny_model):
    """One rule for every entry point (`tools/decode.py`): the round's max_tokens bounds its call, fixed tokens
    included; a call it cuts is an event marked cut, the round ends "length", and there is no call to run."""
    events: list = []
    streamer = Streamer(tiny_model, events.append, threading.Event(), gate=None)
    fixed = len(tiny_model.tokenizer.encode('<tool_call>\n{"name": "calculator", "arguments": {"expression": "'))
    params = SamplingParams(temperature=0.0, max_tokens=fixed + 2)  # two tokens of the expression, no more
    result = streamer.forced(tiny_model.tokenizer.encode("What is 6*7?"), params, [calculator], "calculator")
    [call] = [e for e in events if isinstance(e, ToolCall)]
    assert result.call is None and result.finish_reason == "length" and result.completion_tokens == fixed + 2
    assert call.cut and call.name == "calculator" and call.tokens == fixed + 2 and call.arguments == {}
    assert call.arguments_text.startswith('{"expression": "') and len(call.arguments_text) > len('{"expression": "')


def test_a_round_puts_its_call_in_one_event_with_how_its_writing_ended():
    written = Round(call=("calculator", {"expression": "17*23"}), call_ms=12.0, call_compile_ms=1.0, call_tokens=26,
                    call_forced=19, call_arguments='{"expression": "17*23"}', call_guard="unclosed")  # fmt: skip
    call = written.tool_call("call_1")
    assert (call.call_id, call.name, call.arguments, call.constrained, call.cut) == (
        "call_1", "calculator", {"expression": "17*23"}, True, False)  # fmt: skip
    assert (call.decode_ms, call.compile_ms, call.tokens, call.forced_tokens) == (12.0, 1.0, 26, 19)
    assert (call.arguments_text, call.guard) == ('{"expression": "17*23"}', "unclosed")
    cut = Round(cut_name="calculator", call_tokens=30, call_arguments='{"expression": "1').tool_call("c", cut=True)
    assert (cut.name, cut.arguments, cut.cut, cut.tokens) == ("calculator", {}, True, 30)
