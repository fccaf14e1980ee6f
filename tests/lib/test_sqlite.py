"""Two processes opening one new database together: the second waits for the first instead of failing."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from eval_pipelines.lib.sqlite import WAL_SIZE_LIMIT_BYTES, SqliteDatabase

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


def test_a_checkpoint_empties_the_log_and_keeps_every_row(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    database = SqliteDatabase(path, "create table if not exists blobs (id integer primary key, body blob)")
    with database._tx() as db:
        for _ in range(300):
            db.execute("insert into blobs (body) values (randomblob(4000))")
    wal = path.with_name(path.name + "-wal")
    assert wal.stat().st_size > 1_000_000  # 300 pages of 4 KB, not yet in the database file

    assert database.checkpoint() is True

    assert wal.stat().st_size == 0
    assert database._conn().execute("select count(*) from blobs").fetchone()[0] == 300
    reopened = sqlite3.connect(path)
    assert reopened.execute("select count(*) from blobs").fetchone()[0] == 300
    reopened.close()


def test_the_log_is_cut_back_after_a_checkpoint_between_checkpoints_too(tmp_path: Path) -> None:
    """SQLite's own checkpoints (every 1,000 pages) reuse the log without shrinking it; the size limit cuts
    it back, so an open store's log stays near the limit instead of at its largest size ever."""
    path = tmp_path / "store.sqlite3"
    database = SqliteDatabase(path, "create table if not exists blobs (id integer primary key, body blob)")
    for _ in range(30):  # 30 transactions of 100 pages: SQLite checkpoints by itself along the way
        with database._tx() as db:
            for _ in range(100):
                db.execute("insert into blobs (body) values (randomblob(4000))")
    database._conn().execute("pragma wal_checkpoint(passive)")
    with database._tx() as db:  # the next write restarts the log and truncates it to the limit
        db.execute("insert into blobs (body) values (randomblob(10))")
    wal = path.with_name(path.name + "-wal")
    assert wal.stat().st_size <= WAL_SIZE_LIMIT_BYTES


def test_a_checkpoint_a_reader_holds_up_gives_up_soon_and_a_later_one_completes(tmp_path: Path) -> None:
    """A service answering reads must not hold a finished run for the connection's 30-second busy wait."""
    path = tmp_path / "store.sqlite3"
    database = SqliteDatabase(path, "create table if not exists blobs (id integer primary key, body blob)")
    with database._tx() as db:
        db.execute("insert into blobs (body) values (randomblob(4000))")
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("begin")
    assert reader.execute("select count(*) from blobs").fetchone()[0] == 1  # holds this snapshot
    with database._tx() as db:
        db.execute("insert into blobs (body) values (randomblob(4000))")

    started = time.monotonic()
    assert database.checkpoint(wait_seconds=0.2) is False
    assert time.monotonic() - started < 5

    reader.execute("commit")
    reader.close()
    assert database.checkpoint() is True
    assert path.with_name(path.name + "-wal").stat().st_size == 0
    # The connection's own busy wait is back to its normal length.
    assert database._conn().execute("pragma busy_timeout").fetchone()[0] == 30_000
