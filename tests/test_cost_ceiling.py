"""A cost ceiling stops starting rollouts once reached, says so, and leaves the refused rollouts unscored."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog, ScenarioFiles
from eval_pipelines.llm.pricing import estimate_cost_usd
from eval_pipelines.pipeline.steps import run_and_collect, sweep_spend_usd, verify_partition
from eval_pipelines.schemas.runs import Rollout, RolloutStatus, RunLaunchRequest, TerminationReason
from eval_pipelines.warehouse.catalog import build_catalog
from eval_pipelines.warehouse.rows import RolloutContext
from eval_pipelines.warehouse.store import Warehouse
from tests.support.custom_agents import SilentSpender
from tests.support.scripted_llm import Script, create_scripted_app, text_reply

PRICED_MODEL = "gpt-4o"


@dataclass
class BudgetedRun:
    backend: EvaluationBackend
    rollouts: list[Rollout]
    warehouse: Warehouse
    scenario: ScenarioFiles
    data: Path


def _budgeted_run(local_backend: Callable[..., EvaluationBackend], serve: Any, name: str, **launch: Any) -> BudgetedRun:
    """Three email_ops tasks on a priced scripted model with a ceiling the first rollout already passes."""
    server = serve(create_scripted_app(Script([text_reply("done")])))
    catalog = ScenarioCatalog()
    scenario = catalog.get("email_ops:1.0.0")
    data = Path(tempfile.mkdtemp())
    backend = local_backend(data, catalog)
    request = RunLaunchRequest.model_validate(
        {
            "scenario_id": scenario.scenario_id,
            "task_ids": ["email_ops_001", "email_ops_002", "email_ops_003"],
            "max_parallel": 1,
            "run_name": name,
            "max_cost_usd": 1e-7,
            "model_config": {"model": PRICED_MODEL, "base_url": f"{server.url}/v1", "api_key": "k"},
            **launch,
        }
    )
    ctx = RolloutContext(f"{name}-sweep", name, "priced", scenario.key, "priced", False, None)
    warehouse = Warehouse(data / "warehouse")
    run_and_collect(backend, request, ctx, scenario, warehouse, data / "traces", timeout_seconds=60)
    run = backend.find_run(name)
    assert run is not None
    return BudgetedRun(backend, backend.list_rollouts(run.run_id), warehouse, scenario, data)


def test_the_ceiling_refuses_further_rollouts_and_they_stay_unscored(
    local_backend: Callable[..., EvaluationBackend], serve: Any
) -> None:
    assert estimate_cost_usd(PRICED_MODEL, 10, 5) > 0  # the scripted replies report 10 + 5 tokens
    budgeted = _budgeted_run(local_backend, serve, "budgeted", rollout_count=2)
    rollouts, warehouse, scenario = budgeted.rollouts, budgeted.warehouse, budgeted.scenario
    started = [r for r in rollouts if r.termination_reason != TerminationReason.COST_CEILING.value]
    refused = [r for r in rollouts if r.termination_reason == TerminationReason.COST_CEILING.value]
    assert len(started) == 1 and started[0].status == RolloutStatus.COMPLETED
    assert len(refused) == 5 and all(r.status == RolloutStatus.FAILED for r in refused)
    assert all(r.result and "Cost ceiling" in r.result.message for r in refused)
    assert sweep_spend_usd(warehouse, "budgeted-sweep") > 1e-7
    assert sweep_spend_usd(warehouse, "budgeted-sweep", other_than=("priced", scenario.key)) == 0.0

    verify_partition(warehouse, scenario, "priced", scenario.key)
    db = build_catalog(warehouse.root, budgeted.data / "eval.duckdb").path
    con = duckdb.connect(str(db), read_only=True)
    try:
        unscored = con.execute("select count(*) from rollout_scores where reward is null").fetchone()
        scored = con.execute("select n from pass_rates").fetchone()
    finally:
        con.close()
    assert unscored == (5,) and scored == (1,)  # refused rollouts are not counted as failures


def test_a_custom_agent_that_counts_no_token_is_metered_and_stopped_by_the_ceiling(
    local_backend: Callable[..., EvaluationBackend], serve: Any
) -> None:
    """Usage is metered in the chat client: a custom agent's calls cost what they cost, and the ceiling sees it."""
    budgeted = _budgeted_run(local_backend, serve, "silent", agent="tests.support.custom_agents:SilentSpender")
    rollouts = budgeted.rollouts
    started = [r for r in rollouts if r.termination_reason != TerminationReason.COST_CEILING.value]
    assert len(started) == 1 and started[0].result is not None
    calls = SilentSpender.CALLS
    assert started[0].result.estimated_cost_usd == pytest.approx(estimate_cost_usd(PRICED_MODEL, 10 * calls, 5 * calls))
    artifacts = budgeted.backend.get_artifacts(started[0].rollout_id)
    assert artifacts is not None and artifacts.metadata["usage"]["llm_calls"] == calls
    assert len(rollouts) - len(started) == 2  # the ceiling refused the rest
