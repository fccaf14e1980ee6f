"""What a report shows, read from the catalog's metric views for one sweep."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from eval_pipelines.lib.suggest import did_you_mean
from eval_pipelines.reports.comparisons import baseline_for, comparison_rows, noise_floor_rows
from eval_pipelines.reports.judges import JudgeCalibration, load_judge_calibration
from eval_pipelines.warehouse.catalog import connect_read_only

SIMULATED_SUFFIX = " (simulated)"

#: The most recently started sweep: sweep ids are free text, so their order says nothing about time.
_LATEST_SWEEP = """
select sweep_id
from rollouts
group by sweep_id
order by max(created_at) desc nulls last, sweep_id desc
limit 1
"""
_SWEEPS = "select distinct sweep_id from rollouts order by sweep_id"


class ReportError(Exception):
    """The catalog cannot give a report: it is missing, has no rollouts, or lacks the requested sweep."""


#: How every table shows a NULL cost: a model without a known price, never 0, which would read as free.
UNKNOWN_COST = "unknown"


def model_label(model_name: str, is_simulated: bool | None) -> str:
    """How a model is named in every chart and table: simulated models never pass for real ones."""
    return f"{model_name}{SIMULATED_SUFFIX}" if is_simulated else model_name


@dataclass(frozen=True)
class ReportData:
    sweep_id: str
    #: scenario_model_metrics rows, by scenario then model.
    groups: list[dict[str, Any]]
    #: model_metrics rows (all scenarios of a model together).
    models: list[dict[str, Any]]
    #: pass_at_k rows, by scenario, model, k.
    pass_at_k: list[dict[str, Any]]
    #: task_metrics rows, by scenario, task, model.
    tasks: list[dict[str, Any]]
    #: model_comparison rows: each model against the sweep's baseline_model (B) when it names one, else one per
    #: unordered pair, oriented so that diff >= 0 (A is the better model).
    comparisons: list[dict[str, Any]]
    #: judge_calibration rows (flagged judges first) and each judge's disagreeing rollouts.
    judges: JudgeCalibration = field(default_factory=JudgeCalibration)
    #: The sweep config's baseline_model, when it names one (every comparison is then against it).
    baseline: str | None = None
    #: noise_floor rows, by scenario then model.
    noise_floor: list[dict[str, Any]] = field(default_factory=list)

    @property
    def scenarios(self) -> list[str]:
        return sorted({row["scenario_id"] for row in self.groups})

    @property
    def model_labels(self) -> dict[str, str]:
        """model_name -> label, in a stable order (by name), shared by every chart so colours match."""
        simulated: dict[str, bool] = {}
        for row in self.groups:
            simulated[row["model_name"]] = simulated.get(row["model_name"], False) or bool(row["is_simulated"])
        return {name: model_label(name, simulated[name]) for name in sorted(simulated)}


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cursor = con.execute(sql, params)
    names = [d[0] for d in cursor.description or []]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def latest_sweep(con: duckdb.DuckDBPyConnection) -> str | None:
    row = con.execute(_LATEST_SWEEP).fetchone()
    return None if row is None else str(row[0])


def resolve_sweep(con: duckdb.DuckDBPyConnection, sweep_id: str | None) -> str:
    if sweep_id is None:
        latest = latest_sweep(con)
        if latest is None:
            raise ReportError("the catalog has no rollouts yet; run `eval-pipelines sweep` first")
        return latest
    known = [str(r[0]) for r in con.execute(_SWEEPS).fetchall()]
    if sweep_id not in known:
        raise ReportError(f"unknown sweep {sweep_id!r}; sweeps in the catalog: {known}{did_you_mean(sweep_id, known)}")
    return sweep_id


def open_catalog(duckdb_path: Path) -> duckdb.DuckDBPyConnection:
    path = Path(duckdb_path)
    if not path.is_file():
        raise ReportError(f"{path}: no catalog yet; run `eval-pipelines sweep` first")
    con = connect_read_only(path)
    # DuckDB draws its own bar on slow queries; the caller's ProgressReporter is the one the user should see.
    con.execute("set enable_progress_bar = false")
    return con


def load_report_data(duckdb_path: Path, sweep_id: str | None = None) -> ReportData:
    con = open_catalog(duckdb_path)
    try:
        sweep = resolve_sweep(con, sweep_id)
        groups = _rows(
            con, "select * from scenario_model_metrics where sweep_id = ? order by scenario_id, model_name", [sweep]
        )
        if not groups:
            raise ReportError(f"sweep {sweep!r} has no rollouts")
        _add_malformed_output_counts(con, sweep, groups)
        add_simulator_error_counts(con, sweep, groups)
        baseline = baseline_for(sweep)
        return ReportData(
            sweep_id=sweep,
            groups=groups,
            models=_rows(con, "select * from model_metrics where sweep_id = ? order by model_name", [sweep]),
            pass_at_k=_rows(
                con, "select * from pass_at_k where sweep_id = ? order by scenario_id, model_name, k", [sweep]
            ),
            tasks=_rows(
                con, "select * from task_metrics where sweep_id = ? order by scenario_id, task_id, model_name", [sweep]
            ),
            comparisons=comparison_rows(con, sweep, baseline),
            baseline=baseline,
            noise_floor=noise_floor_rows(con, sweep),
            judges=load_judge_calibration(con, sweep),
        )
    finally:
        con.close()


_MALFORMED_OUTPUT_SQL = """
with flagged as (
    select scenario, scenario_id, model_name, count(*) filter (where final_answer_is_tool_call) as text_tool_calls
    from rollouts where sweep_id = ? group by all
), bad as (
    select scenario, model_name, count(*) as bad_arguments
    from tool_calls where sweep_id = ? and arguments_error is not null group by all
)
select f.scenario_id, f.model_name, f.text_tool_calls, coalesce(b.bad_arguments, 0) as bad_arguments
from flagged as f left join bad as b using (scenario, model_name)
"""


def _add_malformed_output_counts(con: duckdb.DuckDBPyConnection, sweep: str, groups: list[dict[str, Any]]) -> None:
    """Per scenario x model: final answers that are tool calls written as text, and tool calls whose arguments
    were not JSON. Both say the endpoint or the model's output format failed, which a pass rate hides."""
    try:
        rows = _rows(con, _MALFORMED_OUTPUT_SQL, [sweep, sweep])
    except duckdb.BinderException:  # a warehouse written before these columns existed
        rows = []
    counts = {(row["scenario_id"], row["model_name"]): row for row in rows}
    for group in groups:
        found = counts.get((group["scenario_id"], group["model_name"]), {})
        group["text_tool_calls"] = int(found.get("text_tool_calls") or 0)
        group["bad_arguments"] = int(found.get("bad_arguments") or 0)


