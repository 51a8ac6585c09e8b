"""The account of a turn: every figure derived once from the events, the values a user would check."""

from __future__ import annotations

import dataclasses

import pytest

from jupyter_chatflow import Chat
from jupyter_chatflow.account import account_of
from jupyter_chatflow.events import (
    Completed,
    ContextAssembled,
    Event,
    PrefillDone,
    SafetyDecision,
    Segment,
    TitleGenerated,
    TokenDelta,
    ToolCall,
    ToolResult,
    TurnStarted,
    Usage,
)
from jupyter_chatflow.events import Timings as T

STARTED = TurnStarted(request_id="r", session_id="s", user="What is the capital of France?", params={},
                      features={}, created=0.0, timestamp=10.0)  # fmt: skip


def turn(*events: Event) -> list[Event]:
    """`events` numbered after a TurnStarted at t = 10 s (their timestamps are absolute monotonic seconds)."""
    return [dataclasses.replace(e, sequence_number=k, turn_id="t") for k, e in enumerate((STARTED, *events))]


def context(prompt: int, window: int = 100, reserved: int = 20, **kinds: int) -> ContextAssembled:
    segments = tuple(Segment(kind=k, label=k, tokens=n) for k, n in (kinds or {"system": prompt}).items())
    return ContextAssembled(window=window, reserved_output=reserved, budget=window - reserved, prompt_tokens=prompt,
                            segments=segments, timestamp=10.001)  # fmt: skip


def token(index: int, shown: float, computed: float | None = None, compile_ms: float = 0.0) -> TokenDelta:
    return TokenDelta(index=index, token_id=index, text=f" w{index}", logprob=-0.1, entropy=0.1, timestamp=shown,
                      computed_at=shown if computed is None else computed, compile_ms=compile_ms)  # fmt: skip


def completed(at: float, completion: int, prompt: int = 38) -> Completed:
    usage = Usage(prompt_tokens=prompt, completion_tokens=completion)
    return Completed(finish_reason="stop", text="", usage=usage, timings=T(), timestamp=at)


def cold_first_turn() -> list[Event]:
    """A kernel's first turn as it runs: the prefill compiles 1.62 s; its first token ("The", computed at 1.78 s)
    is held by the output scan until the next one begins a word, and that one waits 4.77 s for the decode
    step's program to compile; then five more tokens 20 ms apart and the end-of-sequence token."""
    prefill = PrefillDone(prompt_tokens=38, reused_tokens=0, computed_tokens=38, latency_ms=1776.7, compile_ms=1620.3,
                          queued_ms=0.06, context_tokens=38, timestamp=11.7795)  # fmt: skip
    first = token(0, shown=16.672, computed=11.7795, compile_ms=1620.3)  # (a generation's first: its prefill's)
    second = token(1, shown=16.672, computed=16.657, compile_ms=4768.8)
    rest = [token(k, 16.657 + 0.02 * (k - 1)) for k in range(2, 7)]
    title = TitleGenerated(title="Capital of France", source="fallback", latency_ms=1700.0, model_title="Paris",
                           rejected="not a title (2 to 6 plain words)", timestamp=18.535)  # fmt: skip
    return turn(context(38, window=8192, reserved=256, system=17, user=7, template=14), prefill, first, second,
                *rest, completed(16.8116, completion=8), title)  # fmt: skip


def test_a_cold_first_turn_draws_each_compile_inside_the_stage_it_delayed():
    a = account_of(cold_first_turn())
    prefill, decode = (next(s for s in a.stages if s.kind == kind) for kind in ("prefill", "decode"))
    (p_compile,) = prefill.compiles
    assert p_compile.start_ms == pytest.approx(prefill.start_ms) and p_compile.end_ms <= prefill.end_ms
    (d_compile,) = decode.compiles  # between "The" (computed at 1.78 s) and " capital": not after the first shown
    assert d_compile.start_ms == pytest.approx(1779.5) and d_compile.end_ms == pytest.approx(1779.5 + 4768.8)
    assert decode.start_ms <= d_compile.start_ms and d_compile.end_ms <= decode.end_ms
    assert decode.ticks_ms[0] == pytest.approx(1779.5) and len(decode.ticks_ms) == 7
    assert a.ttft_ms == pytest.approx(6672.0) and a.first_computed_ms == pytest.approx(1779.5)
    assert a.compile_before_first_ms == pytest.approx(1620.3 + 4768.8)  # both came before " capital" showed "The"
    assert a.compile_ms == pytest.approx(a.compile_before_first_ms)
    assert a.ttft_note.startswith("first token 6.67 s (6.39 s of it XLA compiling); computed at 1.78 s")
    assert all(0 <= s.start_ms <= s.end_ms <= a.total_ms for s in a.stages)


