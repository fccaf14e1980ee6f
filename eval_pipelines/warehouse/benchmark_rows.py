"""What `eval-pipelines parity` reads from the warehouse (a sweep's benchmark rollouts with our latest verdicts)
and the rows it writes (`parity`)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_pipelines.warehouse.catalog import in_memory_catalog
from eval_pipelines.warehouse.metrics import ROLLOUT_SCORES, VERIFICATIONS_LATEST
from eval_pipelines.warehouse.rows import ColumnTable, build_table
from eval_pipelines.warehouse.tables import PARITY

#: Outcomes (`rollout_scores.outcome`) that carry a verdict of ours to compare.
SCORED_OUTCOMES = ("passed", "failed")


@dataclass(frozen=True)
class BenchmarkRollout:
    """A rollout of a benchmark task in one sweep, with our verdict on it."""

    rollout_id: str
    sweep_id: str
    benchmark: str
    scenario_id: str
    task_id: str
    model_name: str
    #: Hive partition keys of the rollout's files.
    model: str
    scenario: str
    artifacts_path: str | None
    #: `rollout_scores.outcome`: passed, failed, error, or None (not verified yet).
    outcome: str | None
    error_class: str | None
    ours_reward: float | None
    #: Our latest programmatic verdicts' outputs (parsed `output_json`), one per verifier.
    ours_outputs: tuple[dict[str, Any], ...] = ()
    #: The verifier versions and times of those verdicts: what a grading run compared against.
    ours_verdict_key: str = ""

    @property
    def scored(self) -> bool:
        return self.outcome in SCORED_OUTCOMES

    @property
    def ours_success(self) -> bool:
        return self.outcome == "passed"


_ROLLOUTS_SQL = """
with bench as (
    select distinct scenario_id, task_id, benchmark from tasks where benchmark is not null
)
select
    s.rollout_id, s.sweep_id, b.benchmark, s.scenario_id, s.task_id, s.model_name, s.model, s.scenario,
    r.artifacts_path, s.outcome, s.error_class, s.reward
from rollout_scores as s
join bench as b on b.scenario_id = s.scenario_id and b.task_id = s.task_id
join rollouts as r on r.rollout_id = s.rollout_id
where s.sweep_id = ?
order by b.benchmark, s.scenario_id, s.task_id, s.rollout_id
"""
_VERDICTS_SQL = """
select v.rollout_id, v.verifier, v.verifier_version, v.verified_at, v.output_json
from verifications_latest as v
where v.kind = 'programmatic' and v.sweep_id = ?
order by v.rollout_id, v.verifier
"""


def _parsed(output_json: str | None) -> dict[str, Any]:
    try:
        parsed = json.loads(output_json or "{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def benchmark_rollouts(warehouse_root: Path, sweep_id: str) -> list[BenchmarkRollout]:
    """Every rollout of `sweep_id` whose task a benchmark adapter made, with our latest verdicts, read from the
    Parquet files as they are now (by the catalog's own `rollout_scores` rule)."""
    con = in_memory_catalog(warehouse_root, (VERIFICATIONS_LATEST, ROLLOUT_SCORES))
    try:
        rows = con.execute(_ROLLOUTS_SQL, [sweep_id]).fetchall()
        verdicts = con.execute(_VERDICTS_SQL, [sweep_id]).fetchall() if rows else []
    finally:
        con.close()
    outputs: dict[str, list[dict[str, Any]]] = {}
    keys: dict[str, list[str]] = {}
    for rollout_id, verifier, version, verified_at, output_json in verdicts:
        outputs.setdefault(rollout_id, []).append(_parsed(output_json))
        keys.setdefault(rollout_id, []).append(f"{verifier}@{version}@{verified_at.isoformat()}")
    found: list[BenchmarkRollout] = []
    for (
        rollout_id,
        sweep,
        benchmark,
        scenario_id,
        task_id,
        model_name,
        model,
        scenario,
        path,
        outcome,
        error,
        reward,
    ) in rows:
        found.append(
            BenchmarkRollout(
                rollout_id=rollout_id,
                sweep_id=sweep,
                benchmark=benchmark,
                scenario_id=scenario_id,
                task_id=task_id,
                model_name=model_name,
                model=model,
                scenario=scenario,
                artifacts_path=path,
                outcome=outcome,
                error_class=error,
                ours_reward=reward,
                ours_outputs=tuple(outputs.get(rollout_id, ())),
                ours_verdict_key="|".join(keys.get(rollout_id, ())),
            )
        )
    return found


def stored_sweep_ids(warehouse_root: Path) -> list[str]:
    """Every sweep id with rollouts in the warehouse, sorted."""
    con = in_memory_catalog(warehouse_root, ())
    try:
        rows = con.execute("select distinct sweep_id from rollouts where sweep_id is not null order by 1").fetchall()
    finally:
        con.close()
    return [str(r[0]) for r in rows]


@dataclass(frozen=True)
class ParityRecord:
    """One rollout's comparison, as the `parity` table stores it."""

    rollout: BenchmarkRollout
    benchmark: str
    upstream_success: bool
    upstream_reward: float
    agree: bool
    flips: list[str]
    deterministic_disagreement: bool
    upstream_message: str
    upstream_version: str
    grading_id: str
    graded_at: dt.datetime
    ours_components: dict[str, bool] = field(default_factory=dict)
    upstream_components: dict[str, bool] = field(default_factory=dict)


def parity_table(records: Sequence[ParityRecord]) -> ColumnTable:
    t: dict[str, list[Any]] = {name: [] for name in PARITY.column_names}
    for record in records:
        rollout = record.rollout
        t["sweep_id"].append(rollout.sweep_id)
        t["rollout_id"].append(rollout.rollout_id)
        t["benchmark"].append(record.benchmark)
        t["scenario_id"].append(rollout.scenario_id)
        t["task_id"].append(rollout.task_id)
        t["model_name"].append(rollout.model_name)
        t["ours_success"].append(rollout.ours_success)
        t["ours_reward"].append(rollout.ours_reward)
        t["upstream_success"].append(record.upstream_success)
        t["upstream_reward"].append(record.upstream_reward)
        t["agree"].append(record.agree)
        t["flips"].append(list(record.flips))
        t["deterministic_disagreement"].append(record.deterministic_disagreement)
        t["ours_components_json"].append(json.dumps(record.ours_components, sort_keys=True))
        t["upstream_components_json"].append(json.dumps(record.upstream_components, sort_keys=True))
        t["upstream_message"].append(record.upstream_message)
        t["upstream_version"].append(record.upstream_version)
        t["grading_id"].append(record.grading_id)
        t["graded_at"].append(record.graded_at)
    return build_table(PARITY, t)
