"""Search everything a run left behind for a secret: files as raw bytes and as decoded values.

Compressed or binary formats can hide a string from a byte search, so each format is also decoded: Parquet
values (zstd pages), SQLite rows (the service, platform and Dagster stores), DuckDB base tables, zip members,
gzip streams and zstd frames (the stored rollout artifacts).
"""

from __future__ import annotations

import gzip
import sqlite3
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow.parquet as pq

from tests.support.stored_files import ZSTD_MAGIC, plain_bytes

SQLITE_HEADER = b"SQLite format 3\x00"


def _sqlite_text(path: Path) -> str:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute("select name from sqlite_master where type = 'table'")]
        return "\n".join(str(con.execute(f'select * from "{table}"').fetchall()) for table in tables)
    finally:
        con.close()


def _duckdb_text(path: Path) -> str:
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = con.execute(
            "select table_schema, table_name from information_schema.tables where table_type = 'BASE TABLE'"
        ).fetchall()
        return "\n".join(str(con.execute(f'select * from "{s}"."{t}"').fetchall()) for s, t in tables)
    finally:
        con.close()


def decoded_views(path: Path) -> Iterator[tuple[str, str]]:
    """(how, text) pairs for one file: its raw bytes, then every decoding that applies."""
    raw = path.read_bytes()
    yield "bytes", raw.decode("latin-1")
    if path.suffix == ".parquet":
        yield "parquet values", str(pq.read_table(path).to_pylist())
    elif raw.startswith(SQLITE_HEADER):
        yield "sqlite rows", _sqlite_text(path)
    elif path.suffix == ".duckdb":
        yield "duckdb tables", _duckdb_text(path)
    elif zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                yield f"zip member {name}", archive.read(name).decode("latin-1")
    elif raw[:2] == b"\x1f\x8b":
        yield "gzip", gzip.decompress(raw).decode("latin-1")
    elif raw.startswith(ZSTD_MAGIC):
        yield "zstd", plain_bytes(path).decode("latin-1")


def files_under(roots: Iterable[Path]) -> list[Path]:
    return sorted(p for root in roots if root.exists() for p in root.rglob("*") if p.is_file())


def find_secrets(roots: Iterable[Path], secrets: Iterable[str]) -> list[str]:
    """Every (file, decoding, secret) hit, as readable strings; empty when nothing leaked."""
    wanted = [s for s in secrets if s]
    hits: list[str] = []
    for path in files_under(roots):
        for how, text in decoded_views(path):
            hits.extend(f"{path} ({how}): {secret[:12]}..." for secret in wanted if secret in text)
    return hits
