"""The DuckDB catalog: a small database file of views over the Parquet warehouse, for analysts.

The file holds no data, only views, so it is rebuilt from scratch each time into a temp file and swapped in
with `os.replace`. An analyst's read-only connection keeps the old file (its inode) open and never blocks the
rebuild; the next connection sees the new views. Within one Python process DuckDB caches an open database
per path, so a process must close its old connections before it can see a rebuilt catalog.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from eval_pipelines.warehouse.judge_calibration import set_sweep_settings
from eval_pipelines.warehouse.metrics import METRIC_VIEWS, ROLLOUT_SCORES, VERIFICATIONS_LATEST
from eval_pipelines.warehouse.store import PARQUET_SUFFIX, Warehouse
from eval_pipelines.warehouse.tables import (
    ROLLOUTS,
    TABLE_SPECS,
    VERIFICATIONS,
    ColumnSpec,
    ColumnType,
    TableSpec,
    table_spec,
)
from eval_pipelines.warehouse.views import MetricView


@dataclass(frozen=True)
class CatalogSummary:
    path: Path
    views: tuple[str, ...]
    row_counts: dict[str, int] = field(default_factory=dict)


def duckdb_type(column_type: ColumnType) -> str:
    """The DuckDB type `read_parquet` yields for a column of this type (used for the empty views)."""
    return column_type.value


def _quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def table_glob(root: Path, spec: TableSpec) -> str:
    parts = ["*"] * len(spec.partition_by) + [f"*{PARQUET_SUFFIX}"]
    return "/".join([str(root / spec.name), *parts])


def create_table_view(
    con: duckdb.DuckDBPyConnection, root: Path, spec: TableSpec, has_files: bool, *, glob: str | None = None
) -> None:
    """Create the view of one table (see `table_view_sql`). A nullable column that none of the files has yet (they
    were written before it existed) is NULL in the view, so the metric views that read it work on old data."""
    con.execute(table_view_sql(root, spec, has_files, glob=glob))
    if not has_files:
        return
    present = {str(row[0]) for row in con.execute(f"describe {spec.name}").fetchall()}
    missing = [c for c in spec.columns if c.nullable and c.name not in present]
    if missing:
        con.execute(table_view_sql(root, spec, has_files, glob=glob, missing=missing))


def table_view_sql(
    root: Path, spec: TableSpec, has_files: bool, *, glob: str | None = None, missing: Sequence[ColumnSpec] = ()
) -> str:
    """The view of a table over the whole warehouse at `root`, or over the files matching `glob` in the folder
    `root` (one partition: its Hive columns still come from the path); `missing` columns are added as NULL."""
    if has_files:
        # Hive values are pinned to VARCHAR: DuckDB would otherwise read `scenario=2024` as BIGINT and a
        # partition key like `1.5` as a number.
        hive_types = ", ".join(f"{_quote_literal(c)}: 'VARCHAR'" for c in spec.partition_by)
        source = (
            f"read_parquet({_quote_literal(table_glob(root, spec) if glob is None else str(root / glob))}, "
            "hive_partitioning = true, "
            f"hive_types = {{{hive_types}}}, union_by_name = true)"
        )
        added = "".join(f", cast(null as {duckdb_type(f.type)}) as {_quote_ident(f.name)}" for f in missing)
        return f"create or replace view {spec.name} as select *{added} from {source}"
    # Same columns and types as the populated view, so queries written against a fresh warehouse keep working.
    casts = [f"cast(null as {duckdb_type(f.type)}) as {_quote_ident(f.name)}" for f in spec.columns]
    casts += [f"cast(null as VARCHAR) as {_quote_ident(c)}" for c in spec.partition_by]
    return f"create or replace view {spec.name} as select {', '.join(casts)} where false"


def _check_root(root: Path) -> None:
    # DuckDB's hive parsing turns any `key=value` folder on the path into a column, including ones above the
    # warehouse root, which would add phantom columns to every view.
    offending = [p for p in root.parts if "=" in p]
    if offending:
        raise ValueError(f"warehouse root {root} must not contain '=' in a folder name (found {offending})")


#: A sweep id's `min_judge_kappa` from its config (None: no config names it, the default applies).
JudgeKappaOf = Callable[[str], float | None]


def build_catalog(
    warehouse_root: Path, duckdb_path: Path, *, judge_min_kappa: JudgeKappaOf | None = None
) -> CatalogSummary:
    """(Re)build the catalog file at `duckdb_path` with one view per table and the metric views; `judge_min_kappa`
    gives each sweep's threshold to `sweep_settings` (without it, every sweep's is the default)."""
    root = Path(warehouse_root).resolve()
    _check_root(root)
    target = Path(duckdb_path).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    warehouse = Warehouse(root)
    # A fresh name per build: DuckDB caches open databases per path in-process, and two concurrent builds must
    # not write into the same temp file.
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    views: list[str] = []
    row_counts: dict[str, int] = {}
    try:
        con = duckdb.connect(str(tmp))
        try:
            for spec in TABLE_SPECS.values():
                create_table_view(con, root, spec, has_files=bool(warehouse.files(spec.name)))
                views.append(spec.name)
            if judge_min_kappa is not None:
                sweeps = [str(r[0]) for r in con.execute("select distinct sweep_id from rollouts").fetchall() if r[0]]
                set_sweep_settings(con, {s: k for s in sweeps if (k := judge_min_kappa(s)) is not None})
            for metric in METRIC_VIEWS:
                con.execute(metric.statement())
                views.append(metric.name)
            for name in TABLE_SPECS:
                row = con.execute(f"select count(*) from {name}").fetchone()
                row_counts[name] = int(row[0]) if row else 0
            con.execute("checkpoint")
        finally:
            con.close()
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}.wal").unlink(missing_ok=True)
    return CatalogSummary(path=target, views=tuple(views), row_counts=row_counts)


@dataclass(frozen=True)
class RolloutScore:
    """A rollout's row of `rollout_scores`: `outcome` passed/failed/error (None: running or not verified)."""

    outcome: str | None
    reward: float | None


