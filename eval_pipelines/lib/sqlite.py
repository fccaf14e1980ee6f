"""A SQLite database that several threads and processes share safely: one connection per thread, WAL, a busy
timeout so writers take turns instead of failing, and explicit `begin immediate` transactions."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
            conn.execute("pragma journal_mode=wal")
            conn.execute("pragma synchronous=normal")
            conn.execute("pragma foreign_keys=on")
            conn.execute("pragma busy_timeout=30000")
            self._local.conn = conn
        return conn

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
