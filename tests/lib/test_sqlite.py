"""Two processes opening one new database together: the second waits for the first instead of failing."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from eval_pipelines.lib.sqlite import SqliteDatabase

SCHEMA = "create table if not exists items (id integer primary key)"


def test_opening_a_database_another_connection_is_writing_waits_for_it(tmp_path: Path) -> None:
    """On a fresh file (rollback journal) SQLite refuses the switch to WAL at once, without its busy wait,
    while another connection holds a write lock: opening must retry, not raise `database is locked`."""
    path = tmp_path / "shared.sqlite3"
    writing, released = threading.Event(), threading.Event()

    def writer() -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute(SCHEMA)
        conn.execute("begin")
        conn.execute("insert into items default values")
        writing.set()
        time.sleep(0.5)
        conn.execute("commit")
        conn.close()
        released.set()

    thread = threading.Thread(target=writer)
    thread.start()
    writing.wait(5)
    database = SqliteDatabase(path, SCHEMA)  # raised `database is locked` at once before the retry
    thread.join(5)
    assert released.is_set()
    mode = database._conn().execute("pragma journal_mode").fetchone()[0]
    count = database._conn().execute("select count(*) from items").fetchone()[0]
    assert (mode, count) == ("wal", 1)
