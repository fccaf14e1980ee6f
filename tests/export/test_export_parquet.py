"""The parquet export: each table's rows of the chosen rollouts, one file per table, readable on their own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from eval_pipelines.reports.export import PARQUET_TABLES, export_results
from tests.export.conftest import SweepCatalog

pytestmark = pytest.mark.slow


def _query(sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _count(path: Path) -> int:
    return int(_query(f"select count(*) from read_parquet('{path}')")[0][0])


def test_every_table_is_copied_whole_for_the_sweep(sweep_catalog: SweepCatalog, tmp_path: Path) -> None:
    summary = export_results(sweep_catalog.db, tmp_path / "all", "parquet")
    assert [p.name for p in summary.files] == [f"{table}.parquet" for table in PARQUET_TABLES]
    for path in summary.files:
        table = path.stem
        (expected,) = sweep_catalog.rows(f"select count(*) as n from {table}")
        assert _count(path) == expected["n"], table
    assert summary.rollouts == _count(tmp_path / "all" / "rollouts.parquet") > 0
    assert _count(tmp_path / "all" / "messages.parquet") > 0


def test_filters_narrow_every_table(sweep_catalog: SweepCatalog, tmp_path: Path) -> None:
    out = tmp_path / "oracle"
    export_results(sweep_catalog.db, out, "parquet", model_name="sim-oracle", scenario_id="email_ops:1.0.0")
    chosen = {
        r["rollout_id"]
        for r in sweep_catalog.rows(
            "select rollout_id from rollouts where model_name = 'sim-oracle' and scenario_id = 'email_ops:1.0.0'"
        )
    }
    for table in PARQUET_TABLES:
        if table == "tasks":
            rows = _query(f"select distinct scenario_id from read_parquet('{out / 'tasks.parquet'}')")
            assert rows == [("email_ops:1.0.0",)]
            continue
        ids = {r[0] for r in _query(f"select rollout_id from read_parquet('{out / table}.parquet')")}
        assert ids <= chosen, table
        (expected,) = sweep_catalog.rows(
            f"select count(*) as n from {table} where rollout_id in (select unnest(?::varchar[]))", [sorted(chosen)]
        )
        assert _count(out / f"{table}.parquet") == expected["n"], table