def test_the_intent_probes_compile_is_drawn_hatched_in_the_safety_bar_and_counted_in_the_total():
    """A cold turn's input layer: the intent probe's pass compiled its layer programs for 2.5 s of the bar's
    2.6 s. That is compile, drawn inside the safety bar at its start, and part of the turn's XLA-compile total."""
    probe = SafetyDecision(layer="input", action="allow", guard="rules+pii+intent", reason="Nothing found.",
                           latency_ms=2600.0, compile_ms=2500.0, timestamp=12.6)  # fmt: skip
    events = cold_first_turn()
    events = turn(probe, *[dataclasses.replace(e, timestamp=e.timestamp + 2.6) for e in events[1:]])
    a = account_of(events)
    safety = next(s for s in a.stages if s.kind == "safety")
    (compiled,) = safety.compiles
    assert compiled.start_ms == pytest.approx(safety.start_ms) and compiled.end_ms == pytest.approx(2500.0)
    assert "2.50 s of it XLA compiling the programs of a guard's pass over the model" in safety.detail
    assert a.compile_ms == pytest.approx(2500.0 + 1620.3 + 4768.8)
    assert a.compile_before_first_ms == pytest.approx(a.compile_ms)
    assert "8.89 s of it XLA compiling" in a.ttft_note, a.ttft_note


def test_tokens_per_s_is_the_ticks_drawn_over_their_time_less_the_compiling_inside_it():
    a = account_of(cold_first_turn())
    (decode,) = (s for s in a.stages if s.kind == "decode")
    ticks = decode.ticks_ms
    assert a.tokens_per_s == pytest.approx((len(ticks) - 1) / ((ticks[-1] - ticks[0] - 4768.8) / 1000))
    assert a.tokens_per_s_note == "6 intervals between tokens over 4.98 s, less 4.77 s of XLA compiling"


def test_the_title_after_the_answer_is_its_own_figure_and_says_why_the_models_was_not_used():
    a = account_of(cold_first_turn())
    assert a.answer_ms == pytest.approx(6811.6) and a.title_after_ms == pytest.approx(18535 - 16811.6)
    assert a.total_ms == pytest.approx(8535.0)
    assert a.title == "Capital of France"
    assert (
        a.title_note
        == "the user's words (after the answer); the model's “Paris” was not used: not a title (2 to 6 plain words)"
    )
    title = next(s for s in a.stages if s.kind == "title")
    assert title.detail == f"“Capital of France”: {a.title_note}"


def test_a_wait_under_a_millisecond_is_not_drawn_nor_counted():
    a = account_of(cold_first_turn())  # the prefill waited 0.06 ms: a hand-over between threads
    assert a.queued_ms == 0 and not any(s.kind == "queue" for s in a.stages)


def test_the_tokens_generated_add_up_and_each_part_is_named():
    a = account_of(cold_first_turn())
    assert (a.completion_tokens, a.answer_tokens, a.unshown_tokens) == (8, 7, 1)
    assert a.generated_note == "8 tokens generated: 7 in the answer + 1 end-of-sequence token, not shown"


def tool_turn() -> list[Event]:
    """A forced calculator call (19 of its tokens fixed before the first free choice, prefilled with the prompt),
    its result, and a 12-token answer."""
    call_prefill = PrefillDone(prompt_tokens=435, reused_tokens=20, computed_tokens=415, latency_ms=442.0,
                               kind="tool_call", context_tokens=416, timestamp=10.567)  # fmt: skip
    call = ToolCall(call_id="c", name="calculator", arguments={"expression": "17 * 23"}, constrained=True,
                    decode_ms=800.0, tokens=34, forced_tokens=26, timestamp=10.806)  # fmt: skip
    result = ToolResult(call_id="c", name="calculator", output="17 * 23 = 391", latency_ms=11.0, timestamp=10.817)
    second = dataclasses.replace(context(109, window=8192, reserved=256, generated=34, tool=11, user=64),
                                 timestamp=10.831)  # fmt: skip
    answer_prefill = PrefillDone(prompt_tokens=109, reused_tokens=22, computed_tokens=87, latency_ms=250.0,
                                 context_tokens=109, timestamp=11.116)  # fmt: skip
    tokens = [token(k, 11.116 + 0.03 * k) for k in range(12)]
    first = context(416, window=8192, reserved=256, system=17, tools=375, user=10, template=14)
    return turn(first, call_prefill, call, result, second, answer_prefill, *tokens,
                completed(11.5, completion=47, prompt=525))  # fmt: skip


