"""The cell's status line around a turn (`CompileWatch`): the clock while XLA compiles, and what stays after."""

from __future__ import annotations

import pytest

from jupyter_chatflow.account import TurnAccount
from jupyter_chatflow.frontends import progress
from jupyter_chatflow.frontends.progress import CompileWatch, StatusLine


class _Handle:
    def __init__(self, shown: list[str]):
        self.shown = shown

    def update(self, obj) -> None:
        self.shown.append(obj.data)


@pytest.fixture
def shown(monkeypatch) -> list[str]:
    """What a Jupyter display of the status line showed, first to last."""
    texts: list[str] = []

    def display(obj, display_id=False):
        texts.append(obj.data)
        return _Handle(texts)

    monkeypatch.setattr(progress, "display", display)
    monkeypatch.setattr(progress, "made_ahead", lambda: (0, 0.0))  # (a process whose loads compiled nothing ahead)
    return texts


def _account(compile_ms: float) -> TurnAccount:
    return TurnAccount(status="completed", remote=False, compile_ms=compile_ms, ttft_ms=10.0)


LOADED = "loaded wide.gguf in 0.2 s"


@pytest.mark.parametrize(("before", "last"), [("", ""), (LOADED, f"chatflow: {LOADED}")])
def test_a_finished_clock_that_compiled_nothing_worth_a_mention_leaves_no_tick_behind(shown, monkeypatch, before, last):
    """The issue's cell: a tiny program (squeeze) compiled while the clock ticked, then the turn's account found
    under 50 ms of compiling. The line must not keep saying that XLA is compiling."""
    monkeypatch.setattr(progress, "compiling", lambda at_least=0.0: "a program (squeeze), 0.0 s so far")
    monkeypatch.setattr(progress, "preloaded", lambda: (0, 0.0))
    line = StatusLine(rich=True)
    with CompileWatch(line, lambda: _account(3.0), first_turn=True, cache=None, before=before):
        pass
    assert any("XLA is compiling" in text for text in shown), shown  # the clock drew while the turn began
    assert shown[-1] == last and line.text == last, shown


def test_a_first_turn_whose_programs_were_preloaded_says_so_instead_of_nothing(shown, monkeypatch):
    """A new kernel whose programs an earlier one compiled: the preload threads loaded them while the weights
    loaded, and the turn compiled nothing. The line says where they came from and what that took."""
    monkeypatch.setattr(progress, "compiling", lambda at_least=0.0: "")
    monkeypatch.setattr(progress, "preloaded", lambda: (7, 0.64))
    with CompileWatch(StatusLine(rich=True), lambda: _account(3.0), first_turn=True, cache="/tmp/xla", before=LOADED):
        pass
    assert shown[-1] == (
        f"chatflow: {LOADED} · the model's programs were ready: 7 loaded ahead from XLA's cache at /tmp/xla in 0.6 s "
        "(compiled by an earlier kernel), none compiled by this turn"
    ), shown
    drawn = len(shown)
    with CompileWatch(StatusLine(rich=True), lambda: _account(3.0), first_turn=False, cache="/tmp/xla"):
        pass
    assert len(shown) == drawn  # (a later turn found them ready too: nothing worth a line)


def test_a_first_turn_whose_programs_compiled_beside_the_load_says_so(shown, monkeypatch):
    """A first load of the file: its first turn's programs compiled while it read the weights (`engine/ahead.py`).
    The line says so, whether the turn then compiled nothing or waited for the last of them."""
    monkeypatch.setattr(progress, "compiling", lambda at_least=0.0: "")
    monkeypatch.setattr(progress, "preloaded", lambda: (0, 0.0))
    monkeypatch.setattr(progress, "made_ahead", lambda: (9, 6.83))
    with CompileWatch(StatusLine(rich=True), lambda: _account(3.0), first_turn=True, cache="/tmp/xla", before=LOADED):
        pass
    assert shown[-1] == (
        f"chatflow: {LOADED} · the model's programs were ready: 9 compiled beside the model's load in 6.8 s, none "
        "compiled by this turn"
    ), shown
    with CompileWatch(StatusLine(rich=True), lambda: _account(700.0), first_turn=True, cache="/tmp/xla"):
        pass
    assert shown[-1] == (
        "chatflow: XLA compiled the model's programs in 0.7 s, 0.0 s of it before the first token, after 9 compiled "
        "beside the model's load in 6.8 s (the first turn in this kernel; kept in XLA's cache at /tmp/xla for later "
        "kernels)"
    ), shown


def test_a_compile_worth_a_mention_replaces_the_clock_with_what_it_cost(shown, monkeypatch):
    monkeypatch.setattr(progress, "compiling", lambda at_least=0.0: "the decode step (decode_rows), 1.0 s so far")
    with CompileWatch(StatusLine(rich=True), lambda: _account(2400.0), first_turn=True, cache="/tmp/xla"):
        pass
    assert shown[-1].startswith("chatflow: XLA compiled the model's programs in 2.4 s"), shown


def test_after_the_first_turn_a_blink_of_compiling_is_not_shown(shown, monkeypatch):
    """A warm kernel: a compile shorter than SHOW_AFTER_S draws nothing (it would blink and go)."""
    monkeypatch.setattr(progress, "compiling_now", lambda: [("squeeze", 0.01)])
    with CompileWatch(StatusLine(rich=True), lambda: _account(0.0), first_turn=False, cache=None):
        pass
    assert shown == []
    monkeypatch.setattr(progress, "compiling_now", lambda: [("decode_rows", progress.SHOW_AFTER_S + 0.1)])
    with CompileWatch(StatusLine(rich=True), lambda: _account(0.0), first_turn=False, cache=None):
        pass
    assert "XLA is compiling the decode step (decode_rows)" in shown[0] and shown[-1] == "", shown
