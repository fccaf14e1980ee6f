"""Small runs of the built-in `email_ops` scenario through the real pipeline pieces, and what they left behind.

A run goes through the embedded default (the local evaluation service through its client: run store, executor, engine,
the local tool servers and simulated models over loopback HTTP) and `pipeline.steps.run_and_collect`, which
writes the warehouse. The helpers here only build requests and read results back.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.engine.rollout import RolloutEngine, RolloutOutcome, RolloutSpec
from eval_pipelines.inputs.paths import builtin_scenarios_dir
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles
from eval_pipelines.pipeline.steps import CollectSummary, run_and_collect, verify_partition
from eval_pipelines.schemas.model_config import ModelConfig
from eval_pipelines.schemas.runs import (
    DEFAULT_ERROR_RETRIES,
    ErrorClass,
    Rollout,
    RolloutStatus,
    RunLaunchRequest,
    TerminationReason,
)
from eval_pipelines.schemas.scenarios import Task
from eval_pipelines.toolservers.host import ToolServerHost
from eval_pipelines.verifiers.loader import load_verifier_package
from eval_pipelines.warehouse.catalog import build_catalog, connect_read_only
from eval_pipelines.warehouse.rows import RolloutContext
from eval_pipelines.warehouse.store import Warehouse

BUILTIN_SCENARIOS = builtin_scenarios_dir()
SCENARIO_ID = "email_ops:1.0.0"
#: Three one- or two-step tasks. The faults target the middle one; the other two must come through untouched.
TASK_IDS = ("email_ops_001", "email_ops_002", "email_ops_003")
TARGET_TASK = "email_ops_002"
MODEL_KEY = "faulty-model"


def make_dagster_home(home: Path) -> Path:
    """A DAGSTER_HOME whose SQLite storage lives inside it (nothing under the repository's data/dagster)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(
        f"storage:\n  sqlite:\n    base_dir: {home / 'storage'}\ntelemetry:\n  enabled: false\n", encoding="utf-8"
    )
    return home


def target_task(catalog: ScenarioCatalog) -> Task:
    return catalog.get(SCENARIO_ID).task(TARGET_TASK)


def step_marker(task: Task, call_index: int = 0) -> str:
    """Text that only one of the task's reference tool calls carries in its `/step` body (for 002: `toner` in
    its first call, the search; `e-014` in its second, the delete)."""
    parameters = task.reference_actions[call_index].parameters
    return next(str(v) for v in parameters.values() if isinstance(v, str) and v)


def model_config(base_url: str, **extra: Any) -> dict[str, Any]:
    """A ModelConfig body: sim-oracle follows each task's reference actions, so a healthy rollout passes."""
    return {"model": "sim-oracle", "base_url": base_url, "api_key": "x", **extra}


def engine_spec(
    catalog: ScenarioCatalog, tool_host: ToolServerHost, config: dict[str, Any], *, timeout_seconds: float
) -> RolloutSpec:
    """One rollout of the target task, for tests that drive the engine directly (no service, no retries)."""
    scenario = catalog.get(SCENARIO_ID)
    task = scenario.task(TARGET_TASK)
    return RolloutSpec(
        rollout_id=f"ro_{uuid.uuid4().hex[:12]}",
        run_id="run_reliability",
        scenario_id=scenario.scenario_id,
        task=task,
        model_config=ModelConfig.model_validate(config),
        tool_server_urls={"email": tool_host.base_url("email")},
        seed={"email": scenario.seed_payload(task, "email")},
        verifiers=load_verifier_package(scenario.verifiers_dir),
        timeout_seconds=timeout_seconds,
    )


async def execute(engine: RolloutEngine, spec: RolloutSpec) -> RolloutOutcome:
    """`engine.execute(spec)`, then close the engine's model clients and tool-server admin."""
    try:
        return await engine.execute(spec)
    finally:
        await engine.clients.aclose()
        await engine.admin.aclose()