def add_simulator_error_counts(con: duckdb.DuckDBPyConnection, sweep: str, groups: list[dict[str, Any]]) -> None:
    """Per scenario x model: the errors that are simulators gone off script (`simulator_fidelity`), shown within
    the error count, so a reader sees how much of it the NPCs and simulated users caused."""
    try:
        rows = _rows(
            con,
            "select scenario_id, model_name, n_simulator_errors from simulator_fidelity where sweep_id = ?",
            [sweep],
        )
    except duckdb.CatalogException:  # a catalog built before the view existed
        rows = []
    counts = {(row["scenario_id"], row["model_name"]): int(row["n_simulator_errors"] or 0) for row in rows}
    for group in groups:
        group["simulator_errors"] = counts.get((group["scenario_id"], group["model_name"]), 0)


def simulator_error_note(row: Mapping[str, Any]) -> str:
    """'; k simulator off script' inside an error count's parentheses, or '' when no simulator strayed."""
    count = row.get("simulator_errors") or 0
    return f"; {count} simulator off script" if count else ""


def pass_rate_rows(duckdb_path: Path, sweep_id: str | None = None) -> tuple[str | None, list[dict[str, Any]]]:
    """(sweep, scenario_model_metrics rows) without the rest of a report, for the Dagster metadata.

    (None, []) when no sweep is named and the catalog has no rollouts yet: not an error for a fresh warehouse.
    """
    con = open_catalog(duckdb_path)
    try:
        sweep = resolve_sweep(con, sweep_id) if sweep_id is not None else latest_sweep(con)
        if sweep is None:
            return None, []
        rows = _rows(
            con, "select * from scenario_model_metrics where sweep_id = ? order by scenario_id, model_name", [sweep]
        )
        add_simulator_error_counts(con, sweep, rows)
        return sweep, rows
    finally:
        con.close()
