"""The default model's first load on a new machine compiles a first turn's programs beside the reading of the file
(`engine/ahead.py`), and the next process loads every one of them from the store instead of compiling: `chatflow
chat` as a user types it, twice, on empty caches, the compiles read from the stored programs' log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

QUESTION = "What is the capital of France?"
RUN = """
import logging, sys
logging.basicConfig(level=logging.WARNING, format="%(threadName)s %(message)s")
logging.getLogger("jupyter_chatflow.engine.stored").setLevel(logging.DEBUG)
from jupyter_chatflow.frontends.cli import main
sys.exit(main(["chat", "--temperature", "0", "--max-tokens", "12", sys.argv[1]]))
"""
FIRST_TURN = {"embed_chunk", "layer", "final_norm", "write", "sample_after", "decode_rows", "write_row", "set_row"}


def _chat(home: Path) -> tuple[str, list[tuple[str, str, str]]]:
    """The answer on stdout, and the log's (thread, what was done, program) for each program compiled or loaded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATFLOW_")}
    env |= {"HOME": str(home), "CHATFLOW_COMPILE_AHEAD": "on"}  # (the caches in the new home: empty)
    done = subprocess.run([sys.executable, "-c", RUN, QUESTION], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    logged = [line.split() for line in done.stderr.splitlines() if " in " in line and line.endswith(" ms")]
    return done.stdout, [(words[0], words[1], words[-4]) for words in logged if len(words) >= 5]


def test_a_first_load_compiles_a_first_turn_beside_it_and_the_next_process_compiles_nothing(tmp_path):
    answer, first = _chat(tmp_path)
    assert "Paris" in answer
    compiled = [program for _, done, program in first if done == "compiled"]
    ahead = {program for thread, done, program in first if thread == "chatflow-ahead" and done == "compiled"}
    assert {"embed_chunk", "layer", "decode_rows"} <= ahead <= FIRST_TURN, first  # (the load outlasts these)
    assert all(compiled.count(program) == 1 for program in FIRST_TURN - {"write"}), first  # (each once: no race)

    again, second = _chat(tmp_path)
    assert again == answer
    assert not [entry for entry in second if entry[1] == "compiled"], second  # (loaded or preloaded, every one)
    assert {program for _, done, program in second if done in ("preloaded", "loaded")} >= FIRST_TURN
