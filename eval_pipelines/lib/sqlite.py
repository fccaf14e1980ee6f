"""A SQLite database that several threads and processes share safely: one connection per thread, WAL, a busy
timeout so writers take turns instead of failing, and explicit `begin immediate` transactions."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: How long opening a database waits for another process to let go of a fresh file (see `_use_wal`).
WAL_SWITCH_SECONDS = 30.0
#: The write-ahead log is cut back to this size whenever a checkpoint empties it. Without the limit the file
#: stays at its largest ever size (about 4 MB after SQLite's default 1,000-page checkpoint interval) for as long
#: as the database is open, which at a few hundred rollouts is most of the bytes a run leaves on disk.
WAL_SIZE_LIMIT_BYTES = 1 << 20
#: How long a writer waits for another process's write to finish before failing.
BUSY_TIMEOUT_MS = 30_000
#: How long emptying the log waits for readers before giving up (see `SqliteDatabase.checkpoint`).
CHECKPOINT_WAIT_SECONDS = 0.2


def _use_wal(conn: sqlite3.Connection) -> None:
    """Put the database in WAL mode (a setting kept in the file). Switching a fresh file needs an exclusive lock,
    and SQLite refuses it at once, without its busy wait, while another connection is writing (two processes
    opening a new data directory together hit this): so wait and retry, and skip the switch once it is done."""
    deadline = time.monotonic() + WAL_SWITCH_SECONDS
    while True:
        try:
            if conn.execute("pragma journal_mode").fetchone()[0] != "wal":
                conn.execute("pragma journal_mode=wal")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class SqliteDatabase:
    def __init__(self, path: Path, schema: str) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        # executescript manages its own transaction; the DDL is idempotent (`if not exists`).
        self._conn().executescript(schema)

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            _use_wal(conn)
            conn.execute("pragma synchronous=normal")
            conn.execute("pragma foreign_keys=on")
            conn.execute(f"pragma busy_timeout={BUSY_TIMEOUT_MS}")
            conn.execute(f"pragma journal_size_limit={WAL_SIZE_LIMIT_BYTES}")
            self._local.conn = conn
        return conn

    def checkpoint(self, wait_seconds: float = CHECKPOINT_WAIT_SECONDS) -> bool:
        """Copy the write-ahead log into the database file and empty it (after a batch of writes, such as a
        finished run). Emptying it waits for readers of older snapshots, at most `wait_seconds` (not the
        connection's 30-second busy wait: a service answering many reads would hold its caller that long).
        False when it did not complete; a later checkpoint empties the log, so nothing is lost either way."""
        conn = self._conn()
        conn.execute(f"pragma busy_timeout={int(wait_seconds * 1000)}")
        try:
            busy, _, _ = conn.execute("pragma wal_checkpoint(truncate)").fetchone()
        finally:
            conn.execute(f"pragma busy_timeout={BUSY_TIMEOUT_MS}")
        return not busy

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("begin immediate")
        try:
            yield conn
        except BaseException:
            conn.execute("rollback")
            raise
        conn.execute("commit")

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
