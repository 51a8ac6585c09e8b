"""A full or read-only disk, for real: the database says which and what to do (a `StorageError`), never a raw
`sqlite3.OperationalError` or the wrong cause; a turn's answer still comes when its storing fails.

"Full" is a file-size limit (RLIMIT_FSIZE: the kernel refuses to grow any file past it, as a full disk refuses a
write), set in this process for the test's duration; "read-only" is a tmpfs remounted read-only, where the test may
mount one (root in a container that allows it), else skipped.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_chatflow.store.database import Database, StorageError
from jupyter_chatflow.store.sessions import Sessions, TurnRecord


@contextlib.contextmanager
def files_cannot_grow_past(limit: int) -> Iterator[None]:
    """No file this process writes may grow past `limit` bytes (a write that would is refused: EFBIG)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    before = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # (else the kernel ends the process)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, before)


@contextlib.contextmanager
def read_only_tmpfs(folder: Path) -> Iterator[Path]:
    """`folder` as a small tmpfs, yielded writable; `remount_read_only` turns it read-only. Skips where mounting is
    not allowed."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip()})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


def remount_read_only(folder: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True, capture_output=True)


def test_a_new_database_on_a_full_disk_is_a_storage_error_naming_the_fix(tmp_path):
    with files_cannot_grow_past(4096), pytest.raises(StorageError) as info:
        Database(tmp_path / "chatflow.db")
    said = str(info.value)
    assert "disk is full" in said and "$CHATFLOW_DB" in said and "free some space" in said


def test_a_database_that_fills_mid_session_says_so_and_keeps_what_it_had(tmp_path):
    path = tmp_path / "chatflow.db"
    with Database(path) as db:
        sessions = Sessions(db)
        session = sessions.open("demo")
        sessions.add_turn(TurnRecord(id="t0", session_id=session.id, user="q", answer="a", status="completed"))
        biggest = max(p.stat().st_size for p in tmp_path.iterdir())
        big = TurnRecord(id="t1", session_id=session.id, user="q" * 2_000_000, answer="a", status="completed")
        with files_cannot_grow_past(biggest), pytest.raises(StorageError, match="disk is full"):
            sessions.add_turn(big)
        assert [t.id for t in sessions.turns(session.id)] == ["t0"]  # rolled back whole, nothing torn
        sessions.add_turn(TurnRecord(id="t2", session_id=session.id, user="q", answer="a", status="completed"))


def test_a_chat_turn_whose_storing_fails_on_a_full_disk_still_answers_and_names_the_fix(tiny_model, tmp_path):
    from jupyter_chatflow.pipeline.chat import Chat

    chat = Chat(model=tiny_model, db=Database(tmp_path / "chatflow.db"), session="full")
    chat.send("Hello", max_tokens=3, temperature=0.0, memory=False).wait(60)
    biggest = max(p.stat().st_size for p in tmp_path.iterdir())
    with files_cannot_grow_past(biggest), pytest.warns(UserWarning, match="disk is full.*free some space") as said:
        response = chat.send("Again and again. " * 12, max_tokens=3, temperature=0.0, memory=False)
        response.wait(60)
    assert response.terminal().type == "completed", response.terminal()
    assert response.text() == response.terminal().text
    assert "$CHATFLOW_DB" in str(said[0].message)


def test_the_storing_failure_is_told_after_the_reader_has_read_the_end_not_inside_the_answer(tiny_model, tmp_path):
    """The cell's warning used to land inside the answer's last sentence: it was issued on the engine thread while
    the cell still printed the answer. It is now the reader's, once it has handled the terminal event."""
    import warnings

    from jupyter_chatflow.pipeline.chat import Chat

    chat = Chat(model=tiny_model, db=Database(tmp_path / "chatflow.db"), session="told")
    chat.send("Hello", max_tokens=3, temperature=0.0, memory=False).wait(60)
    biggest = max(p.stat().st_size for p in tmp_path.iterdir())
    handled: list[str] = []
    told: list[tuple[int, str]] = []
    with files_cannot_grow_past(biggest), warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, *_, **__: told.append((len(handled), str(message)))
        response = chat.send("Again and again. " * 12, max_tokens=3, temperature=0.0, memory=False)
        response.follow(lambda event: handled.append(event.type))
    assert handled[-1] == "completed" and told, told
    assert all(at == len(handled) for at, _ in told)  # every warning after the last event was handled
    assert any("could not store this turn" in said and "free some space" in said for _, said in told)


def test_a_read_only_filesystem_is_named_as_such_not_as_a_missing_fts5(tmp_path):
    with read_only_tmpfs(tmp_path / f"ro-{uuid.uuid4().hex[:6]}") as folder:
        Database(folder / "old.db").close()
        remount_read_only(folder)
        for path in (folder / "old.db", folder / "new.db"):
            with pytest.raises(StorageError) as info:
                Database(path)
            said = str(info.value)
            assert "read-only" in said and "FTS5" not in said and "$CHATFLOW_DB" in said, said
        assert not os.access(folder / "new.db", os.F_OK)
