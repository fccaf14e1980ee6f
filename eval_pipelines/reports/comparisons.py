"""Model comparisons as every surface shows them (CLI table, report, viewer): paired by task and epoch, sized by
the minimum detectable difference, against the sweep's `baseline_model` when it names one. Also the noise floor's
rows. Reads the catalog's `model_comparison` and `noise_floor` views."""

from __future__ import annotations

import re
from typing import Any

import duckdb

from eval_pipelines.inputs.paths import sweeps_dir
from eval_pipelines.inputs.sweeps import ConfigError, load_all_sweeps
from eval_pipelines.schemas.sweep import DEFAULT_DETECTABLE_DIFFERENCE
from eval_pipelines.warehouse.metrics.power import epochs_needed

#: `<name>-<YYYYMMDD>`, as `inputs.sweeps.default_sweep_id` names a sweep's runs.
_DATED_SWEEP_ID = re.compile(r"^(?P<name>.+)-\d{8}$")

_BY_BASELINE = """
select * from model_comparison
where sweep_id = ? and model_b = ?
order by scenario_id, diff desc, model_a
"""
#: Without a baseline, each unordered pair once, oriented so that diff >= 0 (A is the better model).
_EVERY_PAIR = """
select * from model_comparison
where sweep_id = ? and (diff > 0 or (diff = 0 and model_a < model_b))
order by scenario_id, diff desc, model_a, model_b
"""
_NOISE_FLOOR = "select * from noise_floor where sweep_id = ? order by scenario_id, model_name"


def baseline_for(sweep_id: str) -> str | None:
    """The `baseline_model` of the sweep config behind `sweep_id` (its name, or `<name>-<YYYYMMDD>`); None when
    the config names none or cannot be read here."""
    try:
        sweeps = load_all_sweeps(sweeps_dir())
    except (ConfigError, OSError):
        return None
    match = _DATED_SWEEP_ID.match(sweep_id)
    sweep = sweeps.get(sweep_id) or (sweeps.get(match["name"]) if match else None)
    return None if sweep is None else sweep.baseline_model


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cursor = con.execute(sql, params)
    names = [d[0] for d in cursor.description or []]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def comparison_rows(con: duckdb.DuckDBPyConnection, sweep_id: str, baseline: str | None = None) -> list[dict[str, Any]]:
    """`model_comparison` rows of a sweep: every other model against `baseline` (A = the other model, B = the
    baseline) when the baseline ran in the sweep, else each pair once, better model first."""
    if baseline is not None:
        rows = _rows(con, _BY_BASELINE, [sweep_id, baseline])
        if rows:
            return rows
    return _rows(con, _EVERY_PAIR, [sweep_id])


def noise_floor_rows(con: duckdb.DuckDBPyConnection, sweep_id: str) -> list[dict[str, Any]]:
    return _rows(con, _NOISE_FLOOR, [sweep_id])


def epochs_for(row: dict[str, Any], difference: float = DEFAULT_DETECTABLE_DIFFERENCE) -> int | None:
    """Epochs per task this comparison's tasks need to detect `difference` (the view's `epochs_needed` is for the
    default)."""
    if row.get("sigma2_within") is None or row.get("sigma2_between") is None or not row.get("n_tasks"):
        return None
    return epochs_needed(row["sigma2_between"], row["sigma2_within"], row["n_tasks"], difference)


def verdict(row: dict[str, Any]) -> str:
    """One sentence a reader can act on: the difference beside the smallest one this sweep could see."""
    diff, mdd = row.get("diff"), row.get("mdd")
    if diff is None:
        return "no paired tasks"
    if mdd is None:
        return f"diff {diff * 100:+.1f} pts; too few paired tasks to size"
    seen = "larger than" if abs(diff) >= mdd else "below"
    return f"diff {diff * 100:+.1f} pts, {seen} the smallest this sweep can see ({mdd * 100:.1f} pts)"
