"""The magics through a real IPython InteractiveShell, on the tiny model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_chatflow.pipeline.response import Response
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf


@pytest.fixture(scope="module")
def wide_path(tmp_path_factory):
    return write_tiny_gguf(tmp_path_factory.mktemp("wide") / "wide.gguf", TinySpec(context_length=4096))


@pytest.fixture
def shell(wide_path, tmp_path, monkeypatch):
    monkeypatch.setenv("CHATFLOW_DB", str(tmp_path / "magic.db"))
    InteractiveShell.clear_instance()
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_chatflow")
    ip.run_line_magic("config", f"ChatMagics.model_path = {str(wide_path)!r}")
    yield ip
    InteractiveShell.clear_instance()


def chat(shell, line: str, cell: str) -> None:
    shell.run_cell_magic("chat", line, cell)


def test_cell_streams_the_answer_and_a_summary(shell, capsys):
    chat(shell, "--session s --temperature 0 --max-tokens 6 -o r", "Hello")
    out = capsys.readouterr().out
    response = shell.user_ns["r"]
    assert isinstance(response, Response) and response.text() in out
    for stage in ("safety:", "memory:", "context:", "speed:"):
        assert stage in out
    assert [e.to_dict()["type"] for e in response][-1] == "completed"


def test_line_magic_and_interpolation(shell, capsys):
    shell.user_ns["city"] = "Paris"
    shell.run_line_magic("chat", "--max-tokens 3 -o r What about {city}?")  # IPython expands a line itself
    assert shell.user_ns["r"].request.user == "What about Paris?"
    chat(shell, "--max-tokens 3 -o r", "Tell me about {city}. {{literal}}")
    assert shell.user_ns["r"].request.user == "Tell me about Paris. {literal}"
    chat(shell, "--max-tokens 3", "{undefined_name}")
    assert "is not a variable" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--temprature 0", "unrecognized arguments"),
        ("--temperature -1", "temperature must be >= 0"),
        ("--safety maybe", "invalid choice"),
        ("--tools nosuchtool", "nosuchtool"),
        ("--max-tokens 99999", "max_tokens must be from 1 to 4095 (the model's window is 4096 tokens"),
        ("--max-tokens 0", "max_tokens must be >= 1"),
    ],
)
def test_mistakes_print_a_short_message_not_a_traceback(shell, capsys, line, message):
    chat(shell, line, "Hi")
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.startswith("chatflow:")


def test_a_lone_surrogate_in_a_cell_is_a_short_message(shell, capsys):
    chat(shell, "", "Hi \ud800")
    err = capsys.readouterr().err
    assert err.startswith("chatflow: The message holds a lone UTF-16 surrogate") and "Traceback" not in err


def test_session_history_reset_and_continuation(shell, capsys):
    chat(shell, "--session demo --max-tokens 3", "first")
    chat(shell, "--session demo --max-tokens 3 -o r", "second")
    context = next(e for e in shell.user_ns["r"] if e.type == "context_assembled")
    assert any(s.kind == "history" for s in context.segments)
    capsys.readouterr()
    shell.run_line_magic("chat_history", "demo")
    out = capsys.readouterr().out
    assert "[0] user: first" in out and "[1] user: second" in out
    shell.run_line_magic("chat_reset", "demo")
    shell.run_line_magic("chat_history", "demo")
    assert "user:" not in capsys.readouterr().out.split("reset")[-1]


def test_new_session_starts_empty(shell):
    chat(shell, "--session n --max-tokens 3", "first")
    chat(shell, "--session n --new --max-tokens 3 -o r", "again")
    context = next(e for e in shell.user_ns["r"] if e.type == "context_assembled")
    assert not any(s.kind == "history" for s in context.segments)


def test_memory_magic(shell, capsys):
    shell.run_line_magic("chat_memory", "remember I like tea")
    shell.run_line_magic("chat_memory", "list")
    assert "I like tea" in capsys.readouterr().out
    shell.run_line_magic("chat_memory", "forget tea")
    shell.run_line_magic("chat_memory", "")
    assert "(no memories)" in capsys.readouterr().out
    chat(shell, "--max-tokens 3 --no-memory -o r", "tea?")
    assert all(e.type != "memory_recalled" for e in shell.user_ns["r"])


def test_tokens_and_model_magics(shell, wide_path, capsys):
    shell.run_line_magic("chat_tokens", "Hi")
    assert "2 tokens" in capsys.readouterr().out
    shell.run_line_magic("chat_model", "")
    assert capsys.readouterr().out.splitlines()[-3:] == [  # the name, the file, the architecture, dtype and memory
        "tiny-random-llama: llama, 91,136 parameters, F32, context 4,096 tokens; weights 0.3 MiB as float32, 0.2 MiB "
        "as bfloat16",
        f"  file:   {wide_path}",
        "  loaded: as float32, its weights taking 0.3 MiB (2 layers, d=64, window 4096)",
    ]
    shell.run_line_magic("chat_model", "/no/such/model.gguf")
    assert "chatflow:" in capsys.readouterr().err


def test_chat_model_says_what_the_file_is_then_loads_it_as_the_dtype_asked(shell, tmp_path, capsys):
    other = write_tiny_gguf(tmp_path / "other.gguf", TinySpec(n_layers=1, context_length=256))
    shell.run_line_magic("chat_model", f"{other} --dtype bfloat16")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "chatflow: tiny-random-llama: llama, 54,144 parameters, F32, context 256 tokens; weights 0.2 MiB as float32, "
        "0.1 MiB as bfloat16"
    )  # before the load's own lines
    assert out[1] == "chatflow: loading other.gguf…"
    assert out[-1] == "  loaded: as bfloat16, its weights taking 0.1 MiB (1 layers, d=64, window 256)"
    magics = shell.magics_manager.registry["ChatMagics"]
    assert (magics.model_path, magics.dtype, str(magics._model.dtype)) == (str(other), "bfloat16", "bfloat16")


def test_a_model_too_large_is_refused_with_its_figures_and_the_model_in_use_stays(shell, tmp_path, monkeypatch, capsys):
    from jupyter_chatflow.model import memory

    chat(shell, "--temperature 0 --max-tokens 3", "Hello")
    magics = shell.magics_manager.registry["ChatMagics"]
    before = magics._model
    capsys.readouterr()
    other = write_tiny_gguf(tmp_path / "other.gguf", TinySpec(n_layers=1))
    monkeypatch.setattr(memory, "available_memory", lambda: memory.Available(1 << 20, "MemAvailable in /proc/meminfo"))
    shell.run_line_magic("chat_model", str(other))
    captured = capsys.readouterr()
    assert captured.out.startswith("chatflow: tiny-random-llama: llama, 54,144 parameters")  # said before refusing
    assert captured.err == (
        "chatflow: tiny-random-llama needs 0.25 GiB as float32 (0.25 GiB as bfloat16) and 1.0 MiB are available "
        "(MemAvailable in /proc/meminfo): free memory (close other kernels, or models you no longer use), or choose a "
        "model with fewer parameters (every weight is dequantized, so a smaller quantization of this model needs as "
        "much), or set CHATFLOW_MEMORY_CHECK=off to try anyway. The model in use is still tiny-random-llama.\n"
    )
    assert magics._model is before


def test_config_defaults_apply(shell):
    shell.run_line_magic("config", "ChatMagics.max_tokens = 2")
    shell.run_line_magic("config", "ChatMagics.safety = 'off'")
    chat(shell, "-o r", "Hello")
    events = list(shell.user_ns["r"])
    assert events[0].params["max_tokens"] == 2 and events[0].features["safety"] == "off"


def test_code_format_puts_the_answer_into_the_next_cell(shell, monkeypatch):
    seen = []
    monkeypatch.setattr(shell, "set_next_input", lambda text, replace=False: seen.append(text))
    chat(shell, "--format code --max-tokens 3 -o r", "write code")
    assert seen == [shell.user_ns["r"].text()]


def test_html_in_prompt_and_answer_is_escaped_in_markdown():
    from jupyter_chatflow.events import Completed, Timings, Usage
    from jupyter_chatflow.frontends.notebook.render import TurnView

    view = TurnView()
    view.add(
        Completed(finish_reason="stop", text="<script>alert(1)</script> **bold**", usage=Usage(), timings=Timings())
    )
    shown = view.markdown()
    assert "<script>" not in shown and "&lt;script&gt;" in shown and "<strong>bold</strong>" in shown


@pytest.mark.parametrize(("where", "nth"), [("yield event", 8), ("self._changed.wait()", 2)])
def test_an_interrupt_anywhere_in_the_reader_stops_the_turn_and_loses_nothing(shell, where, nth):
    """Ctrl-C can land on any bytecode of the reading thread: between two events, or while it waits for one. (The
    reader waits only when it has caught up with the model, which a loaded machine can make rare: the second wait.)"""
    import sys

    from jupyter_chatflow.events import Cancelled
    from jupyter_chatflow.frontends.notebook.render import TurnView
    from jupyter_chatflow.pipeline import response as response_module

    magics = shell.magics_manager.registry["ChatMagics"]
    chat_ = magics._chat("interrupt")
    response = chat_.send("go", max_tokens=300, temperature=1.0, ignore_eos=True, safety="off", memory=False)
    lines = Path(response_module.__file__).read_text().splitlines()
    hits = {"n": 0}

    def local(frame, event, arg):
        if event == "line" and where in lines[frame.f_lineno - 1]:
            hits["n"] += 1
            if hits["n"] == nth:
                raise KeyboardInterrupt  # what the SIGINT handler does at this bytecode boundary
        return local

    sys.settrace(lambda frame, event, arg: local if frame.f_code.co_filename == response_module.__file__ else None)
    try:
        view = magics._stream(response, "text", TurnView())
    finally:
        sys.settrace(None)
    assert hits["n"] >= nth and isinstance(view.end, Cancelled)
    events = response.events()
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert view.text == events[-1].text == "".join(e.text for e in events if e.type == "token")


def test_inspect_shows_the_panel_and_returns_while_the_panel_streams_the_turn(shell, monkeypatch, capsys):
    from jupyter_chatflow.frontends.notebook import magics
    from jupyter_chatflow.frontends.panel.widget import ChatWidget

    shown = []
    monkeypatch.setattr(magics, "display", shown.append)
    chat(shell, "--inspect --session s --temperature 0 --max-tokens 6 --tools calculator -o r", "Hello")
    [panel] = shown
    assert isinstance(panel, ChatWidget) and panel.settings["tools"] == ["calculator"]
    assert panel.settings["max_tokens"] == 6 and panel.settings["temperature"] == 0
    panel.wait(60)
    response = shell.user_ns["r"]
    assert panel.turns[-1]["turn_id"] == response.turn_id and response.terminal().type == "completed"
    chat(shell, "--inspect --temperature -1", "Hello")
    assert "temperature must be >= 0" in capsys.readouterr().err and len(shown) == 1  # no panel for a mistake


def test_cell_body_is_sent_without_surrounding_blank_lines(shell):
    chat(shell, "--temperature 0 --max-tokens 3 -o r", "\n  What is the capital of France?\n\n")
    response = shell.user_ns["r"]
    assert response.request.user == "What is the capital of France?"
    context = next(e for e in response if e.type == "context_assembled")
    assert [s.text for s in context.segments if s.kind == "user"] == ["What is the capital of France?"]
    tokenized = next(e for e in response if e.type == "tokenized")
    tokenizer = shell.magics_manager.registry["ChatMagics"]._model.tokenizer
    assert "France?<|im_end|>" in tokenizer.decode(list(tokenized.ids))  # no "\n\n" before the end of the turn


def test_bad_chat_model_prints_one_line_and_keeps_the_model_in_use(shell, tmp_path, capsys):
    chat(shell, "--temperature 0 --max-tokens 3", "Hello")
    magics = shell.magics_manager.registry["ChatMagics"]
    before = magics._model
    (tmp_path / "notes.gguf").write_text("not a model")
    five_heads = write_tiny_gguf(tmp_path / "five.gguf", TinySpec(n_heads=5, n_kv_heads=5))
    errors = {}
    for bad in ("/no/such/model.gguf", str(tmp_path / "notes.gguf"), str(five_heads), str(tmp_path)):
        shell.run_line_magic("chat_model", bad)
        errors[bad] = err = capsys.readouterr().err
        assert err.startswith("chatflow: ") and err.count("\n") == 1 and "Traceback" not in err, err
        assert err.endswith("The model in use is still tiny-random-llama.\n"), err
        assert magics._model is before
    assert "'llama.attention.head_count' is 5, which does not divide" in errors[str(five_heads)]
    assert "is not a GGUF file" in errors[str(tmp_path / "notes.gguf")]
    chat(shell, "--temperature 0 --max-tokens 3 -o r", "Hello again")
    assert shell.user_ns["r"].terminal().type == "completed" and capsys.readouterr().err == ""


def test_the_output_says_which_session_the_turn_went_to(shell, capsys):
    chat(shell, "--temperature 0 --max-tokens 3", "Hello")
    assert "session: default (no --session: shared by every %%chat without one)" in capsys.readouterr().out
    chat(shell, "--session notes --temperature 0 --max-tokens 3", "Hello")
    out = capsys.readouterr().out
    assert "session: notes\n" in out and "no --session" not in out


@pytest.fixture
def cold():
    """A kernel whose model has not decoded yet: the schedulers earlier tests of this process left idling stopped
    (one that decoded or warmed a batch after the programs were let go made this turn a warm one: the first-turn
    line then never showed, in 2 of a full run's tests), then every compiled program let go (they load from XLA's
    disk cache)."""
    from jupyter_chatflow.engine.programs import release_all
    from jupyter_chatflow.pipeline.chat_model import _SCHEDULERS

    for scheduler in list(_SCHEDULERS.values()):
        scheduler.close()
    release_all()


def test_loading_and_compiling_show_in_the_cell_not_on_stderr(shell, cold, capsys):
    chat(shell, "--temperature 0 --max-tokens 3", "Hello")
    captured = capsys.readouterr()
    assert captured.err == ""
    lines = captured.out.splitlines()
    assert lines[0] == (  # what the file is, before it loads
        "chatflow: tiny-random-llama: llama, 91,136 parameters, F32, context 4,096 tokens; weights 0.3 MiB as "
        "float32, 0.2 MiB as bfloat16"
    )
    assert lines[1] == "chatflow: loading wide.gguf…"
    assert re.fullmatch(r"chatflow: loaded wide\.gguf in \d+\.\d s", lines[3]), lines  # after the dequantizing line
    assert lines[4].startswith("chatflow: first turn in this kernel: XLA is compiling the model's programs")
    chat(shell, "--temperature 0 --max-tokens 3", "Hello")
    assert "chatflow: loading" not in capsys.readouterr().out  # loaded once; the model's programs are compiled


class _Handle:
    def __init__(self, shown: list):
        self.shown = shown

    def update(self, obj) -> None:
        self.shown.append(("update", obj))


@pytest.fixture
def shown(monkeypatch) -> list:
    """What the cell displays, as in Jupyter: ("display", obj) and ("update", obj) in order; the clock ticks fast."""
    from jupyter_chatflow.frontends import progress
    from jupyter_chatflow.frontends.notebook import magics

    shown: list = []

    def fake_display(obj, display_id=False):
        shown.append(("display", obj))
        return _Handle(shown)

    monkeypatch.setattr(progress, "display", fake_display)
    monkeypatch.setattr(magics, "display", fake_display)
    monkeypatch.setattr(magics, "_has_display", lambda shell: True)
    monkeypatch.setattr(progress, "TICK_S", 0.001)
    return shown


def test_in_jupyter_the_status_is_one_display_updated_in_place(shell, cold, shown, capsys):
    """A bar while the weights load, a clock while XLA compiles, then what it measured: one display, no stderr."""
    from IPython.display import Pretty

    chat(shell, "--temperature 0 --max-tokens 3", "Hello")
    assert capsys.readouterr().err == ""
    status = [(kind, obj.data) for kind, obj in shown if isinstance(obj, Pretty)]
    assert status[0][0] == "display" and all(kind == "update" for kind, _ in status[1:])
    texts = [text for _, text in status]
    assert any(re.search(r"loading wide\.gguf ▕█*░*▏ +\d+ % · dequantizing", t) for t in texts), texts
    assert any("first turn in this kernel: XLA is compiling" in t and re.search(r" · \d+\.\d s$", t) for t in texts)
    assert re.match(r"chatflow: loaded wide\.gguf in \d+\.\d s", texts[-1]), texts[-1]
    answer = [obj for kind, obj in shown if not isinstance(obj, Pretty)]
    assert answer and shown.index(("display", answer[0])) > 0  # the status line sits above the answer


def test_a_kernel_warmed_by_a_panel_is_warm_for_the_cell(shell, cold, shown):
    """Turns through a panel, then a %%chat cell: its status line never says it is the kernel's first turn, and
    nothing of a compile clock stays above the answer."""
    from IPython.display import Pretty

    from jupyter_chatflow.frontends.panel.widget import ChatWidget

    chat(shell, "--inspect --temperature 0 --max-tokens 3", "Hello")
    [panel] = [obj for _, obj in shown if isinstance(obj, ChatWidget)]
    panel.wait(60)
    del shown[:]
    chat(shell, "--temperature 0 --max-tokens 3", "Hello again")
    status = [obj.data for _, obj in shown if isinstance(obj, Pretty)]
    assert not any("first turn" in text for text in status), status
    assert not status or "XLA is compiling" not in status[-1], status


def test_chat_model_loads_the_model_in_use_on_the_devices_and_weights_asked(shell, wide_path, monkeypatch, capsys):
    from jupyter_chatflow.frontends.notebook import magics as module

    asked, real = [], module.load_model
    monkeypatch.setattr(module, "load_model", lambda path, **options: asked.append(options) or real(path, **options))
    shell.run_line_magic("chat_model", "--devices 1 --weights float")
    magics = shell.magics_manager.registry["ChatMagics"]
    assert [(o["devices"], o["weights"]) for o in asked] == [(1, "float")]
    assert (magics.model_path, magics.devices, magics.weights) == (str(wide_path), 1, "float")
    assert capsys.readouterr().out.splitlines()[-1].startswith("  loaded: as float32, its weights taking 0.3 MiB")
    shell.run_line_magic("config", "ChatMagics.devices = 64")  # (a default for the next load)
    shell.run_line_magic("chat_model", "--weights float")
    assert "XLA_FLAGS=--xla_force_host_platform_device_count=64" in capsys.readouterr().err
    assert magics._model.devices == 1  # the model in use stays


def test_the_model_card_says_how_the_weights_are_held_and_over_how_many_devices(tiny_model):
    import types

    from jupyter_chatflow.frontends.notebook.model_card import model_card

    fake = types.SimpleNamespace(
        config=tiny_model.config, path=tiny_model.path, dtype="float32", weights_format="int8", devices=2
    )
    last = model_card(fake).splitlines()[-1]
    assert last.startswith("  loaded: int8 weights, the rest as float32, its weights taking ")
    assert last.endswith("; on 2 devices: heads, MLP sharded")
