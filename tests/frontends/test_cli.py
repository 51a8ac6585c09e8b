"""The chatflow command: text and JSON output, tokens, model info, errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from jupyter_chatflow.account import account_of
from jupyter_chatflow.events import event_from_dict
from jupyter_chatflow.frontends.cli import main
from jupyter_chatflow.pipeline.local import DEFAULT_SYSTEM


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_chat_json_stream(tiny_path, tiny_model, capsys):
    # (the random model answers the default system prompt with text; with none it ends at once: no token to check)
    system = ["--system", DEFAULT_SYSTEM]
    code = main(["chat", "--model", str(tiny_path), "--json", "--temperature", "0", "--max-tokens", "6", *system, "Hi"])
    *events, account = json_lines(capsys.readouterr().out)
    assert code == 0 and all("type" in e for e in events)
    assert account == {"type": "account", **account_of([event_from_dict(e) for e in events]).to_dict()}
    assert account["answer_tokens"] == sum(e["type"] == "token" for e in events)  # the last line: the figures
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds[0] == "turn_started" and {"safety_decision", "context_assembled", "tokenized", "prefill"} <= set(kinds)
    tokens, last = [e for e in events if e["type"] == "token"], events[-1]
    assert tokens and all(isinstance(e["token_id"], int) and isinstance(e["logprob"], float) for e in tokens)
    assert isinstance(tokens[0]["text"], str) and len(tokens[0]["alternatives"]) == 5
    assert last["type"] == "completed" and last["finish_reason"] in ("stop", "length")
    tokenized = next(e for e in events if e["type"] == "tokenized")
    assert last["usage"]["prompt_tokens"] == len(tokenized["ids"])
    assert last["usage"]["completion_tokens"] == len(tokens) + (last["finish_reason"] == "stop")
    assert last["text"] == "".join(e["text"] for e in tokens)


def test_chat_json_with_a_session_ends_with_the_title_after_the_answer(tiny_path, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CHATFLOW_DB", str(tmp_path / "cli.db"))
    args = ["chat", "--model", str(tiny_path), "--json", "--max-tokens", "4", "--session", "s1"]
    assert main([*args, "What is the capital of France?"]) == 0
    *events, account = json_lines(capsys.readouterr().out)
    assert [e["type"] for e in events[-2:]] == ["completed", "title_generated"]
    assert events[-1]["title"] == "Capital of France"  # the tiny model's attempt is noise: the user's words
    assert events[-1]["sequence_number"] == events[-2]["sequence_number"] + 1
    assert account["type"] == "account" and account["title"] == "Capital of France"  # (its figures, title included)
    assert main([*args, "And of Spain?"]) == 0  # the session has its title: no more title events
    assert [e["type"] for e in json_lines(capsys.readouterr().out)[-2:]] == ["completed", "account"]


def test_chat_without_a_session_stores_nothing_and_answers_if_the_database_cannot_open(
    tiny_path, tmp_path, monkeypatch, capsys
):
    from jupyter_chatflow.store.database import Database

    monkeypatch.setenv("CHATFLOW_DB", str(tmp_path / "cli.db"))
    assert main(["chat", "--model", str(tiny_path), "--max-tokens", "3", "Hello"]) == 0
    with Database(tmp_path / "cli.db") as db:  # a one-off run made an empty "cli" session each time
        assert db.query("SELECT count(*) FROM sessions")[0][0] == 0
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("CHATFLOW_DB", str(tmp_path / "a-file" / "cli.db"))  # cannot be opened
    capsys.readouterr()
    assert main(["chat", "--model", str(tiny_path), "--json", "--max-tokens", "3", "Hello"]) == 0
    said = capsys.readouterr()
    assert [e["type"] for e in json_lines(said.out)][-2:] == ["completed", "account"]  # the answer came
    assert "memory is off for this run: Cannot open" in said.err and "$CHATFLOW_DB" in said.err
    assert main(["chat", "--model", str(tiny_path), "--max-tokens", "3", "--session", "s", "Hello"]) == 1  # stored
    assert "Cannot open" in capsys.readouterr().err


def test_chat_text_streams_to_stdout(tiny_path, capsys):
    assert main(["chat", "--model", str(tiny_path), "--seed", "3", "--max-tokens", "5", "Hello"]) == 0
    captured = capsys.readouterr()
    assert captured.out.endswith("\n") and "Loading tiny.gguf" in captured.err


def test_same_seed_same_cli_answer(tiny_path, capsys):
    args = [
        "chat",
        "--model",
        str(tiny_path),
        "--json",
        "--seed",
        "11",
        "--temperature",
        "1.2",
        "--max-tokens",
        "8",
        "x",
    ]
    main(args)
    first = [e.get("token_id") for e in json_lines(capsys.readouterr().out)]
    main(args)
    assert [e.get("token_id") for e in json_lines(capsys.readouterr().out)] == first


def test_tokens_json(tiny_path, capsys):
    assert main(["tokens", "--model", str(tiny_path), "--json", "the <|im_start|>"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"ids", "pieces"} and len(out["ids"]) == len(out["pieces"])
    assert 1 not in out["ids"], "special-token text in user text must stay plain text"


def test_model_info(tiny_path, capsys):
    assert main(["model", "info", "--model", str(tiny_path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["architecture"] == "llama" and info["layers"] == 2


def test_missing_model_is_a_short_message(tmp_path, capsys):
    assert main(["chat", "--model", str(tmp_path / "none.gguf"), "Hi"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("chatflow: No model file at") and "Traceback" not in err


def test_bad_sampling_value_is_a_short_message(tiny_path, capsys):
    assert main(["chat", "--model", str(tiny_path), "--temperature", "-1", "Hi"]) == 1
    assert "temperature must be >= 0" in capsys.readouterr().err


@pytest.mark.usefixtures("real_model_path")
def test_console_script_streams_the_default_model():
    """The README's main command, end to end in a fresh process."""
    command = [sys.executable, "-m", "jupyter_chatflow", "chat", "--json", "--temperature", "0", "--max-tokens", "20"]
    result = subprocess.run(
        [*command, "What is the capital of France?"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert result.returncode == 0, result.stderr
    *events, account = json_lines(result.stdout)  # the events, then the turn's account
    assert events[-1]["type"] == "completed" and "Paris" in events[-1]["text"]
    assert sum(e["type"] == "token" for e in events) == events[-1]["usage"]["completion_tokens"] - (
        events[-1]["finish_reason"] == "stop"
    )
    assert account["type"] == "account" and account["answer_tokens"] == sum(e["type"] == "token" for e in events)


@pytest.mark.usefixtures("real_model_path")
def test_ctrl_c_stops_cleanly_and_keeps_the_partial_answer():
    """SIGINT while streaming: the answer so far stays, marked as stopped, exit status 130, no traceback."""
    command = [sys.executable, "-m", "jupyter_chatflow", "chat", "--ignore-eos", "--max-tokens", "2000", "A story."]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
    # as from a terminal: a test run started in the background (`cmd &`) ignores SIGINT, and so would the child
    # (an ignored signal stays ignored across exec; a handled one starts at its default)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    finally:
        signal.signal(signal.SIGINT, before)
    first = process.stdout.read(20)  # some answer has streamed
    process.send_signal(signal.SIGINT)
    try:
        rest, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # (seen once in CI) say where every thread was: faulthandler, on SIGABRT
        process.send_signal(signal.SIGABRT)
        rest, err = process.communicate(timeout=30)
        pytest.fail(f"still running 60 s after Ctrl-C; stdout ends {rest[-300:]!r}; stderr:\n{err[-6000:]}")
    assert process.returncode == 130, err
    assert first.strip() and rest.rstrip().endswith("[stopped]")
    assert "Traceback" not in err


def test_prompt_larger_than_the_window_is_a_short_message(tiny_path, capsys):
    huge = "lorem ipsum " * 100_000  # ~1.2 MB of text
    assert main(["chat", "--model", str(tiny_path), huge]) == 1
    err = capsys.readouterr().err
    assert "512-token window" in err and "shorten the message" in err and "Traceback" not in err


def test_ctrl_c_while_loading_is_not_a_traceback(monkeypatch, capsys, tiny_path):
    from jupyter_chatflow.engine import loader

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(loader, "load_model", interrupted)
    assert main(["chat", "--model", str(tiny_path), "Hi"]) == 130
    assert capsys.readouterr().err.endswith("chatflow: interrupted\n")


@pytest.mark.slow  # a fresh Python that imports JAX and the package: seconds of CPU before the test starts
def test_prompt_from_stdin_with_a_dash(tiny_path):
    """`echo … | chatflow chat -`, in a fresh process as from a shell."""
    command = [sys.executable, "-m", "jupyter_chatflow", "chat", "--model", str(tiny_path), "--json", "--max-tokens"]
    result = subprocess.run(
        [*command, "3", "-"], input="What is the capital of France?\n", capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    *events, account = json_lines(result.stdout)
    assert events[0]["type"] == "turn_started" and events[0]["user"] == "What is the capital of France?"
    assert events[-1]["type"] == "completed" and account["type"] == "account"


def test_prompt_from_piped_stdin_when_none_is_given(tiny_path, monkeypatch, capsys):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("\nHello from a pipe\n\n"))
    assert main(["chat", "--model", str(tiny_path), "--json", "--max-tokens", "2"]) == 0
    assert json_lines(capsys.readouterr().out)[0]["user"] == "Hello from a pipe"


def test_no_prompt_at_a_terminal_says_how_to_give_one(tiny_path, monkeypatch, capsys):
    class Terminal:
        def isatty(self) -> bool:
            return True

        def read(self) -> str:
            raise AssertionError("a terminal's stdin must not be read: it would wait for the user")

    monkeypatch.setattr(sys, "stdin", Terminal())
    assert main(["chat", "--model", str(tiny_path)]) == 1
    assert capsys.readouterr().err == "chatflow: Give a PROMPT, or pipe one in: echo 'Hi' | chatflow chat -\n"


TINY_SUMMARY = (
    "tiny-random-llama: llama, 91,136 parameters, F32, context 512 tokens; weights 0.3 MiB as float32, 0.2 MiB as "
    "bfloat16"
)


def test_model_info_says_what_the_file_is_and_what_it_needs(tiny_path, monkeypatch, capsys):
    from jupyter_chatflow.model import memory

    monkeypatch.setattr(memory, "available_memory", lambda: memory.Available(3 << 30, "test"))
    assert main(["model", "info", "--model", str(tiny_path)]) == 0
    first, *rows = capsys.readouterr().out.splitlines()
    table = dict(row.split(maxsplit=1) for row in rows)
    assert first == TINY_SUMMARY and table["quantization"] == "F32" and table["parameters"] == "91136"
    assert (table["weights_float32_gib"], table["needs_float32_gib"], table["available_gib"]) == ("0.0", "0.25", "3.0")
    assert main(["model", "info", "--model", str(tiny_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["needs_bfloat16_gib"] == 0.25


def test_chat_says_what_the_model_is_before_it_loads(tiny_path, capsys):
    assert main(["chat", "--model", str(tiny_path), "--max-tokens", "2", "Hello"]) == 0
    assert capsys.readouterr().err.splitlines()[:2] == [f"chatflow: {TINY_SUMMARY}", "Loading tiny.gguf…"]


def test_a_model_too_large_is_refused_with_its_figures_before_it_loads(tiny_path, monkeypatch, capsys):
    from jupyter_chatflow.engine import loader
    from jupyter_chatflow.model import memory

    monkeypatch.setattr(memory, "available_memory", lambda: memory.Available(1 << 20, "MemAvailable in /proc/meminfo"))
    monkeypatch.setattr(loader, "read_gguf", lambda path: pytest.fail("the weights were read"))
    assert main(["chat", "--model", str(tiny_path), "Hi"]) == 1
    first, *_, last = capsys.readouterr().err.splitlines()
    assert first == f"chatflow: {TINY_SUMMARY}"
    assert last.startswith(
        "chatflow: tiny-random-llama needs 0.25 GiB as float32 (0.25 GiB as bfloat16) and 1.0 MiB are available "
        "(MemAvailable in /proc/meminfo): free memory (close other kernels, or models you no longer use), or choose a "
        "model with fewer parameters"
    ), last


def test_dtype_is_passed_to_the_loader(tiny_path, monkeypatch, capsys):
    from jupyter_chatflow.engine import loader

    asked = {}

    def record(path, **options):
        asked.update(options)
        raise KeyboardInterrupt

    monkeypatch.setattr(loader, "load_model", record)
    assert main(["chat", "--model", str(tiny_path), "--dtype", "bfloat16", "Hi"]) == 130
    assert asked == {"dtype": "bfloat16", "devices": None, "weights": None}
    asked.clear()
    assert main(["chat", "--model", str(tiny_path), "--devices", "2", "--weights", "as-file", "Hi"]) == 130
    assert asked == {"dtype": None, "devices": 2, "weights": "as-file"}


@pytest.mark.parametrize(
    ("flags", "message"),
    [(["--devices", "0"], "at least 1; got '0'"), (["--devices", "two"], "at least 1; got 'two'"),
     (["--weights", "q4"], "invalid choice: 'q4'")],
)  # fmt: skip
def test_bad_device_flags_are_refused_by_the_parser(flags, message, capsys):
    with pytest.raises(SystemExit):
        main(["chat", *flags, "Hi"])
    assert message in capsys.readouterr().err


def test_more_devices_than_there_are_is_a_short_message_naming_the_flag(tiny_path, capsys):
    assert main(["chat", "--model", str(tiny_path), "--devices", "64", "Hi"]) == 1
    err = capsys.readouterr().err
    assert "XLA_FLAGS=--xla_force_host_platform_device_count=64" in err and "Traceback" not in err


def test_model_info_says_how_a_file_of_another_family_chats(capsys):
    from pathlib import Path

    gemma3 = Path(__file__).parents[1] / "model" / "archs" / "gemma3.gguf"
    assert main(["model", "info", "--model", str(gemma3), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["architecture"] == "gemma3" and info["sliding_window"] == "8 tokens, in 5 of 6 layers"
    assert info["chat_template"] == "the file's own (tokenizer.chat_template)" or info["chat_template"].startswith(
        "none in the file: "
    )
    assert info["tool_calls"].endswith("held to the grammar by the constrained-decoding mask")