#: Error retries of the suite's runs (the sweep default), with a short backoff so the tests stay fast.
ERROR_RETRIES = DEFAULT_ERROR_RETRIES
#: Attempts an errored rollout makes in these runs: the first, then every retry.
ERROR_ATTEMPTS = 1 + ERROR_RETRIES


def launch_request(
    config: dict[str, Any],
    *,
    max_parallel: int = 3,
    task_ids: tuple[str, ...] = TASK_IDS,
    error_retries: int = ERROR_RETRIES,
) -> RunLaunchRequest:
    return RunLaunchRequest.model_validate(
        {
            "scenario_id": SCENARIO_ID,
            "task_ids": list(task_ids),
            "model_config": config,
            "rollout_count": 1,
            "max_parallel": max_parallel,
            "run_name": f"reliability-{uuid.uuid4().hex[:12]}",
            "error_retries": error_retries,
            "error_retry_backoff_seconds": 0.01,
        }
    )


def context_for(request: RunLaunchRequest, scenario: ScenarioFiles) -> RolloutContext:
    return RolloutContext(
        sweep_id="reliability",
        run_name=request.run_name or "",
        model_key=MODEL_KEY,
        scenario_key=scenario.key,
        model_name=MODEL_KEY,
        is_simulated=False,
        base_url=request.model_config_.base_url,
    )


