"""A synthetic warehouse of benchmark rollouts (rollouts, our verdicts, tasks with `benchmark` set, traces), written
through the warehouse's own schemas and writers, for the parity and benchmark-metric tests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.warehouse.rows import build_table, tasks_table
from eval_pipelines.warehouse.store import Warehouse
from eval_pipelines.warehouse.tables import ROLLOUTS, VERIFICATIONS

VERIFIED_AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
VERIFIER = "benchmark_grader"


@dataclass(frozen=True)
class SyntheticRollout:
    rollout_id: str
    scenario_id: str
    task_id: str
    #: passed, failed (both verified) or error (an infrastructure error: no verdict).
    outcome: str
    model_name: str = "gpt-x"
    sweep_id: str = "sweep-bench"
    #: Our verifier's per-component verdicts, written under `components` in its output.
    components: dict[str, bool] = field(default_factory=dict)
    verifier_version: str = "v1"


def scenario_key(scenario_id: str) -> str:
    return scenario_id.replace(":", "_")


def task(task_id: str, benchmark: str | None) -> Task:
    return Task(task_id=task_id, name=task_id, description=f"do {task_id}", benchmark=benchmark)


def write_sweep(
    root: Path,
    rollouts: Sequence[SyntheticRollout],
    *,
    benchmark_of: dict[str, str | None],
    traces_dir: Path | None = None,
) -> None:
    """Write the rollouts, one verdict each for the verified ones, and the tasks of every scenario (`benchmark_of`:
    scenario id -> the benchmark its tasks carry). With `traces_dir`, each rollout gets a stored trace there."""
    warehouse = Warehouse(root)
    by_partition: dict[tuple[str, str, str, str], list[SyntheticRollout]] = {}
    for rollout in rollouts:
        key = (rollout.model_name, scenario_key(rollout.scenario_id), rollout.sweep_id, rollout.verifier_version)
        by_partition.setdefault(key, []).append(rollout)
    for (model_key, scen_key, sweep_id, version), mine in by_partition.items():
        stem = f"{sweep_id}-{version}"
        warehouse.write(
            ROLLOUTS.name,
            _rollouts_table(mine, traces_dir),
            model_key=model_key,
            scenario_key=scen_key,
            file_stem=stem,
        )
        verified = [r for r in mine if r.outcome != "error"]
        if verified:
            warehouse.write(
                VERIFICATIONS.name,
                _verifications_table(verified),
                model_key=model_key,
                scenario_key=scen_key,
                file_stem=f"verifiers-{stem}",
            )
    for scenario_id, benchmark in benchmark_of.items():
        task_ids = sorted({r.task_id for r in rollouts if r.scenario_id == scenario_id})
        warehouse.write_tasks(
            tasks_table(scenario_id, [task(t, benchmark) for t in task_ids]), scenario_key(scenario_id)
        )


def _trace(rollout: SyntheticRollout, traces_dir: Path) -> str:
    artifacts = RunArtifacts(task_id=rollout.task_id, task=f"do {rollout.task_id}", model=rollout.model_name)
    artifacts.record_message("user", f"do {rollout.task_id}")
    artifacts.record_message("assistant", f"done ({rollout.rollout_id})")
    traces_dir.mkdir(parents=True, exist_ok=True)
    path = traces_dir / f"{rollout.rollout_id}.json"
    path.write_text(artifacts.model_dump_json())
    return str(path)


def _rollouts_table(rollouts: Sequence[SyntheticRollout], traces_dir: Path | None) -> Any:
    columns: dict[str, list[Any]] = {name: [] for name in ROLLOUTS.column_names}
    for index, rollout in enumerate(rollouts):
        error = rollout.outcome == "error"
        values: dict[str, Any] = {
            "sweep_id": rollout.sweep_id,
            "run_id": f"run-{rollout.model_name}",
            "run_name": f"{rollout.sweep_id}-{rollout.model_name}",
            "rollout_id": rollout.rollout_id,
            "rollout_index": index,
            "scenario_id": rollout.scenario_id,
            "task_id": rollout.task_id,
            "model_name": rollout.model_name,
            "is_simulated": False,
            "max_steps": 20,
            "status": "failed" if error else "completed",
            "error_class": "model_endpoint" if error else None,
            "termination_reason": "agent_error" if error else "final_response",
            "success": rollout.outcome == "passed",
            "created_at": VERIFIED_AT,
            "artifacts_path": _trace(rollout, traces_dir) if traces_dir is not None else None,
        }
        for name in columns:
            columns[name].append(values.get(name))
    return build_table(ROLLOUTS, columns)


def _verifications_table(rollouts: Sequence[SyntheticRollout]) -> Any:
    columns: dict[str, list[Any]] = {name: [] for name in VERIFICATIONS.column_names}
    for rollout in rollouts:
        passed = rollout.outcome == "passed"
        values: dict[str, Any] = {
            "sweep_id": rollout.sweep_id,
            "run_id": f"run-{rollout.model_name}",
            "rollout_id": rollout.rollout_id,
            "scenario_id": rollout.scenario_id,
            "task_id": rollout.task_id,
            "model_name": rollout.model_name,
            "verifier": VERIFIER,
            "verifier_version": rollout.verifier_version,
            "kind": "programmatic",
            "success": passed,
            "is_error": False,
            "reward": 1.0 if passed else 0.0,
            "message": "ok" if passed else "mismatch",
            "output_json": json.dumps({"components": rollout.components}),
            "verified_at": VERIFIED_AT,
        }
        for name in columns:
            columns[name].append(values[name])
    return build_table(VERIFICATIONS, columns)
