"""The Dagster code location: `dagster dev -w workspace.yaml` loads `defs` from here."""

from __future__ import annotations

import dagster as dg

from eval_pipelines.defs.evals.assets import ASSETS
from eval_pipelines.defs.evals.automation import build_schedules, sweep_job, sync_sweep_partitions
from eval_pipelines.defs.evals.resources import EvalPaths, EvalService


def build_definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=ASSETS,
        jobs=[sweep_job],
        schedules=build_schedules(),
        sensors=[sync_sweep_partitions],
        resources={"paths": EvalPaths(), "eval_service": EvalService()},
    )


defs = build_definitions()