def test_a_tool_turn_names_the_answer_the_call_and_the_end_token_that_make_up_what_was_generated():
    a = account_of(tool_turn())
    assert a.answer_tokens + a.call_tokens + a.unshown_tokens == a.completion_tokens == 47
    assert a.generated_note == ("47 tokens generated: 12 in the answer + 34 in the tool call (26 fixed by the "
                                "grammar) + 1 end-of-sequence token, not shown")  # fmt: skip


def test_a_prefill_that_holds_more_than_the_prompt_says_what():
    a = account_of(tool_turn())
    first, second = a.rounds
    assert first.prefill_note == ("prefill 435 tokens (the 416-token prompt + 19 of the tool call, the beginning "
                                  "the grammar fixed): 20 from the prompt cache, 415 computed")  # fmt: skip
    assert second.prefill_note == "prefill 109 tokens (the prompt): 22 from the prompt cache, 87 computed"
    assert (a.prefill_tokens, a.reused_tokens, a.computed_tokens) == (544, 42, 502)


def test_building_a_calls_grammar_is_a_stage_of_its_own_before_its_prefill():
    """The call's time (`ToolCall.decode_ms`) starts before its prefill: llguidance builds the JSON-schema grammar
    and its first mask (~0.1 s). A bar says so, where a gap after the tokenizer was unexplained."""
    events = tool_turn()
    call = next(e for e in events if isinstance(e, ToolCall))
    events[events.index(call)] = dataclasses.replace(call, decode_ms=700.0)  # it began at 106 ms; its prefill at 125
    a = account_of(events)
    grammar = next(s for s in a.stages if s.label == "call grammar")
    prefill = next(s for s in a.stages if s.label == "prefill (tool call)")
    assert grammar.start_ms == pytest.approx(106.0) and grammar.end_ms == pytest.approx(prefill.start_ms)
    assert "JSON-schema grammar" in grammar.detail


def test_each_rounds_gauge_adds_up_to_the_window():
    a = account_of(tool_turn())
    for r in a.rounds:
        assert sum(p.tokens for p in r.gauge) == r.window
    first, second = a.rounds
    assert [(p.kind, p.tokens) for p in first.gauge][-3:] == [("call", 34), ("reserve", 222), ("free", 7520)]
    assert [(p.kind, p.tokens) for p in second.gauge][-3:] == [("answer", 12), ("reserve", 244), ("free", 7827)]
    assert second.used_tokens == 109 + 12


def test_a_forks_kept_tokens_are_not_ticks_of_this_turn_and_its_first_token_is_its_first_new_one():
    fork = dataclasses.replace(STARTED, fork_of="turn_a", fork_index=2)
    kept = [token(k, 10.002, computed=0.0) for k in range(3)]  # two kept, then the chosen alternative
    prefill = PrefillDone(prompt_tokens=41, reused_tokens=40, computed_tokens=1, latency_ms=30.0, context_tokens=38,
                          timestamp=10.04)  # fmt: skip
    new = [token(k, 10.06 + 0.02 * (k - 3), computed=10.06 + 0.02 * (k - 3)) for k in range(3, 6)]
    events = [dataclasses.replace(e, sequence_number=k, turn_id="t") for k, e in enumerate(
        (fork, context(38), *kept, prefill, *new, completed(10.2, completion=7)))]  # fmt: skip
    a = account_of(events)
    (decode,) = (s for s in a.stages if s.kind == "decode")
    assert len(decode.ticks_ms) == 3 and a.kept_tokens == 3 and a.answer_tokens == 6
    assert a.ttft_ms == pytest.approx(60.0)
    note = (
        "prefill 41 tokens (the 38-token prompt + 3 of the answer: 2 kept from the forked answer and the chosen token)"
    )
    assert a.rounds[0].prefill_note == f"{note}: 40 from the prompt cache, 1 computed"


