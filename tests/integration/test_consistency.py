"""Every figure agrees: the real model's turns of every kind (record_turns.py), their accounts, and what the cell,
the static copy and the CLI show of them. (The panel in Chromium: test_consistency_browser.py.)

A figure shown in two places comes from one account (`account_of`), so these check the account against its own
events (bars inside the turn, tokens/s over the ticks drawn, sums that add up) and each view against the account.
"""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys

import pytest

from jupyter_chatflow.account import account_of
from jupyter_chatflow.account.words import ms
from jupyter_chatflow.events import event_from_dict
from jupyter_chatflow.frontends.notebook.render import TurnView

from .record_turns import KINDS


def events_of(turn: dict) -> list:
    return [event_from_dict(row) for row in turn["events"]]


def view_of(turn: dict) -> TurnView:
    view = TurnView(prewarm=turn["prewarm"])
    for event in events_of(turn):
        view.add(event)
    return view


@pytest.mark.parametrize("kind", KINDS)
def test_the_account_the_panel_receives_is_the_one_its_events_give(recorded_turns, kind):
    turn = recorded_turns[kind]
    assert turn["account"] == account_of(events_of(turn), turn["prewarm"]).to_dict()


@pytest.mark.parametrize("kind", KINDS)
def test_every_bar_lies_inside_its_turn_and_every_compile_inside_its_bar(recorded_turns, kind):
    a = recorded_turns[kind]["account"]
    for s in a["stages"]:
        assert -0.5 <= s["start_ms"] <= s["end_ms"] <= a["total_ms"] + 0.5, s
        for c in s["compiles"]:
            assert s["start_ms"] - 0.5 <= c["start_ms"] <= c["end_ms"] <= s["end_ms"] + 0.5, (s["label"], c)
        for t in s["ticks_ms"]:
            assert s["start_ms"] - 0.5 <= t <= s["end_ms"] + 0.5, (s["label"], t)


@pytest.mark.parametrize("kind", KINDS)
def test_a_compile_comes_before_the_token_it_delayed_never_after(recorded_turns, kind):
    """No token's tick falls inside a compile: the compile happened between the token before and its own."""
    for s in recorded_turns[kind]["account"]["stages"]:
        for c in s["compiles"]:
            assert not [t for t in s["ticks_ms"] if c["start_ms"] + 0.5 < t < c["end_ms"] - 0.5], (s["label"], c)


@pytest.mark.parametrize("kind", KINDS)
def test_tokens_per_s_is_what_the_drawn_ticks_give(recorded_turns, kind):
    a = recorded_turns[kind]["account"]
    decode = [s for s in a["stages"] if s["kind"] == "decode" and len(s["ticks_ms"]) > 1]
    if a["remote"]:  # the server decoded: its tokens' arrivals, the SSE bar's frames
        assert not [s for s in a["stages"] if s["kind"] == "decode"] and a["tokens_per_s"] > 0
        return
    steps = sum(len(s["ticks_ms"]) - 1 for s in decode)
    spans = [(s["ticks_ms"][0], s["ticks_ms"][-1], s["compiles"]) for s in decode]
    lasted = sum(last - first for first, last, _ in spans)
    compiled = sum(max(0.0, min(c["end_ms"], last) - max(c["start_ms"], first)) for first, last, cs in spans
                   for c in cs)  # fmt: skip
    assert a["tokens_per_s"] == pytest.approx(steps / (lasted - compiled) * 1000, rel=1e-9)


@pytest.mark.parametrize("kind", KINDS)
def test_the_sums_add_up(recorded_turns, kind):
    a = recorded_turns[kind]["account"]
    if a["completion_tokens"] is not None:
        assert a["answer_tokens"] + a["call_tokens"] + a["unshown_tokens"] == a["completion_tokens"]
    for r in a["rounds"]:
        assert sum(p["tokens"] for p in r["gauge"]) == r["window"]
        assert r["reused_tokens"] + r["computed_tokens"] == r["prefill_tokens"]
    queues = [s["end_ms"] - s["start_ms"] for s in a["stages"] if s["kind"] == "queue"]
    compiles = [c["end_ms"] - c["start_ms"] for s in a["stages"] for c in s["compiles"]]
    assert a["queued_ms"] == pytest.approx(sum(queues)) and a["compile_ms"] == pytest.approx(sum(compiles))
    assert a["compile_before_first_ms"] <= a["compile_ms"] + 1e-6
    ticks = sum(len(s["ticks_ms"]) for s in a["stages"] if s["kind"] == "decode")
    assert ticks == (0 if a["remote"] else a["answer_tokens"] - a["kept_tokens"])
    if a["ttft_ms"] is not None:
        assert a["first_computed_ms"] <= a["ttft_ms"] + 0.5