def partition_scores(
    warehouse_root: Path, *, model_key: str, scenario_key: str, sweep_id: str
) -> dict[str, RolloutScore]:
    """rollout_id -> its score, for one sweep's rollouts of one partition, by the catalog's own SQL
    (`verifications_latest`, `rollout_scores`) over that partition's files: Python never restates the rule."""
    root = Path(warehouse_root).resolve()
    _check_root(root)
    warehouse = Warehouse(root)
    con = duckdb.connect()
    try:
        for name in (ROLLOUTS.name, VERIFICATIONS.name):
            spec = table_spec(name)
            files = warehouse.partition_files(name, model_key=model_key, scenario_key=scenario_key)
            folder = files[0].parent if files else root
            create_table_view(con, folder, spec, has_files=bool(files), glob=f"*{PARQUET_SUFFIX}")
        for metric in (VERIFICATIONS_LATEST, ROLLOUT_SCORES):
            con.execute(metric.statement())
        rows = con.execute(
            "select rollout_id, outcome, reward from rollout_scores where sweep_id = ?", [sweep_id]
        ).fetchall()
    finally:
        con.close()
    return {rollout_id: RolloutScore(outcome, reward) for rollout_id, outcome, reward in rows}


def in_memory_catalog(warehouse_root: Path, metrics: Sequence[MetricView]) -> duckdb.DuckDBPyConnection:
    """An in-memory connection with a view per table over the whole warehouse and the given metric views (in
    dependency order): for a query that must see the Parquet files as they are now, not the last catalog build."""
    root = Path(warehouse_root).resolve()
    _check_root(root)
    warehouse = Warehouse(root)
    con = duckdb.connect()
    try:
        for spec in TABLE_SPECS.values():
            create_table_view(con, root, spec, has_files=bool(warehouse.files(spec.name)))
        for metric in metrics:
            con.execute(metric.statement())
    except BaseException:
        con.close()
        raise
    return con


def connect_read_only(duckdb_path: Path) -> duckdb.DuckDBPyConnection:
    """How analysts (and tests) should open the catalog: read-only, so nothing can lock it."""
    return duckdb.connect(str(Path(duckdb_path).resolve()), read_only=True)