def test_a_fork_whose_turn_left_the_prompt_cache_says_why_it_computed_more_than_its_token():
    fork = dataclasses.replace(STARTED, fork_of="turn_a", fork_index=2)
    kept = [token(k, 10.002, computed=0.0) for k in range(3)]
    prefill = PrefillDone(prompt_tokens=41, reused_tokens=25, computed_tokens=16, latency_ms=80.0, context_tokens=38,
                          timestamp=10.09)  # fmt: skip
    events = [dataclasses.replace(e, sequence_number=k, turn_id="t") for k, e in enumerate(
        (fork, context(38), *kept, prefill, token(3, 10.1), completed(10.2, completion=5)))]  # fmt: skip
    note = account_of(events).rounds[0].prefill_note
    assert "the forked turn was no longer in the prompt cache (other turns pushed it out)" in note
    assert note.endswith(": 25 from the prompt cache, 16 computed")


def test_an_account_goes_to_json_and_back_as_plain_lists():
    data = account_of(tool_turn()).to_dict()
    assert isinstance(data["stages"], list) and isinstance(data["rounds"][0]["gauge"], list)


def test_a_tiny_model_tool_turn_counts_every_token_of_its_call(wide_model):
    """usage.completion_tokens counts the whole call (its fixed beginning, the tokens sampled under the mask and a
    fixed run that ended it), so the answer, the call and the end token add up to it."""
    chat = Chat(model=wide_model, session="account-tool", new=True, persist=False)
    response = chat.send("What is 17 * 23?", tools=("calculator",), tool_choice="required", max_tokens=120,
                         temperature=0.0)  # fmt: skip
    events = list(response)
    a = account_of(events)
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert calls and a.call_tokens == sum(c.tokens for c in calls) > 0
    assert a.answer_tokens + a.call_tokens + a.unshown_tokens == a.completion_tokens
    assert a.unshown_tokens in (0, 1)  # the end-of-sequence token, when the answer stopped on it
    decode = [s for s in a.stages if s.kind == "decode" and s.ticks_ms]
    assert sum(len(s.ticks_ms) for s in decode) == a.answer_tokens  # a tick per token shown, each when computed


def test_a_prewarm_that_put_nothing_in_the_prompt_cache_is_not_said_to_be_used():
    """The issue's Timeline: '0 tokens (0 computed) in 1.44 s · used' (a draft the input layer blocked, then a
    send of other text whose prefill reused the system prompt)."""
    prefill = PrefillDone(prompt_tokens=40, reused_tokens=20, computed_tokens=20, latency_ms=50.0, timestamp=10.1)
    empty = {"chars": 5, "prompt_tokens": 0, "computed_tokens": 0, "cached_before": 0, "latency_ms": 1440.0}
    a = account_of(turn(context(40), prefill, completed(10.2, completion=1, prompt=40)), empty)
    assert a.prewarm_note == (
        "Prewarmed while typing, before this request: 0 tokens (0 computed) in 1.44 s · it put nothing new in the "
        "prompt cache (its draft was blocked, or a newer one stopped it, or the send stopped it)"
    )


def test_a_prefill_that_joined_its_prewarm_is_prefill_not_a_wait():
    """A long paste sent while its draft's prewarm prefilled it: the wait for that prefill is the turn's own
    prefill, joined (the scheduler says so: `plan.JOINED`); the note gives the prewarm's figures and says so."""
    from jupyter_chatflow.engine.plan import JOINED

    prefill = PrefillDone(prompt_tokens=2264, reused_tokens=2263, computed_tokens=1, latency_ms=40.0,
                          queued_ms=7600.0, queued_for=JOINED, timestamp=17.7)  # fmt: skip
    prewarm = {"chars": 9000, "prompt_tokens": 2264, "computed_tokens": 2239, "cached_before": 25, "latency_ms": 8780}
    a = account_of(turn(context(2264, window=8192), prefill, completed(17.8, completion=1, prompt=2264)), prewarm)
    joined = next(s for s in a.stages if s.label == "prefill, joined")
    assert joined.kind == "prefill" and joined.end_ms - joined.start_ms == pytest.approx(7600.0)
    assert joined.detail == ("joined the prefill of this prompt already running (the draft's prewarm) for 7.60 s: "
                             "the prefill below found 2,263 of its 2,264 tokens in the prompt cache")  # fmt: skip
    assert a.queued_ms == 0 and not any(s.kind == "queue" for s in a.stages)
    assert a.prewarm_note.startswith("Prewarmed while typing, still running when the message was sent: this turn "
                                     "joined it: 2264 tokens (2239 computed) in 8.78 s · used")  # fmt: skip
