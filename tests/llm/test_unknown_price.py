"""A model without a known price has an unknown cost: None in the metered usage and the rollout result, NULL in
the warehouse and the catalog, "unknown" in the CLI table and the report, never $0.0000 (which reads as free).
A cost ceiling counts only known costs, so an unpriced model is never refused by it, and it is warned about."""

from __future__ import annotations

import contextlib
import io
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from eval_pipelines.cli import print_pass_rates
from eval_pipelines.clients.backend import EvaluationBackend
from eval_pipelines.inputs.scenarios import ScenarioCatalog
from eval_pipelines.llm import pricing
from eval_pipelines.llm.metering import UsageMeter
from eval_pipelines.llm.pricing import estimate_cost_usd
from eval_pipelines.pipeline.steps import run_and_collect, verify_partition
from eval_pipelines.reports.data import UNKNOWN_COST, pass_rate_rows
from eval_pipelines.reports.html import pass_rate_markdown
from eval_pipelines.schemas.runs import RunLaunchRequest, TerminationReason, TokenUsage
from eval_pipelines.warehouse.catalog import build_catalog
from eval_pipelines.warehouse.rows import RolloutContext
from eval_pipelines.warehouse.store import Warehouse
from tests.support.scripted_llm import Script, create_scripted_app, text_reply

UNPRICED_MODEL = "my-local-llama-3-8b"
PRICED_MODEL = "gpt-4o-mini"
ZERO_COST = "0.0000"


def test_an_unpriced_model_costs_none_and_a_simulated_one_costs_zero() -> None:
    assert estimate_cost_usd(UNPRICED_MODEL, 1000, 1000) is None
    assert estimate_cost_usd("sim-oracle", 1000, 1000) == 0.0
    priced = estimate_cost_usd(PRICED_MODEL, 1000, 1000)
    assert priced is not None and priced > 0


def test_one_unpriced_call_makes_the_metered_cost_unknown() -> None:
    meter = UsageMeter()
    meter.record(PRICED_MODEL, 100, 10)
    assert meter.usage.cost_usd is not None and meter.usage.cost_usd > 0
    meter.record(UNPRICED_MODEL, 100, 10)
    meter.record(PRICED_MODEL, 100, 10)
    assert meter.usage.cost_usd is None
    assert (meter.usage.llm_calls, meter.usage.total_tokens) == (3, 330)
    assert TokenUsage(cost_usd=None).add(TokenUsage(cost_usd=1.0)).cost_usd is None


def test_an_unpriced_model_is_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    model = f"{UNPRICED_MODEL}-warned"
    pricing._unpriced_models_warned.discard(model)
    with caplog.at_level(logging.WARNING, logger=pricing.__name__):
        for _ in range(3):
            estimate_cost_usd(model, 10, 10)
    warnings = [r for r in caplog.records if model in r.getMessage()]
    assert len(warnings) == 1 and "max_cost_usd" in warnings[0].getMessage()


def test_an_unpriced_model_is_null_in_the_warehouse_and_unknown_in_the_cli_table(
    local_backend: Callable[..., EvaluationBackend], serve: Any
) -> None:
    """A small run on a scripted endpoint answering as an unpriced model, with a cost ceiling that any known cost
    would pass at once: nothing is refused (the ceiling counts known costs only), every cost is NULL."""
    server = serve(create_scripted_app(Script([text_reply("done")])))
    catalog = ScenarioCatalog()
    scenario = catalog.get("email_ops:1.0.0")
    data = Path(tempfile.mkdtemp())
    backend = local_backend(data, catalog)
    request = RunLaunchRequest.model_validate(
        {
            "scenario_id": scenario.scenario_id,
            "task_ids": ["email_ops_001", "email_ops_002"],
            "max_parallel": 1,
            "run_name": "unpriced",
            "max_cost_usd": 1e-7,
            "model_config": {"model": UNPRICED_MODEL, "base_url": f"{server.url}/v1", "api_key": "k"},
        }
    )
    sweep_id = "unpriced-sweep"
    ctx = RolloutContext(sweep_id, "unpriced", "local", scenario.key, "local", False, None)
    warehouse = Warehouse(data / "warehouse")
    run_and_collect(backend, request, ctx, scenario, warehouse, data / "traces", timeout_seconds=60)
    run = backend.find_run("unpriced")
    assert run is not None
    rollouts = backend.list_rollouts(run.run_id)
    assert len(rollouts) == 2
    assert all(r.termination_reason != TerminationReason.COST_CEILING.value for r in rollouts)
    assert all(r.result is not None and r.result.estimated_cost_usd is None for r in rollouts)

    verify_partition(warehouse, scenario, "local", scenario.key)
    db = build_catalog(warehouse.root, data / "eval.duckdb").path
    con = duckdb.connect(str(db), read_only=True)
    try:
        costs = con.execute("select cost_usd from rollouts").fetchall()
        totals = con.execute(
            "select cost_per_rollout_usd, total_cost_usd from scenario_model_metrics where sweep_id = ?", [sweep_id]
        ).fetchall()
    finally:
        con.close()
    assert costs == [(None,), (None,)]
    assert totals == [(None, None)]

    _, rows = pass_rate_rows(db, sweep_id)
    console = io.StringIO()
    with contextlib.redirect_stdout(console):
        print_pass_rates(rows, sweep_id)
    table = console.getvalue()
    assert UNKNOWN_COST in table and ZERO_COST not in table
    markdown = pass_rate_markdown(rows)
    assert UNKNOWN_COST in markdown and ZERO_COST not in markdown