@pytest.mark.parametrize("kind", KINDS)
def test_the_cell_and_the_static_copy_say_the_accounts_figures(recorded_turns, kind):
    turn, a = recorded_turns[kind], recorded_turns[kind]["account"]
    view = view_of(turn)
    details = view.details()
    speed = next(line for line in details if line.startswith("speed: "))
    if a["ttft_note"]:
        assert a["ttft_note"] in speed
    if a["tokens_per_s"] is not None:
        assert f"{a['tokens_per_s']:.1f} tok/s" in speed
    assert f"answer {ms(a['answer_ms'])}" in speed
    assert f"tokens: {a['generated_note']}" in details
    for r, line in zip([r for r in a["rounds"] if r["prefill_note"]], [d for d in details if "prefill " in d],
                       strict=True):  # fmt: skip
        assert line.endswith(r["prefill_note"])
    copy = view.html(turn["events"][0]["user"])
    if a["rounds"]:
        last = a["rounds"][-1]
        assert f"context window {last['window']:,} tokens, {last['used_tokens']:,} used" in copy
        for part in last["gauge"]:
            assert f"{html.escape(part['label'])} {part['tokens']:,}" in copy


def test_each_kind_reads_right(recorded_turns):
    """What each kind of turn must say, by its kind: the values a user would check."""
    t = {kind: recorded_turns[kind]["account"] for kind in KINDS}
    cold = t["cold"]
    assert cold["compile_before_first_ms"] > 500 and "XLA compiling" in cold["ttft_note"]  # an empty XLA cache
    # (the warm turn's 16-wide tail is its own prefill programs' first use: the cold turn's 43 tokens went in one
    # 64-wide chunk, on the programs its input scan compiled; each turn compiles only what is new to the process)
    assert t["warm"]["compile_ms"] < cold["compile_ms"] and t["warm"]["reused_tokens"] > 0
    tool = t["tool"]
    assert tool["call_tokens"] > tool["call_fixed_tokens"] > 0 and "in the tool call" in tool["generated_note"]
    assert "the grammar fixed" in tool["rounds"][0]["prefill_note"] and tool["rounds"][0]["gauge"][-3]["kind"] == "call"
    result = next(e for e in recorded_turns["tool"]["events"] if e["type"] == "tool_result")
    assert result["output"].endswith("= 391")  # 17 * 23, computed by the calculator the model called
    assert t["prewarm"]["prewarm_note"].startswith("Prewarmed while typing")
    fork = recorded_turns["fork"]
    assert t["fork"]["kept_tokens"] == fork["events"][0]["fork_index"] + 1 and t["fork"]["fork_of"]
    assert "kept from the forked answer" in t["fork"]["rounds"][0]["prefill_note"]
    trimmed = [e for e in recorded_turns["trimmed"]["events"] if e["type"] == "context_assembled"][-1]
    assert trimmed["trimmed"] and "; trimmed 1" in "\n".join(view_of(recorded_turns["trimmed"]).details())
    assert t["stopped"]["status"] == "cancelled" and t["stopped"]["answer_tokens"] >= 6
    remote = t["remote"]
    assert remote["remote"] and any(s["label"] == "SSE stream" for s in remote["stages"])


def test_the_cli_prints_the_account_of_its_own_events(real_model_path, tmp_path):
    """`chatflow chat --json`: the events, then the account, which is `account_of` those events."""
    done = subprocess.run(
        [sys.executable, "-m", "jupyter_chatflow", "chat", "--json", "--temperature", "0", "--max-tokens", "24",
         "What is 17 * 23?"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "CHATFLOW_DB": str(tmp_path / "db")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    *rows, account = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert account.pop("type") == "account"
    assert account == account_of([event_from_dict(r) for r in rows]).to_dict()
    assert account["answer_tokens"] == sum(r["type"] == "token" for r in rows) > 0
