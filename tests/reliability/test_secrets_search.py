"""The canary search itself: it must find a secret wherever a format hides it from a plain byte search."""

from __future__ import annotations

import gzip
import sqlite3
import zipfile
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from tests.reliability.support_canary import find_secrets

CANARY = "sk-canary-search-4e1f0b7d9a"


def test_search_finds_secrets_in_every_format_it_claims(tmp_path: Path) -> None:
    # A zstd-compressed trace column, like the warehouse writes: the bytes do not hold the string.
    messages = [f"message {i}: the agent emailed the team about the weekly sync" for i in range(200)]
    messages[7] += f" key={CANARY}"
    pq.write_table(
        pa.table({"content": messages}), tmp_path / "rows.parquet", compression="zstd", write_statistics=False
    )
    raw = (tmp_path / "rows.parquet").read_bytes().decode("latin-1")
    assert CANARY not in raw, "the Parquet case no longer exercises decoding"
    con = sqlite3.connect(tmp_path / "store.sqlite3")
    con.execute("create table t (v text)")
    con.execute("insert into t values (?)", (CANARY,))
    con.commit()
    con.close()
    db = duckdb.connect(str(tmp_path / "catalog.duckdb"))
    db.execute("create table t as select ? as v", [CANARY])
    db.close()
    with zipfile.ZipFile(tmp_path / "bundle.zip", "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("inner.txt", CANARY * 20)
    (tmp_path / "log.gz").write_bytes(gzip.compress(CANARY.encode() * 20))
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "plain.log").write_text(f"Authorization: Bearer {CANARY}\n")

    hits = find_secrets([tmp_path], [CANARY])
    found = {hit.split(" (", 1)[0].rsplit("/", 1)[-1] for hit in hits}
    assert found == {"rows.parquet", "store.sqlite3", "catalog.duckdb", "bundle.zip", "log.gz", "plain.log"}
    assert all(CANARY not in hit for hit in hits)  # a report of a leak must not repeat the secret
    assert find_secrets([tmp_path], ["sk-canary-not-there"]) == []
