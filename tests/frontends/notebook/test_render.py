"""How a turn reads in a notebook: a `Response` shown by IPython as `%%chat` shows it."""

from __future__ import annotations

import dataclasses

from IPython.core.interactiveshell import InteractiveShell

from jupyter_chatflow import Response
from jupyter_chatflow.events import (
    Cancelled,
    Completed,
    Event,
    PrefillDone,
    Timings,
    TokenDelta,
    TurnStarted,
    Usage,
)
from jupyter_chatflow.frontends.notebook.render import TurnView, register_display

from ...test_events import samples


def test_a_response_at_the_end_of_a_cell_shows_its_answer_and_the_pipeline_summary():
    shell = InteractiveShell.instance()
    register_display(shell)  # what importing the package in a kernel does
    data, _ = shell.display_formatter.format(Response(samples()))
    markdown = data["text/markdown"]
    assert markdown.startswith('<div class="cf-answer-md"><p>Paris</p><details><summary>pipeline</summary>')
    assert "safety: input redact" in markdown and "context: 12/8,192 tokens in the prompt" in markdown


def _turn(*events: Event) -> TurnView:
    """A view of `events` stamped at the times given as their `timestamp` (seconds after the request)."""
    view = TurnView()
    started = TurnStarted(request_id="r", session_id="s", user="u", params={}, features={}, created=0.0)
    for number, event in enumerate((started, *events)):
        view.add(dataclasses.replace(event, sequence_number=number, turn_id="t"))
    return view


def _token(index: int, at: float, compile_ms: float = 0.0) -> TokenDelta:
    return TokenDelta(index=index, token_id=index, text="x", logprob=-0.1, entropy=0.1, timestamp=at,
                      computed_at=at, compile_ms=compile_ms)  # fmt: skip


def test_the_speed_line_reads_the_turns_account():
    """The first token's time and what it was made of, tokens/s over the decode's ticks (its compiling left out),
    the answer's time: the account's figures (`account_of`), as the panel shows them."""
    prefill = PrefillDone(prompt_tokens=40, reused_tokens=0, computed_tokens=40, latency_ms=90.0, compile_ms=60.0,
                          timestamp=0.090)  # fmt: skip
    tokens = [_token(0, 0.0954), _token(1, 0.1454), _token(2, 0.1954)]  # two intervals of 50 ms: 20 tok/s
    usage = Usage(prompt_tokens=40, completion_tokens=4)
    done = Completed(finish_reason="stop", text="xxx", usage=usage, timings=Timings(), timestamp=0.2)
    view = _turn(prefill, *tokens, done)
    assert (
        view.details()[-1] == "speed: first token 95 ms (60 ms of it XLA compiling), 20.0 tok/s, answer 200 ms · stop"
    )
    assert "tokens: 4 tokens generated: 3 in the answer + 1 end-of-sequence token, not shown" in view.details()
    waited = dataclasses.replace(prefill, queued_ms=300.0, queued_for="another sequence's prefill", timestamp=0.39)
    first = dataclasses.replace(tokens[0], timestamp=0.3954, computed_at=0.3954)
    queued = _turn(waited, first, dataclasses.replace(done, timestamp=0.4))
    line = "speed: first token 395 ms (300 ms of it waiting, 60 ms XLA compiling), answer 400 ms · stop"
    assert queued.details()[-1] == line
    assert queued.account.stages[0].detail == "waited 300 ms for another sequence's prefill"
    stopped = _turn(Cancelled(text="Par", usage=Usage(completion_tokens=2), timestamp=0.05))  # no first token: none
    assert stopped.details()[-1] == "speed: answer 50 ms · stopped"


def test_a_call_max_tokens_cut_reads_as_cut_and_not_run_in_the_cells_lines(wide_model):
    """Through `Chat.send` as a user calls it: a forced call max_tokens ends inside its string is shown with what was
    written, said to be cut and not run; no tool ran; the turn ends "length" (the timeline says it too)."""
    from jupyter_chatflow.pipeline.chat import Chat

    chat = Chat(model=wide_model, session="cut-call", new=True, persist=False)
    from jupyter_chatflow.pipeline.tools import calculator
    from jupyter_chatflow.pipeline.tools.decode import least_call_tokens

    least = least_call_tokens(wide_model.tokenizer, [calculator], only=None, include_open=True,
                              vocab_size=wide_model.config.vocab_size)  # fmt: skip
    assert least is not None
    response = chat.send("What is 17 * 23?", tools=("calculator",), tool_choice="calculator",
                         max_tokens=least + 3, temperature=0.0)  # fmt: skip
    events = list(response)
    [call] = [e for e in events if e.type == "tool_call"]
    end = response.terminal()
    assert isinstance(end, Completed) and end.finish_reason == "length" and end.usage.completion_tokens == call.tokens
    assert call.cut and call.tokens == least + 3 and not any(e.type == "tool_result" for e in events)
    view = TurnView()
    for event in events:
        view.add(event)
    said = f"cut at max_tokens after {call.tokens} tokens, not run"
    assert f"tool: calculator({call.arguments_text}…) · {said}" in view.details()
    assert call.arguments_text.startswith('{"expression": "') and "tool_call" not in call.arguments_text
    decode = [s for s in view.account.stages if s.kind == "decode"]
    assert decode and decode[-1].detail.endswith(said)
