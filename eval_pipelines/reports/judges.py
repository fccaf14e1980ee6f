"""Graders graded, as the report and the viewer read them: one sweep's `judge_calibration` rows (flagged judges
first) and each judge's disagreeing rollouts from `judge_calibration_rollouts`. The report's section is
`judge_section.py`; the viewer's page is `viewer/judges.py`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb

from eval_pipelines.schemas.judging import FLAG_KAPPA_BELOW_THRESHOLD, FLAG_KAPPA_UNDEFINED

#: A judge is (judge_kind, judge, judge_model); with the scenario, one row of `judge_calibration`.
JudgeKey = tuple[str, str, str]

_CALIBRATION_SQL = """
select *
from judge_calibration
where sweep_id = ?
order by flagged desc, scenario_id, judge_kind, judge, judge_model
"""
_DISAGREEMENTS_SQL = """
select *
from judge_calibration_rollouts
where sweep_id = ? and not agree
order by scenario_id, judge_kind, judge, judge_model, model_name, task_id, rollout_id
"""


def judge_key(row: dict[str, Any]) -> JudgeKey:
    return (str(row["judge_kind"]), str(row["judge"]), str(row["judge_model"]))


@dataclass(frozen=True)
class JudgeCalibration:
    """One sweep's calibration rows (flagged first) and, per (scenario, judge), its disagreeing rollouts."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    disagreements: dict[tuple[str, JudgeKey], list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def flagged(self) -> list[dict[str, Any]]:
        return [row for row in self.rows if row["flagged"]]

    def rollouts(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        return self.disagreements.get((row["scenario_id"], judge_key(row)), [])

    def flags(self, scenario_id: str) -> dict[JudgeKey, dict[str, Any]]:
        """The calibration of each judge in one scenario, for marking its scores where they are shown."""
        return {judge_key(row): row for row in self.rows if row["scenario_id"] == scenario_id}


def _dicts(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description or []]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def load_judge_calibration(con: duckdb.DuckDBPyConnection, sweep_id: str) -> JudgeCalibration:
    """The sweep's calibration; empty for a catalog built before the views existed."""
    try:
        rows = _dicts(con.execute(_CALIBRATION_SQL, [sweep_id]))
        disagreeing = _dicts(con.execute(_DISAGREEMENTS_SQL, [sweep_id]))
    except duckdb.CatalogException:
        return JudgeCalibration()
    disagreements: dict[tuple[str, JudgeKey], list[dict[str, Any]]] = {}
    for rollout in disagreeing:
        disagreements.setdefault((rollout["scenario_id"], judge_key(rollout)), []).append(rollout)
    return JudgeCalibration(rows=rows, disagreements=disagreements)


def flag_text(row: dict[str, Any]) -> str:
    """Why a judge is flagged, in words ('' when it is not)."""
    if not row.get("flagged"):
        return ""
    if row.get("flag_reason") == FLAG_KAPPA_BELOW_THRESHOLD:
        return f"flagged: kappa {row['kappa']:.2f} < {row['min_kappa']:g}"
    if row.get("flag_reason") == FLAG_KAPPA_UNDEFINED:
        return "flagged: kappa undefined (the verifiers or the judge pass all or none)"
    return "flagged"


def rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