@dataclass
class CollectedRun:
    """What one partition's run left in the service store and in the warehouse."""

    summary: CollectSummary
    rollouts: dict[str, Rollout]
    warehouse: Warehouse
    scenario_key: str
    #: the scenario the run used (a test's broken copy, or the built-in one)
    scenario: ScenarioFiles | None = None

    def table(self, name: str) -> pa.Table:
        folder = self.warehouse.table_dir(name) / f"model={MODEL_KEY}" / f"scenario={self.scenario_key}"
        files = sorted(folder.glob("*.parquet"))
        assert files, f"no {name} rows were written under {folder}"
        return pa.concat_tables([pq.read_table(f) for f in files])

    def scores(self, db: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        """The catalog's verdicts after verification: `rollout_scores` by task, and the partition's `pass_rates`
        row."""
        scenario = self.scenario or ScenarioCatalog(BUILTIN_SCENARIOS).get(SCENARIO_ID)
        verify_partition(self.warehouse, scenario, MODEL_KEY, self.scenario_key)
        build_catalog(self.warehouse.root, db)
        con = connect_read_only(db)
        try:
            cursor = con.execute("select * from rollout_scores")
            names = [d[0] for d in cursor.description]
            by_task = {row["task_id"]: row for row in (dict(zip(names, r, strict=True)) for r in cursor.fetchall())}
            cursor = con.execute("select * from pass_rates")
            names = [d[0] for d in cursor.description]
            rates = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
        finally:
            con.close()
        assert len(rates) == 1, rates
        return by_task, rates[0]

    def rows_by_task(self, name: str) -> dict[str, list[dict[str, Any]]]:
        grouped: dict[str, list[dict[str, Any]]] = {}
        for row in self.table(name).to_pylist():
            grouped.setdefault(row["task_id"], []).append(row)
        return grouped


def collect(
    backend: EvaluationBackend,
    request: RunLaunchRequest,
    scenario: ScenarioFiles,
    data_dir: Path,
    *,
    timeout_seconds: float = 20.0,
) -> CollectedRun:
    """`run_and_collect` for one partition: launch, wait, write the warehouse; then read everything back.
    `timeout_seconds` is each rollout's limit, unless the request sets its own."""
    if request.rollout_timeout_seconds is None:
        request = request.model_copy(update={"rollout_timeout_seconds": timeout_seconds})
    warehouse = Warehouse(data_dir / "warehouse")
    summary = run_and_collect(
        backend,
        request,
        context_for(request, scenario),
        scenario,
        warehouse,
        data_dir / "artifacts",
        timeout_seconds=timeout_seconds,
    )
    rollouts = {r.task_id: r for r in backend.list_rollouts(summary.run_id)}
    return CollectedRun(summary, rollouts, warehouse, scenario.key, scenario)


def assert_target_errored(run: CollectedRun, error_class: ErrorClass, attempts: int, db: Path) -> None:
    """The target rollout ended in an error of `error_class` after `attempts` attempts, every attempt is in the
    warehouse, and the error is outside the pass rate: n counts the two healthy tasks, n_errors the target."""
    target = run.rollouts[TARGET_TASK]
    assert target.result is not None
    assert target.result.error_class == error_class, target.result.message
    assert target.result.attempts == attempts
    assert [e.error_class for e in target.result.attempt_errors] == [error_class] * (attempts - 1)
    row = run.rows_by_task("rollouts")[TARGET_TASK][0]
    assert (row["error_class"], row["attempts"]) == (error_class.value, attempts)
    tried = sorted(
        (a["attempt"], a["is_final"], a["error_class"]) for a in run.rows_by_task("rollout_attempts")[TARGET_TASK]
    )
    assert tried == [(n, n == attempts, error_class.value) for n in range(1, attempts + 1)]
    by_task, rates = run.scores(db)
    assert (by_task[TARGET_TASK]["outcome"], by_task[TARGET_TASK]["error_class"]) == ("error", error_class.value)
    assert by_task[TARGET_TASK]["reward"] is None
    assert (rates["n"], rates["passes"], rates["n_errors"]) == (len(TASK_IDS) - 1, len(TASK_IDS) - 1, 1)
    assert rates["pass_rate"] == 1.0


def assert_only_target_failed(
    run: CollectedRun, *, status: RolloutStatus, reason: TerminationReason, message_contains: str
) -> None:
    """The target task's rollout ended with `status`/`reason` and says why; the other tasks completed and
    passed; the store and the warehouse agree row for row, and every rollout kept its trace."""
    assert set(run.rollouts) == set(TASK_IDS)
    for task_id, rollout in run.rollouts.items():
        assert rollout.status.is_terminal, f"{task_id} was left {rollout.status.value}"
        assert rollout.termination_reason, f"{task_id} ended without a termination reason"
        assert rollout.result is not None
    target = run.rollouts[TARGET_TASK]
    assert target.result is not None
    assert (target.status, target.termination_reason) == (status, reason.value), target.result.message
    assert message_contains in target.result.message
    assert not target.result.success
    for task_id in set(TASK_IDS) - {TARGET_TASK}:
        other = run.rollouts[task_id]
        assert other.result is not None
        assert other.status == RolloutStatus.COMPLETED, (task_id, other.result.message)
        assert other.result.success, (task_id, other.result.message)

    rows = {task_id: rows[0] for task_id, rows in run.rows_by_task("rollouts").items()}
    assert set(rows) == set(TASK_IDS) and run.table("rollouts").num_rows == len(TASK_IDS)
    for task_id, rollout in run.rollouts.items():
        row = rows[task_id]
        assert (row["rollout_id"], row["status"], row["termination_reason"]) == (
            rollout.rollout_id,
            rollout.status.value,
            rollout.termination_reason,
        )
        assert row["artifacts_path"] and Path(row["artifacts_path"]).is_file(), f"{task_id} lost its trace"
    assert message_contains in (rows[TARGET_TASK]["error"] or "")
    assert all(rows[t]["success"] for t in set(TASK_IDS) - {TARGET_TASK})
    tool_calls = run.rows_by_task("tool_calls")
    assert all(tool_calls.get(t) for t in set(TASK_IDS) - {TARGET_TASK}), "completed work is missing its tool calls"
    expected = {RolloutStatus.COMPLETED.value: len(TASK_IDS) - 1}
    expected[status.value] = expected.get(status.value, 0) + 1
    assert run.summary.by_status == expected
