"""Writes small warehouses with exactly the outcomes a test asks for, through the real Warehouse writer and the
registered schemas, and builds their catalog. Shared by the metric tests (tests/warehouse/test_wh_metrics_*)
and the report tests."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from eval_pipelines.warehouse.catalog import build_catalog
from eval_pipelines.warehouse.rows import rows_table
from eval_pipelines.warehouse.store import Warehouse
from eval_pipelines.warehouse.tables import ROLLOUTS, TASKS, VERIFICATIONS

Outcome = Literal["pass", "fail", "unscored", "error"]
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Attempt:
    """One rollout. pass: both verifiers pass; fail: the second fails; unscored: completed but not verified;
    error: the rollout failed (scores 0 without verifiers)."""

    task_id: str
    outcome: Outcome
    model_name: str = "model-a"
    scenario_id: str = "scn:1.0.0"
    sweep_id: str = "sweep-1"
    is_simulated: bool = False
    total_tokens: int | None = 1000
    cost_usd: float | None = 0.01
    duration_seconds: float | None = 10.0
    created_at: datetime = T0
    #: The rollout's epoch (rollout_index); default: its position among its partition's attempts.
    epoch: int | None = None


def attempts_with(
    counts: Mapping[str, tuple[int, int]],
    *,
    model_name: str = "model-a",
    scenario_id: str = "scn:1.0.0",
    sweep_id: str = "sweep-1",
    is_simulated: bool = False,
    **extra: Any,
) -> list[Attempt]:
    """`counts` maps task_id -> (n, c): n scored rollouts of which c pass (passes first)."""
    attempts = []
    for task_id, (n, c) in counts.items():
        if not 0 <= c <= n:
            raise ValueError(f"{task_id}: need 0 <= c <= n, got n={n}, c={c}")
        for i in range(n):
            attempts.append(
                Attempt(
                    task_id,
                    "pass" if i < c else "fail",
                    model_name=model_name,
                    scenario_id=scenario_id,
                    sweep_id=sweep_id,
                    is_simulated=is_simulated,
                    **extra,
                )
            )
    return attempts


def scenario_key(scenario_id: str) -> str:
    return scenario_id.replace(":", "_")


def write_warehouse(root: Path, attempts: Iterable[Attempt]) -> None:
    warehouse = Warehouse(root)
    partitions: dict[tuple[str, str, str], list[Attempt]] = defaultdict(list)
    tasks: dict[str, set[str]] = defaultdict(set)
    for attempt in attempts:
        partitions[(attempt.model_name, attempt.scenario_id, attempt.sweep_id)].append(attempt)
        tasks[attempt.scenario_id].add(attempt.task_id)
    for (model, scenario, sweep), mine in sorted(partitions.items()):
        rollouts: list[dict[str, Any]] = []
        verifications: list[dict[str, Any]] = []
        for i, a in enumerate(mine):
            rollout_id = f"{sweep}-{model}-{scenario_key(scenario)}-{i}"
            status = "failed" if a.outcome == "error" else "completed"
            rollouts.append(
                {
                    "sweep_id": sweep,
                    "run_id": f"run-{sweep}-{model}",
                    "run_name": f"{sweep}-{scenario}-{model}",
                    "rollout_id": rollout_id,
                    "rollout_index": i if a.epoch is None else a.epoch,
                    "scenario_id": scenario,
                    "task_id": a.task_id,
                    "model_name": model,
                    "model_identifier": model,
                    "provider": "custom",
                    "base_url": "sim://local" if a.is_simulated else "http://127.0.0.1:9/v1",
                    "is_simulated": a.is_simulated,
                    "temperature": 0.0,
                    "max_steps": 10,
                    "status": status,
                    "termination_reason": "final_response" if status == "completed" else "agent_error",
                    "success": a.outcome == "pass",
                    "reward": 1.0 if a.outcome == "pass" else 0.0,
                    "steps_taken": 3,
                    "prompt_tokens": None,
                    "completion_tokens": None,
                    "total_tokens": a.total_tokens,
                    "cost_usd": a.cost_usd,
                    "duration_seconds": a.duration_seconds,
                    "created_at": a.created_at,
                    "started_at": a.created_at,
                    "completed_at": a.created_at + timedelta(seconds=30),
                    "error": "Agent execution failed: boom" if status == "failed" else None,
                    "artifacts_path": None,
                }
            )
            if a.outcome in ("pass", "fail"):
                for verifier, ok in (("state_ok", True), ("reply_ok", a.outcome == "pass")):
                    verifications.append(
                        {
                            "sweep_id": sweep,
                            "run_id": f"run-{sweep}-{model}",
                            "rollout_id": rollout_id,
                            "scenario_id": scenario,
                            "task_id": a.task_id,
                            "model_name": model,
                            "verifier": verifier,
                            "verifier_version": "h1",
                            "kind": "programmatic",
                            "success": ok,
                            "reward": 1.0 if ok else 0.0,
                            "message": "",
                            "output_json": '""',
                            "verified_at": a.created_at + timedelta(minutes=1),
                        }
                    )
        key = scenario_key(scenario)
        warehouse.write(
            "rollouts",
            rows_table(ROLLOUTS, rollouts),
            model_key=model,
            scenario_key=key,
            file_stem=sweep,
        )
        warehouse.write(
            "verifications",
            rows_table(VERIFICATIONS, verifications),
            model_key=model,
            scenario_key=key,
            file_stem=sweep,
        )
    for scenario, task_ids in tasks.items():
        rows = [
            {
                "scenario_id": scenario,
                "task_id": task_id,
                "name": task_id,
                "category": "test",
                "difficulty": "easy",
                "version": "1",
                "num_reference_actions": 1,
                "verifiers": ["state_ok", "reply_ok"],
                "description": "synthetic task",
            }
            for task_id in sorted(task_ids)
        ]
        warehouse.write_tasks(rows_table(TASKS, rows), scenario_key(scenario))


def build(tmp_path: Path, attempts: Iterable[Attempt], name: str = "eval") -> Path:
    """Write the warehouse under tmp_path/<name>-warehouse and return the built catalog's path."""
    root = tmp_path / f"{name}-warehouse"
    write_warehouse(root, attempts)
    return build_catalog(root, tmp_path / f"{name}.duckdb").path
