"""How a turn reads in a notebook: a `Response` shown by IPython as `%%chat` shows it."""

from __future__ import annotations

from IPython.core.interactiveshell import InteractiveShell

from jupyter_chatflow import Response
from jupyter_chatflow.frontends.render import register_display

from ..test_events import samples


def test_a_response_at_the_end_of_a_cell_shows_its_answer_and_the_pipeline_summary():
    shell = InteractiveShell.instance()
    register_display(shell)  # what importing the package in a kernel does
    data, _ = shell.display_formatter.format(Response(samples()))
    markdown = data["text/markdown"]
    assert markdown.startswith('<div class="cf-answer-md"><p>Paris</p><details><summary>pipeline</summary>')
    assert "safety: input redact" in markdown and "context: 12/8192 tokens" in markdown


def test_the_speed_line_reads_the_turns_usage_and_timings():
    from jupyter_chatflow.events import Cancelled, Completed, PrefillDone, Timings, Usage
    from jupyter_chatflow.frontends.render import TurnView

    view = TurnView()
    view.add(PrefillDone(prompt_tokens=40, reused_tokens=0, computed_tokens=40, latency_ms=90.0, compile_ms=60.0))
    usage = Usage(prompt_tokens=40, completion_tokens=12)
    view.add(
        Completed(finish_reason="stop", text="Paris.", usage=usage, timings=Timings(ttft_ms=95.4), tokens_per_s=33.33)
    )
    speed = "speed: first token 95 ms (60 ms of it XLA compiling), 33.3 tok/s, 12 tokens generated · stop"
    assert speed in view.details()
    queued = TurnView()  # every row of the engine's batch was busy first
    queued.add(PrefillDone(prompt_tokens=40, reused_tokens=0, computed_tokens=40, latency_ms=90.0, compile_ms=60.0,
                           queued_ms=300.0))  # fmt: skip
    queued.add(Completed(finish_reason="stop", text="Paris.", usage=usage, timings=Timings(ttft_ms=395.4)))
    assert (
        queued.details()[-1]
        == "speed: first token 395 ms (300 ms of it waiting for a row, 60 ms XLA compiling), 12 tokens generated · stop"
    )
    stopped = TurnView()
    stopped.add(Cancelled(text="Par", usage=Usage(completion_tokens=2)))  # no first token time: none is claimed
    assert "speed: 2 tokens generated · stopped" in stopped.details()
