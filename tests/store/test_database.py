"""The database: location, pragmas, migrations, transactions, and two processes writing at once."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.store import database as store
from jupyter_chatflow.store.database import MIGRATIONS, Database, StorageError
from jupyter_chatflow.store.memory import Memory
from jupyter_chatflow.store.sessions import Sessions, TurnRecord

WRITES = 200


@pytest.fixture
def db(tmp_path):
    with Database(tmp_path / "chatflow.db") as database:
        yield database


def test_default_path_is_in_the_jupyter_data_dir(monkeypatch, tmp_path):
    monkeypatch.delenv(store.ENV_VAR, raising=False)
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    assert store.default_path() == tmp_path / "data" / "chatflow" / "chatflow.db"


def test_env_var_overrides_the_path_and_the_folder_is_created(monkeypatch, tmp_path):
    monkeypatch.setenv(store.ENV_VAR, str(tmp_path / "deep" / "er" / "my.db"))
    with Database() as database:
        assert database.path == tmp_path / "deep" / "er" / "my.db"
    assert (tmp_path / "deep" / "er" / "my.db").exists()


def test_pragmas(db):
    assert db.query("PRAGMA journal_mode")[0][0] == "wal"
    assert db.query("PRAGMA foreign_keys")[0][0] == 1
    assert db.query("PRAGMA busy_timeout")[0][0] == store.BUSY_TIMEOUT_S * 1000


def test_migrations_apply_once_in_order(tmp_path):
    path = tmp_path / "chatflow.db"
    with Database(path) as first:
        assert first.migrated == [fn.__name__ for fn in MIGRATIONS]
        tables = {row["name"] for row in first.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"_migrations", "memories", "memories_fts", "sessions", "turns", "requests"} <= tables
    with Database(path) as again:
        assert again.migrated == []
        assert [r["name"] for r in again.query("SELECT name FROM _migrations ORDER BY rowid")] == first.migrated


def test_transaction_commits_or_rolls_back(db):
    with db.transaction() as conn:
        conn.execute("INSERT INTO memories (text, created) VALUES ('kept', 0)")
    with pytest.raises(RuntimeError), db.transaction() as conn:
        conn.execute("INSERT INTO memories (text, created) VALUES ('dropped', 0)")
        raise RuntimeError("boom")
    assert [row["text"] for row in db.query("SELECT text FROM memories")] == ["kept"]


def test_nested_transactions_join_the_outer_one(db):
    with pytest.raises(RuntimeError), db.transaction() as outer:
        outer.execute("INSERT INTO memories (text, created) VALUES ('a', 0)")
        with db.transaction() as inner:
            inner.execute("INSERT INTO memories (text, created) VALUES ('b', 0)")
        raise RuntimeError("roll back both")
    assert db.query("SELECT count(*) FROM memories")[0][0] == 0


def test_threads_share_one_database(db):
    memory = Memory(db)
    threads = [threading.Thread(target=lambda: [memory.remember(f"fact {i}") for i in range(50)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(memory.list()) == 200


def test_missing_fts5_names_the_fix(monkeypatch):
    class NoFts:
        def execute(self, sql):
            raise sqlite3.OperationalError("no such module: fts5")

    with pytest.raises(StorageError, match="FTS5") as info:
        store._require_fts5(NoFts())  # type: ignore[arg-type]
    assert isinstance(info.value, ChatflowError)


def test_unopenable_path_names_the_fix(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(StorageError, match="CHATFLOW_DB"):
        Database(tmp_path / "a-file" / "chatflow.db")


# ---- two processes at once ------------------------------------------------------------------------------------


def _open(path: str, start, results) -> None:
    start.wait(60)
    with Database(path) as database:
        results.put(database.migrated)


def _write(path: str, name: str, ready) -> None:
    with Database(path) as database:
        memory, sessions = Memory(database), Sessions(database)
        session = sessions.open("shared")
        ready.wait(60)  # both processes are connected: the writes overlap
        for i in range(WRITES):
            memory.remember(f"{name} remembers fact number {i}")
            sessions.add_turn(
                TurnRecord(id=f"{name}-{i}", session_id=session.id, user="q", answer="a", status="completed")
            )
            time.sleep(0.001)  # lets the other process in between writes (SQLite's busy wait is not fair)


@pytest.mark.slow  # three fresh processes, each importing JAX and the package (seconds of CPU each)
def test_two_processes_opening_a_new_database_migrate_once(tmp_path):
    path = str(tmp_path / "fresh.db")
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    start = context.Event()
    processes = [context.Process(target=_open, args=(path, start, results)) for _ in range(3)]
    for process in processes:
        process.start()
    start.set()
    applied = [name for _ in processes for name in results.get(timeout=120)]
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    assert sorted(applied) == sorted(fn.__name__ for fn in MIGRATIONS)
    with Database(path) as database:
        assert database.query("SELECT count(*) FROM _migrations")[0][0] == len(MIGRATIONS)


@pytest.mark.slow  # two fresh processes, each importing JAX and the package
def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = str(tmp_path / "busy.db")
    Database(path).close()
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(2)
    processes = [context.Process(target=_write, args=(path, name, ready)) for name in ("left", "right")]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    with Database(Path(path)) as database:
        assert len(Memory(database).list()) == 2 * WRITES
        sessions = Sessions(database).list()
        assert len(sessions) == 1  # both processes opened the same "shared" session
        turns = Sessions(database).turns(sessions[0].id)
    assert len(turns) == 2 * WRITES
    assert [turn.seq for turn in turns] == list(range(2 * WRITES))
    assert {turn.id for turn in turns} == {f"{name}-{i}" for name in ("left", "right") for i in range(WRITES)}
