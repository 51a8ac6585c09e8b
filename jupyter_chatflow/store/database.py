"""The one SQLite database behind memories, sessions, turns and the request log.

One file per user in the Jupyter data directory (`$CHATFLOW_DB` overrides it), in WAL mode so readers never block the
writer, with a busy timeout so two kernels writing at once wait for each other instead of failing. Every write goes
through `Database.transaction()` (`BEGIN IMMEDIATE`: the write lock is taken up front, so a transaction never has to
be retried half-way). The schema is a list of named migration functions, each applied once, in order, in its own
transaction, recorded in `_migrations` (the pattern of simonw/llm's `migrations.py`).

>>> db = Database()                 # ~/.local/share/jupyter/chatflow/chatflow.db, or $CHATFLOW_DB
>>> with db.transaction() as conn:
...     conn.execute("INSERT INTO memories (text, created) VALUES (?, ?)", ("I like tea", time.time()))
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from jupyter_chatflow.errors import ChatflowError

ENV_VAR = "CHATFLOW_DB"
BUSY_TIMEOUT_S = 10.0


class StorageError(ChatflowError):
    """The database cannot be opened, migrated or used."""


def default_path() -> Path:
    """`$CHATFLOW_DB` if set, else `<jupyter data dir>/chatflow/chatflow.db`."""
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override).expanduser()
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "chatflow" / "chatflow.db"


# ---- migrations: append new ones at the end, never edit or reorder applied ones --------------------------------

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register a schema migration (applied once, in definition order)."""
    MIGRATIONS.append(fn)
    return fn


