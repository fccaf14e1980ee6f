"""Table copies for tools that read Parquet: DuckDB's COPY of the sweep's rows, table by table, without the
batching of the other formats since no row passes through Python."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from eval_pipelines.reports.export.output import ExportError, ExportSummary

#: Tables (and the `rollout_scores` view) copied by the parquet export, in this order.
PARQUET_TABLES = (
    "rollouts",
    "rollout_scores",
    "rollout_attempts",
    "messages",
    "tool_calls",
    "state_diffs",
    "verifications",
    "judgements",
    "tasks",
)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def export_parquet(
    con: duckdb.DuckDBPyConnection, sweep: str, model_name: str | None, scenario_id: str | None, out: Path
) -> ExportSummary:
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out} is a file; parquet writes one file per table into a directory")
    out.mkdir(parents=True, exist_ok=True)
    # COPY takes no bound parameters, so the filter is inlined as quoted literals.
    selected = " and ".join(
        [
            f"sweep_id = {_literal(sweep)}",
            *([f"model_name = {_literal(model_name)}"] if model_name else []),
            *([f"scenario_id = {_literal(scenario_id)}"] if scenario_id else []),
        ]
    )
    by_rollout = f"sweep_id = {_literal(sweep)} and rollout_id in (select rollout_id from rollouts where {selected})"
    filters = {
        "rollouts": selected,
        "rollout_scores": selected,
        "tasks": f"scenario_id in (select distinct scenario_id from rollouts where {selected})",
    }
    present = {str(r[0]) for r in con.execute("select table_name from information_schema.tables").fetchall()}
    files: list[Path] = []
    copied: dict[str, int] = {}
    for table in PARQUET_TABLES:
        if table not in present:
            continue  # a catalog built before the table existed
        target = out / f"{table}.parquet"
        tmp = target.with_name(f".{target.name}.tmp")
        query = f"select * from {table} where {filters.get(table, by_rollout)}"
        try:
            row = con.execute(f"copy ({query}) to {_literal(str(tmp))} (format parquet)").fetchone()
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        copied[table] = int(row[0]) if row else 0
        files.append(target)
    return ExportSummary(sweep, "parquet", files, copied.get("rollouts", 0))