@migration
def m001_memories(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE memories (id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL, session_id TEXT,"
        " created REAL NOT NULL)"
    )
    # An external-content FTS5 index over memories.text, kept in sync by triggers.
    conn.execute(
        "CREATE VIRTUAL TABLE memories_fts USING fts5(text, content='memories', content_rowid='id',"
        " tokenize='porter unicode61 remove_diacritics 2')"
    )
    # One statement at a time: executescript() would COMMIT the migration's transaction.
    for statement in (
        "CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN"
        " INSERT INTO memories_fts (rowid, text) VALUES (new.id, new.text); END",
        "CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN"
        " INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
        "CREATE TRIGGER memories_au AFTER UPDATE ON memories BEGIN"
        " INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.id, old.text);"
        " INSERT INTO memories_fts (rowid, text) VALUES (new.id, new.text); END",
    ):
        conn.execute(statement)


@migration
def m002_sessions_and_turns(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, name TEXT NOT NULL, title TEXT NOT NULL DEFAULT '',"
        " created REAL NOT NULL, updated REAL NOT NULL, archived INTEGER NOT NULL DEFAULT 0)"
    )
    # A name is unique among live sessions; `open(name, new=True)` archives the old one and reuses the name.
    conn.execute("CREATE UNIQUE INDEX sessions_live_name ON sessions (name) WHERE archived = 0")
    conn.execute(
        "CREATE TABLE turns (id TEXT PRIMARY KEY,"
        " session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE, seq INTEGER NOT NULL,"
        " user TEXT NOT NULL, answer TEXT NOT NULL,"
        " status TEXT NOT NULL CHECK (status IN ('completed', 'cancelled', 'error')),"
        " created REAL NOT NULL, events TEXT NOT NULL DEFAULT '[]', UNIQUE (session_id, seq))"
    )


@migration
def m003_requests(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE requests (id INTEGER PRIMARY KEY AUTOINCREMENT, request_id TEXT NOT NULL,"
        " turn_id TEXT NOT NULL, created REAL NOT NULL, record TEXT NOT NULL)"
    )
    conn.execute("CREATE INDEX requests_created ON requests (created)")


@migration
def m004_turns_in_progress(conn: sqlite3.Connection) -> None:
    """A turn is stored when it starts ("running", with the process that runs it as `owner`) and kept up to date as
    it streams, so a process killed mid-answer leaves the message and what had streamed ("interrupted" once another
    process finds it). SQLite cannot change a CHECK: the table is rebuilt."""
    conn.execute(
        "CREATE TABLE turns_new (id TEXT PRIMARY KEY,"
        " session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE, seq INTEGER NOT NULL,"
        " user TEXT NOT NULL, answer TEXT NOT NULL,"
        " status TEXT NOT NULL CHECK (status IN ('completed', 'cancelled', 'error', 'running', 'interrupted')),"
        " created REAL NOT NULL, events TEXT NOT NULL DEFAULT '[]', owner TEXT NOT NULL DEFAULT '',"
        " UNIQUE (session_id, seq))"
    )
    conn.execute(
        "INSERT INTO turns_new (id, session_id, seq, user, answer, status, created, events)"
        " SELECT id, session_id, seq, user, answer, status, created, events FROM turns"
    )
    conn.execute("DROP TABLE turns")
    conn.execute("ALTER TABLE turns_new RENAME TO turns")
    conn.execute("CREATE INDEX turns_running ON turns (status) WHERE status = 'running'")


@migration
def m005_server_state(conn: sqlite3.Connection) -> None:
    """What `chatflow serve` keeps across a restart: which key owns each conversation (its turns are a session's),
    and the answers stored under an Idempotency-Key."""
    conn.execute("CREATE TABLE conversations (id TEXT PRIMARY KEY, key TEXT NOT NULL, created REAL NOT NULL)")
    conn.execute(
        "CREATE TABLE idempotency (key TEXT NOT NULL, idempotency_key TEXT NOT NULL, digest TEXT NOT NULL,"
        " status INTEGER NOT NULL, media_type TEXT NOT NULL, body BLOB NOT NULL, created REAL NOT NULL,"
        " PRIMARY KEY (key, idempotency_key))"
    )


# ---- the connection -------------------------------------------------------------------------------------------


class Database:
    """A connection to the chatflow database, shared by the threads of one process (a lock serializes them).

    `path=None` uses `default_path()`; `":memory:"` gives a private in-memory database (tests).
    """

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path).expanduser() if path is not None else default_path()
        self._lock = threading.RLock()
        self._depth = 0
        self._conn = _connect(self.path)
        self.migrated: list[str] = migrate(self)  # the migrations this open applied; [] when already current
        """The migrations this open applied; [] when the file was already current."""

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """`BEGIN IMMEDIATE` … `COMMIT` (or `ROLLBACK` on error); nested calls join the outer transaction."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self._conn
                finally:
                    self._depth -= 1
                return
            try:
                _retry_locked(self._conn, "BEGIN IMMEDIATE", self.path)
            except sqlite3.OperationalError as error:
                raise StorageError(cannot_write(self.path, error)) from error
            self._depth = 1
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException as error:
                if self._conn.in_transaction:  # SQLite may have rolled back already (e.g. after SQLITE_FULL)
                    self._conn.execute("ROLLBACK")
                if isinstance(error, sqlite3.OperationalError):  # the disk, not the caller: say which and the fix
                    raise StorageError(cannot_write(self.path, error)) from error
                raise
            finally:
                self._depth = 0

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run a read and return every row (rows index by column name)."""
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def close(self) -> None:
        """Close the connection (the object is unusable afterwards)."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Database {self.path}>"


def migrate(db: Database) -> list[str]:
    """Apply the migrations `db` has not had yet, each in its own transaction; return the names applied."""
    with db.transaction() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied REAL NOT NULL)")
    applied = []
    for fn in MIGRATIONS:
        with db.transaction() as conn:
            # Checked inside the write lock, so two processes opening a new file apply each migration once.
            if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (fn.__name__,)).fetchone():
                continue
            fn(conn)
            conn.execute("INSERT INTO _migrations (name, applied) VALUES (?, ?)", (fn.__name__, time.time()))
            applied.append(fn.__name__)
    return applied


def _connect(path: Path) -> sqlite3.Connection:
    """Open `path` in autocommit mode (transactions are explicit), WAL, with a busy timeout and foreign keys."""
    try:
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    except (OSError, sqlite3.Error) as error:
        raise StorageError(cannot_write(path, error, doing="open")) from error
    conn.row_factory = sqlite3.Row
    try:
        _require_fts5(conn)
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
        _retry_locked(conn, "PRAGMA journal_mode = WAL", path)
    except sqlite3.OperationalError as error:
        conn.close()
        raise StorageError(cannot_write(path, error, doing="open")) from error
    return conn


def cannot_write(path: Path, error: BaseException, doing: str = "write to") -> str:
    """What went wrong with the database file at `path` and what to do, from the error and the disk it is on: a
    read-only filesystem or folder, a full disk, or (else) SQLite's own words."""
    where = path.parent if str(path) != ":memory:" else Path(".")
    while not where.exists() and where != where.parent:
        where = where.parent
    fix = "or set $CHATFLOW_DB to a file on another disk (e.g. /tmp/chatflow.db)"
    try:
        read_only = bool(os.statvfs(where).f_flag & os.ST_RDONLY)
        free = shutil.disk_usage(where).free
    except OSError:
        read_only, free = False, -1
    if read_only or "readonly" in str(error):
        return f"Cannot {doing} {path}: its filesystem is read-only ({error}); set $CHATFLOW_DB to a writable file"
    if "full" in str(error) or 0 <= free < 1 << 20 or "disk I/O" in str(error):
        left = f"{free / (1 << 20):.1f} MiB free there" if free >= 0 else "its free space unknown"
        return f"Cannot {doing} {path}: the disk is full or failing ({error}; {left}); free some space, {fix}"
    return f"Cannot {doing} {path} ({error}); {fix}"


def _retry_locked(conn: sqlite3.Connection, sql: str, path: Path) -> None:
    """Execute `sql`, retrying on "locked": some lock waits (the WAL switch, WAL recovery) skip the busy handler."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute(sql)
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) and "busy" not in str(error):
                raise
            if time.monotonic() > deadline:
                raise StorageError(
                    f"{path} stayed locked for {BUSY_TIMEOUT_S:.0f} s ({error}); close the other program holding "
                    "it, or set $CHATFLOW_DB to another file (on a local disk: WAL needs one)"
                ) from error
            time.sleep(0.02)


def _require_fts5(conn: sqlite3.Connection) -> None:
    """Fail early, with the fix, when this Python's SQLite was built without full-text search."""
    try:
        conn.execute("CREATE VIRTUAL TABLE temp._fts5_probe USING fts5(x)")
        conn.execute("DROP TABLE temp._fts5_probe")
    except sqlite3.OperationalError as error:
        if "fts5" not in str(error).lower():  # not a missing module: the file or its disk (read-only, full)
            raise
        raise StorageError(
            f"This Python's SQLite {sqlite3.sqlite_version} has no FTS5 full-text search ({error}), which memory "
            "recall needs; run jupyter_chatflow on a Python whose sqlite3 has FTS5 (the python.org, conda-forge "
            "and Linux distribution builds do)"
        ) from error
